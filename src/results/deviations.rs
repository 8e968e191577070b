//! Where benchplan still measures or sends differently from `vllm bench serve` 0.33,
//! on purpose. Each deviation has a stable id; every result lists, under
//! `benchplan.deviations`, the ones that applied to its run, so two result files can
//! be compared knowing what differs. The README's "Measurement" section lists the same
//! ids (a test keeps the two in step), and the golden stream tests name the id of each
//! fixture where benchplan's extraction differs from vLLM's.

use serde_json::{Value, json};

use crate::plan::{CaseParams, Dataset, Metric};

/// One deliberate difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deviation {
    pub id: &'static str,
    pub what: &'static str,
}

/// What a run did that decides which deviations apply to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Facts {
    /// Connections opened before the measured requests.
    pub prewarmed: usize,
    /// An unmeasured smoke request was sent first.
    pub smoke: bool,
    /// The server's prefix cache was reset before the case (`run`).
    pub prefix_cache_reset: bool,
}

pub const SSE_SPEC_PARSING: Deviation = Deviation {
    id: "sse_spec_parsing",
    what: "streams are parsed per the SSE specification (LF, CRLF or CR line ends, several data lines, `data:` with or without its space, comment, `id:` and `event:` lines); vLLM splits events on a blank line of `\\n\\n` only, so it extracts nothing from a CRLF stream with two events in one read, drops an event whose first line is a comment, and fails a stream with `id:` lines or `data:` without a space",
};

pub const STREAM_ERROR_FAILS_REQUEST: Deviation = Deviation {
    id: "stream_error_fails_request",
    what: "an error inside a 200 stream (`event: error`, or a `data: {\"error\": …}` chunk without choices) fails the request as `stream_error`; vLLM ignores the data form and counts the request a success with the text before it",
};

pub const OWN_RNG: Deviation = Deviation {
    id: "own_rng",
    what: "arrival gaps and synthetic prompts come from benchplan's own seeded generator: a seed gives the same schedule and prompts on every machine, but not the ones numpy gives vLLM for that seed",
};

pub const E2EL_BY_DEFAULT: Deviation = Deviation {
    id: "e2el_by_default",
    what: "E2EL statistics are reported by default (the case's metrics include e2el); vLLM's default is ttft,tpot,itl and reports E2EL only when --percentile-metrics names it",
};

pub const PREWARMED_CONNECTIONS: Deviation = Deviation {
    id: "prewarmed_connections",
    what: "connections (up to the concurrency) are opened before the measured requests, so TCP set-up is not in their TTFT; a connect that still happens inside a request counts in its latency, as in vLLM, and `benchplan.connections` says how many requests had one and how long it took",
};

pub const ARRIVAL_TIMESTAMPS: Deviation = Deviation {
    id: "arrival_timestamps",
    what: "a token event's time is when the bytes that carried it arrived (on plain http benchplan's own HTTP/1.1 client reads the kernel's receive timestamp of the segment, Linux SO_TIMESTAMPNS; on HTTPS, the moment of the read), so events that arrive together share one time (ITL 0); vLLM reads its clock once per event as its parser reaches it",
};

pub const SMOKE_REQUEST: Deviation = Deviation {
    id: "smoke_request",
    what: "one unmeasured smoke request is sent before the run, with a prompt prefix no measured request shares (so it warms no prefix cache); vLLM sends a test request only with --ready-check-timeout-sec",
};

pub const EXTRA_BODY_RERANK: Deviation = Deviation {
    id: "extra_body_rerank",
    what: "extra_body is merged into rerank requests too; vLLM's rerank request function ignores it",
};

pub const NO_PROMPT_ALIGNMENT: Deviation = Deviation {
    id: "no_prompt_alignment",
    what: "synthetic prompts are built exact for the service's tokenizer and sent as built; vLLM re-tokenizes them with the server's /tokenize when the first prompt's count differs and cuts longer ones",
};

pub const BOUNDED_RESPONSES: Deviation = Deviation {
    id: "bounded_responses",
    what: "a stream that sends no byte for stream_idle_timeout (default 5 min) fails as `idle_timeout`, and an SSE line or event over max_event_bytes (default 16 MiB) as `oversized_response`; vLLM has only its 6-hour total timeout",
};

pub const ERROR_MESSAGES: Deviation = Deviation {
    id: "error_messages",
    what: "a failed request's error is the server's own message (`HTTP 429: …`, from its JSON body) and a kind; vLLM keeps the HTTP reason phrase or a Python traceback",
};

pub const MULTI_TURN: Deviation = Deviation {
    id: "multi_turn",
    what: "multi-turn cases follow the Rust vllm-bench's keys, but multi_turn_concurrency caps conversations (vllm-bench caps requests with it), conversation starts are paced by the request rate, and a failed turn ends its conversation",
};

pub const PREFIX_CACHE_RESET: Deviation = Deviation {
    id: "prefix_cache_reset",
    what: "`benchplan run` resets the server's prefix cache before each case (POST /reset_prefix_cache, as vLLM's sweep does); `vllm bench serve` alone does not",
};

pub const AUDIO_REQUESTS: Deviation = Deviation {
    id: "audio_requests",
    what: "an `openai-audio` stream's token events follow vLLM's chat rule (a role-only or empty delta is not a token) and a keep-alive comment line is skipped; vLLM's audio request counts any chunk with non-empty `choices` and fails on a comment line (its audio parser has no comment skip). Clips are read as WAV only; vLLM reads any format soundfile reads",
};

/// Every deviation, in the order the README lists them.
pub const NO_ACCEPT_ENCODING: Deviation = Deviation {
    id: "no_accept_encoding",
    what: "requests ask for no compression (no `Accept-Encoding`), so a compressing proxy in the path does not buffer the stream to compress it; an answer compressed anyway is decoded (gzip, deflate) or fails as `unsupported_encoding` naming its encoding. vLLM's client (aiohttp) sends `Accept-Encoding: gzip, deflate` and decodes those",
};

pub const POST_REDIRECTS: Deviation = Deviation {
    id: "post_redirects",
    what: "a 307 or 308 is followed with the same method and body (at most 10, the final URL under `benchplan.route`), as aiohttp does; a 301, 302 or 303 to a POST fails the request as `http_30x` naming the `Location`, where aiohttp sends a GET there",
};

pub const OUTPUT_CHECKS: Deviation = Deviation {
    id: "output_checks",
    what: "the server's usage is checked against the token events it streamed (`benchplan.token_accounting`); usage that cannot be true (above the request's max_tokens, or below its token events) is not summed and the events are counted instead (`corrected`), totals saturate instead of wrapping, and a case sent with ignore_eos that gets back less than min_output_ratio (default 90%) of the tokens it asked for fails its verdict; vLLM believes usage and passes short outputs",
};

pub const REQUEST_SHAPE: Deviation = Deviation {
    id: "request_shape",
    what: "requests were worded as the case's `request_shape` says (set in the plan or by bench flags, or found by `run` and `bench` when the server refused vLLM's wording: `benchplan.request_shape` says which): chat content as a string, another request-id header, no stream_options, or max_tokens for chat; vLLM sends content parts, `x-request-id: {prefix}{n}`, stream_options and max_completion_tokens",
};

pub const TRACE_PROMPTS: Deviation = Deviation {
    id: "trace_prompts",
    what: "a trace's hash ids become blocks of whole-word text tokens derived from the plan's seed, the id and the block's length with a stable hash (the same prompts on every run, shard and machine), sent as text to any backend, with the format's block size (mooncake 512, bailian 16, sessions 64) and time unit (ms, s, s) unless the plan sets them; vLLM's `timed_trace` draws token ids from Python's per-process salted `hash(\"id:size\")` (different prompts on every run), blocks of --timed-trace-chunk-hash-size (16) tokens, seconds times --timed-trace-sec-multiplier, and needs a completions backend",
};

pub const REASONING_KEYS: Deviation = Deviation {
    id: "reasoning_keys",
    what: "on a reasoning model vLLM's keys stay vLLM's (a `reasoning` delta is a token event, a `reasoning_content` one is not: TTFT is then the first answer token, and TPOT spreads every output token, reasoning included, over the time after it); beside them `benchplan.reasoning` reports the first output on any channel (`ttft_any`), the first answer token (`ttfo`), the reasoning between them, TPOT and ITL with and without the reasoning tokens and the reasoning tokens, and a case that reasoned also carries TTFO as a latency family at the top (`mean_ttfo_ms`, …), which vLLM has not",
};

pub const SERVER_TIMING_CHECKS: Deviation = Deviation {
    id: "server_timing_checks",
    what: "the server's own per-request figures are read from vLLM's `metrics` (timings and `speculative_decoding`) and llama-server's `timings`, leniently (a value of the wrong type, or Python's NaN and Infinity, reads as absent, never failing the request), and a timing that cannot be true (negative, not finite, longer than the request's E2EL) or speculative-decoding counts that cannot be true are counted as rejected, not used; vLLM keeps only `metrics`' TTFT and queue time in its raw `server_ttfts` / `server_queue_times` lists, whatever they hold",
};

pub const ALL: &[Deviation] = &[
    SSE_SPEC_PARSING,
    STREAM_ERROR_FAILS_REQUEST,
    OWN_RNG,
    E2EL_BY_DEFAULT,
    PREWARMED_CONNECTIONS,
    ARRIVAL_TIMESTAMPS,
    SMOKE_REQUEST,
    EXTRA_BODY_RERANK,
    NO_PROMPT_ALIGNMENT,
    BOUNDED_RESPONSES,
    ERROR_MESSAGES,
    MULTI_TURN,
    PREFIX_CACHE_RESET,
    AUDIO_REQUESTS,
    NO_ACCEPT_ENCODING,
    POST_REDIRECTS,
    OUTPUT_CHECKS,
    REQUEST_SHAPE,
    TRACE_PROMPTS,
    REASONING_KEYS,
    SERVER_TIMING_CHECKS,
];

/// The deviations that applied to a run of `p`.
pub fn applying(p: &CaseParams, f: &Facts) -> Vec<Deviation> {
    let backend = p.backend();
    let streaming = !backend.is_pooling();
    let synthetic = matches!(
        p.dataset,
        Dataset::Random(_) | Dataset::RandomMm(_) | Dataset::PrefixRepetition(_)
    );
    let rules = [
        (SSE_SPEC_PARSING, streaming),
        (STREAM_ERROR_FAILS_REQUEST, streaming),
        (OWN_RNG, true),
        (
            E2EL_BY_DEFAULT,
            streaming && p.percentile_metrics().contains(&Metric::E2el),
        ),
        (PREWARMED_CONNECTIONS, f.prewarmed > 0),
        (ARRIVAL_TIMESTAMPS, streaming),
        (SMOKE_REQUEST, f.smoke),
        (
            EXTRA_BODY_RERANK,
            !backend.spec().vllm_merges_extra_body && p.extra_body.is_some(),
        ),
        (NO_PROMPT_ALIGNMENT, synthetic),
        (BOUNDED_RESPONSES, true),
        (ERROR_MESSAGES, true),
        (MULTI_TURN, matches!(p.dataset, Dataset::MultiTurn(_))),
        (PREFIX_CACHE_RESET, f.prefix_cache_reset),
        (AUDIO_REQUESTS, backend.spec().sends_audio()),
        (NO_ACCEPT_ENCODING, true),
        (POST_REDIRECTS, true),
        (OUTPUT_CHECKS, streaming),
        (REQUEST_SHAPE, !p.request_shape.is_unset()),
        (TRACE_PROMPTS, matches!(p.dataset, Dataset::Trace(_))),
        (
            REASONING_KEYS,
            matches!(
                backend.spec().stream,
                Some(crate::plan::backend::Api::Chat | crate::plan::backend::Api::Responses)
            ),
        ),
        (SERVER_TIMING_CHECKS, streaming),
    ];
    rules
        .into_iter()
        .filter(|(_, applies)| *applies)
        .map(|(d, _)| d)
        .collect()
}

/// `benchplan.deviations`: `[{id, what}]` of the deviations that applied.
pub fn json(p: &CaseParams, f: &Facts) -> Value {
    Value::Array(
        applying(p, f)
            .into_iter()
            .map(|d| json!({"id": d.id, "what": d.what}))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_rules_cover_every_deviation() {
        let mut ids: Vec<&str> = ALL.iter().map(|d| d.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), ALL.len());
        // With every fact on, a rerank with extra_body applies all but the
        // streaming- and dataset-specific ones.
        let p = CaseParams::default();
        let on = Facts {
            prewarmed: 4,
            smoke: true,
            prefix_cache_reset: true,
        };
        let got: Vec<&str> = applying(&p, &on).iter().map(|d| d.id).collect();
        for id in [
            "sse_spec_parsing",
            "prewarmed_connections",
            "arrival_timestamps",
            "smoke_request",
            "prefix_cache_reset",
            "e2el_by_default",
        ] {
            assert!(got.contains(&id), "{id} in {got:?}");
        }
        assert!(!got.contains(&"extra_body_rerank") && !got.contains(&"multi_turn"));
        let none: Vec<&str> = applying(&p, &Facts::default())
            .iter()
            .map(|d| d.id)
            .collect();
        assert!(!none.contains(&"prewarmed_connections") && !none.contains(&"smoke_request"));
    }
}
