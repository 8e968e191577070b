//! What a streamed answer's bytes mean as they arrive: SSE events become token events,
//! usage and failures on the request's [`Sample`], and the way the stream ended becomes
//! a success or a counted failure (vLLM's rules; see `request`).
//!
//! Synchronous on purpose: the async reader in `request` (reqwest, and systems without
//! the reader thread) and the stream reader thread in `reader` (the native client on
//! Linux) feed the same [`Reading`], so both read a stream exactly alike.

use std::time::Instant;

use super::chunk::{self, Api};
use super::outcome::{Limits, deadline_after, excerpt, fail, timed_out};
use super::sse::{SseEvent, SseParser};
use crate::metrics::sample::Sample;

/// How reading a stream stopped.
#[derive(Debug)]
pub enum End {
    /// The body ended (its framing said so, or the server closed a close-delimited one).
    Ended,
    /// An event failed the stream (see [`Reading::failed`]); nothing more is read.
    Failed,
    /// The connection broke or the body's framing was invalid.
    Broken(String),
    /// No byte for the idle limit.
    Idle,
    /// The request's deadline passed.
    Deadline,
}

/// What a stream's timer says when it fires.
#[derive(Debug)]
pub enum Alarm {
    /// Bytes arrived since it was set: wait again, until this.
    Rearm(Instant),
    /// The stream is over (idle or past the deadline).
    End(End),
}

/// A streamed answer being read: the SSE parser, the sample it fills and the first
/// bytes (for the message when no event arrives).
pub struct Reading {
    api: Api,
    sent: Instant,
    /// The latest token event's time.
    last: Instant,
    first: bool,
    sample: Sample,
    failure: Option<(&'static str, String)>,
    parser: SseParser,
    start: Vec<u8>,
    /// When the latest bytes arrived; the quiet period starts when reading starts.
    last_arrival: Instant,
    content_type: Option<String>,
    limits: Limits,
    /// The body's `Content-Encoding` decoder, and its output before the parser takes it.
    decoder: Option<(super::encoding::Decoder, Vec<u8>)>,
}

impl Reading {
    /// Starts reading the answer to a request sent at `sent`, into `sample`.
    pub fn new(
        api: Api,
        sent: Instant,
        limits: Limits,
        content_type: Option<String>,
        sample: Sample,
    ) -> Reading {
        Reading {
            api,
            sent,
            last: sent,
            first: true,
            sample,
            failure: None,
            parser: SseParser::with_limit(limits.max_event_bytes),
            start: Vec::new(),
            last_arrival: Instant::now(),
            content_type,
            limits,
            decoder: None,
        }
    }

    /// Decodes the body as `encoding` says; false when it cannot be decoded (the
    /// reading has failed: finish it).
    pub fn decoding(&mut self, encoding: Option<&str>) -> bool {
        match super::encoding::decoder(encoding) {
            Ok(d) => {
                self.decoder = d.map(|d| (d, Vec::new()));
                true
            }
            Err(e) => {
                self.failure = Some(("unsupported_encoding", e));
                false
            }
        }
    }

    /// Whether an event failed the stream (nothing more needs reading).
    pub fn failed(&self) -> bool {
        self.failure.is_some()
    }

    /// Body bytes that arrived at `now` (one read's worth).
    pub fn bytes(&mut self, bytes: &[u8], now: Instant) {
        self.last_arrival = now;
        if let Some((mut d, mut plain)) = self.decoder.take() {
            plain.clear();
            match d.feed(bytes, &mut plain) {
                Ok(()) => self.plain_bytes(&plain, now),
                Err(e) => self.failure = Some(("invalid_chunk", e)),
            }
            self.decoder = Some((d, plain));
        } else {
            self.plain_bytes(bytes, now);
        }
    }

    fn plain_bytes(&mut self, bytes: &[u8], now: Instant) {
        if self.start.len() < 200 {
            let take = bytes.len().min(200 - self.start.len());
            self.start.extend_from_slice(&bytes[..take]);
        }
        let before = self.sample.chunks;
        let (parser, mut st) = self.split();
        if let Err(e) = parser.feed(bytes, &mut |ev| st.event(ev, now)) {
            *st.failure = Some(("oversized_response", e.to_string()));
        }
        // How the events were delivered: a read that carried several token events
        // makes ITL gaps of zero (a buffering proxy, a coalescing server).
        if self.sample.chunks > before {
            self.sample.token_reads += 1;
        }
    }

    /// The parser, and the events' side of this reading to take what it parses.
    fn split(&mut self) -> (&mut SseParser, Events<'_>) {
        let st = Events {
            api: self.api,
            sent: self.sent,
            last: &mut self.last,
            first: &mut self.first,
            out: &mut self.sample,
            failure: &mut self.failure,
        };
        (&mut self.parser, st)
    }

    /// When the stream's one timer should fire next: the idle limit after the latest
    /// bytes, or the deadline if that is sooner.
    pub fn alarm_at(&self, deadline: Instant) -> Instant {
        deadline_after(self.last_arrival, self.limits.idle).min(deadline)
    }

    /// The timer fired at `now`: the stream is past its deadline, idle, or neither
    /// (bytes came since the timer was set; it waits again).
    pub fn alarm(&self, now: Instant, deadline: Instant) -> Alarm {
        if now >= deadline {
            Alarm::End(End::Deadline)
        } else if now < deadline_after(self.last_arrival, self.limits.idle) {
            Alarm::Rearm(self.alarm_at(deadline))
        } else {
            Alarm::End(End::Idle)
        }
    }

    /// The measured sample, after the stream stopped as `end`.
    pub fn finish(mut self, end: End) -> Sample {
        match end {
            End::Ended => {
                let at = self.last_arrival;
                // What a compressed body's decoder still held.
                if let Some((mut d, mut plain)) = self.decoder.take() {
                    plain.clear();
                    match d.finish(&mut plain) {
                        Ok(()) => self.plain_bytes(&plain, at),
                        Err(e) => self.failure = Some(("invalid_chunk", e)),
                    }
                }
                // A last event without a blank line before the end counts (vLLM
                // processes it too).
                let (parser, mut st) = self.split();
                if let Err(e) = parser.finish(&mut |ev| st.event(ev, at)) {
                    *st.failure = Some(("oversized_response", e.to_string()));
                }
                if self.api == Api::Responses
                    && self.failure.is_none()
                    && !self.first
                    && !self.sample.done
                {
                    self.failure = Some((
                        "no_terminal_event",
                        format!(
                            "the Responses stream ended after {} token events without response.completed",
                            self.sample.chunks
                        ),
                    ));
                }
            }
            End::Failed => {}
            End::Broken(e) => {
                self.failure.get_or_insert((
                    "stream_broken",
                    format!(
                        "the stream broke after {} token events: {e}",
                        self.sample.chunks
                    ),
                ));
            }
            End::Idle => {
                self.failure.get_or_insert((
                    "idle_timeout",
                    format!(
                        "no byte for {:.1} s (stream_idle_timeout) after {} token events",
                        self.limits.idle.as_secs_f64(),
                        self.sample.chunks
                    ),
                ));
            }
            End::Deadline => {
                timed_out(&mut self.sample, self.limits.total);
                return self.sample;
            }
        }
        let out = &mut self.sample;
        if out.reasoning_events == 0 {
            // Without reasoning both are the token events' own gaps (`itl`).
            out.output_itl = Vec::new();
            out.answer_itl = Vec::new();
        }
        match self.failure {
            Some((kind, msg)) => fail(out, kind, msg),
            None if self.first => fail(
                out,
                "no_tokens",
                format!(
                    "the answer carried no token event (content-type {}; it began {:?})",
                    self.content_type.as_deref().unwrap_or("none"),
                    excerpt(&self.start)
                ),
            ),
            None => {
                // E2EL is set only on success: vLLM's failed streams report latency 0.
                out.latency = (self.last - self.sent).as_secs_f64();
                out.success = true;
            }
        }
        self.sample
    }
}

/// The event side of a [`Reading`], borrowed while its parser is fed.
struct Events<'a> {
    api: Api,
    sent: Instant,
    last: &'a mut Instant,
    first: &'a mut bool,
    out: &'a mut Sample,
    failure: &'a mut Option<(&'static str, String)>,
}

impl Events<'_> {
    /// A token event that arrived at `now`, adding `text` to the generated text.
    fn token(&mut self, text: &str, now: Instant) {
        if *self.first {
            self.out.ttft = (now - self.sent).as_secs_f64();
            *self.first = false;
        } else {
            self.out.itl.push((now - *self.last).as_secs_f64());
        }
        *self.last = now;
        self.out.chunks += 1;
        self.out.text.push_str(text);
    }

    /// Output on `channel` at `now`: when the first output on any channel came, and
    /// the answer's first and last (vLLM's token events stay as they are; these are
    /// beside them, for `benchplan.reasoning`).
    fn channel(&mut self, channel: chunk::Channel, now: Instant) {
        if channel == chunk::Channel::None {
            return;
        }
        let at = (now - self.sent).as_secs_f64();
        self.out.first_any.get_or_insert(at);
        let reasoning = channel == chunk::Channel::Reasoning;
        if reasoning && self.out.reasoning_events == 0 {
            // The first reasoning: every output before it was an answer token event,
            // so the gaps so far are vLLM's `itl`. Only a request that reasons keeps
            // gaps of its own (no per-token work for the others).
            self.out.output_itl.clone_from(&self.out.itl);
            self.out.answer_itl.clone_from(&self.out.itl);
        }
        let keep = reasoning || self.out.reasoning_events > 0;
        if let (Some(prev), true) = (self.out.last_any.replace(at), keep) {
            self.out.output_itl.push(at - prev);
        }
        if reasoning {
            self.out.reasoning_events += 1;
        } else {
            self.out.first_answer.get_or_insert(at);
            if let (Some(prev), true) = (self.out.last_answer.replace(at), keep) {
                self.out.answer_itl.push(at - prev);
            }
        }
    }

    /// One event of a Responses API stream (see [`super::responses`]).
    fn responses_event(&mut self, ev: SseEvent<'_>, now: Instant) {
        use super::responses::{Meaning, read};
        if ev.data == b"[DONE]" {
            // Some servers close with [DONE] as well; the terminal event decides.
            return;
        }
        match read(ev.event, ev.data) {
            // The channel first, as for a chat chunk: the first reasoning takes the
            // gaps before this event from `itl`.
            Ok(Meaning::Token(text)) => {
                self.channel(chunk::Channel::Answer, now);
                self.token(&text, now);
            }
            Ok(Meaning::Reasoning) => {
                self.channel(chunk::Channel::Reasoning, now);
                self.token("", now);
            }
            Ok(Meaning::End(usage)) => {
                if let Some(u) = usage {
                    self.out.usage_prompt = u.input.or(self.out.usage_prompt);
                    self.out.usage_completion = u.output.or(self.out.usage_completion);
                    self.out.cached_tokens = u.cached.or(self.out.cached_tokens);
                    self.out.usage_reasoning = u.reasoning.or(self.out.usage_reasoning);
                }
                self.out.done = true;
            }
            Ok(Meaning::Failed(msg)) => {
                *self.failure = Some((
                    "stream_error",
                    format!("the server failed the response: {msg}"),
                ));
            }
            Ok(Meaning::Other) => {}
            Err(e) => {
                *self.failure = Some((
                    "invalid_chunk",
                    format!("unparsable event ({e}): {}", excerpt(ev.data)),
                ));
            }
        }
    }

    /// One SSE event, arrived at `now`.
    fn event(&mut self, ev: SseEvent<'_>, now: Instant) {
        if self.failure.is_some() {
            return;
        }
        if self.api == Api::Responses {
            return self.responses_event(ev, now);
        }
        if ev.data == b"[DONE]" {
            self.out.done = true;
            return;
        }
        if ev.event == Some(b"error") {
            *self.failure = Some(("stream_error", excerpt(ev.data)));
            return;
        }
        let python;
        let parsed = match chunk::parse(ev.data) {
            // Python's NaN and Infinity (which vLLM's client reads): as null.
            Err(e) => match chunk::python_specials_to_null(ev.data) {
                Some(fixed) => {
                    python = fixed;
                    chunk::parse(&python).map_err(|_| e)
                }
                None => Err(e),
            },
            ok => ok,
        };
        let c = match parsed {
            Ok(c) => c,
            Err(e) => {
                *self.failure = Some((
                    "invalid_chunk",
                    format!("unparsable chunk ({e}): {}", excerpt(ev.data)),
                ));
                return;
            }
        };
        if let Some(m) = &c.metrics {
            let secs = |ms: Option<f64>| ms.map(|v| v / 1e3);
            self.out.server_queue_time = secs(m.queue_time_ms).or(self.out.server_queue_time);
            self.out.server_ttft = secs(m.time_to_first_token_ms).or(self.out.server_ttft);
            self.out.server_generation = secs(m.generation_time_ms).or(self.out.server_generation);
            if let Some(sd) = &m.speculative_decoding {
                self.out.spec = spec_of_vllm(sd).or(self.out.spec.take());
            }
        }
        // llama-server reports no TTFT or queue: its prompt processing time is its own
        // time to the first token. Kept apart from vLLM's `server_ttfts` list (which
        // vLLM fills from `metrics` only).
        if let Some(t) = c.timings {
            self.out.server_prefill = t.prompt_ms.map(|ms| ms / 1e3).or(self.out.server_prefill);
            self.out.server_generation = t
                .predicted_ms
                .map(|ms| ms / 1e3)
                .or(self.out.server_generation);
            if let (Some(drafted), Some(accepted)) = (t.draft_n, t.draft_n_accepted) {
                self.out.spec = Some(crate::metrics::sample::SpecSample {
                    steps: None,
                    drafted,
                    accepted,
                    histogram: Vec::new(),
                });
            }
        }
        let (channel, token) = c.read(self.api);
        self.channel(channel, now);
        if let Some(text) = token {
            self.token(text, now);
        } else if let Some(u) = c.usage {
            self.out.usage_reasoning = u
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .or(self.out.usage_reasoning);
            self.out.usage_completion = u.completion_tokens.or(self.out.usage_completion);
            self.out.usage_prompt = u.prompt_tokens.or(self.out.usage_prompt);
            self.out.cached_tokens = u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .or(self.out.cached_tokens);
        } else if c.error.is_some() && !c.choices.present {
            *self.failure = Some(("stream_error", excerpt(ev.data)));
        }
    }
}

/// A request's speculative decoding from vLLM's counts; None without the drafted and
/// accepted counts it is made of. The histogram is server text: kept only when it is
/// short enough to be one (a position per speculative token).
fn spec_of_vllm(sd: &chunk::SpecDecodeCounts) -> Option<crate::metrics::sample::SpecSample> {
    let mut histogram = sd.acceptance_histogram.clone().unwrap_or_default();
    if histogram.len() > 64 {
        histogram = Vec::new();
    }
    Some(crate::metrics::sample::SpecSample {
        steps: sd.num_spec_steps,
        drafted: sd.num_draft_tokens?,
        accepted: sd.num_accepted_draft_tokens?,
        histogram,
    })
}
