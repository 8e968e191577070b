//! `benchplan run` end to end against in-process simulators: the results tree,
//! summary.csv, report.md, SLO exit codes, failing services and templates.

use std::path::{Path, PathBuf};

use crate::support::{benchplan, stderr, stdout};

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("benchplan-run-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write_plan(dir: &Path, text: &str) -> String {
    let p = dir.join("plan.toml");
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

fn batch_dir(results: &Path) -> PathBuf {
    let batch = results.join("batch");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&batch)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    dirs.pop().expect("one batch folder")
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
    let dir = temp("tree");
    let plan = write_plan(&dir, TWO_SIMS);
    let results = dir.join("bench_results");
    let out = benchplan(&[
        "run",
        &plan,
        "--results-dir",
        results.to_str().unwrap(),
        "--quiet",
    ]);
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
    assert!(report.contains("| Case | Concurrency | Rate | Prompts | Req/s | Out tok/s | TTFT mean | TTFT P99 | TPOT mean | TPOT P99 | E2E P99 | Success% |"));
    assert!(
        report.contains("## SLO compliance")
            && report.contains("## Recommendation")
            && report.contains("## Reproduce")
    );
    assert_eq!(report.matches("| pass |").count(), 8);
    assert_eq!(
        stdout(&out).trim(),
        report.trim(),
        "the report is printed too"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_violated_slo_exits_3() {
    let dir = temp("slo");
    let plan = write_plan(
        &dir,
        &TWO_SIMS.replace("p99_ttft = \"<= 2s\"", "mean_tpot = \"<= 1.5ms\""),
    );
    let out = benchplan(&[
        "run",
        &plan,
        "--results-dir",
        dir.join("r").to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let report = std::fs::read_to_string(batch_dir(&dir.join("r")).join("report.md")).unwrap();
    assert!(report.contains("| FAIL |"), "{report}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_failing_service_is_a_recorded_failed_case_and_the_others_run() {
    let dir = temp("fail");
    let text = TWO_SIMS.replace(
        "sim = { preset = \"fast\", itl = \"2ms\" }",
        "sim = { preset = \"fast\", failure_rate = 1.0 }",
    );
    let plan = write_plan(&dir, &text);
    let out = benchplan(&[
        "run",
        &plan,
        "--results-dir",
        dir.join("r").to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let b = batch_dir(&dir.join("r"));
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
    let report = std::fs::read_to_string(b.join("report.md")).unwrap();
    assert!(
        report.contains("## Failed cases") && report.contains("smoke request failed"),
        "{report}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_unreachable_service_stops_the_run_before_any_case() {
    let dir = temp("down");
    let plan = write_plan(
        &dir,
        "[services.down]\nbase_url = \"http://127.0.0.1:9\"\n[defaults]\nnum_prompts = 5\n",
    );
    let out = benchplan(&[
        "run",
        &plan,
        "--results-dir",
        dir.join("r").to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("service `down`: cannot reach http://127.0.0.1:9/v1/models"),
        "{}",
        stderr(&out)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn user_templates_render_and_template_errors_are_located() {
    let dir = temp("tpl");
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
