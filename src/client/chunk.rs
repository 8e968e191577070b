//! One streamed JSON chunk, read with borrowed strings and only the fields that
//! matter (the first choice's text, the usage block, an error), so a chunk costs a
//! single pass of the JSON parser and no allocation in the common case.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

#[derive(Debug, Default, Deserialize)]
pub struct Chunk<'a> {
    #[serde(borrow, default)]
    pub choices: FirstChoice<'a>,
    #[serde(default)]
    pub usage: Option<Usage>,
    #[serde(default)]
    pub error: Option<IgnoredAny>,
}

/// `choices`: whether it was non-empty, and its first element.
#[derive(Debug, Default)]
pub struct FirstChoice<'a> {
    pub present: bool,
    pub first: Option<Choice<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Choice<'a> {
    /// Completions text.
    #[serde(borrow, default)]
    pub text: Option<Cow<'a, str>>,
    /// Chat delta.
    #[serde(borrow, default)]
    pub delta: Option<Delta<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Delta<'a> {
    #[serde(borrow, default)]
    pub content: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub struct PromptDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

impl<'a> Choice<'a> {
    /// The generated text of this choice, whichever API produced it.
    pub fn text(&self) -> Option<&str> {
        self.text
            .as_deref()
            .or_else(|| self.delta.as_ref().and_then(|d| d.content.as_deref()))
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

/// Parses one `data:` payload.
pub fn parse(data: &[u8]) -> Result<Chunk<'_>, serde_json::Error> {
    serde_json::from_slice(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_completions_chat_usage_and_errors() {
        let c = parse(
            br#"{"id":"x","choices":[{"index":0,"text":" hi","finish_reason":null}],"model":"m"}"#,
        )
        .unwrap();
        assert!(c.choices.present);
        assert_eq!(c.choices.first.unwrap().text(), Some(" hi"));
        let c = parse(br#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#).unwrap();
        assert_eq!(c.choices.first.unwrap().text(), Some(""));
        let c = parse(br#"{"choices":[{"delta":{"content":"a\"b"}}]}"#).unwrap();
        assert_eq!(c.choices.first.unwrap().text(), Some("a\"b"));
        let c = parse(br#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":4}}}"#).unwrap();
        assert!(!c.choices.present);
        let u = c.usage.unwrap();
        assert_eq!(
            (
                u.prompt_tokens,
                u.completion_tokens,
                u.prompt_tokens_details.unwrap().cached_tokens
            ),
            (Some(5), Some(7), Some(4))
        );
        let c = parse(br#"{"error":{"message":"boom","code":500}}"#).unwrap();
        assert!(c.error.is_some() && !c.choices.present);
        let c = parse(br#"{"choices":null,"usage":null}"#).unwrap();
        assert!(!c.choices.present && c.usage.is_none());
        assert!(parse(b"{not json").is_err());
    }
}
