//! The plan file's shape: serde + schemars types, loaded from TOML or YAML.
//!
//! Loading goes in two steps, as nextest does with its config: the text becomes a
//! [`source::PlanSource`] (a JSON tree plus a map of key paths to lines), then
//! [`load::load`] checks unknown keys against the schema and deserialises each
//! section on its own, so every problem is reported, not just the first.

pub mod backend;
pub mod dataset;
pub mod energy;
pub mod load;
pub mod optimize;
pub mod params;
pub mod schema;
pub mod server_metrics;
pub mod service;
pub mod settings;
pub mod shape;
pub mod sim;
pub mod slo_spec;
pub mod source;
pub mod trace;
pub mod units;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use backend::Backend;
pub use dataset::Dataset;
pub use optimize::Optimize;
pub use params::{CaseParams, Metric};
pub use service::Service;
pub use settings::{Execution, Measure, Report};
pub use slo_spec::SloSpec;
pub use source::{Format, PlanSource};

/// A benchmark plan: services × a matrix of case parameters, judged by SLOs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(title = "benchplan plan")]
pub struct Plan {
    /// Short name of the plan, used in reports; defaults to the file name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What the plan is for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Named targets, in the order cases run. Without any, one simulator service `sim` (preset tiny) is used.
    pub services: IndexMap<String, Service>,
    /// Parameters every case starts from.
    pub defaults: CaseParams,
    /// Axes whose cartesian product gives the cases.
    pub matrix: Matrix,
    /// Checks judged on every case: a table (`p99_ttft = "<= 500ms"`) or seed strings (`["p99_ttft:500"]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloSpec>,
    /// Search for the highest load that meets the SLOs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optimize: Option<Optimize>,
    /// How the cases run.
    pub execution: Execution,
    /// What a run writes and compares against.
    pub report: Report,
}

/// The matrix: `key = [values]` axes plus exclude, include and zip.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Matrix {
    /// Partial assignments; a case matching every key of one entry is dropped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<IndexMap<String, Value>>,
    /// Extra cases: defaults plus these assignments (for every service unless `service` is given).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<IndexMap<String, Value>>,
    /// Groups of axes that vary together, element by element, such as [["dataset.input_len", "dataset.output_len"]].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub zip: Vec<Vec<String>>,
    /// Axes: a case-parameter path (`max_concurrency`, `"dataset.input_len"`) or `service`, with its values.
    #[serde(flatten)]
    pub axes: IndexMap<String, Vec<Value>>,
}
