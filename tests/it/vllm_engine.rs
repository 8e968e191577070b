//! `client = "vllm"`: each case runs `vllm bench serve` (here the stand-in script
//! `tests/fixtures/fake-vllm`, which writes a result of vLLM's shape) and its result
//! goes into the same tree, report, SLO verdicts and searches as the native client's.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::{SimProcess, batch_dir, read_json, repo, tempdir};

fn fake() -> String {
    repo()
        .join("tests/fixtures/fake-vllm")
        .display()
        .to_string()
}

/// `benchplan <args>` with extra environment.
fn run(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_benchplan"));
    c.args(args).current_dir(repo());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn case_results(batch: &Path) -> Vec<Value> {
    let mut v: Vec<Value> = std::fs::read_dir(batch)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.ends_with(".json")
                && !matches!(&*n, "manifest.json" | "plan.resolved.json" | "summary.json")
        })
        .map(|p| read_json(&p))
        .filter(|r| r.get("benchplan").is_some())
        .collect();
    v.sort_by_key(|r| r["max_concurrency"].as_u64());
    v
}

#[test]
fn a_plan_runs_vllm_bench_serve_per_case_and_judges_its_numbers() {
    let sim = SimProcess::start(&["--preset", "fast"]);
    let dir = tempdir("vllm-engine-run");
    let log = dir.join("vllm.log");
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            r#"
[services.gpu]
base_url = "{url}"
client = "vllm"
vllm_path = "{fake}"
api_key_env = "BENCHPLAN_TEST_SECRET_KEY"
headers = {{ "x-team" = "perf" }}

[defaults]
backend = "openai-chat"
dataset = {{ name = "random", input_len = 32, output_len = 8 }}
num_prompts = 10
metric_percentiles = [50, 99]

[matrix]
max_concurrency = [1, 2, 4]

[slo]
p99_ttft = "<= 25ms"
"#,
            url = sim.url,
            fake = fake()
        ),
    )
    .unwrap();
    let results = dir.join("results");
    let secret = "sk-benchplan-test-0123456789";
    let out = run(
        &[
            "run",
            plan.to_str().unwrap(),
            "--results-dir",
            results.to_str().unwrap(),
            "--quiet",
        ],
        &[
            ("FAKE_VLLM_LOG", log.to_str().unwrap()),
            ("FAKE_VLLM_FAIL_CONCURRENCY", "2"),
            ("BENCHPLAN_TEST_SECRET_KEY", secret),
        ],
    );
    // The stand-in failed the middle case: a failed case is a tool error (exit 1),
    // and the other cases ran.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let batch = batch_dir(&results);
    let cases = case_results(&batch);
    let concurrency: Vec<u64> = cases
        .iter()
        .map(|r| r["max_concurrency"].as_u64().unwrap())
        .collect();
    assert_eq!(concurrency, [1, 4], "the failed case wrote no result");
    for r in &cases {
        let c = r["max_concurrency"].as_u64().unwrap();
        // vLLM's own numbers, as it wrote them.
        assert_eq!(r["completed"], 10);
        assert_eq!(r["p99_ttft_ms"].as_f64(), Some(10.0 * c as f64));
        assert_eq!(r["itls"].as_array().unwrap().len(), 10);
        let b = &r["benchplan"];
        assert_eq!(b["engine"]["client"], "vllm");
        assert_eq!(b["deviations"], serde_json::json!([]));
        // The SLO judged on them: 10 ms passes 25 ms, 40 ms does not.
        let v = &b["slo_verdicts"][0];
        assert_eq!(v["key"], "p99_ttft");
        assert_eq!(v["pass"].as_bool(), Some(c == 1), "{v}");
        assert_eq!(v["actual"].as_f64(), Some(10.0 * c as f64));
    }
    let summary = std::fs::read_to_string(batch.join("summary.csv")).unwrap();
    assert_eq!(
        summary.lines().count(),
        4,
        "three cases in the summary: {summary}"
    );
    let report = std::fs::read_to_string(batch.join("report.md")).unwrap();
    assert!(
        report.contains("stand-in failure at max_concurrency=2"),
        "{report}"
    );

    // What vLLM was asked: the case's parameters as its flags.
    let log = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 3, "{log}");
    for (line, c) in lines.iter().zip([1, 2, 4]) {
        for f in [
            "--backend openai-chat",
            "--num-prompts 10",
            &format!("--max-concurrency {c}"),
            "--dataset-name random",
            "--random-input-len 32",
            "--random-output-len 8",
            "--metric-percentiles 50,99",
            "--save-result",
            "--save-detailed",
            "--header x-team=perf",
            &format!("--base-url {}", sim.url),
        ] {
            assert!(line.contains(f), "{f} missing: {line}");
        }
        // The key reaches vLLM as OPENAI_API_KEY, never as an argument.
        assert!(
            line.starts_with(&format!("key=set({})", secret.len())),
            "{line}"
        );
        assert!(!line.contains(secret), "{line}");
    }
    for entry in walk(&results) {
        let t = std::fs::read_to_string(&entry).unwrap_or_default();
        assert!(!t.contains(secret), "{} holds the key", entry.display());
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn an_optimize_search_reads_vllms_numbers() {
    let sim = SimProcess::start(&["--preset", "fast"]);
    let dir = tempdir("vllm-engine-opt");
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            r#"
[services.gpu]
base_url = "{url}"
vllm_path = "{fake}"

[defaults]
client = "vllm"
dataset = {{ name = "random", input_len = 16, output_len = 4 }}

[slo]
p99_ttft = "<= 45ms"

[optimize]
search = "max_concurrency"
min = 1
max = 16
probe = {{ multiplier = 1, floor = 5 }}
bisect = {{ multiplier = 1, floor = 5 }}
validation = {{ multiplier = 1, floor = 5 }}
"#,
            url = sim.url,
            fake = fake()
        ),
    )
    .unwrap();
    let results = dir.join("results");
    let out = run(
        &[
            "optimize",
            plan.to_str().unwrap(),
            "--results-dir",
            results.to_str().unwrap(),
            "--no-charts",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // The stand-in's TTFT is 10 ms per unit of concurrency: 4 is the most under 45 ms.
    let report = walk(&results)
        .into_iter()
        .find(|p| p.file_name().unwrap() == "optimization_report.json")
        .expect("an optimization report");
    let r = read_json(&report);
    assert_eq!(r["optimal_value"], 4, "{r}");
    assert_eq!(
        (&r["highest_pass"], &r["lowest_fail"]),
        (&4.into(), &5.into())
    );
    assert_eq!(r["metrics_at_optimal"]["p99_ttft_ms"].as_f64(), Some(40.0));
    // Each point of the search is vLLM's result.
    let probe = walk(&results)
        .into_iter()
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("probe_001")
        })
        .expect("a probe result");
    assert_eq!(read_json(&probe)["benchplan"]["engine"]["client"], "vllm");
}

#[test]
fn a_missing_vllm_is_a_clear_error_and_plans_it_cannot_run_are_refused() {
    let sim = SimProcess::start(&["--preset", "fast"]);
    let dir = tempdir("vllm-engine-missing");
    let write = |name: &str, svc: &str, dataset: &str| -> PathBuf {
        let p = dir.join(name);
        std::fs::write(
            &p,
            format!(
                "[services.gpu]\nbase_url = \"{}\"\nclient = \"vllm\"\n{svc}\n[defaults]\nnum_prompts = 2\ndataset = {dataset}\n",
                sim.url
            ),
        )
        .unwrap();
        p
    };
    let random = "{ name = \"random\", input_len = 8, output_len = 2 }";
    // `run` of a plan that must fail its one case: exit 1 and the report's text.
    let failed_report = |plan: &Path, results: &str, env: &[(&str, &str)]| -> String {
        let results = dir.join(results);
        let args = [
            "run",
            plan.to_str().unwrap(),
            "--results-dir",
            results.to_str().unwrap(),
            "--quiet",
        ];
        let out = run(&args, env);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        std::fs::read_to_string(batch_dir(&results).join("report.md")).unwrap()
    };
    // No vllm on PATH.
    let empty = tempdir("vllm-engine-empty-path");
    let plan = write("path.toml", "", random);
    let report = failed_report(&plan, "r1", &[("PATH", empty.to_str().unwrap())]);
    assert!(report.contains("pip install vllm"), "{report}");
    // A vllm_path that does not exist.
    let plan = write("bad.toml", "vllm_path = \"/nonexistent/bin/vllm\"", random);
    let report = failed_report(&plan, "r2", &[]);
    assert!(
        report.contains("/nonexistent/bin/vllm does not exist"),
        "{report}"
    );
    // A dataset vllm bench serve has no flags for: refused before anything runs.
    let plan = write(
        "mm.toml",
        &format!("vllm_path = \"{}\"", fake()),
        "{ name = \"random-mm\", input_len = 8, output_len = 2 }",
    );
    let out = run(&["validate", plan.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("client = \"vllm\"") && err.contains("random-mm"),
        "{err}"
    );
}
