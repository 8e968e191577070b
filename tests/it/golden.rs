//! Parity with vLLM 0.33's own code, on the fixtures its functions produced
//! (`tests/fixtures/vllm-golden/`, copied from `../shared/data/vllm-golden/`; its
//! README says how each was made and what it pins). Every fixture in the folder runs;
//! a new one needs no code here.
//!
//! - `metrics/*.json`: vLLM's per-request outputs go through benchplan's summary and
//!   result writer; every number vLLM computed (`calculate_metrics`' fields and the
//!   dict `benchmark()` returned) must come out the same, floats to 1e-9 relative.
//! - `streams/*.json`: the recorded bytes are served from 127.0.0.1, one flushed write
//!   per recorded write, to the real client (native HTTP/1.1 and reqwest); what the
//!   client extracted must match what vLLM's request function did, and the request
//!   benchplan sent must carry what vLLM's did. Where benchplan parses a stream
//!   correctly and vLLM does not, the fixture is listed in [`STREAM_DEVIATIONS`] with
//!   benchplan's own expected result and the id of the documented deviation.

use std::path::PathBuf;

use benchplan::metrics::record::RequestRecord;
use benchplan::metrics::sample::{RequestError, Sample};
use benchplan::metrics::summary::summarize;
use benchplan::plan::params::Goodput;
use benchplan::plan::units::Dur;
use benchplan::plan::{Backend, CaseParams, Metric};
use benchplan::results::vllm_json::{Header, result_json};
use benchplan::tokenizer::TokenModel;
use serde_json::{Map, Value};

use crate::support::repo;

pub fn golden_dir() -> PathBuf {
    repo().join("tests/fixtures/vllm-golden")
}

/// Every fixture of one kind, by name.
pub fn fixtures(kind: &str) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = std::fs::read_dir(golden_dir().join(kind))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (p.file_stem().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(!out.is_empty(), "no {kind} fixtures");
    out
}

/// Compares two JSON values: numbers to 1e-9 relative, everything else exactly.
/// Differences are collected with their path.
pub fn diff(path: &str, ours: &Value, theirs: &Value, out: &mut Vec<String>) {
    match (ours, theirs) {
        (Value::Number(a), Value::Number(b)) => {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            let close = a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
            if !close {
                out.push(format!("{path}: ours {a:?}, vLLM {b:?}"));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                out.push(format!(
                    "{path}: ours has {} items, vLLM {}",
                    a.len(),
                    b.len()
                ));
                return;
            }
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (a, b) if a != b => out.push(format!("{path}: ours {a}, vLLM {b}")),
        _ => {}
    }
}

fn metric_of(name: &str) -> Metric {
    match name {
        "ttft" => Metric::Ttft,
        "tpot" => Metric::Tpot,
        "itl" => Metric::Itl,
        "e2el" => Metric::E2el,
        other => panic!("unknown metric {other}"),
    }
}

/// A fixture's `RequestFuncOutput` as the sample benchplan's client would have made.
fn sample_of(o: &Value) -> Sample {
    let f = |k: &str| o[k].as_f64().unwrap();
    let error = o["error"].as_str().unwrap();
    Sample {
        success: o["success"].as_bool().unwrap(),
        ttft: f("ttft"),
        latency: f("latency"),
        itl: o["itl"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect(),
        chunks: 1 + o["itl"].as_array().unwrap().len() as u32,
        token_reads: 1 + o["itl"].as_array().unwrap().len() as u32,
        done: true,
        usage_completion: o["output_tokens"].as_u64(),
        usage_prompt: None,
        cached_tokens: None,
        input_sequences: o["num_input_sequences"].as_u64().unwrap(),
        input_audio_duration: f("input_audio_duration"),
        server_queue_time: o["server_queue_time"].as_f64(),
        server_ttft: o["server_ttft"].as_f64(),
        server_prefill: None,
        server_generation: None,
        spec: None,
        // vLLM's output keeps no channel: every fixture is an answer without reasoning.
        first_any: None,
        first_answer: None,
        last_answer: None,
        last_any: None,
        output_itl: Vec::new(),
        answer_itl: Vec::new(),
        reasoning_events: 0,
        usage_reasoning: None,
        text: o["generated_text"].as_str().unwrap().to_string(),
        error: (!error.is_empty()).then(|| RequestError {
            kind: "fixture".into(),
            message: error.to_string(),
        }),
    }
}

/// The records of a metrics fixture. vLLM's request function overwrites `prompt_len`
/// with the server's count, so the output's is the one that counts.
fn records_of(inputs: &Value) -> Vec<RequestRecord> {
    inputs["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let start = o["start_time"].as_f64().unwrap();
            RequestRecord {
                index: i,
                scheduled: start,
                dispatched: start,
                start,
                written: None,
                connect: None,
                prompt_len: o["prompt_len"].as_u64().unwrap(),
                expected_output_len: inputs["requests"][i]["expected_output_len"]
                    .as_u64()
                    .unwrap(),
                sample: sample_of(o),
                turn: None,
            }
        })
        .collect()
}

fn params_of(inputs: &Value, metrics: &[Metric]) -> CaseParams {
    let pooling = inputs["task_type"] == "pooling";
    let ms = |k: &str| {
        inputs["goodput_config_dict"][k]
            .as_f64()
            .map(|v| Dur::from_secs_f64(v / 1e3))
    };
    let goodput = inputs["goodput_config_dict"]
        .as_object()
        .is_some_and(|m| !m.is_empty())
        .then(|| Goodput {
            ttft: ms("ttft"),
            tpot: ms("tpot"),
            e2el: ms("e2el"),
        });
    CaseParams {
        backend: Some(if pooling {
            Backend::OpenaiEmbeddings
        } else {
            Backend::Openai
        }),
        percentile_metrics: Some(metrics.to_vec()),
        metric_percentiles: inputs["selected_percentiles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_f64().unwrap())
            .collect(),
        goodput,
        ..CaseParams::default()
    }
}

/// `calculate_metrics`' fields, named as benchplan's summary computes them.
fn our_metrics(s: &benchplan::metrics::summary::Summary, pooling: bool) -> Map<String, Value> {
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    put("completed", s.completed.into());
    put("failed", s.failed.into());
    put("total_input", s.total_input_tokens.into());
    if pooling {
        put("total_input_sequences", s.total_input_sequences.into());
        put("request_throughput", s.request_throughput.into());
        put(
            "input_sequence_throughput",
            s.input_sequence_throughput.into(),
        );
        put("total_token_throughput", s.total_token_throughput.into());
    } else {
        put("total_output", s.total_output_tokens.into());
        put("request_throughput", s.request_throughput.into());
        put("request_goodput", s.request_goodput.unwrap_or(0.0).into());
        put("output_throughput", s.output_throughput.into());
        put("total_token_throughput", s.total_token_throughput.into());
        put("max_output_tokens_per_s", s.max_output_tokens_per_s.into());
        put("max_concurrent_requests", s.max_concurrent_requests.into());
        put("rtfx", s.rtfx.into());
    }
    for st in &s.stats {
        let n = st.metric.name();
        put(&format!("mean_{n}_ms"), st.mean.into());
        put(&format!("median_{n}_ms"), st.median.into());
        put(&format!("std_{n}_ms"), st.std.into());
        put(
            &format!("percentiles_{n}_ms"),
            Value::Array(
                st.percentiles
                    .iter()
                    .map(|(p, v)| serde_json::json!([p, v]))
                    .collect(),
            ),
        );
    }
    m
}

/// Header keys `main()` adds and `benchmark()` does not return.
const HEADER_KEYS: &[&str] = &[
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
    "benchplan",
];

fn check_metrics_fixture(name: &str, fx: &Value) -> Vec<String> {
    let inputs = &fx["inputs"];
    let vllm = &fx["vllm"];
    let pooling = inputs["task_type"] == "pooling";
    let tokens = match inputs["tokenizer"].as_str() {
        // The stub counts whitespace-separated words, as the built-in tokenizer does.
        Some("whitespace") => Some(TokenModel::Builtin),
        None => None,
        Some(other) => panic!("{name}: unknown tokenizer stub {other}"),
    };
    let records = records_of(inputs);
    let dur = inputs["dur_s"].as_f64().unwrap();
    let mut problems = Vec::new();

    // calculate_metrics computes all four metrics whatever is selected.
    let all: &[Metric] = if pooling {
        &[Metric::E2el]
    } else {
        &[Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el]
    };
    let s = summarize(&records, dur, &params_of(inputs, all), tokens.as_ref());
    let ours = our_metrics(&s, pooling);
    for (k, theirs) in vllm["metrics"].as_object().unwrap() {
        if tokens.is_none() && ["ttft", "tpot", "itl"].iter().any(|m| k.contains(m)) {
            continue; // not reported by benchmark() without a tokenizer; checked below
        }
        match ours.get(k) {
            Some(v) => diff(&format!("metrics.{k}"), v, theirs, &mut problems),
            None => problems.push(format!("metrics.{k}: benchplan has no such figure")),
        }
    }
    if let Some(lens) = vllm.get("actual_output_lens") {
        diff(
            "actual_output_lens",
            &serde_json::to_value(&s.output_lens).unwrap(),
            lens,
            &mut problems,
        );
    }

    // The dict benchmark() returned, against benchplan's result with detailed arrays.
    let selected: Vec<Metric> = inputs["selected_percentile_metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| metric_of(m.as_str().unwrap()))
        .collect();
    let params = params_of(inputs, &selected);
    let s = summarize(&records, dur, &params, tokens.as_ref());
    let header = Header {
        date: "20260101-000000".into(),
        label: None,
        model_id: "golden-model".into(),
        tokenizer_id: None,
    };
    let result = result_json(&header, &params, &s, None, true, Map::new());
    let theirs = vllm["benchmark_result"].as_object().unwrap();
    let mut last_pos = 0;
    for (k, v) in theirs {
        match result.keys().position(|x| x == k) {
            Some(pos) => {
                diff(k, &result[k], v, &mut problems);
                if pos < last_pos {
                    problems.push(format!("{k}: written before a key vLLM writes before it"));
                }
                last_pos = pos;
            }
            None => problems.push(format!("{k}: missing from benchplan's result")),
        }
    }
    for k in result.keys() {
        if !theirs.contains_key(k) && !HEADER_KEYS.contains(&k.as_str()) {
            problems.push(format!("{k}: in benchplan's result, not in vLLM's"));
        }
    }

    // What benchmark() printed: its result block, line for line.
    let stdout = vllm["report_stdout"].as_str().unwrap();
    let from = stdout.find("=").expect("a result block");
    let block = &stdout[from..];
    let ours = benchplan::commands::bench::print::vllm_block(&s, &params);
    if ours != block {
        problems.push(format!(
            "printed block differs:\nours:\n{ours}\nvLLM:\n{block}"
        ));
    }
    problems
}

#[test]
fn every_metrics_fixture_gives_vllms_numbers() {
    let mut failures = Vec::new();
    for (name, fx) in fixtures("metrics") {
        let problems = check_metrics_fixture(&name, &fx);
        if !problems.is_empty() {
            failures.push(format!("{name}:\n  {}", problems.join("\n  ")));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// Stream fixtures where benchplan parses correctly and vLLM 0.33 does not, or where
/// benchplan fails a request on purpose: (fixture, deviation id, what benchplan
/// extracts instead, as fields over vLLM's). Each id is a documented deviation
/// (`benchplan::results::deviations`), written into every result it applies to.
const STREAM_DEVIATIONS: &[(&str, &str, &str)] = &[
    // vLLM drops the event whose first line is a comment, losing " two".
    (
        "completions_comment_lines",
        "sse_spec_parsing",
        r#"{"generated_text": "one two three", "itl_count": 2}"#,
    ),
    // vLLM splits on "\n\n" only: two CRLF events in one read are never extracted.
    (
        "completions_crlf_two_events_per_write",
        "sse_spec_parsing",
        r#"{"success": true, "error": false, "output_tokens": 4, "generated_text": "A B C D",
            "itl_count": 3, "ttft_gt_0": true, "latency_gt_0": true, "latency_equals_ttft": false}"#,
    ),
    // vLLM hands `id: 1\ndata: {...}` to json.loads whole and fails.
    (
        "completions_sse_id_field",
        "sse_spec_parsing",
        r#"{"success": true, "error": false, "output_tokens": 2, "generated_text": "a b",
            "itl_count": 1, "ttft_gt_0": true, "latency_gt_0": true, "latency_equals_ttft": false}"#,
    ),
    // vLLM hands `data:{...}` (no space) to json.loads whole and fails.
    (
        "chat_data_no_space",
        "sse_spec_parsing",
        r#"{"success": true, "error": false, "output_tokens": 2, "generated_text": "Hi there",
            "itl_count": 1, "ttft_gt_0": true, "latency_gt_0": true, "latency_equals_ttft": false}"#,
    ),
    // Five events in one read arrive together: benchplan gives them that one arrival
    // time (ITL 0, E2EL = TTFT); vLLM reads its clock once per event as it parses them.
    (
        "chat_many_events_one_write",
        "arrival_timestamps",
        r#"{"latency_equals_ttft": true}"#,
    ),
    // vLLM ignores a `data: {"error": ...}` event and succeeds with the text before it.
    (
        "completions_data_error_object_mid_stream",
        "stream_error_fails_request",
        r#"{"success": false, "error": true, "generated_text": "", "latency_gt_0": false}"#,
    ),
];

/// Serves one fixture's bytes to every connection, as the fixture generator did: after
/// reading the request, `wire_writes[0]`, then each further write after the recorded
/// pause, then close. The requests read are kept.
fn replay_server(fx: &Value) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use base64::Engine;
    use std::io::Write;
    let http = &fx["http"];
    let gap = std::time::Duration::from_millis(http["write_gap_ms"].as_u64().unwrap());
    let writes: Vec<Vec<u8>> = http["wire_writes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            base64::engine::general_purpose::STANDARD
                .decode(w.as_str().unwrap())
                .unwrap()
        })
        .collect();
    crate::support::scripted(move |_, s, log| {
        let _ = s.set_nodelay(true);
        let Some((head, body)) = crate::support::read_request(s) else {
            return;
        };
        log.lock()
            .unwrap()
            .push(format!("{head}\r\n\r\n{}", String::from_utf8_lossy(&body)));
        for (i, w) in writes.iter().enumerate() {
            if i > 0 {
                std::thread::sleep(gap);
            }
            if s.write_all(w).and_then(|_| s.flush()).is_err() {
                return;
            }
        }
        let _ = s.shutdown(std::net::Shutdown::Both);
    })
}

fn backend_of(kind: &str) -> Backend {
    match kind {
        "openai" => Backend::Openai,
        "vllm" => Backend::Vllm,
        "openai-chat" => Backend::OpenaiChat,
        "openai-embeddings" => Backend::OpenaiEmbeddings,
        "vllm-rerank" => Backend::VllmRerank,
        other => panic!("unknown request kind {other}"),
    }
}

fn input_of(rfi: &Value, backend: Backend) -> benchplan::client::backend::RequestInput {
    use benchplan::client::backend::{Prompt, RequestInput};
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_string())
            .collect()
    };
    let prompt = match (backend, &rfi["prompt"]) {
        (Backend::VllmRerank, p) => {
            let mut all = strings(p);
            let query = all.remove(0);
            Prompt::Rerank {
                query,
                documents: all,
            }
        }
        (_, Value::String(s)) => Prompt::Text(s.clone()),
        (_, p) => Prompt::Batch(strings(p)),
    };
    RequestInput {
        model: None,
        prompt,
        prompt_len: rfi["prompt_len"].as_u64().unwrap(),
        output_len: rfi["output_len"].as_u64().unwrap(),
        arrival: None,
    }
}

/// What benchplan's client extracted, in the fixture's `vllm` terms.
fn extracted(s: &Sample, prompt_len: u64) -> Value {
    serde_json::json!({
        "success": s.success,
        "error": s.error.is_some(),
        "output_tokens": s.usage_completion.unwrap_or(0),
        "generated_text": s.text,
        "itl_count": s.itl.len(),
        "ttft_gt_0": s.ttft > 0.0,
        "latency_gt_0": s.latency > 0.0,
        "latency_equals_ttft": s.latency == s.ttft,
        "prompt_len": s.usage_prompt.unwrap_or(prompt_len),
        "num_input_sequences": s.input_sequences,
        "server_queue_time": s.server_queue_time,
        "server_ttft": s.server_ttft,
    })
}

/// vLLM's extraction in the same terms, with a deviation's fields over it.
fn expected(name: &str, fx: &Value) -> Value {
    let v = &fx["vllm"];
    let mut e = serde_json::json!({
        "success": v["success"],
        "error": v["error"].as_str().is_some_and(|e| !e.is_empty()),
        "output_tokens": v["output_tokens"].as_u64().unwrap_or(0),
        "generated_text": v["generated_text"],
        "itl_count": v["itl_count"],
        "ttft_gt_0": v["ttft_gt_0"],
        "latency_gt_0": v["latency_gt_0"],
        "latency_equals_ttft": v["latency_equals_ttft"],
        "prompt_len": v["prompt_len"],
        "num_input_sequences": v["num_input_sequences"],
        "server_queue_time": v["server_queue_time"],
        "server_ttft": v["server_ttft"],
    });
    if let Some((_, _, over)) = STREAM_DEVIATIONS.iter().find(|(n, _, _)| *n == name) {
        let over: Map<String, Value> = serde_json::from_str(over).unwrap();
        for (k, x) in over {
            assert!(
                e.get(&k).is_some(),
                "{name}: deviation names unknown field {k}"
            );
            e[&k] = x;
        }
    }
    e
}

/// One fixture through one client path: the differences found.
async fn check_stream(name: &str, fx: &Value, native: bool) -> Vec<String> {
    use benchplan::client::outcome::Limits;
    use benchplan::client::request::{Target, send_input};
    let rfi = &fx["request_func_input"];
    let backend = backend_of(fx["request_kind"].as_str().unwrap());
    let (base, log) = replay_server(fx);
    let mut target = Target::new(
        format!("{base}{}", rfi["api_url_path"].as_str().unwrap()),
        benchplan::base_url::BaseUrl::parse(&base).unwrap(),
        backend,
        rfi["model"].as_str().unwrap().to_string(),
        reqwest::header::HeaderMap::new(),
        benchplan::client::http::build_client(false, None).unwrap(),
        Limits {
            total: std::time::Duration::from_secs(20),
            ..Limits::default()
        },
    );
    if !native {
        target.native = None;
    }
    let params = CaseParams {
        backend: Some(backend),
        ..CaseParams::default()
    };
    let input = input_of(rfi, backend);
    let o = send_input(&target, &params, &input, rfi["request_id"].as_str(), None).await;
    let path = if native { "native" } else { "reqwest" };
    let mut problems = Vec::new();
    let ours = extracted(&o.sample, input.prompt_len);
    let want = expected(name, fx);
    for (k, w) in want.as_object().unwrap() {
        if &ours[k] != w {
            problems.push(format!(
                "{path} {k}: ours {}, vLLM {w} (error: {:?})",
                ours[k], o.sample.error
            ));
        }
    }
    // The request: what vLLM's request function sent.
    let seen = log.lock().unwrap().clone();
    let Some(req) = seen.first() else {
        problems.push(format!("{path}: the server saw no request"));
        return problems;
    };
    let (head, body) = req.split_once("\r\n\r\n").unwrap();
    let vr = &fx["vllm_request"];
    let first = head.lines().next().unwrap_or("");
    if first != format!("POST {} HTTP/1.1", vr["path"].as_str().unwrap()) {
        problems.push(format!("{path} request line: {first}"));
    }
    let header = |n: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(n).then(|| v.trim().to_string())
        })
    };
    if header("x-request-id").as_deref() != vr["x_request_id"].as_str() {
        problems.push(format!("{path} x-request-id: {:?}", header("x-request-id")));
    }
    if header("content-type").as_deref() != vr["content_type"].as_str() {
        problems.push(format!("{path} content-type: {:?}", header("content-type")));
    }
    let sent: Value = serde_json::from_str(body).unwrap();
    if sent != vr["json"] {
        problems.push(format!("{path} body: ours {sent}, vLLM {}", vr["json"]));
    }
    problems
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stream_fixture_extracts_what_vllm_extracts() {
    let all = fixtures("streams");
    for (name, _, _) in STREAM_DEVIATIONS {
        assert!(
            all.iter().any(|(n, _)| n == name),
            "deviation for missing fixture {name}"
        );
    }
    // Every fixture on both client paths at once: each has its own server, and the
    // recorded 30 ms pauses keep the writes apart.
    let checks = all.iter().flat_map(|(name, fx)| {
        [true, false].map(|native| {
            let (name, fx) = (name.clone(), fx.clone());
            async move {
                let p = check_stream(&name, &fx, native).await;
                (name, p)
            }
        })
    });
    let mut failures = Vec::new();
    for (name, problems) in futures_join_all(checks).await {
        if !problems.is_empty() {
            failures.push(format!("{name}:\n  {}", problems.join("\n  ")));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn every_stream_deviation_is_a_documented_one() {
    for (name, id, _) in STREAM_DEVIATIONS {
        assert!(
            benchplan::results::deviations::ALL
                .iter()
                .any(|d| d.id == *id),
            "{name}: deviation `{id}` is not in results::deviations::ALL"
        );
    }
}

/// Runs futures concurrently on the current runtime, results in order.
async fn futures_join_all<F, T>(futs: impl IntoIterator<Item = F>) -> Vec<T>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = futs.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}
