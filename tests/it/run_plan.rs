//! `benchplan run` end to end against in-process simulators: the results tree,
//! summary.csv, report.md, SLO exit codes, failing services and templates.

use std::path::Path;

use crate::support::{batch_dir, benchplan, stderr, stdout};

fn write_plan(dir: &Path, text: &str) -> String {
    let p = dir.join("plan.toml");
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// A plan run as a user runs it: written into a fresh folder and run there with
/// `run --quiet --results-dir DIR/r`.
struct RunDir {
    /// The fresh folder (removed when the test is done with it).
    dir: std::path::PathBuf,
    out: std::process::Output,
}

impl RunDir {
    /// The run folder the run wrote.
    fn run(&self) -> std::path::PathBuf {
        batch_dir(&self.dir.join("r"))
    }

    /// Its report.md.
    fn report(&self) -> String {
        std::fs::read_to_string(self.run().join("report.md")).unwrap()
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

/// Runs `text` as a plan in a fresh folder (`tag` names it) and checks the exit code.
fn run_plan_exits(tag: &str, text: &str, code: i32) -> RunDir {
    let dir = crate::support::tempdir(tag);
    let plan = write_plan(&dir, text);
    let out = run_quiet(&plan, &dir.join("r"));
    assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
    RunDir { dir, out }
}

/// `benchplan run PLAN --results-dir DIR --quiet`.
fn run_quiet(plan: &str, results: &Path) -> std::process::Output {
    benchplan(&[
        "run",
        plan,
        "--results-dir",
        results.to_str().unwrap(),
        "--quiet",
    ])
}

const TWO_SIMS: &str = r#"
name = "two-sims"
[services.a]
sim = { preset = "fast", itl = "1ms" }
[services.b]
sim = { preset = "fast", itl = "2ms" }
[defaults]
dataset = { name = "random", input_len = 16, output_len = 8 }
num_prompts = 100
[matrix]
max_concurrency = [1, 4]
[slo]
p99_ttft = "<= 2s"
success_rate = ">= 99%"
"#;

#[test]
fn a_plan_runs_into_the_results_tree() {
    let dir = crate::support::tempdir("tree");
    let plan = write_plan(&dir, TWO_SIMS);
    let results = dir.join("bench_results");
    let out = run_quiet(&plan, &results);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let b = batch_dir(&results);
    assert!(
        b.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("batch_")
    );
    for f in [
        "plan.toml",
        "plan.resolved.json",
        "manifest.json",
        "summary.csv",
        "report.md",
    ] {
        assert!(b.join(f).is_file(), "missing {f}");
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(b.join("manifest.json")).unwrap()).unwrap();
    let cases = manifest["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    for c in cases {
        assert_eq!(c["status"], "ok");
        assert_eq!(c["slo_pass"], true);
        let result: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(b.join(c["file"].as_str().unwrap())).unwrap(),
        )
        .unwrap();
        assert_eq!(result["completed"], 100);
        assert!(result["p99_ttft_ms"].is_number() && result["p99_e2el_ms"].is_number());
    }
    assert!(manifest["finished"].is_string() && manifest["plan_hash"].is_string());
    // summary.csv: one row per case, and no empty latency column.
    let mut rdr = csv::Reader::from_path(b.join("summary.csv")).unwrap();
    let headers = rdr.headers().unwrap().clone();
    let rows: Vec<csv::StringRecord> = rdr.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 4);
    let mut names: Vec<&str> = headers.iter().collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(names.len(), before, "duplicate columns in {headers:?}");
    for col in [
        "mean_ttft_ms",
        "p99_ttft_ms",
        "mean_tpot_ms",
        "p99_tpot_ms",
        "mean_itl_ms",
        "p99_itl_ms",
        "mean_e2el_ms",
        "p99_e2el_ms",
        "request_throughput",
        "output_throughput",
    ] {
        let i = headers
            .iter()
            .position(|h| h == col)
            .unwrap_or_else(|| panic!("no column {col}"));
        assert!(
            rows.iter().all(|r| !r[i].is_empty()),
            "column {col} has empty cells"
        );
    }
    let report = std::fs::read_to_string(b.join("report.md")).unwrap();
    assert!(report.contains("| Case | Rate (req/s) | Prompts | Req/s | Out tok/s | TTFT mean (ms) | TTFT P99 (ms) | TPOT mean (ms) | TPOT P99 (ms) | E2E P99 (ms) | Success (%) |"));
    assert!(
        report.contains("## SLO compliance")
            && report.contains("## Recommendation")
            && report.contains("## Reproduce")
    );
    // Each of the four cases: its two SLOs, the success-rate floor and (ignore_eos is
    // on for the random dataset) the output-ratio floor.
    // (A busy test machine may leave a case trending: its TTFT verdict then says "not
    // steady", which is no failure either.)
    let verdicts: Vec<&str> = report
        .lines()
        .filter(|l| l.ends_with("| pass |") || l.contains("| not steady: "))
        .collect();
    assert_eq!(verdicts.len(), 16, "{report}");
    assert!(!report.contains("| FAIL |"), "{report}");
    assert_eq!(
        stdout(&out).trim(),
        report.trim(),
        "the report is printed too"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_violated_slo_exits_3() {
    let r = run_plan_exits(
        "slo",
        &TWO_SIMS.replace("p99_ttft = \"<= 2s\"", "mean_tpot = \"<= 1.5ms\""),
        3,
    );
    let report = r.report();
    assert!(report.contains("| FAIL |"), "{report}");
}

#[test]
fn a_failing_service_is_a_recorded_failed_case_and_the_others_run() {
    let text = TWO_SIMS.replace(
        "sim = { preset = \"fast\", itl = \"2ms\" }",
        "sim = { preset = \"fast\", failure_rate = 1.0 }",
    );
    let r = run_plan_exits("fail", &text, 1);
    let b = r.run();
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(b.join("manifest.json")).unwrap()).unwrap();
    let statuses: Vec<&str> = manifest["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, vec!["ok", "ok", "failed", "failed"]);
    assert!(
        manifest["cases"][2]["error"]
            .as_str()
            .unwrap()
            .contains("http_500")
    );
    let report = r.report();
    assert!(
        report.contains("## Failed cases") && report.contains("smoke request failed"),
        "{report}"
    );
}

#[test]
fn an_unreachable_service_fails_its_own_cases_and_the_others_run() {
    let dir = crate::support::tempdir("down");
    let plan = write_plan(
        &dir,
        &format!(
            "[services.down]\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\ntokenizer = \"{}\"\n\
         [services.up]\nsim = {{ preset = \"fast\" }}\n\
         [defaults]\nnum_prompts = 5\ndataset = {{ name = \"random\", input_len = 8, output_len = 2 }}\n\
         [execution]\ncontinue_on_error = true\n",
            crate::support::repo()
                .join("tests/fixtures/tokenizer")
                .display()
        ),
    );
    let junit = dir.join("junit.xml");
    let out = benchplan(&[
        "run",
        &plan,
        "--results-dir",
        dir.join("r").to_str().unwrap(),
        "--quiet",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("service `down` is unavailable")
            && stderr(&out).contains("cannot reach http://127.0.0.1:9/v1/models"),
        "{}",
        stderr(&out)
    );
    let b = batch_dir(&dir.join("r"));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(b.join("manifest.json")).unwrap()).unwrap();
    let by_service: Vec<(&str, &str)> = manifest["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["service"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(by_service, vec![("down", "failed"), ("up", "ok")]);
    assert!(manifest["services"]["down"]["error"].as_str().is_some());
    let report = std::fs::read_to_string(b.join("report.md")).unwrap();
    assert!(
        // The error is escaped for markdown (its backticks are the server's words).
        report.contains("## Failed cases") && report.contains("service \\`down\\` is unavailable"),
        "{report}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("failures=\"1\""), "{xml}");
    assert!(xml.contains("service `down` is unavailable"), "{xml}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn user_templates_render_and_template_errors_are_located() {
    let dir = crate::support::tempdir("tpl");
    let plan = write_plan(
        &dir,
        &TWO_SIMS.replace("max_concurrency = [1, 4]", "max_concurrency = [2]"),
    );
    std::fs::write(dir.join("mine.md.j2"), "Plan {{ r.plan }}: {% for c in r.cases %}{{ c.id }} at {{ c.req_s | num }} req/s; {% endfor %}\n").unwrap();
    let out = benchplan(&[
        "run",
        &plan,
        "--results-dir",
        dir.join("r").to_str().unwrap(),
        "--template",
        dir.join("mine.md.j2").to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("Plan two-sims: a-c2-"),
        "{}",
        stdout(&out)
    );
    std::fs::write(
        dir.join("bad.md.j2"),
        "line one\n{{ r.plan | nosuchfilter }}\n",
    )
    .unwrap();
    let out = benchplan(&[
        "run",
        &plan,
        "--results-dir",
        dir.join("r").to_str().unwrap(),
        "--template",
        dir.join("bad.md.j2").to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("bad.md.j2, line 2") && err.contains("nosuchfilter"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn dry_run_prints_lengths_and_sends_nothing() {
    let out = benchplan(&["run", "plans/length-sweep.toml", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 7, "{text}");
    assert!(text.contains("sim-in128-out512-c4-"), "{text}");
}

/// Medians only: a p99 over 210 gaps is decided by one stall of a shared machine (which
/// hits all four streams of a case at once), and these tests are about the comparison.
fn sim_plan(itl: &str, extra: &str) -> String {
    format!(
        "name = \"cmp\"\n[services.s]\nsim = {{ preset = \"ground-truth\", itl = \"{itl}\", prefill_overhead = \"20ms\" }}\n\
         [defaults]\ndataset = {{ name = \"random\", input_len = 8, output_len = 8 }}\nnum_prompts = 30\nmetric_percentiles = [50]\n\
         [matrix]\nmax_concurrency = [2, 4]\n{extra}"
    )
}

#[test]
fn a_baseline_that_matches_no_case_fails_and_compare_reads_result_files() {
    let dir = crate::support::tempdir("unmatched");
    let results = dir.join("r");
    let other = write_plan(
        &dir,
        "name = \"other\"\n[services.x]\nsim = { preset = \"fast\" }\n[defaults]\nnum_prompts = 3\ndataset = { name = \"random\", input_len = 8, output_len = 2 }\n",
    );
    let out = run_quiet(&other, &results);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let base = batch_dir(&results);
    let extra = format!("[report]\nbaseline = \"{}\"\n", base.display());
    let plan = write_plan(&dir, &sim_plan("10ms", &extra));
    let out = run_quiet(&plan, &dir.join("r2"));
    // Nothing to compare with: every case is a failed comparison (exit 4), shown.
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let cand = batch_dir(&dir.join("r2"));
    let report = std::fs::read_to_string(cand.join("report.md")).unwrap();
    assert!(
        report.contains("Cases with no counterpart in the baseline")
            && report.contains("different plan")
            && report.contains("2 regression(s)"),
        "{report}"
    );
    // Allowed, they pass.
    let plan = write_plan(
        &dir,
        &sim_plan("10ms", &format!("{extra}allow_unmatched = true\n")),
    );
    let out = run_quiet(&plan, &dir.join("r3"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // `compare` takes two result files as well as two folders.
    let file = |d: &Path| {
        std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("s-"))
            .unwrap()
    };
    let (a, b) = (file(&cand), file(&batch_dir(&dir.join("r3"))));
    let out = benchplan(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--threshold",
        "50%",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("| p50_tpot_ms |"), "{}", stdout(&out));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn slo_failures_outrank_regressions_and_both_are_counted_and_in_junit() {
    let dir = crate::support::tempdir("both");
    let results = dir.join("r");
    let base_plan = write_plan(&dir, &sim_plan("10ms", ""));
    let out = run_quiet(&base_plan, &results);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let base = batch_dir(&results);
    // Slower, against the baseline, with an SLO the slower service misses.
    let extra = format!(
        "[slo]\nmedian_tpot = \"<= 5ms\"\n[report]\nbaseline = \"{}\"\nregression_threshold = \"5%\"\n",
        base.display()
    );
    let slow_plan = write_plan(&dir, &sim_plan("14ms", &extra));
    let junit = dir.join("junit.xml");
    let out = benchplan(&[
        "run",
        &slow_plan,
        "--results-dir",
        results.to_str().unwrap(),
        "--quiet",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    // Exit 3: an SLO failure outranks a regression; the last line counts both.
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("2 SLO failure(s)")
            && !last.contains(" 0 regression(s)")
            && last.contains("exit 3"),
        "{last}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("name=\"baseline p50_tpot_ms\""), "{xml}");
    assert!(xml.contains("regression:"), "{xml}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn compare_flags_a_slower_service_and_the_plan_baseline_exits_4() {
    let dir = crate::support::tempdir("cmp");
    let results = dir.join("r");
    let base_plan = write_plan(&dir, &sim_plan("10ms", ""));
    let out = benchplan(&[
        "run",
        &base_plan,
        "--results-dir",
        results.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let base = batch_dir(&results);
    std::thread::sleep(std::time::Duration::from_millis(1100)); // a new batch folder name
    // 20% slower decoding, compared against the baseline named in the plan.
    let latest = results.join("batch/latest");
    assert!(latest.exists(), "the newest run is linked as batch/latest");
    let extra = format!(
        "[report]\nbaseline = \"{}\"\nregression_threshold = \"5%\"\n",
        base.display()
    );
    let slow_plan = write_plan(&dir, &sim_plan("12ms", &extra));
    let out = benchplan(&[
        "run",
        &slow_plan,
        "--results-dir",
        results.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let cand = batch_dir(&results);
    assert_ne!(base, cand);
    let report = std::fs::read_to_string(cand.join("report.md")).unwrap();
    assert!(
        report.contains("## Comparison with the baseline") && report.contains("REGRESSION"),
        "{report}"
    );

    let out = benchplan(&["compare", base.to_str().unwrap(), cand.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let table = stdout(&out);
    assert!(
        table.contains("| p50_tpot_ms |") && table.contains("REGRESSION"),
        "{table}"
    );
    let out = benchplan(&[
        "compare",
        base.to_str().unwrap(),
        cand.to_str().unwrap(),
        "--threshold",
        "50%",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_killed_run_resumes_to_the_same_set_of_results() {
    let dir = crate::support::tempdir("resume");
    let plan = write_plan(
        &dir,
        &sim_plan("10ms", "").replace(
            "max_concurrency = [2, 4]",
            "max_concurrency = [1, 2, 3, 4, 5, 6]",
        ),
    );
    let results = dir.join("r");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args([
            "run",
            &plan,
            "--results-dir",
            results.to_str().unwrap(),
            "--quiet",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Each case takes a few hundred ms: kill once at least one has finished.
    let started = std::time::Instant::now();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let finished = std::fs::read_dir(results.join("batch"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .map(|e| {
                std::fs::read_dir(e.path())
                    .unwrap()
                    .filter(|f| {
                        f.as_ref()
                            .unwrap()
                            .file_name()
                            .to_str()
                            .unwrap()
                            .starts_with("s-c")
                    })
                    .count()
            });
        if finished.unwrap_or(0) >= 1 || started.elapsed().as_secs() > 20 {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let b = batch_dir(&results);
    let before: Vec<String> = std::fs::read_dir(&b)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("s-c"))
        .collect();
    assert!(
        !before.is_empty() && before.len() < 6,
        "killed mid-run: {before:?}"
    );
    // `report` on the killed run: the cases it did not reach are unfinished, not failed,
    // and the report says the run is not complete (exit 1).
    let out = benchplan(&["report", b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("never finished") && stdout(&out).contains("(unfinished)"),
        "{}",
        stdout(&out)
    );
    let out = benchplan(&["run", &plan, "--resume", b.to_str().unwrap(), "--quiet"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("{} of 6 cases already finished", before.len())),
        "{}",
        stderr(&out)
    );
    let mut after: Vec<String> = std::fs::read_dir(&b)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("s-c"))
        .collect();
    after.sort();
    let out = benchplan(&["cases", &plan, "--json"]);
    let mut want: Vec<String> = serde_json::from_str::<Vec<serde_json::Value>>(&stdout(&out))
        .unwrap()
        .iter()
        .map(|c| format!("{}.json", c["id"].as_str().unwrap()))
        .collect();
    want.sort();
    assert_eq!(
        after, want,
        "the same set of case results as an uninterrupted run"
    );
    // A changed plan is refused.
    let changed = write_plan(
        &dir,
        &sim_plan("10ms", "").replace("num_prompts = 30", "num_prompts = 31"),
    );
    let out = benchplan(&["run", &changed, "--resume", b.to_str().unwrap(), "--quiet"]);
    crate::support::exits_saying(&out, 2, "the plan changed since that run");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn junit_repeats_parallel_and_report_rerendering() {
    let dir = crate::support::tempdir("junit");
    let text = format!(
        "{}\n[execution]\nrepeats = 2\nparallel = 2\n",
        TWO_SIMS
            .replace("p99_ttft = \"<= 2s\"", "mean_tpot = \"<= 1.5ms\"")
            .replace("num_prompts = 100", "num_prompts = 20")
    );
    let plan = write_plan(&dir, &text);
    let junit = dir.join("junit.xml");
    let summary = dir.join("step-summary.md");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args([
            "run",
            &plan,
            "--results-dir",
            dir.join("r").to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
            "--quiet",
        ])
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(
        xml.matches("<testcase ").count(),
        16,
        "4 cases x (2 SLOs, the success-rate floor and the output-ratio floor): {xml}"
    );
    assert!(
        xml.contains("failures=\"2\"")
            && xml.contains("observed")
            && xml.contains("vs target &lt;= 1.5ms"),
        "{xml}"
    );
    let b = batch_dir(&dir.join("r"));
    let step = std::fs::read_to_string(&summary).unwrap();
    assert!(
        step.contains("# Benchmark report: two-sims") && step.contains("| FAIL |"),
        "the report is appended to $GITHUB_STEP_SUMMARY"
    );
    let reps = std::fs::read_dir(&b)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_str()
                .unwrap()
                .contains(".rep")
        })
        .count();
    assert_eq!(reps, 8);
    let one = std::fs::read_dir(&b)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("a-c1-")
                && !p.to_str().unwrap().contains(".rep")
        })
        .unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(one).unwrap()).unwrap();
    assert_eq!(v["benchplan"]["repeats"]["count"], 2);
    assert!(v["benchplan"]["repeats"]["spread_pct"]["mean_ttft_ms"].is_number());
    // `report` re-renders the same folder.
    let first = std::fs::read_to_string(b.join("report.md")).unwrap();
    // The spread across runs, named by the metric table.
    assert!(
        first.contains("(2 runs): req/s ±") && first.contains(", TTFT P99 ±"),
        "{first}"
    );
    let out = benchplan(&["report", b.to_str().unwrap(), "--format", "csv"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 5);
    // The verdict is the run's: its exit code too.
    let out = benchplan(&["report", b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let again = stdout(&out);
    for line in first
        .lines()
        .filter(|l| l.starts_with("| a-") || l.starts_with("| b-"))
    {
        assert!(
            again.contains(line),
            "missing {line} in the re-rendered report"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `bench --sim fast` (8 tokens in, 4 out) with `extra`, its result saved as `dir/name`.
fn fast_bench_into(dir: &Path, name: &str, extra: &[&str]) {
    let mut args = vec![
        "bench",
        "--sim",
        "fast",
        "--random-input-len",
        "8",
        "--random-output-len",
        "4",
        "--save-result",
        "--result-dir",
        dir.to_str().unwrap(),
        "--result-filename",
        name,
        "--disable-tqdm",
    ];
    args.extend_from_slice(extra);
    let out = benchplan(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn report_keeps_two_results_of_the_same_parameters_apart() {
    let dir = crate::support::tempdir("twins");
    for name in ["first.json", "second.json"] {
        fast_bench_into(&dir, name, &["--num-prompts", "4"]);
    }
    let out = benchplan(&[
        "report",
        dir.to_str().unwrap(),
        "--out",
        dir.join("report").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let md = stdout(&out);
    assert!(
        md.contains("(first.json, ") && md.contains("(second.json, "),
        "both results appear, told apart by file and date: {md}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn report_reads_a_folder_of_vllm_results() {
    let dir = crate::support::tempdir("vllmdir");
    for c in ["2", "4", "16"] {
        fast_bench_into(
            &dir,
            &format!("c{c}.json"),
            &["--num-prompts", "20", "--max-concurrency", c],
        );
    }
    // A plain vLLM result has no `benchplan` block: its file name names the case.
    let c2 = dir.join("c2.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&c2).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("benchplan");
    std::fs::write(&c2, v.to_string()).unwrap();
    // A folder benchplan did not write is written into only when asked.
    let out = benchplan(&["report", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--out") && !dir.join("report.md").exists(),
        "{}",
        stderr(&out)
    );
    let out = benchplan(&[
        "report",
        dir.to_str().unwrap(),
        "--out",
        dir.join("rep").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(dir.join("rep/report.md").is_file() && !dir.join("report.md").exists());
    assert!(stderr(&out).contains("report: "), "{}", stderr(&out));
    let md = stdout(&out);
    assert!(
        md.contains("| benchplan-sim c=2 | inf | 20 |")
            && md.contains("| benchplan-sim c=4 | inf | 20 |"),
        "{md}"
    );
    // In the sweep's order (c2, c4, c16, not c16, c2, c4); no empty run line, services
    // table or Reproduce block for files that carry none of them.
    let at = |k: &str| md.find(k).unwrap_or_else(|| panic!("{k} in {md}"));
    assert!(
        at("| benchplan-sim c=2 |") < at("| benchplan-sim c=4 |")
            && at("| benchplan-sim c=4 |") < at("| benchplan-sim c=16 |"),
        "{md}"
    );
    assert!(
        !md.contains("Run  to") && !md.contains("## Reproduce"),
        "{md}"
    );
    assert!(
        md.contains("| benchplan-sim | vllm bench serve results |"),
        "{md}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn probe_describes_a_service() {
    let sim = crate::support::SimProcess::start(&["--preset", "fast"]);
    let url = sim.url.clone();
    let out = benchplan(&["probe", &url]);
    drop(sim);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("benchplan-sim (root benchplan-sim, max_model_len"),
        "{text}"
    );
    assert!(
        text.contains("/v1/chat/completions ok: TTFT") && text.contains("usage in stream: yes"),
        "{text}"
    );
    assert!(text.contains("/v1/embeddings ok"), "{text}");
    let out = benchplan(&["probe", "http://127.0.0.1:9"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_server_with_another_model_is_refused_before_any_case() {
    let sim = crate::support::SimProcess::start(&["--preset", "fast"]);
    let r = run_plan_exits(
        "wrongmodel",
        &format!(
            "[services.wrong]\nbase_url = \"{}\"\nmodel = \"llama-70b\"\ntokenizer = \"server\"\n[defaults]\nnum_prompts = 5\n",
            sim.url
        ),
        1,
    );
    let err = stderr(&r.out);
    assert!(
        err.contains("the plan says model `llama-70b`, but")
            && err.contains("serves benchplan-sim"),
        "{err}"
    );
    assert!(!err.contains("[1/1]"), "no case ran: {err}");
}

#[test]
fn matrix_axes_are_columns_and_each_workload_gets_its_own_recommendation() {
    let r = run_plan_exits(
        "groups",
        "[services.a]\nsim = { preset = \"fast\" }\n[services.b]\nsim = { preset = \"fast\" }\n\
         [defaults]\nnum_prompts = 6\ndataset = { name = \"random\", input_len = 16, output_len = 4 }\n\
         [matrix]\n\"dataset.input_len\" = [16, 64]\nmax_concurrency = [1, 4]\n[slo]\np99_ttft = \"<= 5s\"\n",
        0,
    );
    let md = r.report();
    // A pass/fail headline before anything else.
    assert!(
        md.lines().nth(2) == Some("**PASS**: 8 case(s), 0 not measured, 0 SLO failure(s)."),
        "{md}"
    );
    // Each case by a short label from its service, load and matrix values (a first
    // column that never wraps), its id in the last column.
    let row = md
        .lines()
        .find(|l| l.starts_with("| a c=4 in=64 | "))
        .unwrap_or_else(|| panic!("no row labelled `a c=4 in=64`: {md}"));
    assert!(row.contains("| a-in64-c4-") && row.ends_with(" |"), "{row}");
    // Four groups (2 services × 2 input lengths), each recommending one of its own cases.
    let rec = md.split("## Recommendation").nth(1).unwrap();
    for (svc, len) in [("a", 16), ("a", 64), ("b", 16), ("b", 64)] {
        let row = rec
            .lines()
            .find(|l| l.starts_with(&format!("| {svc} | {len} | ")))
            .unwrap_or_else(|| panic!("no row for {svc} in{len}: {rec}"));
        assert!(row.contains(&format!("**{svc}-in{len}-c")), "{row}");
    }
    // `report` over the folder shows the same columns again.
    let again = benchplan(&["report", r.run().to_str().unwrap()]);
    assert!(
        stdout(&again).contains("| a c=4 in=64 | "),
        "{}",
        stdout(&again)
    );
}

#[test]
fn a_service_has_its_own_slos_and_defaults_over_the_plans() {
    // Service b is slow (ITL 2 ms): the plan's TPOT SLO fails it, its own passes it.
    let text = TWO_SIMS.replace("p99_ttft = \"<= 2s\"", "mean_tpot = \"<= 1.5ms\"").replace(
        "[services.b]\nsim = { preset = \"fast\", itl = \"2ms\" }",
        "[services.b]\nsim = { preset = \"fast\", itl = \"2ms\" }\nslo = { mean_tpot = \"<= 10ms\" }\ndefaults = { num_prompts = 20, \"dataset.input_len\" = 32 }",
    );
    let planned = crate::support::plan_toml(&text);
    for c in &planned.cases {
        let (n, input) = match &c.params.dataset {
            benchplan::plan::Dataset::Random(d) => (c.params.num_prompts, d.input_len),
            other => panic!("{other:?}"),
        };
        // The service's defaults replace the plan's for its cases only; the matrix
        // (max_concurrency) still varies them.
        if c.service == "b" {
            assert_eq!((n, input), (20, 32), "{}", c.id);
        } else {
            assert_eq!((n, input), (100, 16), "{}", c.id);
        }
    }
    let tpot = |svc: &str| {
        planned
            .slos_for(svc)
            .iter()
            .find(|(s, _)| s.key == "mean_tpot")
            .map(|(s, _)| s.threshold)
    };
    assert_eq!((tpot("a"), tpot("b")), (Some(1.5), Some(10.0)));
    // The success-rate SLO still applies to both.
    assert!(
        planned
            .slos_for("b")
            .iter()
            .any(|(s, _)| s.key == "success_rate")
    );

    let r = run_plan_exits("service-slo", &text, 0);
    let report = r.report();
    assert!(report.contains("mean_tpot <= 10ms (service b)"), "{report}");
    // Without its own SLO, b fails the plan's.
    run_plan_exits(
        "service-slo",
        &text.replace("slo = { mean_tpot = \"<= 10ms\" }\n", ""),
        3,
    );
    // A service default that is no case parameter is refused where it is written.
    let bad = write_plan(&r.dir, &text.replace("num_prompts = 20", "num_prompt = 20"));
    let out = benchplan(&["validate", &bad]);
    crate::support::exits_saying(&out, 2, "services.b.defaults");
}

#[test]
fn only_runs_a_subset_into_a_new_folder_or_again_in_place() {
    let dir = crate::support::tempdir("only");
    let plan = write_plan(
        &dir,
        &TWO_SIMS.replace("num_prompts = 100", "num_prompts = 10"),
    );
    let r = dir.join("r");
    let rs = r.to_str().unwrap();
    // A service name: its cases only, into a new folder.
    let out = benchplan(&["run", &plan, "--results-dir", rs, "--quiet", "--only", "b"]);
    crate::support::exits_saying(&out, 0, "--only: 2 of 4 cases");
    let sub = batch_dir(&r);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sub.join("manifest.json")).unwrap()).unwrap();
    let services: Vec<&str> = manifest["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["service"].as_str().unwrap())
        .collect();
    assert_eq!(services, ["b", "b"]);
    // Nothing picked: a usage error that lists what there is.
    let out = benchplan(&["run", &plan, "--results-dir", rs, "--only", "nope*"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("picks no case") && stderr(&out).contains("a, b"),
        "{}",
        stderr(&out)
    );

    // A whole run, then one case again in place: its result is new, the others kept.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let out = run_quiet(&plan, &r);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let full = batch_dir(&r);
    let ids: Vec<String> = crate::support::plan_toml(&std::fs::read_to_string(&plan).unwrap())
        .cases
        .iter()
        .map(|c| c.id.clone())
        .collect();
    let read = |id: &str| std::fs::read_to_string(full.join(format!("{id}.json"))).unwrap();
    let before: Vec<String> = ids.iter().map(|id| read(id)).collect();
    let one = format!("{}*", &ids[0][..ids[0].len() - 6]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let out = benchplan(&[
        "run",
        &plan,
        "--quiet",
        "--resume",
        full.to_str().unwrap(),
        "--only",
        &one,
    ]);
    crate::support::exits_saying(&out, 0, "1 of them run again (--only)");
    let after: Vec<String> = ids.iter().map(|id| read(id)).collect();
    assert_ne!(before[0], after[0], "the picked case ran again");
    assert_eq!(before[1..], after[1..], "the others kept their results");
    let report = std::fs::read_to_string(full.join("report.md")).unwrap();
    for id in &ids {
        assert!(report.contains(id.as_str()), "{id} in the report");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// One row of the metric table makes a summarized metric an SLO key and a compared
/// metric: the client's queue time behind the concurrency cap.
#[test]
fn client_queue_time_is_an_slo_key_and_a_compared_metric() {
    let dir = crate::support::tempdir("queue-slo");
    let plan = |extra: &str| {
        format!(
            "[services.sim]\nsim = {{ preset = \"fast\" }}\n[defaults]\nnum_prompts = 8\n{extra}dataset = {{ name = \"random\", input_len = 8, output_len = 2 }}\n[slo]\np99_client_queue_time = \"<= 30s\"\n[report]\ncharts = false\ncompare_metrics = [\"p99_client_queue_time_ms\"]\n"
        )
    };
    // No cap, no queue: refused before any traffic, naming the key.
    let p = write_plan(&dir, &plan(""));
    let out = benchplan(&["validate", &p]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`p99_client_queue_time` is measured only behind a concurrency cap"),
        "{}",
        stderr(&out)
    );
    let ran = run_plan_exits("queue-slo", &plan("max_concurrency = 2\n"), 0);
    let run = ran.run();
    let result = std::fs::read_dir(&run)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with("sim-"))
        .unwrap();
    let v = crate::support::read_json(&result);
    let verdict = v["benchplan"]["slo_verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["key"] == "p99_client_queue_time")
        .cloned()
        .expect("judged");
    assert_eq!(verdict["pass"], true);
    assert_eq!(verdict["actual"], v["p99_client_queue_time_ms"]);
    // Against itself as the baseline: the metric is compared (a row, no regression).
    let p = write_plan(
        &dir,
        &format!(
            "{}baseline = \"{}\"\n",
            plan("max_concurrency = 2\n"),
            run.display()
        ),
    );
    let out = run_quiet(&p, &dir.join("r2"));
    assert!(matches!(out.status.code(), Some(0 | 4)), "{}", stderr(&out));
    let md = std::fs::read_to_string(batch_dir(&dir.join("r2")).join("report.md")).unwrap();
    assert!(md.contains("p99_client_queue_time_ms"), "{md}");
    std::fs::remove_dir_all(&dir).ok();
}
