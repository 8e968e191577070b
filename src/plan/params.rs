//! The parameters of one case: `vllm bench serve`'s flags in snake_case, with its defaults.
//!
//! `defaults` in a plan is a [`CaseParams`]; the matrix overrides fields of it by
//! key path (`max_concurrency`, `dataset.input_len`). A case's resolved
//! parameters are a complete `CaseParams` with backend and endpoint filled in.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::backend::Backend;
use super::dataset::Dataset;
use super::units::{Burstiness, Dur, Percent, Rate};

/// The per-request latency metrics that get mean/median/std/percentiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Time to first token.
    Ttft,
    /// Time to the first output token of the answer: a reasoning model's first token
    /// after its reasoning (`benchplan.reasoning`); TTFT for a model that does not reason.
    Ttfo,
    /// Time per output token after the first.
    Tpot,
    /// Inter-token latency, per streamed chunk.
    Itl,
    /// End-to-end latency.
    E2el,
    /// Time a request waited for a concurrency slot in the client.
    ClientQueueTime,
    /// E2EL counted from the scheduled arrival, including the client queue.
    E2elIncludingClientQueue,
}

impl Metric {
    /// Every metric, in the order vLLM lists them.
    pub const ALL: [Metric; 7] = [
        Metric::Ttft,
        Metric::Ttfo,
        Metric::Tpot,
        Metric::Itl,
        Metric::E2el,
        Metric::ClientQueueTime,
        Metric::E2elIncludingClientQueue,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::Ttfo => "ttfo",
            Metric::Tpot => "tpot",
            Metric::Itl => "itl",
            Metric::E2el => "e2el",
            Metric::ClientQueueTime => "client_queue_time",
            Metric::E2elIncludingClientQueue => "e2el_including_client_queue",
        }
    }

    /// Metrics only streamed generation produces.
    pub fn needs_streaming(self) -> bool {
        matches!(
            self,
            Metric::Ttft | Metric::Ttfo | Metric::Tpot | Metric::Itl
        )
    }
}

/// How the request rate grows during the run (vLLM's `--ramp-up-strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RampUp {
    /// Rate grows linearly from start to end over the run.
    Linear,
    /// Rate grows geometrically from start to end over the run.
    Exponential,
}

/// The client that sends a case's traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ClientEngine {
    /// benchplan's load generator.
    #[default]
    Native,
    /// `vllm bench serve`, run once per case with the case's parameters as flags; its
    /// result JSON becomes the case's result.
    Vllm,
}

/// How requests pick their LoRA adapter (vLLM's `--lora-assignment`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum LoraAssignment {
    /// Each request draws one at random (seeded by the case's seed); the default.
    #[default]
    Random,
    /// Request i takes adapter i mod n.
    RoundRobin,
}

/// Per-request SLOs for goodput (vLLM's `--goodput`): a request is good when it meets all.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Goodput {
    /// Time to first token at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<Dur>,
    /// Time per output token at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot: Option<Dur>,
    /// End-to-end latency at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2el: Option<Dur>,
}

/// Parameters of one case. Names and defaults follow `vllm bench serve`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct CaseParams {
    /// Request function; defaults to the service's backend, else `openai`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<Backend>,
    /// API path; inferred from the backend when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The workload: which prompts are sent and how long the outputs are.
    pub dataset: Dataset,
    /// Number of measured requests.
    pub num_prompts: u64,
    /// Mean arrival rate in requests per second, or "inf" to send all at once.
    pub request_rate: Rate,
    /// Gamma shape of the arrival gaps: 1 is Poisson, larger is more regular, smaller burstier, "inf" constant.
    pub burstiness: Burstiness,
    /// Most requests in flight at once; unset means no client-side cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u64>,
    /// Rate ramp during the run; excludes a finite request_rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ramp_up_strategy: Option<RampUp>,
    /// Ramp-up start rate in requests per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ramp_up_start_rps: Option<f64>,
    /// Ramp-up end rate in requests per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ramp_up_end_rps: Option<f64>,
    /// Unmeasured requests sent before timing starts.
    pub num_warmups: u64,
    /// Per-request SLOs that define goodput.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goodput: Option<Goodput>,
    /// Metrics that get mean/median/std/percentiles; default ttft,tpot,itl,e2el (e2el for pooling backends).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentile_metrics: Option<Vec<Metric>>,
    /// Percentiles to compute, such as [50, 90, 99, 99.9].
    pub metric_percentiles: Vec<f64>,
    /// Ask the server to ignore EOS; unset means on for random datasets, as vLLM does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_eos: Option<bool>,
    /// Sampling temperature; unset leaves the server default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling threshold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Top-k sampling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<i64>,
    /// Min-p sampling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_p: Option<f64>,
    /// Frequency penalty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    /// Presence penalty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    /// Repetition penalty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repetition_penalty: Option<f64>,
    /// JSON merged into every request body last; a null value removes a key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// Seed for the dataset and the arrival schedule.
    pub seed: u64,
    /// Retry the first request until it succeeds or this passes; 0s skips the check.
    pub ready_check_timeout: Dur,
    /// Give up on one request after this long; unset means 6 h, as vLLM's client.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_timeout: Option<Dur>,
    /// Fail a streamed request that receives no byte for this long; unset means 5 min.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_idle_timeout: Option<Dur>,
    /// The largest SSE line or event accepted, in bytes; unset means 16 MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_event_bytes: Option<u64>,
    /// The largest non-streamed answer (embeddings, rerank) accepted, in bytes; unset means 256 MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u64>,
    /// Completions: log-probabilities per token (vLLM's `--logprobs`); sent as null when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<u32>,
    /// Conversations in flight at once, for multi-turn datasets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multi_turn_concurrency: Option<u64>,
    /// Prefix of the `x-request-id` header; a random one per run when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id_prefix: Option<String>,
    /// How requests are worded for servers that read vLLM's request differently (a
    /// service's own `request_shape` fills what the matrix does not set; unset fields
    /// send vLLM's request, or what `run` found the server accepts).
    #[serde(skip_serializing_if = "super::shape::RequestShape::is_unset")]
    pub request_shape: super::shape::RequestShape,
    /// LoRA adapters the server serves (vLLM's `--lora-modules`): each request sends
    /// one of these names as its `model`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lora_modules: Vec<String>,
    /// How each request picks its LoRA adapter (vLLM's `--lora-assignment`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lora_assignment: Option<LoraAssignment>,
    /// Which client measures the case: benchplan's own (`native`, the default) or the
    /// real `vllm bench serve` (`vllm`), for numbers that must be vLLM's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientEngine>,
    /// The success rate every case must reach to pass, such as "95%" (default); a plan-wide
    /// floor (`[slo] min_success_rate` takes precedence).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_success_rate: Option<Percent>,
    /// The share of asked-for output tokens a case sent with `ignore_eos` must get back,
    /// such as "90%" (default); below it the case fails like a missed SLO (`[slo]
    /// min_output_ratio` takes precedence).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_output_ratio: Option<Percent>,
    /// Free-form labels written as top-level keys of the result JSON.
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub metadata: IndexMap<String, String>,
    /// Scraping each service's Prometheus metrics (a service's own setting wins); on by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<super::server_metrics::ServerMetricsSpec>,
    /// Ask the server for its own per-request timings (`include_metrics: true` in
    /// each body, vLLM's per-request metrics): `benchplan.server_timings` then splits
    /// each TTFT into the server's and the gap outside it. A server that ignores the
    /// key answers as before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<bool>,
}

impl Default for CaseParams {
    fn default() -> Self {
        CaseParams {
            backend: None,
            endpoint: None,
            dataset: Dataset::default(),
            num_prompts: 1000,
            request_rate: Rate::default(),
            burstiness: Burstiness::default(),
            max_concurrency: None,
            ramp_up_strategy: None,
            ramp_up_start_rps: None,
            ramp_up_end_rps: None,
            num_warmups: 0,
            goodput: None,
            percentile_metrics: None,
            metric_percentiles: vec![99.0],
            ignore_eos: None,
            temperature: None,
            top_p: None,
            top_k: None,
            min_p: None,
            frequency_penalty: None,
            presence_penalty: None,
            repetition_penalty: None,
            extra_body: None,
            seed: 0,
            ready_check_timeout: Dur::default(),
            request_timeout: None,
            stream_idle_timeout: None,
            max_event_bytes: None,
            max_body_bytes: None,
            logprobs: None,
            server_metrics: None,
            server_timings: None,
            multi_turn_concurrency: None,
            request_id_prefix: None,
            request_shape: Default::default(),
            lora_modules: Vec::new(),
            lora_assignment: None,
            client: None,
            min_success_rate: None,
            min_output_ratio: None,
            metadata: IndexMap::new(),
        }
    }
}

impl CaseParams {
    /// The backend after resolution (always set on a case).
    pub fn backend(&self) -> Backend {
        self.backend.unwrap_or(Backend::Openai)
    }

    /// Names of the sampling parameters that are set (pooling backends take none).
    pub fn sampling_set(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let pairs: [(&'static str, bool); 7] = [
            ("temperature", self.temperature.is_some()),
            ("top_p", self.top_p.is_some()),
            ("top_k", self.top_k.is_some()),
            ("min_p", self.min_p.is_some()),
            ("frequency_penalty", self.frequency_penalty.is_some()),
            ("presence_penalty", self.presence_penalty.is_some()),
            ("repetition_penalty", self.repetition_penalty.is_some()),
        ];
        for (name, set) in pairs {
            if set {
                out.push(name);
            }
        }
        if self.ignore_eos == Some(true) {
            out.push("ignore_eos");
        }
        out
    }

    /// The metrics that get statistics: the plan's list, else ttft, tpot, itl and e2el
    /// (vLLM's default leaves e2el out; benchplan reports it so no latency column is empty).
    pub fn percentile_metrics(&self) -> Vec<Metric> {
        self.percentile_metrics.clone().unwrap_or_else(|| {
            if self.backend().is_pooling() {
                vec![Metric::E2el]
            } else {
                vec![Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el]
            }
        })
    }
}
