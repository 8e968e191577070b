//! SLO checks: the grammar of `p99_ttft = "<= 500ms"` and of the seed's `p99_ttft:500`.
//!
//! Keys are `(mean|median|std|pN|pN.N)_(ttft|tpot|itl|e2el)`, `success_rate`,
//! `goodput_ratio`, `request_throughput` and `output_throughput`. Thresholds are kept
//! in the units of vLLM's result keys: milliseconds for latencies, percent for the
//! success rate, a fraction for the goodput ratio, per second for throughputs.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

pub mod floors;

use crate::metrics::table::{self, MetricDef, Shape, Unit};
use crate::plan::params::Metric;
use crate::plan::units::{parse_duration, parse_percent};

/// A summary statistic of a latency metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stat {
    Mean,
    Median,
    Std,
    /// A percentile in (0, 100].
    Percentile(f64),
}

/// What an SLO looks at: a statistic of a latency family, or a one-number row of the
/// metric table (`metrics::table`), whose row says its unit, direction and reading.
#[derive(Debug, Clone, Copy)]
pub enum SloMetric {
    Latency { stat: Stat, metric: Metric },
    Scalar(&'static MetricDef),
}

impl PartialEq for SloMetric {
    fn eq(&self, other: &SloMetric) -> bool {
        match (self, other) {
            (SloMetric::Latency { stat, metric }, SloMetric::Latency { stat: s, metric: m }) => {
                stat == s && metric == m
            }
            (SloMetric::Scalar(a), SloMetric::Scalar(b)) => a.key == b.key,
            _ => false,
        }
    }
}

/// A comparison; the SLO holds when `actual OP threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Op {
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = ">")]
    Gt,
}

impl Op {
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Le => "<=",
            Op::Lt => "<",
            Op::Ge => ">=",
            Op::Gt => ">",
        }
    }
}

/// One parsed SLO check.
#[derive(Debug, Clone, PartialEq)]
pub struct Slo {
    /// The key as canonically written, such as `p99_ttft` or `success_rate`.
    pub key: String,
    pub metric: SloMetric,
    pub op: Op,
    /// In the units of the result key (ms, percent, fraction, per second).
    pub threshold: f64,
}

/// Formats a percentile the way vLLM names its keys: `99`, `99.9`.
pub fn percentile_label(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{}", p as i64)
    } else {
        format!("{p}")
    }
}

/// What the grammar accepts, for error messages (from the metric table).
pub fn slo_keys_help() -> String {
    crate::metrics::table::slo_keys_help()
}

impl SloMetric {
    /// Parses a key such as `p99.9_ttft`, `p99_client_queue_time` or `success_rate`: a
    /// row of the metric table (`metrics::table`) that an SLO may judge.
    pub fn parse(key: &str) -> Result<SloMetric, String> {
        if let Some(d) = table::scalar_named(key).filter(|d| d.slo) {
            return Ok(SloMetric::Scalar(d));
        }
        let bad = || format!("`{key}` is not an SLO key");
        // The statistic is the first segment; the family may hold underscores.
        let (stat, family) = key.split_once('_').ok_or_else(bad)?;
        let metric = match table::latency_named(family).filter(|d| d.slo) {
            Some(&table::MetricDef {
                shape: Shape::Latency(m),
                ..
            }) => m,
            _ => {
                let hint = crate::diag::did_you_mean(family, table::slo_latency_keys())
                    .map(|m| format!(" (did you mean `{m}`?)"))
                    .unwrap_or_default();
                return Err(format!("`{key}`: unknown latency metric `{family}`{hint}"));
            }
        };
        let stat = match stat {
            "mean" => Stat::Mean,
            "median" => Stat::Median,
            "std" => Stat::Std,
            s => {
                let p = s
                    .strip_prefix('p')
                    .and_then(|n| n.parse::<f64>().ok())
                    .filter(|p| *p > 0.0 && *p <= 100.0)
                    .ok_or_else(|| format!("`{key}`: `{s}` is not mean, median, std or a percentile like p99 or p99.9"))?;
                Stat::Percentile(p)
            }
        };
        Ok(SloMetric::Latency { stat, metric })
    }

    /// A one-number metric by its table key (`success_rate`); None when no row an SLO
    /// may judge has it.
    pub fn scalar(key: &str) -> Option<SloMetric> {
        table::scalar_named(key)
            .filter(|d| d.slo)
            .map(SloMetric::Scalar)
    }

    /// The metric's row in the table.
    pub fn def(self) -> &'static MetricDef {
        match self {
            SloMetric::Latency { metric, .. } => table::latency_def(metric),
            SloMetric::Scalar(d) => d,
        }
    }

    /// Whether this is the one-number metric `key`.
    pub fn is(self, key: &str) -> bool {
        matches!(self, SloMetric::Scalar(d) if d.key == key)
    }

    /// The operator used when none is written (the seed's convention): at most for
    /// what is better lower, at least for what is better higher.
    fn default_op(self) -> Op {
        if self.def().higher_is_better {
            Op::Ge
        } else {
            Op::Le
        }
    }

    /// The result JSON key holding the actual value (vLLM's names where vLLM has one).
    pub fn result_key(self) -> String {
        match self {
            SloMetric::Latency { stat, metric } => {
                format!("{}_{}_ms", stat.label(), metric.name())
            }
            SloMetric::Scalar(d) => d.key.into(),
        }
    }

    fn canonical_key(self) -> String {
        match self {
            SloMetric::Latency { .. } => self.result_key().trim_end_matches("_ms").to_string(),
            _ => self.result_key(),
        }
    }

    /// Reads a threshold in this metric's units.
    fn parse_threshold(self, text: &str, bare_number: Option<f64>) -> Result<f64, String> {
        match self {
            SloMetric::Latency { .. } => match bare_number {
                // A bare number is milliseconds, as in the seed's `p99_ttft:500`.
                Some(ms) => Ok(ms),
                // In a condition string a unit is required: "< 500" could be seconds.
                None if text.trim().parse::<f64>().is_ok() => Err(format!(
                    "`{}` has no unit; write {}ms or {}s (a bare number outside quotes, such as p99_ttft = 500, means milliseconds)",
                    text.trim(),
                    text.trim(),
                    text.trim()
                )),
                None => parse_duration(text)
                    .map(|d| (d.as_secs_f64() * 1e12).round() / 1e9)
                    .map_err(|e| format!("`{}` is not a latency: {e}", text.trim())),
            },
            SloMetric::Scalar(d) => match (d.unit, bare_number) {
                (_, Some(x)) => Ok(x),
                (Unit::Percent, None) if text.trim().ends_with('%') => {
                    parse_percent(text).map(|f| f * 100.0)
                }
                (Unit::Percent, None) => text
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| format!("`{text}` is not a percentage; write 99%")),
                (Unit::Ratio, None) => parse_percent(text),
                (Unit::Ms, None) => parse_duration(text)
                    .map(|d| (d.as_secs_f64() * 1e12).round() / 1e9)
                    .map_err(|e| format!("`{}` is not a duration: {e}", text.trim())),
                (Unit::JoulesPerToken | Unit::Money, None) => text
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| format!("`{text}` is not a number")),
                (Unit::RequestsPerSecond | Unit::TokensPerSecond, None) => {
                    let t = text.trim();
                    t.strip_suffix(d.unit.suffix().trim())
                        .unwrap_or(t)
                        .trim()
                        .trim_end_matches("/s")
                        .trim()
                        .parse::<f64>()
                        .map_err(|_| format!("`{text}` is not a number per second"))
                }
            },
        }
    }
}

/// What an SLO reads of a case's numbers: implemented by a live summary (below) and by
/// a result file read back (`results::read::CaseFile`), so both are judged alike.
pub trait Measured {
    /// Completed requests.
    fn completed(&self) -> Option<f64>;
    /// A latency statistic in milliseconds.
    fn latency(&self, stat: Stat, metric: Metric) -> Option<f64>;
    /// A one-number metric of the table, in its row's unit; None when the case lacks it.
    fn scalar(&self, def: &'static MetricDef) -> Option<f64>;
}

impl Measured for crate::metrics::summary::Summary {
    fn completed(&self) -> Option<f64> {
        Some(self.completed as f64)
    }
    fn latency(&self, stat: Stat, metric: Metric) -> Option<f64> {
        let st = self.stat(metric)?;
        match stat {
            Stat::Mean => Some(st.mean),
            Stat::Median => Some(st.median),
            Stat::Std => Some(st.std),
            Stat::Percentile(p) => st
                .percentiles
                .iter()
                .find(|(q, _)| (q - p).abs() < 1e-9)
                .map(|(_, v)| *v),
        }
    }
    fn scalar(&self, def: &'static MetricDef) -> Option<f64> {
        (def.of_summary)(self)
    }
}

impl Stat {
    /// The statistic's word in vLLM's result keys: `mean`, `median`, `std`, `p99`.
    pub fn label(self) -> String {
        match self {
            Stat::Mean => "mean".to_string(),
            Stat::Median => "median".to_string(),
            Stat::Std => "std".to_string(),
            Stat::Percentile(p) => format!("p{}", percentile_label(p)),
        }
    }
}

impl Slo {
    /// Parses a table entry: `p99_ttft = "<= 500ms"`, `success_rate = ">= 99%"`, `p99_ttft = 500`.
    pub fn from_entry(key: &str, value: &Value) -> Result<Slo, String> {
        let metric = SloMetric::parse(key)?;
        let (op, threshold) = match value {
            Value::Number(n) => (metric.default_op(), metric.parse_threshold("", n.as_f64())?),
            Value::String(s) => {
                let (op, rest) = split_op(s);
                (
                    op.unwrap_or(metric.default_op()),
                    metric.parse_threshold(rest, None)?,
                )
            }
            other => {
                return Err(format!(
                    "`{key}` needs a condition like \"<= 500ms\", not {other}"
                ));
            }
        };
        if !threshold.is_finite() || threshold < 0.0 {
            return Err(format!(
                "`{key}`: the threshold must be a finite, non-negative number"
            ));
        }
        Ok(Slo {
            key: metric.canonical_key(),
            metric,
            op,
            threshold,
        })
    }

    /// Parses the seed orchestrator's form `KEY:VALUE` (latency in ms, success rate in percent).
    pub fn from_seed(text: &str) -> Result<Slo, String> {
        let (key, value) = text
            .split_once(':')
            .ok_or_else(|| format!("`{text}` is not KEY:VALUE (for example p99_ttft:500)"))?;
        let (op, rest) = split_op(value);
        let metric = SloMetric::parse(key.trim())?;
        let threshold = match rest.trim().parse::<f64>() {
            Ok(n) => metric.parse_threshold("", Some(n))?,
            Err(_) => metric.parse_threshold(rest, None)?,
        };
        Ok(Slo {
            key: metric.canonical_key(),
            metric,
            op: op.unwrap_or(metric.default_op()),
            threshold,
        })
    }

    /// Whether an actual value meets this SLO.
    pub fn holds(&self, actual: f64) -> bool {
        match self.op {
            Op::Le => actual <= self.threshold,
            Op::Lt => actual < self.threshold,
            Op::Ge => actual >= self.threshold,
            Op::Gt => actual > self.threshold,
        }
    }

    /// The unit the threshold is in, for display.
    pub fn unit(&self) -> &'static str {
        self.metric.def().unit.suffix()
    }
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}{}",
            self.key,
            self.op.symbol(),
            self.threshold,
            self.unit()
        )
    }
}

fn split_op(s: &str) -> (Option<Op>, &str) {
    let t = s.trim();
    for (sym, op) in [("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)] {
        if let Some(rest) = t.strip_prefix(sym) {
            return (Some(op), rest.trim());
        }
    }
    (None, t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn table_entries_parse_with_units() {
        let s = Slo::from_entry("p99_ttft", &json!("<= 500ms")).unwrap();
        assert_eq!((s.op, s.threshold), (Op::Le, 500.0));
        assert_eq!(s.metric.result_key(), "p99_ttft_ms");
        let s = Slo::from_entry("p99.9_e2el", &json!("< 1.5s")).unwrap();
        assert_eq!((s.op, s.threshold), (Op::Lt, 1500.0));
        assert_eq!(s.metric.result_key(), "p99.9_e2el_ms");
        let s = Slo::from_entry("success_rate", &json!(">= 99%")).unwrap();
        assert_eq!((s.op, s.threshold), (Op::Ge, 99.0));
        let s = Slo::from_entry("goodput_ratio", &json!(">= 0.9")).unwrap();
        assert_eq!(s.threshold, 0.9);
        let s = Slo::from_entry("goodput_ratio", &json!(">= 90%")).unwrap();
        assert!((s.threshold - 0.9).abs() < 1e-12);
        let s = Slo::from_entry("mean_tpot", &json!(50)).unwrap();
        assert_eq!((s.op, s.threshold), (Op::Le, 50.0));
    }

    #[test]
    fn seed_strings_parse() {
        let s = Slo::from_seed("p99_ttft:500").unwrap();
        assert_eq!(
            (s.key.as_str(), s.op, s.threshold),
            ("p99_ttft", Op::Le, 500.0)
        );
        let s = Slo::from_seed("success_rate:95").unwrap();
        assert_eq!((s.op, s.threshold), (Op::Ge, 95.0));
        assert!(Slo::from_seed("p99_ttft").is_err());
    }

    #[test]
    fn bad_keys_are_explained() {
        let e = Slo::from_entry("p99.9_tft", &json!("<= 1s")).unwrap_err();
        assert!(e.contains("did you mean `ttft`"), "{e}");
        assert!(Slo::from_entry("p0_ttft", &json!("<= 1s")).is_err());
        assert!(Slo::from_entry("p101_ttft", &json!("<= 1s")).is_err());
        assert!(Slo::from_entry("worst_ttft", &json!("<= 1s")).is_err());
        assert!(Slo::from_entry("p99_ttft", &json!("<= fast")).is_err());
    }

    #[test]
    fn latency_slos_of_a_case_without_a_success_are_not_measured_and_fail() {
        use crate::metrics::summary::{LatencyStats, Summary};
        let s = Summary {
            completed: 0,
            failed: 4,
            stats: vec![LatencyStats::of(Metric::Ttft, &[], &[99.0])],
            ..Summary::default()
        };
        let slo = Slo::from_entry("p99_ttft", &json!("<= 500ms")).unwrap();
        let v = slo.judge(&s).unwrap();
        assert_eq!((v.actual, v.pass), (None, false));
        assert!(v.message.contains("not measured"), "{}", v.message);
    }

    #[test]
    fn holds_respects_operator_edges() {
        let le = Slo::from_entry("p99_ttft", &json!("<= 500ms")).unwrap();
        assert!(le.holds(500.0) && !le.holds(500.1));
        let lt = Slo::from_entry("p99_ttft", &json!("< 500ms")).unwrap();
        assert!(!lt.holds(500.0));
        let ge = Slo::from_entry("success_rate", &json!(">= 99%")).unwrap();
        assert!(ge.holds(99.0) && !ge.holds(98.9));
    }
}

/// One SLO judged on one case's result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Verdict {
    pub key: String,
    /// `<= 500ms`
    pub target: String,
    /// None when the result lacks the metric: that is a failure, never a silent pass.
    pub actual: Option<f64>,
    pub unit: String,
    pub pass: bool,
    pub message: String,
    /// `steady` when judged on the case's steady window (`[slo] measure`); absent, the
    /// whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// Why the number is not a steady state's ("no steady state: …", "too few requests
    /// to judge: …"): the verdict says "not steady", neither pass nor fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsteady: Option<String>,
    /// The measuring machine was busy while the case ran (the figures): judged as
    /// usual, and flagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<String>,
}

impl Verdict {
    /// Whether it fails its case: a miss on a number that is a steady state's (an
    /// unsteady verdict is neither a pass nor a failure).
    pub fn fails(&self) -> bool {
        !self.pass && self.unsteady.is_none()
    }

    /// Whether it holds: met, on a steady number.
    pub fn holds(&self) -> bool {
        self.pass && self.unsteady.is_none()
    }

    /// Its verdict in a word: `pass`, `FAIL` or `not steady`.
    pub fn word(&self) -> &'static str {
        match (self.unsteady.is_some(), self.pass) {
            (true, _) => "not steady",
            (false, true) => "pass",
            (false, false) => "FAIL",
        }
    }
}

impl Slo {
    /// The actual value of this SLO's metric, if the case produced it: of a live
    /// summary or of a result file read back, the same way.
    pub fn actual(&self, m: &impl Measured) -> Option<f64> {
        match self.metric {
            // No successful request measured no latency (the statistics of nothing
            // read 0.00 ms, which would pass any latency SLO).
            SloMetric::Latency { .. } if m.completed() == Some(0.0) => None,
            SloMetric::Latency { stat, metric } => m.latency(stat, metric),
            SloMetric::Scalar(d) => m.scalar(d),
        }
    }

    /// Whether this SLO says nothing about a case whose metric is `actual`: the output
    /// ratio of a case sent without `ignore_eos` (its outputs may end early on purpose).
    /// Such a verdict is left out; every other missing metric fails.
    pub fn not_applicable(&self, actual: Option<f64>) -> bool {
        self.metric.def().optional && actual.is_none()
    }

    /// Judges this SLO on a case's numbers (a summary, or a merged, repeated or other
    /// client's result file read back); None when it does not apply
    /// ([`Slo::not_applicable`]).
    pub fn judge(&self, m: &impl Measured) -> Option<Verdict> {
        let a = self.actual(m);
        (!self.not_applicable(a)).then(|| self.verdict(a))
    }

    /// The SLO a verdict was judged against, read back from its key and target (so a
    /// result file carries what it must be judged on again after a merge).
    pub fn from_verdict(v: &Verdict) -> Result<Slo, String> {
        let floor = v.key == floors::MIN_SUCCESS_RATE || v.key == floors::MIN_OUTPUT_RATIO;
        let key = match v.key.as_str() {
            floors::MIN_SUCCESS_RATE => "success_rate",
            floors::MIN_OUTPUT_RATIO => "output_ratio",
            k => k,
        };
        let slo = Slo::from_entry(key, &serde_json::Value::String(v.target.clone()))?;
        Ok(if floor {
            Slo {
                key: v.key.clone(),
                ..slo
            }
        } else {
            slo
        })
    }

    fn verdict(&self, actual: Option<f64>) -> Verdict {
        let target = format!("{} {}{}", self.op.symbol(), self.threshold, self.unit());
        match actual {
            Some(a) => {
                let pass = self.holds(a);
                let message = format!(
                    "{}: {a:.2}{} {} {}{}",
                    self.key,
                    self.unit(),
                    if pass { "meets" } else { "misses" },
                    target,
                    ""
                );
                Verdict {
                    key: self.key.clone(),
                    target,
                    actual: Some(a),
                    unit: self.unit().to_string(),
                    pass,
                    message,
                    ..Verdict::default()
                }
            }
            None => Verdict {
                key: self.key.clone(),
                target,
                actual: None,
                unit: self.unit().to_string(),
                pass: false,
                message: format!(
                    "{}: not measured (no successful request, or the result has no such metric), so the SLO cannot hold",
                    self.key
                ),
                ..Verdict::default()
            },
        }
    }
}
