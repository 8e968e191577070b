//! `benchplan report DIR` and `benchplan compare BASE CAND`: reading finished runs.

use std::path::Path;

use crate::executor::RunSettings;
use crate::exit::Exit;
use crate::plan::Report;
use crate::plan::units::{Percent, parse_percent};
use crate::report::compare::{compare_dirs, load_results, markdown};
use crate::report::csv::Row;
use crate::report::view::{Judged, ReportView, RunHead, ServiceView, case_view};
use crate::report::write::write_reports;
use crate::results::manifest::Manifest;
use crate::results::read::CaseFile;

/// The view of a folder: its manifest's order and failures when it has one.
pub fn view_of(dir: &Path) -> Result<(ReportView, Vec<Row>), String> {
    let results = load_results(dir)?;
    let manifest = Manifest::read_if_any(dir)?;
    let mut views = Vec::new();
    let mut rows = Vec::new();
    let axes_of = |id: &str| -> indexmap::IndexMap<String, String> {
        manifest
            .as_ref()
            .and_then(|m| m.case(id))
            .map(|c| c.axes.clone())
            .unwrap_or_default()
    };
    let listed: Vec<(String, String, Option<String>, Option<String>)> = match manifest.as_ref() {
        Some(m) => m
            .cases
            .iter()
            .map(|c| {
                (
                    c.id.clone(),
                    c.service.clone(),
                    c.error.clone(),
                    Some(c.status.clone()).filter(|s| !s.is_empty()),
                )
            })
            .collect(),
        None => results
            .iter()
            .map(|(id, r)| {
                (
                    id.clone(),
                    CaseFile::new(r).model_id().unwrap_or("").to_string(),
                    None,
                    Some("ok".into()),
                )
            })
            .collect(),
    };
    if listed.is_empty() {
        return Err(format!("{} holds no result files", dir.display()));
    }
    for (id, service, error, status) in listed {
        let r = results.get(&id);
        // A killed run leaves `pending` cases: they did not fail, they never finished.
        let status = match (status.as_deref(), r) {
            (Some("pending") | None, None) => "unfinished".to_string(),
            (Some(s), _) => s.to_string(),
            (None, Some(_)) => "ok".to_string(),
        };
        let error = match (&error, r, status.as_str()) {
            (Some(e), _, _) => Some(e.clone()),
            (None, None, "unfinished") => {
                Some("unfinished: the run stopped before this case ended".into())
            }
            (None, None, _) => Some("no result file".into()),
            (None, Some(_), _) => None,
        };
        let mut view = case_view(&id, &service, &status, r, error);
        view.axes = axes_of(&id);
        views.push(view);
        rows.push(Row {
            id: id.clone(),
            service,
            status,
            result: r.cloned(),
        });
    }
    // What the run judged beside its cases, as it recorded it (see `Judged`).
    let judged: Option<Judged> = manifest
        .as_ref()
        .and_then(|m| m.judged.clone())
        .and_then(|j| serde_json::from_value(j).ok());
    let have_slos = judged.as_ref().map_or_else(
        || views.iter().any(|v| v.slo_pass.is_some()),
        |j| j.have_slos,
    );
    let slos: Vec<String> =
        views
            .iter()
            .find(|v| !v.verdicts.is_empty())
            .map_or_else(Vec::new, |v| {
                v.verdicts
                    .iter()
                    .map(|x| format!("{} {}", x.key, x.target))
                    .collect()
            });
    // A folder of plain `vllm bench serve` results has no manifest: its services are
    // the models the files name, and its time span the files' `date`s.
    let services = if manifest.is_none() {
        let mut seen: Vec<ServiceView> = Vec::new();
        for r in results.values() {
            let model = CaseFile::new(r).model_id().unwrap_or("");
            if !model.is_empty() && !seen.iter().any(|v| v.name == model) {
                seen.push(ServiceView {
                    name: model.to_string(),
                    kind: "vllm bench serve results".into(),
                    base_url: "-".into(),
                    model: model.to_string(),
                    error: None,
                });
            }
        }
        seen
    } else {
        manifest
            .iter()
            .flat_map(|m| &m.services)
            .map(|(name, m)| ServiceView {
                name: name.clone(),
                kind: m.kind.clone(),
                base_url: m.base_url.clone(),
                model: m.model.clone(),
                error: m.error.clone(),
            })
            .collect()
    };
    let mut dates: Vec<&str> = results
        .values()
        .filter_map(|r| CaseFile::new(r).date())
        .collect();
    dates.sort_unstable();
    let span = |first: bool, recorded: Option<&String>| {
        if let Some(t) = recorded.filter(|t| !t.is_empty()) {
            return t.clone();
        }
        let d = if first { dates.first() } else { dates.last() };
        d.map_or_else(String::new, |d| d.to_string())
    };
    let head = RunHead {
        plan: manifest
            .as_ref()
            .and_then(|m| m.plan.as_deref())
            .map_or_else(
                || {
                    dir.file_name()
                        .and_then(|n| n.to_str())
                        .unwrap_or("results")
                        .to_string()
                },
                str::to_string,
            ),
        description: judged.as_ref().and_then(|j| j.description.clone()),
        started: span(true, manifest.as_ref().and_then(|m| m.started.as_ref())),
        finished: span(false, manifest.as_ref().and_then(|m| m.finished.as_ref())),
        command: manifest
            .as_ref()
            .map(|m| m.command.clone())
            .unwrap_or_default(),
        services,
        slos: judged.as_ref().map_or(slos, |j| j.slos.clone()),
        folder: Some(dir.display().to_string()),
    };
    let mut view = ReportView::assemble(head, views, have_slos);
    if let Some(j) = judged {
        view.comparison = j.comparison;
        view.trend = j.trend;
    }
    Ok((view, rows))
}

/// What a run folder's manifest says was judged that its `judged` record cannot give
/// back (a run written by an older benchplan): said, never rebuilt as a pass.
fn not_rebuilt(dir: &Path) -> Vec<String> {
    let Ok(Some(m)) = Manifest::read_if_any(dir) else {
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
fn verdict_exit(dir: &Path, view: &ReportView) -> Exit {
    let recorded = Manifest::read_if_any(dir)
        .ok()
        .flatten()
        .and_then(|m| m.verdict)
        .map(|v| i64::from(v.exit));
    let mut code = Exit::Ok;
    let regressions = view.comparison.as_ref().map_or(0, |c| c.regressions)
        + view.trend.as_ref().map_or(0, |t| t.regressions);
    if regressions > 0 {
        code = code.worst(Exit::Regression);
    }
    if view.slo_failures > 0 {
        code = code.worst(Exit::SloViolated);
    }
    if !view.failed_cases.is_empty() {
        code = code.worst(Exit::Runtime);
    }
    match recorded.and_then(Exit::from_code) {
        Some(r) if r != code => r,
        _ => code,
    }
}

/// `benchplan report DIR [--out OUT]`: the report of a run folder rebuilt, verdict and
/// all, into the folder (a benchplan run folder) or into `out`. A folder benchplan did
/// not write (plain `vllm bench serve` results) is written into only when `out` names
/// it. The exit code is the verdict's, as the run's was.
pub fn run(dir: &Path, out: Option<&Path>, settings: RunSettings, format: &str) -> Exit {
    let (view, rows) = match view_of(dir) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadPlan;
        }
    };
    let ours = dir.join(crate::results::manifest::FILE).is_file();
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
        for what in not_rebuilt(dir) {
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
    let v = verdict_exit(dir, &view);
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

pub fn compare(base: &Path, cand: &Path, threshold: &str, per_metric: &[String]) -> Exit {
    let mut cfg = Report::default();
    match parse_percent(threshold) {
        Ok(t) => cfg.regression_threshold = Percent(t),
        Err(e) => {
            eprintln!("error: --threshold: {e}");
            return Exit::BadPlan;
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
