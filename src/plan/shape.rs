//! How a request is worded, for servers that read vLLM's request differently: chat
//! content as parts or a string, the request-id header, `stream_options`, and the chat
//! output-length key. Every field unset is exactly vLLM's request; a field set in the
//! plan (defaults, a service, the matrix) or by a `bench` flag is sent as set. The
//! fields left unset are the ones `run` and `bench` may fill when a server refuses
//! vLLM's form (see `client::shape`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Request wording; unset fields send what vLLM sends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RequestShape {
    /// Chat message content: `parts` (a list of typed parts, as vLLM sends it) or
    /// `string` (plain text; some chat templates accept only this).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_content: Option<ChatContent>,
    /// The request-id header's value: `prefixed` (vLLM's: `request_id_prefix` and a
    /// counter), `uuid` (a random UUID per request), or `none` (no header).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestIdForm>,
    /// The request-id header's name (default `x-request-id`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id_header: Option<String>,
    /// Send `stream_options: {include_usage: true}` on streamed requests (vLLM does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<bool>,
    /// The key a chat request gives its output length: `max_completion_tokens`
    /// (vLLM's) or `max_tokens` (older servers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens_key: Option<MaxTokensKey>,
}

/// Chat message content.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum ChatContent {
    Parts,
    String,
}

/// The value of the request-id header.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum RequestIdForm {
    Prefixed,
    Uuid,
    None,
}

/// The output-length key of a chat request.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum MaxTokensKey {
    MaxCompletionTokens,
    MaxTokens,
}

impl RequestShape {
    /// Whether nothing is set (vLLM's request).
    pub fn is_unset(&self) -> bool {
        *self == RequestShape::default()
    }

    /// This shape with `other`'s fields filling the ones unset here.
    pub fn or(&self, other: &RequestShape) -> RequestShape {
        RequestShape {
            chat_content: self.chat_content.or(other.chat_content),
            request_id: self.request_id.or(other.request_id),
            request_id_header: self
                .request_id_header
                .clone()
                .or_else(|| other.request_id_header.clone()),
            stream_options: self.stream_options.or(other.stream_options),
            max_tokens_key: self.max_tokens_key.or(other.max_tokens_key),
        }
    }

    /// The plan keys set here, as `key = value` (for notes and deviations).
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(c) = &self.chat_content {
            out.push(format!("chat_content = \"{}\"", plan_name(c)));
        }
        if let Some(r) = &self.request_id {
            out.push(format!("request_id = \"{}\"", plan_name(r)));
        }
        if let Some(h) = &self.request_id_header {
            out.push(format!("request_id_header = {h:?}"));
        }
        if let Some(s) = self.stream_options {
            out.push(format!("stream_options = {s}"));
        }
        if let Some(k) = &self.max_tokens_key {
            out.push(format!("max_tokens_key = \"{}\"", plan_name(k)));
        }
        out
    }
}

/// A value's name as the plan spells it.
fn plan_name<T: Serialize>(x: &T) -> String {
    serde_json::to_value(x)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn or_fills_only_unset_fields_and_describe_names_plan_keys() {
        let mine = RequestShape {
            request_id: Some(RequestIdForm::None),
            ..RequestShape::default()
        };
        let found = RequestShape {
            request_id: Some(RequestIdForm::Uuid),
            chat_content: Some(ChatContent::String),
            ..RequestShape::default()
        };
        let s = mine.or(&found);
        assert_eq!(s.request_id, Some(RequestIdForm::None));
        assert_eq!(s.chat_content, Some(ChatContent::String));
        assert_eq!(
            s.describe(),
            ["chat_content = \"string\"", "request_id = \"none\""]
        );
        assert!(RequestShape::default().is_unset());
        let k = RequestShape {
            max_tokens_key: Some(MaxTokensKey::MaxTokens),
            stream_options: Some(false),
            ..RequestShape::default()
        };
        assert_eq!(
            k.describe(),
            ["stream_options = false", "max_tokens_key = \"max_tokens\""]
        );
    }
}
