//! The Responses API backend (`openai-responses`, `/v1/responses`) against the
//! simulator's ground truth, as chat is checked, and against scripted servers for the
//! events that end or fail an answer.

use std::io::Write;

use benchplan::client::outcome::Limits;
use benchplan::client::request::{Target, send};
use benchplan::load::case::execute;
use benchplan::load::options::RunOptions;
use benchplan::plan::{Backend, CaseParams, Metric};
use benchplan::service::target::resolve;
use serde_json::json;

use crate::support::{read_request, scripted, timing_check};

fn params(backend: Backend, n: u64, input: u64, output: u64) -> CaseParams {
    CaseParams {
        max_concurrency: Some(1),
        ..crate::support::random_case(backend, n, input, output)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_latencies_and_tokens_match_the_ground_truth_as_chat_does() {
    timing_check(3, ground_truth_once).await;
}

async fn ground_truth_once() -> Result<(), String> {
    // Prefill 15 ms + 50 µs per token over 100 tokens = 20 ms TTFT; 10 ms per token after.
    let svc = crate::support::prefill_sim(0.015, 50e-6);
    let resolved = resolve(&svc, false, None).await.unwrap();
    for backend in [Backend::OpenaiResponses, Backend::OpenaiChat] {
        let p = params(backend, 12, 100, 11);
        let r = execute(&resolved, &svc, &p, &RunOptions::default())
            .await
            .unwrap();
        let s = &r.summary;
        assert_eq!((s.completed, s.failed), (12, 0), "{backend:?}");
        assert_eq!(
            s.total_input_tokens, 1200,
            "{backend:?}: the server counted the input"
        );
        assert_eq!(s.total_output_tokens, 132, "{backend:?}");
        for x in &r.run.records {
            let o = &x.sample;
            assert_eq!(
                o.usage_completion,
                Some(11),
                "{backend:?}: usage from the terminal event"
            );
            assert_eq!(o.usage_prompt, Some(100), "{backend:?}");
            assert_eq!(o.chunks, 11, "{backend:?}: one token event per token");
            assert_eq!(o.itl.len(), 10, "{backend:?}");
            assert!(o.done, "{backend:?}: the stream ended properly");
            assert!(!o.text.is_empty(), "{backend:?}: output text collected");
            // E2EL stops at the last token event: latency - ttft == sum(itl).
            let sum: f64 = o.itl.iter().sum();
            assert!((o.ttft + sum - o.latency).abs() < 1e-9, "{backend:?}");
        }
        let ttft = s.stat(Metric::Ttft).unwrap().median;
        let itl = s.stat(Metric::Itl).unwrap().mean;
        let tpot = s.stat(Metric::Tpot).unwrap().mean;
        if (ttft - 20.0).abs() >= 3.0 {
            return Err(format!(
                "{backend:?}: median TTFT {ttft:.3} ms, injected 20 ms"
            ));
        }
        if (itl - 10.0).abs() >= 0.3 || (tpot - 10.0).abs() >= 0.3 {
            return Err(format!(
                "{backend:?}: mean ITL {itl:.3} / TPOT {tpot:.3} ms, injected 10 ms"
            ));
        }
    }
    Ok(())
}

#[test]
fn the_request_body_is_a_responses_request() {
    let p = CaseParams {
        temperature: Some(0.0),
        ..params(Backend::OpenaiResponses, 1, 8, 7)
    };
    let input = benchplan::client::backend::RequestInput {
        prompt: benchplan::client::backend::Prompt::Text("hello".into()),
        prompt_len: 1,
        output_len: 7,
        arrival: None,
        model: None,
    };
    let body: serde_json::Value = serde_json::from_slice(&benchplan::client::backend::build_body(
        Backend::OpenaiResponses,
        "m",
        &input,
        &p,
    ))
    .unwrap();
    assert_eq!(body["input"], "hello");
    assert_eq!(body["max_output_tokens"], 7);
    assert_eq!(body["stream"], true);
    assert_eq!(body["temperature"], 0.0);
    assert!(body.get("stream_options").is_none() && body.get("max_tokens").is_none());
}

/// A server that answers every request with these SSE events (then closes).
fn events_server(events: &'static str) -> String {
    scripted(move |_, s, _| {
        if read_request(s).is_some() {
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(events.as_bytes());
            let _ = s.flush();
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    })
    .0
}

async fn one(events: &'static str) -> benchplan::metrics::sample::Sample {
    let base = events_server(events);
    let target = Target::new(
        format!("{base}/v1/responses"),
        benchplan::base_url::BaseUrl::parse(&base).unwrap(),
        Backend::OpenaiResponses,
        "m".into(),
        Default::default(),
        benchplan::client::http::build_client(false, None).unwrap(),
        Limits::default(),
    );
    let body = serde_json::to_vec(&json!({"model": "m", "input": "x", "stream": true})).unwrap();
    send(&target, body, None).await.sample
}

const CREATED: &str = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"usage\":null}}\n\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_counts_as_a_token_event_and_only_output_text_is_kept() {
    let s = one(Box::leak(
        format!(
            "{CREATED}\
event: response.reasoning_text.delta\ndata: {{\"type\":\"response.reasoning_text.delta\",\"delta\":\"hmm\"}}\n\n\
event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"delta\":\"Hel\"}}\n\n\
event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"delta\":\"\"}}\n\n\
event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"delta\":\"lo\"}}\n\n\
event: response.output_text.done\ndata: {{\"type\":\"response.output_text.done\",\"text\":\"Hello\"}}\n\n\
event: response.completed\ndata: {{\"type\":\"response.completed\",\"response\":{{\"usage\":{{\"input_tokens\":4,\"output_tokens\":3}}}}}}\n\n"
        )
        .into_boxed_str(),
    ))
    .await;
    assert!(s.success, "{:?}", s.error);
    assert_eq!(s.chunks, 3, "reasoning and two non-empty output deltas");
    assert_eq!(s.itl.len(), 2);
    assert_eq!(s.text, "Hello");
    assert_eq!((s.usage_prompt, s.usage_completion), (Some(4), Some(3)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_without_a_terminal_event_or_with_a_failure_fails_the_request() {
    let cut = one(
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\n",
    )
    .await;
    assert!(!cut.success);
    assert_eq!(cut.error.as_ref().unwrap().kind, "no_terminal_event");
    let failed = one(
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\n\
event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"server_error\",\"message\":\"oom\"}}}\n\n",
    )
    .await;
    assert!(!failed.success);
    let e = failed.error.unwrap();
    assert_eq!(e.kind, "stream_error");
    assert!(e.message.contains("oom"), "{}", e.message);
    // A cut at max_output_tokens ends with response.incomplete: a complete measurement.
    let incomplete = one(
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\n\
event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n",
    )
    .await;
    assert!(incomplete.success, "{:?}", incomplete.error);
    assert_eq!(incomplete.usage_completion, Some(1));
    let garbage = one("data: {not json\n\n").await;
    assert_eq!(garbage.error.unwrap().kind, "invalid_chunk");
}
