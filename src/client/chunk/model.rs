//! The shape of one streamed chunk: the fields benchplan reads, with borrowed strings,
//! and which chunks are token events (see the parent module).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

#[derive(Debug, Default, PartialEq, Deserialize)]
pub struct Chunk<'a> {
    #[serde(borrow, default)]
    pub choices: FirstChoice<'a>,
    #[serde(default)]
    pub usage: Option<Usage>,
    #[serde(default)]
    pub error: Option<IgnoredAny>,
    /// vLLM's per-request timings (`metrics.queue_time_ms`, …), when it sends them.
    #[serde(default, deserialize_with = "lenient_object")]
    pub metrics: Option<ServerTimes>,
    /// llama.cpp's per-request `timings` (llama-server's final chunk).
    #[serde(default, deserialize_with = "lenient_object")]
    pub timings: Option<LlamaTimings>,
}

/// llama-server's `timings` object (tools/server: `cache_n`, `prompt_n`, `prompt_ms`,
/// `predicted_n`, `predicted_ms`, per-token and per-second rates, and `draft_n` /
/// `draft_n_accepted` with a draft model); the fields benchplan reads.
#[derive(Debug, Default, Clone, Copy, PartialEq, Deserialize)]
pub struct LlamaTimings {
    /// Prompt processing time: the server's own time to its first token (it reports
    /// no queue).
    #[serde(default, deserialize_with = "lenient")]
    pub prompt_ms: Option<f64>,
    /// Decode time.
    #[serde(default, deserialize_with = "lenient")]
    pub predicted_ms: Option<f64>,
    /// Speculative decoding with a draft model: tokens drafted and accepted.
    #[serde(default, deserialize_with = "lenient")]
    pub draft_n: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub draft_n_accepted: Option<u64>,
}

/// Server text read leniently: a value of the wrong shape (a string for a number, a
/// list for an object, a fraction for a count) reads as absent, never as a failed
/// chunk. Only the optional side-channels use it (timings, details), never a field
/// that decides what a token event is.
pub fn lenient<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned>(
    d: D,
) -> Result<Option<T>, D::Error> {
    Ok(serde_json::from_value(serde_json::Value::deserialize(d)?).ok())
}

/// [`lenient`] for an object: only a JSON object reads as one (serde would take a
/// list as a struct's fields in order: `[1, 2]` is no timings object).
pub fn lenient_object<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned>(
    d: D,
) -> Result<Option<T>, D::Error> {
    match serde_json::Value::deserialize(d)? {
        v @ serde_json::Value::Object(_) => Ok(serde_json::from_value(v).ok()),
        _ => Ok(None),
    }
}

/// `choices`: whether it was non-empty, and its first element.
#[derive(Debug, Default, PartialEq)]
pub struct FirstChoice<'a> {
    pub present: bool,
    pub first: Option<Choice<'a>>,
}

#[derive(Debug, Default, PartialEq, Deserialize)]
pub struct Choice<'a> {
    /// Completions text.
    #[serde(borrow, default)]
    pub text: Option<Cow<'a, str>>,
    /// Chat delta.
    #[serde(borrow, default)]
    pub delta: Option<Delta<'a>>,
}

#[derive(Debug, Default, PartialEq, Deserialize)]
pub struct Delta<'a> {
    #[serde(borrow, default)]
    pub content: Option<Cow<'a, str>>,
    #[serde(default)]
    pub role: Truthy,
    #[serde(default)]
    pub reasoning: Truthy,
    /// DeepSeek's and older vLLM's reasoning field: output, but no token event for
    /// vLLM 0.33's client.
    #[serde(default)]
    pub reasoning_content: Truthy,
    #[serde(default)]
    pub tool_calls: Truthy,
    #[serde(default)]
    pub function_call: Truthy,
}

/// Whether a JSON value is "truthy" as Python sees it (present, not null, not an empty
/// string, list or object, not false or 0), read without keeping the value.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Truthy(pub bool);

#[derive(Debug, Default, Clone, Copy, PartialEq, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptDetails>,
    #[serde(default, deserialize_with = "lenient_object")]
    pub completion_tokens_details: Option<CompletionDetails>,
}

/// `usage.completion_tokens_details`: how many of the output tokens were reasoning.
/// Server text: a count that is not a whole number reads as absent, never as a
/// failed chunk.
#[derive(Debug, Default, Clone, Copy, PartialEq, Deserialize)]
pub struct CompletionDetails {
    #[serde(default, deserialize_with = "lenient")]
    pub reasoning_tokens: Option<u64>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Deserialize)]
pub struct PromptDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

/// The server's own view of the request (vLLM's `metrics`, vllm#46768), in
/// milliseconds, and its speculative decoding (vllm#48915).
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
pub struct ServerTimes {
    #[serde(default, deserialize_with = "lenient")]
    pub queue_time_ms: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub time_to_first_token_ms: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub generation_time_ms: Option<f64>,
    #[serde(default, deserialize_with = "lenient_object")]
    pub speculative_decoding: Option<SpecDecodeCounts>,
}

/// vLLM's per-request `metrics.speculative_decoding` (`--per-request-spec-decode-metrics
/// summary|detailed`): the counts benchplan derives every figure from (it recomputes
/// the rate and length rather than trusting the server's own).
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
pub struct SpecDecodeCounts {
    #[serde(default, deserialize_with = "lenient")]
    pub num_spec_steps: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub num_draft_tokens: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub num_accepted_draft_tokens: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub num_spec_tokens: Option<u64>,
    /// Steps by how many of their drafted tokens were accepted (index 0: none).
    #[serde(default, deserialize_with = "lenient")]
    pub acceptance_histogram: Option<Vec<u64>>,
}

/// Which API's rules decide what a token event is (the backend table names it).
pub use crate::plan::backend::Api;

/// Which channel a chunk's output is on: a reasoning model's reasoning, or the
/// answer (content, tool calls); `None` for a chunk without output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    None,
    Reasoning,
    Answer,
}

impl Chunk<'_> {
    /// Whether this chunk is a token event (see the module docs), and the text it adds
    /// to the generated text.
    pub fn token(&self, api: Api) -> Option<&str> {
        let first = self.choices.first.as_ref();
        match api {
            Api::Completions => self
                .choices
                .present
                .then(|| first.and_then(|c| c.text.as_deref()).unwrap_or("")),
            Api::Chat | Api::Transcription => {
                let d = first?.delta.as_ref()?;
                let content = d.content.as_deref();
                let output = content.is_some_and(|c| !c.is_empty())
                    || d.reasoning.0
                    || d.tool_calls.0
                    || d.function_call.0
                    || (content == Some("") && !d.role.0);
                output.then(|| content.unwrap_or(""))
            }
            Api::Responses => None,
        }
    }

    /// The channel of this chunk's output, whatever vLLM's rule makes of it as a token
    /// event: reasoning (`reasoning` or `reasoning_content`, with no content or tool
    /// call beside it) or the answer (any other output).
    pub fn channel(&self, api: Api) -> Channel {
        self.read(api).0
    }

    /// The chunk's channel and its token event (see [`Chunk::token`]), read once.
    pub fn read(&self, api: Api) -> (Channel, Option<&str>) {
        let token = self.token(api);
        if matches!(api, Api::Chat | Api::Transcription) {
            if let Some(d) = self.choices.first.as_ref().and_then(|c| c.delta.as_ref()) {
                let content = d.content.as_deref().is_some_and(|c| !c.is_empty());
                if (d.reasoning.0 || d.reasoning_content.0)
                    && !content
                    && !d.tool_calls.0
                    && !d.function_call.0
                {
                    return (Channel::Reasoning, token);
                }
            }
        }
        let channel = if token.is_some() {
            Channel::Answer
        } else {
            Channel::None
        };
        (channel, token)
    }
}

impl<'de> Deserialize<'de> for Truthy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Truthy;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Truthy, E> {
                Ok(Truthy(false))
            }
            fn visit_none<E: de::Error>(self) -> Result<Truthy, E> {
                Ok(Truthy(false))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Truthy, E> {
                Ok(Truthy(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Truthy, E> {
                Ok(Truthy(v != 0))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Truthy, E> {
                Ok(Truthy(v != 0))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Truthy, E> {
                Ok(Truthy(v != 0.0))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Truthy, E> {
                Ok(Truthy(!v.is_empty()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Truthy, A::Error> {
                let mut any = false;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    any = true;
                }
                Ok(Truthy(any))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Truthy, A::Error> {
                let mut any = false;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                    any = true;
                }
                Ok(Truthy(any))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for FirstChoice<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = FirstChoice<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of choices")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(FirstChoice::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let first: Option<Choice<'a>> = seq.next_element()?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(FirstChoice {
                    present: first.is_some(),
                    first,
                })
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}
