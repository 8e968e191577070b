//! The `execution` and `report` blocks: how a plan runs and what it writes.

use std::path::PathBuf;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::units::{Dur, Percent};

/// How the cases run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Execution {
    /// Folder of the results tree, relative to the working directory.
    pub results_dir: PathBuf,
    /// Cases run at once (never two on one service unless allow_shared_service).
    pub parallel: u64,
    /// Let parallel cases share a service (their loads then disturb each other).
    pub allow_shared_service: bool,
    /// Keep running after a case fails.
    pub continue_on_error: bool,
    /// Runs of each case, reported as one: rates and counts their mean per run (with the
    /// spread), latency percentiles over every request of every run.
    pub repeats: u64,
    /// Keep every request's lengths, TTFT, ITLs, start time and text in the result files,
    /// as `vllm bench serve --save-detailed` does.
    pub save_detailed: bool,
    /// Pause between cases.
    pub cooldown: Dur,
    /// Most time one case may take.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// The most cases a plan may expand to (a guard against a matrix that explodes).
    pub max_cases: u64,
    /// When an open-loop case counts as over-saturated (its queue growing without
    /// bound); see the README's "Over-saturation".
    pub oversaturation: Oversaturation,
    /// End a case early on these findings: `["oversaturation"]` (or the one finding as
    /// a string, `"oversaturation"`) ends an over-saturated case where it is found
    /// (what finished is kept; the case is marked).
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "one_or_many"
    )]
    #[schemars(with = "StopOnList")]
    pub stop_on: Vec<StopOn>,
}

/// `stop_on` as written: one finding or a list of them.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)] // Only its schema and its shape are used.
enum StopOnList {
    One(StopOn),
    Many(Vec<StopOn>),
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<StopOn>, D::Error> {
    // Read as a value first, so a wrong finding names the variants, not "did not
    // match any variant of untagged enum".
    let v = serde_json::Value::deserialize(d)?;
    let v = match v {
        serde_json::Value::Array(_) => v,
        one => serde_json::Value::Array(vec![one]),
    };
    Vec::<StopOn>::deserialize(v).map_err(serde::de::Error::custom)
}

/// What may end a case early (`execution.stop_on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StopOn {
    /// The queue grows without bound (`execution.oversaturation`).
    Oversaturation,
}

/// An open loop is over-saturated when, over a moving `window`, the number in flight
/// and TTFT both rise by at least `min_rise` of their level, each slope with a p-value
/// below `p_value`, for at least `min_duration`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Oversaturation {
    /// The moving window both slopes are fitted over (10s).
    pub window: Dur,
    /// How long both must keep rising before the case is marked (5s).
    pub min_duration: Dur,
    /// The largest p-value of each slope (0.001).
    pub p_value: f64,
    /// The smallest rise of each across the window, relative to its level there (50%).
    pub min_rise: Percent,
}

impl Default for Oversaturation {
    fn default() -> Self {
        Oversaturation {
            window: Dur::from_secs_f64(10.0),
            min_duration: Dur::from_secs_f64(5.0),
            p_value: 0.001,
            min_rise: Percent(0.5),
        }
    }
}

impl Default for Execution {
    fn default() -> Self {
        Execution {
            results_dir: PathBuf::from("bench_results"),
            parallel: 1,
            allow_shared_service: false,
            continue_on_error: true,
            repeats: 1,
            save_detailed: false,
            cooldown: Dur::default(),
            timeout: None,
            max_cases: 100_000,
            oversaturation: Oversaturation::default(),
            stop_on: Vec::new(),
        }
    }
}

/// Report files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReportFormat {
    /// report.md
    Md,
    /// summary.csv
    Csv,
    /// summary.json
    Json,
}

/// Which of a case's numbers a verdict judges (`report.measure`, `[slo] measure`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Measure {
    /// The steady window (`benchplan.steady`): the ramp (or warm-up) and the drain left
    /// out; a window with too few requests is "too few requests to judge", never a
    /// regression or an SLO pass.
    #[default]
    Steady,
    /// The whole run, from the first send to the last answer, as `vllm bench serve`
    /// reports it.
    Whole,
}

impl Measure {
    pub fn as_str(self) -> &'static str {
        match self {
            Measure::Steady => "steady",
            Measure::Whole => "whole",
        }
    }
}

/// What a run writes and what it compares against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Report {
    /// Report files to write.
    pub formats: Vec<ReportFormat>,
    /// A minijinja template replacing the built-in report.md.j2 (relative to the plan).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<PathBuf>,
    /// A minijinja template replacing the built-in report.html.j2 (relative to the plan).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub html_template: Option<PathBuf>,
    /// Draw SVG charts into the run folder's charts/ (linked from report.md, inline in report.html).
    pub charts: bool,
    /// A history file (JSON lines; a relative path is from the working directory, as
    /// `results_dir` and `baseline` are) this run appends its cases to;
    /// the report then carries the trend verdict of the history's change points, and a
    /// recent regression among them exits 4 like a baseline regression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<PathBuf>,
    /// A previous run directory to compare against.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<PathBuf>,
    /// A throughput drop or latency rise beyond this is a regression.
    pub regression_threshold: Percent,
    /// Per-metric thresholds, by result key (such as p99_ttft_ms), overriding regression_threshold.
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub thresholds: IndexMap<String, Percent>,
    /// Per-service thresholds, by service name, overriding regression_threshold for that
    /// service's cases (a per-metric threshold still wins).
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub service_thresholds: IndexMap<String, Percent>,
    /// Let cases with no counterpart in the baseline pass (by default each one fails the
    /// comparison: a baseline that matches nothing compares nothing).
    pub allow_unmatched: bool,
    /// The result keys compared with the baseline. Default: p50_ttft_ms, p99_ttft_ms,
    /// p50_tpot_ms, p99_tpot_ms, p99_itl_ms, p99_e2el_ms, output_throughput, success_rate,
    /// and for a trace case trace_realised_reuse.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare_metrics: Option<Vec<String>>,
    /// Which numbers the baseline gate compares: the steady window's (`steady`, the
    /// default: see the README's "The steady window") or the whole run's (`whole`).
    pub measure: Measure,
    /// A regression must also be significant: its one-sided p-value (Mann–Whitney U on
    /// the per-request samples; a two-proportion test for the success rate) below this.
    pub significance: f64,
    /// The history's change point counts as a regression only once this many runs sit
    /// after it (default 2): the newest run alone is "suspect", shown and listed, exit 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trend_confirm: Option<usize>,
    /// The smallest change the history's trend reports (a fraction, such as 5%).
    /// Default: the baseline gate's threshold of the same metric (`thresholds`, else
    /// `service_thresholds`, else `regression_threshold`); 0 with `trend_confirm = 1` is
    /// Otava's own answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trend_min_magnitude: Option<Percent>,
    /// Cut every case into timeslices this long (such as "10s"): per slice, requests
    /// started, finished, failed and in flight, throughput and latency percentiles,
    /// in the result (`benchplan.timeslices`), as `{case}.timeslices.csv` beside it, and
    /// as a chart in the report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeslice: Option<super::units::Dur>,
    /// The fewest requests a case's steady window is judged on (20); fewer: "too few
    /// requests to judge".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steady_min_requests: Option<usize>,
    /// A case measured while the machine's CPU pressure (PSI `some`, `benchplan.machine`)
    /// was at or above this is judged "inconclusive: the measuring machine was busy"
    /// against a baseline instead of regressed. Unset: not judged (see the README's
    /// "The measuring machine" for why there is no default yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_cpu_pressure: Option<Percent>,
    /// The same for the client's own run-queue wait, milliseconds per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_runqueue_ms_per_s: Option<f64>,
    /// Exit 5 (not 0) when nothing regressed but a comparison or the history's trend
    /// was inconclusive because the measuring machine was busy.
    pub exit_on_inconclusive: bool,
}

impl Report {
    /// The runs after a change point that confirm it (see `trend_confirm`).
    pub const TREND_CONFIRM: usize = 2;

    /// The thresholds at or above which a case's machine was busy: (CPU pressure in
    /// percent, client run-queue wait in ms per second); an unset one never is.
    pub fn busy_thresholds(&self) -> (f64, f64) {
        (
            self.busy_cpu_pressure
                .map_or(f64::INFINITY, |p| p.0 * 100.0),
            self.busy_runqueue_ms_per_s.unwrap_or(f64::INFINITY),
        )
    }

    /// The relative change of `metric` beyond which the baseline gate calls it a
    /// regression: the metric's own threshold, else its service's, else the plan's.
    pub fn threshold(&self, metric: &str, service: Option<&str>) -> f64 {
        let service = service.and_then(|s| self.service_thresholds.get(s));
        self.thresholds
            .get(metric)
            .or(service)
            .map_or(self.regression_threshold.0, |p| p.0)
    }
}

impl Default for Report {
    fn default() -> Self {
        Report {
            formats: vec![ReportFormat::Md, ReportFormat::Csv],
            template: None,
            html_template: None,
            charts: true,
            history: None,
            baseline: None,
            regression_threshold: Percent(0.05),
            thresholds: IndexMap::new(),
            service_thresholds: IndexMap::new(),
            allow_unmatched: false,
            compare_metrics: None,
            measure: Measure::default(),
            significance: 0.01,
            trend_confirm: None,
            trend_min_magnitude: None,
            timeslice: None,
            steady_min_requests: None,
            busy_cpu_pressure: None,
            busy_runqueue_ms_per_s: None,
            exit_on_inconclusive: false,
        }
    }
}
