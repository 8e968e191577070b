//! Answering an inference request: admission to the engine, a generated answer
//! (streamed or whole) for the completions, chat, responses and audio APIs, and a
//! pooling answer for embeddings and rerank.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

use super::input::{prompt_tokens, read_form, read_json};
use super::reply::{Resp, State, error, failure, header, injected, json_response, now_unix};
use crate::plan::backend::{BackendSpec, BodyForm, SimHandler};
use crate::sim::body::{Api, SimBody, SseStream, output_token, usage_json};
use crate::sim::engine::{Command, Event, Finish, Job};
use crate::sim::timings::Trace;

pub(super) async fn inference(
    state: Arc<State>,
    req: Request<Incoming>,
    spec: &BackendSpec,
    ready: bool,
    arrived: Instant,
) -> Resp {
    let c = &state.config;
    let trace = state.timings.as_ref().map(|t| {
        let id = header(&req, "x-request-id").map(str::to_string);
        Trace::new(t.clone(), arrived, id)
    });
    if let Some(key) = &c.api_key {
        let ok = header(&req, "authorization").and_then(|h| h.strip_prefix("Bearer "))
            == Some(key.as_str());
        if !ok {
            state.stats.requests_failed.fetch_add(1, Relaxed);
            return error(
                StatusCode::UNAUTHORIZED,
                "AuthenticationError",
                "missing or invalid API key",
            );
        }
    }
    if let Some(status) = header(&req, "x-return-error").and_then(|s| s.trim().parse::<u16>().ok())
    {
        state.stats.requests_failed.fetch_add(1, Relaxed);
        return injected(status);
    }
    if !ready {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailableError",
            "the simulator is starting up",
        );
    }
    let injected_failure = {
        let mut rng = state.rng.lock().expect("rng lock");
        (rng.chance(c.failure_rate) && !c.failure_types.is_empty())
            .then(|| c.failure_types[rng.range(0, c.failure_types.len() as u64 - 1) as usize])
    };
    if let Some(t) = injected_failure {
        let resp = failure(t, c.max_model_len);
        state.stats.count_injected(resp.status().as_u16());
        return resp;
    }
    let read = match spec.body {
        BodyForm::Multipart => read_form(req, &state.tokens).await,
        BodyForm::Json => read_json(req).await,
    };
    let body = match read {
        Ok(b) => b,
        Err(r) => return r,
    };
    if let Some(m) = body.get("model").and_then(Value::as_str) {
        if c.lora_modules.iter().any(|l| l == m) {
            state.stats.count_lora(m);
        } else if m != c.model {
            return error(
                StatusCode::NOT_FOUND,
                "NotFoundError",
                &format!("The model `{m}` does not exist."),
            );
        }
    }
    match spec.sim {
        SimHandler::Embeddings => pooling(state, &body, Pooling::Embeddings).await,
        SimHandler::Rerank => pooling(state, &body, Pooling::Rerank).await,
        SimHandler::Chat => generate(state, &body, trace, Api::Chat).await,
        SimHandler::Transcription => generate(state, &body, trace, Api::Transcription).await,
        SimHandler::Responses => generate(state, &body, trace, Api::Responses).await,
        SimHandler::Completions => generate(state, &body, trace, Api::Completions).await,
    }
}

/// Reserves a place in the engine (running or waiting), or answers 429.
pub(super) fn admit(state: &State) -> Result<(), Box<Resp>> {
    let limit = state.config.max_num_seqs + state.config.max_waiting_queue;
    let before = state.stats.in_system.fetch_add(1, Relaxed);
    if before >= limit {
        state.stats.in_system.fetch_sub(1, Relaxed);
        state.stats.count_injected(429);
        return Err(Box::new(error(
            StatusCode::TOO_MANY_REQUESTS,
            "RateLimitError",
            "Failed to enqueue request, waiting requests queue is full",
        )));
    }
    Ok(())
}

pub(super) fn submit(state: &State, job: Job) -> Result<(), Box<Resp>> {
    state.engine.send(Command::Submit(job)).map_err(|_| {
        state.stats.in_system.fetch_sub(1, Relaxed);
        Box::new(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailableError",
            "the simulator is shutting down",
        ))
    })
}

/// What names one answer: its request number, id, object and creation time, and the
/// seed its output text is drawn from.
struct Named {
    n: u64,
    id: String,
    object: &'static str,
    created: u64,
    seed: u64,
}

impl Named {
    fn next(state: &State, api: Api) -> Named {
        let n = state.next_request.fetch_add(1, Relaxed);
        let (id, object) = match api {
            Api::Completions => (format!("cmpl-{n}"), "text_completion"),
            Api::Chat => (format!("chatcmpl-{n}"), "chat.completion.chunk"),
            Api::Responses => (format!("resp_{n}"), "response"),
            Api::Transcription => (format!("trsc-{n}"), "transcription.chunk"),
        };
        Named {
            n,
            id,
            object,
            created: now_unix(),
            seed: n.wrapping_mul(104_729) ^ state.config.seed,
        }
    }
}

/// Admits a job to the engine and returns the channel its events come on.
fn enqueue(
    state: &State,
    prompt: Vec<u32>,
    max_tokens: u64,
    body: Option<&Value>,
) -> Result<tokio::sync::mpsc::UnboundedReceiver<Event>, Box<Resp>> {
    admit(state)?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let job = Job {
        prompt,
        max_tokens,
        min_tokens: body
            .and_then(|b| b.get("min_tokens"))
            .and_then(Value::as_u64)
            .unwrap_or(0),
        // A pooling job (no body) has no output to end early.
        ignore_eos: body.is_none_or(|b| {
            b.get("ignore_eos")
                .and_then(Value::as_bool)
                .unwrap_or(false)
        }),
        pooling: body.is_none(),
        arrived: Instant::now(),
        events: tx,
    };
    submit(state, job)?;
    Ok(rx)
}

pub(super) async fn generate(
    state: Arc<State>,
    body: &Value,
    trace: Option<Trace>,
    api: Api,
) -> Resp {
    let c = &state.config;
    let prompt = match prompt_tokens(&state.tokens, body) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, "BadRequestError", &e),
    };
    let p = prompt.len() as u64;
    let asked = body
        .get("max_completion_tokens")
        .or_else(|| body.get("max_tokens"))
        .or_else(|| body.get("max_output_tokens"))
        .and_then(Value::as_u64);
    let max_tokens = asked.unwrap_or(c.max_model_len.saturating_sub(p));
    if p + max_tokens > c.max_model_len || max_tokens == 0 {
        return error(
            StatusCode::BAD_REQUEST,
            "BadRequestError",
            &format!(
                "This model's maximum context length is {} tokens. However, you requested {} tokens ({p} in the messages, {max_tokens} in the completion). Please reduce the length of the messages or completion.",
                c.max_model_len,
                p + max_tokens
            ),
        );
    }
    let rx = match enqueue(&state, prompt, max_tokens, Some(body)) {
        Ok(rx) => rx,
        Err(r) => return *r,
    };
    let named = Named::next(&state, api);
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        streamed(&state, body, rx, named, p, trace, api)
    } else {
        whole(&state, rx, named, p, api).await
    }
}

/// A streamed answer: the SSE body sends each token as the engine makes it.
fn streamed(
    state: &State,
    body: &Value,
    rx: tokio::sync::mpsc::UnboundedReceiver<Event>,
    named: Named,
    prompt_tokens: u64,
    trace: Option<Trace>,
    api: Api,
) -> Resp {
    let Named {
        n,
        id,
        object,
        created,
        seed,
    } = named;
    let model = serde_json::to_string(&state.config.model).expect("string serialises");
    let option = |key: &str| body.pointer(key).and_then(Value::as_bool) == Some(true);
    let reasoning_head = if api == Api::Responses {
        format!(
            r#"event: response.reasoning_text.delta{nl}data: {{"type":"response.reasoning_text.delta","item_id":"rs_{n}","output_index":0,"content_index":0,"delta":""#,
            nl = "\n"
        )
    } else {
        String::new()
    };
    let (head, usage_head) = if api == Api::Responses {
        (
            format!(
                r#"event: response.output_text.delta{nl}data: {{"type":"response.output_text.delta","item_id":"msg_{n}","output_index":0,"content_index":0,"delta":""#,
                nl = "\n"
            ),
            format!(r#"{{"id":"{id}","object":"{object}","created_at":{created},"model":{model},"#),
        )
    } else {
        let usage_head = format!(
            r#"data: {{"id":"{id}","object":"{object}","created":{created},"model":{model},"#
        );
        (
            format!(r#"{usage_head}"choices":[{{"index":0,"#),
            usage_head,
        )
    };
    let stream = SseStream {
        events: rx,
        api,
        head,
        usage_head,
        include_usage: option("/stream_options/include_usage"),
        continuous_usage: option("/stream_options/continuous_usage_stats"),
        prompt_tokens,
        seed,
        table: state.outputs.clone(),
        finished: false,
        completion_tokens: 0,
        cut: None,
        trace,
        // Completions and transcriptions have no reasoning channel.
        reasoning_tokens: if matches!(api, Api::Chat | Api::Responses) {
            state.config.reasoning_tokens
        } else {
            0
        },
        reasoning_key: state.config.reasoning_field.key(),
        reasoning_head,
        include_metrics: option("/include_metrics"),
        timings: None,
    };
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(SimBody::Sse(Box::new(stream)))
        .expect("valid response")
}

/// An answer not streamed: sent once the whole output exists, in the API's shape.
async fn whole(
    state: &State,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Event>,
    named: Named,
    p: u64,
    api: Api,
) -> Resp {
    let Named {
        n,
        id,
        created,
        seed,
        ..
    } = named;
    let model = &state.config.model;
    let mut text = String::new();
    let mut finish = None;
    let mut cached = 0;
    let mut produced = 0;
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Tokens {
                start,
                n,
                finish: f,
                cached_tokens,
                ..
            } => {
                for i in start..start + n {
                    text.push_str(&output_token(&state.outputs, seed, i).0);
                }
                produced = start + n;
                cached = cached_tokens;
                if f.is_some() {
                    finish = f;
                    break;
                }
            }
            Event::Cut => {
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "InternalServerError",
                    "injected disconnect",
                );
            }
        }
    }
    let usage: Value = serde_json::from_str(&format!("{{{}}}", usage_json(p, produced, cached)))
        .expect("usage JSON");
    let finish_reason = finish.map_or("length", Finish::as_str);
    let answer = match api {
        Api::Responses => {
            let u = &usage["usage"];
            json!({"id": id, "object": "response", "created_at": created, "model": model, "status": "completed",
                "output": [{"type": "message", "id": format!("msg_{n}"), "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                "usage": {"input_tokens": u["prompt_tokens"], "input_tokens_details": {"cached_tokens": cached},
                    "output_tokens": u["completion_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": u["total_tokens"]}})
        }
        Api::Transcription => json!({"text": text, "usage": usage["usage"]}),
        Api::Completions => {
            let choice =
                json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish_reason});
            json!({"id": id, "object": "text_completion", "created": created, "model": model, "choices": [choice], "usage": usage["usage"]})
        }
        Api::Chat => {
            let choice = json!({"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": null, "finish_reason": finish_reason});
            json!({"id": id, "object": "chat.completion", "created": created, "model": model, "choices": [choice], "usage": usage["usage"]})
        }
    };
    json_response(StatusCode::OK, &answer)
}

pub(super) enum Pooling {
    Embeddings,
    Rerank,
}

pub(super) async fn pooling(state: Arc<State>, body: &Value, kind: Pooling) -> Resp {
    let c = &state.config;
    let texts: Vec<String> = match kind {
        Pooling::Embeddings => match body.get("input") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .collect(),
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "BadRequestError",
                    "`input` is required",
                );
            }
        },
        Pooling::Rerank => {
            let query = body
                .get("query")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let docs = body
                .get("documents")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if docs.is_empty() {
                return error(
                    StatusCode::BAD_REQUEST,
                    "BadRequestError",
                    "`documents` must be a non-empty list",
                );
            }
            std::iter::once(query)
                .chain(docs.iter().map(|d| d.as_str().unwrap_or("").to_string()))
                .collect()
        }
    };
    let prompt: Vec<u32> = texts.iter().flat_map(|t| state.tokens.encode(t)).collect();
    let p = prompt.len() as u64;
    let mut rx = match enqueue(&state, prompt, 0, None) {
        Ok(rx) => rx,
        Err(r) => return *r,
    };
    if rx.recv().await.is_none() {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailableError",
            "the simulator is shutting down",
        );
    }
    let n = state.next_request.fetch_add(1, Relaxed);
    match kind {
        Pooling::Embeddings => {
            let data: Vec<Value> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let h = crate::hash::fnv1a64(t.as_bytes());
                    let v: Vec<f64> = (0..c.embedding_dim)
                        .map(|j| ((h.rotate_left(j as u32) % 2000) as f64 / 1000.0) - 1.0)
                        .collect();
                    json!({"object": "embedding", "index": i, "embedding": v})
                })
                .collect();
            json_response(
                StatusCode::OK,
                &json!({"id": format!("embd-{n}"), "object": "list", "created": now_unix(), "model": c.model, "data": data, "usage": {"prompt_tokens": p, "total_tokens": p}}),
            )
        }
        Pooling::Rerank => {
            let results: Vec<Value> = texts[1..]
                .iter()
                .enumerate()
                .map(|(i, t)| json!({"index": i, "document": {"text": t}, "relevance_score": (crate::hash::fnv1a64(t.as_bytes()) % 1000) as f64 / 1000.0}))
                .collect();
            json_response(
                StatusCode::OK,
                &json!({"id": format!("rerank-{n}"), "model": c.model, "usage": {"prompt_tokens": p, "total_tokens": p}, "results": results}),
            )
        }
    }
}
