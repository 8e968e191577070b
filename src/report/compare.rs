//! Comparing two runs: cases matched by id (else by their readable slug, when the
//! parameters behind the hash changed), per-metric deltas, and regressions where
//! throughput falls or latency rises by more than the threshold.

use std::path::Path;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::metrics::table;
use crate::plan::Report;
use crate::results::read::CaseFile;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeltaRow {
    pub case: String,
    pub metric: String,
    pub base: f64,
    pub cand: f64,
    pub delta_pct: f64,
    pub threshold_pct: f64,
    /// `higher` or `lower` is better.
    pub better: std::borrow::Cow<'static, str>,
    /// One-sided p-value of a change for the worse (see `significance`); None when the
    /// results carry no samples to test. With a history, the larger of the requests'
    /// test and `p_between`.
    pub p_value: Option<f64>,
    /// One-sided p-value of the difference against the spread between runs: the
    /// case's past values of the metric in the plan's history (three or more); None
    /// without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_between: Option<f64>,
    pub regression: bool,
    /// Beyond its threshold and significant, but measured on a busy machine (either
    /// side): why, with the figures. Not a regression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inconclusive: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    pub baseline: String,
    pub candidate: String,
    pub rows: Vec<DeltaRow>,
    /// Metrics past their threshold, plus each unmatched case unless allowed.
    pub regressions: usize,
    /// Candidate cases with no counterpart in the baseline.
    pub unmatched: Vec<String>,
    /// Whether unmatched cases fail the comparison (`report.allow_unmatched` off).
    pub unmatched_fail: bool,
    /// Things to know about the baseline (a different plan, for one).
    pub warnings: Vec<String>,
    /// The p-value below which a change beyond its threshold is a regression.
    pub significance: f64,
    /// Rows that would be regressions but could not be judged: measured on a busy
    /// machine, or a steady window with too few requests.
    #[serde(default)]
    pub inconclusive: usize,
    /// Which numbers were compared: `steady` (each case's steady window) or `whole`.
    #[serde(default = "whole")]
    pub measure: String,
}

fn whole() -> String {
    "whole".into()
}

/// The plan hash a run folder's manifest records, if any.
fn plan_hash_of(dir: &Path) -> Option<String> {
    crate::results::manifest::Manifest::read_if_any(dir)
        .ok()
        .flatten()
        .map(|m| m.plan_hash)
        .filter(|h| !h.is_empty())
}

/// Result files of a run folder (benchplan's, or plain `vllm bench serve` results), by
/// case id; a single result file gives itself.
/// Compares strings with runs of digits as numbers: `c8` before `c32`.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(&cb) {
        let o = match (x, y) {
            ((true, x), (true, y)) => {
                let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
                x.len().cmp(&y.len()).then_with(|| x.cmp(y))
            }
            ((_, x), (_, y)) => x.cmp(y),
        };
        if o.is_ne() {
            return o;
        }
    }
    ca.len().cmp(&cb.len()).then_with(|| a.cmp(b))
}

pub fn load_results(dir: &Path) -> Result<IndexMap<String, Map<String, Value>>, String> {
    let mut files: Vec<_> = if dir.is_file() {
        vec![dir.to_path_buf()]
    } else {
        std::fs::read_dir(dir)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .filter(|p| {
                let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                !matches!(
                    n,
                    crate::results::manifest::FILE
                        | "plan.resolved.json"
                        | "summary.json"
                        | "optimization_report.json"
                        | "sweep_summary.json"
                ) && !n.contains(".rep")
            })
            .collect()
    };
    // Natural order, so c1, c8, c32 read as the sweep went (not c1, c32, c8).
    files.sort_by(|a, b| natural_cmp(&a.to_string_lossy(), &b.to_string_lossy()));
    let mut read = Vec::new();
    for f in files {
        let Value::Object(m) = crate::results::read::read_file(&f)? else {
            continue;
        };
        let id = CaseFile::new(&m)
            .case_id()
            .map(str::to_string)
            .unwrap_or_else(|| {
                f.file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("case")
                    .to_string()
            });
        let file = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        read.push((id, file, m));
    }
    // Two results of the same case (two `bench` runs with the same parameters) are
    // both kept, told apart by their file and date.
    let mut out = IndexMap::new();
    for (id, file, m) in &read {
        let twins = read.iter().filter(|(other, _, _)| other == id).count();
        let key = if twins > 1 {
            let date = CaseFile::new(m).date().unwrap_or("");
            format!("{id} ({file}, {date})")
        } else {
            id.clone()
        };
        out.insert(key, m.clone());
    }
    Ok(out)
}

/// The readable part of a case id (without its hash).
fn slug(id: &str) -> &str {
    match id.rsplit_once('-') {
        Some((s, h)) if h.len() == 12 && h.chars().all(|c| c.is_ascii_hexdigit()) => s,
        _ => id,
    }
}

/// Whether `k` is a latency statistic the gate compares (a mean, median or percentile
/// of a compared latency family; a spread is not a regression).
fn is_latency_key(k: &str) -> bool {
    table::of_result_key(k).is_some_and(|d| {
        d.compared && matches!(d.shape, table::Shape::Latency(_)) && !k.starts_with("std_")
    })
}

/// Whether `k` is a compared one-number metric where lower is better (energy per
/// token, cost per token).
fn lower_is_better_scalar(k: &str) -> bool {
    table::scalar_named(k).is_some_and(|d| d.compared && !d.higher_is_better)
}

/// Whether the gate judges `k` as "higher is better" (a compared throughput or rate).
fn higher_is_better(k: &str) -> bool {
    table::of_result_key(k).is_some_and(|d| d.compared && d.higher_is_better)
}

/// The result keys a plan compares (and its history keeps): `report.compare_metrics`,
/// else the metric table's defaults (`metrics::table::DEFAULT_COMPARED`).
pub fn compared_metrics(cfg: &Report) -> Vec<String> {
    cfg.compare_metrics.clone().unwrap_or_else(|| {
        table::DEFAULT_COMPARED
            .iter()
            .map(|s| s.to_string())
            .collect()
    })
}

/// A repeated case's per-run values of metric `k` (`benchplan.repeats.values`; `p50_`
/// reads `median_`), when there are at least two.
fn run_values(r: &Map<String, Value>, k: &str) -> Option<Vec<f64>> {
    CaseFile::new(r).run_values(k)
}

/// The one-sided p-value that `cand` is worse than `base` on metric `k` by more than
/// `margin` (see `significance`): its samples' histogram for a latency, E2EL's for a
/// throughput, the counts for the success rate.
fn worse_p_value(
    k: &str,
    base: &Map<String, Value>,
    cand: &Map<String, Value>,
    margin: f64,
) -> Option<f64> {
    use crate::metrics::significance::{proportion_lower, slower_by_more_than, welch_worse};
    // Both sides repeated: a test across the runs, on the metric itself.
    if let (Some(b), Some(c)) = (run_values(base, k), run_values(cand, k)) {
        let lower_is_better = !higher_is_better(k);
        if let Some(p) = welch_worse(&b, &c, margin, lower_is_better) {
            return Some(p);
        }
    }
    let hist = |r: &Map<String, Value>, m: &str| CaseFile::new(r).histogram(m);
    let def = table::of_result_key(k)?;
    match (def.evidence, def.shape) {
        (table::Evidence::OwnSamples, table::Shape::Latency(m)) => {
            slower_by_more_than(&hist(base, m.name())?, &hist(cand, m.name())?, margin)
        }
        // A throughput's requests, through their E2EL.
        (table::Evidence::E2elSamples, _) => {
            slower_by_more_than(&hist(base, "e2el")?, &hist(cand, "e2el")?, margin)
        }
        (table::Evidence::Counts, _) => {
            let ((bo, bf), (co, cf)) =
                (CaseFile::new(base).counts()?, CaseFile::new(cand).counts()?);
            proportion_lower(bo, bo + bf, co, co + cf, margin)
        }
        _ => None,
    }
}

/// The `[report]` settings of the plan a run folder ran (its `plan.resolved.json`);
/// None for a result file or a folder without one.
pub fn plan_report_settings(dir: &Path) -> Option<Report> {
    let text = std::fs::read_to_string(dir.join("plan.resolved.json")).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    serde_json::from_value(v["plan"]["report"].clone()).ok()
}

/// Each case's past values of each metric (by case and metric), from the plan's history.
pub type RunValues = std::collections::HashMap<(String, String), Vec<f64>>;

/// The fewest past runs whose spread the gate judges a difference against.
pub const MIN_PAST_RUNS: usize = 3;

/// The one-sided p-value that a single run's `cand` is worse than a single run's `base`
/// by more than `margin` (relative), against the spread of `past` runs: two runs
/// differ by noise with variance 2s², s the past runs' standard deviation; Student's t
/// with n − 1 degrees of freedom.
pub fn between_runs_p(
    past: &[f64],
    base: f64,
    cand: f64,
    margin: f64,
    lower_is_better: bool,
) -> Option<f64> {
    if past.len() < MIN_PAST_RUNS || base == 0.0 {
        return None;
    }
    let s = crate::metrics::stats::std_sample(past);
    let worse = if lower_is_better {
        cand - base
    } else {
        base - cand
    };
    let beyond = worse - margin * base.abs();
    if s == 0.0 {
        return Some(if beyond > 0.0 { 0.0 } else { 1.0 });
    }
    let t = beyond / (s * std::f64::consts::SQRT_2);
    Some(crate::metrics::significance::student_t_sf(
        t,
        (past.len() - 1) as f64,
    ))
}

/// Compares the results of two folders with the plan's report thresholds.
pub fn compare_dirs(base: &Path, cand: &Path, cfg: &Report) -> Result<Comparison, String> {
    compare_with(base, cand, cfg, &RunValues::new())
}

/// [`compare_dirs`], a difference between single runs also judged against the spread
/// between runs that `past` holds (the plan's history; see [`between_runs_p`]).
pub fn compare_with(
    base: &Path,
    cand: &Path,
    cfg: &Report,
    past: &RunValues,
) -> Result<Comparison, String> {
    let b = load_results(base)?;
    let c = load_results(cand)?;
    let mut rows = Vec::new();
    let mut unmatched = Vec::new();
    let mut cache_warnings = Vec::new();
    // Cases judged on the whole run although the steady window was asked for, cases
    // whose steady window is too small, and cases with one run on each side.
    let mut whole_instead = Vec::new();
    let mut not_judged = Vec::new();
    let mut single_runs = 0usize;
    // Two result files compare with each other, whatever their case ids.
    let single = base.is_file() && cand.is_file();
    for (id, cr) in &c {
        let br = b
            .get(id)
            .or_else(|| b.values().next().filter(|_| single))
            .or_else(|| {
                b.iter()
                    .find(|(bid, _)| slug(bid) == slug(id))
                    .map(|(_, r)| r)
            });
        let Some(br) = br else {
            unmatched.push(id.clone());
            continue;
        };
        if let Some(w) = prefix_cache_warning(id, br, cr) {
            cache_warnings.push(w);
        }
        let (bf, cf) = (CaseFile::new(br), CaseFile::new(cr));
        single_runs += usize::from(bf.repeat_count().is_none() && cf.repeat_count().is_none());
        // The numbers judged: the steady windows when asked and both sides have one.
        let (bj, cj) = match (bf.measured(cfg.measure), cf.measured(cfg.measure)) {
            (Some(b), Some(c)) => (b.map(), c.map()),
            _ => {
                whole_instead.push(id.clone());
                (br, cr)
            }
        };
        let too_few = (cfg.measure == crate::plan::Measure::Steady)
            .then(|| {
                cf.too_few_to_judge()
                    .map(|w| format!("{w} in this run"))
                    .or_else(|| {
                        bf.too_few_to_judge()
                            .map(|w| format!("{w} in the baseline"))
                    })
            })
            .flatten();
        if let Some(w) = &too_few {
            not_judged.push(format!(
                "case {id}: {w}; a change in it is not a regression"
            ));
        }
        // A busy machine on either side: a difference may be the machine's.
        let busy = CaseFile::new(cr)
            .machine_busy(cfg.busy_thresholds())
            .map(|w| format!("the measuring machine was busy for this run: {w}"))
            .or_else(|| {
                CaseFile::new(br)
                    .machine_busy(cfg.busy_thresholds())
                    .map(|w| format!("the measuring machine was busy for the baseline: {w}"))
            });
        let metrics: Vec<&str> = match &cfg.compare_metrics {
            Some(list) => list.iter().map(String::as_str).collect(),
            None => table::DEFAULT_COMPARED.to_vec(),
        };
        for k in metrics {
            let better = if higher_is_better(k) {
                "higher"
            } else if is_latency_key(k) || lower_is_better_scalar(k) {
                "lower"
            } else {
                continue;
            };
            let (Some(bv), Some(cv)) = (CaseFile::new(bj).metric(k), CaseFile::new(cj).metric(k))
            else {
                continue;
            };
            if bv == 0.0 {
                continue;
            }
            let delta = (cv - bv) / bv;
            // A metric's own threshold, else its service's, else the plan's.
            let t = cfg.threshold(k, CaseFile::new(cr).service());
            let beyond = if better == "higher" {
                delta < -t
            } else {
                delta > t
            };
            let p_within = worse_p_value(k, bj, cj, t);
            // One run a side: the spread between runs, where the history has it.
            let p_between = (bf.repeat_count().is_none() && cf.repeat_count().is_none())
                .then(|| past.get(&(id.clone(), k.to_string())))
                .flatten()
                .and_then(|xs| between_runs_p(xs, bv, cv, t, better == "lower"));
            let p_value = match (p_within, p_between) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            let worse = beyond && p_value.is_none_or(|p| p < cfg.significance);
            let inconclusive = too_few.clone().or_else(|| busy.clone()).filter(|_| worse);
            rows.push(DeltaRow {
                case: id.clone(),
                metric: k.to_string(),
                base: bv,
                cand: cv,
                delta_pct: delta * 100.0,
                threshold_pct: t * 100.0,
                better: better.into(),
                p_value,
                p_between,
                regression: worse && inconclusive.is_none(),
                inconclusive,
            });
        }
    }
    // The regressions first, then the rest: the reader's first question.
    rows.sort_by_key(|r| !r.regression);
    let unmatched_fail = !cfg.allow_unmatched;
    let regressions = rows.iter().filter(|r| r.regression).count()
        + if unmatched_fail { unmatched.len() } else { 0 };
    let inconclusive = rows.iter().filter(|r| r.inconclusive.is_some()).count();
    let mut warnings = Vec::new();
    if let (Some(a), Some(b)) = (plan_hash_of(base), plan_hash_of(cand))
        && a != b
    {
        warnings.push(format!(
            "the baseline {} comes from a different plan (its cases hash to {a}, this run's to {b}); cases are matched by id, then by their readable name",
            base.display()
        ));
    }
    warnings.extend(cache_warnings);
    warnings.extend(not_judged);
    if cfg.measure == crate::plan::Measure::Steady && !whole_instead.is_empty() {
        warnings.push(format!(
            "{} case(s) have no steady window on one side (a single request, or a result from before steady windows) and were compared on the whole run: {}",
            whole_instead.len(),
            whole_instead.join(", ")
        ));
    }
    if single_runs > 0 && past.is_empty() {
        warnings.push(format!(
            "{single_runs} case(s) have one run on each side: their p-values treat the requests of a run as independent samples, and a shift of a whole run (its machine, its start) is not in them; `execution.repeats` on both sides, or a `report.history` with {MIN_PAST_RUNS} or more past runs, tests against the spread between runs instead"
        ));
    } else if single_runs > 0 {
        warnings.push(format!(
            "{single_runs} case(s) have one run on each side: a difference is also judged against the spread between the history's past runs of the case (where it has {MIN_PAST_RUNS} or more), and its p-value is the larger of that test and the requests' own"
        ));
    }
    if !unmatched.is_empty() && unmatched.len() == c.len() {
        warnings.push(format!(
            "no case of this run has a counterpart in the baseline {}",
            base.display()
        ));
    }
    Ok(Comparison {
        baseline: base.display().to_string(),
        candidate: cand.display().to_string(),
        rows,
        regressions,
        unmatched,
        unmatched_fail,
        warnings,
        significance: cfg.significance,
        inconclusive,
        measure: cfg.measure.as_str().into(),
    })
}

/// The server's prefix-cache hit rate of a result, in percent, when it was scraped.
fn prefix_hit_pct(r: &Map<String, Value>) -> Option<f64> {
    CaseFile::new(r).prefix_cache_hit_rate()
}

/// Hit rates more than this many points apart make latencies incomparable.
pub const PREFIX_HIT_GAP_POINTS: f64 = 10.0;

/// A warning when the two runs of a case found the server's prefix cache in very
/// different states: a warm cache makes a candidate look faster than it is.
fn prefix_cache_warning(
    id: &str,
    base: &Map<String, Value>,
    cand: &Map<String, Value>,
) -> Option<String> {
    let (b, c) = (prefix_hit_pct(base)?, prefix_hit_pct(cand)?);
    ((b - c).abs() > PREFIX_HIT_GAP_POINTS).then(|| {
        format!(
            "case {id}: the server's prefix-cache hit rate was {c:.1}% in this run and {b:.1}% in the baseline ({:.1} points apart); its latencies measure a {} cache, not only the change",
            (b - c).abs(),
            if c > b { "warmer" } else { "colder" }
        )
    })
}

/// A p-value as the tables show it.
pub fn p_text(p: Option<f64>) -> String {
    match p {
        None => "-".into(),
        Some(p) if p < 0.0001 => "<0.0001".into(),
        Some(p) => format!("{p:.4}"),
    }
}

/// The comparison as a markdown table.
pub fn markdown(c: &Comparison) -> String {
    let mut s = format!(
        "Baseline `{}` vs `{}`: {} regression(s).\n\n",
        c.baseline, c.candidate, c.regressions
    );
    s.push_str("| Case | Metric | Base | Candidate | Δ% | Threshold | p (worse) | Verdict |\n|---|---|---|---|---|---|---|---|\n");
    for r in &c.rows {
        s.push_str(&format!(
            "| {} | {} | {:.2} | {:.2} | {:+.1}% | {}{:.1}% | {} | {} |\n",
            r.case,
            r.metric,
            r.base,
            r.cand,
            r.delta_pct,
            if r.better == "higher" { "-" } else { "+" },
            r.threshold_pct,
            p_text(r.p_value),
            match (&r.inconclusive, r.regression) {
                (Some(why), _) => format!("inconclusive: {why}"),
                (None, true) => "REGRESSION".into(),
                (None, false) => "ok".into(),
            }
        ));
    }
    for u in &c.unmatched {
        let verdict = if c.unmatched_fail {
            " (a failure; set report.allow_unmatched to let it pass)"
        } else {
            ""
        };
        s.push_str(&format!("\nNo baseline for case `{u}`{verdict}.\n"));
    }
    for w in &c.warnings {
        s.push_str(&format!("\nWarning: {w}.\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_hits(pct: Option<f64>) -> Map<String, Value> {
        let v = serde_json::json!({"benchplan": {"server_metrics": {"prefix_cache_hit_rate_pct": pct}}});
        v.as_object().unwrap().clone()
    }

    #[test]
    fn prefix_hit_rates_more_than_ten_points_apart_are_a_warning() {
        let w = prefix_cache_warning("c1", &with_hits(Some(20.0)), &with_hits(Some(45.0))).unwrap();
        assert!(
            w.contains("45.0%") && w.contains("20.0%") && w.contains("warmer"),
            "{w}"
        );
        assert!(
            prefix_cache_warning("c1", &with_hits(Some(20.0)), &with_hits(Some(30.0))).is_none()
        );
        assert!(
            prefix_cache_warning("c1", &with_hits(Some(31.0)), &with_hits(Some(20.0)))
                .unwrap()
                .contains("colder")
        );
        assert!(prefix_cache_warning("c1", &with_hits(None), &with_hits(Some(90.0))).is_none());
        assert!(prefix_cache_warning("c1", &Map::new(), &with_hits(Some(90.0))).is_none());
    }

    /// A result of `n` requests with TTFTs `ttft(i)` seconds and the given p99.
    fn result(ttft: impl Fn(usize) -> f64, p99_ms: f64) -> Map<String, Value> {
        let h = crate::metrics::hist::from_seconds((0..200).map(ttft));
        serde_json::json!({
            "completed": 200, "failed": 0, "p99_ttft_ms": p99_ms,
            "benchplan": {"case_id": "c", "histograms_us": {"ttft": crate::metrics::hist::encode(&h)}}
        })
        .as_object()
        .unwrap()
        .clone()
    }

    #[test]
    fn with_repeats_the_runs_are_the_samples() {
        let dir = std::env::temp_dir().join(format!("benchplan-cmp-rep-{}", std::process::id()));
        let (b, c) = (dir.join("b"), dir.join("c"));
        for d in [&b, &c] {
            std::fs::create_dir_all(d).unwrap();
        }
        // A repeated case as `repeats::combine` writes it: the mean, and each run's value.
        let repeated = |p99s: &[f64], tput: &[f64]| {
            let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
            serde_json::json!({
                "completed": 100, "failed": 0,
                "p99_ttft_ms": mean(p99s), "output_throughput": mean(tput),
                "benchplan": {"case_id": "c", "repeats": {"count": p99s.len(), "values": {
                    "p99_ttft_ms": p99s, "output_throughput": tput}}}
            })
            .as_object()
            .unwrap()
            .clone()
        };
        let write = |d: &Path, r: &Map<String, Value>| {
            std::fs::write(d.join("c.json"), serde_json::to_string(r).unwrap()).unwrap();
        };
        let cfg = Report {
            compare_metrics: Some(vec!["p99_ttft_ms".into(), "output_throughput".into()]),
            ..Report::default()
        };
        write(
            &b,
            &repeated(
                &[100.0, 102.0, 98.0, 101.0, 99.0],
                &[500.0, 505.0, 495.0, 502.0, 498.0],
            ),
        );
        // Every run 20% slower and 15% less throughput: both regressions, by Welch's t.
        write(
            &c,
            &repeated(
                &[120.0, 122.0, 118.0, 121.0, 119.0],
                &[425.0, 430.0, 420.0, 428.0, 422.0],
            ),
        );
        let cmp = compare_dirs(&b, &c, &cfg).unwrap();
        assert_eq!(cmp.regressions, 2, "{:?}", cmp.rows);
        assert!(
            cmp.rows.iter().all(|r| r.p_value.unwrap() < 1e-4),
            "{:?}",
            cmp.rows
        );
        // One run that hit a busy machine: the mean is 8% worse, the runs say noise.
        write(
            &c,
            &repeated(
                &[100.0, 140.0, 99.0, 101.0, 100.0],
                &[500.0, 430.0, 500.0, 503.0, 499.0],
            ),
        );
        let cmp = compare_dirs(&b, &c, &cfg).unwrap();
        assert_eq!(cmp.regressions, 0, "{:?}", cmp.rows);
        let p99 = cmp.rows.iter().find(|r| r.metric == "p99_ttft_ms").unwrap();
        assert!(
            p99.delta_pct > 7.0 && p99.p_value.unwrap() > 0.05,
            "{p99:?}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_difference_between_single_runs_is_judged_against_the_past_runs_spread() {
        // Past runs of 100 ± 5 (s = 4.47): a run at 112 against one at 100 is a 12% rise,
        // 7 points past a 5% threshold, which two runs' noise (4.47·√2 = 6.3) often makes.
        let past = [95.0, 100.0, 105.0, 100.0, 95.0, 105.0];
        let p = between_runs_p(&past, 100.0, 112.0, 0.05, true).unwrap();
        assert!(p > 0.1, "{p}");
        // Hand-computed: t = (12 − 5) / (4.472·√2) = 1.107, df 5: one-sided p = 0.159.
        assert!((p - 0.159).abs() < 0.005, "{p}");
        // 150 is far beyond the spread; faster is never worse.
        assert!(between_runs_p(&past, 100.0, 150.0, 0.05, true).unwrap() < 0.001);
        assert!(between_runs_p(&past, 100.0, 80.0, 0.05, true).unwrap() > 0.99);
        // A throughput: lower is worse.
        assert!(between_runs_p(&past, 100.0, 50.0, 0.05, false).unwrap() < 0.001);
        // Fewer than three past runs: no estimate.
        assert_eq!(between_runs_p(&past[..2], 100.0, 150.0, 0.05, true), None);
    }

    #[test]
    fn a_regression_is_beyond_its_threshold_and_beyond_the_noise() {
        let dir = std::env::temp_dir().join(format!("benchplan-cmp-{}", std::process::id()));
        let (b, c) = (dir.join("b"), dir.join("c"));
        for d in [&b, &c] {
            std::fs::create_dir_all(d).unwrap();
        }
        let write = |d: &Path, r: &Map<String, Value>| {
            std::fs::write(d.join("c.json"), serde_json::to_string(r).unwrap()).unwrap();
        };
        let cfg = Report {
            compare_metrics: Some(vec!["p99_ttft_ms".into()]),
            ..Report::default()
        };
        let base = result(|i| 0.050 + i as f64 * 1e-4, 69.9);
        write(&b, &base);
        // The same samples, a p99 20% higher (one slow request): beyond 5%, not beyond
        // the noise.
        write(&c, &result(|i| 0.050 + i as f64 * 1e-4, 83.9));
        let cmp = compare_dirs(&b, &c, &cfg).unwrap();
        let row = &cmp.rows[0];
        assert!(row.delta_pct > 19.0 && !row.regression, "{row:?}");
        assert!(row.p_value.unwrap() > 0.5);
        // Every request 30% slower: a regression.
        write(&c, &result(|i| (0.050 + i as f64 * 1e-4) * 1.3, 90.9));
        let cmp = compare_dirs(&b, &c, &cfg).unwrap();
        assert!(
            cmp.rows[0].regression && cmp.rows[0].p_value.unwrap() < 1e-4,
            "{:?}",
            cmp.rows[0]
        );
        assert_eq!(cmp.regressions, 1);
        // A service's own threshold: 30% for this one, so +30% (p < 1e-4) is within it.
        let mut lenient = cfg.clone();
        lenient
            .service_thresholds
            .insert("slow".into(), crate::plan::units::Percent(0.35));
        let mut slow_svc = result(|i| (0.050 + i as f64 * 1e-4) * 1.3, 90.9);
        slow_svc["benchplan"]["service"] = serde_json::json!("slow");
        write(&c, &slow_svc);
        assert!(!compare_dirs(&b, &c, &lenient).unwrap().rows[0].regression);
        // Without samples (a plain vLLM result), the threshold alone decides, as before.
        let mut plain = base.clone();
        plain.remove("benchplan");
        write(&b, &plain);
        let mut slow = plain.clone();
        slow.insert("p99_ttft_ms".into(), serde_json::json!(83.9));
        write(&c, &slow);
        let cmp = compare_dirs(&b, &c, &cfg).unwrap();
        assert!(cmp.rows[0].regression && cmp.rows[0].p_value.is_none());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn latency_keys_and_slugs() {
        assert!(
            is_latency_key("p99_ttft_ms")
                && is_latency_key("p99.9_itl_ms")
                && is_latency_key("mean_e2el_ms")
        );
        assert!(!is_latency_key("std_ttft_ms") && !is_latency_key("duration"));
        assert_eq!(slug("sim-c4-0123456789ab"), "sim-c4");
        assert_eq!(slug("openai-chat-infqps"), "openai-chat-infqps");
    }
}

#[cfg(test)]
mod natural_order_tests {
    use super::natural_cmp;

    #[test]
    fn numbers_in_names_sort_by_value() {
        let mut v = vec![
            "x-c32.json",
            "x-c1.json",
            "x-c8.json",
            "x-c08b.json",
            "a.json",
        ];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            v,
            [
                "a.json",
                "x-c1.json",
                "x-c8.json",
                "x-c08b.json",
                "x-c32.json"
            ]
        );
    }
}
