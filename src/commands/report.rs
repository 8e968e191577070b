//! `benchplan report DIR` and `benchplan compare BASE CAND`: reading finished runs.

use std::path::Path;

use crate::executor::RunSettings;
use crate::exit::Exit;
use crate::plan::Report;
use crate::plan::units::{Percent, parse_percent};
use crate::report::compare::{compare_dirs, markdown};
use crate::report::csv::Row;
use crate::report::view::ReportView;
use crate::report::write::write_reports;
use crate::results::manifest::Manifest;

/// What a run folder's manifest says was judged that its `judged` record cannot give
/// back (a run written by an older benchplan): said, never rebuilt as a pass.
fn not_rebuilt(manifest: Option<&Manifest>) -> Vec<String> {
    let Some(m) = manifest else {
        return Vec::new();
    };
    let (None, Some(v)) = (&m.judged, &m.verdict) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if v.regressions > 0 {
        out.push(format!(
            "the baseline comparison ({} regression(s))",
            v.regressions
        ));
    }
    if v.trend_regressions > 0 {
        out.push(format!(
            "the history's trend ({} regression(s))",
            v.trend_regressions
        ));
    }
    out
}

/// The exit code a report's verdict gives, by run's precedence rule (runtime, SLO,
/// regression); the run's own recorded exit wins where it differs (a signal).
fn verdict_exit(manifest: Option<&Manifest>, view: &ReportView) -> Exit {
    let regressions = view.comparison.as_ref().map_or(0, |c| c.regressions)
        + view.trend.as_ref().map_or(0, |t| t.regressions);
    let rebuilt = Exit::of_findings(
        !view.failed_cases.is_empty(),
        view.slo_failures,
        regressions,
    );
    manifest
        .and_then(|m| m.verdict.as_ref())
        .and_then(|v| Exit::from_code(v.exit.into()))
        .unwrap_or(rebuilt)
}

/// `benchplan report DIR [--out OUT]`: the report of a run folder rebuilt, verdict and
/// all, into the folder (a benchplan run folder) or into `out`. A folder benchplan did
/// not write (plain `vllm bench serve` results) is written into only when `out` names
/// it. The exit code is the verdict's, as the run's was.
pub fn run(dir: &Path, out: Option<&Path>, settings: RunSettings, format: &str) -> Exit {
    let (view, rows) = match crate::report::folder::from_folder(dir) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadPlan;
        }
    };
    // from_folder has read it already: a damaged one was refused there.
    let manifest = Manifest::read_if_any(dir).ok().flatten();
    let ours = manifest.is_some();
    let target = match out {
        Some(o) => o.to_path_buf(),
        None if ours || format != "md" => dir.to_path_buf(),
        None => {
            eprintln!(
                "error: {} is not a benchplan run folder (no manifest.json), and the report would add report.md, report.html, charts/, summary.csv and metrics.prom to it; give --out DIR to write them there (or --format csv|json for stdout)",
                dir.display()
            );
            return Exit::BadPlan;
        }
    };
    if format == "md" {
        if let Err(e) = std::fs::create_dir_all(&target) {
            eprintln!("error: cannot create {}: {e}", target.display());
            return Exit::Runtime;
        }
        for what in not_rebuilt(manifest.as_ref()) {
            eprintln!(
                "warning: {what} cannot be rebuilt: the run folder was written by an older benchplan that did not keep it; report.md shows the cases only, and the exit code is the run's"
            );
        }
    }
    let code = report_as(&target, &view, &rows, settings, format);
    if format == "md" && code.is_ok() {
        eprintln!("report: {}", target.join("report.md").display());
    }
    let unfinished = view
        .cases
        .iter()
        .filter(|c| c.status == "unfinished")
        .count();
    if code.is_ok() && unfinished > 0 {
        eprintln!(
            "error: {unfinished} case(s) never finished (the run was stopped); `benchplan run PLAN --resume {}` finishes them",
            dir.display()
        );
        return Exit::Runtime;
    }
    if !code.is_ok() || format != "md" {
        return code;
    }
    let v = verdict_exit(manifest.as_ref(), &view);
    if !v.is_ok() {
        eprintln!(
            "verdict: {} case(s), {} not measured, {} SLO failure(s), {} regression(s){}: exit {}",
            view.cases.len(),
            view.failed_cases.len(),
            view.slo_failures,
            view.comparison.as_ref().map_or(0, |c| c.regressions),
            view.trend.as_ref().map_or(String::new(), |t| format!(
                ", {} trend regression(s)",
                t.regressions
            )),
            v.code()
        );
    }
    v
}

fn report_as(
    dir: &Path,
    view: &ReportView,
    rows: &[Row],
    settings: RunSettings,
    format: &str,
) -> Exit {
    match format {
        "json" => {
            println!(
                "{}",
                serde_json::to_string_pretty(view).expect("view serialises")
            );
            Exit::Ok
        }
        "csv" => match crate::report::csv::summary_csv(rows) {
            Ok(c) => {
                print!("{c}");
                Exit::Ok
            }
            Err(e) => {
                eprintln!("error: {e}");
                Exit::Runtime
            }
        },
        "md" => write_reports(dir, view, rows, &settings.templates(), Path::new(".")),
        other => {
            eprintln!("error: unknown --format `{other}`; use md, csv or json");
            Exit::BadPlan
        }
    }
}

pub fn compare(
    base: &Path,
    cand: &Path,
    threshold: Option<&str>,
    per_metric: &[String],
    measure: Option<crate::plan::Measure>,
) -> Exit {
    // The plan's own gate when the candidate (else the baseline) folder carries it, so
    // `compare` judges as the nightly run did; the flags still win.
    let carried = [cand, base]
        .into_iter()
        .find_map(|d| crate::report::compare::plan_report_settings(d).map(|r| (d, r)));
    let mut cfg = match carried {
        Some((d, r)) => {
            eprintln!(
                "judged with the thresholds of the plan in {} (regression_threshold {:.1}%{})",
                d.display(),
                r.regression_threshold.0 * 100.0,
                if r.thresholds.is_empty() {
                    String::new()
                } else {
                    format!(", {} per-metric", r.thresholds.len())
                }
            );
            r
        }
        None => Report::default(),
    };
    if let Some(m) = measure {
        cfg.measure = m;
    }
    if let Some(threshold) = threshold {
        match parse_percent(threshold) {
            Ok(t) => cfg.regression_threshold = Percent(t),
            Err(e) => {
                eprintln!("error: --threshold: {e}");
                return Exit::BadPlan;
            }
        }
    }
    for m in per_metric {
        let Some((k, v)) = m.split_once('=') else {
            eprintln!("error: --metric-threshold `{m}` is not KEY=PCT");
            return Exit::BadPlan;
        };
        match parse_percent(v) {
            Ok(t) => {
                cfg.thresholds.insert(k.trim().to_string(), Percent(t));
            }
            Err(e) => {
                eprintln!("error: --metric-threshold {k}: {e}");
                return Exit::BadPlan;
            }
        }
    }
    match compare_dirs(base, cand, &cfg) {
        Ok(c) => {
            print!("{}", markdown(&c));
            if c.regressions > 0 {
                Exit::Regression
            } else {
                Exit::Ok
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Runtime
        }
    }
}
