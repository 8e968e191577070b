//! `benchplan run`: every case of a plan, in plan order, into a
//! `bench_results/batch/batch_YYYYMMDD_HHMMSS/` folder, persisted as each case
//! finishes (whole files only), then summary.csv and report.md, and an exit code.
//!
//! Services are resolved once before any case runs: simulators start in-process,
//! external ones must answer /v1/models (or have their model named), so a dead
//! service stops the run with a clear error before traffic.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Map, Value, json};

use crate::cli::exit;
use crate::load::case::execute;
use crate::load::run::RunOptions;
use crate::load::target::{Resolved, resolve};
use crate::metrics::summary::Summary;
use crate::planner::Planned;
use crate::report::csv::Row;
use crate::report::view::{ReportView, ServiceView, case_view, recommend};
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
}

fn json_bytes(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).expect("JSON serialises");
    b.push(b'\n');
    b
}

fn host() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| std::env::var("HOSTNAME").unwrap_or_default())
}

/// Runs a validated plan. Returns the exit code.
pub fn run(planned: &Planned, settings: &RunSettings) -> u8 {
    let any_sim = planned.plan.services.values().any(|s| s.is_sim());
    crate::load::runtime(any_sim).block_on(run_async(planned, settings))
}

async fn run_async(planned: &Planned, settings: &RunSettings) -> u8 {
    let plan = &planned.plan;
    let started = SystemTime::now();
    let base = settings
        .results_dir
        .clone()
        .unwrap_or_else(|| plan.execution.results_dir.clone());
    let dir = base
        .join("batch")
        .join(format!("batch_{}", timefmt::stamp_underscore(started)));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("error: cannot create {}: {e}", dir.display());
        return exit::RUNTIME;
    }
    eprintln!("results: {}", dir.display());

    // Resolve every service first: a dead one stops the run before any case.
    let mut resolved: HashMap<String, Resolved> = HashMap::new();
    for name in planned.cases.iter().map(|c| c.service.clone()) {
        if resolved.contains_key(&name) {
            continue;
        }
        match resolve(&plan.services[&name], false, None).await {
            Ok(r) => {
                resolved.insert(name, r);
            }
            Err(e) => {
                eprintln!("error: service `{name}`: {e}");
                return exit::RUNTIME;
            }
        }
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
            return exit::RUNTIME;
        }
    }
    let plan_hash = format!(
        "{:016x}",
        crate::planner::case::fnv1a64(planned.source.value.to_string().as_bytes())
    );
    let mut manifest = json!({
        "tool": "benchplan", "tool_version": env!("CARGO_PKG_VERSION"), "plan": plan.name, "plan_hash": plan_hash,
        "command": settings.command, "host": host(), "started": timefmt::iso(started), "finished": null,
        "services": services.iter().map(|s| (s.name.clone(), json!({"kind": s.kind, "base_url": s.base_url, "model": s.model}))).collect::<Map<String, Value>>(),
        "cases": planned.cases.iter().map(|c| json!({"id": c.id, "service": c.service, "status": "pending"})).collect::<Vec<_>>(),
    });
    let write_manifest = |m: &Value| write_atomic(&dir.join("manifest.json"), &json_bytes(m));
    if let Err(e) = write_manifest(&manifest) {
        eprintln!("error: cannot write the manifest: {e}");
        return exit::RUNTIME;
    }

    let total = planned.cases.len();
    let mut views = Vec::with_capacity(total);
    let mut rows = Vec::with_capacity(total);
    let mut runtime_error = false;
    for (i, case) in planned.cases.iter().enumerate() {
        if i > 0 && plan.execution.cooldown.0.as_nanos() > 0 {
            tokio::time::sleep(plan.execution.cooldown.0).await;
        }
        eprintln!("[{}/{total}] {}", i + 1, case.id);
        let svc = &plan.services[&case.service];
        let r = &resolved[&case.service];
        let opts = RunOptions {
            progress: settings.progress,
            ..RunOptions::default()
        };
        let outcome = match plan.execution.timeout {
            Some(t) => tokio::time::timeout(t.0, execute(r, svc, &case.params, &opts))
                .await
                .unwrap_or_else(|_| Err(format!("the case did not finish within {t}"))),
            None => execute(r, svc, &case.params, &opts).await,
        };
        let (summary, error): (Option<Summary>, Option<String>) = match outcome {
            Ok(res) => {
                let header = Header {
                    date: timefmt::stamp_dash(SystemTime::now()),
                    label: Some(case.id.clone()),
                    model_id: r.model.clone(),
                    tokenizer_id: Some(r.tokenizer_id.clone()),
                };
                let view = case_view(case, Some(&res.summary), None, &planned.slos);
                let mut extras = Map::new();
                extras.insert("case_id".into(), json!(case.id));
                extras.insert("service".into(), json!(case.service));
                extras.insert(
                    "params".into(),
                    serde_json::to_value(&case.params).expect("params serialise"),
                );
                extras.insert("slo_verdicts".into(), json!(view.verdicts));
                extras.insert("smoke".into(), json!(res.run.smoke));
                extras.insert("interrupted".into(), json!(res.run.interrupted));
                let result = result_json(&header, &case.params, &res.summary, false, extras);
                if let Err(e) = write_atomic(
                    &dir.join(format!("{}.json", case.id)),
                    &json_bytes(&Value::Object(result.clone())),
                ) {
                    eprintln!("error: cannot write the result of {}: {e}", case.id);
                    return exit::RUNTIME;
                }
                rows.push(Row {
                    id: case.id.clone(),
                    service: case.service.clone(),
                    status: "ok".into(),
                    result: Some(result),
                });
                (Some(res.summary), None)
            }
            Err(e) => {
                eprintln!("  case failed: {e}");
                runtime_error = true;
                rows.push(Row {
                    id: case.id.clone(),
                    service: case.service.clone(),
                    status: "failed".into(),
                    result: None,
                });
                (None, Some(e))
            }
        };
        let view = case_view(case, summary.as_ref(), error.clone(), &planned.slos);
        manifest["cases"][i] = json!({
            "id": case.id, "service": case.service, "status": view.status, "file": summary.as_ref().map(|_| format!("{}.json", case.id)),
            "error": error, "slo_pass": view.slo_pass,
        });
        if let Err(e) = write_manifest(&manifest) {
            eprintln!("error: cannot write the manifest: {e}");
            return exit::RUNTIME;
        }
        views.push(view);
        if error.is_some() && !plan.execution.continue_on_error {
            eprintln!("stopping: continue_on_error is off");
            break;
        }
    }

    let finished = SystemTime::now();
    manifest["finished"] = json!(timefmt::iso(finished));
    let _ = write_manifest(&manifest);
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
    };
    let code = write_reports(&dir, &report, &rows, settings, &planned.source.dir);
    if code != exit::OK {
        return code;
    }
    eprintln!("report: {}", dir.join("report.md").display());
    if runtime_error {
        exit::RUNTIME
    } else if slo_failures > 0 {
        exit::SLO_VIOLATED
    } else {
        exit::OK
    }
}

fn write_reports(
    dir: &Path,
    report: &ReportView,
    rows: &[Row],
    settings: &RunSettings,
    plan_dir: &Path,
) -> u8 {
    let template = settings.template.clone();
    let (name, source) = match &template {
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
                    return exit::BAD_PLAN;
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
            return exit::BAD_PLAN;
        }
    };
    let csv = match crate::report::csv::summary_csv(rows) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: cannot build summary.csv: {e}");
            return exit::RUNTIME;
        }
    };
    for (file, bytes) in [
        ("report.md", md.as_bytes()),
        ("summary.csv", csv.as_bytes()),
    ] {
        if let Err(e) = write_atomic(&dir.join(file), bytes) {
            eprintln!("error: cannot write {file}: {e}");
            return exit::RUNTIME;
        }
    }
    println!("{md}");
    exit::OK
}
