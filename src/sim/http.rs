//! The simulator's HTTP API: OpenAI/vLLM request and response shapes, faults, and
//! admission control in front of the engine.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use super::body::{Api, OutputTable, SimBody, SseStream, output_token, usage_json};
use super::config::SimConfig;
use super::engine::{Command, Event, Finish, Job};
use super::metrics::Stats;
use super::timings::{Timings, Trace};
use crate::plan::sim::FailureType;
use crate::rng::Rng;
use crate::tokenizer::TokenModel;

/// Tokens an image part of a chat message counts for.
pub const IMAGE_TOKENS: usize = 64;

/// Prompt tokens a second of uploaded audio counts for (Whisper's encoder: 1,500
/// frames for a 30 s window).
pub const AUDIO_TOKENS_PER_SECOND: f64 = 50.0;

/// Shared by every connection.
pub struct State {
    pub config: SimConfig,
    pub stats: Arc<Stats>,
    pub engine: std::sync::mpsc::Sender<Command>,
    pub started: Instant,
    pub rng: Mutex<Rng>,
    pub next_request: AtomicU64,
    pub tokens: TokenModel,
    pub outputs: OutputTable,
    /// Actual send times of streamed chunks, when recording (see `timings`).
    pub timings: Option<Arc<Timings>>,
}

type Resp = Response<SimBody>;

fn json_response(status: StatusCode, v: &Value) -> Resp {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(SimBody::full(
            serde_json::to_vec(v).expect("JSON serialises"),
        ))
        .expect("valid response")
}

/// OpenAI's error body.
pub fn error(status: StatusCode, kind: &str, message: &str) -> Resp {
    json_response(
        status,
        &json!({"error": {"message": message, "type": kind, "param": null, "code": status.as_u16()}}),
    )
}

fn injected(status: u16) -> Resp {
    let s = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (kind, msg) = match status {
        400 => ("BadRequestError", "injected error: bad request"),
        401 => ("AuthenticationError", "injected error: invalid API key"),
        404 => ("NotFoundError", "injected error: not found"),
        429 => ("RateLimitError", "injected error: rate limit reached"),
        503 => (
            "ServiceUnavailableError",
            "injected error: service unavailable",
        ),
        _ => (
            "InternalServerError",
            "injected error: internal server error",
        ),
    };
    error(s, kind, msg)
}

fn failure(t: FailureType, max_model_len: u64) -> Resp {
    match t {
        FailureType::RateLimit => injected(429),
        FailureType::ServerError => injected(500),
        FailureType::Unavailable => injected(503),
        FailureType::InvalidApiKey => injected(401),
        FailureType::ContextLength => error(
            StatusCode::BAD_REQUEST,
            "BadRequestError",
            &format!("This model's maximum context length is {max_model_len} tokens. (injected)"),
        ),
    }
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Routes one request.
pub async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Resp, std::convert::Infallible> {
    let arrived = Instant::now();
    let ready = state.started.elapsed().as_secs_f64() >= state.config.startup_delay;
    let path = req.uri().path().to_string();
    let resp = match (req.method(), path.as_str()) {
        (&Method::GET, "/health") => Response::new(SimBody::full(Bytes::new())),
        (&Method::GET, "/health/ready") => {
            if ready {
                Response::new(SimBody::full(Bytes::new()))
            } else {
                error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "ServiceUnavailableError",
                    "the simulator is starting up",
                )
            }
        }
        (&Method::GET, "/metrics") => Response::builder()
            .header("content-type", "text/plain; version=0.0.4")
            .body(SimBody::full(state.stats.render(&state.config.model)))
            .expect("valid response"),
        (&Method::GET, "/sim/timings") => match &state.timings {
            Some(t) => json_response(StatusCode::OK, &t.to_json()),
            None => error(
                StatusCode::NOT_FOUND,
                "NotFoundError",
                "timings are recorded only with `benchplan sim --record-timings`",
            ),
        },
        (&Method::GET, "/version") => json_response(
            StatusCode::OK,
            &json!({"version": format!("benchplan-sim {}", env!("CARGO_PKG_VERSION"))}),
        ),
        (&Method::GET, "/v1/models") => json_response(
            StatusCode::OK,
            &json!({"object": "list", "data": std::iter::once(json!({
                "id": state.config.model, "object": "model", "created": now_unix(), "owned_by": "benchplan-sim",
                "root": state.config.model, "parent": null, "max_model_len": state.config.max_model_len,
            })).chain(state.config.lora_modules.iter().map(|l| json!({
                "id": l, "object": "model", "created": now_unix(), "owned_by": "benchplan-sim",
                "root": l, "parent": state.config.model, "max_model_len": state.config.max_model_len,
            }))).collect::<Vec<_>>()}),
        ),
        (&Method::POST, "/reset_prefix_cache") => {
            let _ = state.engine.send(Command::ResetPrefixCache);
            Response::new(SimBody::full(Bytes::new()))
        }
        (&Method::POST, p @ ("/tokenize" | "/detokenize")) => {
            let p = p.to_string();
            match read_json(req).await {
                Ok(body) if p == "/tokenize" => tokenize(&state, &body),
                Ok(body) => detokenize(&state.tokens, &body),
                Err(r) => r,
            }
        }
        (
            &Method::POST,
            "/v1/completions"
            | "/v1/chat/completions"
            | "/v1/responses"
            | "/v1/audio/transcriptions"
            | "/v1/audio/translations"
            | "/v1/embeddings"
            | "/v1/rerank"
            | "/rerank",
        ) => inference(state, req, &path, ready, arrived).await,
        _ => error(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            &format!("no route for {} {path}", req.method()),
        ),
    };
    Ok(resp)
}

async fn read_json(req: Request<Incoming>) -> Result<Value, Resp> {
    let bytes = req
        .into_body()
        .collect()
        .await
        .map_err(|e| {
            error(
                StatusCode::BAD_REQUEST,
                "BadRequestError",
                &format!("cannot read the body: {e}"),
            )
        })?
        .to_bytes();
    serde_json::from_slice(&bytes).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            "BadRequestError",
            &format!("the body is not JSON: {e}"),
        )
    })
}

/// An audio request's form as the JSON body `generate` reads: the clip becomes
/// `prompt` token ids ([`AUDIO_TOKENS_PER_SECOND`], drawn from the clip's bytes so the
/// same clip is the same prompt to the prefix cache) followed by the tokens of a
/// `prompt` field when one is sent; numbers and booleans are read from their text
/// (`True` as Python writes it); `stream_include_usage` and
/// `stream_continuous_usage_stats` become `stream_options`.
async fn read_form(req: Request<Incoming>, tok: &TokenModel) -> Result<Value, Resp> {
    let bad = |m: &str| error(StatusCode::BAD_REQUEST, "BadRequestError", m);
    let ct = header(&req, "content-type").unwrap_or("").to_string();
    let boundary = super::multipart::boundary(&ct)
        .ok_or_else(|| bad("the audio endpoints take a multipart/form-data upload"))?
        .to_string();
    let bytes = req
        .into_body()
        .collect()
        .await
        .map_err(|e| bad(&format!("cannot read the body: {e}")))?
        .to_bytes();
    let parts = super::multipart::parse(&bytes, &boundary).map_err(|e| bad(&e))?;
    let mut body = serde_json::Map::new();
    let mut ids: Option<Vec<u32>> = None;
    let mut options = serde_json::Map::new();
    for part in parts {
        if part.name == "file" {
            let info = crate::wav::info(part.data).map_err(|e| bad(&format!("`file`: {e}")))?;
            let n = (info.duration() * AUDIO_TOKENS_PER_SECOND).ceil() as usize;
            let chunk = (part.data.len() / n.max(1)).max(1);
            ids = Some(
                part.data
                    .chunks(chunk)
                    .take(n)
                    .map(|c| (crate::hash::fnv1a64(c) % 100_000) as u32)
                    .collect(),
            );
            continue;
        }
        let text = String::from_utf8_lossy(part.data).into_owned();
        let value = match part.name.as_str() {
            "max_completion_tokens" | "max_tokens" | "min_tokens" => {
                json!(text.trim().parse::<u64>().map_err(|_| bad(&format!(
                    "`{}` must be a whole number, not {text:?}",
                    part.name
                )))?)
            }
            "stream" | "ignore_eos" | "stream_include_usage" | "stream_continuous_usage_stats" => {
                json!(matches!(text.trim(), "true" | "True" | "1"))
            }
            _ => Value::String(text),
        };
        match part.name.as_str() {
            "stream_include_usage" => options.insert("include_usage".into(), value),
            "stream_continuous_usage_stats" => {
                options.insert("continuous_usage_stats".into(), value)
            }
            _ => body.insert(part.name, value),
        };
    }
    let mut ids =
        ids.ok_or_else(|| bad("the form has no `file` part (the audio to transcribe)"))?;
    if let Some(Value::String(p)) = body.get("prompt") {
        ids.extend(tok.encode(p));
    }
    body.insert("prompt".into(), json!(ids));
    body.insert("stream_options".into(), Value::Object(options));
    Ok(Value::Object(body))
}

/// Prompt token ids of a completions `prompt` or a chat `messages` list.
fn prompt_tokens(tok: &TokenModel, body: &Value) -> Result<Vec<u32>, String> {
    // The Responses API's `input`: a string, or message items like chat's.
    let messages = match body.get("input") {
        Some(Value::String(s)) => return Ok(tok.encode(s)),
        Some(list @ Value::Array(_)) => Some(list),
        Some(_) => return Err("`input` must be a string or a list of items".into()),
        None => body.get("messages"),
    };
    if let Some(messages) = messages {
        let list = messages.as_array().ok_or("`messages` must be a list")?;
        let mut ids = Vec::new();
        for m in list {
            match m.get("content") {
                Some(Value::String(s)) => ids.extend(tok.encode(s)),
                Some(Value::Array(parts)) => {
                    for part in parts {
                        match part.get("type").and_then(Value::as_str) {
                            Some("text" | "input_text") => ids.extend(
                                tok.encode(part.get("text").and_then(Value::as_str).unwrap_or("")),
                            ),
                            Some(_) => ids.extend(std::iter::repeat_n(0, IMAGE_TOKENS)),
                            None => return Err("a content part needs a `type`".into()),
                        }
                    }
                }
                Some(Value::Null) | None => {}
                Some(_) => return Err("`content` must be a string or a list of parts".into()),
            }
        }
        return Ok(ids);
    }
    match body.get("prompt") {
        Some(Value::String(s)) => Ok(tok.encode(s)),
        Some(Value::Array(items)) => {
            let mut ids = Vec::new();
            for item in items {
                match item {
                    Value::String(s) => ids.extend(tok.encode(s)),
                    Value::Number(n) => ids.push(
                        n.as_u64()
                            .ok_or("token ids must be non-negative integers")?
                            as u32,
                    ),
                    Value::Array(inner) => {
                        ids.extend(inner.iter().filter_map(Value::as_u64).map(|n| n as u32))
                    }
                    _ => return Err("`prompt` items must be strings or token ids".into()),
                }
            }
            Ok(ids)
        }
        _ => Err("`prompt` (or `messages`) is required".into()),
    }
}

fn tokenize(state: &State, body: &Value) -> Resp {
    match prompt_tokens(&state.tokens, body) {
        Ok(ids) => json_response(
            StatusCode::OK,
            &json!({"count": ids.len(), "max_model_len": state.config.max_model_len, "tokens": ids}),
        ),
        Err(e) => error(StatusCode::BAD_REQUEST, "BadRequestError", &e),
    }
}

fn detokenize(tok: &TokenModel, body: &Value) -> Resp {
    let Some(tokens) = body.get("tokens").and_then(Value::as_array) else {
        return error(
            StatusCode::BAD_REQUEST,
            "BadRequestError",
            "`tokens` must be a list of ids",
        );
    };
    let ids: Vec<u32> = tokens
        .iter()
        .filter_map(Value::as_u64)
        .map(|n| n as u32)
        .collect();
    json_response(StatusCode::OK, &json!({"prompt": tok.decode(&ids)}))
}

fn header<'a>(req: &'a Request<Incoming>, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

async fn inference(
    state: Arc<State>,
    req: Request<Incoming>,
    path: &str,
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
    let read = if path.starts_with("/v1/audio/") {
        read_form(req, &state.tokens).await
    } else {
        read_json(req).await
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
    match path {
        "/v1/embeddings" => pooling(state, &body, Pooling::Embeddings).await,
        "/v1/rerank" | "/rerank" => pooling(state, &body, Pooling::Rerank).await,
        _ => {
            generate(
                state,
                &body,
                trace,
                if path.ends_with("chat/completions") {
                    Api::Chat
                } else if path.starts_with("/v1/audio/") {
                    Api::Transcription
                } else if path.ends_with("/responses") {
                    Api::Responses
                } else {
                    Api::Completions
                },
            )
            .await
        }
    }
}

/// Reserves a place in the engine (running or waiting), or answers 429.
fn admit(state: &State) -> Result<(), Box<Resp>> {
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

fn submit(state: &State, job: Job) -> Result<(), Box<Resp>> {
    state.engine.send(Command::Submit(job)).map_err(|_| {
        state.stats.in_system.fetch_sub(1, Relaxed);
        Box::new(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailableError",
            "the simulator is shutting down",
        ))
    })
}

async fn generate(state: Arc<State>, body: &Value, trace: Option<Trace>, api: Api) -> Resp {
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
    if let Err(r) = admit(&state) {
        return *r;
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let job = Job {
        prompt,
        max_tokens,
        min_tokens: body.get("min_tokens").and_then(Value::as_u64).unwrap_or(0),
        ignore_eos: body
            .get("ignore_eos")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        pooling: false,
        arrived: Instant::now(),
        events: tx,
    };
    if let Err(r) = submit(&state, job) {
        return *r;
    }
    let n = state.next_request.fetch_add(1, Relaxed);
    let seed = n.wrapping_mul(104_729) ^ c.seed;
    let (id, object) = match api {
        Api::Completions => (format!("cmpl-{n}"), "text_completion"),
        Api::Chat => (format!("chatcmpl-{n}"), "chat.completion.chunk"),
        Api::Responses => (format!("resp_{n}"), "response"),
        Api::Transcription => (format!("trsc-{n}"), "transcription.chunk"),
    };
    let model = serde_json::to_string(&c.model).expect("string serialises");
    let created = now_unix();
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        let include_usage = body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            == Some(true);
        let continuous_usage = body
            .pointer("/stream_options/continuous_usage_stats")
            .and_then(Value::as_bool)
            == Some(true);
        let (head, usage_head) = if api == Api::Responses {
            (
                format!(
                    r#"event: response.output_text.delta{nl}data: {{"type":"response.output_text.delta","item_id":"msg_{n}","output_index":0,"content_index":0,"delta":""#,
                    nl = "\n"
                ),
                format!(
                    r#"{{"id":"{id}","object":"{object}","created_at":{created},"model":{model},"#
                ),
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
            include_usage,
            continuous_usage,
            prompt_tokens: p,
            seed,
            table: state.outputs.clone(),
            finished: false,
            completion_tokens: 0,
            cut: None,
            trace,
        };
        return Response::builder()
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache")
            .body(SimBody::Sse(Box::new(stream)))
            .expect("valid response");
    }
    // Not streamed: answer once the whole output exists.
    let mut rx = rx;
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
    if api == Api::Responses {
        let u = &usage["usage"];
        return json_response(
            StatusCode::OK,
            &json!({"id": id, "object": "response", "created_at": created, "model": c.model, "status": "completed",
                "output": [{"type": "message", "id": format!("msg_{n}"), "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                "usage": {"input_tokens": u["prompt_tokens"], "input_tokens_details": {"cached_tokens": cached},
                    "output_tokens": u["completion_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": u["total_tokens"]}}),
        );
    }
    if api == Api::Transcription {
        return json_response(
            StatusCode::OK,
            &json!({"text": text, "usage": usage["usage"]}),
        );
    }
    let choice = match api {
        Api::Completions => {
            json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish.map_or("length", Finish::as_str)})
        }
        _ => {
            json!({"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": null, "finish_reason": finish.map_or("length", Finish::as_str)})
        }
    };
    let object = if api == Api::Chat {
        "chat.completion"
    } else {
        "text_completion"
    };
    json_response(
        StatusCode::OK,
        &json!({"id": id, "object": object, "created": created, "model": c.model, "choices": [choice], "usage": usage["usage"]}),
    )
}

enum Pooling {
    Embeddings,
    Rerank,
}

async fn pooling(state: Arc<State>, body: &Value, kind: Pooling) -> Resp {
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
    if let Err(r) = admit(&state) {
        return *r;
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let job = Job {
        prompt,
        max_tokens: 0,
        min_tokens: 0,
        ignore_eos: true,
        pooling: true,
        arrived: Instant::now(),
        events: tx,
    };
    if let Err(r) = submit(&state, job) {
        return *r;
    }
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
