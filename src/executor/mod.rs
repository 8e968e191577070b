//! `benchplan run`: every case of a plan into a new
//! `bench_results/batch/batch_YYYYMMDD_HHMMSS/` folder, persisted as each case
//! finishes (whole files only), then summary.csv and report.md, an optional
//! comparison with a baseline run, JUnit XML, and an exit code.
//!
//! Services are brought up before their cases ([`services`]): one that does not come
//! up fails its own cases and the others run. Ctrl-C drains the running cases (their
//! partial results are kept), starts no new one, and still writes the report.

pub mod case;
mod control;
pub mod folder;
pub mod parallel;
pub mod resume;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Map, Value, json};

use crate::exit::Exit;
use crate::files::write_atomic;
use crate::planner::Planned;
use crate::report::view::{Judged, ReportView, ServiceView, axis_values};
use crate::results::lock::FolderLock;
use crate::results::manifest::Manifest;
use crate::results::read::CaseFile;
use crate::timefmt;
use case::Status;
pub use control::RunControl;
use indexmap::IndexMap;

/// How `run` was asked to behave beyond the plan.
#[derive(Debug, Clone, Default)]
pub struct RunSettings {
    pub results_dir: Option<PathBuf>,
    pub template: Option<PathBuf>,
    /// A minijinja template replacing the built-in report.html.
    pub html_template: Option<PathBuf>,
    /// Draw no charts (`--no-charts`, or `report.charts = false`).
    pub no_charts: bool,
    /// The command line, secrets redacted.
    pub command: String,
    pub progress: bool,
    /// Without a terminal: a plain progress line per running case this often.
    pub progress_lines: Option<std::time::Duration>,
    /// No progress lines on stderr (the log file still gets them).
    pub quiet: bool,
    /// Finish an earlier run in this folder instead of starting a new one.
    pub resume: Option<PathBuf>,
    /// With `resume`: the `--only` patterns whose cases run again even if finished.
    pub rerun: Vec<String>,
    pub junit: Option<PathBuf>,
    /// When this process runs one shard of the plan (its cases are already the shard's).
    pub shard: Option<ShardRun>,
}

impl RunSettings {
    /// The report templates and chart setting of the run.
    pub fn templates(&self) -> crate::report::write::Templates {
        crate::report::write::Templates {
            template: self.template.clone(),
            html_template: self.html_template.clone(),
            no_charts: self.no_charts,
        }
    }
}

/// What a shard's manifest records so a merge can check it against its siblings.
#[derive(Debug, Clone)]
pub struct ShardRun {
    pub shard: crate::planner::shard::Shard,
    /// The hash of the whole plan's cases, the same on every shard.
    pub plan_hash: String,
    pub all_cases: usize,
    /// Every case id of the whole plan, in plan order (a merge checks coverage with it).
    pub all_ids: Vec<String>,
}

fn host() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| std::env::var("HOSTNAME").unwrap_or_default())
}

/// The plan's identity for resume: its resolved cases, not its formatting.
pub fn plan_hash(planned: &Planned) -> String {
    let ids: Vec<&str> = planned.cases.iter().map(|c| c.id.as_str()).collect();
    format!("{:016x}", crate::hash::fnv1a64(ids.join("\n").as_bytes()))
}

/// How the plan judges its cases: its name, its SLOs and floors (the plan's and each
/// service's) and the report settings that decide a regression. `merge` refuses
/// shards that differ here (naming what), so every case is judged by one plan.
pub fn judging(planned: &Planned) -> Value {
    let slos = |list: &[(crate::slo::Slo, String)]| -> Vec<String> {
        list.iter()
            .map(|(s, _)| format!("{} {} {}", s.key, s.op.symbol(), s.threshold))
            .collect()
    };
    let r = &planned.plan.report;
    json!({
        "plan": planned.plan.name,
        "slo": slos(&planned.slos),
        "service_slo": planned.service_slos.iter().map(|(n, l)| (n.clone(), json!(slos(l)))).collect::<Map<String, Value>>(),
        "optimize_slo": slos(&planned.optimize_slos),
        "report": {
            "baseline": r.baseline, "regression_threshold": r.regression_threshold,
            "thresholds": r.thresholds, "service_thresholds": r.service_thresholds,
            "allow_unmatched": r.allow_unmatched, "compare_metrics": r.compare_metrics,
            "significance": r.significance,
        },
    })
}

/// A short hash of [`judging`] for the manifest.
pub fn judging_hash(judging: &Value) -> String {
    format!(
        "{:016x}",
        crate::hash::fnv1a64(judging.to_string().as_bytes())
    )
}

/// Runs a validated plan. Returns the exit code.
pub fn run(planned: &Planned, settings: &RunSettings) -> Exit {
    let any_sim = planned.plan.services.values().any(|s| s.is_sim());
    crate::load::runtime(any_sim || planned.plan.execution.parallel > 1)
        .block_on(run_async(planned, settings))
}

/// The run folder: a resumed one with what it finished, or a new one.
fn run_folder(
    planned: &Planned,
    settings: &RunSettings,
    started: SystemTime,
) -> Result<(PathBuf, resume::Finished, FolderLock), Exit> {
    let hash = plan_hash(planned);
    let lock = |d: &Path| match crate::results::lock::acquire(d) {
        Ok((l, note)) => {
            if let Some(n) = note {
                eprintln!("note: {n}");
            }
            Ok(l)
        }
        Err(e) => {
            eprintln!("error: {e}");
            // In use by another run: a usage conflict, nothing sent. Anything else is
            // the folder itself (read-only, missing).
            Err(if e.contains("is in use") {
                Exit::BadPlan
            } else {
                Exit::Runtime
            })
        }
    };
    if let Some(d) = &settings.resume {
        // A live run holds the folder: say so before reading a manifest it may not
        // have written yet (a run takes its lock first).
        if crate::results::lock::holder(d).is_some() {
            lock(d)?;
        }
        let ids: Vec<&str> = planned.cases.iter().map(|c| c.id.as_str()).collect();
        return match resume::finished_cases(d, &hash, &ids) {
            Ok(mut found) => {
                let held = lock(d)?;
                let before = found.len();
                if !settings.rerun.is_empty() {
                    found.retain(|id, _| {
                        !planned
                            .cases
                            .iter()
                            .any(|c| c.id == *id && crate::planner::only::picks(&settings.rerun, c))
                    });
                }
                eprintln!(
                    "resuming {}: {} of {} cases already finished{}",
                    d.display(),
                    before,
                    planned.cases.len(),
                    if before > found.len() {
                        format!(", {} of them run again (--only)", before - found.len())
                    } else {
                        String::new()
                    }
                );
                Ok((d.clone(), found, held))
            }
            Err(e) => {
                eprintln!("error: cannot resume {}: {e}", d.display());
                Err(Exit::BadPlan)
            }
        };
    }
    let base = settings
        .results_dir
        .clone()
        .unwrap_or_else(|| planned.plan.execution.results_dir.clone());
    match folder::new_run_dir(&base.join("batch"), started) {
        Ok(d) => {
            let held = lock(&d)?;
            Ok((d, resume::Finished::new(), held))
        }
        Err(e) => {
            eprintln!(
                "error: cannot create a run folder under {}: {e}",
                base.join("batch").display()
            );
            Err(Exit::Runtime)
        }
    }
}

async fn run_async(planned: &Planned, settings: &RunSettings) -> Exit {
    let plan = &planned.plan;
    let started = SystemTime::now();
    // Before the folder is taken: a run holds its lock and has no manifest in between.
    let commit = crate::trend::history::commit_of(&planned.source.dir);
    // The lock is held until the run ends (see `results::lock`).
    let (dir, done, _lock) = match run_folder(planned, settings, started) {
        Ok(x) => x,
        Err(code) => return code,
    };
    parallel::log(&dir, &format!("results: {}", dir.display()), settings.quiet);

    let ctl = Arc::new(RunControl::default());
    ctl.listen(
        "no new case starts; the running ones stop sending and keep what finishes (a second signal abandons it)",
    );

    let pending: Vec<&crate::planner::Case> = planned
        .cases
        .iter()
        .filter(|c| !done.contains_key(&c.id))
        .collect();
    let services = crate::service::fleet::prepare(planned, &pending).await;
    let versions = crate::service::fleet::versions(&services).await;
    let service_views = service_views(planned, &services);

    if settings.resume.is_none() {
        if let Err(e) = folder::write_plan_copies(&dir, planned) {
            eprintln!("error: {e}");
            return Exit::Runtime;
        }
    }
    let mut manifest = first_manifest(
        planned,
        settings,
        started,
        &service_views,
        &versions,
        &done,
        commit,
    );
    if let Err(e) = manifest.write(&dir) {
        eprintln!("error: cannot write the manifest: {e}");
        return Exit::Runtime;
    }

    let scope = parallel::Scope {
        planned,
        services: &services,
        done: &done,
        dir: &dir,
        progress: case::Progress {
            bar: settings.progress,
            lines: settings.progress_lines,
        },
        quiet: settings.quiet,
        ctl: &ctl,
    };
    let outcomes = parallel::run_all(scope, &mut manifest).await;

    let finished = SystemTime::now();
    manifest.finished = Some(timefmt::iso(finished));
    manifest.interrupted = Some(ctl.interrupted());
    for (i, (case, o)) in planned.cases.iter().zip(&outcomes).enumerate() {
        manifest.cases[i] = parallel::manifest_entry(&case.id, &case.service, o);
        // The matrix values, so `benchplan report` can show them as columns again.
        manifest.cases[i].axes = axis_values(case.assignments.iter().map(|a| (&*a.key, &a.value)));
    }
    // What the report shows above its cases, kept so `report DIR` shows it again; the
    // comparison and the trend join it once judged (below).
    let head = Judged {
        description: plan.description.clone(),
        slos: slo_lines(planned),
        have_slos: planned.user_slos > 0,
        comparison: None,
        trend: None,
    };
    manifest.judged = Some(json!(head));
    let manifest_failed = match manifest.write(&dir) {
        Ok(()) => false,
        Err(e) => {
            eprintln!(
                "error: cannot write {}: {e}",
                dir.join(crate::results::manifest::FILE).display()
            );
            true
        }
    };
    let runtime_error = print_problems(planned, &outcomes);
    let results: IndexMap<String, Map<String, Value>> = planned
        .cases
        .iter()
        .zip(outcomes)
        .filter_map(|(c, o)| o.result.map(|r| (c.id.clone(), r)))
        .collect();
    // The one view builder, from the manifest and results `report DIR` reads back.
    let (mut report, rows) = match ReportView::from_run(&dir, Some(&manifest), &results) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Runtime;
        }
    };
    let (regression, history_failed) = judge(planned, settings, &dir, &mut report);
    let reports = crate::report::write::write_reports(
        &dir,
        &report,
        &rows,
        &settings.templates(),
        &planned.source.dir,
    );
    if reports == Exit::BadPlan {
        return reports;
    }
    // JUnit whatever happened to the other outputs: a CI job reads it on its own.
    let mut junit_failed = false;
    if let Some(path) = &settings.junit {
        if let Err(e) = write_atomic(path, crate::report::junit::junit_xml(&report).as_bytes()) {
            eprintln!("error: cannot write {}: {e}", path.display());
            junit_failed = true;
        }
    }
    if ctl.halted() {
        eprintln!("error: the run stopped early: a case's result could not be written");
    }
    let write_error =
        reports != Exit::Ok || junit_failed || manifest_failed || history_failed || ctl.halted();
    // The newest run, for `baseline = "bench_results/batch/latest"`.
    if let Some(w) = crate::files::point_latest(&dir) {
        eprintln!("warning: {w}");
    }
    eprintln!("report: {}", dir.join("report.md").display());
    // What was judged, so `report DIR` rebuilds the same verdict (see `Judged`).
    manifest.judged = Some(json!(Judged::of(&report, planned.user_slos > 0)));
    verdict(
        &report,
        regression,
        runtime_error || write_error,
        &ctl,
        &mut manifest,
        &dir,
        planned.plan.report.exit_on_inconclusive,
    )
}

/// The run judged against the plan's baseline and appended to its history (not by a
/// shard: `merge` does that once for all of them); whether either found a regression,
/// and whether the history could not be written.
fn judge(
    planned: &Planned,
    settings: &RunSettings,
    dir: &Path,
    report: &mut ReportView,
) -> (bool, bool) {
    let mut regression = false;
    let mut history_failed = false;
    if let Some(b) = &planned.plan.report.baseline {
        if b.is_dir() {
            // The history's past runs, when the plan keeps one: the spread between runs.
            let past = planned
                .plan
                .report
                .history
                .as_deref()
                .filter(|h| h.is_file())
                .map(crate::trend::history::past_values)
                .unwrap_or_default();
            match crate::report::compare::compare_with(b, dir, &planned.plan.report, &past) {
                Ok(c) => {
                    regression = c.regressions > 0;
                    report.comparison = Some(c);
                }
                Err(e) => eprintln!("warning: cannot compare with baseline {}: {e}", b.display()),
            }
        } else {
            eprintln!(
                "warning: baseline {} does not exist yet; no comparison this time",
                b.display()
            );
        }
    }
    // A shard's cases reach the history through `merge`, once, with the others.
    if let Some(h) = planned
        .plan
        .report
        .history
        .as_ref()
        .filter(|_| settings.shard.is_none())
    {
        match record_history(dir, h, &planned.plan.report) {
            Ok(t) => {
                regression |= t.regressions > 0;
                report.trend = Some(t);
            }
            Err(e) => {
                eprintln!("error: history {}: {e}", h.display());
                history_failed = true;
            }
        }
    }
    (regression, history_failed)
}

/// The exit code by the one precedence rule, printed as the verdict line and recorded
/// in the manifest. `failed_to_run`: a case could not be measured or an output not
/// written.
fn verdict(
    report: &ReportView,
    regression: bool,
    failed_to_run: bool,
    ctl: &RunControl,
    manifest: &mut Manifest,
    dir: &Path,
    exit_on_inconclusive: bool,
) -> Exit {
    let slo_failures = report.slo_failures;
    let regressions = report.comparison.as_ref().map_or(0, |c| c.regressions);
    let trend_regressions = report.trend.as_ref().map_or(0, |t| t.regressions);
    let failed = report
        .cases
        .iter()
        .filter(|c| c.status != "ok" && c.status != "skipped")
        .count();
    let mut code = Exit::of_findings(failed_to_run, slo_failures, usize::from(regression));
    // Worse only on a busy machine: 0, or 5 when the plan asks (`exit_on_inconclusive`).
    let busy_verdicts = report.comparison.as_ref().map_or(0, |c| {
        c.rows
            .iter()
            .filter(|r| {
                r.inconclusive
                    .as_deref()
                    .is_some_and(|w| w.contains("busy"))
            })
            .count()
    }) + report.trend.as_ref().map_or(0, |t| t.inconclusive.len());
    if busy_verdicts > 0 && exit_on_inconclusive {
        code = code.worst(Exit::Inconclusive);
    }
    if ctl.interrupted() {
        code = code.worst(ctl.interrupt_exit());
    }
    // Every verdict in one line, whichever decides the exit code.
    let trend = if report.trend.is_some() {
        format!(", {trend_regressions} trend regression(s)")
    } else {
        String::new()
    };
    eprintln!(
        "verdict: {} case(s), {failed} not measured, {slo_failures} SLO failure(s), {regressions} regression(s){trend}: exit {}",
        report.cases.len(),
        code.code()
    );
    // The manifest carries the verdict too, for whatever reads the folder later.
    let warnings: usize = report.cases.iter().map(|c| c.warnings.len()).sum();
    manifest.verdict = Some(crate::results::manifest::Verdict {
        pass: code == Exit::Ok,
        exit: code.code(),
        cases: report.cases.len(),
        not_measured: failed,
        slo_failures,
        regressions,
        trend_regressions,
        warnings: Some(warnings),
    });
    if let Err(e) = manifest.write(dir) {
        eprintln!(
            "error: cannot write {}: {e}",
            dir.join(crate::results::manifest::FILE).display()
        );
        return code.worst(Exit::Runtime);
    }
    code
}

/// Each service of the plan as the report shows it: resolved, or why it could not be.
fn service_views(
    planned: &Planned,
    services: &crate::service::fleet::Services,
) -> Vec<ServiceView> {
    use crate::service::fleet::Readiness;
    let plan = &planned.plan;
    let kind = |n: &str| {
        if plan.services[n].is_sim() {
            "simulator".to_string()
        } else {
            "external".to_string()
        }
    };
    plan.services
        .keys()
        .filter_map(|n| services.get(n).map(|r| (n, r)))
        .map(|(n, r)| match r {
            Readiness::Ready(r) => ServiceView {
                name: n.clone(),
                kind: kind(n),
                base_url: r.base_url.to_string(),
                model: r.model.clone(),
                error: None,
            },
            Readiness::WithItsCases => ServiceView {
                name: n.clone(),
                kind: kind(n),
                base_url: "started with its cases".into(),
                model: plan.services[n].model.clone().unwrap_or_default(),
                error: None,
            },
            Readiness::Unavailable(e) => ServiceView {
                name: n.clone(),
                kind: kind(n),
                base_url: plan.services[n]
                    .base_url
                    .as_deref()
                    .map(crate::redact::url)
                    .unwrap_or_default(),
                model: plan.services[n].model.clone().unwrap_or_default(),
                error: Some(e.clone()),
            },
        })
        .collect()
}

/// The manifest a run starts with: the tool, plan, command, host, services with their
/// versions, every case (finished ones from a resumed folder already `ok`) and, for a
/// shard, which share of the plan it holds.
fn first_manifest(
    planned: &Planned,
    settings: &RunSettings,
    started: SystemTime,
    service_views: &[ServiceView],
    versions: &std::collections::HashMap<String, Value>,
    done: &resume::Finished,
    commit: Option<String>,
) -> Manifest {
    use crate::results::manifest::{CaseEntry, ServiceEntry, ShardEntry};
    let plan = &planned.plan;
    let judging = judging(planned);
    let mut manifest = Manifest {
        tool: "benchplan".into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        plan: plan.name.clone(),
        plan_hash: plan_hash(planned),
        judging_hash: Some(judging_hash(&judging)),
        judging: Some(judging),
        command: settings.command.clone(),
        host: Some(host()),
        commit,
        started: Some(timefmt::iso(started)),
        services: service_views
            .iter()
            .map(|s| {
                let entry = ServiceEntry {
                    kind: s.kind.clone(),
                    base_url: s.base_url.clone(),
                    model: s.model.clone(),
                    version: versions.get(&s.name).cloned(),
                    error: s.error.clone(),
                };
                (s.name.clone(), entry)
            })
            .collect(),
        cases: planned
            .cases
            .iter()
            .map(|c| {
                let finished = done.contains_key(&c.id);
                CaseEntry {
                    id: c.id.clone(),
                    service: c.service.clone(),
                    status: if finished { "ok" } else { "pending" }.into(),
                    file: finished.then(|| format!("{}.json", c.id)),
                    ..CaseEntry::default()
                }
            })
            .collect(),
        ..Manifest::default()
    };
    if let Some(sr) = &settings.shard {
        // Self-describing: which plan, which share of it, and the cases it owns.
        manifest.plan_hash = sr.plan_hash.clone();
        manifest.shard = Some(ShardEntry {
            index: sr.shard.index as u64,
            count: sr.shard.count as u64,
            by: sr.shard.by.as_str().into(),
            plan_cases: sr.all_cases,
            plan_case_ids: sr.all_ids.clone(),
            cases: planned.cases.iter().map(|c| c.id.clone()).collect(),
            plan_repeats: plan.execution.repeats.max(1),
            // Which runs of each case are here: `{id}.rep{k}.json` for each k.
            repeats: (sr.shard.by == crate::planner::shard::ShardBy::Repeat).then(|| {
                planned
                    .cases
                    .iter()
                    .map(|c| (c.id.clone(), c.repeats.clone().unwrap_or_default()))
                    .collect()
            }),
        });
    }
    manifest
}

/// Prints each case's problems and its result's warnings; whether any case failed at
/// run time.
fn print_problems(planned: &Planned, outcomes: &[case::CaseOutcome]) -> bool {
    let mut runtime_error = false;
    for (case, o) in planned.cases.iter().zip(outcomes) {
        runtime_error |=
            matches!(o.status, Status::Failed | Status::TimedOut) || !o.problems.is_empty();
        for p in &o.problems {
            eprintln!("error: case {}: {}", case.id, crate::escape::console(p));
        }
        if let Some(r) = &o.result {
            for w in CaseFile::new(r).warnings() {
                eprintln!("warning: case {}: {}", case.id, crate::escape::console(&w));
            }
        }
    }
    runtime_error
}

/// The SLOs the plan judges, as the report's head lists them (`p99_ttft <= 500ms`, a
/// service's own marked so).
fn slo_lines(planned: &Planned) -> Vec<String> {
    let line =
        |s: &crate::slo::Slo| format!("{} {} {}{}", s.key, s.op.symbol(), s.threshold, s.unit());
    planned
        .slos
        .iter()
        .map(|(s, _)| line(s))
        .chain(planned.service_slos.iter().flat_map(|(name, own)| {
            own.iter()
                .map(move |(s, _)| format!("{} (service {name})", line(s)))
        }))
        .collect()
}

/// Appends the run's cases to the plan's history and judges the history's trend
/// (Otava's defaults; a regression among the newest ten runs counts).
pub fn record_history(
    dir: &Path,
    history: &Path,
    report: &crate::plan::Report,
) -> Result<crate::report::view::TrendVerdict, String> {
    use crate::trend::{analyze, history as h};
    let metrics = crate::report::compare::compared_metrics(report);
    let mut entries = h::entries_of(dir, &metrics)?;
    // Judged with this run appended; the run's lines then record what was judged
    // regressed, so the episode outlives the statistics that found it.
    let mut all = if history.exists() {
        h::read(history)?
    } else {
        Vec::new()
    };
    all.extend(entries.iter().cloned());
    let mut t = analyze::analyze(&all, &analyze::TrendSettings::of_plan(report));
    // A regression this run confirms while its machine was busy may be the machine's:
    // inconclusive, with the figures, and not recorded as an episode.
    let busy: std::collections::HashMap<String, String> = crate::report::compare::load_results(dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|(id, r)| {
            let why = CaseFile::new(r).machine_busy(report.busy_thresholds())?;
            Some((id.clone(), why))
        })
        .collect();
    let mut inconclusive = Vec::new();
    for s in t.series.iter_mut().filter(|s| s.regressed) {
        if let Some(why) = busy.get(&s.case) {
            inconclusive.extend(crate::trend::render::line(s).map(|l| {
                format!("{l}: inconclusive: the measuring machine was busy for this run: {why}")
            }));
            s.regressed = false;
            t.regressions -= 1;
        }
    }
    analyze::flag(&t, &mut entries);
    h::append(history, &entries)?;
    Ok(crate::report::view::TrendVerdict {
        history: history.display().to_string(),
        runs: t.runs,
        series: t.series.len(),
        regressions: t.regressions,
        lines: crate::trend::render::regressions(&t),
        suspects: crate::trend::render::suspects(&t),
        recovered: crate::trend::render::recovered(&t),
        inconclusive,
    })
}
