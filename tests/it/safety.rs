//! Results are never lost or shared: one run at a time in a run folder (a lock naming
//! its holder), a result that cannot be written stops the traffic instead of throwing
//! measurements away, every output that failed is named and the report still reaches
//! stdout, `bench` checks its folder before sending anything; an interrupt during the
//! smoke request is an interrupt; the recommendation says why a case was not taken.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::{batch_dir, read_json, read_request, repo, scripted, tempdir};

fn benchplan_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// `run PLAN --resume BATCH --quiet` and `extra`.
fn resume(dir: &Path, plan: &Path, batch: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "run",
        plan.to_str().unwrap(),
        "--resume",
        batch.to_str().unwrap(),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    benchplan_in(dir, &args)
}

/// `run PLAN --quiet` and `extra` in the background, its output discarded.
fn run_in_background(plan: &Path, extra: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .arg("run")
        .arg(plan)
        .arg("--quiet")
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `body` as a plan whose results go under `dir/results`.
fn write_plan(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("plan.toml");
    let results = dir.join("results");
    std::fs::write(
        &p,
        format!(
            "{body}[execution]\nresults_dir = \"{}\"\n",
            results.display()
        ),
    )
    .unwrap();
    p
}

/// A three-case plan on the embedded simulator (a request takes 120 ms; two at a time).
fn plan(dir: &Path, prompts: u64) -> PathBuf {
    write_plan(
        dir,
        &format!(
            "name = \"safety\"\n[services.s]\nsim = {{ preset = \"ground-truth\" }}\n[defaults]\nnum_prompts = {prompts}\nmax_concurrency = 2\ndataset = {{ name = \"random\", input_len = 8, output_len = 10 }}\n[matrix]\nseed = [1, 2, 3]\n"
        ),
    )
}

fn case_ids(batch: &Path) -> Vec<String> {
    read_json(&batch.join("manifest.json"))["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect()
}

/// The run folder under `batch` whose lock a running `run` holds (waits for it).
fn locked_folder(batch: &Path) -> PathBuf {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let found = std::fs::read_dir(batch).ok().and_then(|mut r| {
            r.find_map(|e| {
                let p = e.ok()?.path();
                p.join(".benchplan.lock").exists().then_some(p)
            })
        });
        if let Some(f) = found {
            return f;
        }
        assert!(
            Instant::now() < until,
            "no run holds a folder under {}",
            batch.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_run_folder_has_one_writer_and_a_dead_ones_lock_is_taken_over() {
    let dir = tempdir("lock");
    // About 2 s a case: long enough to be caught running, short enough to resume.
    let p = plan(&dir, 30);
    let first = run_in_background(&p, &[]);
    let batch = locked_folder(&dir.join("results/batch"));
    let second = resume(&dir, &p, &batch, &[]);
    assert_eq!(second.status.code(), Some(2), "{}", err(&second));
    assert!(
        err(&second).contains(&format!("pid {}", first.id())),
        "the message names the holder: {}",
        err(&second)
    );
    // Killed hard, the first run leaves its lock; a resume takes it over and says so.
    let mut first = first;
    let _ = first.kill();
    let _ = first.wait();
    assert!(batch.join(".benchplan.lock").exists());
    let third = resume(&dir, &p, &batch, &[]);
    let e = err(&third);
    assert!(
        e.contains("took over the lock") && e.contains(&format!("pid {}", first.id())),
        "{e}"
    );
    assert_eq!(third.status.code(), Some(0), "{e}");
    assert!(
        !batch.join(".benchplan.lock").exists(),
        "released at the end"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn merge_refuses_a_shard_a_run_is_still_writing() {
    let dir = tempdir("lock-merge");
    let p = plan(&dir, 300);
    let mut shard = run_in_background(&p, &["--shard", "1/2", "--shard-by", "case"]);
    locked_folder(&dir.join("results/batch"));
    let out = benchplan_in(
        &dir,
        &[
            "merge",
            dir.join("results/batch").to_str().unwrap(),
            "--results-dir",
            dir.join("merged").to_str().unwrap(),
        ],
    );
    let _ = shard.kill();
    let _ = shard.wait();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        err(&out).contains("is in use by benchplan"),
        "{}",
        err(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_result_that_cannot_be_written_stops_the_traffic_and_every_lost_output_is_named() {
    let dir = tempdir("disk");
    let p = plan(&dir, 4);
    let first = benchplan_in(&dir, &["run", p.to_str().unwrap(), "--quiet"]);
    assert_eq!(first.status.code(), Some(0), "{}", err(&first));
    let batch = batch_dir(&dir.join("results"));
    let ids = case_ids(&batch);
    // The second and third case run again; the second's result and report.md cannot be
    // written (a folder is in their place: no permission bit stops root, this does).
    for id in &ids[1..] {
        std::fs::remove_file(batch.join(format!("{id}.json"))).unwrap();
    }
    std::fs::create_dir_all(batch.join(format!("{}.json/blocked", ids[1]))).unwrap();
    std::fs::remove_file(batch.join("report.md")).unwrap();
    std::fs::create_dir_all(batch.join("report.md/blocked")).unwrap();
    let junit = dir.join("junit.xml");
    let out = resume(&dir, &p, &batch, &["--junit", junit.to_str().unwrap()]);
    let e = err(&out);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains(&format!(
            "cannot write {}",
            batch.join(format!("{}.json", ids[1])).display()
        )),
        "{e}"
    );
    assert!(e.contains("no more traffic is sent"), "{e}");
    assert!(e.contains("not written: report.md"), "{e}");
    let manifest = read_json(&batch.join("manifest.json"));
    assert_eq!(
        manifest["cases"][2]["status"], "not_run",
        "{}",
        manifest["cases"]
    );
    assert!(
        !batch.join(format!("{}.json", ids[2])).exists(),
        "the third case sent nothing"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("# Benchmark report"),
        "the report reaches stdout"
    );
    assert!(junit.is_file(), "junit.xml is written whatever else failed");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_full_disk_stops_the_run_after_the_first_lost_result() {
    let dir = tempdir("full");
    let mnt = dir.join("small");
    std::fs::create_dir_all(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=96k", "tmpfs"])
        .arg(&mnt)
        .output()
        .is_ok_and(|o| o.status.success());
    if !mounted {
        eprintln!(
            "SKIPPED the full-disk test: cannot mount a small tmpfs here (needs root); the blocked-path test covers the same code"
        );
        return;
    }
    let p = dir.join("plan.toml");
    std::fs::write(
        &p,
        format!(
            "name = \"full\"\n[services.s]\nsim = {{ preset = \"fast\" }}\n[defaults]\nnum_prompts = 300\ndataset = {{ name = \"random\", input_len = 8, output_len = 20 }}\n[matrix]\nseed = [1, 2, 3, 4, 5, 6, 7, 8]\n[execution]\nresults_dir = \"{}\"\nsave_detailed = true\n",
            mnt.display()
        ),
    )
    .unwrap();
    let out = benchplan_in(
        &dir,
        &["run", p.to_str().unwrap(), "--quiet", "--no-charts"],
    );
    let _ = Command::new("umount").arg(&mnt).status();
    let e = err(&out);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains("No space left on device") && e.contains("no more traffic is sent"),
        "{e}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("# Benchmark report"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_checks_its_result_folder_before_any_traffic() {
    let (server, seen) = scripted(|_, s, log| {
        if read_request(s).is_some() {
            log.lock().unwrap().push("request".into());
        }
    });
    let dir = tempdir("bench-ro");
    // A file where a folder must be: no permission bit stops root, this does.
    std::fs::write(dir.join("file"), "x").unwrap();
    let tok = repo().join("tests/fixtures/tokenizer");
    let out = Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args([
            "bench",
            "--base-url",
            &server,
            "--model",
            "m",
            "--tokenizer",
        ])
        .arg(&tok)
        .args(["--num-prompts", "2", "--save-result", "--result-dir"])
        .arg(dir.join("file/results"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", err(&out));
    assert!(
        err(&out).contains("cannot take a file") && err(&out).contains("nothing was sent"),
        "{}",
        err(&out)
    );
    assert!(seen.lock().unwrap().is_empty(), "no request was sent");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_interrupt_during_the_smoke_request_exits_130() {
    // Reads the request and never answers.
    let (silent, _) = scripted(|_, s, _| {
        if read_request(s).is_some() {
            std::thread::sleep(Duration::from_secs(20));
        }
    });
    let tok = repo().join("tests/fixtures/tokenizer");
    let child = Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args([
            "bench",
            "--base-url",
            &silent,
            "--model",
            "m",
            "--tokenizer",
        ])
        .arg(&tok)
        .args(["--num-prompts", "2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (out, _) = crate::support::signal_after(child, Duration::from_millis(1000), libc::SIGINT);
    assert_eq!(out.status.code(), Some(130), "{}", err(&out));
}

#[test]
fn the_recommendation_says_why_no_case_was_taken() {
    use benchplan::report::view::{CaseView, recommend};
    use benchplan::slo::Verdict;
    let verdict = |key: &str, actual: f64, target: &str| Verdict {
        key: key.into(),
        target: target.into(),
        actual: Some(actual),
        unit: "%".into(),
        pass: false,
        message: String::new(),
        ..Verdict::default()
    };
    let mut a = benchplan::report::view::case_view("a", "s", "ok", None, None);
    a.verdicts = vec![verdict("min_output_ratio", 6.25, ">= 90%")];
    a.slo_pass = Some(false);
    let mut b: CaseView = benchplan::report::view::case_view("b", "s", "ok", None, None);
    b.verdicts = vec![verdict("min_success_rate", 50.0, ">= 95%")];
    b.slo_pass = Some(false);
    let c = benchplan::report::view::case_view("c", "s", "failed", None, Some("down".into()));
    let why = recommend(&[a, b, c], false).unwrap_err();
    assert!(
        why.contains(
            "a: below the output-ratio floor (answers cut short) min_output_ratio (6.25% vs >= 90%)"
        ),
        "{why}"
    );
    assert!(why.contains("b: below the success-rate floor"), "{why}");
    assert!(why.contains("c: not measured (failed)"), "{why}");
}

#[test]
fn prewarming_opens_what_the_schedule_can_have_in_flight() {
    use benchplan::load::run::prewarm_count;
    use benchplan::plan::CaseParams;
    use benchplan::plan::units::Rate;
    let p = |rate: f64, cap: Option<u64>| CaseParams {
        request_rate: Rate(rate),
        max_concurrency: cap,
        ..CaseParams::default()
    };
    // One request a second for 2,000 requests: a handful, not 2,000 idle sockets.
    assert!(prewarm_count(&p(1.0, None), 2000, Some(0.3)) <= 8);
    // Unbounded rate: every request may be in flight at once (up to the cap).
    assert_eq!(prewarm_count(&p(f64::INFINITY, None), 2000, None), 2000);
    assert_eq!(prewarm_count(&p(f64::INFINITY, Some(16)), 2000, None), 16);
    // A fast rate with slow requests: rate × twice the latency, with headroom.
    let k = prewarm_count(&p(100.0, None), 10_000, Some(5.0));
    assert!((1000..1200).contains(&k), "{k}");
}

#[test]
fn a_server_tokenizer_without_tokenize_is_a_clear_error_not_a_panic() {
    // Serves completions but answers 404 to /tokenize (llama-cpp-python serves its
    // tokenizer elsewhere).
    let (server, seen) = scripted(|_, s, log| {
        use std::io::Write;
        while let Some((head, _)) = read_request(s) {
            let line = head.lines().next().unwrap_or("").to_string();
            log.lock().unwrap().push(line.clone());
            let _ = s.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let out = Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args([
            "bench",
            "--base-url",
            &server,
            "--model",
            "m",
            "--tokenizer",
            "server",
            "--num-prompts",
            "2",
        ])
        .output()
        .unwrap();
    let e = err(&out);
    assert!(!e.contains("panicked"), "{e}");
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains("tokenizes at none of /tokenize")
            && e.contains("/extras/tokenize")
            && e.contains("--tokenizer"),
        "{e}"
    );
    assert!(
        !seen
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("/v1/completions")),
        "no traffic before the tokenizer works"
    );
}

#[test]
fn without_a_terminal_a_running_case_prints_plain_progress_lines() {
    let dir = tempdir("progress");
    let p = write_plan(
        &dir,
        "[services.s]\nsim = { preset = \"ground-truth\" }\n[defaults]\nnum_prompts = 60\nmax_concurrency = 4\ndataset = { name = \"random\", input_len = 8, output_len = 10 }\n",
    );
    // Captured output is no terminal: the lines go to stderr as they would in CI.
    let out = benchplan_in(
        &dir,
        &["run", p.to_str().unwrap(), "--progress-every", "0.5"],
    );
    let e = err(&out);
    assert_eq!(out.status.code(), Some(0), "{e}");
    let lines: Vec<&str> = e.lines().filter(|l| l.contains(": sent ")).collect();
    assert!(
        lines.len() >= 2,
        "progress lines every 0.5 s of a ~2 s case:\n{e}"
    );
    let field = |l: &str, name: &str| -> u64 {
        l.split(", ")
            .find_map(|p| p.trim().rsplit_once(&format!("{name} ")).map(|(_, v)| v))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no `{name}` in {l}"))
    };
    for l in &lines {
        // In flight is what was sent and has not finished: never above the cap.
        assert!(field(l, "in flight") <= 4, "{l}");
        assert!(l.contains("req/s") && l.contains("ETA"), "{l}");
    }
    assert!(
        field(lines[0], "queued") > 0,
        "the requests waiting for a slot are shown apart: {}",
        lines[0]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reports_lead_with_what_failed_and_the_step_summary_is_short() {
    let dir = tempdir("verdict-first");
    let p = write_plan(
        &dir,
        "[services.s]\nsim = { preset = \"fast\" }\n[defaults]\nnum_prompts = 8\ndataset = { name = \"random\", input_len = 8, output_len = 4 }\n[matrix]\nmax_concurrency = [1, 2]\n[slo]\np99_e2el = \"<= 0.001ms\"\n",
    );
    let summary = dir.join("summary.md");
    let out = Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .arg("run")
        .arg(&p)
        .arg("--quiet")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", err(&out));
    let batch = batch_dir(&dir.join("results"));
    let md = std::fs::read_to_string(batch.join("report.md")).unwrap();
    let (failed, results) = (
        md.find("## What failed").unwrap(),
        md.find("## Results").unwrap(),
    );
    assert!(
        failed < results,
        "the verdict comes before the tables:\n{md}"
    );
    assert!(
        md[failed..results].contains("| p99_e2el | <= 0.001ms |"),
        "{md}"
    );
    let html = std::fs::read_to_string(batch.join("report.html")).unwrap();
    assert!(html.find("What failed").unwrap() < html.find("<h2>Results</h2>").unwrap());
    let step = std::fs::read_to_string(&summary).unwrap();
    assert!(
        step.contains("## What failed") && step.contains("report.html"),
        "{step}"
    );
    assert!(
        !step.contains("](charts/") && !step.contains("## Results"),
        "{step}"
    );
    let verdict = &read_json(&batch.join("manifest.json"))["verdict"];
    assert_eq!(verdict["pass"], false, "{verdict}");
    assert_eq!(
        (verdict["exit"].as_u64(), verdict["slo_failures"].as_u64()),
        (Some(3), Some(2))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_step_summary_of_a_500_case_plan_stays_under_githubs_limit() {
    use benchplan::report::compare::{Comparison, DeltaRow};
    use benchplan::report::view::{ReportView, case_view};
    use benchplan::slo::Verdict;
    // Every case fails an SLO, regresses on eight metrics and carries a long warning;
    // fifty cases were not measured, with a 500-character error each.
    let long = "x".repeat(500);
    let mut cases = Vec::new();
    let mut rows = Vec::new();
    for i in 0..500 {
        let status = if i < 50 { "failed" } else { "ok" };
        let mut c = case_view(
            &format!("service-{i}-0123456789ab"),
            "s",
            status,
            None,
            Some(long.clone()),
        );
        c.verdicts = vec![Verdict {
            key: "p99_ttft".into(),
            target: "<= 500ms".into(),
            actual: Some(900.0),
            unit: "ms".into(),
            pass: false,
            message: String::new(),
            ..Verdict::default()
        }];
        c.slo_pass = Some(false);
        c.warnings = vec![long.clone()];
        for m in benchplan::metrics::table::DEFAULT_COMPARED {
            rows.push(DeltaRow {
                case: c.id.clone(),
                metric: m.into(),
                base: 1.0,
                cand: 2.0,
                delta_pct: 100.0,
                threshold_pct: 5.0,
                better: "lower".into(),
                p_value: Some(1e-9),
                p_between: None,
                regression: true,
                inconclusive: None,
            });
        }
        cases.push(c);
    }
    let view = ReportView {
        plan: "big".into(),
        description: None,
        started: String::new(),
        finished: String::new(),
        tool_version: String::new(),
        command: String::new(),
        services: Vec::new(),
        slos: vec!["p99_ttft <= 500ms".into()],
        failed_cases: cases.iter().filter(|c| c.status != "ok").cloned().collect(),
        slo_failures: 450,
        recommendation: None,
        axes: Vec::new(),
        recommendations: Vec::new(),
        no_recommendation: None,
        comparison: Some(Comparison {
            baseline: "b".into(),
            candidate: "c".into(),
            regressions: rows.len(),
            rows,
            unmatched: Vec::new(),
            unmatched_fail: true,
            warnings: Vec::new(),
            significance: 0.01,
            inconclusive: 0,
            measure: "whole".into(),
        }),
        trend: None,
        charts: Vec::new(),
        folder: Some("bench_results/batch/batch_x".into()),
        machine_line: None,
        cost_ranking: Vec::new(),
        cases,
    };
    let step =
        benchplan::report::render("summary.md.j2", benchplan::report::SUMMARY_MD, &view).unwrap();
    assert!(step.len() < 1 << 20, "{} bytes", step.len());
    assert!(step.len() < 200 << 10, "well under: {} bytes", step.len());
    assert!(
        step.contains("… and 450 more") && step.contains("report.html"),
        "{}",
        &step[..2000]
    );
}
