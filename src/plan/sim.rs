//! The simulator's parameters as a plan names them: `sim = { preset = "tiny", itl = "5ms" }`.
//!
//! Every field is optional and overrides the preset's value, so the same type
//! serves plan services, `benchplan sim --config` files and `--set name=value`.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::units::Dur;

/// Named starting points for the simulator's parameters.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// Every latency zero: unit tests and client-overhead measurement.
    Fast,
    /// Exact latencies, no jitter: tests compare measured against injected values.
    GroundTruth,
    /// Small and quick, for the quickstart.
    #[default]
    Tiny,
    /// llm-d's 8B-on-H100 profile: 16 sequences, ITL 12ms, prefill 30ms + 250us/token, 2x under load.
    #[serde(rename = "8b-h100")]
    #[value(name = "8b-h100")]
    H100_8b,
}

/// Errors the simulator can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailureType {
    /// HTTP 429.
    RateLimit,
    /// HTTP 500.
    ServerError,
    /// HTTP 503.
    Unavailable,
    /// HTTP 400 with a context-length message.
    ContextLength,
    /// HTTP 401.
    InvalidApiKey,
}

/// Simulator parameters; unset ones come from the preset.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SimParams {
    /// Model name served at /v1/models.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// LoRA adapter names served besides the model (listed at /v1/models with the
    /// model as parent, as vLLM lists them); requests naming one are counted per
    /// adapter in `benchplan_sim:lora_requests_total`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lora_modules: Option<Vec<String>>,
    /// Context window in tokens; longer requests get HTTP 400.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_model_len: Option<u64>,
    /// Sequences decoded at once (continuous batching).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_num_seqs: Option<u64>,
    /// Requests that may wait for a slot; beyond it, HTTP 429.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_waiting_queue: Option<u64>,
    /// Constant time to first token; when set, replaces the prefill model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft: Option<Dur>,
    /// Fixed part of prefill time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill_overhead: Option<Dur>,
    /// Prefill time per uncached prompt token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill_time_per_token: Option<Dur>,
    /// Time of one decode step with one running sequence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub itl: Option<Dur>,
    /// Latency multiplier at max_num_seqs running sequences (linear in between; 1 = no slowdown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_factor_under_load: Option<f64>,
    /// A warm-up: the first this many requests the engine admits (a client's smoke
    /// request counts as one) are slower by `warmup_factor`, in prefill and in every
    /// decode step, as an engine that compiles kernels or fills caches on its first
    /// requests; tests know where the true steady window starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup_requests: Option<u64>,
    /// How much slower a warm-up request is (3 = three times its TTFT and ITL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup_factor: Option<f64>,
    /// Standard deviation of TTFT jitter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_std: Option<Dur>,
    /// Standard deviation of ITL jitter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub itl_std: Option<Dur>,
    /// Keep a prefix cache so repeated prefixes skip prefill.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_prefix_caching: Option<bool>,
    /// Prefix-cache capacity in blocks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_cache_blocks: Option<u64>,
    /// Tokens per cache block.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u64>,
    /// Chance per generated token of stopping early when ignore_eos is off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eos_probability: Option<f64>,
    /// Tokens bundled into one streamed chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_per_chunk: Option<u64>,
    /// Share of requests that fail with one of failure_types.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_rate: Option<f64>,
    /// Kinds of injected failures, chosen uniformly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_types: Option<Vec<FailureType>>,
    /// Share of streams cut off mid-way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disconnect_rate: Option<f64>,
    /// /health/ready answers 503 until this has passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_delay: Option<Dur>,
    /// Require this Bearer token (HTTP 401 without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// A tokenizer.json to count tokens with, instead of the built-in tokenizer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<PathBuf>,
    /// Seed for jitter, failures and output lengths.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Speculative decoding: one acceptance probability per draft position, such as
    /// [0.8, 0.6, 0.4] for three speculative tokens. A draft's token at position i is
    /// accepted with probability p[i] when every earlier one was (so p[i] is
    /// conditional). Only the `vllm:spec_decode_*` counters change, not the timing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_decode_acceptance: Option<Vec<f64>>,
    /// A reasoning model: the first this many tokens of each streamed chat or
    /// Responses answer are reasoning (on `reasoning_field`), the rest the answer;
    /// usage counts them in `completion_tokens_details.reasoning_tokens`. Tests know
    /// both the first token's time and the first answer's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Which delta field carries reasoning: `reasoning` (vLLM 0.33's server, a token
    /// event for vLLM's client) or `reasoning_content` (DeepSeek and older vLLM; not
    /// a token event for vLLM's client).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_field: Option<ReasoningField>,
    /// A power model: each simulated GPU draws this many watts idle, served on
    /// `/metrics` as a DCGM exporter serves its energy counter and power gauge (see
    /// `energy`); 0 or unset with `watts_per_sequence` unset: no power series.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_watts: Option<f64>,
    /// Watts each running sequence adds to the whole (split over `gpus`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watts_per_sequence: Option<f64>,
    /// Simulated GPUs the power is split over (default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u64>,
}

/// The delta field a simulated reasoning model streams its reasoning in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningField {
    #[default]
    Reasoning,
    ReasoningContent,
}

impl ReasoningField {
    pub fn key(self) -> &'static str {
        match self {
            ReasoningField::Reasoning => "reasoning",
            ReasoningField::ReasoningContent => "reasoning_content",
        }
    }
}

/// A simulator service: a preset plus any parameters on top.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SimSpec {
    /// Starting point for every parameter not given here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset: Option<Preset>,
    #[serde(flatten)]
    pub params: SimParams,
}
