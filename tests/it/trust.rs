//! Trust boundaries: no credential leaves its origin or lands in a file, `optimize`
//! survives signals, a torn history heals, a re-rendered report keeps its verdict,
//! shards judged differently are not merged, impossible numbers are refused.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::field::{bench, small_case, token, usage};
use crate::support::{
    SimProcess, batch_dir, benchplan, read_json, read_request, repo, scripted, stderr, stdout,
    tempdir,
};

/// A server that logs every request's head and answers with three tokens.
fn logging_streamer() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    scripted(|_, s, log| {
        let Some((head, _)) = read_request(s) else {
            return;
        };
        log.lock().unwrap().push(head);
        let mut body = String::new();
        for _ in 0..3 {
            body.push_str(&token(" a"));
        }
        body.push_str(&usage(4, 3));
        body.push_str("data: [DONE]\n\n");
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}"
        );
    })
}

/// A server answering every request with a 307 to `location`.
fn redirect_to(location: String) -> String {
    scripted(move |_, s, _| {
        if read_request(s).is_some() {
            let _ = write!(
                s,
                "HTTP/1.1 307 Temporary Redirect\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
        }
    })
    .0
}

const KEY: &str = "sk-secret-rd2";
const HEADER_SECRET: &str = "hdr-secret-rd1";

fn with_secrets(case: &[&'static str]) -> Vec<&'static str> {
    let mut a = case.to_vec();
    a.extend([
        "--header",
        "X-Api-Key=hdr-secret-rd1",
        "--header",
        "X-Team=blue",
    ]);
    a
}

#[test]
fn the_key_never_follows_a_redirect_to_another_origin() {
    // Two servers on two ports: a 307 from the first to the second.
    let (other, seen) = logging_streamer();
    let first = redirect_to(format!("{other}/v1/completions"));
    let r = bench(
        &first,
        &with_secrets(&small_case("3")),
        &[("OPENAI_API_KEY", KEY)],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.result.as_ref().unwrap()["completed"], 4);
    let heads = seen.lock().unwrap().clone();
    assert_eq!(heads.len(), 4, "{heads:?}");
    for h in &heads {
        let l = h.to_ascii_lowercase();
        assert!(
            !l.contains("authorization") && !l.contains("x-api-key"),
            "a credential reached the other origin: {h}"
        );
        assert!(!h.contains(KEY) && !h.contains(HEADER_SECRET), "{h}");
        assert!(l.contains("x-team: blue"), "other headers go on: {h}");
    }
    assert_eq!(r.b()["route"]["credentials_withheld_at"], other);
    assert!(
        r.stderr.contains("without Authorization"),
        "the console says so: {}",
        r.stderr
    );

    // A same-origin 307 (another path on the first server) keeps every header.
    let me = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = me.clone();
    let (same, _) = scripted(move |_, s, _| {
        let Some((head, _)) = read_request(s) else {
            return;
        };
        if head.starts_with("POST /v1/completions") {
            let _ = write!(
                s,
                "HTTP/1.1 307 Temporary Redirect\r\nlocation: /v2/completions\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
            return;
        }
        log.lock().unwrap().push(head);
        let body = format!(
            "{}{}{}{}data: [DONE]\n\n",
            token(" a"),
            token(" a"),
            token(" a"),
            usage(4, 3)
        );
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}"
        );
    });
    let r = bench(
        &same,
        &with_secrets(&small_case("3")),
        &[("OPENAI_API_KEY", KEY)],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let heads = me.lock().unwrap().clone();
    assert_eq!(heads.len(), 4);
    for h in &heads {
        assert!(
            h.contains(&format!("Bearer {KEY}")) && h.contains(HEADER_SECRET),
            "{h}"
        );
    }
    assert!(r.b()["route"].get("credentials_withheld_at").is_none());
}

#[tokio::test]
async fn a_plan_may_refuse_redirects_to_another_origin() {
    use benchplan::client::request::{CrossOrigin, Target, send};
    let (other, seen) = logging_streamer();
    let first = redirect_to(format!("{other}/v1/completions"));
    let base = benchplan::base_url::BaseUrl::parse(&first).unwrap();
    let client = benchplan::client::http::build_client(false, None).unwrap();
    let target = Target::new(
        base.join("/v1/completions"),
        base,
        benchplan::plan::Backend::Openai,
        "m".into(),
        Default::default(),
        client,
        Default::default(),
    )
    .redirecting(Some(CrossOrigin::Refuse));
    let body = br#"{"model":"m","prompt":"a","max_tokens":3,"stream":true}"#.to_vec();
    let o = send(&target, body, None).await;
    let e = o.sample.error.expect("refused");
    assert_eq!(e.kind, "cross_origin_redirect");
    assert!(e.message.contains(&other), "{}", e.message);
    assert!(seen.lock().unwrap().is_empty(), "nothing was sent there");
}

/// Distinct marker secrets, each in one place a user puts credentials.
const MARKERS: [&str; 5] = [
    "bpuser-m0",      // base_url's user
    "url-pass-m1",    // base_url's password
    "hdr-secret-m2",  // a secret header
    "env-secret-m3",  // the API key, from the environment
    "body-secret-m4", // an extra_body field
];

fn run_with(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args(args)
        .current_dir(dir)
        .env("BP_MARKER_KEY", MARKERS[3])
        .env("OPENAI_API_KEY", MARKERS[3])
        .env("GITHUB_STEP_SUMMARY", dir.join("step-summary.md"))
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .output()
        .unwrap()
}

fn every_file(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_symlink() {
            continue;
        }
        if p.is_dir() {
            every_file(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn no_credential_lands_in_any_file_or_on_the_console() {
    let _cpu = crate::support::heavy();
    let sim = SimProcess::start(&["--preset", "fast"]);
    let dir = tempdir("secrets");
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let host = sim.url.trim_start_matches("http://");
    let base = format!("http://{}:{}@{host}", MARKERS[0], MARKERS[1]);
    let tok = repo().join("tests/fixtures/tokenizer");
    let plan = work.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            r#"name = "secrets"
[services.gw]
base_url = "{base}"
model = "benchplan-sim"
tokenizer = "{}"
api_key_env = "BP_MARKER_KEY"
headers = {{ "X-Api-Key" = "{}", "X-Team" = "blue" }}
[defaults]
num_prompts = 4
dataset = {{ name = "random", input_len = 8, output_len = 3 }}
extra_body = {{ api_key = "{}" }}
[matrix]
max_concurrency = [1, 2]
[slo]
p99_ttft = "<= 10s"
[report]
history = "history.jsonl"
# Three runs of a history judge noise as change (issue #45): keep to what does not move.
compare_metrics = ["success_rate"]
"#,
            tok.display(),
            MARKERS[2],
            MARKERS[4]
        ),
    )
    .unwrap();
    let p = plan.to_str().unwrap();
    let mut outputs = Vec::new();
    let mut expect = |o: Output, what: &str| {
        assert_eq!(o.status.code(), Some(0), "{what}: {}", stderr(&o));
        outputs.push(o);
    };
    expect(run_with(&work, &["run", p, "--results-dir", "r"]), "run");
    expect(
        run_with(&work, &["run", p, "--results-dir", "r"]),
        "run again",
    );
    let run_dir = batch_dir(&work.join("r"));
    expect(
        run_with(&work, &["report", run_dir.to_str().unwrap()]),
        "report",
    );
    for i in 0..2 {
        expect(
            run_with(
                &work,
                &[
                    "run",
                    p,
                    "--results-dir",
                    &format!("s{i}"),
                    "--shard",
                    &format!("{i}/2"),
                    "--shard-by",
                    "case",
                ],
            ),
            "shard",
        );
    }
    let (s0, s1) = (batch_dir(&work.join("s0")), batch_dir(&work.join("s1")));
    expect(
        run_with(
            &work,
            &[
                "merge",
                s0.to_str().unwrap(),
                s1.to_str().unwrap(),
                "--results-dir",
                "m",
            ],
        ),
        "merge",
    );
    expect(
        run_with(&work, &["trend", "history.jsonl", "--out", "trend"]),
        "trend",
    );
    expect(
        run_with(
            &work,
            &[
                "bench",
                "--base-url",
                &base,
                "--model",
                "benchplan-sim",
                "--tokenizer",
                tok.to_str().unwrap(),
                "--header",
                &format!("X-Api-Key={}", MARKERS[2]),
                "--extra-body",
                &format!(r#"{{"api_key": "{}"}}"#, MARKERS[4]),
                "--num-prompts",
                "2",
                "--random-input-len",
                "8",
                "--random-output-len",
                "3",
                "--save-result",
                "--result-dir",
                "b",
                "--disable-tqdm",
            ],
        ),
        "bench",
    );
    expect(
        run_with(
            &work,
            &[
                "probe",
                &base,
                "--header",
                &format!("X-Api-Key={}", MARKERS[2]),
            ],
        ),
        "probe",
    );
    // The work happened: results, a merged run, a history, a bench result.
    assert!(work.join("m/batch").is_dir() && work.join("b").is_dir());
    let mut files = Vec::new();
    every_file(&work, &mut files);
    files.retain(|f| f != &plan);
    assert!(files.len() > 40, "{} files", files.len());
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for m in MARKERS {
            assert!(!text.contains(m), "{m} in {}", f.display());
        }
    }
    for o in &outputs {
        let console = format!("{}{}", stdout(o), stderr(o));
        for m in MARKERS {
            assert!(!console.contains(m), "{m} on the console:\n{console}");
        }
    }
    // What was recorded still says where the service is, without its credentials.
    let m = read_json(&run_dir.join("manifest.json"));
    assert_eq!(
        m["services"]["gw"]["base_url"],
        format!("http://<redacted>@{host}")
    );
    std::fs::remove_dir_all(&dir).ok();
}

// ------------------------------------------------------------------ optimize signals

/// An optimize plan whose probes each take a few hundred milliseconds.
fn slow_search(dir: &Path) -> PathBuf {
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        "[services.s]\nsim = { preset = \"ground-truth\", ttft = \"20ms\", itl = \"5ms\", max_num_seqs = 64 }\n\
         [defaults]\ndataset = { name = \"random\", input_len = 8, output_len = 8 }\n[slo]\np99_ttft = \"<= 2s\"\n\
         [optimize]\nsearch = \"max_concurrency\"\nmin = 1\nmax = 512\nwarmup_prompts = 4\n\
         probe = { multiplier = 1, floor = 20 }\nbisect = { multiplier = 1, floor = 20 }\nvalidation = { multiplier = 1, floor = 20 }\n",
    )
    .unwrap();
    plan
}

fn spawn_optimize(plan: &Path, results: &Path, ignore_int: bool) -> std::process::Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_benchplan"));
    cmd.arg("optimize")
        .arg(plan)
        .arg("--results-dir")
        .arg(results)
        .env("GITHUB_STEP_SUMMARY", results.join("step-summary.md"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if ignore_int {
        // A background job of a shell: SIGINT ignored when the process starts.
        use std::os::unix::process::CommandExt;
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                Ok(())
            });
        }
    }
    cmd.spawn().unwrap()
}

/// Waits until the search has archived at least one probe (or 20 s passed).
fn after_a_probe(results: &Path) {
    for _ in 0..200 {
        let found = std::fs::read_dir(results.join("optimize"))
            .into_iter()
            .flatten()
            .flat_map(|e| std::fs::read_dir(e.unwrap().path()).into_iter().flatten())
            .flat_map(|e| std::fs::read_dir(e.unwrap().path()).into_iter().flatten())
            .any(|e| {
                e.unwrap()
                    .file_name()
                    .to_str()
                    .unwrap()
                    .starts_with("probe_")
            });
        if found {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no probe archived within 20 s");
}

#[test]
fn optimize_keeps_its_probes_and_says_interrupted_on_each_signal() {
    let _cpu = crate::support::heavy();
    for (signal, code, name, background) in [
        (libc::SIGINT, 130, "SIGINT", false),
        (libc::SIGTERM, 143, "SIGTERM", false),
        (libc::SIGHUP, 129, "SIGHUP", false),
        (libc::SIGINT, 130, "SIGINT", true),
    ] {
        let dir = tempdir("opt-signal");
        let plan = slow_search(&dir);
        let results = dir.join("r");
        let child = spawn_optimize(&plan, &results, background);
        after_a_probe(&results);
        let (out, _) = crate::support::signal_after(child, Duration::ZERO, signal);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{name} (background {background}): {}",
            stderr(&out)
        );
        let opt = std::fs::read_dir(results.join("optimize"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap() != "latest")
            .unwrap();
        let md = std::fs::read_to_string(opt.join("report.md")).unwrap();
        assert!(md.contains(&format!("**INTERRUPTED** by {name}")), "{md}");
        let cell = std::fs::read_dir(&opt)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.is_dir() && p.file_name().unwrap() != "charts")
            .unwrap();
        let report = read_json(&cell.join("optimization_report.json"));
        assert_eq!(
            report["ending"]["interrupted"],
            format!("interrupted by {name}")
        );
        assert!(report["optimal_value"].is_null(), "{report}");
        // Every probe the history names is archived, and judged before the signal.
        let history = report["exploration_history"].as_array().unwrap();
        assert!(!history.is_empty(), "{report}");
        for s in history {
            let f = s["file"].as_str().unwrap();
            assert!(cell.join(f).is_file(), "{f} archived");
        }
        let summary = std::fs::read_to_string(results.join("step-summary.md")).unwrap();
        assert!(summary.contains("INTERRUPTED"), "{summary}");
        std::fs::remove_dir_all(&dir).ok();
    }
}

// ----------------------------------------------------------------- a history heals

const ONE_CASE: &str = r#"name = "heal"
[services.sim]
sim = { preset = "fast" }
[defaults]
dataset = { name = "random", input_len = 8, output_len = 2 }
num_prompts = 4
[report]
charts = false
history = "history.jsonl"
# A history of three runs judges noise as change (issue #45's noisy night): keep to
# what does not move.
compare_metrics = ["success_rate"]
"#;

#[test]
fn a_torn_history_line_is_skipped_named_and_buried_by_nothing() {
    let dir = tempdir("heal");
    std::fs::write(dir.join("plan.toml"), ONE_CASE).unwrap();
    let run = || run_with(&dir, &["run", "plan.toml", "--results-dir", "r", "--quiet"]);
    assert_eq!(run().status.code(), Some(0));
    // A kill during an append: the last line cut, no newline.
    let h = dir.join("history.jsonl");
    let mut f = std::fs::OpenOptions::new().append(true).open(&h).unwrap();
    f.write_all(br#"{"v":1,"when":"2026-12-0"#).unwrap();
    drop(f);
    for _ in 0..2 {
        let out = run();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let err = stderr(&out);
        let warned = err
            .lines()
            .filter(|l| l.contains("history.jsonl:2:"))
            .count();
        assert_eq!(warned, 1, "{err}");
    }
    let out = run_with(&dir, &["trend", "history.jsonl"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stderr(&out)
            .lines()
            .filter(|l| l.contains("history.jsonl:2:"))
            .count(),
        1,
        "{}",
        stderr(&out)
    );
    let text = std::fs::read_to_string(&h).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    for (i, l) in lines.iter().enumerate().filter(|(i, _)| *i != 1) {
        assert!(
            serde_json::from_str::<Value>(l).is_ok(),
            "line {} is not whole: {l}",
            i + 1
        );
    }
    // A file that is no history at all is still refused.
    std::fs::write(dir.join("bad.jsonl"), "not json\n{}\n").unwrap();
    let out = run_with(&dir, &["trend", "bad.jsonl"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).ok();
}

// -------------------------------------------------- a verdict survives re-rendering

#[test]
fn report_rebuilds_the_verdict_of_a_failed_run() {
    let dir = tempdir("rerender");
    let plan = |ttft: &str, baseline: &str| {
        format!(
            "{}[services.sim]\nsim = {{ preset = \"ground-truth\", ttft = \"{ttft}\", itl = \"1ms\" }}\n[defaults]\ndataset = {{ name = \"random\", input_len = 8, output_len = 2 }}\nnum_prompts = 8\nmax_concurrency = 1\n[report]\ncharts = false\nmeasure = \"whole\"\nhistory = \"history.jsonl\"\n{baseline}",
            "name = \"rerender\"\ndescription = \"the plan's own words\"\n"
        )
    };
    std::fs::write(dir.join("plan.toml"), plan("20ms", "")).unwrap();
    let first = run_with(
        &dir,
        &["run", "plan.toml", "--results-dir", "base", "--quiet"],
    );
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let base = batch_dir(&dir.join("base"));
    std::fs::write(
        dir.join("plan.toml"),
        plan("60ms", &format!("baseline = \"{}\"\n", base.display())),
    )
    .unwrap();
    let failed = run_with(&dir, &["run", "plan.toml", "--results-dir", "r", "--quiet"]);
    assert_eq!(failed.status.code(), Some(4), "{}", stderr(&failed));
    let run_dir = batch_dir(&dir.join("r"));
    let wrote = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(
        wrote.contains("**FAIL**") && wrote.contains("regression"),
        "{wrote}"
    );
    // A copy elsewhere: the baseline and the history are not where it can see them.
    let copy = dir.join("copy");
    copy_dir(&run_dir, &copy);
    std::fs::remove_dir_all(&base).unwrap();
    std::fs::remove_file(dir.join("history.jsonl")).unwrap();
    let summary = dir.join("step-summary.md");
    let _ = std::fs::remove_file(&summary);
    let out = run_with(&dir, &["report", copy.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let again = std::fs::read_to_string(copy.join("report.md")).unwrap();
    let head = |md: &str| {
        md.lines()
            .find(|l| l.starts_with("**"))
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(head(&again), head(&wrote));
    for section in [
        "## Comparison with the baseline",
        "## Trend",
        "the plan's own words",
    ] {
        assert_eq!(
            wrote.contains(section),
            again.contains(section),
            "{section}:\n{again}"
        );
    }
    assert!(again.contains("the plan's own words") && again.contains("Trend"));
    let html = std::fs::read_to_string(copy.join("report.html")).unwrap();
    assert!(
        html.contains("FAIL") && html.contains("regression"),
        "report.html"
    );
    let steps = std::fs::read_to_string(&summary).unwrap();
    assert!(steps.contains("**FAIL**"), "{steps}");
    assert!(stderr(&out).contains(&format!("report: {}", copy.join("report.md").display())));
    std::fs::remove_dir_all(&dir).ok();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else if !p.is_symlink() {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

// ------------------------------------------------------ shards judged by one plan

#[test]
fn merge_refuses_shards_judged_by_different_slos() {
    let dir = tempdir("merge-judge");
    let plan = |slo: &str| {
        format!(
            "name = \"judge\"\n[services.sim]\nsim = {{ preset = \"fast\" }}\n[defaults]\ndataset = {{ name = \"random\", input_len = 8, output_len = 2 }}\nnum_prompts = 4\n[matrix]\nmax_concurrency = [1, 2]\n[slo]\np99_ttft = \"{slo}\"\n[report]\ncharts = false\n"
        )
    };
    for (i, slo) in [(0, "<= 1s"), (1, "<= 2s")] {
        std::fs::write(dir.join(format!("p{i}.toml")), plan(slo)).unwrap();
        let out = run_with(
            &dir,
            &[
                "run",
                &format!("p{i}.toml"),
                "--results-dir",
                &format!("s{i}"),
                "--shard",
                &format!("{i}/2"),
                "--shard-by",
                "case",
                "--quiet",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let out = run_with(&dir, &["merge", "s0", "s1", "--results-dir", "m"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("judge their cases differently")
            && stderr(&out).contains("p99_ttft <= 1000")
            && stderr(&out).contains("p99_ttft <= 2000"),
        "{}",
        stderr(&out)
    );
    assert!(
        !dir.join("m").join("batch").exists()
            || std::fs::read_dir(dir.join("m/batch"))
                .unwrap()
                .next()
                .is_none()
    );
    // A damaged result in a shard is named where it is, and no half-written folder stays.
    std::fs::write(dir.join("p1.toml"), plan("<= 1s")).unwrap();
    let out = run_with(
        &dir,
        &[
            "run",
            "p1.toml",
            "--results-dir",
            "t1",
            "--shard",
            "1/2",
            "--shard-by",
            "case",
            "--quiet",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s1 = batch_dir(&dir.join("t1"));
    let victim = std::fs::read_dir(&s1)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with("sim-"))
        .unwrap();
    std::fs::write(&victim, "{\"completed\": ").unwrap();
    let out = run_with(&dir, &["merge", "s0", "t1", "--results-dir", "m2"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let name = victim.file_name().unwrap().to_str().unwrap();
    assert!(
        stderr(&out).contains(&format!(
            "t1/batch/{}/{name}",
            s1.file_name().unwrap().to_str().unwrap()
        )),
        "the shard's own file is named: {}",
        stderr(&out)
    );
    let left = std::fs::read_dir(dir.join("m2/batch"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(left, 0, "a failed merge leaves no folder");
    std::fs::remove_dir_all(&dir).ok();
}

// --------------------------------------------------- impossible numbers are refused

#[test]
fn result_files_with_impossible_values_are_refused_by_compare_and_report() {
    let dir = tempdir("impossible");
    let bench_into = |name: &str| {
        let out = benchplan(&[
            "bench",
            "--sim",
            "fast",
            "--num-prompts",
            "4",
            "--random-input-len",
            "8",
            "--random-output-len",
            "4",
            "--save-result",
            "--result-dir",
            dir.join(name).to_str().unwrap(),
            "--result-filename",
            "r.json",
            "--disable-tqdm",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        dir.join(name).join("r.json")
    };
    let good = bench_into("good");
    for (key, value, words) in [
        (
            "mean_ttft_ms",
            serde_json::json!(-5.0),
            "no measurement gives",
        ),
        ("output_throughput", serde_json::json!(0.0), ""),
        (
            "p99_e2el_ms",
            serde_json::json!(1e308),
            "no measurement gives",
        ),
        (
            "p99_ttft_ms",
            serde_json::json!("fast"),
            "should be a number but is a string",
        ),
    ] {
        let bad = bench_into("bad");
        let mut v = read_json(&bad);
        v[key] = value;
        std::fs::write(&bad, v.to_string()).unwrap();
        let out = benchplan(&["compare", good.to_str().unwrap(), bad.to_str().unwrap()]);
        if words.is_empty() {
            // Zero throughput can be measured (nothing came back): not refused.
            assert!(
                !stderr(&out).contains("no measurement gives"),
                "{key}: {}",
                stderr(&out)
            );
            continue;
        }
        // compare's files could not be judged: exit 1, as for a missing one.
        assert_eq!(out.status.code(), Some(1), "{key}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(key) && stderr(&out).contains(words),
            "{key}: {}",
            stderr(&out)
        );
        // No 309-digit number anywhere.
        assert!(
            !stderr(&out).contains("0000000000000000"),
            "{}",
            stderr(&out)
        );
        let out = benchplan(&[
            "report",
            dir.join("bad").to_str().unwrap(),
            "--out",
            dir.join("out").to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2), "{key}: {}", stderr(&out));
    }
    // A scalar that contradicts its own histogram is named.
    let bad = bench_into("bad");
    let mut v = read_json(&bad);
    v["mean_ttft_ms"] = serde_json::json!(1e12);
    std::fs::write(&bad, v.to_string()).unwrap();
    let out = benchplan(&["compare", good.to_str().unwrap(), bad.to_str().unwrap()]);
    assert!(
        stderr(&out).contains("`mean_ttft_ms` is 1.000e12 but its histogram's mean is"),
        "{}",
        stderr(&out)
    );
    std::fs::remove_dir_all(&dir).ok();
}

// ---------------------------------------------------------- the smaller faults

#[test]
fn a_server_tokenizer_of_a_server_that_is_down_names_the_refused_connection() {
    let dir = tempdir("down-tok");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    std::fs::write(
        dir.join("plan.toml"),
        format!(
            "[services.x]\nbase_url = \"http://127.0.0.1:{port}\"\nmodel = \"m\"\ntokenizer = \"server\"\n[defaults]\nnum_prompts = 2\n"
        ),
    )
    .unwrap();
    let out = run_with(&dir, &["run", "plan.toml", "--results-dir", "r", "--quiet"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "cannot connect to http://127.0.0.1:{port} (127.0.0.1:{port})"
        )) && err.to_lowercase().contains("connection refused")
            && !err.contains("tokenizes at none"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn small_faults_each_end_well() {
    let dir = tempdir("small-faults");
    // max_concurrency far above num_prompts: no open-file claim for requests that
    // do not exist.
    std::fs::write(
        dir.join("plan.toml"),
        "[services.sim]\nsim = { preset = \"fast\" }\n[defaults]\nnum_prompts = 3\nmax_concurrency = 9223372036854775807\ndataset = { name = \"random\", input_len = 8, output_len = 2 }\n[report]\ncharts = false\n",
    )
    .unwrap();
    // An empty GITHUB_STEP_SUMMARY means none: no warning.
    let out = Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args(["run", "plan.toml", "--results-dir", "r", "--quiet"])
        .current_dir(&dir)
        .env("GITHUB_STEP_SUMMARY", "")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("STEP_SUMMARY"), "{}", stderr(&out));
    // A real folder named `latest` stays, and the run says so.
    let latest = dir.join("r/batch/latest");
    std::fs::remove_file(&latest).unwrap();
    std::fs::create_dir(&latest).unwrap();
    let out = run_with(&dir, &["run", "plan.toml", "--results-dir", "r", "--quiet"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is a real folder, not benchplan's link"),
        "{}",
        stderr(&out)
    );
    assert!(latest.is_dir() && !latest.is_symlink());
    // trend into a reader that stops early: no error.
    let history = dir.join("h.jsonl");
    let run_dir = batch_dir(&dir.join("r"));
    let out = run_with(
        &dir,
        &[
            "history",
            "import",
            "--history",
            "h.jsonl",
            run_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' trend '{}' | head -c 1 >/dev/null",
            env!("CARGO_BIN_EXE_benchplan"),
            history.display()
        ))
        .output()
        .unwrap();
    assert!(!stderr(&out).contains("Broken pipe"), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn report_html_has_no_control_or_bidi_character_from_a_server() {
    // A model id with a terminal escape, an OSC 52 clipboard write and a right-to-left
    // override, as a hostile server names its model.
    let evil = "m\u{1b}[2J\u{1b}]52;c;cHduZWQ=\u{7}\u{9b}31m\u{202e}gnp.exe";
    let view = benchplan::report::view::ReportView::assemble(
        benchplan::report::view::RunHead {
            plan: evil.into(),
            services: vec![benchplan::report::view::ServiceView {
                name: "s".into(),
                kind: "external".into(),
                base_url: "http://h".into(),
                model: evil.into(),
                error: Some(evil.into()),
            }],
            ..Default::default()
        },
        Vec::new(),
        false,
    );
    let html = benchplan::report::render_html(
        "report.html.j2",
        benchplan::report::REPORT_HTML,
        &view,
        &Default::default(),
    )
    .unwrap();
    for c in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
        assert!(!html.contains(c), "{:?} in report.html", c);
    }
    assert!(
        html.contains("gnp.exe"),
        "the text stays, its controls replaced"
    );
}

#[test]
fn a_plan_of_many_simulators_starts_each_with_its_cases() {
    let dir = tempdir("many-sims");
    let mut plan = String::from(
        "name = \"many\"\n[defaults]\nnum_prompts = 2\ndataset = { name = \"random\", input_len = 8, output_len = 2 }\n[report]\ncharts = false\n",
    );
    for i in 0..20 {
        plan.push_str(&format!(
            "[services.s{i:02}]\nsim = {{ preset = \"fast\" }}\n"
        ));
    }
    std::fs::write(dir.join("plan.toml"), plan).unwrap();
    let out = run_with(&dir, &["run", "plan.toml", "--results-dir", "r", "--quiet"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let m = read_json(&batch_dir(&dir.join("r")).join("manifest.json"));
    let services = m["services"].as_object().unwrap();
    assert_eq!(services.len(), 20);
    for s in services.values() {
        assert_eq!(s["base_url"], "started with its cases", "{s}");
    }
    let cases = m["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 20);
    assert!(cases.iter().all(|c| c["status"] == "ok"), "{cases:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn reqwest_drops_the_credentials_on_another_origin_as_the_native_client_does() {
    use benchplan::client::request::{Target, send};
    use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
    let (other, seen) = logging_streamer();
    let first = redirect_to(format!("{other}/v1/completions"));
    let base = benchplan::base_url::BaseUrl::parse(&first).unwrap();
    let mut headers = HeaderMap::new();
    headers.insert(
        AUTHORIZATION,
        HeaderValue::from_static("Bearer sk-reqwest-r1"),
    );
    headers.insert("x-api-key", HeaderValue::from_static("hdr-reqwest-r2"));
    let mut target = Target::new(
        base.join("/v1/completions"),
        base,
        benchplan::plan::Backend::Openai,
        "m".into(),
        headers,
        benchplan::client::http::build_client(false, None).unwrap(),
        Default::default(),
    );
    // Through reqwest, as an HTTPS target or a later redirect goes.
    target.native = None;
    let body = br#"{"model":"m","prompt":"a","max_tokens":3,"stream":true}"#.to_vec();
    let o = send(&target, body, None).await;
    assert!(o.sample.success, "{:?}", o.sample.error);
    let heads = seen.lock().unwrap().clone();
    assert_eq!(heads.len(), 1);
    let h = heads[0].to_ascii_lowercase();
    assert!(
        !h.contains("authorization") && !h.contains("x-api-key") && !h.contains("reqwest-r"),
        "{h}"
    );
    assert_eq!(target.route.withheld_at().as_deref(), Some(other.as_str()));
}
