//! The simulator's HTTP API: OpenAI/vLLM request and response shapes, faults, and
//! admission control in front of the engine.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use super::body::SimBody;
use super::engine::Command;
use crate::plan::backend::Backend;
use crate::tokenizer::TokenModel;

mod answer;
mod input;
mod reply;
use answer::inference;
use input::{prompt_tokens, read_json};
pub use reply::{AUDIO_TOKENS_PER_SECOND, IMAGE_TOKENS, State, error};
use reply::{Resp, json_response, now_unix};

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
            .body(SimBody::full(
                state.stats.render(&state.config.model, &state.config),
            ))
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
        // Every backend's endpoints, from the backend table.
        (&Method::POST, p) if let Some(spec) = Backend::served_at(p) => {
            inference(state, req, spec, ready, arrived).await
        }
        _ => error(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            &format!("no route for {} {path}", req.method()),
        ),
    };
    Ok(resp)
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
