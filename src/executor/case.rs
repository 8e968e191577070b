//! One case of a run: its repeats, each under the case's deadline and the run's stop
//! signal, and its result file. A case that times out or is interrupted keeps what it
//! measured, saved as a partial result; its traffic is stopped before the next case.

use std::path::Path;
use std::time::{Instant, SystemTime};

use serde_json::{Map, Value, json};

use super::control::RunControl;
use crate::files::json_bytes;
use crate::files::write_atomic;
use crate::load::case::execute;
use crate::load::options::RunOptions;
use crate::planner::{Case, Planned};
use crate::results::vllm_json::Header;
use crate::service::preflight::{self, Prepared};
use crate::service::target::Resolved;
use crate::timefmt;

/// How a case ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Measured (its SLO verdicts say whether it passed).
    Ok,
    /// Could not be measured: the error says why.
    Failed,
    /// Hit `execution.timeout`; the result holds what finished.
    TimedOut,
    /// Stopped by Ctrl-C; the result holds what finished.
    Interrupted,
    /// Never started (an earlier failure with continue_on_error off, or an interrupt).
    NotRun,
    /// Not run on purpose: a lower rate of the same sweep over-saturated (with
    /// `execution.stop_on = ["oversaturation"]`), so this one would too.
    Skipped,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::TimedOut => "timeout",
            Status::Interrupted => "interrupted",
            Status::NotRun => "not_run",
            Status::Skipped => "skipped",
        }
    }
}

/// One case's end: its result (whole or partial), why it is not a clean result, and
/// what makes its numbers untrustworthy as a tool result (lost requests, panics).
/// How a case shows its progress: a bar on a terminal, plain lines in a CI log.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    pub bar: bool,
    pub lines: Option<std::time::Duration>,
}

#[derive(Debug, Clone)]
pub struct CaseOutcome {
    pub result: Option<Map<String, Value>>,
    pub error: Option<String>,
    pub status: Status,
    pub problems: Vec<String>,
    /// Its result could not be written (a full disk, a read-only folder): the run
    /// sends no more traffic, since what it measured would be lost too.
    pub write_failed: bool,
}

impl CaseOutcome {
    pub fn failed(error: impl Into<String>) -> CaseOutcome {
        CaseOutcome {
            result: None,
            error: Some(error.into()),
            status: Status::Failed,
            problems: Vec::new(),
            write_failed: false,
        }
    }

    /// A case measured whose result could not be written.
    fn unwritten(path: &std::path::Path, e: std::io::Error) -> CaseOutcome {
        CaseOutcome {
            write_failed: true,
            ..CaseOutcome::failed(format!("cannot write {}: {e}", path.display()))
        }
    }

    pub fn not_run(why: impl Into<String>) -> CaseOutcome {
        CaseOutcome {
            status: Status::NotRun,
            ..CaseOutcome::failed(why)
        }
    }

    /// Not run on purpose (see [`Status::Skipped`]).
    pub fn skipped(why: impl Into<String>) -> CaseOutcome {
        CaseOutcome {
            status: Status::Skipped,
            ..CaseOutcome::failed(why)
        }
    }

    pub fn finished(result: Map<String, Value>) -> CaseOutcome {
        CaseOutcome {
            result: Some(result),
            error: None,
            status: Status::Ok,
            problems: Vec::new(),
            write_failed: false,
        }
    }
}

/// Runs one case (all its repeats) and writes its result file(s).
pub async fn run_case(
    planned: &Planned,
    case: &Case,
    resolved: &Resolved,
    dir: &Path,
    progress: Progress,
    ctl: &RunControl,
) -> CaseOutcome {
    let plan = &planned.plan;
    let svc = &plan.services[&case.service];
    let repeats = plan.execution.repeats.max(1);
    // A repeat-sharded run owns some of the repeats; each gets its own file for the merge.
    let reps: Vec<u64> = case
        .repeats
        .clone()
        .unwrap_or_else(|| (1..=repeats).collect());
    let rep_files = repeats > 1 || case.repeats.is_some();
    // Like vLLM's sweep: start each case with a cold prefix cache, so a case does not
    // measure the prompts of the one before. Not every server has the endpoint: a
    // refusal is recorded and warned about.
    let prepared = Prepared::before_case(resolved).await;
    // The plan's SLOs with the service's own (see `Planned::slos_for`).
    let slos = planned.slos_for(&case.service);
    // The wording the service accepted fills what the plan left unset.
    let params = preflight::shaped(&case.params, resolved.found.as_ref());
    let mut results: Vec<Map<String, Value>> = Vec::new();
    let mut problems = Vec::new();
    let mut ended = None;
    for rep in reps {
        let opts = RunOptions {
            progress: progress.bar,
            progress_lines: progress.lines,
            label: case.id.clone(),
            stop: ctl.case_stop(),
            deadline: plan.execution.timeout.map(|t| Instant::now() + t.0),
            // Dataset files are relative to the plan's folder, as `validate` reads them.
            data_dir: planned.source.dir.clone(),
            timeslice: plan.report.timeslice.map(|d| d.0.as_secs_f64()),
            steady_min_requests: plan
                .report
                .steady_min_requests
                .unwrap_or(crate::metrics::window::MIN_STEADY_REQUESTS),
            oversaturation: crate::metrics::oversaturation::Settings::of(
                &plan.execution.oversaturation,
            ),
            stop_on_oversaturation: plan
                .execution
                .stop_on
                .contains(&crate::plan::settings::StopOn::Oversaturation),
            ..RunOptions::default()
        };
        let res = match execute(resolved, svc, &params, &opts).await {
            Ok(r) => r,
            Err(e) => {
                let status = if opts.deadline.is_some_and(|d| Instant::now() >= d) {
                    Status::TimedOut
                } else if opts.stop.draining() {
                    Status::Interrupted
                } else {
                    Status::Failed
                };
                return CaseOutcome {
                    status,
                    ..CaseOutcome::failed(e.to_string())
                };
            }
        };
        problems.extend(res.problems());
        let header = Header {
            date: timefmt::stamp_dash(SystemTime::now()),
            label: Some(case.id.clone()),
            model_id: resolved.model_root.clone(),
            tokenizer_id: Some(resolved.tokenizer_id.clone()),
        };
        let mut extras = res.extras(&params, &prepared);
        extras.insert("case_id".into(), json!(case.id));
        extras.insert("service".into(), json!(case.service));
        extras.insert("repeat".into(), json!(rep));
        extras.insert("params".into(), crate::redact::redacted(&params));
        let mut result = res.result_json(&header, &params, plan.execution.save_detailed, extras);
        // Judged on the file (another client's result on its own numbers, as a merge
        // judges): the whole run or its steady window, flagged where it is not steady or
        // the machine was busy.
        let judged = crate::results::judge::judge(
            &slos,
            crate::results::read::CaseFile::new(res.raw.as_ref().unwrap_or(&result)),
            planned.slo_measure,
            plan.report.busy_thresholds(),
        );
        if let Some(Value::Object(b)) = result.get_mut("benchplan") {
            b.insert("slo_verdicts".into(), json!(judged));
        }
        if rep_files {
            let path = dir.join(format!("{}.rep{rep}.json", case.id));
            if let Err(e) = write_atomic(&path, &json_bytes(&Value::Object(result.clone()))) {
                return CaseOutcome::unwritten(&path, e);
            }
        }
        results.push(result);
        if res.run.interrupted {
            let a = res.run.accounting;
            let what = format!(
                "{} completed, {} failed, {} cancelled of {} scheduled",
                a.completed, a.failed, a.cancelled, a.scheduled
            );
            ended = Some(if res.run.timed_out {
                let t = plan.execution.timeout.map_or(0.0, |t| t.0.as_secs_f64());
                (
                    Status::TimedOut,
                    format!(
                        "the case did not finish within {t:.0} s; the partial result holds what finished ({what})"
                    ),
                )
            } else {
                (
                    Status::Interrupted,
                    format!("interrupted; the partial result holds what finished ({what})"),
                )
            });
            break;
        }
    }
    let result = if results.len() == 1 && !rep_files {
        results.pop().expect("one result")
    } else {
        crate::results::repeats::combine(&results)
    };
    let path = dir.join(format!("{}.json", case.id));
    if let Err(e) = write_atomic(&path, &json_bytes(&Value::Object(result.clone()))) {
        return CaseOutcome::unwritten(&path, e);
    }
    // The timeslices beside it, for a spreadsheet (`report.timeslice`).
    if let Some(csv) = crate::report::csv::timeslices_csv(&result) {
        let slices = dir.join(format!("{}.timeslices.csv", case.id));
        let written = csv
            .map_err(std::io::Error::other)
            .and_then(|t| write_atomic(&slices, t.as_bytes()));
        if let Err(e) = written {
            return CaseOutcome::unwritten(&slices, e);
        }
    }
    let (status, error) = match ended {
        Some((s, e)) => (s, Some(e)),
        None => (Status::Ok, None),
    };
    CaseOutcome {
        result: Some(result),
        error,
        status,
        problems,
        write_failed: false,
    }
}
