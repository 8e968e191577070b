//! The load generator against the simulator: measured against injected ground truth,
//! failures counted by kind as injected, and the bench command's result file.

use benchplan::load::case::CaseError;
use benchplan::load::case::execute;
use benchplan::load::options::{RunError, RunOptions};
use benchplan::plan::dataset::RandomDataset;
use benchplan::plan::sim::{FailureType, Preset, SimParams};
use benchplan::plan::units::{Dur, Rate};
use benchplan::plan::{Backend, CaseParams, Dataset, Metric, Service};
use benchplan::service::target::resolve;
use serde_json::Value;

use crate::support::{benchplan, sim_service, stderr, stdout};

/// Options without the smoke request, for runs whose first request may fail on purpose.
fn no_smoke() -> RunOptions {
    RunOptions {
        smoke: false,
        ..RunOptions::default()
    }
}

fn fixture_tokenizer() -> String {
    crate::support::repo()
        .join("tests/fixtures/tokenizer")
        .display()
        .to_string()
}

fn params(n: u64, input: u64, output: u64) -> CaseParams {
    crate::support::random_case(Backend::Openai, n, input, output)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ground_truth_latencies_are_measured_exactly() {
    crate::support::timing_check(3, ground_truth_once).await;
}

async fn ground_truth_once() -> Result<(), String> {
    // Prefill 15 ms + 50 µs per token over 100 tokens = 20 ms TTFT; 10 ms per token after.
    let svc = crate::support::prefill_sim(0.015, 50e-6);
    let resolved = resolve(&svc, false, None).await.unwrap();
    let p = CaseParams {
        max_concurrency: Some(1),
        ..params(20, 100, 11)
    };
    let r = execute(&resolved, &svc, &p, &RunOptions::default())
        .await
        .unwrap();
    let s = &r.summary;
    assert_eq!((s.completed, s.failed), (20, 0));
    assert_eq!(
        s.total_input_tokens, 2000,
        "the server counted exactly the requested input length"
    );
    assert_eq!(s.total_output_tokens, 220);
    // TTFT is judged on the median: a request the OS delays on a busy machine moves a
    // mean of 20 by its delay / 20. ITL and TPOT keep the mean: the simulator sends each
    // token on its own deadline, so one late chunk makes one long gap and one short one.
    let ttft = s.stat(Metric::Ttft).unwrap().median;
    let itl = s.stat(Metric::Itl).unwrap().mean;
    let tpot = s.stat(Metric::Tpot).unwrap().mean;
    let timing = if (ttft - 20.0).abs() >= 3.0 {
        Err(format!("median TTFT {ttft:.3} ms, injected 20 ms"))
    } else if (itl - 10.0).abs() >= 0.3 {
        Err(format!("mean ITL {itl:.3} ms, injected 10 ms"))
    } else if (tpot - 10.0).abs() >= 0.3 {
        Err(format!("mean TPOT {tpot:.3} ms, injected 10 ms"))
    } else {
        Ok(())
    };
    // TPOT is (E2EL - TTFT) / (n - 1) on each request, checked by hand here.
    let mut tpots: Vec<f64> = r
        .run
        .records
        .iter()
        .map(|x| (x.sample.latency - x.sample.ttft) / 10.0 * 1e3)
        .collect();
    tpots.sort_by(f64::total_cmp);
    let mean = tpots.iter().sum::<f64>() / tpots.len() as f64;
    assert!((mean - tpot).abs() < 1e-9);
    // E2EL = TTFT + sum(ITL) exactly: the last token chunk ends the measurement.
    for x in &r.run.records {
        let sum: f64 = x.sample.itl.iter().sum();
        assert!((x.sample.ttft + sum - x.sample.latency).abs() < 1e-9);
        assert_eq!(x.sample.itl.len(), 10);
    }
    assert!(r.run.smoke.as_ref().is_some_and(|s| s.ok));
    timing
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_concurrency_cap_holds_and_queueing_is_reported() {
    let svc = sim_service(Preset::GroundTruth, SimParams::default());
    let resolved = resolve(&svc, false, None).await.unwrap();
    let p = CaseParams {
        max_concurrency: Some(3),
        ..params(12, 10, 5)
    };
    let r = execute(&resolved, &svc, &p, &RunOptions::default())
        .await
        .unwrap();
    // The exact peak (vLLM's bucketed figure counts requests that share a second).
    assert_eq!(r.summary.max_concurrent_requests_exact, 3);
    // With rate inf and 3 slots, later requests wait for earlier ones: 4 waves of 60 ms.
    let q = r.summary.client_queue.as_ref().unwrap();
    assert!(
        q.percentiles.last().unwrap().1 > 150.0,
        "the last wave waited about 180 ms: {q:?}"
    );
    let mut starts: Vec<f64> = r.run.records.iter().map(|x| x.start).collect();
    starts.sort_by(f64::total_cmp);
    assert!(
        starts[3] - starts[0] > 0.05,
        "the fourth request starts only when a slot frees"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_counted_by_kind_as_injected() {
    let svc = sim_service(
        Preset::Fast,
        SimParams {
            failure_rate: Some(0.3),
            failure_types: Some(vec![
                FailureType::RateLimit,
                FailureType::ServerError,
                FailureType::Unavailable,
            ]),
            disconnect_rate: Some(0.1),
            seed: Some(11),
            ..SimParams::default()
        },
    );
    let resolved = resolve(&svc, false, None).await.unwrap();
    let sim = resolved.sim.as_ref().unwrap();
    let p = params(600, 8, 20);
    let opts = RunOptions {
        smoke: false,
        ..RunOptions::default()
    };
    let r = execute(&resolved, &svc, &p, &opts).await.unwrap();
    let s = &r.summary;
    let kinds = &s.errors_by_kind;
    let stats = sim.stats();
    assert_eq!(
        kinds.get("http_429").copied().unwrap_or(0),
        stats.injected(429)
    );
    assert_eq!(
        kinds.get("http_500").copied().unwrap_or(0),
        stats.injected(500)
    );
    assert_eq!(
        kinds.get("http_503").copied().unwrap_or(0),
        stats.injected(503)
    );
    assert_eq!(
        kinds.get("stream_broken").copied().unwrap_or(0),
        stats
            .injected_cuts
            .load(std::sync::atomic::Ordering::Relaxed)
    );
    assert_eq!(s.failed, kinds.values().sum::<u64>());
    assert_eq!(s.completed + s.failed, 600);
    assert!(
        s.failed > 150 && s.failed < 300,
        "about 30% + 7% injected: {kinds:?}"
    );
    assert!(
        kinds
            .keys()
            .all(|k| ["http_429", "http_500", "http_503", "stream_broken"].contains(&k.as_str())),
        "{kinds:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_nobody_listens_on_gives_connection_errors() {
    let svc = Service {
        base_url: Some("http://127.0.0.1:9".into()),
        model: Some("m".into()),
        tokenizer: Some(fixture_tokenizer()),
        ..Service::default()
    };
    let resolved = resolve(&svc, false, None).await.unwrap();
    let p = params(5, 8, 4);
    let r = execute(&resolved, &svc, &p, &no_smoke()).await.unwrap();
    assert_eq!((r.summary.completed, r.summary.failed), (0, 5));
    assert_eq!(r.summary.errors_by_kind.get("connection"), Some(&5));
    let e = execute(&resolved, &svc, &p, &RunOptions::default())
        .await
        .unwrap_err();
    // The kind is typed (a caller branches on it); the words say it too.
    assert!(
        matches!(&e, CaseError::Run(RunError::Smoke { attempts: 3, kind, .. }) if kind == "connection"),
        "{e:?}"
    );
    let e = e.to_string();
    assert!(
        e.contains("smoke request failed 3 times") && e.contains("connection"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poisson_schedule_is_kept() {
    let svc = sim_service(Preset::Fast, SimParams::default());
    let resolved = resolve(&svc, false, None).await.unwrap();
    let p = CaseParams {
        request_rate: Rate(200.0),
        seed: 3,
        ..params(200, 8, 4)
    };
    let r = execute(&resolved, &svc, &p, &RunOptions::default())
        .await
        .unwrap();
    // The last arrival is scheduled at exactly N / rate = 1 s (vLLM's rescaling).
    let last = r
        .run
        .records
        .iter()
        .map(|x| x.scheduled)
        .fold(0.0, f64::max);
    assert!((last - 1.0).abs() < 1e-9);
    let lag = r.summary.schedule_lag.as_ref().unwrap();
    assert!(lag.percentiles[0].1 < 1.0, "median schedule lag {lag:?} ms");
    let achieved = r.summary.completed as f64 / r.run.duration;
    assert!(
        (achieved / 200.0 - 1.0).abs() < 0.05,
        "achieved {achieved:.1} req/s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_embeddings_and_rerank_backends() {
    let svc = sim_service(Preset::Fast, SimParams::default());
    let resolved = resolve(&svc, false, None).await.unwrap();
    let chat = CaseParams {
        backend: Some(Backend::OpenaiChat),
        ..params(5, 8, 6)
    };
    let r = execute(&resolved, &svc, &chat, &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (r.summary.completed, r.summary.total_output_tokens),
        (5, 30)
    );
    // vLLM's chat stream opens with a role-only chunk, which is not a token event
    // (vLLM 0.33's `_choice_has_streamed_output`): one event per token.
    assert_eq!(r.run.records[0].sample.chunks, 6);
    let emb = CaseParams {
        backend: Some(Backend::OpenaiEmbeddings),
        dataset: Dataset::Random(RandomDataset {
            input_len: 8,
            batch_size: 4,
            ..RandomDataset::default()
        }),
        percentile_metrics: None,
        ignore_eos: None,
        ..params(5, 8, 1)
    };
    let r = execute(&resolved, &svc, &emb, &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (r.summary.completed, r.summary.total_input_tokens),
        (5, 160)
    );
    assert!(r.summary.stat(Metric::E2el).is_some() && r.summary.stat(Metric::Ttft).is_none());
    let rerank = CaseParams {
        backend: Some(Backend::VllmRerank),
        dataset: Dataset::RandomRerank(benchplan::plan::dataset::RandomRerankDataset {
            input_len: 5,
            batch_size: 3,
            ..Default::default()
        }),
        percentile_metrics: None,
        ignore_eos: None,
        ..params(4, 5, 1)
    };
    let r = execute(&resolved, &svc, &rerank, &RunOptions::default())
        .await
        .unwrap();
    assert_eq!((r.summary.completed, r.summary.total_input_tokens), (4, 80));
}

#[test]
fn bench_writes_a_vllm_compatible_result_file() {
    let dir = std::env::temp_dir().join(format!("benchplan-bench-{}", std::process::id()));
    let out = benchplan(&[
        "bench",
        "--sim",
        "fast",
        "--sim-set",
        "failure_rate=0.2",
        "--sim-set",
        "failure_types=[\"server_error\"]",
        "--backend",
        "openai-chat",
        "--num-prompts",
        "200",
        "--random-input-len",
        "16",
        "--random-output-len",
        "4",
        "--max-concurrency",
        "8",
        "--metric-percentiles",
        "50,99.9",
        "--goodput",
        "ttft:1000",
        "tpot:500",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.to_str().unwrap(),
        "--metadata",
        "run=ci",
        "--disable-tqdm",
        "--header",
        "X-Secret=hunter2",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("Serving Benchmark Result")
            && text.contains("P99.9 TTFT (ms):")
            && text.contains("http_500:"),
        "{text}"
    );
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    let name = files[0].file_name().unwrap().to_str().unwrap().to_string();
    assert!(
        name.starts_with("openai-chat-infqps-concurrency8-benchplan-sim-")
            && name.ends_with(".json"),
        "{name}"
    );
    let raw = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        !raw.contains("hunter2"),
        "header values never reach results"
    );
    let v: Value = serde_json::from_str(&raw).unwrap();
    for key in [
        "date",
        "endpoint_type",
        "backend",
        "label",
        "model_id",
        "tokenizer_id",
        "num_prompts",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "latencies",
        "start_times",
        "queue_times",
        "generated_texts",
        "errors",
        "max_output_tokens_per_s",
        "max_concurrent_requests",
        "mean_ttft_ms",
        "median_ttft_ms",
        "std_ttft_ms",
        "p50_ttft_ms",
        "p99.9_ttft_ms",
        "mean_tpot_ms",
        "p99.9_itl_ms",
    ] {
        assert!(v.get(key).is_some(), "missing key {key}");
    }
    assert_eq!(v["request_rate"], "inf");
    assert_eq!(v["run"], "ci");
    assert_eq!(
        v["completed"].as_u64().unwrap() + v["failed"].as_u64().unwrap(),
        200
    );
    assert_eq!(v["benchplan"]["errors_by_kind"]["http_500"], v["failed"]);
    assert_eq!(v["benchplan"]["token_count_source"], "usage");
    assert!(v["benchplan"]["histograms_us"]["ttft"].is_string());
    assert_eq!(v["output_lens"].as_array().unwrap().len(), 200);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bench_rejects_bad_flags_with_exit_2() {
    let out = benchplan(&["bench", "--sim", "fast", "--max-concurrency", "0"]);
    crate::support::exits_saying(&out, 2, "max_concurrency must be at least 1");
    let out = benchplan(&[
        "bench",
        "--sim",
        "fast",
        "--backend",
        "openai-chat",
        "--endpoint",
        "/v1/completions",
    ]);
    crate::support::exits_saying(&out, 2, "does not fit backend");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_timeouts_are_counted() {
    let svc = sim_service(
        Preset::GroundTruth,
        SimParams {
            itl: Some(Dur::from_secs_f64(0.05)),
            ..SimParams::default()
        },
    );
    let resolved = resolve(&svc, false, None).await.unwrap();
    let p = CaseParams {
        request_timeout: Some(Dur::from_secs_f64(0.1)),
        ..params(4, 8, 20)
    };
    let r = execute(&resolved, &svc, &p, &no_smoke()).await.unwrap();
    assert_eq!(
        r.summary.errors_by_kind.get("timeout"),
        Some(&4),
        "{:?}",
        r.summary.errors_by_kind
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ready_check_waits_for_a_starting_server_and_warmups_are_not_measured() {
    let svc = sim_service(
        Preset::Fast,
        SimParams {
            startup_delay: Some(Dur::from_secs_f64(0.4)),
            ..SimParams::default()
        },
    );
    let resolved = resolve(&svc, false, None).await.unwrap();
    // vLLM retries 5 s after a failed try, and only within the timeout: the second
    // try, at 5 s, finds the server up.
    let p = CaseParams {
        ready_check_timeout: Dur::from_secs_f64(6.0),
        num_warmups: 3,
        ..params(10, 8, 4)
    };
    let t = std::time::Instant::now();
    let r = execute(&resolved, &svc, &p, &RunOptions::default())
        .await
        .unwrap();
    assert!(t.elapsed().as_secs_f64() >= 0.4);
    assert_eq!((r.summary.completed, r.summary.failed), (10, 0));
    // The server saw the ready check, the smoke request and 3 warmups on top of the 10 measured.
    let served = resolved
        .sim
        .as_ref()
        .unwrap()
        .stats()
        .requests_ok
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(served, 10 + 3 + 1 + 1);

    let svc = sim_service(
        Preset::Fast,
        SimParams {
            startup_delay: Some(Dur::from_secs_f64(30.0)),
            ..SimParams::default()
        },
    );
    let resolved = resolve(&svc, false, None).await.unwrap();
    let p = CaseParams {
        ready_check_timeout: Dur::from_secs_f64(0.3),
        ..params(10, 8, 4)
    };
    let e = execute(&resolved, &svc, &p, &RunOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&e, CaseError::Run(RunError::NotReady(..))),
        "{e:?}"
    );
    let e = e.to_string();
    assert!(
        e.contains("not ready within") && e.contains("http_503"),
        "{e}"
    );
}

#[test]
fn sigint_sigterm_and_sighup_save_a_partial_result_marked_interrupted() {
    // 128 + the signal: 130 for Ctrl-C, 143 for Kubernetes' SIGTERM, 129 for SIGHUP.
    for (signal, code) in [
        (libc::SIGINT, 130),
        (libc::SIGTERM, 143),
        (libc::SIGHUP, 129),
    ] {
        stopped_bench_saves_a_partial_result(signal, code);
    }
}

fn stopped_bench_saves_a_partial_result(signal: i32, code: i32) {
    let dir = crate::support::tempdir("bench-signal");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args([
            "bench",
            "--sim",
            "ground-truth",
            "--num-prompts",
            "400",
            "--max-concurrency",
            "2",
            "--random-input-len",
            "8",
            "--random-output-len",
            "20",
            "--save-result",
            "--result-dir",
            dir.to_str().unwrap(),
            "--disable-tqdm",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (out, took) =
        crate::support::signal_after(child, std::time::Duration::from_millis(1500), signal);
    // Interrupted (128 + the signal), with what finished saved, well within the 30 s
    // Kubernetes gives a pod after SIGTERM.
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took < std::time::Duration::from_secs(15), "{took:?}");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(v["benchplan"]["interrupted"], true);
    let done = v["completed"].as_u64().unwrap();
    // Each request takes at least 220 ms (20 tokens at 10 ms after a 20 ms TTFT), two at
    // a time: by the SIGINT at 1.5 s at most 14 had finished, plus the 2 in flight. The
    // queued ones are not sent after it (they were, for the whole grace period, once).
    assert!(done > 0 && done <= 18, "a partial run: {done} of 400");
    let r = &v["benchplan"]["requests"];
    assert_eq!(r["scheduled"], 400);
    assert_eq!(r["balanced"], true, "{r}");
    assert_eq!(
        r["completed"].as_u64().unwrap()
            + r["failed"].as_u64().unwrap()
            + r["cancelled"].as_u64().unwrap(),
        400
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_works_with_rustls() {
    let sim = benchplan::sim::Simulator::start(benchplan::sim::SimConfig::preset(Preset::Fast))
        .await
        .unwrap();
    let (front, _) = crate::support::tls_front(sim.addr).await;
    let svc = Service {
        base_url: Some(format!("https://127.0.0.1:{}", front.port())),
        tokenizer: Some(fixture_tokenizer()),
        ..Service::default()
    };
    // A self-signed certificate is refused unless verification is off (--insecure).
    assert!(resolve(&svc, false, None).await.is_err());
    let resolved = resolve(&svc, true, None).await.unwrap();
    assert_eq!(resolved.model, "benchplan-sim");
    let r = execute(&resolved, &svc, &params(20, 8, 5), &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (r.summary.completed, r.summary.total_output_tokens),
        (20, 100)
    );
}

#[test]
fn bench_dry_run_prints_lengths_and_sends_nothing() {
    // No server listens on the default 127.0.0.1:8000 here: a dry run must not need one.
    let out = benchplan(&[
        "bench",
        "--dataset-name",
        "random-mm",
        "--backend",
        "openai-chat",
        "--random-mm-bucket-config",
        "{(64,64,1):0.5, (32,48,1):0.5}",
        "--num-prompts",
        "10",
        "--random-input-len",
        "100",
        "--random-range-ratio",
        "0.5",
        "--dry-run",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let row = text.lines().nth(1).unwrap();
    assert!(row.contains(" 10 "), "{text}");
    let out = benchplan(&[
        "bench",
        "--dataset-name",
        "random-mm",
        "--random-mm-bucket-config",
        "{64:1}",
        "--dry-run",
    ]);
    crate::support::exits_saying(&out, 2, "is not {(height, width, frames): probability");
}
