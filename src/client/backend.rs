//! Request bodies as vLLM 0.33's benchmark builds them, per backend (pinned by the
//! `vllm_request` of each golden stream fixture): completions carry
//! `repetition_penalty: 1.0` (or the case's) and `logprobs` (null unless set), both
//! streaming APIs `stream_options.include_usage`, embeddings and rerank
//! `truncate_prompt_tokens: -1`; sampling parameters only when set; `extra_body`
//! merged last, where `null` removes a key (the way to drop a default a strict server
//! rejects).
//!
//! `openai-audio` sends a `multipart/form-data` form instead (vLLM's
//! `async_request_openai_audio`): the clip as `file`, then `model`,
//! `max_completion_tokens`, `stream`, `language=en`, `stream_include_usage` and
//! `stream_continuous_usage_stats` as text fields, written as Python's `str()` writes
//! them (`True`), with the sampling parameters and `extra_body` after them.
//!
//! Deliberate difference (declared as the `extra_body_rerank` deviation): `extra_body`
//! applies to rerank too, where vLLM ignores it.

use serde_json::{Map, Value, json};

use crate::plan::shape::{ChatContent, MaxTokensKey};
use crate::plan::{Backend, CaseParams};

/// What one request carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    Text(String),
    /// Several inputs in one request (embeddings batches).
    Batch(Vec<String>),
    Rerank {
        query: String,
        documents: Vec<String>,
    },
    /// A ready chat `messages` list (multimodal parts, conversation history).
    Messages(Value),
    /// An audio clip to transcribe or translate (`openai-audio`).
    Audio(std::sync::Arc<AudioClip>),
}

/// One audio clip a request uploads.
#[derive(Debug, PartialEq)]
pub struct AudioClip {
    /// The WAV file, as sent.
    pub wav: Vec<u8>,
    /// The file name the form gives it (vLLM: `audio.wav` for made clips, the file's own
    /// name for clips read from disk).
    pub filename: String,
    /// Seconds of audio (vLLM's `input_audio_duration`, which RTFx sums).
    pub duration: f64,
}

impl AudioClip {
    /// A synthetic clip of about `seconds` (see [`crate::wav::synthesize`]) with samples
    /// drawn from `rng`; its duration is what the file holds, in whole samples, as a
    /// server reads it.
    pub fn synthetic(
        seconds: f64,
        sample_rate: u32,
        rng: &mut crate::rng::Rng,
        filename: &str,
    ) -> AudioClip {
        let wav = crate::wav::synthesize(seconds, sample_rate, || rng.f64());
        let duration = crate::wav::info(&wav)
            .expect("a synthesized clip is a valid WAV")
            .duration();
        AudioClip {
            wav,
            filename: filename.to_string(),
            duration,
        }
    }
}

/// One request of a case, before it is sent.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestInput {
    pub prompt: Prompt,
    /// Prompt tokens as the dataset counted them.
    pub prompt_len: u64,
    /// Output tokens asked for (max_tokens).
    pub output_len: u64,
    /// Send offset (seconds) from a trace, replacing the arrival schedule.
    pub arrival: Option<f64>,
    /// The LoRA adapter this request names as its `model` (vLLM's `--lora-modules`),
    /// instead of the service's model.
    pub model: Option<std::sync::Arc<str>>,
}

impl RequestInput {
    /// Inputs the request carries, as vLLM counts them (`num_input_sequences`): the
    /// items of an embeddings batch, the documents of a rerank, else 1.
    pub fn input_sequences(&self) -> u64 {
        match &self.prompt {
            Prompt::Batch(b) => b.len() as u64,
            Prompt::Rerank { documents, .. } => documents.len() as u64,
            Prompt::Text(_) | Prompt::Messages(_) | Prompt::Audio(_) => 1,
        }
    }

    /// A small request any server of `backend` answers (a smoke test, a probe): "Say
    /// hello.", or for an audio backend a quiet one-second clip.
    pub fn hello(backend: Backend, output_len: u64) -> RequestInput {
        let prompt = if backend.spec().sends_audio() {
            let mut rng = crate::rng::Rng::new(1);
            Prompt::Audio(std::sync::Arc::new(AudioClip::synthetic(
                1.0,
                16_000,
                &mut rng,
                "audio.wav",
            )))
        } else {
            Prompt::Text("Say hello.".into())
        };
        RequestInput {
            prompt,
            prompt_len: 3,
            output_len,
            arrival: None,
            model: None,
        }
    }

    /// Seconds of audio the request uploads (0 without a clip).
    pub fn audio_duration(&self) -> f64 {
        match &self.prompt {
            Prompt::Audio(a) => a.duration,
            _ => 0.0,
        }
    }

    /// The same request with `prefix` before each of its texts (the first text part of
    /// a chat message list). A server's prefix cache keys on the leading tokens, so a
    /// prefixed copy shares no cached block with the original: an unmeasured request
    /// sent this way warms nothing a measured one reuses.
    pub fn with_prefix(&self, prefix: &str) -> RequestInput {
        let p = |t: &str| format!("{prefix}{t}");
        let prompt = match &self.prompt {
            Prompt::Text(t) => Prompt::Text(p(t)),
            Prompt::Batch(b) => Prompt::Batch(b.iter().map(|t| p(t)).collect()),
            Prompt::Rerank { query, documents } => Prompt::Rerank {
                query: p(query),
                documents: documents.iter().map(|t| p(t)).collect(),
            },
            // A clip has no text to prefix: a clip of the same length with other samples
            // (drawn from the prefix) leaves nothing in a server's caches (prefix blocks
            // of its audio tokens, an encoder cache keyed by content) that a measured
            // request could use.
            Prompt::Audio(a) => {
                let mut rng = crate::rng::Rng::new(crate::hash::fnv1a64(prefix.as_bytes()));
                Prompt::Audio(std::sync::Arc::new(AudioClip::synthetic(
                    a.duration,
                    16_000,
                    &mut rng,
                    &a.filename,
                )))
            }
            Prompt::Messages(m) => {
                let mut m = m.clone();
                let first_text = m.as_array_mut().and_then(|msgs| {
                    msgs.iter_mut()
                        .find_map(|msg| match msg.get_mut("content") {
                            Some(Value::String(s)) => Some(s),
                            Some(Value::Array(parts)) => {
                                parts
                                    .iter_mut()
                                    .find_map(|part| match part.get_mut("text") {
                                        Some(Value::String(s)) => Some(s),
                                        _ => None,
                                    })
                            }
                            _ => None,
                        })
                });
                if let Some(s) = first_text {
                    *s = p(s);
                }
                Prompt::Messages(m)
            }
        };
        RequestInput {
            prompt,
            ..self.clone()
        }
    }
}

/// The JSON body of one request.
pub fn build_body(
    backend: Backend,
    model: &str,
    input: &RequestInput,
    params: &CaseParams,
) -> Vec<u8> {
    let mut body = Map::new();
    let shape = &params.request_shape;
    let model = input.model.as_deref().unwrap_or(model);
    body.insert("model".into(), Value::String(model.to_string()));
    match backend {
        Backend::Vllm | Backend::Openai => {
            let prompt = match &input.prompt {
                Prompt::Text(t) => Value::String(t.clone()),
                Prompt::Batch(b) => Value::String(b.join(" ")),
                Prompt::Rerank { query, documents } => {
                    Value::String(format!("{query} {}", documents.join(" ")))
                }
                Prompt::Messages(m) => Value::String(messages_text(m)),
                Prompt::Audio(_) => Value::String(String::new()),
            };
            body.insert("prompt".into(), prompt);
            body.insert(
                "repetition_penalty".into(),
                json!(params.repetition_penalty.unwrap_or(1.0)),
            );
            body.insert("max_tokens".into(), json!(input.output_len));
            body.insert("logprobs".into(), json!(params.logprobs));
            streaming(&mut body, params);
        }
        Backend::OpenaiChat => {
            let as_string = shape.chat_content == Some(ChatContent::String);
            let user = |t: String| {
                if as_string {
                    json!([{"role": "user", "content": t}])
                } else {
                    json!([{"role": "user", "content": [{"type": "text", "text": t}]}])
                }
            };
            let messages = match &input.prompt {
                Prompt::Messages(m) if as_string => text_content(m),
                Prompt::Messages(m) => m.clone(),
                Prompt::Text(t) => user(t.clone()),
                Prompt::Batch(b) => user(b.join(" ")),
                Prompt::Rerank { query, documents } => {
                    user(format!("{query} {}", documents.join(" ")))
                }
                Prompt::Audio(_) => json!([{"role": "user", "content": ""}]),
            };
            body.insert("messages".into(), messages);
            let key = match shape.max_tokens_key {
                Some(MaxTokensKey::MaxTokens) => "max_tokens",
                _ => "max_completion_tokens",
            };
            body.insert(key.into(), json!(input.output_len));
            streaming(&mut body, params);
        }
        Backend::OpenaiResponses => {
            // `input` is the prompt text, or the chat messages as they are (the
            // Responses API takes chat-style message items).
            let input_v = match &input.prompt {
                Prompt::Messages(m) => m.clone(),
                Prompt::Text(t) => Value::String(t.clone()),
                Prompt::Batch(b) => Value::String(b.join(" ")),
                Prompt::Rerank { query, documents } => {
                    Value::String(format!("{query} {}", documents.join(" ")))
                }
                Prompt::Audio(_) => Value::String(String::new()),
            };
            body.insert("input".into(), input_v);
            body.insert("max_output_tokens".into(), json!(input.output_len));
            streaming(&mut body, params);
            // Responses streams always end with usage (on `response.completed`); the
            // API has no stream_options.
            body.remove("stream_options");
        }
        Backend::OpenaiEmbeddings => {
            let input_v = match &input.prompt {
                Prompt::Batch(b) => json!(b),
                Prompt::Text(t) => Value::String(t.clone()),
                Prompt::Rerank { query, .. } => Value::String(query.clone()),
                Prompt::Messages(m) => Value::String(messages_text(m)),
                Prompt::Audio(_) => Value::String(String::new()),
            };
            body.insert("input".into(), input_v);
            body.insert("truncate_prompt_tokens".into(), json!(-1));
        }
        Backend::VllmRerank => {
            let (query, documents) = match &input.prompt {
                Prompt::Rerank { query, documents } => (query.clone(), documents.clone()),
                Prompt::Text(t) => (t.clone(), vec![t.clone()]),
                Prompt::Batch(b) => (
                    b.first().cloned().unwrap_or_default(),
                    b.iter().skip(1).cloned().collect(),
                ),
                Prompt::Messages(m) => (messages_text(m), vec![]),
                Prompt::Audio(_) => (String::new(), vec![]),
            };
            body.insert("query".into(), Value::String(query));
            body.insert("documents".into(), json!(documents));
            body.insert("truncate_prompt_tokens".into(), json!(-1));
        }
        Backend::OpenaiAudio => {
            body.insert("max_completion_tokens".into(), json!(input.output_len));
            body.insert("stream".into(), Value::Bool(true));
            body.insert("language".into(), json!("en"));
            // Form fields are flat: vLLM sends stream_options as these two.
            body.insert("stream_include_usage".into(), Value::Bool(true));
            body.insert("stream_continuous_usage_stats".into(), Value::Bool(true));
            sampling(&mut body, params);
        }
    }
    // The server's own timings, asked before extra_body (which may still remove the key).
    if params.server_timings == Some(true)
        && backend.spec().body != crate::plan::backend::BodyForm::Multipart
    {
        body.insert("include_metrics".into(), Value::Bool(true));
    }
    if let Some(extra) = &params.extra_body {
        merge_extra(&mut body, extra);
    }
    if backend.spec().body == crate::plan::backend::BodyForm::Multipart {
        return audio_form(&body, &input.prompt);
    }
    serde_json::to_vec(&Value::Object(body)).expect("a JSON map serialises")
}

/// The multipart form of an audio request: the clip, then the fields in order.
fn audio_form(fields: &Map<String, Value>, prompt: &Prompt) -> Vec<u8> {
    use super::multipart::Form;
    let clip = match prompt {
        Prompt::Audio(a) => Some(a),
        _ => None,
    };
    let mut form = Form::with_capacity(clip.map_or(0, |a| a.wav.len()));
    if let Some(a) = clip {
        form.file("file", &a.filename, "audio/wav", &a.wav);
    }
    for (k, v) in fields {
        // As Python's str() writes a value: True/False, numbers as written, JSON otherwise.
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Bool(true) => "True".into(),
            Value::Bool(false) => "False".into(),
            other => other.to_string(),
        };
        form.text(k, &text);
    }
    form.finish()
}

fn streaming(body: &mut Map<String, Value>, p: &CaseParams) {
    body.insert("stream".into(), Value::Bool(true));
    if p.request_shape.stream_options != Some(false) {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    sampling(body, p);
}

/// Chat messages with each content that is only text parts as one string (`chat_content
/// = "string"`); contents with other parts (images, audio) stay lists.
fn text_content(messages: &Value) -> Value {
    let mut m = messages.clone();
    for msg in m.as_array_mut().into_iter().flatten() {
        let Some(Value::Array(parts)) = msg.get("content") else {
            continue;
        };
        let texts: Option<Vec<&str>> = parts
            .iter()
            .map(
                |p| match (p.get("type").and_then(Value::as_str), p.get("text")) {
                    (Some("text"), Some(Value::String(t))) => Some(t.as_str()),
                    _ => None,
                },
            )
            .collect();
        if let Some(texts) = texts {
            let joined = texts.join("\n");
            msg["content"] = Value::String(joined);
        }
    }
    m
}

/// `ignore_eos` and the sampling parameters that are set.
fn sampling(body: &mut Map<String, Value>, p: &CaseParams) {
    if p.ignore_eos == Some(true) {
        body.insert("ignore_eos".into(), Value::Bool(true));
    }
    let sampling: [(&str, Option<Value>); 7] = [
        ("temperature", p.temperature.map(Value::from)),
        ("top_p", p.top_p.map(Value::from)),
        ("top_k", p.top_k.map(Value::from)),
        ("min_p", p.min_p.map(Value::from)),
        ("frequency_penalty", p.frequency_penalty.map(Value::from)),
        ("presence_penalty", p.presence_penalty.map(Value::from)),
        ("repetition_penalty", p.repetition_penalty.map(Value::from)),
    ];
    for (k, v) in sampling {
        if let Some(v) = v {
            // Completions already carry repetition_penalty (1.0 unless set).
            body.insert(k.into(), v);
        }
    }
}

/// Shallow merge, last wins; a JSON null removes the key.
pub fn merge_extra(body: &mut Map<String, Value>, extra: &Map<String, Value>) {
    for (k, v) in extra {
        if v.is_null() {
            // shift_remove keeps the order of the rest (a form's fields are sent in it).
            body.shift_remove(k);
        } else {
            body.insert(k.clone(), v.clone());
        }
    }
}

fn messages_text(m: &Value) -> String {
    m.as_array()
        .map(|msgs| {
            msgs.iter()
                .filter_map(|msg| match msg.get("content") {
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(Value::Array(parts)) => Some(
                        parts
                            .iter()
                            .filter_map(|p| p.get("text").and_then(Value::as_str))
                            .collect::<Vec<_>>()
                            .join(" "),
                    ),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(backend: Backend, params: &CaseParams) -> Value {
        let input = RequestInput {
            model: None,
            prompt: Prompt::Text("hello".into()),
            prompt_len: 1,
            output_len: 8,
            arrival: None,
        };
        serde_json::from_slice(&build_body(backend, "m", &input, params)).unwrap()
    }

    #[test]
    fn request_shape_words_the_chat_body_and_leaves_unset_fields_as_vllm_sends_them() {
        use crate::plan::shape::RequestShape;
        let p = CaseParams {
            request_shape: RequestShape {
                chat_content: Some(ChatContent::String),
                stream_options: Some(false),
                max_tokens_key: Some(MaxTokensKey::MaxTokens),
                ..RequestShape::default()
            },
            ..CaseParams::default()
        };
        let b = body(Backend::OpenaiChat, &p);
        assert_eq!(b["messages"], json!([{"role": "user", "content": "hello"}]));
        assert_eq!(b["max_tokens"], 8);
        assert!(b.get("max_completion_tokens").is_none() && b.get("stream_options").is_none());
        assert_eq!(b["stream"], true);
        // Completions have one output key and no content parts: only stream_options applies.
        let b = body(Backend::Openai, &p);
        assert_eq!(
            (b["prompt"].as_str(), b["max_tokens"].as_u64()),
            (Some("hello"), Some(8))
        );
        assert!(b.get("stream_options").is_none());
        // A ready message list: text-only contents become strings, others stay lists.
        let msgs = json!([
            {"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "x"}}]},
            {"role": "assistant", "content": "plain"}
        ]);
        let input = RequestInput {
            model: None,
            prompt: Prompt::Messages(msgs.clone()),
            prompt_len: 1,
            output_len: 8,
            arrival: None,
        };
        let b: Value =
            serde_json::from_slice(&build_body(Backend::OpenaiChat, "m", &input, &p)).unwrap();
        assert_eq!(b["messages"][0]["content"], "a\nb");
        assert_eq!(b["messages"][1]["content"], msgs[1]["content"]);
        assert_eq!(b["messages"][2]["content"], "plain");
    }

    #[test]
    fn completions_and_chat_bodies() {
        let mut p = CaseParams {
            ignore_eos: Some(true),
            temperature: Some(0.0),
            ..CaseParams::default()
        };
        let b = body(Backend::Openai, &p);
        assert_eq!(b["prompt"], "hello");
        assert_eq!(b["max_tokens"], 8);
        assert_eq!(b["stream"], true);
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(b["ignore_eos"], true);
        assert_eq!(b["temperature"], 0.0);
        assert!(
            b.get("top_p").is_none(),
            "unset sampling parameters are not sent"
        );
        // vLLM's completions defaults; chat has neither.
        assert_eq!(b["repetition_penalty"], 1.0);
        assert_eq!(b["logprobs"], Value::Null);
        let b = body(Backend::OpenaiChat, &p);
        assert_eq!(
            b["messages"][0]["content"][0],
            json!({"type": "text", "text": "hello"})
        );
        assert_eq!(b["max_completion_tokens"], 8);
        assert!(b.get("max_tokens").is_none());
        assert!(b.get("repetition_penalty").is_none() && b.get("logprobs").is_none());
        // extra_body wins, and null removes (vLLM's defaults too).
        p.extra_body = Some(
            serde_json::from_value(json!({"temperature": 0.5, "ignore_eos": null, "seed": 3, "repetition_penalty": null}))
                .unwrap(),
        );
        let b = body(Backend::Openai, &p);
        assert_eq!(
            (
                b["temperature"].as_f64(),
                b.get("ignore_eos"),
                b["seed"].as_u64(),
                b.get("repetition_penalty")
            ),
            (Some(0.5), None, Some(3), None)
        );
    }

    #[test]
    fn pooling_bodies() {
        let p = CaseParams::default();
        let b = body(Backend::OpenaiEmbeddings, &p);
        assert_eq!(b["input"], "hello");
        assert_eq!(b["truncate_prompt_tokens"], -1);
        assert!(b.get("stream").is_none());
        let input = RequestInput {
            model: None,
            prompt: Prompt::Rerank {
                query: "q".into(),
                documents: vec!["a".into(), "b".into()],
            },
            prompt_len: 3,
            output_len: 0,
            arrival: None,
        };
        let b: Value =
            serde_json::from_slice(&build_body(Backend::VllmRerank, "m", &input, &p)).unwrap();
        assert_eq!(b["query"], "q");
        assert_eq!(b["documents"], json!(["a", "b"]));
    }
}
