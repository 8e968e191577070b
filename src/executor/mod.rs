//! `benchplan run`: every case of a plan into a
//! `bench_results/batch/batch_YYYYMMDD_HHMMSS/` folder, persisted as each case
//! finishes (whole files only), then summary.csv and report.md, an optional
//! comparison with a baseline run, JUnit XML, and an exit code.
//!
//! Services are resolved once before any case runs: simulators start in-process,
//! external ones must answer /v1/models with the model the plan names, so a dead or
//! wrong service stops the run with a clear error before traffic.

pub mod parallel;
pub mod resume;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Map, Value, json};

use crate::exit::Exit;
use crate::load::case::execute;
use crate::load::run::RunOptions;
use crate::load::target::{Resolved, resolve};
use crate::planner::{Case, Planned};
use crate::report::csv::Row;
use crate::report::view::{ReportView, ServiceView, case_view, recommend, verdicts};
use crate::results::vllm_json::{Header, result_json};
use crate::results::write::write_atomic;
use crate::timefmt;

/// How `run` was asked to behave beyond the plan.
#[derive(Debug, Clone, Default)]
pub struct RunSettings {
    pub results_dir: Option<PathBuf>,
    pub template: Option<PathBuf>,
    pub command: String,
    pub progress: bool,
    /// Finish an earlier run in this folder instead of starting a new one.
    pub resume: Option<PathBuf>,
    pub junit: Option<PathBuf>,
}

pub fn json_bytes(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).expect("JSON serialises");
    b.push(b'\n');
    b
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

/// Runs a validated plan. Returns the exit code.
pub fn run(planned: &Planned, settings: &RunSettings) -> Exit {
    let any_sim = planned.plan.services.values().any(|s| s.is_sim());
    crate::load::runtime(any_sim || planned.plan.execution.parallel > 1)
        .block_on(run_async(planned, settings))
}

/// One finished case: its result JSON, or why it has none.
pub type CaseOutcome = (Option<Map<String, Value>>, Option<String>);

/// Runs one case (all its repeats) and writes its result file(s).
pub async fn run_case(
    planned: &Planned,
    case: &Case,
    resolved: &Resolved,
    dir: &Path,
    progress: bool,
) -> CaseOutcome {
    let plan = &planned.plan;
    let svc = &plan.services[&case.service];
    let opts = RunOptions {
        progress,
        ..RunOptions::default()
    };
    let repeats = plan.execution.repeats.max(1);
    // Like vLLM's sweep: start each case with a cold prefix cache, so a case does not
    // measure the prompts of the one before. Best effort: not every server has the endpoint.
    let reset = resolved
        .client
        .post(format!("{}/reset_prefix_cache", resolved.base_url))
        .headers(resolved.headers.clone())
        .timeout(std::time::Duration::from_secs(10))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success());
    let mut results: Vec<Map<String, Value>> = Vec::new();
    for rep in 1..=repeats {
        let outcome = match plan.execution.timeout {
            Some(t) => tokio::time::timeout(t.0, execute(resolved, svc, &case.params, &opts))
                .await
                .unwrap_or_else(|_| Err(format!("the case did not finish within {t}"))),
            None => execute(resolved, svc, &case.params, &opts).await,
        };
        let res = match outcome {
            Ok(r) => r,
            Err(e) => return (None, Some(e)),
        };
        let header = Header {
            date: timefmt::stamp_dash(SystemTime::now()),
            label: Some(case.id.clone()),
            model_id: resolved.model_root.clone(),
            tokenizer_id: Some(resolved.tokenizer_id.clone()),
        };
        let mut extras = res.extras(&case.params, reset);
        extras.insert("case_id".into(), json!(case.id));
        extras.insert("service".into(), json!(case.service));
        extras.insert("repeat".into(), json!(rep));
        extras.insert(
            "params".into(),
            serde_json::to_value(&case.params).expect("params serialise"),
        );
        extras.insert(
            "slo_verdicts".into(),
            json!(verdicts(&res.summary, &planned.slos)),
        );
        let result = result_json(
            &header,
            &case.params,
            &res.summary,
            res.multi_turn.as_ref(),
            false,
            extras,
        );
        if repeats > 1 {
            let path = dir.join(format!("{}.rep{rep}.json", case.id));
            if let Err(e) = write_atomic(&path, &json_bytes(&Value::Object(result.clone()))) {
                return (None, Some(format!("cannot write {}: {e}", path.display())));
            }
        }
        results.push(result);
    }
    let result = if results.len() == 1 {
        results.pop().expect("one result")
    } else {
        resume::mean_of(&results)
    };
    let path = dir.join(format!("{}.json", case.id));
    match write_atomic(&path, &json_bytes(&Value::Object(result.clone()))) {
        Ok(()) => (Some(result), None),
        Err(e) => (None, Some(format!("cannot write {}: {e}", path.display()))),
    }
}

async fn run_async(planned: &Planned, settings: &RunSettings) -> Exit {
    let plan = &planned.plan;
    let started = SystemTime::now();
    let base = settings
        .results_dir
        .clone()
        .unwrap_or_else(|| plan.execution.results_dir.clone());
    let hash = plan_hash(planned);

    // A resumed run keeps what its manifest says finished; everything else runs again.
    let mut done: HashMap<String, Map<String, Value>> = HashMap::new();
    let dir = match &settings.resume {
        Some(d) => match resume::finished_cases(
            d,
            &hash,
            &planned
                .cases
                .iter()
                .map(|c| c.id.as_str())
                .collect::<Vec<_>>(),
        ) {
            Ok(found) => {
                eprintln!(
                    "resuming {}: {} of {} cases already finished",
                    d.display(),
                    found.len(),
                    planned.cases.len()
                );
                done = found;
                d.clone()
            }
            Err(e) => {
                eprintln!("error: cannot resume {}: {e}", d.display());
                return Exit::BadPlan;
            }
        },
        None => base
            .join("batch")
            .join(format!("batch_{}", timefmt::stamp_underscore(started))),
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("error: cannot create {}: {e}", dir.display());
        return Exit::Runtime;
    }
    parallel::log(&dir, &format!("results: {}", dir.display()));

    // Resolve every service that still has work: a dead one stops the run before any case.
    let mut resolved: HashMap<String, Arc<Resolved>> = HashMap::new();
    for case in planned.cases.iter().filter(|c| !done.contains_key(&c.id)) {
        if resolved.contains_key(&case.service) {
            continue;
        }
        let svc = &plan.services[&case.service];
        let r = match resolve(svc, false, None).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: service `{}`: {e}", case.service);
                return Exit::Runtime;
            }
        };
        if let Err(e) = crate::commands::probe::check_model(&r, svc).await {
            eprintln!("error: service `{}`: {e}", case.service);
            return Exit::Runtime;
        }
        // An external service must answer one request before any case runs. (A simulator
        // is ours: a faulty one is part of the plan, and its cases record their failures.)
        if !svc.is_sim() {
            if let Err(e) = crate::commands::probe::smoke(&r, svc, &case.params).await {
                eprintln!(
                    "error: service `{}` did not answer a smoke request: {e}",
                    case.service
                );
                return Exit::Runtime;
            }
        }
        resolved.insert(case.service.clone(), Arc::new(r));
    }
    // Each service's identity as it reports it: /version where served.
    let mut versions: HashMap<String, Value> = HashMap::new();
    for (name, r) in &resolved {
        let v = r
            .client
            .get(format!("{}/version", r.base_url))
            .headers(r.headers.clone())
            .timeout(std::time::Duration::from_secs(10))
            .send()
            .await
            .ok()
            .filter(|resp| resp.status().is_success());
        let v = match v {
            Some(resp) => serde_json::from_slice(&resp.bytes().await.unwrap_or_default())
                .unwrap_or(Value::Null),
            None => Value::Null,
        };
        versions.insert(name.clone(), v);
    }
    let services: Vec<ServiceView> = plan
        .services
        .keys()
        .filter_map(|n| resolved.get(n).map(|r| (n, r)))
        .map(|(n, r)| ServiceView {
            name: n.clone(),
            kind: if r.sim.is_some() {
                "simulator".into()
            } else {
                "external".into()
            },
            base_url: r.base_url.clone(),
            model: r.model.clone(),
        })
        .collect();

    let ext = match planned.source.format {
        crate::plan::Format::Toml => "toml",
        crate::plan::Format::Yaml => "yaml",
    };
    let cases_json: Vec<Value> = planned
        .cases
        .iter()
        .map(|c| serde_json::to_value(c).expect("case serialises"))
        .collect();
    if settings.resume.is_none() {
        let writes = [
            (
                dir.join(format!("plan.{ext}")),
                planned.source.text.clone().into_bytes(),
            ),
            (
                dir.join("plan.resolved.json"),
                json_bytes(&json!({"plan": plan, "cases": cases_json})),
            ),
        ];
        for (path, bytes) in writes {
            if let Err(e) = write_atomic(&path, &bytes) {
                eprintln!("error: cannot write {}: {e}", path.display());
                return Exit::Runtime;
            }
        }
    }
    let mut manifest = json!({
        "tool": "benchplan", "tool_version": env!("CARGO_PKG_VERSION"), "plan": plan.name, "plan_hash": hash,
        "command": settings.command, "host": host(), "started": timefmt::iso(started), "finished": null,
        "services": services.iter().map(|s| (s.name.clone(), json!({"kind": s.kind, "base_url": s.base_url, "model": s.model, "version": versions.get(&s.name)}))).collect::<Map<String, Value>>(),
        "cases": planned.cases.iter().map(|c| {
            let finished = done.contains_key(&c.id);
            json!({"id": c.id, "service": c.service, "status": if finished { "ok" } else { "pending" },
                   "file": finished.then(|| format!("{}.json", c.id))})
        }).collect::<Vec<_>>(),
    });
    if let Err(e) = write_atomic(&dir.join("manifest.json"), &json_bytes(&manifest)) {
        eprintln!("error: cannot write the manifest: {e}");
        return Exit::Runtime;
    }

    let outcomes = parallel::run_all(
        planned,
        &resolved,
        &done,
        &dir,
        settings.progress,
        &mut manifest,
    )
    .await;

    let finished = SystemTime::now();
    manifest["finished"] = json!(timefmt::iso(finished));
    let _ = write_atomic(&dir.join("manifest.json"), &json_bytes(&manifest));
    let mut views = Vec::new();
    let mut rows = Vec::new();
    let mut runtime_error = false;
    for (case, (result, error)) in planned.cases.iter().zip(outcomes) {
        runtime_error |= error.is_some();
        views.push(case_view(&case.id, &case.service, result.as_ref(), error));
        rows.push(Row {
            id: case.id.clone(),
            service: case.service.clone(),
            status: if result.is_some() {
                "ok".into()
            } else {
                "failed".into()
            },
            result,
        });
    }
    let slo_failures = views.iter().filter(|v| v.slo_pass == Some(false)).count();
    let (recommendation, no_recommendation) = match recommend(&views, !planned.slos.is_empty()) {
        Ok(r) => (Some(r), None),
        Err(why) => (None, Some(why)),
    };
    let report = ReportView {
        plan: plan.name.clone().unwrap_or_default(),
        description: plan.description.clone(),
        started: timefmt::iso(started),
        finished: timefmt::iso(finished),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        command: settings.command.clone(),
        services,
        slos: planned
            .slos
            .iter()
            .map(|(s, _)| format!("{} {} {}{}", s.key, s.op.symbol(), s.threshold, s.unit()))
            .collect(),
        failed_cases: views
            .iter()
            .filter(|v| v.status == "failed")
            .cloned()
            .collect(),
        cases: views,
        recommendation,
        no_recommendation,
        slo_failures,
        comparison: None,
    };
    let mut report = report;
    let mut regression = false;
    if let Some(b) = &plan.report.baseline {
        if b.is_dir() {
            match crate::report::compare::compare_dirs(b, &dir, &plan.report) {
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
    let code = write_reports(&dir, &report, &rows, settings, &planned.source.dir);
    if code != Exit::Ok {
        return code;
    }
    if let Some(path) = &settings.junit {
        if let Err(e) = write_atomic(path, crate::report::junit::junit_xml(&report).as_bytes()) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return Exit::Runtime;
        }
    }
    // The newest run, for `baseline = "bench_results/batch/latest"`.
    let latest = dir.parent().map(|p| p.join("latest"));
    if let (Some(latest), Some(name)) = (latest, dir.file_name()) {
        let _ = std::fs::remove_file(&latest);
        #[cfg(unix)]
        let _ = std::os::unix::fs::symlink(name, &latest);
    }
    eprintln!("report: {}", dir.join("report.md").display());
    if runtime_error {
        Exit::Runtime
    } else if slo_failures > 0 {
        Exit::SloViolated
    } else if regression {
        Exit::Regression
    } else {
        Exit::Ok
    }
}

/// Renders report.md (the plan's or the built-in template) and summary.csv into `dir`,
/// prints the markdown, and appends it to $GITHUB_STEP_SUMMARY when that is set.
pub fn write_reports(
    dir: &Path,
    report: &ReportView,
    rows: &[Row],
    settings: &RunSettings,
    plan_dir: &Path,
) -> Exit {
    let (name, source) = match &settings.template {
        Some(p) => {
            let p = if p.is_absolute() || p.exists() {
                p.clone()
            } else {
                plan_dir.join(p)
            };
            match std::fs::read_to_string(&p) {
                Ok(s) => (p.display().to_string(), s),
                Err(e) => {
                    eprintln!("error: cannot read template {}: {e}", p.display());
                    return Exit::BadPlan;
                }
            }
        }
        None => (
            "report.md.j2".to_string(),
            crate::report::REPORT_MD.to_string(),
        ),
    };
    let md = match crate::report::render(&name, &source, report) {
        Ok(md) => md,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadPlan;
        }
    };
    let csv = match crate::report::csv::summary_csv(rows) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: cannot build summary.csv: {e}");
            return Exit::Runtime;
        }
    };
    for (file, bytes) in [
        ("report.md", md.as_bytes()),
        ("summary.csv", csv.as_bytes()),
    ] {
        if let Err(e) = write_atomic(&dir.join(file), bytes) {
            eprintln!("error: cannot write {file}: {e}");
            return Exit::Runtime;
        }
    }
    if let Some(summary) = std::env::var_os("GITHUB_STEP_SUMMARY") {
        if let Err(e) = crate::results::write::append_json_line(Path::new(&summary), md.as_bytes())
        {
            eprintln!("warning: cannot append to $GITHUB_STEP_SUMMARY: {e}");
        }
    }
    println!("{md}");
    Exit::Ok
}
