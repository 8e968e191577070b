//! What one request measured, as any client can report it: times in seconds, token
//! counts as the server gave them, and an error kind. The metrics work on these alone,
//! so samples from benchplan's client, from another client's result file or from a
//! shard merged later all summarise the same way.

use serde::Serialize;

/// Why a request failed; counted by kind in every report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestError {
    /// `connection`, `timeout`, `http_<status>`, `stream_broken`, `invalid_chunk`,
    /// `stream_error`, `no_tokens`, `request`, …
    pub kind: String,
    pub message: String,
}

/// One request's speculative decoding: vLLM's `metrics.speculative_decoding` (steps,
/// drafted and accepted tokens, steps by accepted tokens) or llama-server's
/// `timings.draft_n` / `draft_n_accepted` (no steps, no histogram).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpecSample {
    pub steps: Option<u64>,
    pub drafted: u64,
    pub accepted: u64,
    pub histogram: Vec<u64>,
}

/// One request's measurements (vLLM's `RequestFuncOutput`, without its clock).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    pub success: bool,
    /// Seconds from the request's start to its first token event.
    pub ttft: f64,
    /// E2EL: seconds from the start to the last token event.
    pub latency: f64,
    /// One gap per token event after the first.
    pub itl: Vec<f64>,
    /// Token events (SSE messages that carried output).
    pub chunks: u32,
    /// Reads of the body that carried at least one token event (`chunks / token_reads`
    /// is how many events arrived together: 1 when each came on its own).
    pub token_reads: u32,
    /// Whether the stream ended with `data: [DONE]`.
    pub done: bool,
    /// `usage.completion_tokens`, when the server sent it.
    pub usage_completion: Option<u64>,
    /// `usage.prompt_tokens`, when the server sent it.
    pub usage_prompt: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens`.
    pub cached_tokens: Option<u64>,
    /// Inputs in the request (an embeddings batch, rerank documents); 1 otherwise.
    pub input_sequences: u64,
    /// Seconds of input audio (ASR requests), for vLLM's RTFx.
    pub input_audio_duration: f64,
    /// The server's own queue time and TTFT (seconds), when a chunk carried
    /// `metrics.queue_time_ms` / `metrics.time_to_first_token_ms`.
    pub server_queue_time: Option<f64>,
    pub server_ttft: Option<f64>,
    /// llama-server's prompt processing time (`timings.prompt_ms`, seconds): its own
    /// time to the first token where it reports no TTFT.
    pub server_prefill: Option<f64>,
    /// The server's own decode time: vLLM's `metrics.generation_time_ms`,
    /// llama-server's `timings.predicted_ms` (seconds).
    pub server_generation: Option<f64>,
    /// The request's speculative decoding, as the server reported it.
    pub spec: Option<SpecSample>,
    /// Seconds from the start to the first output on any channel, reasoning included
    /// (`reasoning_content` too, which is no token event for vLLM's client).
    pub first_any: Option<f64>,
    /// Seconds from the start to the first and the last event of the answer (content
    /// or tool calls, not reasoning).
    pub first_answer: Option<f64>,
    pub last_answer: Option<f64>,
    /// Seconds from the start to the last output on any channel.
    pub last_any: Option<f64>,
    /// A request that reasoned keeps the gaps between its consecutive outputs on any
    /// channel and between its consecutive answer events (ITL with and without the
    /// reasoning), filled from its first reasoning event on (the gaps before it are
    /// `itl`'s); one that did not keeps neither, both being its `itl`.
    pub output_itl: Vec<f64>,
    pub answer_itl: Vec<f64>,
    /// Events that carried reasoning only.
    pub reasoning_events: u32,
    /// `usage.completion_tokens_details.reasoning_tokens` (the Responses API's
    /// `output_tokens_details`), when the server sent it.
    pub usage_reasoning: Option<u64>,
    /// The generated text (what the token events carried; empty for a failure, as
    /// vLLM keeps it).
    pub text: String,
    pub error: Option<RequestError>,
}
