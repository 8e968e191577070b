//! The simulator's counters and histograms, rendered in Prometheus text format with
//! vLLM's series names, so tools that scrape vLLM scrape the simulator too.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Histogram bucket bounds (seconds), as vLLM uses for request latencies.
const BUCKETS: [f64; 18] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0,
];

/// Draft positions the simulator counts (vLLM's per-position counter has one per
/// speculative token; more than this is refused by the planner).
pub const SPEC_POSITIONS: usize = 16;

#[derive(Debug, Default)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    /// Sum in microseconds.
    sum_us: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, secs: f64) {
        if let Some(i) = BUCKETS.iter().position(|b| secs <= *b) {
            self.counts[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_us.fetch_add((secs * 1e6) as u64, Relaxed);
    }

    fn render(&self, name: &str, help: &str, labels: &str, out: &mut String) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cum = 0;
        for (b, c) in BUCKETS.iter().zip(&self.counts) {
            cum += c.load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b}\"}} {cum}");
        }
        let count = self.count.load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
        let _ = writeln!(
            out,
            "{name}_sum{{{labels}}} {}",
            self.sum_us.load(Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
    }
}

/// Everything `/metrics` reports. Written by the engine and the HTTP handlers.
#[derive(Debug)]
pub struct Stats {
    pub running: AtomicU64,
    pub waiting: AtomicU64,
    /// Running plus waiting: what admission control compares with the limits.
    pub in_system: AtomicU64,
    /// KV-cache usage in millionths.
    pub kv_usage_ppm: AtomicU64,
    pub prompt_tokens: AtomicU64,
    pub generation_tokens: AtomicU64,
    pub prefix_queries: AtomicU64,
    pub prefix_hits: AtomicU64,
    /// Speculative decoding: drafts, drafted tokens, accepted tokens (total and per position).
    pub spec_drafts: AtomicU64,
    pub spec_draft_tokens: AtomicU64,
    pub spec_accepted: AtomicU64,
    pub spec_accepted_per_pos: [AtomicU64; SPEC_POSITIONS],
    pub requests_ok: AtomicU64,
    pub requests_failed: AtomicU64,
    /// Injected HTTP errors by status (failure_rate, X-Return-Error, api key, full queue): index = status - 400.
    pub injected_status: [AtomicU64; 200],
    /// Streams cut by disconnect_rate.
    pub injected_cuts: AtomicU64,
    /// Failed accept() calls (such as EMFILE), each followed by a short back-off.
    pub accept_errors: AtomicU64,
    /// Requests that named each LoRA adapter (in the order the config lists them).
    pub lora_requests: std::sync::Mutex<Vec<(String, u64)>>,
    pub ttft: Histogram,
    pub e2e: Histogram,
    /// The power model's meter (see `power`).
    pub power: std::sync::Mutex<super::power::Meter>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            running: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            in_system: AtomicU64::new(0),
            kv_usage_ppm: AtomicU64::new(0),
            prompt_tokens: AtomicU64::new(0),
            generation_tokens: AtomicU64::new(0),
            accept_errors: AtomicU64::new(0),
            prefix_queries: AtomicU64::new(0),
            prefix_hits: AtomicU64::new(0),
            spec_drafts: AtomicU64::new(0),
            spec_draft_tokens: AtomicU64::new(0),
            spec_accepted: AtomicU64::new(0),
            spec_accepted_per_pos: std::array::from_fn(|_| AtomicU64::new(0)),
            requests_ok: AtomicU64::new(0),
            requests_failed: AtomicU64::new(0),
            injected_status: std::array::from_fn(|_| AtomicU64::new(0)),
            injected_cuts: AtomicU64::new(0),
            lora_requests: std::sync::Mutex::new(Vec::new()),
            ttft: Histogram::default(),
            e2e: Histogram::default(),
            power: std::sync::Mutex::new(super::power::Meter::default()),
        }
    }
}

impl Stats {
    /// The running count changed to `n`: the power model's meter follows it.
    pub fn set_running(&self, n: u64) {
        self.running.store(n, Relaxed);
        let mut m = self.power.lock().expect("power meter");
        if m.enabled() {
            m.set_running(n, std::time::Instant::now());
        }
    }

    /// Counts an error answer the simulator gave on purpose.
    pub fn count_injected(&self, status: u16) {
        self.requests_failed.fetch_add(1, Relaxed);
        if let Some(c) = self
            .injected_status
            .get(usize::from(status.saturating_sub(400)))
        {
            c.fetch_add(1, Relaxed);
        }
    }

    /// How many answers with this status were injected.
    pub fn injected(&self, status: u16) -> u64 {
        self.injected_status
            .get(usize::from(status.saturating_sub(400)))
            .map_or(0, |c| c.load(Relaxed))
    }

    /// Counts a request that named LoRA adapter `lora`.
    pub fn count_lora(&self, lora: &str) {
        let mut loras = self.lora_requests.lock().expect("lora counts");
        match loras.iter_mut().find(|(name, _)| name == lora) {
            Some((_, n)) => *n += 1,
            None => loras.push((lora.to_string(), 1)),
        }
    }

    pub fn render(&self, model: &str, config: &super::config::SimConfig) -> String {
        let l = format!("model_name=\"{model}\"");
        let mut out = String::with_capacity(4096);
        let gauge = |out: &mut String, name: &str, help: &str, v: String| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{{l}}} {v}"
            );
        };
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{{l}}} {v}"
            );
        };
        // The KV cache's size, as vLLM publishes it: an info gauge whose labels say it.
        let _ = writeln!(
            out,
            "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{block_size=\"{}\",enable_prefix_caching=\"{}\",num_gpu_blocks=\"{}\"}} 1.0",
            config.block_size,
            if config.enable_prefix_caching {
                "True"
            } else {
                "False"
            },
            config.kv_cache_blocks
        );
        gauge(
            &mut out,
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            self.running.load(Relaxed).to_string(),
        );
        gauge(
            &mut out,
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            self.waiting.load(Relaxed).to_string(),
        );
        gauge(
            &mut out,
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            format!("{}", self.kv_usage_ppm.load(Relaxed) as f64 / 1e6),
        );
        counter(
            &mut out,
            "vllm:prompt_tokens_total",
            "Number of prefill tokens processed.",
            self.prompt_tokens.load(Relaxed),
        );
        counter(
            &mut out,
            "vllm:generation_tokens_total",
            "Number of generation tokens processed.",
            self.generation_tokens.load(Relaxed),
        );
        counter(
            &mut out,
            "vllm:prefix_cache_queries_total",
            "Prefix cache queries, in terms of number of queried tokens.",
            self.prefix_queries.load(Relaxed),
        );
        counter(
            &mut out,
            "vllm:prefix_cache_hits_total",
            "Prefix cache hits, in terms of number of cached tokens.",
            self.prefix_hits.load(Relaxed),
        );
        let drafted = self.spec_draft_tokens.load(Relaxed);
        if drafted > 0 {
            counter(
                &mut out,
                "vllm:spec_decode_num_drafts_total",
                "Number of spec decoding drafts.",
                self.spec_drafts.load(Relaxed),
            );
            counter(
                &mut out,
                "vllm:spec_decode_num_draft_tokens_total",
                "Number of draft tokens.",
                drafted,
            );
            counter(
                &mut out,
                "vllm:spec_decode_num_accepted_tokens_total",
                "Number of accepted tokens.",
                self.spec_accepted.load(Relaxed),
            );
            let name = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
            let _ = writeln!(
                out,
                "# HELP {name} Accepted tokens per draft position.\n# TYPE {name} counter"
            );
            let k = (self.spec_draft_tokens.load(Relaxed) / self.spec_drafts.load(Relaxed).max(1))
                as usize;
            for (i, c) in self.spec_accepted_per_pos.iter().take(k).enumerate() {
                let _ = writeln!(out, "{name}{{{l},position=\"{i}\"}} {}", c.load(Relaxed));
            }
        }
        counter(
            &mut out,
            "vllm:request_success_total",
            "Count of successfully processed requests.",
            self.requests_ok.load(Relaxed),
        );
        counter(
            &mut out,
            "benchplan_sim:request_failures_total",
            "Requests answered with an error or cut off.",
            self.requests_failed.load(Relaxed),
        );
        {
            let name = "benchplan_sim:lora_requests_total";
            let loras = self.lora_requests.lock().expect("lora counts");
            if !loras.is_empty() {
                let _ = writeln!(
                    out,
                    "# HELP {name} Requests that named each LoRA adapter.\n# TYPE {name} counter"
                );
                for (lora, n) in loras.iter() {
                    let _ = writeln!(out, "{name}{{{l},lora=\"{lora}\"}} {n}");
                }
            }
        }
        self.ttft.render(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            &l,
            &mut out,
        );
        self.e2e.render(
            "vllm:e2e_request_latency_seconds",
            "Histogram of end to end request latency in seconds.",
            &l,
            &mut out,
        );
        self.power
            .lock()
            .expect("power meter")
            .render(std::time::Instant::now(), &mut out);
        out
    }
}
