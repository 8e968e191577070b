//! A case's SLOs judged on its result file: on the whole run or on its steady window
//! (`[slo] measure`), and flagged where the number is not a steady state's or the
//! measuring machine was busy. One place, so a run, a repeat's combination and a merge
//! judge alike.

use serde_json::{Map, Value, json};

use super::read::CaseFile;
use crate::plan::Measure;
use crate::slo::{Slo, Verdict};

/// Every SLO judged on `file` (see the module docs). `busy`: the thresholds of
/// `Report::busy_thresholds`.
pub fn judge(
    slos: &[(Slo, String)],
    file: CaseFile,
    measure: Measure,
    busy: (f64, f64),
) -> Vec<Verdict> {
    let mut out: Vec<Verdict> = slos
        .iter()
        .filter_map(|(slo, _)| judge_one(slo, file, measure, busy))
        .collect();
    out.extend(oversaturated(file));
    out
}

/// The key of the verdict an over-saturated case fails.
pub const OVERSATURATION: &str = "oversaturation";

/// An over-saturated case fails its SLOs whatever its numbers: they measure how long
/// the run lasted, not the service (see `metrics::oversaturation`).
fn oversaturated(file: CaseFile) -> Option<Verdict> {
    let (at, rate, stopped) = file.oversaturation()?;
    Some(Verdict {
        key: OVERSATURATION.into(),
        target: "a queue that does not grow without bound".into(),
        actual: Some(at),
        unit: "s".into(),
        pass: false,
        message: format!(
            "OVERSATURATED: at {rate:.2} req/s, in flight and TTFT rose without bound from {at:.1} s{}",
            if stopped {
                "; the case was ended there (execution.stop_on)"
            } else {
                ""
            }
        ),
        ..Verdict::default()
    })
}

/// One SLO judged on `file` as [`judge`] does.
pub fn judge_one(slo: &Slo, file: CaseFile, measure: Measure, busy: (f64, f64)) -> Option<Verdict> {
    let steady = file.steady().filter(|_| measure == Measure::Steady);
    let mut v = slo.judge(&steady.unwrap_or(file))?;
    if steady.is_some() {
        v.window = Some("steady".into());
        v.message = format!("{} (steady window)", v.message);
    }
    // Still trending: no latency or rate of it is a steady state's, whole or windowed.
    // Too few requests: only the window's numbers are too few to judge. Counts (the
    // success rate, its floor) are what they are, steady or not.
    let counts = slo.metric.def().evidence == crate::metrics::table::Evidence::Counts
        || crate::slo::floors::is_floor(&slo.key);
    v.unsteady = file
        .unsteady()
        .filter(|(state, _)| !counts && (state == "trending" || steady.is_some()))
        .map(|(_, why)| why);
    v.busy = file.machine_busy(busy);
    Some(v)
}

/// The verdicts of `file` judged again on its numbers now (a repeat's combination, a
/// merge), each on the window it was judged on first; a busy flag stays as it was.
pub fn rejudge(out: &mut Map<String, Value>) {
    let Some(old) = CaseFile::new(out).slo_verdicts() else {
        return;
    };
    let new: Vec<Verdict> = old
        .into_iter()
        .filter_map(|v| match Slo::from_verdict(&v) {
            Ok(slo) => {
                let measure = if v.window.is_some() {
                    Measure::Steady
                } else {
                    Measure::Whole
                };
                let never = (f64::INFINITY, f64::INFINITY);
                judge_one(&slo, CaseFile::new(out), measure, never).map(|n| Verdict {
                    busy: v.busy.clone(),
                    ..n
                })
            }
            Err(_) => Some(v),
        })
        .collect();
    if let Some(Value::Object(b)) = out.get_mut("benchplan") {
        b.insert("slo_verdicts".into(), json!(new));
    }
}
