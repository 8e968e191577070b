//! A history judged: one series per case and metric (oldest run first), its change
//! points ([`super::edivisive`]), each one's direction (a latency up, a throughput or
//! success rate down is a regression), and the verdict: a regression when the most
//! recent change point of a series is one, within the last `recent` runs.

use std::collections::BTreeMap;

use serde::Serialize;

use super::edivisive::{Settings, change_points};
use super::history::Entry;

/// One change point, in words a report uses.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Change {
    /// Index of the first run after the change.
    pub index: usize,
    pub run: String,
    pub when: String,
    pub commit: Option<String>,
    pub mean_before: f64,
    pub mean_after: f64,
    /// `after / before - 1`.
    pub change: f64,
    pub pvalue: f64,
    pub regression: bool,
}

/// One case's metric over the runs.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub case: String,
    pub metric: String,
    pub values: Vec<f64>,
    pub runs: Vec<String>,
    pub when: Vec<String>,
    pub changes: Vec<Change>,
    /// The SLO threshold on this metric, from the newest run that had one.
    pub slo: Option<f64>,
    /// Whether the newest change point is a regression within the recent runs.
    pub regressed: bool,
}

/// The verdict over a history.
#[derive(Debug, Clone, Serialize)]
pub struct Trend {
    pub series: Vec<Series>,
    pub runs: usize,
    pub settings: TrendSettings,
    /// Series whose newest change point is a recent regression.
    pub regressions: usize,
}

/// How the history was judged: Otava's settings, and how recent a regression must be.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TrendSettings {
    #[serde(flatten)]
    pub change: Settings,
    /// A regression counts when its change point is among the newest this many runs
    /// (10 by default: a change is seen a few runs after it happened).
    pub recent: usize,
}

impl Default for TrendSettings {
    fn default() -> Self {
        TrendSettings {
            change: Settings::default(),
            recent: 10,
        }
    }
}

/// Judges every series of the history.
pub fn analyze(entries: &[Entry], settings: &TrendSettings) -> Trend {
    // (case, metric) → the runs' values, in history order.
    let mut by: BTreeMap<(String, String), Series> = BTreeMap::new();
    let mut commits: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut runs = std::collections::BTreeSet::new();
    for e in entries {
        runs.insert(e.run.clone());
        commits.insert(e.run.clone(), e.commit.clone());
        for (metric, point) in &e.metrics {
            let s = by
                .entry((e.case.clone(), metric.clone()))
                .or_insert_with(|| Series {
                    case: e.case.clone(),
                    metric: metric.clone(),
                    values: Vec::new(),
                    runs: Vec::new(),
                    when: Vec::new(),
                    changes: Vec::new(),
                    slo: None,
                    regressed: false,
                });
            s.values.push(point.value);
            s.runs.push(e.run.clone());
            s.when.push(e.when.clone());
            if let Some(t) = e.slos.get(metric) {
                s.slo = Some(*t);
            }
        }
    }
    let mut series: Vec<Series> = by.into_values().collect();
    let mut regressions = 0;
    for s in &mut series {
        let up_is_good = crate::metrics::table::higher_is_better(&s.metric);
        s.changes = change_points(&s.values, &settings.change)
            .into_iter()
            .map(|c| {
                let change = c.stats.forward_change();
                Change {
                    index: c.index,
                    run: s.runs[c.index].clone(),
                    when: s.when[c.index].clone(),
                    commit: commits.get(&s.runs[c.index]).cloned().flatten(),
                    mean_before: c.stats.mean_before,
                    mean_after: c.stats.mean_after,
                    change,
                    pvalue: c.stats.pvalue,
                    regression: if up_is_good {
                        change < 0.0
                    } else {
                        change > 0.0
                    },
                }
            })
            .collect();
        // Every change point left is significant and beyond the minimum magnitude
        // (Otava's merge keeps no other); the newest decides.
        let len = s.values.len();
        s.regressed = s
            .changes
            .last()
            .is_some_and(|c| c.regression && c.index + settings.recent >= len);
        regressions += usize::from(s.regressed);
    }
    Trend {
        series,
        runs: runs.len(),
        settings: *settings,
        regressions,
    }
}
