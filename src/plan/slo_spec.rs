//! How a plan writes its SLOs (`[slo]`, a service's `slo`, `[optimize] slo`): the
//! block as written, which the SLO room reads (`slo::floors::parse_slos`).

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// SLOs as a table of conditions or as the seed orchestrator's `KEY:VALUE` strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SloSpec {
    /// `p99_ttft = "<= 500ms"`, `success_rate = ">= 99%"`, `goodput_ratio = ">= 0.9"`; bare latency numbers are ms.
    Table(IndexMap<String, Value>),
    /// `["p99_ttft:500", "success_rate:95"]` (latency in ms, success rate in percent).
    List(Vec<String>),
}

impl SloSpec {
    pub fn is_empty(&self) -> bool {
        match self {
            SloSpec::Table(t) => t.is_empty(),
            SloSpec::List(l) => l.is_empty(),
        }
    }
}
