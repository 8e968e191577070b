//! The `optimize` block: which variable to search, its bounds, and each phase's budget.
//! The search itself lives in `crate::optimize`; here are its types and defaults.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::slo_spec::SloSpec;
use super::units::{Dur, Percent, Rate};

/// What the search varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SearchVar {
    /// The highest max_concurrency that meets the SLOs (with `request_rate`: the lowest that sustains it).
    MaxConcurrency,
    /// The highest request_rate that meets the SLOs (optionally under a fixed `max_concurrency`).
    RequestRate,
    /// Two stages: max_concurrency first, then request_rate at the concurrency found.
    Both,
}

impl SearchVar {
    pub fn param(self) -> &'static str {
        match self {
            SearchVar::MaxConcurrency => "max_concurrency",
            SearchVar::RequestRate => "request_rate",
            SearchVar::Both => "max_concurrency and request_rate",
        }
    }
}

/// How many prompts a phase sends: max(value × multiplier, floor).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PhaseBudget {
    /// Prompts per unit of the searched value.
    pub multiplier: f64,
    /// Fewest prompts in one run of this phase.
    pub floor: u64,
}

/// An SLO search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Optimize {
    /// The variable searched.
    pub search: SearchVar,
    /// A fixed max_concurrency while searching request_rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u64>,
    /// A fixed request_rate while searching max_concurrency (finds the least concurrency that sustains it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_rate: Option<Rate>,
    /// Lowest value searched.
    pub min: f64,
    /// Highest value searched.
    pub max: f64,
    /// Prompts in the warmup run at the minimum.
    pub warmup_prompts: u64,
    /// Budget of the exponential probe.
    pub probe: PhaseBudget,
    /// Budget of each bisection step.
    pub bisect: PhaseBudget,
    /// Budget of the validation run.
    pub validation: PhaseBudget,
    /// Stop bisecting when (fail − pass) / pass is below this.
    pub tolerance: Percent,
    /// Most runs in the probe and bisection phases together.
    pub max_iterations: u64,
    /// Validation runs, each one step lower after a failure.
    pub validation_retries: u64,
    /// Runs per searched point.
    pub repeats: u64,
    /// A verdict this close to a threshold is rerun and decided by majority.
    pub noise_band: Percent,
    /// Achieved throughput within this of the fixed rate counts as sustaining it.
    pub rate_tolerance: Percent,
    /// Pause between runs.
    pub cooldown: Dur,
    /// SLOs for this search; defaults to the plan's `slo`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloSpec>,
    /// An earlier search folder (such as bench_results/optimize/latest): an answer worse
    /// than its answer by more than report.regression_threshold is a regression (exit 4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<std::path::PathBuf>,
}

impl Default for Optimize {
    fn default() -> Self {
        Optimize {
            search: SearchVar::MaxConcurrency,
            max_concurrency: None,
            request_rate: None,
            min: 1.0,
            max: 1024.0,
            warmup_prompts: 50,
            probe: PhaseBudget {
                multiplier: 3.0,
                floor: 50,
            },
            bisect: PhaseBudget {
                multiplier: 6.0,
                floor: 100,
            },
            validation: PhaseBudget {
                multiplier: 10.0,
                floor: 200,
            },
            tolerance: Percent(0.05),
            max_iterations: 15,
            validation_retries: 3,
            repeats: 1,
            noise_band: Percent(0.05),
            rate_tolerance: Percent(0.05),
            cooldown: Dur::default(),
            slo: None,
            baseline: None,
        }
    }
}
