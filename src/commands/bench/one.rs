//! One `bench` run: the case the flags describe, measured, printed as vLLM prints it
//! and saved where vLLM saves it ([`run_one`]); the sweep runs it once per value.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Value, json};

use super::args::BenchArgs;
use super::flag_words;
use super::print::print_summary;
use crate::exit::Exit;
use crate::files::{append_json_line, write_atomic};
use crate::load::case::execute;
use crate::load::options::RunOptions;
use crate::load::result::CaseResult;
use crate::plan::{CaseParams, PlanSource, Service};
use crate::results::vllm_json::{Header, vllm_file_name};
use crate::service::target::resolve;

/// `bench_{model_short}_{dataset}_{backend}_{YYYYMMDD_HHMMSS}.json` in bench_results/single/.
fn single_name(h: &Header, p: &CaseParams, started: SystemTime) -> String {
    // The server names its model: a printable, bounded part of a file name.
    let model = crate::escape::file_name(
        h.model_id.rsplit('/').next().unwrap_or(&h.model_id),
        crate::escape::FILE_NAME_MAX,
    );
    format!(
        "bench_{model}_{}_{}_{}.json",
        p.dataset.name(),
        p.backend().name(),
        crate::timefmt::stamp_underscore(started)
    )
}

/// What one `bench` run gave: its verdict, its result JSON (when it ran), and the
/// file it was written to (when saved).
pub struct OneRun {
    pub exit: Exit,
    pub result: Option<serde_json::Map<String, Value>>,
    pub written: Option<PathBuf>,
}

impl From<Exit> for OneRun {
    fn from(exit: Exit) -> OneRun {
        OneRun {
            exit,
            result: None,
            written: None,
        }
    }
}

/// Runs the one case the flags describe.
pub fn run_one(args: &BenchArgs) -> OneRun {
    let value = match args.plan_value() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadPlan.into();
        }
    };
    let planned = match crate::planner::plan(PlanSource::from_value("<command line>", value)) {
        Ok(p) => p,
        Err(d) => {
            eprintln!("{}", flag_words::in_flag_words(&d.to_string()));
            return Exit::BadPlan.into();
        }
    };
    for w in &planned.warnings {
        eprintln!("{}", flag_words::in_flag_words(&w.to_string()));
    }
    let mut case = planned.cases[0].clone();
    if let Err(e) = check_names(args) {
        eprintln!("error: {e}");
        return Exit::BadPlan.into();
    }
    if args.dry_run {
        return crate::commands::dry_run::print(&planned).into();
    }
    // The result's folder must take a file before any traffic: a benchmark whose
    // result cannot be written is lost.
    if let Err(e) = check_result_folder(args) {
        eprintln!("error: {e}");
        return Exit::Runtime.into();
    }
    let service: Service = planned.plan.services["target"].clone();
    // One thread against an external server (as the client benchmark measures it), two
    // workers when the simulator runs in this process.
    let runtime = crate::load::runtime(service.sim.is_some());
    runtime.block_on(async move {
        let resolved = match resolve(
            &service,
            args.insecure,
            case.params.max_concurrency.map(|c| c as usize),
        )
        .await
        {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {}", flag_words::in_flag_words(&crate::escape::console(&e)));
                return Exit::Runtime.into();
            }
        };
        let mut prepared = crate::service::preflight::Prepared::default();
        let mut opts = RunOptions {
            progress: !args.disable_tqdm && std::io::stderr().is_terminal(),
            smoke: !args.no_smoke,
            announce_waits: true,
            timeslice: args.timeslice,
            ..RunOptions::default()
        };
        if let Some(p) = &case.params.request_id_prefix {
            opts.request_id_prefix = p.clone();
        }
        let stopped_by = listen_for_signals(&opts);
        let started = SystemTime::now();
        let mut run = execute(&resolved, &service, &case.params, &opts).await;
        // The smoke request refused in a way another wording may fix: the wording
        // search (see `preflight`), and the case again in the wording the server takes.
        if let Err(e) = &run
            && !service.is_sim()
            && smoke_refusal(e)
        {
            use crate::service::preflight::{Fit, fit_service, shaped};
            match fit_service(&resolved, &service, &case.params).await {
                Fit::Found(f) => {
                    eprintln!(
                        "note: {}",
                        flag_words::in_flag_words(&crate::escape::console(&f.note("target")))
                    );
                    case.params = shaped(&case.params, Some(&f));
                    prepared.found = Some(f);
                    run = execute(&resolved, &service, &case.params, &opts).await;
                }
                Fit::Refused(msg) => {
                    eprintln!(
                        "error: {}",
                        flag_words::in_flag_words(&crate::escape::console(&msg))
                    );
                    return Exit::Runtime.into();
                }
                Fit::Ok | Fit::Failed(_) => {}
            }
        }
        let result: CaseResult = match run {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {}", flag_words::in_flag_words(&crate::escape::console(&e.to_string())));
                // Stopped before the measured run (during the smoke request, say).
                if opts.stop.draining() {
                    return stopped_by().into();
                }
                return Exit::Runtime.into();
            }
        };
        print_summary(&result.summary, result.multi_turn.as_ref(), &case.params);
        for w in result.warnings() {
            eprintln!("warning: {}", crate::escape::console(&w));
        }
        // The output-ratio floor (a server that cuts answers short must not pass).
        let floor_missed: Vec<String> = planned
            .slos
            .iter()
            .filter(|(slo, _)| slo.key == crate::slo::floors::MIN_OUTPUT_RATIO)
            .filter_map(|(slo, _)| slo.judge(&result.summary))
            .filter(|v| !v.pass)
            .map(|v| v.message)
            .collect();
        let header = Header {
            date: crate::timefmt::stamp_dash(started),
            label: args.label.clone(),
            model_id: resolved.model_root.clone(),
            tokenizer_id: Some(resolved.tokenizer_id.clone()),
        };
        let mut extras = result.extras(&case.params, &prepared);
        extras.insert("case_id".into(), json!(case.id));
        extras.insert("seed".into(), json!(case.params.seed));
        extras.insert("command".into(), json!(crate::redact::this_command()));
        extras.insert(
            "params".into(),
            crate::redact::redacted(&case.params),
        );
        let json = result.result_json(&header, &case.params, args.save_detailed, extras);
        let written = match write_result(args, &header, &case.params, started, &json) {
            Ok(w) => w,
            Err(e) => {
                eprintln!("error: {e}");
                return Exit::Runtime.into();
            }
        };
        let problems = result.problems();
        for p in &problems {
            eprintln!("error: {}", crate::escape::console(p));
        }
        let exit = if result.run.interrupted && !result.run.timed_out {
            let a = &result.run.accounting;
            eprintln!(
                "interrupted: {} completed, {} failed, {} cancelled of {} scheduled; the result holds what finished",
                a.completed, a.failed, a.cancelled, a.scheduled
            );
            stopped_by()
        } else if !problems.is_empty() || result.run.timed_out {
            Exit::Runtime
        } else if !floor_missed.is_empty() {
            for m in &floor_missed {
                eprintln!(
                    "error: {m}: requests sent with --ignore-eos came back short (set --min-output-ratio to change the floor)"
                );
            }
            Exit::SloViolated
        } else {
            Exit::Ok
        };
        OneRun {
            exit,
            result: Some(json),
            written,
        }
    })
}

/// Whether a case failed because its smoke request was refused in a way another
/// wording may fix (the error's kind, typed; see `preflight::wording_may_fix`).
fn smoke_refusal(error: &crate::load::case::CaseError) -> bool {
    use crate::load::case::CaseError;
    use crate::load::options::RunError;
    match error {
        CaseError::Run(RunError::Smoke { kind, .. }) => {
            crate::service::preflight::wording_may_fix(&crate::metrics::sample::RequestError {
                kind: kind.clone(),
                message: String::new(),
            })
        }
        _ => false,
    }
}

/// A label and a result file name each name a file inside the results folder.
fn check_names(args: &BenchArgs) -> Result<(), String> {
    let names = [
        (args.label.as_deref(), "--label"),
        (args.result_filename.as_deref(), "--result-filename"),
    ];
    for (name, flag) in names {
        if let Some(n) = name {
            crate::files::inside(n, flag)?;
        }
    }
    match &args.label {
        Some(l) if l.contains('/') => Err(format!(
            "--label `{l}` holds a `/`; a label is part of a file name"
        )),
        _ => Ok(()),
    }
}

/// The folder a result is saved into: vLLM's with --result-dir or --result-filename,
/// else the results tree's `single`.
fn result_folder(args: &BenchArgs) -> PathBuf {
    match (&args.result_dir, &args.result_filename) {
        (None, None) => PathBuf::from("bench_results").join("single"),
        (dir, name) => {
            let full = dir
                .clone()
                .unwrap_or_default()
                .join(name.clone().unwrap_or_else(|| "result.json".into()));
            full.parent().map(PathBuf::from).unwrap_or_default()
        }
    }
}

/// When the result is saved, its folder takes a file (checked before any traffic).
fn check_result_folder(args: &BenchArgs) -> Result<(), String> {
    if !(args.save_result || args.append_result || args.save_detailed) {
        return Ok(());
    }
    let dir = result_folder(args);
    crate::files::check_writable(&dir).map_err(|e| {
        format!(
            "the result folder {} cannot take a file ({e}); nothing was sent",
            if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                &dir
            }
            .display()
        )
    })
}

/// SIGINT, SIGTERM and SIGHUP alike (see `signals`): the first drains the run, a
/// second abandons what is in flight. What it returns names the exit of the signal that
/// came first.
fn listen_for_signals(opts: &RunOptions) -> impl Fn() -> Exit + use<> {
    let stop = opts.stop.clone();
    let grace = opts.grace;
    let by = std::sync::Arc::new(std::sync::Mutex::new(None));
    let mut signals = crate::signals::Signals::listen();
    {
        let by = by.clone();
        tokio::spawn(async move {
            let s = signals.next().await;
            *by.lock().expect("signal") = Some(s);
            eprintln!(
                "\n{}: nothing more is sent; requests in flight get {:.0} s (a second signal abandons them)",
                s.name(),
                grace.as_secs_f64()
            );
            stop.drain();
            signals.next().await;
            stop.abort();
        });
    }
    move || {
        by.lock()
            .expect("signal")
            .map_or(Exit::Interrupted, crate::signals::StopSignal::exit)
    }
}

/// Saves the result when asked (--save-result, --append-result, --save-detailed):
/// with --result-dir or --result-filename in vLLM's names and places, else in the
/// results tree. Where it was written.
fn write_result(
    args: &BenchArgs,
    header: &Header,
    params: &crate::plan::CaseParams,
    started: SystemTime,
    json: &serde_json::Map<String, serde_json::Value>,
) -> Result<Option<PathBuf>, String> {
    if !(args.save_result || args.append_result || args.save_detailed) {
        return Ok(None);
    }
    let path = match (&args.result_dir, &args.result_filename) {
        (None, None) => PathBuf::from("bench_results")
            .join("single")
            .join(single_name(header, params, started)),
        (dir, name) => dir.clone().unwrap_or_default().join(
            name.clone()
                .unwrap_or_else(|| vllm_file_name(header, params)),
        ),
    };
    let bytes = serde_json::to_vec(json).expect("result serialises");
    let w = if args.append_result {
        append_json_line(&path, &bytes)
    } else {
        write_atomic(&path, &bytes)
    };
    w.map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!("result written to {}", path.display());
    Ok(Some(path))
}
