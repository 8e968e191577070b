//! A service's `energy` setting: where its GPUs' energy is read from while a case
//! runs (see `energy`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::units::Dur;

/// Where the GPUs' energy is read: a DCGM exporter's page, read before, every
/// `interval` during and after each case, or a Prometheus server that scrapes one,
/// asked after each case, a command that prints watts, or NVML on this machine; any of
/// them cut to the measured window. Set one of the four.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnergySpec {
    /// The DCGM exporter's metrics page: a URL (`http://node:9400/metrics`) or a path on
    /// the service's own base URL (`/metrics`: the simulator serves its power model
    /// there). Its `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` counter is used, else its
    /// `DCGM_FI_DEV_POWER_USAGE` gauge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dcgm: Option<String>,
    /// A Prometheus server that scrapes the DCGM exporter (`http://prometheus:9090`, the
    /// Kubernetes case): the same two series' raw samples over each case are asked for
    /// after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<String>,
    /// A command that prints watts, one line per GPU (`nvidia-smi
    /// --query-gpu=power.draw --format=csv,noheader,nounits`, `amd-smi`, a PDU's
    /// client), run every `interval` with `sh -c`: its power samples are integrated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// NVML on the machine that runs benchplan (`nvml = true`: a benchmark beside its
    /// GPUs): the driver's energy counter per GPU, loaded at run time (where there is
    /// no driver, each case says so and runs on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvml: Option<bool>,
    /// How long to wait after a case for Prometheus to hold a sample past its end (it
    /// scrapes on its own clock; default "30s").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<Dur>,
    /// Time between readings while the case runs, such as "1s" (the default) or
    /// "250ms": the power gauge's resolution when there is no counter.
    #[serde(default = "default_interval")]
    pub interval: Dur,
    /// Measure idle power for this long before each case's measured requests (such as
    /// "2s"; none by default): the case then also reports its energy above idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<Dur>,
    /// Which GPUs count: each an index (the `gpu` label), a UUID or a hostname; empty
    /// (the default): every GPU on the page.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<String>,
}

fn default_interval() -> Dur {
    Dur(std::time::Duration::from_secs(1))
}

/// What the service costs to run, for the cost per token (see "Energy and cost" in
/// the README).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CostSpec {
    /// The price of everything the service runs on, per hour (its GPUs, their host).
    pub per_hour: f64,
    /// The currency `per_hour` and `energy_price` are in (default "USD").
    #[serde(default = "default_currency")]
    pub currency: String,
    /// The price of a kWh, for the energy part of the cost (needs `energy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_price: Option<f64>,
}

fn default_currency() -> String {
    "USD".into()
}
