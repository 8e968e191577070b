//! Response bodies: a whole JSON body, or an SSE stream fed by engine events.
//!
//! The stream formats each chunk from prebuilt text around the token words and
//! drains every event that is already queued into one write, so a fast engine
//! produces few large writes rather than many small ones.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use tokio::sync::mpsc::UnboundedReceiver;

use std::sync::Arc;

use super::engine::Event;

/// Why a stream was cut (an injected disconnect).
#[derive(Debug)]
pub struct StreamCut;

impl std::fmt::Display for StreamCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stream cut by the simulator's disconnect_rate")
    }
}

impl std::error::Error for StreamCut {}

/// Texts of generated tokens: (raw, JSON-escaped); see `TokenModel::output_table`.
pub type OutputTable = Arc<Vec<(String, String)>>;

/// The entry of the output table at position `i` of a request with `seed` (deterministic text).
pub fn output_token(table: &[(String, String)], seed: u64, i: u64) -> &(String, String) {
    &table[((seed.wrapping_add(i.wrapping_mul(7919))) % table.len() as u64) as usize]
}

/// The answer shapes the simulator writes: the backend table's (one `Api` for the
/// client and the simulator). For `Responses`, `head` is the delta event up to its
/// text and `usage_head` the response object up to its status (see `generate`).
pub use crate::plan::backend::Api;

/// Everything a stream needs to write its chunks.
pub struct SseStream {
    pub events: UnboundedReceiver<Event>,
    pub api: Api,
    /// `data: {"id":…,"model":…,"choices":[{"index":0,` — shared by every chunk.
    pub head: String,
    /// The same without choices, for the usage chunk: `data: {"id":…,"model":…,`.
    pub usage_head: String,
    pub include_usage: bool,
    /// Usage on every chunk, not only the last (`stream_continuous_usage_stats`).
    pub continuous_usage: bool,
    pub prompt_tokens: u64,
    pub seed: u64,
    pub table: OutputTable,
    pub finished: bool,
    pub completion_tokens: u64,
    /// A cut is due once this timer fires: the bytes before it get flushed first, so
    /// the client sees a stream that breaks mid-way rather than a dropped connection.
    pub cut: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Send times of this stream's messages, when the simulator records them.
    pub trace: Option<super::timings::Trace>,
    /// The first this many tokens are reasoning (chat and Responses streams; 0 for
    /// completions), sent on `reasoning_key` (chat) or as reasoning-text events.
    pub reasoning_tokens: u64,
    pub reasoning_key: &'static str,
    /// The Responses reasoning delta event up to its text (empty for other APIs).
    pub reasoning_head: String,
    /// The request asked for vLLM's per-request `metrics` (`include_metrics`): the
    /// engine's timings go out in a chunk of their own before `[DONE]`.
    pub include_metrics: bool,
    pub timings: Option<Box<super::engine::Timings>>,
}

impl SseStream {
    fn write_event(&mut self, ev: Event, buf: &mut BytesMut) -> Result<(), StreamCut> {
        let Event::Tokens {
            start,
            n,
            finish,
            cached_tokens,
            timings,
        } = ev
        else {
            return Err(StreamCut);
        };
        if finish.is_some() && self.include_metrics {
            self.timings = timings;
        }
        if let Some(t) = &mut self.trace {
            // One send per token event (vLLM's role delta before the first is not one).
            t.chunk();
        }
        if self.api == Api::Responses {
            return self.write_responses(start, n, finish, cached_tokens, buf);
        }
        if start == 0 && self.api == Api::Chat {
            // vLLM's chat stream opens with a role-only delta, right before the first token.
            buf.extend_from_slice(self.head.as_bytes());
            buf.extend_from_slice(br#""delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#);
            buf.extend_from_slice(b"\n\n");
        }
        // Tokens below `reasoning_tokens` are reasoning: a chunk that spans the
        // boundary goes out as two, the reasoning first.
        let end = start + n;
        let split = end.min(self.reasoning_tokens).max(start);
        if split > start {
            let done = if split == end { finish } else { None };
            self.chat_chunk(start, split, true, done, buf);
        }
        if end > split {
            self.chat_chunk(split, end, false, finish, buf);
        }
        if finish.is_some() {
            self.finish(cached_tokens, buf);
        }
        Ok(())
    }

    /// One chat or completions chunk carrying tokens `from..to`, as reasoning or as
    /// the answer, with the finish reason when it is the last.
    fn chat_chunk(
        &mut self,
        from: u64,
        to: u64,
        reasoning: bool,
        finish: Option<super::engine::Finish>,
        buf: &mut BytesMut,
    ) {
        buf.extend_from_slice(self.head.as_bytes());
        match (self.api, reasoning) {
            (Api::Completions, _) => buf.extend_from_slice(br#""text":""#),
            (_, false) => buf.extend_from_slice(br#""delta":{"content":""#),
            (_, true) => {
                buf.extend_from_slice(br#""delta":{""#);
                buf.extend_from_slice(self.reasoning_key.as_bytes());
                buf.extend_from_slice(br#"":""#);
            }
        }
        for i in from..to {
            buf.extend_from_slice(output_token(&self.table, self.seed, i).1.as_bytes());
        }
        buf.extend_from_slice(match self.api {
            Api::Completions => br#"","logprobs":null,"finish_reason":"#.as_slice(),
            _ => br#""},"logprobs":null,"finish_reason":"#.as_slice(),
        });
        match finish {
            None => buf.extend_from_slice(b"null"),
            Some(f) => {
                buf.extend_from_slice(b"\"");
                buf.extend_from_slice(f.as_str().as_bytes());
                buf.extend_from_slice(b"\"");
            }
        }
        buf.extend_from_slice(b"}]");
        self.completion_tokens = to;
        if self.continuous_usage {
            let (p, c) = (self.prompt_tokens, self.completion_tokens);
            buf.extend_from_slice(
                format!(
                    r#","usage":{{"prompt_tokens":{p},"total_tokens":{},"completion_tokens":{c}{}}}"#,
                    p + c,
                    reasoning_details(self.reasoning_tokens, c)
                )
                .as_bytes(),
            );
        }
        buf.extend_from_slice(b"}\n\n");
    }

    /// A Responses stream: `response.created` before the first delta, one
    /// `response.output_text.delta` per token event, and `response.completed` with the
    /// usage at the end (no `[DONE]`: the API has none).
    fn write_responses(
        &mut self,
        start: u64,
        n: u64,
        finish: Option<super::engine::Finish>,
        cached_tokens: u64,
        buf: &mut BytesMut,
    ) -> Result<(), StreamCut> {
        if start == 0 {
            buf.extend_from_slice(
                b"event: response.created\ndata: {\"type\":\"response.created\",\"response\":",
            );
            buf.extend_from_slice(self.usage_head.as_bytes());
            buf.extend_from_slice(br#""status":"in_progress","output":[],"usage":null}}"#);
            buf.extend_from_slice(b"\n\n");
        }
        let end = start + n;
        let split = end.min(self.reasoning_tokens).max(start);
        for (from, to, head) in [
            (start, split, &self.reasoning_head),
            (split, end, &self.head),
        ] {
            if to > from {
                buf.extend_from_slice(head.as_bytes());
                for i in from..to {
                    buf.extend_from_slice(output_token(&self.table, self.seed, i).1.as_bytes());
                }
                buf.extend_from_slice(b"\"}\n\n");
            }
        }
        self.completion_tokens = end;
        if finish.is_some() {
            let (p, c) = (self.prompt_tokens, self.completion_tokens);
            buf.extend_from_slice(
                b"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":",
            );
            buf.extend_from_slice(self.usage_head.as_bytes());
            buf.extend_from_slice(
                format!(
                    r#""status":"completed","output":[],"usage":{{"input_tokens":{p},"input_tokens_details":{{"cached_tokens":{cached_tokens}}},"output_tokens":{c},"output_tokens_details":{{"reasoning_tokens":{}}},"total_tokens":{}}}}}}}"#,
                    self.reasoning_tokens.min(c),
                    p + c
                )
                .as_bytes(),
            );
            buf.extend_from_slice(b"\n\n");
            self.finished = true;
        }
        Ok(())
    }

    fn finish(&mut self, cached_tokens: u64, buf: &mut BytesMut) {
        if self.include_usage {
            buf.extend_from_slice(self.usage_head.as_bytes());
            let (p, c) = (self.prompt_tokens, self.completion_tokens);
            let usage = usage_json(p, c, cached_tokens);
            // vLLM's usage closes with the cached tokens' object: the reasoning count
            // goes before the usage object's own closing brace.
            let details = reasoning_details(self.reasoning_tokens, c);
            buf.extend_from_slice(&usage.as_bytes()[..usage.len() - 1]);
            buf.extend_from_slice(details.as_bytes());
            buf.extend_from_slice(b"}");
            buf.extend_from_slice(b"}\n\n");
        }
        if let Some(t) = self.timings.take() {
            // vLLM's per-request metrics object (vllm#46768), in milliseconds.
            let c = self.completion_tokens;
            let itl = if c > 1 {
                t.generation * 1e3 / (c - 1) as f64
            } else {
                0.0
            };
            let tps = if t.generation > 0.0 {
                c as f64 / t.generation
            } else {
                0.0
            };
            buf.extend_from_slice(self.usage_head.as_bytes());
            buf.extend_from_slice(
                format!(
                    r#""choices":[],"metrics":{{"time_to_first_token_ms":{:.3},"queue_time_ms":{:.3},"generation_time_ms":{:.3},"mean_itl_ms":{itl:.3},"tokens_per_second":{tps:.3}{}}}}}"#,
                    t.ttft * 1e3,
                    t.queue * 1e3,
                    t.generation * 1e3,
                    t.spec.map(spec_decoding).unwrap_or_default(),
                )
                .as_bytes(),
            );
            buf.extend_from_slice(b"\n\n");
        }
        buf.extend_from_slice(b"data: [DONE]\n\n");
        self.finished = true;
    }
}

/// `,"speculative_decoding":{…}`: vLLM's per-request object (vllm#48915) of one
/// request's tally.
fn spec_decoding(t: super::engine::SpecTally) -> String {
    let steps = t.steps.max(1) as f64;
    let drafted = t.drafted.max(1) as f64;
    let histogram: Vec<String> = t.histogram[..=t.k as usize]
        .iter()
        .map(u64::to_string)
        .collect();
    format!(
        r#","speculative_decoding":{{"mean_acceptance_length":{:.4},"draft_acceptance_rate":{:.4},"acceptance_histogram":[{}],"num_spec_steps":{},"num_accepted_draft_tokens":{},"num_draft_tokens":{},"num_spec_tokens":{}}}"#,
        1.0 + t.accepted as f64 / steps,
        t.accepted as f64 / drafted,
        histogram.join(","),
        t.steps,
        t.accepted,
        t.drafted,
        t.k,
    )
}

/// `,"completion_tokens_details":{"reasoning_tokens":N}` for a reasoning answer of
/// `completion` tokens so far; empty without reasoning.
fn reasoning_details(reasoning_tokens: u64, completion: u64) -> String {
    if reasoning_tokens == 0 {
        return String::new();
    }
    format!(
        r#","completion_tokens_details":{{"reasoning_tokens":{}}}"#,
        reasoning_tokens.min(completion)
    )
}

/// `"choices":[],"usage":{…}` as vLLM writes it in the final chunk.
pub fn usage_json(prompt: u64, completion: u64, cached: u64) -> String {
    format!(
        r#""choices":[],"usage":{{"prompt_tokens":{prompt},"total_tokens":{},"completion_tokens":{completion},"prompt_tokens_details":{{"cached_tokens":{cached}}}}}"#,
        prompt + completion
    )
}

/// A response body.
pub enum SimBody {
    Full(Option<Bytes>),
    Sse(Box<SseStream>),
}

impl SimBody {
    pub fn full(b: impl Into<Bytes>) -> SimBody {
        SimBody::Full(Some(b.into()))
    }
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = StreamCut;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, StreamCut>>> {
        match self.get_mut() {
            SimBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            SimBody::Sse(s) => {
                if s.finished {
                    return Poll::Ready(None);
                }
                if let Some(timer) = s.cut.as_mut() {
                    return match timer.as_mut().poll(cx) {
                        Poll::Pending => Poll::Pending,
                        Poll::Ready(()) => Poll::Ready(Some(Err(StreamCut))),
                    };
                }
                let first = match s.events.poll_recv(cx) {
                    Poll::Pending => return Poll::Pending,
                    // The engine dropped the request (shutdown): end the stream as cut.
                    Poll::Ready(None) => return Poll::Ready(Some(Err(StreamCut))),
                    Poll::Ready(Some(ev)) => ev,
                };
                let mut buf = BytesMut::with_capacity(512);
                let mut ev = Some(first);
                // Coalesce what is already queued, up to a sensible write size.
                while let Some(e) = ev.take() {
                    if s.write_event(e, &mut buf).is_err() {
                        s.cut = Some(Box::pin(tokio::time::sleep(
                            std::time::Duration::from_millis(5),
                        )));
                        break;
                    }
                    if s.finished || buf.len() >= 64 * 1024 {
                        break;
                    }
                    ev = s.events.try_recv().ok();
                }
                if buf.is_empty() {
                    // A cut with nothing before it in this poll: wait for the timer.
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Poll::Ready(Some(Ok(Frame::data(buf.freeze()))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            SimBody::Full(b) => b.is_none(),
            SimBody::Sse(s) => s.finished,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            SimBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            SimBody::Full(None) => SizeHint::with_exact(0),
            SimBody::Sse(_) => SizeHint::default(),
        }
    }
}
