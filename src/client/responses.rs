//! The Responses API's streamed events (`/v1/responses`), as vLLM's `openai-responses`
//! benchmark reads them (docs/benchmarking/cli.md, "Responses API Benchmark"):
//! `response.output_text.delta` and `response.reasoning_text.delta` are token events
//! (only output text joins the generated text); `response.completed` (or
//! `response.incomplete`, the end of an answer cut at `max_output_tokens`) ends the
//! answer and carries the usage; `response.failed` and `error` fail it. A stream that
//! ends without a terminal event is a failed request.

use std::borrow::Cow;

use serde::Deserialize;

/// One event's JSON: its type, a delta's text, or the response it closes.
#[derive(Debug, Default, Deserialize)]
pub struct Event<'a> {
    #[serde(rename = "type", borrow, default)]
    pub kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub delta: Option<Cow<'a, str>>,
    #[serde(default)]
    pub response: Option<Response>,
    /// An `error` event's message.
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Response {
    #[serde(default)]
    pub usage: Option<Usage>,
    #[serde(default)]
    pub error: Option<serde_json::Value>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: Option<u64>,
    #[serde(default)]
    pub output_tokens: Option<u64>,
    #[serde(default)]
    pub input_tokens_details: Option<Details>,
    #[serde(default, deserialize_with = "super::chunk::model::lenient_object")]
    pub output_tokens_details: Option<super::chunk::CompletionDetails>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub struct Details {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

/// What an event means for the measurement.
#[derive(Debug, PartialEq)]
pub enum Meaning<'a> {
    /// A token event of the answer; the text it adds to the generated text.
    Token(Cow<'a, str>),
    /// A token event of the reasoning (vLLM counts it; it adds no text).
    Reasoning,
    /// The answer is complete; its usage, when it carries one.
    End(Option<Counts>),
    /// The server says the answer failed.
    Failed(String),
    /// Bookkeeping (`response.created`, `…added`, `…done`, an empty delta).
    Other,
}

/// A completed response's usage: input, output, cached input and reasoning tokens.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Counts {
    pub input: Option<u64>,
    pub output: Option<u64>,
    pub cached: Option<u64>,
    pub reasoning: Option<u64>,
}

/// The meaning of one event; `sse_event` is its `event:` line, used when the JSON has
/// no `type`.
pub fn read<'a>(sse_event: Option<&[u8]>, data: &'a [u8]) -> Result<Meaning<'a>, String> {
    let e: Event<'a> = serde_json::from_slice(data).map_err(|e| e.to_string())?;
    let kind = match (&e.kind, sse_event) {
        (Some(k), _) => k.as_ref(),
        (None, Some(name)) => std::str::from_utf8(name).unwrap_or(""),
        (None, None) => "",
    };
    Ok(match kind {
        "response.output_text.delta" | "response.reasoning_text.delta" => {
            let output = kind == "response.output_text.delta";
            match e.delta {
                Some(d) if !d.is_empty() => {
                    if output {
                        Meaning::Token(d)
                    } else {
                        Meaning::Reasoning
                    }
                }
                _ => Meaning::Other,
            }
        }
        "response.completed" | "response.incomplete" => {
            Meaning::End(e.response.and_then(|r| r.usage).map(|u| Counts {
                input: u.input_tokens,
                output: u.output_tokens,
                cached: u.input_tokens_details.and_then(|d| d.cached_tokens),
                reasoning: u.output_tokens_details.and_then(|d| d.reasoning_tokens),
            }))
        }
        "response.failed" => Meaning::Failed(
            e.response
                .and_then(|r| r.error)
                .map_or_else(|| "response.failed".to_string(), |v| v.to_string()),
        ),
        "error" => Meaning::Failed(e.message.unwrap_or_else(|| "error event".into())),
        _ => Meaning::Other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_read_as_vllm_counts_them() {
        fn m(t: &str) -> Meaning<'_> {
            read(None, t.as_bytes()).unwrap()
        }
        assert_eq!(
            m(
                r#"{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"Hi \"x\""}"#
            ),
            Meaning::Token(Cow::Borrowed("Hi \"x\""))
        );
        assert_eq!(
            m(r#"{"type":"response.reasoning_text.delta","delta":"think"}"#),
            Meaning::Reasoning
        );
        assert_eq!(
            m(r#"{"type":"response.output_text.delta","delta":""}"#),
            Meaning::Other
        );
        assert_eq!(
            m(r#"{"type":"response.created","response":{"id":"r","usage":null}}"#),
            Meaning::Other
        );
        assert_eq!(
            m(
                r#"{"type":"response.completed","response":{"usage":{"input_tokens":5,"output_tokens":7,"input_tokens_details":{"cached_tokens":2},"output_tokens_details":{"reasoning_tokens":3}}}}"#
            ),
            Meaning::End(Some(Counts {
                input: Some(5),
                output: Some(7),
                cached: Some(2),
                reasoning: Some(3)
            }))
        );
        assert_eq!(
            m(r#"{"type":"response.incomplete","response":{}}"#),
            Meaning::End(None)
        );
        assert!(
            matches!(m(r#"{"type":"response.failed","response":{"error":{"code":"server_error"}}}"#), Meaning::Failed(e) if e.contains("server_error"))
        );
        assert!(
            matches!(m(r#"{"type":"error","message":"boom"}"#), Meaning::Failed(e) if e == "boom")
        );
        // The `event:` line names the type when the JSON does not.
        assert_eq!(
            read(Some(b"response.output_text.delta"), br#"{"delta":"a"}"#).unwrap(),
            Meaning::Token(Cow::Borrowed("a"))
        );
        assert!(read(None, b"not json").is_err());
    }
}
