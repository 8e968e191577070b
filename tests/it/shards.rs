//! Plans run as shards (`run --shard`, `--shard-from-env`) and put back together with
//! `benchplan merge`: coverage, verdicts, pooled repeats and baseline comparison.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::support::{batch_dir, benchplan, read_json, stderr, stdout};

/// A plan of three simulated services `a`, `b`, `c` with two cases each (c1, c3).
fn three_services(dir: &Path, sim: &str, defaults: &str, slo: &str) -> PathBuf {
    let plan = dir.join("plan.toml");
    let text = format!(
        "[services.a]\nsim = {sim}\n[services.b]\nsim = {sim}\n[services.c]\nsim = {sim}\n\
         [defaults]\n{defaults}\n[matrix]\nmax_concurrency = [1, 3]\n[slo]\n{slo}\n"
    );
    std::fs::write(&plan, text).unwrap();
    plan
}

/// Shard `index` of `count`, as the pod of a Kubernetes Indexed Job runs it.
fn run_shard(plan: &Path, results: &Path, index: usize, count: usize, extra: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .arg("run")
        .arg(plan)
        .args([
            "--quiet",
            "--shard-from-env",
            "--shard-count",
            &count.to_string(),
        ])
        .args(extra)
        .arg("--results-dir")
        .arg(results)
        .env("JOB_COMPLETION_INDEX", index.to_string())
        .env_remove("BENCHPLAN_SHARD_INDEX")
        .env_remove("CI_NODE_INDEX")
        .output()
        .unwrap()
}

/// `benchplan` with these arguments (paths included).
fn bin(args: &[&std::ffi::OsStr]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args(args)
        .output()
        .unwrap()
}

/// The shard folders under a results folder: (index, folder, manifest), by index.
fn shard_dirs(results: &Path) -> Vec<(u64, PathBuf, Value)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(results.join("batch")).unwrap() {
        let d = e.unwrap().path();
        if d.is_symlink() {
            continue; // `latest`
        }
        let m = read_json(&d.join("manifest.json"));
        out.push((m["shard"]["index"].as_u64().unwrap(), d, m));
    }
    out.sort_by_key(|s| s.0);
    out
}

#[test]
fn shards_from_job_completion_index_split_the_plan_by_service() {
    let dir = crate::support::tempdir("by-service");
    let plan = three_services(
        &dir,
        "{ preset = \"fast\" }",
        "num_prompts = 4\ndataset = { name = \"random\", input_len = 8, output_len = 2 }",
        "output_throughput = \">= 1000000000\"",
    );
    let p = plan.to_str().unwrap();
    let results = dir.join("r");
    let run = |index: usize, extra: &[&str]| run_shard(&plan, &results, index, 3, extra);
    for i in 0..3 {
        // The SLO (a billion tokens a second) fails on every shard; the verdict is deferred.
        let out = run(i, &["--defer-verdict"]);
        assert_eq!(out.status.code(), Some(0), "shard {i}: {}", stderr(&out));
    }
    let mut owned: Vec<(u64, Vec<String>)> = Vec::new();
    let mut hashes = Vec::new();
    for (index, d, m) in shard_dirs(&results) {
        assert_eq!(m["shard"]["count"], 3);
        assert_eq!(m["shard"]["plan_cases"], 6);
        hashes.push(m["plan_hash"].as_str().unwrap().to_string());
        let ids: Vec<String> = m["shard"]["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        // Results as a single run writes them, for the shard's own cases only.
        for id in &ids {
            assert!(d.join(format!("{id}.json")).is_file(), "{id}");
        }
        owned.push((index, ids));
    }
    owned.sort();
    assert_eq!(owned.iter().map(|o| o.0).collect::<Vec<_>>(), [0, 1, 2]);
    hashes.dedup();
    assert_eq!(hashes.len(), 1, "one plan hash on every shard");
    // One whole service per shard, and together every case of the plan exactly once.
    let listed = stdout(&benchplan(&["cases", p, "--json"]));
    let all: Vec<serde_json::Value> = serde_json::from_str(&listed).unwrap();
    let mut union: Vec<String> = owned.iter().flat_map(|o| o.1.clone()).collect();
    union.sort();
    let mut want: Vec<String> = all
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    want.sort();
    assert_eq!(union, want);
    for (_, ids) in &owned {
        let first = &ids[0][..1];
        assert!(
            ids.len() == 2 && ids.iter().all(|id| id.starts_with(first)),
            "{ids:?}"
        );
    }
    // Without --defer-verdict the shard's SLO failure is its exit code; too many shards is a plan error.
    let out = run(0, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let out = benchplan(&[
        "run",
        p,
        "--shard",
        "0/4",
        "--results-dir",
        results.to_str().unwrap(),
    ]);
    crate::support::exits_saying(&out, 2, "4 shards but the plan has only 3 services");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_plan_run_whole_and_as_merged_shards_gives_the_same_cases_and_a_missing_shard_is_named() {
    let dir = crate::support::tempdir("merge");
    // Fixed simulated latencies, so whole and merged runs can be held to the same numbers.
    let plan = three_services(
        &dir,
        "{ preset = \"ground-truth\", prefill_overhead = \"4ms\", itl = \"1ms\" }",
        "num_prompts = 12\ndataset = { name = \"random\", input_len = 8, output_len = 3 }",
        "success_rate = \">= 99%\"",
    );
    let p = plan.to_str().unwrap();
    // 1. Unsharded.
    let whole = dir.join("whole");
    let out = benchplan(&[
        "run",
        p,
        "--quiet",
        "--results-dir",
        whole.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // 2. Three shards, one process per Job index, into one shared folder; then merged.
    let shared = dir.join("shared");
    for i in 0..3 {
        let out = run_shard(&plan, &shared, i, 3, &["--defer-verdict"]);
        assert_eq!(out.status.code(), Some(0), "shard {i}: {}", stderr(&out));
    }
    let merged = dir.join("merged");
    let junit = dir.join("junit.xml");
    let out = bin(&[
        "merge".as_ref(),
        shared.as_ref(),
        "--results-dir".as_ref(),
        merged.as_ref(),
        "--junit".as_ref(),
        junit.as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows = |run: &std::path::Path| -> Vec<Vec<String>> {
        let b = batch_dir(run);
        let mut rdr = csv::Reader::from_path(b.join("summary.csv")).unwrap();
        let h = rdr.headers().unwrap().clone();
        let col = |name: &str| h.iter().position(|x| x == name).unwrap();
        let keep = [
            "case_id",
            "service",
            "status",
            "completed",
            "failed",
            "total_input_tokens",
            "total_output_tokens",
        ]
        .map(col);
        rdr.records()
            .map(|r| {
                let r = r.unwrap();
                keep.iter().map(|&i| r[i].to_string()).collect()
            })
            .collect()
    };
    let w = rows(&whole);
    assert_eq!(w.len(), 6);
    assert_eq!(
        rows(&merged),
        w,
        "case for case: ids, services, request and token counts"
    );
    // Latencies within measurement noise: the simulator's 4 ms prefill dominates.
    for (id, w) in case_results(&whole) {
        let m = read_json(&batch_dir(&merged).join(format!("{id}.json")));
        let (a, b) = (
            w["mean_ttft_ms"].as_f64().unwrap(),
            m["mean_ttft_ms"].as_f64().unwrap(),
        );
        assert!(
            (a - b).abs() <= 0.3 * a.max(b) + 1.0,
            "{id}: mean TTFT {a} whole, {b} merged"
        );
    }
    let report = std::fs::read_to_string(batch_dir(&merged).join("report.md")).unwrap();
    assert!(
        report.contains("**PASS**: 6 case(s), 0 not measured, 0 SLO failure(s)."),
        "{report}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("success_rate") && xml.contains("a-c1-"),
        "{xml}"
    );
    // The OpenMetrics file: one series per case and metric, labelled, ending in # EOF.
    let prom = std::fs::read_to_string(batch_dir(&merged).join("metrics.prom")).unwrap();
    assert!(prom.ends_with("# EOF\n"), "{prom}");
    let completed: Vec<&str> = prom
        .lines()
        .filter(|l| l.starts_with("benchplan_completed{"))
        .collect();
    assert_eq!(completed.len(), 6, "{prom}");
    assert!(
        completed.iter().all(|l| l.ends_with("} 12")
            && l.contains("service=\"")
            && l.contains("max_concurrency=\"")),
        "{completed:?}"
    );
    assert!(
        prom.contains("# TYPE benchplan_p99_ttft_ms gauge"),
        "{prom}"
    );
    // 3. One shard missing: an error that names it; with --allow-partial, exit 1 and the
    // report says what is missing.
    let partial = dir.join("partial");
    let mut kept = 0;
    for (index, d, _) in shard_dirs(&shared) {
        if index != 1 {
            let to = partial.join(d.file_name().unwrap());
            std::fs::create_dir_all(&to).unwrap();
            for f in std::fs::read_dir(&d).unwrap() {
                let f = f.unwrap().path();
                // Files only: a shard's charts/ folder is redrawn by merge.
                if f.is_file() {
                    std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
                }
            }
            kept += 1;
        }
    }
    assert_eq!(kept, 2);
    let out = bin(&[
        "merge".as_ref(),
        partial.as_ref(),
        "--results-dir".as_ref(),
        dir.join("m2").as_ref(),
    ]);
    crate::support::exits_saying(&out, 1, "shard 1/3 missing (2 of 6 cases not covered)");
    let out = bin(&[
        "merge".as_ref(),
        "--allow-partial".as_ref(),
        partial.as_ref(),
        "--results-dir".as_ref(),
        dir.join("m3").as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = std::fs::read_to_string(batch_dir(&dir.join("m3")).join("report.md")).unwrap();
    assert!(
        report.contains("INCOMPLETE: shard 1/3 did not report; 2 of 6 cases are missing.")
            && report.contains("**FAIL**: 6 case(s), 2 not measured"),
        "{report}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// The case results of the one run under `results` (not repeats), by case id.
fn case_results(results: &Path) -> Vec<(String, Value)> {
    let run = batch_dir(results);
    let m = read_json(&run.join("manifest.json"));
    m["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let id = c["id"].as_str().unwrap().to_string();
            let r = read_json(&run.join(format!("{id}.json")));
            (id, r)
        })
        .collect()
}

/// numpy.percentile's default (linear) method, as vLLM takes every percentile.
fn numpy_percentile(mut xs: Vec<f64>, p: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let idx = p / 100.0 * (xs.len() - 1) as f64;
    let (lo, hi) = (idx.floor() as usize, idx.ceil() as usize);
    xs[lo] + (xs[hi] - xs[lo]) * (idx - lo as f64)
}

/// Case `id` in run folder `run` pools the raw samples of its three repeat files: its
/// percentiles are those of every request, to HDR precision.
fn assert_pooled(run: &Path, id: &str) {
    let r = read_json(&run.join(format!("{id}.json")));
    let reps: Vec<Value> = (1..=3)
        .map(|k| read_json(&run.join(format!("{id}.rep{k}.json"))))
        .collect();
    let ms = |v: &Value| v.as_f64().unwrap() * 1000.0;
    let flat = |key: &str| -> Vec<f64> {
        reps.iter()
            .flat_map(|r| {
                r[key]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(ms)
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let itls: Vec<f64> = reps
        .iter()
        .flat_map(|r| r["itls"].as_array().unwrap().iter())
        .flat_map(|l| l.as_array().unwrap().iter().map(ms).collect::<Vec<_>>())
        .collect();
    let ttfts = flat("ttfts");
    assert_eq!(ttfts.len(), 48, "{id}: 3 runs × 16 requests");
    for (key, xs, p) in [
        ("p99_ttft_ms", &ttfts, 99.0),
        ("median_ttft_ms", &ttfts, 50.0),
        ("p99_itl_ms", &itls, 99.0),
    ] {
        let want = numpy_percentile(xs.clone(), p);
        let got = r[key].as_f64().unwrap();
        assert!(
            (got - want).abs() <= want * 1e-3 + 0.001,
            "{id} {key}: pooled {got} ms, numpy over all {} samples {want} ms",
            xs.len()
        );
    }
    let mean = ttfts.iter().sum::<f64>() / ttfts.len() as f64;
    assert!((r["mean_ttft_ms"].as_f64().unwrap() - mean).abs() < 1e-6);
    // The three runs' own p99s average to something else whenever their tails differ;
    // the pooled p99 is not that average unless they agree.
    assert_eq!(
        r["benchplan"]["repeats"]["runs"],
        serde_json::json!([1, 2, 3])
    );
    assert_eq!(r["completed"], 16, "{id}: completed per run");
    assert_eq!(
        r["benchplan"]["slo_verdicts"][0]["actual"],
        r["p99_ttft_ms"]
    );
}

#[test]
fn repeats_split_over_shards_pool_every_request_and_the_merge_compares_with_a_baseline() {
    let dir = crate::support::tempdir("repeats");
    let plan = dir.join("plan.toml");
    // Two slots for up to four requests: queueing spreads the TTFTs into a real tail.
    // The whole run and the merged shards are separate runs compared with each other,
    // so their latencies must be long enough (tens of ms) and the threshold wide enough
    // (11×) that a busy runner's stall cannot pass for a regression; the planted
    // regression below is 100×.
    std::fs::write(
        &plan,
        "[services.s]\nsim = { preset = \"ground-truth\", prefill_overhead = \"20ms\", itl = \"5ms\", max_num_seqs = 2 }\n\
         [defaults]\nnum_prompts = 16\ndataset = { name = \"random\", input_len = 8, output_len = 4 }\n\
         [matrix]\nmax_concurrency = [2, 4]\n[execution]\nrepeats = 3\nsave_detailed = true\n\
         [slo]\np99_ttft = \"<= 2s\"\n[report]\nregression_threshold = \"1000%\"\nmeasure = \"whole\"\n",
    )
    .unwrap();
    let p = plan.to_str().unwrap();
    // One machine pools its repeats.
    let whole = dir.join("whole");
    let out = benchplan(&[
        "run",
        p,
        "--quiet",
        "--results-dir",
        whole.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let cases = case_results(&whole);
    assert_eq!(cases.len(), 2);
    for (id, _) in &cases {
        assert_pooled(&batch_dir(&whole), id);
    }
    // Three shards, each with one repeat of every case.
    let shared = dir.join("shared");
    for i in 0..3 {
        let out = run_shard(&plan, &shared, i, 3, &["--shard-by", "repeat"]);
        assert_eq!(out.status.code(), Some(0), "shard {i}: {}", stderr(&out));
    }
    for (index, d, m) in shard_dirs(&shared) {
        for (id, _) in &cases {
            assert_eq!(m["shard"]["repeats"][id], serde_json::json!([index + 1]));
            assert!(d.join(format!("{id}.rep{}.json", index + 1)).is_file());
        }
    }
    // Merged, and compared with the whole run as its baseline.
    let merged = dir.join("merged");
    let whole_run = batch_dir(&whole);
    let merge = |baseline: &Path, into: &Path| {
        bin(&[
            "merge".as_ref(),
            shared.as_ref(),
            "--results-dir".as_ref(),
            into.as_ref(),
            "--baseline".as_ref(),
            baseline.as_ref(),
        ])
    };
    let out = merge(&whole_run, &merged);
    crate::support::exits_saying(&out, 0, "0 regression(s)");
    let run = batch_dir(&merged);
    for (id, w) in &cases {
        assert_pooled(&run, id);
        let m = read_json(&run.join(format!("{id}.json")));
        assert_eq!(m["total_output_tokens"], w["total_output_tokens"], "{id}");
    }
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains("regression(s) against the baseline"),
        "{report}"
    );
    // A baseline a hundred times faster at TTFT (its p99 and every sample: a regression
    // must be beyond the runs' noise too): both cases regress, exit 4.
    let fast = dir.join("fast");
    std::fs::create_dir_all(&fast).unwrap();
    for f in std::fs::read_dir(&whole_run).unwrap() {
        let f = f.unwrap().path();
        if f.is_file() {
            std::fs::copy(&f, fast.join(f.file_name().unwrap())).unwrap();
        }
    }
    for (id, w) in &cases {
        let mut w = w.clone();
        w["p99_ttft_ms"] = serde_json::json!(w["p99_ttft_ms"].as_f64().unwrap() / 100.0);
        // Each run's own p99 too (a repeated case is compared run by run).
        let runs: Vec<f64> = w["benchplan"]["repeats"]["values"]["p99_ttft_ms"]
            .as_array()
            .expect("a repeated case keeps each run's p99")
            .iter()
            .map(|v| v.as_f64().unwrap() / 100.0)
            .collect();
        w["benchplan"]["repeats"]["values"]["p99_ttft_ms"] = serde_json::json!(runs);
        let h = benchplan::metrics::hist::decode(
            w["benchplan"]["histograms_us"]["ttft"].as_str().unwrap(),
        )
        .unwrap();
        let faster = benchplan::metrics::hist::from_seconds(h.iter_recorded().flat_map(|v| {
            let s = v.value_iterated_to() as f64 / 1e6 / 100.0;
            std::iter::repeat_n(s, v.count_at_value() as usize)
        }));
        w["benchplan"]["histograms_us"]["ttft"] =
            serde_json::json!(benchplan::metrics::hist::encode(&faster));
        std::fs::write(fast.join(format!("{id}.json")), w.to_string()).unwrap();
    }
    let out = merge(&fast, &dir.join("merged2"));
    crate::support::exits_saying(&out, 4, "2 regression(s)");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_merged_run_joins_the_history_once_and_its_shards_do_not() {
    let dir = crate::support::tempdir("merge-history");
    let history = dir.join("history.jsonl");
    let plan = three_services(
        &dir,
        "{ preset = \"fast\" }",
        "num_prompts = 4\ndataset = { name = \"random\", input_len = 8, output_len = 2 }",
        "success_rate = \">= 99%\"",
    );
    let text = std::fs::read_to_string(&plan).unwrap();
    std::fs::write(
        &plan,
        format!("{text}[report]\nhistory = \"{}\"\n", history.display()),
    )
    .unwrap();
    let shared = dir.join("shared");
    for i in 0..3 {
        let out = run_shard(&plan, &shared, i, 3, &["--defer-verdict"]);
        assert_eq!(out.status.code(), Some(0), "shard {i}: {}", stderr(&out));
    }
    assert!(!history.exists(), "a shard appended itself");
    let merged = dir.join("merged");
    let out = bin(&[
        "merge".as_ref(),
        shared.as_ref(),
        "--results-dir".as_ref(),
        merged.as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = std::fs::read_to_string(&history).unwrap();
    assert_eq!(
        lines.lines().count(),
        6,
        "three services × two concurrencies: {lines}"
    );
    let report = std::fs::read_to_string(batch_dir(&merged).join("report.md")).unwrap();
    assert!(report.contains("## Trend"), "{report}");
    std::fs::remove_dir_all(&dir).ok();
}
