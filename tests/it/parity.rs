//! Parity with vLLM 0.33 end to end, for what the golden fixtures cannot pin alone:
//! token events counted against the simulator's ground truth, the smoke request
//! keeping out of the prefix cache, a connect inside a request counting in its TTFT,
//! pooling inputs counted as vLLM counts them, vLLM's result names and values, and the
//! deviations that remain written into each result and listed in the README.

use std::io::Write;
use std::time::Duration;

use benchplan::load::case::execute;
use benchplan::load::options::RunOptions;
use benchplan::plan::dataset::{RandomDataset, RandomRerankDataset};
use benchplan::plan::sim::{Preset, SimParams};
use benchplan::plan::{Backend, CaseParams, Dataset, Metric};
use benchplan::service::target::resolve;
use serde_json::Value;

use crate::support::{benchplan, read_request, repo, stderr, tempdir};

use crate::support::sim_service as sim;

/// The shared random case at concurrency 4 with vLLM's default percentiles (the
/// results here are read as `vllm bench serve` writes them).
fn random(backend: Backend, n: u64, input: u64, output: u64) -> CaseParams {
    let defaults = CaseParams::default();
    CaseParams {
        max_concurrency: Some(4),
        percentile_metrics: defaults.percentile_metrics,
        metric_percentiles: defaults.metric_percentiles,
        ..crate::support::random_case(backend, n, input, output)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_and_completions_give_one_itl_sample_per_token_after_the_first() {
    // Ground truth: one token per chunk, no jitter; the chat stream opens with vLLM's
    // role chunk, which is not a token event.
    let svc = sim(Preset::GroundTruth, SimParams::default());
    let resolved = resolve(&svc, false, None).await.unwrap();
    for backend in [Backend::Openai, Backend::OpenaiChat] {
        let p = random(backend, 6, 16, 5);
        let r = execute(&resolved, &svc, &p, &RunOptions::default())
            .await
            .unwrap();
        assert_eq!(r.summary.completed, 6, "{backend:?}");
        for rec in &r.run.records {
            let s = &rec.sample;
            assert_eq!(s.usage_completion, Some(5), "{backend:?}");
            assert_eq!(
                s.itl.len(),
                4,
                "{backend:?}: one ITL sample per token after the first"
            );
            assert_eq!(s.chunks, 5, "{backend:?}: five token events");
        }
        // No sample is the ~0 ms gap a role chunk before the first token would make.
        let itl = r.summary.stat(Metric::Itl).unwrap();
        assert!(
            itl.percentiles[0].1 > 5.0,
            "{backend:?}: p99 of ITL {itl:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_smoke_request_warms_no_prefix_cache_block_of_a_measured_request() {
    let svc = sim(
        Preset::Fast,
        SimParams {
            enable_prefix_caching: Some(true),
            ..SimParams::default()
        },
    );
    let p = CaseParams {
        max_concurrency: Some(1),
        ..random(Backend::Openai, 1, 256, 2)
    };
    crate::support::smoke_warms_no_measured_prompt(&svc, &p, 240).await;
}

/// A listener whose accept queue is full: a new connection waits for the kernel to
/// retry its SYN (about a second) once the queue has room again.
fn slow_accepting_listener() -> (std::net::TcpListener, std::net::TcpStream) {
    use std::os::fd::FromRawFd;
    // SAFETY: a fresh socket bound to loopback, listening with a queue of one.
    let l = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let r = libc::bind(
            fd,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        assert_eq!(r, 0);
        assert_eq!(libc::listen(fd, 0), 0);
        std::net::TcpListener::from_raw_fd(fd)
    };
    // This connection fills the queue and is never served.
    let filler = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    (l, filler)
}

#[tokio::test]
async fn a_connect_inside_a_measured_request_counts_in_its_ttft() {
    use benchplan::client::outcome::Limits;
    use benchplan::client::request::{Target, send};
    let (listener, _filler) = slow_accepting_listener();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        // Let the client's SYN meet the full queue, then make room.
        std::thread::sleep(Duration::from_millis(300));
        let (first, _) = listener.accept().unwrap();
        drop(first);
        let (mut s, _) = listener.accept().unwrap();
        if read_request(&mut s).is_some() {
            let body = "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[{\"text\":\"b\"}]}\n\ndata: [DONE]\n\n";
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let base = format!("http://{addr}");
    let t = Target::new(
        format!("{base}/v1/completions"),
        benchplan::base_url::BaseUrl::parse(&base).unwrap(),
        Backend::Openai,
        "m".into(),
        reqwest::header::HeaderMap::new(),
        benchplan::client::http::build_client(false, None).unwrap(),
        Limits {
            total: Duration::from_secs(20),
            ..Limits::default()
        },
    );
    let o = send(&t, b"{}".to_vec(), None).await;
    assert!(o.sample.success, "{:?}", o.sample.error);
    let connect = o
        .connect
        .expect("the request opened its connection")
        .as_secs_f64();
    assert!(
        connect > 0.25,
        "the connect waited for the full accept queue: {connect:.3} s"
    );
    // vLLM's clock starts before the connection: the connect is inside TTFT.
    assert!(
        o.sample.ttft >= connect,
        "TTFT {:.3} s, connect {connect:.3} s",
        o.sample.ttft
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pooling_requests_count_inputs_and_tokens_as_vllm() {
    let svc = sim(Preset::Fast, SimParams::default());
    let resolved = resolve(&svc, false, None).await.unwrap();
    let emb = CaseParams {
        backend: Some(Backend::OpenaiEmbeddings),
        num_prompts: 5,
        dataset: Dataset::Random(RandomDataset {
            input_len: 8,
            output_len: 1,
            batch_size: 4,
            ..RandomDataset::default()
        }),
        ..CaseParams::default()
    };
    let r = execute(&resolved, &svc, &emb, &RunOptions::default())
        .await
        .unwrap();
    // Five batches of four inputs: vLLM's total_input_sequences counts the inputs.
    assert_eq!(
        (r.summary.completed, r.summary.total_input_sequences),
        (5, 20)
    );
    assert_eq!(r.summary.total_input_tokens, 160);
    let rerank = CaseParams {
        backend: Some(Backend::VllmRerank),
        num_prompts: 4,
        dataset: Dataset::RandomRerank(RandomRerankDataset {
            input_len: 5,
            batch_size: 3,
            ..Default::default()
        }),
        ..CaseParams::default()
    };
    let r = execute(&resolved, &svc, &rerank, &RunOptions::default())
        .await
        .unwrap();
    // Three documents a request; the input tokens are the server's prompt_tokens.
    assert_eq!(
        (r.summary.completed, r.summary.total_input_sequences),
        (4, 12)
    );
    let served: u64 = r
        .run
        .records
        .iter()
        .map(|x| x.sample.usage_prompt.unwrap())
        .sum();
    assert!(served > 0);
    assert_eq!(r.summary.total_input_tokens, served);
}

/// Runs `benchplan bench` with `args` into a fresh folder; the one result it wrote.
fn bench_result(args: &[&str]) -> (Value, String) {
    let dir = tempdir("parity-bench");
    let d = dir.display().to_string();
    let mut all = vec![
        "bench",
        "--save-result",
        "--result-dir",
        &d,
        "--disable-tqdm",
    ];
    all.extend_from_slice(args);
    let out = benchplan(&all);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("a result file");
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let v = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    (v, name)
}

#[test]
fn a_ramp_up_run_names_and_records_its_rates_as_vllm() {
    let (r, name) = bench_result(&[
        "--sim",
        "fast",
        "--num-prompts",
        "40",
        "--random-input-len",
        "8",
        "--random-output-len",
        "2",
        "--ramp-up-strategy",
        "linear",
        "--ramp-up-start-rps",
        "20",
        "--ramp-up-end-rps",
        "60",
    ]);
    assert!(
        name.starts_with("openai-ramp-up-linear-20qps-60qps-"),
        "{name}"
    );
    assert_eq!(
        (&r["ramp_up_start_rps"], &r["ramp_up_end_rps"]),
        (&20.into(), &60.into())
    );
    let events = r["rps_change_events"]
        .as_array()
        .expect("rps_change_events");
    let rates: Vec<i64> = events.iter().map(|e| e["rps"].as_i64().unwrap()).collect();
    assert_eq!(rates, (20..=60).collect::<Vec<_>>());
    for e in events {
        let ts = e["timestamp"].as_str().unwrap();
        assert!(
            ts.len() >= 19 && &ts[4..5] == "-" && &ts[10..11] == "T",
            "{ts}"
        );
    }
}

/// A server that lists one model whose id and root differ, and streams one answer.
fn model_server() -> String {
    let (base, _) = crate::support::scripted(|_, s, _| {
        while let Some((head, _)) = read_request(s) {
            let body = if head.starts_with("GET /v1/models") {
                r#"{"object":"list","data":[{"id":"served-name","object":"model","root":"org/model-path"}]}"#.to_string()
            } else {
                "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[{\"text\":\" b\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n".to_string()
            };
            let kind = if head.starts_with("GET") {
                "application/json"
            } else {
                "text/event-stream"
            };
            if write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .is_err()
            {
                return;
            }
        }
    });
    base
}

#[test]
fn model_id_is_the_served_models_root_as_vllm_fills_it() {
    let base = model_server();
    let tokenizer = repo()
        .join("tests/fixtures/tokenizer")
        .display()
        .to_string();
    let (r, name) = bench_result(&[
        "--base-url",
        &base,
        "--tokenizer",
        &tokenizer,
        "--num-prompts",
        "2",
        "--random-input-len",
        "4",
        "--random-output-len",
        "2",
    ]);
    assert_eq!(r["model_id"], "org/model-path");
    assert!(name.contains("-model-path-"), "{name}");
    assert_eq!(r["completed"], 2);
}

#[test]
fn each_result_lists_the_deviations_that_applied_and_the_readme_lists_them_all() {
    let (r, _) = bench_result(&[
        "--sim",
        "fast",
        "--num-prompts",
        "4",
        "--random-input-len",
        "8",
        "--random-output-len",
        "2",
        "--max-concurrency",
        "2",
    ]);
    let ids: Vec<&str> = r["benchplan"]["deviations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    for want in [
        "sse_spec_parsing",
        "stream_error_fails_request",
        "arrival_timestamps",
        "smoke_request",
        "prewarmed_connections",
        "e2el_by_default",
        "no_prompt_alignment",
    ] {
        assert!(ids.contains(&want), "{want} missing from {ids:?}");
    }
    assert!(!ids.contains(&"multi_turn") && !ids.contains(&"prefix_cache_reset"));
    assert_eq!(r["benchplan"]["connections"]["prewarmed"], 2);
    // The README's measurement section names every deviation, and nothing else as one.
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = readme
        .split("## Measurement")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("a Measurement section");
    for d in benchplan::results::deviations::ALL {
        assert!(
            section.contains(&format!("`{}`", d.id)),
            "README does not list deviation `{}`",
            d.id
        );
    }
    let listed = section
        .lines()
        .filter(|l| l.starts_with("- `") && l.contains("`:"))
        .count();
    assert_eq!(listed, benchplan::results::deviations::ALL.len());
}
