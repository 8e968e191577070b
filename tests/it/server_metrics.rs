//! The server's own view of each case: `/metrics` scraped around and during the case,
//! checked against what the simulator counted (prefix-cache hits, speculative
//! decoding, running requests).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use benchplan::load::case::execute;
use benchplan::load::options::RunOptions;
use benchplan::plan::dataset::{Dataset, PrefixRepetitionDataset, RandomDataset};
use benchplan::plan::server_metrics::ServerMetricsSpec;
use benchplan::plan::sim::{Preset, SimParams};
use benchplan::plan::units::Dur;
use benchplan::plan::{Backend, CaseParams};
use benchplan::service::fleet::metrics_source;
use benchplan::service::target::resolve;
use serde_json::Value;

use crate::support::{batch_dir, benchplan, read_json, sim_service, stderr};

fn spec(interval_ms: u64) -> ServerMetricsSpec {
    ServerMetricsSpec {
        scrape_interval: Dur(Duration::from_millis(interval_ms)),
        ..ServerMetricsSpec::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_cache_hit_rate_and_spec_decode_are_what_the_simulator_counted() {
    let svc = sim_service(
        Preset::Fast,
        SimParams {
            enable_prefix_caching: Some(true),
            spec_decode_acceptance: Some(vec![0.7, 0.4]),
            ..SimParams::default()
        },
    );
    let mut resolved = resolve(&svc, false, None).await.unwrap();
    resolved.metrics = metrics_source(&resolved, &spec(50), "sim").await;
    assert!(resolved.metrics.is_some(), "the simulator serves /metrics");
    let p = CaseParams {
        backend: Some(Backend::Openai),
        dataset: Dataset::PrefixRepetition(PrefixRepetitionDataset {
            prefix_len: 128,
            suffix_len: 32,
            num_prefixes: 4,
            output_len: 12,
        }),
        num_prompts: 24,
        ignore_eos: Some(true),
        ..CaseParams::default()
    };
    let stats = || {
        let s = resolved.sim.as_ref().unwrap().stats();
        [
            s.prefix_queries.load(Relaxed),
            s.prefix_hits.load(Relaxed),
            s.spec_drafts.load(Relaxed),
            s.spec_draft_tokens.load(Relaxed),
            s.spec_accepted.load(Relaxed),
            s.spec_accepted_per_pos[0].load(Relaxed),
            s.spec_accepted_per_pos[1].load(Relaxed),
        ]
    };
    // One case: the hit rate and spec-decode stats from the scraped counters must
    // equal the simulator's own counts over that case.
    let mut rates = Vec::new();
    for step in ["cold", "warm", "reset"] {
        if step == "reset" {
            let r = resolved
                .client
                .post(format!("{}/reset_prefix_cache", resolved.base_url))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success());
        }
        let before = stats();
        // No smoke request: the simulator's counts over the case are then exactly the
        // measured requests' (the run test below shows the smoke request is excluded).
        let opts = RunOptions {
            smoke: false,
            ..RunOptions::default()
        };
        let r = execute(&resolved, &svc, &p, &opts).await.unwrap();
        let after = stats();
        let d: Vec<f64> = before
            .iter()
            .zip(after)
            .map(|(b, a)| (a - b) as f64)
            .collect();
        assert_eq!(r.summary.completed, 24);
        let sm = r.run.server_metrics.as_ref().expect("server metrics");
        assert_eq!(sm.counters["prefix_cache_queries"], d[0], "{step}");
        assert_eq!(sm.counters["prefix_cache_hits"], d[1], "{step}");
        assert_eq!(sm.counters["generation_tokens"], 24.0 * 12.0, "{step}");
        let rate = sm.prefix_cache_hit_rate_pct().unwrap();
        assert!((rate - d[1] / d[0] * 100.0).abs() < 1e-9);
        rates.push(rate);
        // vLLM's formulas over the simulator's counts.
        let sd = r
            .summary
            .spec_decode
            .as_ref()
            .unwrap_or_else(|| panic!("{sm:?} {d:?}"));
        assert_eq!(
            (sd.num_drafts, sd.draft_tokens, sd.accepted_tokens),
            (d[2] as u64, d[3] as u64, d[4] as u64),
            "{step}"
        );
        assert_eq!(d[3], 2.0 * d[2], "two draft tokens per draft");
        assert!((sd.acceptance_rate - d[4] / d[3] * 100.0).abs() < 1e-9);
        assert!((sd.acceptance_length - (1.0 + d[4] / d[2])).abs() < 1e-9);
        assert_eq!(
            sd.per_position_acceptance_rates,
            vec![d[5] / d[2], d[6] / d[2]]
        );
        // Conditional acceptance 0.7 then 0.4: 0.7 and 0.28 of the drafts.
        assert!((sd.per_position_acceptance_rates[0] - 0.7).abs() < 0.2);
        assert!((sd.per_position_acceptance_rates[1] - 0.28).abs() < 0.2);
    }
    // A cold cache hits only within the case (repeated prefixes); a warm one also
    // what the case before left; after a reset the case is cold again, hit for hit.
    assert!(rates[0] > 0.0, "{rates:?}");
    assert!(rates[1] > rates[0] + 10.0, "{rates:?}");
    assert_eq!(rates[2], rates[0], "{rates:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_running_series_peaks_at_the_cases_concurrency() {
    let svc = sim_service(
        Preset::Fast,
        SimParams {
            itl: Some(Dur(Duration::from_millis(20))),
            max_num_seqs: Some(64),
            ..SimParams::default()
        },
    );
    let mut resolved = resolve(&svc, false, None).await.unwrap();
    resolved.metrics = metrics_source(&resolved, &spec(20), "sim").await;
    let p = CaseParams {
        backend: Some(Backend::Openai),
        dataset: Dataset::Random(RandomDataset {
            input_len: 16,
            output_len: 15,
            ..RandomDataset::default()
        }),
        ignore_eos: Some(true),
        num_prompts: 16,
        max_concurrency: Some(4),
        ..CaseParams::default()
    };
    let r = execute(&resolved, &svc, &p, &RunOptions::default())
        .await
        .unwrap();
    let sm = r.run.server_metrics.as_ref().unwrap();
    // 16 requests of ~300 ms, 4 at a time: about 1.2 s, scraped every 20 ms.
    assert!(sm.t.len() >= 10, "{} scrapes", sm.t.len());
    assert!(sm.t.windows(2).all(|w| w[0] <= w[1]));
    let running: Vec<f64> = sm.series["running"].iter().flatten().copied().collect();
    let max = running.iter().copied().fold(0.0, f64::max);
    assert_eq!(max, 4.0, "{running:?}");
    assert_eq!(sm.gauges["running"].max, 4.0);
    assert!(
        sm.gauges["running"].mean > 2.0,
        "{:?}",
        sm.gauges["running"]
    );
    assert_eq!(
        sm.gauges["waiting"].max, 0.0,
        "the client never queues beyond 4"
    );
    assert_eq!(sm.failed_scrapes, 0);
}

fn run(dir: &Path, plan: &str) -> (std::process::Output, PathBuf) {
    let p = dir.join("plan.toml");
    std::fs::write(&p, plan).unwrap();
    let results = dir.join("r");
    let out = benchplan(&[
        "run",
        p.to_str().unwrap(),
        "--results-dir",
        results.to_str().unwrap(),
        "--quiet",
    ]);
    (out, results)
}

fn cases(results: &Path) -> Vec<Value> {
    let run = batch_dir(results);
    let m = read_json(&run.join("manifest.json"));
    m["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| read_json(&run.join(format!("{}.json", c["id"].as_str().unwrap()))))
        .collect()
}

#[test]
fn results_carry_vllms_spec_decode_keys_and_a_service_without_metrics_is_noted_once() {
    let dir = crate::support::tempdir("keys");
    // Acceptance 1, 1, 0: every draft accepts exactly its first two of three tokens.
    // 10 output tokens: the first from prefill, 9 from 3 drafts of 3 tokens each.
    let plan = r#"
[services.spec]
sim = { preset = "fast", spec_decode_acceptance = [1.0, 1.0, 0.0] }
server_metrics = { scrape_interval = "50ms" }

[services.bare]
sim = { preset = "fast" }
server_metrics = { path = "/no-metrics-here" }

[defaults]
backend = "openai"
dataset = { name = "random", input_len = 16, output_len = 10 }
ignore_eos = true
num_prompts = 8

[matrix]
max_concurrency = [1, 2]
"#;
    let (out, results) = run(&dir, plan);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(
        err.matches("service `bare`: no server metrics").count(),
        1,
        "{err}"
    );
    assert!(!err.contains("service `spec`: no server metrics"), "{err}");
    let all = cases(&results);
    assert_eq!(all.len(), 4);
    for r in &all {
        let sm = &r["benchplan"]["server_metrics"];
        if r["benchplan"]["service"] == "bare" {
            assert!(sm.is_null(), "{sm}");
            assert!(r.get("spec_decode_acceptance_rate").is_none());
            continue;
        }
        assert_eq!(sm["server"], "vllm", "{sm}");
        assert_eq!(sm["counters"]["generation_tokens"], 80.0);
        assert_eq!(r["spec_decode_num_drafts"], 24, "{r}");
        assert_eq!(r["spec_decode_draft_tokens"], 72);
        assert_eq!(r["spec_decode_accepted_tokens"], 48);
        assert!((r["spec_decode_acceptance_rate"].as_f64().unwrap() - 200.0 / 3.0).abs() < 1e-9);
        assert_eq!(r["spec_decode_acceptance_length"], 3.0);
        assert_eq!(
            r["spec_decode_per_position_acceptance_rates"],
            serde_json::json!([1.0, 1.0, 0.0])
        );
        assert!(sm["series"]["t"].is_array());
    }
}

/// The simulator reads like an engine: at concurrency 1 its KV cache holds one
/// sequence's blocks (prompt and output so far, 16-token blocks over 1024 of them), not
/// every prompt it ever cached; and random prompts that share no prefix get no prefix
/// hits (no warm-up resends the first prompt here).
#[test]
fn kv_use_is_the_running_sequences_blocks_and_random_prompts_get_no_prefix_hits() {
    let dir = crate::support::tempdir("sm-kv");
    let (out, results) = run(
        &dir,
        r#"
name = "kv"
[services.sim]
sim = { preset = "tiny", enable_prefix_caching = true }
[defaults]
backend = "openai"
dataset = { name = "random", input_len = 128, output_len = 16 }
num_prompts = 60
num_warmups = 0
max_concurrency = 1
server_metrics = { scrape_interval = "50ms" }
[report]
charts = false
"#,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = &cases(&results)[0];
    let sm = &r["benchplan"]["server_metrics"];
    // One sequence of at most 128 + 16 tokens: 9 blocks of 1024, 0.88%.
    let kv = sm["gauges"]["kv_cache_usage_pct"]["max"].as_f64().unwrap();
    assert!(kv > 0.0 && kv <= 9.0 / 1024.0 * 100.0 + 1e-9, "{kv}");
    assert_eq!(
        sm["prefix_cache_hit_rate_pct"].as_f64(),
        Some(0.0),
        "{sm:#}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
