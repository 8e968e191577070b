//! The floors every case is judged on, SLOs or not (success rate; output ratio under
//! `ignore_eos`), and the reading of a plan's SLO block into checks.

use super::{Op, Slo, SloMetric, slo_keys_help};
use crate::diag::Diagnostic;
use crate::plan::params::CaseParams;
use crate::plan::source::{join_index, join_key};
use crate::plan::{Measure, SloSpec};

/// Parses an SLO block into checks; bad keys become diagnostics at `base.key`.
/// Each SLO comes with the key path it was written at.
pub fn parse_slos(
    spec: Option<&SloSpec>,
    base: &str,
    out: &mut Vec<Diagnostic>,
) -> Vec<(Slo, String)> {
    let mut slos = Vec::new();
    // The list of SLO keys helps with a key it does not know, not with a value.
    let mut push = |r: Result<Slo, String>, path: String, key: Option<&str>| match r {
        Ok(s) => slos.push((s, path)),
        Err(e) if key.is_some_and(|k| SloMetric::parse(k).is_ok()) => {
            out.push(Diagnostic::error(path, e))
        }
        Err(e) => out.push(Diagnostic::error(path, e).with_help(slo_keys_help())),
    };
    match spec {
        None => {}
        Some(SloSpec::Table(t)) => {
            for (k, v) in t {
                if k == MEASURE {
                    // Not an SLO: which numbers the SLOs judge (see `slo_measure`).
                    if base != "slo" {
                        push(
                            Err("`measure` is set once for every SLO, in the plan's [slo] (measure = \"steady\" or \"whole\")".into()),
                            join_key(base, k),
                            Some(k),
                        );
                    }
                    continue;
                }
                // The floor every case must meet, SLOs or not (see `min_success_floor`).
                let slo = match k.as_str() {
                    MIN_SUCCESS_RATE => Slo::from_entry("success_rate", v).map(|s| Slo {
                        key: MIN_SUCCESS_RATE.into(),
                        op: Op::Ge,
                        ..s
                    }),
                    MIN_OUTPUT_RATIO => Slo::from_entry("output_ratio", v).map(|s| Slo {
                        key: MIN_OUTPUT_RATIO.into(),
                        op: Op::Ge,
                        ..s
                    }),
                    _ => Slo::from_entry(k, v),
                };
                push(slo, join_key(base, k), Some(k.as_str()));
            }
        }
        Some(SloSpec::List(l)) => {
            for (i, s) in l.iter().enumerate() {
                push(Slo::from_seed(s), join_index(base, i), None);
            }
        }
    }
    slos
}

/// The `[slo]` key that says which numbers the SLOs judge.
pub const MEASURE: &str = "measure";

/// Which numbers the plan's SLOs judge (`[slo] measure`): the whole run unless it says
/// `"steady"`; anything else is a diagnostic at `slo.measure`.
pub fn slo_measure(spec: Option<&SloSpec>, out: &mut Vec<Diagnostic>) -> Measure {
    let Some(SloSpec::Table(t)) = spec else {
        return Measure::Whole;
    };
    match t.get(MEASURE) {
        None => Measure::Whole,
        Some(v) => serde_json::from_value(v.clone()).unwrap_or_else(|_| {
            out.push(
                Diagnostic::error(
                    join_key("slo", MEASURE),
                    format!("`measure` is \"steady\" or \"whole\", not {v}"),
                )
                .with_help("measure = \"steady\" judges each case's steady window; \"whole\" (the default) the whole run"),
            );
            Measure::Whole
        }),
    }
}

/// The key of the success-rate floor: in `[slo]` (`"95%"` or 95) or `defaults`.
pub const MIN_SUCCESS_RATE: &str = "min_success_rate";

/// Every case must succeed on this share of its requests, even in a plan without SLOs
/// (a case that mostly failed measured nothing worth recommending). The `[slo]` table's
/// `min_success_rate` wins, then `defaults.min_success_rate`, else 95%.
pub fn min_success_floor(slos: &[(Slo, String)], defaults: &CaseParams) -> Option<(Slo, String)> {
    floor(
        slos,
        MIN_SUCCESS_RATE,
        SloMetric::scalar("success_rate").expect("the success rate is an SLO row"),
        defaults.min_success_rate,
        95.0,
    )
}

/// The key of the output-ratio floor: in `[slo]` (`"90%"` or 90) or `defaults`.
pub const MIN_OUTPUT_RATIO: &str = "min_output_ratio";

/// Every case sent with `ignore_eos` must get back this share of the output tokens it
/// asked for (a server that cuts answers short measured nothing worth passing). The
/// `[slo]` table's `min_output_ratio` wins, then `defaults.min_output_ratio`, else 90%.
/// A case without `ignore_eos` is not judged on it.
pub fn min_output_floor(slos: &[(Slo, String)], defaults: &CaseParams) -> Option<(Slo, String)> {
    floor(
        slos,
        MIN_OUTPUT_RATIO,
        SloMetric::scalar("output_ratio").expect("the output ratio is an SLO row"),
        defaults.min_output_ratio,
        90.0,
    )
}

/// A floor every case is judged on, unless the `[slo]` table sets it already: the
/// `defaults` value (a fraction), else `percent`.
fn floor(
    slos: &[(Slo, String)],
    key: &str,
    metric: SloMetric,
    set: Option<crate::plan::units::Percent>,
    percent: f64,
) -> Option<(Slo, String)> {
    if slos.iter().any(|(s, _)| s.key == key) {
        return None;
    }
    let (threshold, path) = match set {
        Some(p) => (p.0 * 100.0, format!("defaults.{key}")),
        None => (percent, format!("{key} (default)")),
    };
    Some((
        Slo {
            key: key.into(),
            metric,
            op: Op::Ge,
            threshold,
        },
        path,
    ))
}

/// Whether an SLO key is one of the floors every case is judged on.
pub fn is_floor(key: &str) -> bool {
    key == MIN_SUCCESS_RATE || key == MIN_OUTPUT_RATIO
}
