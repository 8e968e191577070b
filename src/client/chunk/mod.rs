//! One streamed JSON chunk, read with borrowed strings and only the fields that
//! matter (the first choice's output, the usage block, an error, the server's own
//! timings), so a chunk costs a single pass of the JSON parser and no allocation in the
//! common case.
//!
//! Which chunks are token events is vLLM 0.33's definition (`endpoint_request_func.py`):
//! for completions any chunk with non-empty `choices`; for chat, a first choice whose
//! delta carries output (`_choice_has_streamed_output`): non-empty `content`,
//! `reasoning`, `tool_calls` or `function_call`, or `content == ""` without a `role`.
//! So vLLM's opening role chunk (`{"role":"assistant","content":""}`) and `{}` deltas
//! are not tokens, `reasoning_content` is not one, and `reasoning` is one whose text is
//! not part of the generated text.

pub use model::{
    Api, Channel, Choice, Chunk, CompletionDetails, Delta, FirstChoice, PromptDetails, ServerTimes,
    SpecDecodeCounts, Truthy, Usage,
};

pub mod model;
mod scan;

/// Parses one `data:` payload: the byte scan of [`scan`] for the common
/// shapes, the full parse for everything else (with the same answer either way).
pub fn parse(data: &[u8]) -> Result<Chunk<'_>, serde_json::Error> {
    match scan::scan(data) {
        Some(c) => Ok(c),
        None => full_parse(data),
    }
}

/// The full parse: serde's, for any chunk.
pub fn full_parse(data: &[u8]) -> Result<Chunk<'_>, serde_json::Error> {
    serde_json::from_slice(data)
}

/// `data` with Python's non-JSON numbers (`NaN`, `Infinity`, `-Infinity`, which
/// Python's `json.dumps` writes and vLLM's client's `json.loads` reads) outside
/// strings made `null`; None when it has none. A server's timing that is not a number
/// then reads as absent, where serde alone would fail the whole chunk.
pub fn python_specials_to_null(data: &[u8]) -> Option<Vec<u8>> {
    const WORDS: [&[u8]; 3] = [b"-Infinity", b"Infinity", b"NaN"];
    let (mut out, mut i, mut in_str, mut changed) = (Vec::new(), 0, false, false);
    while i < data.len() {
        let b = data[i];
        if in_str {
            out.push(b);
            match b {
                b'\\' if i + 1 < data.len() => {
                    out.push(data[i + 1]);
                    i += 1;
                }
                b'"' => in_str = false,
                _ => {}
            }
        } else if b == b'"' {
            in_str = true;
            out.push(b);
        } else if let Some(w) = WORDS.iter().find(|w| data[i..].starts_with(w)) {
            out.extend_from_slice(b"null");
            i += w.len() - 1;
            changed = true;
        } else {
            out.push(b);
        }
        i += 1;
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pythons_nan_and_infinity_become_null_outside_strings_only() {
        let data = br#"{"metrics":{"a":NaN,"b":-Infinity,"c":Infinity,"s":"NaN \" Infinity"}}"#;
        let fixed = python_specials_to_null(data).unwrap();
        assert_eq!(
            std::str::from_utf8(&fixed).unwrap(),
            r#"{"metrics":{"a":null,"b":null,"c":null,"s":"NaN \" Infinity"}}"#
        );
        assert!(parse(&fixed).is_ok());
        assert_eq!(python_specials_to_null(br#"{"s":"NaN"}"#), None);
    }

    fn token(api: Api, json: &str) -> Option<String> {
        parse(json.as_bytes())
            .unwrap()
            .token(api)
            .map(str::to_string)
    }

    #[test]
    fn reads_completions_chat_usage_and_errors() {
        let c = parse(
            br#"{"id":"x","choices":[{"index":0,"text":" hi","finish_reason":null}],"model":"m"}"#,
        )
        .unwrap();
        assert!(c.choices.present);
        assert_eq!(c.token(Api::Completions), Some(" hi"));
        let c = parse(br#"{"choices":[{"delta":{"content":"a\"b"}}]}"#).unwrap();
        assert_eq!(c.token(Api::Chat), Some("a\"b"));
        let c = parse(br#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":4}},"metrics":{"queue_time_ms":12.5,"time_to_first_token_ms":40}}"#).unwrap();
        assert!(!c.choices.present && c.token(Api::Completions).is_none());
        let u = c.usage.unwrap();
        assert_eq!(
            (
                u.prompt_tokens,
                u.completion_tokens,
                u.prompt_tokens_details.unwrap().cached_tokens
            ),
            (Some(5), Some(7), Some(4))
        );
        let m = c.metrics.unwrap();
        assert_eq!(
            (m.queue_time_ms, m.time_to_first_token_ms),
            (Some(12.5), Some(40.0))
        );
        let c = parse(br#"{"error":{"message":"boom","code":500}}"#).unwrap();
        assert!(c.error.is_some() && !c.choices.present);
        let c = parse(br#"{"choices":null,"usage":null}"#).unwrap();
        assert!(!c.choices.present && c.usage.is_none());
        assert!(parse(b"{not json").is_err());
    }

    /// Which channel a chunk's output is on, and the server's reasoning count read
    /// leniently: a hostile value is absent, never a failed chunk.
    #[test]
    fn reasoning_is_its_own_channel_and_its_count_never_fails_a_chunk() {
        let ch = |json: &str| parse(json.as_bytes()).unwrap().channel(Api::Chat);
        assert_eq!(
            ch(r#"{"choices":[{"delta":{"reasoning":"Let"}}]}"#),
            Channel::Reasoning
        );
        assert_eq!(
            ch(r#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#),
            Channel::Reasoning
        );
        assert_eq!(
            ch(r#"{"choices":[{"delta":{"content":"Hi"}}]}"#),
            Channel::Answer
        );
        assert_eq!(
            ch(r#"{"choices":[{"delta":{"content":"Hi","reasoning":"x"}}]}"#),
            Channel::Answer
        );
        assert_eq!(
            ch(r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#),
            Channel::None
        );
        let reasoning = |usage: &str| {
            parse(format!(r#"{{"choices":[],"usage":{usage}}}"#).as_bytes())
                .unwrap()
                .usage
                .unwrap()
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens)
        };
        assert_eq!(
            reasoning(
                r#"{"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":7}}"#
            ),
            Some(7)
        );
        for hostile in [
            r#"{"completion_tokens_details":{"reasoning_tokens":-1}}"#,
            r#"{"completion_tokens_details":{"reasoning_tokens":"7"}}"#,
            r#"{"completion_tokens_details":{"reasoning_tokens":2.5}}"#,
            r#"{"completion_tokens_details":"lots"}"#,
            r#"{"completion_tokens_details":null}"#,
        ] {
            assert_eq!(reasoning(hostile), None, "{hostile}");
        }
    }

    #[test]
    fn token_events_follow_vllm() {
        // Completions: any non-empty choices, even with empty or null text.
        assert_eq!(
            token(Api::Completions, r#"{"choices":[{"text":""}]}"#),
            Some("".into())
        );
        assert_eq!(
            token(Api::Completions, r#"{"choices":[{"text":null}]}"#),
            Some("".into())
        );
        // Chat: the role chunk and empty deltas are not tokens.
        for none in [
            r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"delta":{}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#,
            r#"{"choices":[]}"#,
        ] {
            assert_eq!(token(Api::Chat, none), None, "{none}");
        }
        for (json, text) in [
            (r#"{"choices":[{"delta":{"content":""}}]}"#, ""),
            (r#"{"choices":[{"delta":{"content":"x"}}]}"#, "x"),
            (
                r#"{"choices":[{"delta":{"role":"assistant","content":"x"}}]}"#,
                "x",
            ),
            (r#"{"choices":[{"delta":{"reasoning":"Let"}}]}"#, ""),
            (
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}"#,
                "",
            ),
            (
                r#"{"choices":[{"delta":{"function_call":{"name":"f"}}}]}"#,
                "",
            ),
        ] {
            assert_eq!(token(Api::Chat, json), Some(text.into()), "{json}");
        }
    }
}
