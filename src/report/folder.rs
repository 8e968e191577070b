//! The one builder of a report's view ([`ReportView::from_run`]): from a run's manifest
//! and its result files, whether `run` holds them in memory or `report DIR` and `merge`
//! read them back ([`from_folder`]); so a folder renders the same report either way.

use std::path::Path;

use indexmap::IndexMap;
use serde_json::{Map, Value};

use super::compare::load_results;
use super::csv::Row;
use super::view::{Judged, ReportView, RunHead, ServiceView, case_view};
use crate::results::manifest::Manifest;
use crate::results::read::CaseFile;

/// The view of a run folder as `report` and `merge` build it: the cases in its
/// manifest's order with their failures, what the run judged (`Judged`), or for a
/// folder of plain `vllm bench serve` results, its files by name.
pub fn from_folder(dir: &Path) -> Result<(ReportView, Vec<Row>), String> {
    let results = load_results(dir)?;
    let manifest = Manifest::read_if_any(dir)?;
    ReportView::from_run(dir, manifest.as_ref(), &results)
}

impl ReportView {
    /// The view of run folder `dir` from its manifest (none for a folder of plain
    /// `vllm bench serve` results) and its results by case id: the cases in the
    /// manifest's order with their failures, and what the run judged (`Judged`).
    pub fn from_run(
        dir: &Path,
        manifest: Option<&Manifest>,
        results: &IndexMap<String, Map<String, Value>>,
    ) -> Result<(ReportView, Vec<Row>), String> {
        view_of(dir, manifest, results)
    }
}

fn view_of(
    dir: &Path,
    manifest: Option<&Manifest>,
    results: &IndexMap<String, Map<String, Value>>,
) -> Result<(ReportView, Vec<Row>), String> {
    let mut views = Vec::new();
    let mut rows = Vec::new();
    let axes_of = |id: &str| -> indexmap::IndexMap<String, String> {
        manifest
            .and_then(|m| m.case(id))
            .map(|c| c.axes.clone())
            .unwrap_or_default()
    };
    let listed: Vec<(String, String, Option<String>, Option<String>)> = match manifest {
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
            // Measured; its verdicts say OVERSATURATED.
            (Some(crate::results::manifest::OVERSATURATED), Some(_)) => "ok".to_string(),
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
        plan: manifest.and_then(|m| m.plan.as_deref()).map_or_else(
            || {
                dir.file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("results")
                    .to_string()
            },
            str::to_string,
        ),
        description: judged.as_ref().and_then(|j| j.description.clone()),
        started: span(true, manifest.and_then(|m| m.started.as_ref())),
        finished: span(false, manifest.and_then(|m| m.finished.as_ref())),
        command: manifest.map(|m| m.command.clone()).unwrap_or_default(),
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
