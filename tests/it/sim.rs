//! The simulator, checked with a plain HTTP client: formats, counts, queueing,
//! faults, metrics, and its latencies against the configured ones.

use std::time::{Duration, Instant};

use benchplan::plan::sim::{FailureType, Preset};
use benchplan::sim::{SimConfig, SimHandle, Simulator};
use serde_json::{Value, json};

fn client() -> reqwest::Client {
    benchplan::client::http::build_client(false, None).unwrap()
}

async fn start(config: SimConfig) -> SimHandle {
    Simulator::start(config).await.unwrap()
}

fn fast() -> SimConfig {
    SimConfig::preset(Preset::Fast)
}

/// A streamed answer: each SSE frame with the time its bytes arrived (since the send).
struct Streamed {
    frames: Vec<(Duration, String)>,
    status: u16,
    error: Option<String>,
}

async fn stream(c: &reqwest::Client, url: &str, body: Value) -> Streamed {
    let start = Instant::now();
    let mut resp = c.post(url).json_body(&body).send().await.unwrap();
    let status = resp.status().as_u16();
    let mut frames = Vec::new();
    let mut buf = String::new();
    let mut error = None;
    loop {
        match resp.chunk().await {
            Ok(Some(bytes)) => {
                let at = start.elapsed();
                buf.push_str(std::str::from_utf8(&bytes).unwrap());
                while let Some(i) = buf.find("\n\n") {
                    let frame: String = buf.drain(..i + 2).collect();
                    frames.push((at, frame.trim().to_string()));
                }
            }
            Ok(None) => break,
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    Streamed {
        frames,
        status,
        error,
    }
}

trait JsonBody {
    fn json_body(self, v: &Value) -> Self;
}

impl JsonBody for reqwest::RequestBuilder {
    fn json_body(self, v: &Value) -> Self {
        self.header("content-type", "application/json")
            .body(serde_json::to_vec(v).unwrap())
    }
}

fn data(frame: &str) -> Value {
    serde_json::from_str(frame.strip_prefix("data: ").unwrap()).unwrap()
}

async fn post_json(c: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    let r = c.post(url).json_body(&body).send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_chunks_usage_and_done() {
    let sim = start(fast()).await;
    let c = client();
    let prompt = "one two three four five";
    let s = stream(
        &c,
        &format!("{}/v1/completions", sim.base_url),
        json!({"model": "benchplan-sim", "prompt": prompt, "max_tokens": 5, "stream": true, "stream_options": {"include_usage": true}}),
    )
    .await;
    assert_eq!(s.status, 200);
    let frames: Vec<&str> = s.frames.iter().map(|(_, f)| f.as_str()).collect();
    assert_eq!(
        frames.len(),
        5 + 1 + 1,
        "5 token chunks, the usage chunk, [DONE]: {frames:?}"
    );
    assert_eq!(*frames.last().unwrap(), "data: [DONE]");
    let mut text = String::new();
    for f in &frames[..5] {
        let v = data(f);
        assert_eq!(v["object"], "text_completion");
        text.push_str(v["choices"][0]["text"].as_str().unwrap());
    }
    assert_eq!(data(frames[4])["choices"][0]["finish_reason"], "length");
    assert_eq!(data(frames[0])["choices"][0]["finish_reason"], Value::Null);
    let usage = data(frames[5]);
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 5);
    assert_eq!(usage["usage"]["completion_tokens"], 5);
    assert_eq!(usage["usage"]["total_tokens"], 10);

    // The counts agree with /tokenize, for the prompt and for the generated text.
    let (_, tok) = post_json(
        &c,
        &format!("{}/tokenize", sim.base_url),
        json!({"prompt": prompt}),
    )
    .await;
    assert_eq!(tok["count"], 5);
    let (_, tok) = post_json(
        &c,
        &format!("{}/tokenize", sim.base_url),
        json!({"prompt": text}),
    )
    .await;
    assert_eq!(tok["count"], 5);
    let (_, detok) = post_json(
        &c,
        &format!("{}/detokenize", sim.base_url),
        json!({"tokens": tok["tokens"]}),
    )
    .await;
    assert_eq!(detok["prompt"].as_str().unwrap(), text.trim());

    // Without include_usage there is no usage chunk.
    let s = stream(
        &c,
        &format!("{}/v1/completions", sim.base_url),
        json!({"prompt": "a b", "max_tokens": 2, "stream": true}),
    )
    .await;
    assert_eq!(s.frames.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_streams_a_role_delta_then_content() {
    let sim = start(fast()).await;
    let c = client();
    let s = stream(
        &c,
        &format!("{}/v1/chat/completions", sim.base_url),
        json!({"messages": [{"role": "user", "content": "hello there"}, {"role": "user", "content": [{"type": "text", "text": "more words"}]}],
               "max_completion_tokens": 3, "stream": true, "stream_options": {"include_usage": true}}),
    )
    .await;
    let frames: Vec<Value> = s
        .frames
        .iter()
        .filter(|(_, f)| f != "data: [DONE]")
        .map(|(_, f)| data(f))
        .collect();
    assert_eq!(
        frames[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": ""})
    );
    assert_eq!(frames[0]["object"], "chat.completion.chunk");
    let contents: Vec<&str> = frames[1..4]
        .iter()
        .map(|f| f["choices"][0]["delta"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents.len(), 3);
    assert_eq!(frames.last().unwrap()["usage"]["prompt_tokens"], 4);
    assert_eq!(frames.last().unwrap()["usage"]["completion_tokens"], 3);
    let (status, v) = post_json(
        &c,
        &format!("{}/v1/chat/completions", sim.base_url),
        json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 4}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["usage"]["completion_tokens"], 4);
    assert_eq!(
        v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count(),
        4
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_health_pooling_and_errors() {
    let sim = start(SimConfig {
        max_model_len: 100,
        ..fast()
    })
    .await;
    let c = client();
    let models: Value = serde_json::from_str(
        &c.get(format!("{}/v1/models", sim.base_url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(models["data"][0]["id"], "benchplan-sim");
    assert_eq!(models["data"][0]["root"], "benchplan-sim");
    assert_eq!(models["data"][0]["max_model_len"], 100);
    assert_eq!(
        c.get(format!("{}/health", sim.base_url))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );

    let (status, v) = post_json(
        &c,
        &format!("{}/v1/completions", sim.base_url),
        json!({"prompt": "a b c", "max_tokens": 98}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maximum context length is 100 tokens"),
        "{v}"
    );
    let (status, v) = post_json(
        &c,
        &format!("{}/v1/completions", sim.base_url),
        json!({"model": "other", "prompt": "a", "max_tokens": 1}),
    )
    .await;
    assert_eq!((status, v["error"]["code"].as_u64()), (404, Some(404)));

    let (status, v) = post_json(
        &c,
        &format!("{}/v1/embeddings", sim.base_url),
        json!({"input": ["a b", "c d e"]}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert_eq!(v["usage"]["prompt_tokens"], 5);
    let (status, v) = post_json(
        &c,
        &format!("{}/v1/rerank", sim.base_url),
        json!({"query": "q", "documents": ["x y", "z"]}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(v["results"].as_array().unwrap().len(), 2);
    assert_eq!(v["usage"]["total_tokens"], 4);
    let (status, _) = post_json(
        &c,
        &format!("{}/rerank", sim.base_url),
        json!({"query": "q", "documents": ["x"]}),
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_is_503_until_the_startup_delay_passes() {
    let sim = start(SimConfig {
        startup_delay: 0.3,
        ..fast()
    })
    .await;
    let c = client();
    let url = format!("{}/health/ready", sim.base_url);
    assert_eq!(c.get(&url).send().await.unwrap().status(), 503);
    let (status, _) = post_json(
        &c,
        &format!("{}/v1/completions", sim.base_url),
        json!({"prompt": "a", "max_tokens": 1}),
    )
    .await;
    assert_eq!(status, 503);
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(c.get(&url).send().await.unwrap().status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_answers_429() {
    let sim = start(SimConfig {
        max_num_seqs: 1,
        max_waiting_queue: 1,
        itl: 0.05,
        ..fast()
    })
    .await;
    let c = client();
    let url = format!("{}/v1/completions", sim.base_url);
    let body = json!({"prompt": "a", "max_tokens": 4});
    let (a, b) = (
        c.post(&url).json_body(&body).send(),
        c.post(&url).json_body(&body).send(),
    );
    let first = tokio::spawn(a);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let second = tokio::spawn(b);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (status, v) = post_json(&c, &url, body.clone()).await;
    assert_eq!(
        status, 429,
        "one running and one waiting fill the simulator: {v}"
    );
    assert_eq!(v["error"]["type"], "RateLimitError");
    assert_eq!(first.await.unwrap().unwrap().status(), 200);
    assert_eq!(second.await.unwrap().unwrap().status(), 200);
    // Room again once they finished.
    let (status, _) = post_json(&c, &url, body).await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_failures_hit_their_rate() {
    let n = 1500u64;
    let p = 0.2;
    let sim = start(SimConfig {
        failure_rate: p,
        failure_types: vec![FailureType::RateLimit, FailureType::ServerError],
        seed: 3,
        ..fast()
    })
    .await;
    let c = client();
    let url = format!("{}/v1/completions", sim.base_url);
    let mut statuses = std::collections::HashMap::new();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let c = c.clone();
            let url = url.clone();
            tokio::spawn(async move {
                c.post(&url)
                    .json_body(&json!({"prompt": "a", "max_tokens": 1}))
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            })
        })
        .collect();
    for t in tasks {
        *statuses.entry(t.await.unwrap()).or_insert(0u64) += 1;
    }
    let failed = n - statuses.get(&200).copied().unwrap_or(0);
    // Binomial(1500, 0.2): mean 300, sd 15.5; five standard deviations either side.
    let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
    assert!(
        (failed as f64 - mean).abs() < 5.0 * sd,
        "failed {failed}, expected {mean} ± {}",
        5.0 * sd
    );
    assert!(
        statuses.contains_key(&429) && statuses.contains_key(&500),
        "{statuses:?}"
    );
    assert_eq!(statuses.len(), 3, "{statuses:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x_return_error_and_api_keys() {
    let sim = start(SimConfig {
        api_key: Some("secret".into()),
        ..fast()
    })
    .await;
    let c = client();
    let url = format!("{}/v1/completions", sim.base_url);
    let body = json!({"prompt": "a", "max_tokens": 1});
    let r = c.post(&url).json_body(&body).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = c
        .post(&url)
        .bearer_auth("secret")
        .header("X-Return-Error", "503")
        .json_body(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    let v: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert!(v["error"]["message"].is_string());
    let r = c
        .post(&url)
        .bearer_auth("secret")
        .json_body(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnects_cut_streams_mid_way() {
    let sim = start(SimConfig {
        disconnect_rate: 1.0,
        itl: 0.001,
        ..fast()
    })
    .await;
    let c = client();
    for _ in 0..5 {
        let s = stream(
            &c,
            &format!("{}/v1/completions", sim.base_url),
            json!({"prompt": "a", "max_tokens": 20, "stream": true}),
        )
        .await;
        assert_eq!(s.status, 200);
        assert!(
            s.error.is_some(),
            "the stream must end in an error, not cleanly"
        );
        let tokens = s.frames.len();
        assert!(
            (1..20).contains(&tokens),
            "cut after at least one chunk and before the end: {tokens}"
        );
        assert!(s.frames.iter().all(|(_, f)| f != "data: [DONE]"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prefix_cache_reports_cached_tokens() {
    let sim = start(SimConfig {
        enable_prefix_caching: true,
        block_size: 4,
        ..fast()
    })
    .await;
    let c = client();
    let url = format!("{}/v1/completions", sim.base_url);
    let prompt: String = (0..41)
        .map(benchplan::tokenizer::builtin::word)
        .collect::<Vec<_>>()
        .join(" ");
    let (_, v) = post_json(&c, &url, json!({"prompt": prompt, "max_tokens": 1})).await;
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let (_, v) = post_json(&c, &url, json!({"prompt": prompt, "max_tokens": 1})).await;
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 40);
    c.post(format!("{}/reset_prefix_cache", sim.base_url))
        .send()
        .await
        .unwrap();
    let (_, v) = post_json(&c, &url, json!({"prompt": prompt, "max_tokens": 1})).await;
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_stop_without_ignore_eos() {
    let sim = start(SimConfig {
        eos_probability: 0.2,
        seed: 5,
        ..fast()
    })
    .await;
    let c = client();
    let url = format!("{}/v1/completions", sim.base_url);
    let mut lens = Vec::new();
    for _ in 0..40 {
        let (_, v) = post_json(
            &c,
            &url,
            json!({"prompt": "a", "max_tokens": 50, "min_tokens": 3}),
        )
        .await;
        lens.push(v["usage"]["completion_tokens"].as_u64().unwrap());
    }
    assert!(lens.iter().all(|l| (3..=50).contains(l)));
    assert!(lens.iter().filter(|l| **l < 50).count() > 30, "{lens:?}");
    let (_, v) = post_json(
        &c,
        &url,
        json!({"prompt": "a", "max_tokens": 50, "ignore_eos": true}),
    )
    .await;
    assert_eq!(v["usage"]["completion_tokens"], 50);
    assert_eq!(v["choices"][0]["finish_reason"], "length");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokenizer_json_counts_the_tokens() {
    let path = crate::support::repo().join("tests/fixtures/tokenizer");
    let sim = start(SimConfig {
        tokenizer: Some(path.clone()),
        ..fast()
    })
    .await;
    let tok = benchplan::tokenizer::TokenModel::load(&path).unwrap();
    let c = client();
    let prompt = "Continuous batching admits new requests at every decode step, café!";
    let expected = tok.count(prompt) as u64;
    assert!(expected > 5);
    let (_, v) = post_json(
        &c,
        &format!("{}/tokenize", sim.base_url),
        json!({"prompt": prompt}),
    )
    .await;
    assert_eq!(v["count"].as_u64(), Some(expected));
    let s = stream(
        &c,
        &format!("{}/v1/completions", sim.base_url),
        json!({"prompt": prompt, "max_tokens": 7, "stream": true, "stream_options": {"include_usage": true}}),
    )
    .await;
    let usage = data(&s.frames[s.frames.len() - 2].1);
    assert_eq!(usage["usage"]["prompt_tokens"].as_u64(), Some(expected));
    assert_eq!(usage["usage"]["completion_tokens"], 7);
    let texts: Vec<String> = s.frames[..7]
        .iter()
        .map(|(_, f)| data(f)["choices"][0]["text"].as_str().unwrap().to_string())
        .collect();
    for t in &texts {
        assert_eq!(
            tok.count(t),
            1,
            "each generated piece is one token of the tokenizer: {t:?}"
        );
    }
}

#[test]
fn benchplan_sim_runs_as_a_process() {
    let dir = std::env::temp_dir().join(format!("benchplan-simcfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("sim.yaml");
    std::fs::write(&cfg, "preset: fast\nmodel: my-model\nmax_model_len: 512\n").unwrap();
    let sim =
        crate::support::SimProcess::start(&["--config", cfg.to_str().unwrap(), "--set", "itl=1ms"]);
    let (url, line) = (sim.url.clone(), sim.line.clone());
    assert!(
        line.contains("my-model") && line.contains("itl 1 ms"),
        "{line}"
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let models = rt.block_on(async {
        client()
            .get(format!("{url}/v1/models"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    drop(sim);
    let v: Value = serde_json::from_str(&models).unwrap();
    assert_eq!(v["data"][0]["id"], "my-model");
    assert_eq!(v["data"][0]["max_model_len"], 512);

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args(["sim", "--port", "0", "--set", "itll=1ms"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean `itl`?"));
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_per_chunk_bundles_tokens() {
    let sim = start(SimConfig {
        tokens_per_chunk: 4,
        ..fast()
    })
    .await;
    let c = client();
    let s = stream(
        &c,
        &format!("{}/v1/completions", sim.base_url),
        json!({"prompt": "a", "max_tokens": 10, "stream": true, "stream_options": {"include_usage": true}}),
    )
    .await;
    let words: Vec<usize> = s.frames[..s.frames.len() - 2]
        .iter()
        .map(|(_, f)| {
            data(f)["choices"][0]["text"]
                .as_str()
                .unwrap()
                .split_whitespace()
                .count()
        })
        .collect();
    // The first token alone (TTFT is unchanged), then bundles of four, the rest last.
    assert_eq!(words, vec![1, 4, 4, 1]);
    assert_eq!(
        data(&s.frames[s.frames.len() - 2].1)["usage"]["completion_tokens"],
        10
    );
}
