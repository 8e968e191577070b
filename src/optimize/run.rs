//! `benchplan optimize`: one search per matrix cell against real runs, archived as the
//! seed orchestrator did (`bench_results/optimize/opt_YYYYMMDD_HHMMSS/<cell>/`:
//! warmup.json, probe_001_c4.json, …, search_…, validation.json,
//! optimization_report.json) plus a report.md.
//!
//! Modes: max_concurrency (A), request_rate (B), request_rate under a fixed
//! max_concurrency (C), the smallest max_concurrency that sustains a fixed
//! request_rate (D: achieved throughput within `rate_tolerance` of the rate), and
//! both in two stages (E: A, then C at the concurrency found).

use std::path::Path;
use std::time::{Instant, SystemTime};

use serde_json::{Map, Value, json};

use super::search::{Config, Ending, Eval, Outcome, Phase, Request, search};
use crate::executor::RunControl;
use crate::exit::Exit;
use crate::files::json_bytes;
use crate::files::write_atomic;
use crate::load::case::execute;
use crate::load::options::RunOptions;
use crate::plan::optimize::{Optimize, SearchVar};
use crate::plan::units::Rate;
use crate::plan::{CaseParams, Service};
use crate::planner::{Case, Planned};
use crate::results::vllm_json::Header;
use crate::service::target::{Resolved, resolve};
use crate::slo::{Op, Slo};
use crate::timefmt;

/// Which variable a stage varies, and how.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Var {
    Concurrency { fixed_rate: Option<f64> },
    Rate { fixed_concurrency: Option<u64> },
}

fn file_name(r: &Request, var: Var) -> String {
    let letter = match var {
        Var::Concurrency { .. } => "c",
        Var::Rate { .. } => "r",
    };
    let value = if matches!(var, Var::Concurrency { .. }) {
        format!("{}", r.value as u64)
    } else {
        format!("{}", r.value)
    };
    match r.phase {
        Phase::Warmup if r.index == 1 => "warmup.json".into(),
        Phase::Warmup => format!("warmup_{}.json", r.index),
        Phase::Probe => format!("probe_{:03}_{letter}{value}.json", r.index),
        Phase::Search => format!("search_{:03}_{letter}{value}.json", r.index),
        Phase::Validation if r.index == 1 => "validation.json".into(),
        Phase::Validation => format!("validation_retry{}.json", r.index - 1),
    }
}

/// Search values that are whole (every concurrency, most rates) written as integers:
/// `16`, not `16.0`.
fn whole_numbers(report: &mut Value) {
    fn whole(v: &mut Value) {
        if let Some(x) = v.as_f64()
            && x.fract() == 0.0
            && x.abs() < 1e15
        {
            *v = json!(x as i64);
        }
    }
    for k in ["optimal_value", "highest_pass", "lowest_fail"] {
        if let Some(v) = report.get_mut(k) {
            whole(v);
        }
    }
    if let Some(Value::Array(h)) = report.get_mut("exploration_history") {
        for s in h {
            if let Some(v) = s.get_mut("value") {
                whole(v);
            }
        }
    }
}

/// Relative room before each SLO breaks (negative: broken); None when a metric is missing.
fn margins(
    slos: &[(Slo, String)],
    s: &crate::metrics::summary::Summary,
) -> (f64, Vec<String>, Vec<f64>) {
    let mut min = f64::INFINITY;
    let mut violations = Vec::new();
    let mut judged = Vec::new();
    for (slo, _) in slos {
        let actual = slo.actual(s);
        if slo.not_applicable(actual) {
            continue;
        }
        match actual {
            Some(a) => {
                judged.push(a);
                let t = slo.threshold.max(f64::MIN_POSITIVE);
                let m = match slo.op {
                    Op::Le | Op::Lt => (t - a) / t,
                    Op::Ge | Op::Gt => (a - t) / t,
                };
                let m = if slo.holds(a) {
                    m.max(0.0)
                } else {
                    m.min(-f64::EPSILON)
                };
                if !slo.holds(a) {
                    violations.push(format!(
                        "{}: {a:.2}{} misses {} {}{}",
                        slo.key,
                        slo.unit(),
                        slo.op.symbol(),
                        slo.threshold,
                        slo.unit()
                    ));
                }
                // A perfect success or goodput ratio cannot get better: its room above
                // the floor is not a margin to report, nor a reason to rerun a point as
                // "close to a threshold" (it made every pass read 1.01% at 100% vs 99%).
                let perfect = slo.metric.def().unit.perfect().is_some_and(|p| a >= p);
                if !perfect {
                    min = min.min(m);
                }
            }
            None => {
                violations.push(format!("{}: the run has no such metric", slo.key));
                min = min.min(-1.0);
            }
        }
    }
    // Only perfect ratios were judged: as much room as a threshold can have.
    (if min.is_finite() { min } else { 1.0 }, violations, judged)
}

fn config(opt: &Optimize, integer: bool, smallest: bool, min: f64, max: f64) -> Config {
    Config {
        integer,
        smallest,
        min,
        max,
        warmup_prompts: opt.warmup_prompts,
        probe: (opt.probe.multiplier, opt.probe.floor),
        bisect: (opt.bisect.multiplier, opt.bisect.floor),
        validation: (opt.validation.multiplier, opt.validation.floor),
        tolerance: opt.tolerance.0,
        max_iterations: opt.max_iterations,
        validation_retries: opt.validation_retries,
        noise_band: opt.noise_band.0,
    }
}

/// One measured run at `req.value`: its verdict, and its result JSON (also written to `dir/file`).
#[allow(clippy::too_many_arguments)]
async fn evaluate(
    at: &Cell<'_>,
    var: Var,
    req: Request,
    file: &str,
    dir: &Path,
) -> (Eval, Option<(String, Value)>) {
    let Cell {
        planned,
        case,
        svc,
        r,
        ctl,
    } = *at;
    let interrupted = || Eval::Interrupted(format!("interrupted by {}", ctl.signal_name()));
    if ctl.stopping() {
        return (interrupted(), None);
    }
    let opt = planned.plan.optimize.as_ref().expect("an optimize block");
    let mut p: CaseParams = crate::service::preflight::shaped(&case.params, r.found.as_ref());
    match var {
        Var::Concurrency { fixed_rate } => {
            p.max_concurrency = Some(req.value as u64);
            if let Some(rate) = fixed_rate {
                p.request_rate = Rate(rate);
            }
        }
        Var::Rate { fixed_concurrency } => {
            p.request_rate = Rate(req.value);
            p.max_concurrency = fixed_concurrency;
        }
    }
    p.num_prompts = req.prompts;
    // Every run must see prompts the server has not cached: runs at one point reuse
    // nothing of earlier runs (a fresh seed per run), and the cache is reset as `run`
    // resets it before a case. Otherwise a cached rerun passes where fresh prompts fail.
    p.seed = case.params.seed
        ^ crate::hash::fnv1a64(file.as_bytes()).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let prepared = crate::service::preflight::Prepared::before_case(r).await;
    let file = file.to_string();
    {
        if !opt.cooldown.0.is_zero() {
            tokio::time::sleep(opt.cooldown.0).await;
        }
        let opts = RunOptions {
            data_dir: planned.source.dir.clone(),
            stop: ctl.case_stop(),
            oversaturation: crate::metrics::oversaturation::Settings::of(
                &planned.plan.execution.oversaturation,
            ),
            stop_on_oversaturation: planned
                .plan
                .execution
                .stop_on
                .contains(&crate::plan::settings::StopOn::Oversaturation),
            ..RunOptions::default()
        };
        let res = match execute(r, svc, &p, &opts).await {
            Ok(res) => res,
            Err(_) if ctl.interrupted() => return (interrupted(), None),
            Err(e) => return (Eval::Infra(format!("{e}; {}", health(r).await)), None),
        };
        let s = &res.summary;
        if ctl.interrupted() {
            // A probe a signal cut short is kept, marked, and judges nothing.
            let result = probe_result(at, &res, &p, &prepared, req, None);
            let partial = file.replace(".json", ".interrupted.json");
            if write_atomic(&dir.join(&partial), &json_bytes(&Value::Object(result))).is_ok() {
                eprintln!(
                    "  {partial}: cut short by {} (kept, not judged)",
                    ctl.signal_name()
                );
            }
            return (interrupted(), None);
        }
        // Every request refused or unanswered is an outage, not an SLO verdict.
        let infra = s.completed == 0
            && s.errors_by_kind
                .keys()
                .all(|k| k == "connection" || k == "timeout" || k == "http_503");
        if infra {
            return (
                Eval::Infra(format!(
                    "no request succeeded ({:?}); {}",
                    s.errors_by_kind,
                    health(r).await
                )),
                None,
            );
        }
        let (mut margin, mut violations, judged) = margins(&planned.optimize_slos, s);
        // An over-saturated point fails whatever its numbers: the search stays below it.
        if let Some(o) = res.run.oversaturation {
            violations.push(format!(
                "over-saturated from {:.1} s: in flight and TTFT rose without bound",
                o.at_s
            ));
            margin = margin.min(-f64::EPSILON);
        }
        if let Var::Concurrency {
            fixed_rate: Some(rate),
        } = var
        {
            // Sustaining a rate: throughput within the tolerance of it, measured over the
            // arrival window (the run less one mean E2EL). Over the whole run, the last
            // request's latency alone would pull a short run below any tolerance.
            let mean_e2el = s
                .stat(crate::plan::Metric::E2el)
                .map_or(0.0, |e| e.mean / 1e3);
            let window = (s.duration - mean_e2el).max(s.duration * 0.5);
            let achieved = if window > 0.0 {
                s.completed as f64 / window
            } else {
                0.0
            };
            let want = rate * (1.0 - opt.rate_tolerance.0);
            let m = (achieved - want) / want;
            if achieved < want {
                violations.push(format!(
                    "sustained {achieved:.2} req/s, below {want:.2} (the rate less {}%)",
                    opt.rate_tolerance.0 * 100.0
                ));
            }
            margin = margin.min(if achieved >= want {
                m.max(0.0)
            } else {
                m.min(-f64::EPSILON)
            });
        }
        let result = probe_result(at, &res, &p, &prepared, req, Some(&violations));
        if let Err(e) = write_atomic(
            &dir.join(&file),
            &json_bytes(&Value::Object(result.clone())),
        ) {
            return (Eval::Infra(format!("cannot write {file}: {e}")), None);
        }
        let stored = (file.clone(), Value::Object(result));
        // One line a run, so a search is never silent (stderr need not be a terminal).
        eprintln!(
            "  {file}: {} ({} prompts, {} ok, {} failed){}",
            if violations.is_empty() {
                "pass"
            } else {
                "fail"
            },
            p.num_prompts,
            s.completed,
            s.failed,
            if violations.is_empty() {
                String::new()
            } else {
                format!("; {}", violations.join("; "))
            }
        );
        (
            Eval::Measured {
                pass: violations.is_empty(),
                margin,
                violations,
                judged,
                file,
            },
            Some(stored),
        )
    }
}

/// A probe's result JSON as the archive keeps it: the case, the phase and (when it
/// was judged) the SLOs it missed.
fn probe_result(
    at: &Cell<'_>,
    res: &crate::load::result::CaseResult,
    p: &CaseParams,
    prepared: &crate::service::preflight::Prepared,
    req: Request,
    violations: Option<&[String]>,
) -> Map<String, Value> {
    let header = Header {
        date: timefmt::stamp_dash(SystemTime::now()),
        label: Some(at.case.id.clone()),
        model_id: at.r.model_root.clone(),
        tokenizer_id: Some(at.r.tokenizer_id.clone()),
    };
    let mut extras = res.extras(p, prepared);
    extras.insert("case_id".into(), json!(at.case.id));
    extras.insert("phase".into(), json!(req.phase));
    if let Some(v) = violations {
        extras.insert("violations".into(), json!(v));
    }
    res.result_json(&header, p, false, extras)
}

/// One matrix cell being searched: its case, service and the run's interrupt.
#[derive(Clone, Copy)]
struct Cell<'a> {
    planned: &'a Planned,
    case: &'a Case,
    svc: &'a Service,
    r: &'a Resolved,
    ctl: &'a RunControl,
}

/// One search stage for one cell. Returns the outcome and each run's result JSON by file.
async fn stage(at: &Cell<'_>, var: Var, cfg: &Config, dir: &Path) -> (Outcome, Map<String, Value>) {
    let results = std::cell::RefCell::new(Map::new());
    let eval = |req: Request| {
        let results = &results;
        async move {
            let (e, result) = evaluate(at, var, req, &file_name(&req, var), dir).await;
            if let Some((file, v)) = result {
                results.borrow_mut().insert(file, v);
            }
            e
        }
    };
    let outcome = search(cfg, eval).await;
    (outcome, results.into_inner())
}

/// The health check made when a run fails for infrastructure reasons (the search then
/// retries once): what /health says, for the record.
async fn health(r: &Resolved) -> String {
    match r
        .client
        .get(r.base_url.join("/health"))
        .timeout(std::time::Duration::from_secs(10))
        .send()
        .await
    {
        Ok(resp) => format!("/health answered HTTP {}", resp.status().as_u16()),
        Err(e) => format!("/health did not answer: {e}"),
    }
}

fn metrics_at(results: &Map<String, Value>, outcome: &Outcome) -> Value {
    let Some(a) = outcome.answer else {
        return Value::Null;
    };
    let step = outcome
        .history
        .iter()
        .rev()
        .find(|s| s.value == a && s.slo_pass);
    let Some(r) = step.and_then(|s| results.get(&s.file)) else {
        return Value::Null;
    };
    let keep = [
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "completed",
        "failed",
    ];
    let mut m: Map<String, Value> = keep
        .iter()
        .filter_map(|k| r.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    for (k, v) in r.as_object().into_iter().flatten() {
        if k.ends_with("_ms") {
            m.insert(k.clone(), v.clone());
        }
    }
    // The ratios SLOs judge, which vLLM's result keys hold only as counts and rates.
    if let Some(file) = r.as_object().map(crate::results::read::CaseFile::new) {
        if let Some(rate) = file.success_rate() {
            m.insert("success_rate".into(), json!(rate));
        }
        if file.request_throughput().is_some_and(|all| all > 0.0)
            && let Some(ratio) = file.goodput_ratio()
        {
            m.insert("goodput_ratio".into(), json!(ratio));
        }
        // The output-ratio floor's actual (cases sent with ignore_eos).
        if let Some(ratio) = file.output_ratio() {
            m.insert("output_ratio".into(), json!(ratio));
        }
    }
    Value::Object(m)
}

/// Runs every search of the plan. Returns the exit code.
pub fn run(planned: &Planned, results_dir: Option<&Path>, charts: bool) -> Exit {
    let Some(opt) = planned.plan.optimize.clone() else {
        eprintln!("error: the plan has no [optimize] block");
        return Exit::BadPlan;
    };
    let any_sim = planned.plan.services.values().any(|s| s.is_sim());
    crate::load::runtime(any_sim).block_on(async move {
        let started = SystemTime::now();
        let base = results_dir.map(Path::to_path_buf).unwrap_or_else(|| planned.plan.execution.results_dir.clone());
        let root = base.join("optimize").join(format!("opt_{}", timefmt::stamp_underscore(started)));
        // The folder exists from the moment it is named: a search stopped at once still
        // leaves it, with its report.
        if let Err(e) = std::fs::create_dir_all(&root) {
            eprintln!("error: cannot create {}: {e}", root.display());
            return Exit::Runtime;
        }
        eprintln!("results: {}", root.display());
        let ctl = std::sync::Arc::new(RunControl::default());
        ctl.listen("the search stops: the probe in flight stops sending; every finished probe stays in the archive and the report says how far the search got (a second signal abandons what is in flight)");
        let ctl = &*ctl;
        let mut cells = Vec::new();
        let mut code = Exit::Ok;
        for case in &planned.cases {
            if ctl.stopping() {
                eprintln!("search {}: not started ({})", case.id, ctl.signal_name());
                cells.push(json!({"case_id": case.id, "service": case.service, "search": opt.search, "ending": "not_started", "recommendation": format!("Not started: interrupted by {}.", ctl.signal_name()), "exploration_history": [], "notes": [], "runs": 0}));
                continue;
            }
            let svc = &planned.plan.services[&case.service];
            let mut r = match resolve(svc, false, None).await {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: service `{}`: {e}", case.service);
                    return Exit::Runtime;
                }
            };
            // The wording check `run` makes (see `preflight`); other failures show in the runs.
            if !svc.is_sim() {
                use crate::service::preflight::{Fit, fit_service};
                match fit_service(&r, svc, &case.params).await {
                    Fit::Found(f) => {
                        eprintln!("note: {}", crate::escape::console(&f.note(&case.service)));
                        r.found = Some(f);
                    }
                    Fit::Refused(e) => {
                        eprintln!("error: service `{}`: {}", case.service, crate::escape::console(&e));
                        return Exit::Runtime;
                    }
                    Fit::Ok | Fit::Failed(_) => {}
                }
            }
            let dir = root.join(&case.id);
            let t0 = Instant::now();
            eprintln!(
                "search {} ({})",
                case.id,
                serde_json::to_value(opt.search)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            );
            let conc = |fixed_rate| (Var::Concurrency { fixed_rate }, config(&opt, true, fixed_rate.is_some(), opt.min.max(1.0).round(), opt.max.round()));
            let rate = |fixed_concurrency| (Var::Rate { fixed_concurrency }, config(&opt, false, false, opt.min, opt.max));
            let stages: Vec<(Var, Config)> = match opt.search {
                SearchVar::MaxConcurrency => vec![conc(opt.request_rate.map(|r| r.0))],
                SearchVar::RequestRate => vec![rate(opt.max_concurrency)],
                SearchVar::Both => vec![conc(None)],
            };
            // Two-stage searches keep each stage's runs apart; one stage writes into the cell folder.
            let stage1_dir = if opt.search == SearchVar::Both { dir.join("stage1") } else { dir.clone() };
            let at = Cell { planned, case, svc, r: &r, ctl };
            let (mut outcome, mut results) = stage(&at, stages[0].0, &stages[0].1, &stage1_dir).await;
            let mut stage2 = None;
            let stage1_runs = outcome.history.len();
            if opt.search == SearchVar::Both {
                if let Some(c) = outcome.answer {
                    let (v, cfg) = rate(Some(c as u64));
                    let (o2, r2) = stage(&at, v, &cfg, &dir.join("stage2")).await;
                    stage2 = Some((c, o2.clone()));
                    results.extend(r2);
                    outcome = o2;
                }
            }
            // Two-stage: look one step around the answer, for the record (the answer stays).
            let neighbourhood = match (&stage2, outcome.answer) {
                (Some((c, _)), Some(found)) => look_around(&at, &opt, *c as u64, found, &dir, &mut outcome.notes).await,
                _ => Vec::new(),
            };
            let secs = t0.elapsed().as_secs_f64();
            // Every run of the search: both stages, and the look around the answer.
            let runs = if stage2.is_some() { stage1_runs + outcome.history.len() + neighbourhood.len() } else { outcome.history.len() };
            let param = match (opt.search, stage2.is_some()) {
                (SearchVar::RequestRate, _) | (SearchVar::Both, true) => "request_rate",
                _ => "max_concurrency",
            };
            let recommendation = recommendation(&outcome, param);
            let baseline = against_baseline(planned, &opt, &case.id, outcome.answer);
            let regressed = baseline.as_ref().is_some_and(|b| b["regression"] == true);
            code = code.worst(match outcome.ending {
                Ending::Infrastructure(_) => Exit::Runtime,
                Ending::Interrupted(_) => ctl.interrupt_exit(),
                // An answer no validation run confirmed is not an answer.
                Ending::FailsAtMinimum | Ending::NotValidated => Exit::SloViolated,
                _ if regressed => Exit::Regression,
                _ => Exit::Ok,
            });
            let report = json!({
                "case_id": case.id,
                "service": case.service,
                "search": opt.search,
                "optimal_value": outcome.answer,
                "concurrency_stage1": stage2.as_ref().map(|(c, _)| c),
                "neighbourhood": neighbourhood,
                "baseline": baseline,
                "slo_targets": planned.optimize_slos.iter().map(|(s, _)| json!({"key": s.key, "metric": s.metric.result_key(), "direction": s.op.symbol(), "value": s.threshold,
                    "unit": s.unit(), "target": format!("{} {}{}", s.op.symbol(), s.threshold, s.unit())})).collect::<Vec<_>>(),
                "recommendation": recommendation,
                "ending": outcome.ending,
                "highest_pass": outcome.highest_pass,
                "lowest_fail": outcome.lowest_fail,
                "exploration_history": outcome.history,
                "notes": outcome.notes,
                "runs": runs,
                "total_seconds": secs,
                "timestamp": timefmt::iso(SystemTime::now()),
                "metrics_at_optimal": metrics_at(&results, &outcome),
            });
            let mut report = report;
            whole_numbers(&mut report);
            let chart = charts.then(|| search_chart(&root, &opt, &case.id, &outcome)).flatten();
            report["chart"] = json!(chart.map(|c| c.view.file));
            if let Err(e) = write_atomic(&dir.join("optimization_report.json"), &json_bytes(&report)) {
                eprintln!("error: cannot write the report: {e}");
                return Exit::Runtime;
            }
            eprintln!("  {recommendation} ({runs} runs, {secs:.1} s)");
            cells.push(report);
        }
        if ctl.interrupted() {
            code = code.worst(ctl.interrupt_exit());
        }
        let interrupted = ctl.interrupted().then(|| ctl.signal_name());
        let md = match crate::report::render("optimize.md.j2", crate::report::OPTIMIZE_MD, &json!({"plan": planned.plan.name, "cells": cells, "interrupted": interrupted})) {
            Ok(md) => md,
            Err(e) => {
                eprintln!("error: {e}");
                return Exit::Runtime;
            }
        };
        if let Err(e) = write_atomic(&root.join("report.md"), md.as_bytes()) {
            eprintln!("error: cannot write report.md: {e}");
            return Exit::Runtime;
        }
        // The newest search, for `baseline = "bench_results/optimize/latest"`.
        if let Some(w) = crate::files::point_latest(&root) {
            eprintln!("warning: {w}");
        }
        crate::report::write::append_step_summary(&md);
        if let Some(sig) = interrupted {
            eprintln!("verdict: interrupted by {sig}: exit {}", code.code());
        }
        println!("{md}");
        code
    })
}

/// What a search's ending says, in the report's words.
fn recommendation(outcome: &Outcome, param: &str) -> String {
    match (&outcome.ending, outcome.answer) {
        (Ending::Validated, Some(a)) => {
            format!("Optimal {param}={a}: validated with more prompts.")
        }
        (Ending::NotSaturated, Some(a)) => {
            format!("Not saturated up to {param}={a}: every value tested met the SLOs.")
        }
        (Ending::NotValidated, Some(a)) => {
            format!("Could not validate; {param}={a} passed a search run (not validation).")
        }
        (Ending::FailsAtMinimum, _) => {
            "The service cannot meet the SLOs even at the minimum load.".to_string()
        }
        (Ending::Infrastructure(e), _) => format!("The search stopped: the service failed ({e})."),
        (Ending::Interrupted(why), _) => format!(
            "Interrupted ({why}) after {} run(s): {}, {}; no answer.",
            outcome.history.len(),
            outcome
                .highest_pass
                .map_or("no value passed yet".to_string(), |v| format!(
                    "{param}={v} passed"
                )),
            outcome
                .lowest_fail
                .map_or("none failed yet".to_string(), |v| format!(
                    "{param}={v} failed"
                ))
        ),
        _ => "No value met the SLOs.".to_string(),
    }
}

/// Against a baseline search (`optimize.baseline`): a lower answer (a higher one when
/// searching the smallest concurrency that sustains a rate) beyond the plan's threshold
/// regresses; None without a baseline report for this case.
fn against_baseline(
    planned: &Planned,
    opt: &Optimize,
    case_id: &str,
    answer: Option<f64>,
) -> Option<Value> {
    let b = opt.baseline.as_ref()?;
    let text = std::fs::read_to_string(b.join(case_id).join("optimization_report.json")).ok()?;
    let old: Value = serde_json::from_str(&text).ok()?;
    let before = old["optimal_value"].as_f64()?;
    let t = planned.plan.report.regression_threshold.0;
    let smallest = opt.search == SearchVar::MaxConcurrency && opt.request_rate.is_some();
    let (regression, delta) = match answer {
        Some(now) => (
            (if smallest {
                now > before * (1.0 + t)
            } else {
                now < before * (1.0 - t)
            }),
            (now - before) / before * 100.0,
        ),
        None => (true, -100.0),
    };
    Some(
        json!({"value": before, "delta_pct": delta, "threshold_pct": t * 100.0, "regression": regression}),
    )
}

/// The search's probes as a chart beside the report (report.md links it); None when
/// it has nothing to draw or cannot be written.
fn search_chart(
    root: &Path,
    opt: &Optimize,
    case_id: &str,
    outcome: &Outcome,
) -> Option<crate::report::charts::Chart> {
    let knob = serde_json::to_value(opt.search)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "value".into());
    let probes: Vec<crate::report::charts::search::Probe> = outcome
        .history
        .iter()
        .map(|s| crate::report::charts::search::Probe {
            value: s.value,
            margin: s.margin,
            pass: s.slo_pass,
        })
        .collect();
    crate::report::charts::search::draw(case_id, &knob, &probes, outcome.answer).filter(|c| {
        let path = root.join(&c.view.file);
        std::fs::create_dir_all(root.join("charts"))
            .and_then(|()| write_atomic(&path, c.svg.as_bytes()))
            .inspect_err(|e| eprintln!("warning: cannot write {}: {e}", path.display()))
            .is_ok()
    })
}

/// A two-stage search's look one step around its answer (concurrency ±1, the rate one
/// tolerance up), for the record: each point's verdict, and a note on a bigger one that
/// also passes. The answer stays.
async fn look_around(
    at: &Cell<'_>,
    opt: &Optimize,
    c: u64,
    rate_found: f64,
    dir: &Path,
    notes: &mut Vec<String>,
) -> Vec<Value> {
    let mut neighbourhood = Vec::new();
    let stepped = ((rate_found * (1.0 + opt.tolerance.0)) * 100.0).round() / 100.0;
    for (conc, rate_v) in [
        (c + 1, rate_found),
        (c.saturating_sub(1).max(1), rate_found),
        (c, stepped),
    ] {
        if (conc, rate_v) == (c, rate_found) {
            continue;
        }
        let var = Var::Rate {
            fixed_concurrency: Some(conc),
        };
        let req = Request {
            phase: Phase::Validation,
            index: 1,
            value: rate_v,
            prompts: opt.validation.floor,
        };
        let file = format!("neighbour_c{conc}_r{rate_v}.json");
        let (e, _) = evaluate(at, var, req, &file, &dir.join("stage2")).await;
        let (pass, violations) = match e {
            Eval::Measured {
                pass, violations, ..
            } => (Some(pass), violations),
            Eval::Infra(msg) | Eval::Interrupted(msg) => (None, vec![msg]),
        };
        if pass == Some(true) && (conc > c || rate_v > rate_found) {
            notes.push(format!(
                "the neighbour max_concurrency={conc}, request_rate={rate_v} also meets the SLOs"
            ));
        }
        neighbourhood.push(json!({"max_concurrency": conc, "request_rate": rate_v, "pass": pass, "violations": violations, "file": file}));
    }
    neighbourhood
}
