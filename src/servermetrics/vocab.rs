//! One vocabulary for the servers' own series: vLLM's, SGLang's and TGI's names for
//! the same quantity map to one benchplan name. A server none of them matches keeps
//! its raw series.

use super::parse::Series;

/// Which server's names a page uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Vllm,
    Sglang,
    Tgi,
    Unknown,
}

impl Server {
    pub fn as_str(self) -> &'static str {
        match self {
            Server::Vllm => "vllm",
            Server::Sglang => "sglang",
            Server::Tgi => "tgi",
            Server::Unknown => "unknown",
        }
    }

    /// Told from the series' prefixes (`vllm:`, `sglang:`, `tgi_`).
    pub fn detect(series: &[Series]) -> Server {
        let has = |p: &str| series.iter().any(|s| s.name.starts_with(p));
        if has("vllm:") {
            Server::Vllm
        } else if has("sglang:") {
            Server::Sglang
        } else if has("tgi_") {
            Server::Tgi
        } else {
            Server::Unknown
        }
    }
}

/// A gauge of the vocabulary: its name, the servers' series names (first found
/// wins) and the factor to benchplan's unit.
pub struct Gauge {
    pub name: &'static str,
    pub series: &'static [&'static str],
    pub scale: f64,
}

/// The gauges sampled during a case (also drawn over time).
pub const GAUGES: &[Gauge] = &[
    Gauge {
        name: "running",
        series: &[
            "vllm:num_requests_running",
            "sglang:num_running_reqs",
            "tgi_batch_current_size",
        ],
        scale: 1.0,
    },
    Gauge {
        name: "waiting",
        series: &[
            "vllm:num_requests_waiting",
            "sglang:num_queue_reqs",
            "tgi_queue_size",
        ],
        scale: 1.0,
    },
    // vLLM and SGLang report a fraction; benchplan a percentage.
    Gauge {
        name: "kv_cache_usage_pct",
        series: &[
            "vllm:kv_cache_usage_perc",
            "vllm:gpu_cache_usage_perc",
            "sglang:token_usage",
        ],
        scale: 100.0,
    },
];

/// The counters differenced over a case: benchplan's name and the servers' series.
pub const COUNTERS: &[(&str, &[&str])] = &[
    (
        "prompt_tokens",
        &[
            "vllm:prompt_tokens_total",
            "sglang:prompt_tokens_total",
            "tgi_request_input_length_sum",
        ],
    ),
    (
        "generation_tokens",
        &[
            "vllm:generation_tokens_total",
            "sglang:generation_tokens_total",
            "tgi_request_generated_tokens_sum",
        ],
    ),
    // Both in tokens: queried prompt tokens and those found cached. SGLang counts
    // every prompt token as queried.
    (
        "prefix_cache_queries",
        &[
            "vllm:prefix_cache_queries_total",
            "vllm:gpu_prefix_cache_queries_total",
            "sglang:prompt_tokens_total",
        ],
    ),
    (
        "prefix_cache_hits",
        &[
            "vllm:prefix_cache_hits_total",
            "vllm:gpu_prefix_cache_hits_total",
            "sglang:cached_tokens_total",
        ],
    ),
    ("preemptions", &["vllm:num_preemptions_total"]),
    (
        "request_success",
        &[
            "vllm:request_success_total",
            "sglang:num_requests_total",
            "tgi_request_success",
        ],
    ),
    ("spec_decode_drafts", &["vllm:spec_decode_num_drafts_total"]),
    (
        "spec_decode_draft_tokens",
        &["vllm:spec_decode_num_draft_tokens_total"],
    ),
    (
        "spec_decode_accepted_tokens",
        &["vllm:spec_decode_num_accepted_tokens_total"],
    ),
];

/// vLLM's per-position acceptance counter (label `position`).
pub const ACCEPTED_PER_POSITION: &str = "vllm:spec_decode_num_accepted_tokens_per_pos_total";

/// The sum over every label set of the first of `names` the page has, if any.
pub fn total(series: &[Series], names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| {
        let mut found = false;
        let sum = series
            .iter()
            .filter(|s| s.name == *n)
            .inspect(|_| found = true)
            .map(|s| s.value)
            .sum::<f64>();
        found.then_some(sum)
    })
}

/// A vocabulary gauge's value on a page: summed over label sets for counts of
/// requests, averaged for a usage fraction (several engines report one each).
pub fn gauge(series: &[Series], g: &Gauge) -> Option<f64> {
    g.series.iter().find_map(|n| {
        let vals: Vec<f64> = series
            .iter()
            .filter(|s| s.name == *n)
            .map(|s| s.value)
            .collect();
        if vals.is_empty() {
            return None;
        }
        let v = if g.scale == 1.0 {
            vals.iter().sum::<f64>()
        } else {
            vals.iter().sum::<f64>() / vals.len() as f64
        };
        Some(v * g.scale)
    })
}

/// The per-position accepted-token counts (position 0 first), summed over the other labels.
pub fn per_position(series: &[Series]) -> Vec<f64> {
    let mut out: Vec<f64> = Vec::new();
    for s in series.iter().filter(|s| s.name == ACCEPTED_PER_POSITION) {
        let Some(pos) = s.label("position").and_then(|p| p.parse::<usize>().ok()) else {
            continue;
        };
        if out.len() <= pos {
            out.resize(pos + 1, 0.0);
        }
        out[pos] += s.value;
    }
    out
}
