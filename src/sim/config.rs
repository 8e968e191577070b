//! The simulator's resolved configuration: a preset with a plan's or the command
//! line's parameters on top. Durations are seconds as f64, ready for the engine.

use std::path::PathBuf;

use crate::plan::sim::{FailureType, Preset, ReasoningField, SimParams, SimSpec};

/// Every simulator parameter, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    pub model: String,
    /// LoRA adapters served besides the model.
    pub lora_modules: Vec<String>,
    pub max_model_len: u64,
    pub max_num_seqs: u64,
    pub max_waiting_queue: u64,
    /// Constant TTFT (s); replaces the prefill model when set.
    pub ttft: Option<f64>,
    pub prefill_overhead: f64,
    pub prefill_time_per_token: f64,
    pub itl: f64,
    pub time_factor_under_load: f64,
    /// The first this many admitted requests are `warmup_factor` times slower.
    pub warmup_requests: u64,
    pub warmup_factor: f64,
    pub ttft_std: f64,
    pub itl_std: f64,
    pub enable_prefix_caching: bool,
    pub kv_cache_blocks: u64,
    pub block_size: u64,
    pub eos_probability: f64,
    pub tokens_per_chunk: u64,
    pub failure_rate: f64,
    pub failure_types: Vec<FailureType>,
    pub disconnect_rate: f64,
    pub startup_delay: f64,
    pub api_key: Option<String>,
    pub tokenizer: Option<PathBuf>,
    pub seed: u64,
    /// Conditional acceptance per draft position; empty: no speculative decoding.
    pub spec_decode_acceptance: Vec<f64>,
    /// Reasoning tokens before each streamed chat or Responses answer, and their field.
    pub reasoning_tokens: u64,
    pub reasoning_field: ReasoningField,
    /// The power model (see `sim::power`): watts per GPU idle, watts per running
    /// sequence, GPUs.
    pub idle_watts: f64,
    pub watts_per_sequence: f64,
    pub gpus: u64,
    /// Embedding vector length for /v1/embeddings.
    pub embedding_dim: usize,
    /// Keep each streamed request's actual send times for `GET /sim/timings`
    /// (`benchplan sim --record-timings`; the client benchmark's ground truth).
    pub record_timings: bool,
}

impl SimConfig {
    /// The preset's values.
    pub fn preset(preset: Preset) -> SimConfig {
        let base = SimConfig {
            model: "benchplan-sim".into(),
            lora_modules: Vec::new(),
            max_model_len: 8192,
            max_num_seqs: 256,
            max_waiting_queue: 10_000,
            ttft: None,
            prefill_overhead: 0.0,
            prefill_time_per_token: 0.0,
            itl: 0.0,
            time_factor_under_load: 1.0,
            warmup_requests: 0,
            warmup_factor: 1.0,
            ttft_std: 0.0,
            itl_std: 0.0,
            enable_prefix_caching: false,
            kv_cache_blocks: 1024,
            block_size: 16,
            eos_probability: 0.0,
            tokens_per_chunk: 1,
            failure_rate: 0.0,
            failure_types: vec![FailureType::ServerError],
            disconnect_rate: 0.0,
            startup_delay: 0.0,
            api_key: None,
            tokenizer: None,
            seed: 0,
            spec_decode_acceptance: Vec::new(),
            reasoning_tokens: 0,
            reasoning_field: ReasoningField::Reasoning,
            idle_watts: 0.0,
            watts_per_sequence: 0.0,
            gpus: 1,
            embedding_dim: 64,
            record_timings: false,
        };
        match preset {
            Preset::Fast => SimConfig {
                max_model_len: 1 << 20,
                max_num_seqs: 100_000,
                max_waiting_queue: 100_000,
                ..base
            },
            Preset::GroundTruth => SimConfig {
                prefill_overhead: 0.020,
                itl: 0.010,
                ..base
            },
            Preset::Tiny => SimConfig {
                max_model_len: 4096,
                max_num_seqs: 32,
                prefill_overhead: 0.005,
                prefill_time_per_token: 10e-6,
                itl: 0.002,
                time_factor_under_load: 1.5,
                itl_std: 0.0002,
                enable_prefix_caching: true,
                ..base
            },
            Preset::H100_8b => SimConfig {
                model: "benchplan-sim-8b".into(),
                max_model_len: 32_768,
                max_num_seqs: 16,
                prefill_overhead: 0.030,
                prefill_time_per_token: 250e-6,
                itl: 0.012,
                time_factor_under_load: 2.0,
                ttft_std: 0.005,
                itl_std: 0.002,
                enable_prefix_caching: true,
                kv_cache_blocks: 16_384,
                ..base
            },
        }
    }

    /// The preset of a spec, with its parameters on top.
    pub fn from_spec(spec: &SimSpec) -> SimConfig {
        let mut c = SimConfig::preset(spec.preset.unwrap_or_default());
        c.apply(&spec.params);
        c
    }

    /// Overrides every parameter that is set.
    pub fn apply(&mut self, p: &SimParams) {
        let secs = |d: &crate::plan::units::Dur| d.as_secs_f64();
        macro_rules! set {
            ($field:ident) => {
                if let Some(v) = &p.$field {
                    self.$field = v.clone();
                }
            };
            ($field:ident, dur) => {
                if let Some(v) = &p.$field {
                    self.$field = secs(v);
                }
            };
        }
        set!(model);
        set!(lora_modules);
        set!(max_model_len);
        set!(max_num_seqs);
        set!(max_waiting_queue);
        if let Some(t) = &p.ttft {
            self.ttft = Some(secs(t));
        }
        set!(prefill_overhead, dur);
        set!(prefill_time_per_token, dur);
        set!(itl, dur);
        set!(time_factor_under_load);
        set!(warmup_requests);
        set!(warmup_factor);
        set!(ttft_std, dur);
        set!(itl_std, dur);
        set!(enable_prefix_caching);
        set!(kv_cache_blocks);
        set!(block_size);
        set!(eos_probability);
        set!(tokens_per_chunk);
        set!(failure_rate);
        set!(failure_types);
        set!(disconnect_rate);
        set!(startup_delay, dur);
        if p.api_key.is_some() {
            self.api_key = p.api_key.clone();
        }
        if p.tokenizer.is_some() {
            self.tokenizer = p.tokenizer.clone();
        }
        set!(seed);
        set!(spec_decode_acceptance);
        set!(reasoning_tokens);
        set!(reasoning_field);
        set!(idle_watts);
        set!(watts_per_sequence);
        set!(gpus);
    }

    /// Latency multiplier with `running` sequences: 1 at one, `time_factor_under_load`
    /// at max_num_seqs, linear in between (llm-d's `getCurrLoadFactor`).
    pub fn load_factor(&self, running: u64) -> f64 {
        if self.max_num_seqs <= 1 || running <= 1 {
            return 1.0;
        }
        let r = running.min(self.max_num_seqs) as f64;
        1.0 + (self.time_factor_under_load - 1.0) * (r - 1.0) / (self.max_num_seqs as f64 - 1.0)
    }

    /// How much slower the engine's `admitted`-th request is (0-based): the warm-up
    /// factor for the first `warmup_requests`, else 1.
    pub fn warmup(&self, admitted: u64) -> f64 {
        if admitted < self.warmup_requests {
            self.warmup_factor
        } else {
            1.0
        }
    }

    /// Prefill time (s) before jitter and load, for `uncached` prompt tokens.
    pub fn prefill_time(&self, uncached: u64) -> f64 {
        self.ttft
            .unwrap_or(self.prefill_overhead + uncached as f64 * self.prefill_time_per_token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::units::Dur;

    #[test]
    fn presets_and_overrides() {
        let h = SimConfig::preset(Preset::H100_8b);
        assert_eq!(
            (
                h.max_num_seqs,
                h.itl,
                h.prefill_overhead,
                h.time_factor_under_load
            ),
            (16, 0.012, 0.030, 2.0)
        );
        assert!((h.prefill_time_per_token - 250e-6).abs() < 1e-12);
        assert_eq!(h.load_factor(1), 1.0);
        assert_eq!(h.load_factor(16), 2.0);
        assert!((h.load_factor(6) - (1.0 + 5.0 / 15.0)).abs() < 1e-12);
        let spec = SimSpec {
            preset: Some(Preset::Fast),
            params: SimParams {
                itl: Some(Dur::from_secs_f64(0.005)),
                max_num_seqs: Some(4),
                ..Default::default()
            },
        };
        let c = SimConfig::from_spec(&spec);
        assert_eq!((c.itl, c.max_num_seqs, c.prefill_overhead), (0.005, 4, 0.0));
    }
}
