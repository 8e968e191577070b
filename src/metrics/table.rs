//! One table of the metrics a result reports ([`METRICS`]): each one's result key, its
//! label, short name and unit, which way is better, and whether it is a latency family
//! (read with a statistic: `p99_ttft_ms`) or one number (`output_throughput`). The SLO
//! grammar and its help, the compare gate, the history's trend, the report's view and
//! the result reader read it (summary.csv writes the result's keys, which are its keys);
//! a metric the summary already computes becomes an SLO key and a compared metric by
//! adding its row.

use crate::metrics::summary::Summary;
use crate::plan::params::Metric;

/// The unit a metric's value is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Ms,
    RequestsPerSecond,
    TokensPerSecond,
    /// 0 to 100.
    Percent,
    /// 0 to 1.
    Ratio,
    /// Joules per output token.
    JoulesPerToken,
    /// The plan's currency (per million tokens).
    Money,
}

impl Unit {
    /// How a value of this unit is written after its number (`500ms`, `12.5 req/s`).
    pub fn suffix(self) -> &'static str {
        match self {
            Unit::Ms => "ms",
            Unit::RequestsPerSecond => " req/s",
            Unit::TokensPerSecond => " tok/s",
            Unit::Percent => "%",
            Unit::Ratio => "",
            Unit::JoulesPerToken => " J/tok",
            Unit::Money => "",
        }
    }

    /// The value a ratio cannot improve on (100%, 1.0); None for an unbounded unit.
    pub fn perfect(self) -> Option<f64> {
        match self {
            Unit::Percent => Some(100.0),
            Unit::Ratio => Some(1.0),
            _ => None,
        }
    }
}

/// Whether a metric is read with a statistic or is one number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A latency family: `{stat}_{key}_ms`, `stat` one of mean, median, std, pN.
    Latency(Metric),
    /// One number under the result key itself.
    Scalar,
}

/// What the compare gate tests a difference of a metric on (its p-value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    /// The metric's own per-request samples (a latency).
    OwnSamples,
    /// The requests' E2EL samples (a throughput is requests over their time).
    E2elSamples,
    /// Completed and failed counts (a proportion).
    Counts,
    /// No test: the difference is judged on its size alone.
    None,
}

/// One metric.
#[derive(Debug, Clone, Copy)]
pub struct MetricDef {
    /// The result key (a latency family's middle: `ttft` in `p99_ttft_ms`).
    pub key: &'static str,
    /// What a person calls it.
    pub label: &'static str,
    /// Its name in a report's tight spots (`TTFT`, `req/s`).
    pub short: &'static str,
    pub unit: Unit,
    pub higher_is_better: bool,
    pub shape: Shape,
    /// An SLO may judge it (`p99_ttft = "<= 500ms"`, `success_rate = ">= 99%"`).
    pub slo: bool,
    /// The baseline gate and the history may compare it (`report.compare_metrics`).
    pub compared: bool,
    /// What a difference is tested on.
    pub evidence: Evidence,
    /// A case may lack it on purpose (the output ratio of a case sent without
    /// `ignore_eos`): an SLO on it then does not apply, where any other missing metric
    /// fails.
    pub optional: bool,
    /// A one-number metric's value in a live summary; a result file keeps it under
    /// [`MetricDef::key`] (the results reader derives the few it computes).
    pub of_summary: fn(&Summary) -> Option<f64>,
}

const fn latency(metric: Metric, key: &'static str, label: &'static str) -> MetricDef {
    MetricDef {
        key,
        label,
        short: label,
        unit: Unit::Ms,
        higher_is_better: false,
        shape: Shape::Latency(metric),
        slo: true,
        compared: true,
        evidence: Evidence::OwnSamples,
        optional: false,
        of_summary: |_| None,
    }
}

/// A one-number metric, higher is better, judged and compared; the builders below
/// change what differs.
const fn scalar(
    key: &'static str,
    label: &'static str,
    short: &'static str,
    unit: Unit,
    evidence: Evidence,
    of_summary: fn(&Summary) -> Option<f64>,
) -> MetricDef {
    MetricDef {
        key,
        label,
        short,
        unit,
        higher_is_better: true,
        shape: Shape::Scalar,
        slo: true,
        compared: true,
        evidence,
        optional: false,
        of_summary,
    }
}

impl MetricDef {
    const fn no_slo(self) -> MetricDef {
        MetricDef { slo: false, ..self }
    }
    const fn not_compared(self) -> MetricDef {
        MetricDef {
            compared: false,
            ..self
        }
    }
    const fn lower_is_better(self) -> MetricDef {
        MetricDef {
            higher_is_better: false,
            ..self
        }
    }
    const fn optional(self) -> MetricDef {
        MetricDef {
            optional: true,
            ..self
        }
    }
}

/// Every metric benchplan judges or compares.
pub const METRICS: &[MetricDef] = &[
    latency(Metric::Ttft, "ttft", "TTFT"),
    // A reasoning model's time to its answer (see `metrics::reasoning`).
    latency(Metric::Ttfo, "ttfo", "TTFO"),
    latency(Metric::Tpot, "tpot", "TPOT"),
    latency(Metric::Itl, "itl", "ITL"),
    latency(Metric::E2el, "e2el", "E2EL"),
    latency(
        Metric::ClientQueueTime,
        "client_queue_time",
        "client queue time",
    ),
    latency(
        Metric::E2elIncludingClientQueue,
        "e2el_including_client_queue",
        "E2EL with the client queue",
    ),
    scalar(
        "request_throughput",
        "request throughput",
        "req/s",
        Unit::RequestsPerSecond,
        Evidence::E2elSamples,
        |s| Some(s.request_throughput),
    ),
    // A pooling case generates no output.
    scalar(
        "output_throughput",
        "output throughput",
        "out tok/s",
        Unit::TokensPerSecond,
        Evidence::E2elSamples,
        |s| (!s.pooling).then_some(s.output_throughput),
    ),
    // vLLM's peak: the fullest one-second bucket of output tokens.
    scalar(
        "max_output_tokens_per_s",
        "peak output throughput",
        "peak out tok/s",
        Unit::TokensPerSecond,
        Evidence::None,
        |s| (!s.pooling).then_some(s.max_output_tokens_per_s),
    ),
    scalar(
        "total_token_throughput",
        "total token throughput",
        "tok/s",
        Unit::TokensPerSecond,
        Evidence::E2elSamples,
        |s| Some(s.total_token_throughput),
    )
    .no_slo(),
    scalar(
        "request_goodput",
        "goodput",
        "goodput",
        Unit::RequestsPerSecond,
        Evidence::E2elSamples,
        |s| s.request_goodput,
    )
    .no_slo(),
    scalar(
        "success_rate",
        "success rate",
        "success",
        Unit::Percent,
        Evidence::Counts,
        |s| (s.completed + s.failed > 0).then(|| s.success_rate()),
    ),
    scalar(
        "goodput_ratio",
        "goodput ratio",
        "goodput ratio",
        Unit::Ratio,
        Evidence::None,
        |s| {
            s.request_goodput.map(|g| {
                if s.request_throughput > 0.0 {
                    g / s.request_throughput
                } else {
                    0.0
                }
            })
        },
    )
    .not_compared(),
    // Output tokens returned / asked for, over requests sent with `ignore_eos` (the
    // `min_output_ratio` floor; see `metrics::checks`).
    scalar(
        "output_ratio",
        "output ratio",
        "output ratio",
        Unit::Percent,
        Evidence::None,
        |s| s.accounting.output_ratio,
    )
    .not_compared()
    .optional(),
    // A trace case: the share of its prompt tokens the server reported cached
    // (`benchplan.trace.realised_reuse`, in percent here); only a trace case has it.
    scalar(
        "trace_realised_reuse",
        "realised prefix reuse",
        "realised reuse",
        Unit::Percent,
        Evidence::None,
        |_| None,
    )
    .optional(),
    // Energy and cost over the measured window (`benchplan.energy`, `benchplan.cost`;
    // see `energy`): only a case whose service names a source or a price has them. An
    // energy or cost regression is a regression.
    scalar(
        "energy_joules_per_output_token",
        "energy per output token",
        "J/out tok",
        Unit::JoulesPerToken,
        Evidence::None,
        |_| None,
    )
    .lower_is_better()
    .no_slo()
    .optional(),
    scalar(
        "cost_per_million_output_tokens",
        "cost per million output tokens",
        "cost/1M out",
        Unit::Money,
        Evidence::None,
        |_| None,
    )
    .lower_is_better()
    .no_slo()
    .optional(),
];

/// A result key's name in a report's tight spots: `TTFT P99`, `TPOT mean`, `req/s`;
/// None for a key no row covers.
pub fn short_label(k: &str) -> Option<String> {
    let d = of_result_key(k)?;
    Some(match d.shape {
        Shape::Scalar => d.short.to_string(),
        Shape::Latency(_) => {
            let stat = k.split_once('_').map_or("", |(s, _)| s);
            let stat = match stat {
                "mean" | "median" | "std" => stat.to_string(),
                p => p.to_uppercase(),
            };
            format!("{} {stat}", d.short)
        }
    })
}

/// The row of a latency metric.
pub fn latency_def(metric: Metric) -> &'static MetricDef {
    METRICS
        .iter()
        .find(|d| d.shape == Shape::Latency(metric))
        .expect("every latency metric has a row")
}

/// The row of a latency family by its key (`ttft`, `client_queue_time`).
pub fn latency_named(key: &str) -> Option<&'static MetricDef> {
    METRICS
        .iter()
        .find(|d| d.key == key && matches!(d.shape, Shape::Latency(_)))
}

/// The row of a one-number metric by its result key.
pub fn scalar_named(key: &str) -> Option<&'static MetricDef> {
    METRICS
        .iter()
        .find(|d| d.key == key && d.shape == Shape::Scalar)
}

/// Whether `stat` is a statistic a latency family is written with: mean, median, std,
/// or a percentile `pN` / `pN.N` with 0 < N <= 100.
fn is_stat(stat: &str) -> bool {
    matches!(stat, "mean" | "median" | "std")
        || stat
            .strip_prefix('p')
            .and_then(|n| n.parse::<f64>().ok())
            .is_some_and(|p| p > 0.0 && p <= 100.0)
}

/// The row a result key belongs to: `p99_ttft_ms` → TTFT's, `output_throughput` → its
/// own; None for a key no row covers.
pub fn of_result_key(k: &str) -> Option<&'static MetricDef> {
    if let Some(d) = scalar_named(k) {
        return Some(d);
    }
    let rest = k.strip_suffix("_ms")?;
    // The family's key may hold underscores (`client_queue_time`): the statistic is
    // the first segment.
    let (stat, family) = rest.split_once('_')?;
    latency_named(family).filter(|_| is_stat(stat))
}

/// Whether a rise of this result key is good (a throughput, the success rate); false
/// for a latency and for a key no row covers.
pub fn higher_is_better(k: &str) -> bool {
    of_result_key(k).is_some_and(|d| d.higher_is_better)
}

/// The latency families an SLO may name, as written in a key (`ttft`, `tpot`, …).
pub fn slo_latency_keys() -> impl Iterator<Item = &'static str> {
    METRICS
        .iter()
        .filter(|d| d.slo && matches!(d.shape, Shape::Latency(_)))
        .map(|d| d.key)
}

/// The one-number metrics an SLO may name.
pub fn slo_scalar_keys() -> impl Iterator<Item = &'static str> {
    METRICS
        .iter()
        .filter(|d| d.slo && d.shape == Shape::Scalar)
        .map(|d| d.key)
}

/// What the SLO grammar accepts, for its error messages (from the table).
pub fn slo_keys_help() -> String {
    let families: Vec<&str> = slo_latency_keys().collect();
    let scalars: Vec<&str> = slo_scalar_keys().collect();
    format!(
        "SLO keys are (mean|median|std|pN|pN.N)_({}), {}, and the floors min_success_rate and min_output_ratio",
        families.join("|"),
        scalars.join(", ")
    )
}

/// What the compare gate and the history look at unless `report.compare_metrics` says
/// otherwise: one of each kind, no statistic twice (a median is a p50).
pub const DEFAULT_COMPARED: [&str; 9] = [
    "p50_ttft_ms",
    "p99_ttft_ms",
    "p50_tpot_ms",
    "p99_tpot_ms",
    "p99_itl_ms",
    "p99_e2el_ms",
    "output_throughput",
    "success_rate",
    "trace_realised_reuse",
];

/// Whether the compare gate can judge this result key (a compared row's key, or a
/// statistic of a compared latency family).
pub fn is_compared(k: &str) -> bool {
    of_result_key(k).is_some_and(|d| d.compared)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_keys_find_their_rows() {
        assert_eq!(of_result_key("p99_ttft_ms").unwrap().key, "ttft");
        assert_eq!(of_result_key("median_e2el_ms").unwrap().key, "e2el");
        assert_eq!(
            of_result_key("p99.9_client_queue_time_ms").unwrap().key,
            "client_queue_time"
        );
        assert_eq!(
            of_result_key("mean_e2el_including_client_queue_ms")
                .unwrap()
                .key,
            "e2el_including_client_queue"
        );
        assert_eq!(
            of_result_key("output_throughput").unwrap().unit,
            Unit::TokensPerSecond
        );
        for bad in [
            "p99_ttft",
            "p0_ttft_ms",
            "p101_ttft_ms",
            "x_ttft_ms",
            "ttft_ms",
            "p99_foo_ms",
        ] {
            assert!(of_result_key(bad).is_none(), "{bad}");
        }
        assert!(higher_is_better("request_goodput") && higher_is_better("success_rate"));
        assert!(!higher_is_better("p99_itl_ms") && !higher_is_better("unknown"));
        assert_eq!(short_label("p99_ttft_ms").as_deref(), Some("TTFT P99"));
        assert_eq!(short_label("mean_tpot_ms").as_deref(), Some("TPOT mean"));
        assert_eq!(
            short_label("output_throughput").as_deref(),
            Some("out tok/s")
        );
        // A row added to the table is an SLO key and a compared metric at once.
        let peak = crate::slo::Slo::from_entry(
            "max_output_tokens_per_s",
            &serde_json::json!(">= 100 tok/s"),
        )
        .unwrap();
        assert_eq!((peak.threshold, peak.unit()), (100.0, " tok/s"));
        assert!(is_compared("max_output_tokens_per_s"));
        assert!(higher_is_better("max_output_tokens_per_s"));
        // Every default compared key has a compared row, and every latency metric a row.
        assert!(DEFAULT_COMPARED.iter().all(|k| is_compared(k)));
        for m in Metric::ALL {
            assert_eq!(latency_def(m).key, m.name());
        }
    }
}
