//! What every part of the simulator's HTTP API shares: the state of the server, the
//! response type, OpenAI's error bodies, injected failures, and reading a header.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

use crate::plan::sim::FailureType;
use crate::rng::Rng;
use crate::sim::body::{OutputTable, SimBody};
use crate::sim::config::SimConfig;
use crate::sim::engine::Command;
use crate::sim::metrics::Stats;
use crate::sim::timings::Timings;
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

pub(super) type Resp = Response<SimBody>;

pub(super) fn json_response(status: StatusCode, v: &Value) -> Resp {
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

pub(super) fn injected(status: u16) -> Resp {
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

pub(super) fn failure(t: FailureType, max_model_len: u64) -> Resp {
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

pub(super) fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A request header as text.
pub(super) fn header<'a>(req: &'a Request<Incoming>, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}
