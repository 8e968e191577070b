//! Reading an inference request: its JSON or multipart body, and its prompt as tokens.

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use serde_json::{Value, json};

use super::reply::{AUDIO_TOKENS_PER_SECOND, IMAGE_TOKENS, Resp, error, header};
use crate::tokenizer::TokenModel;

pub(super) async fn read_json(req: Request<Incoming>) -> Result<Value, Resp> {
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
pub(super) async fn read_form(req: Request<Incoming>, tok: &TokenModel) -> Result<Value, Resp> {
    let bad = |m: &str| error(StatusCode::BAD_REQUEST, "BadRequestError", m);
    let ct = header(&req, "content-type").unwrap_or("").to_string();
    let boundary = crate::sim::multipart::boundary(&ct)
        .ok_or_else(|| bad("the audio endpoints take a multipart/form-data upload"))?
        .to_string();
    let bytes = req
        .into_body()
        .collect()
        .await
        .map_err(|e| bad(&format!("cannot read the body: {e}")))?
        .to_bytes();
    let parts = crate::sim::multipart::parse(&bytes, &boundary).map_err(|e| bad(&e))?;
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
pub(super) fn prompt_tokens(tok: &TokenModel, body: &Value) -> Result<Vec<u32>, String> {
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
