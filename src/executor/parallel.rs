//! Running the cases: one at a time in plan order, or up to `execution.parallel` at
//! once, but never two on one service unless the plan allows it (two loads on one
//! endpoint disturb each other's measurements). A case whose service is unavailable
//! fails without traffic; after an interrupt no new case starts.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use super::case::{CaseOutcome, Status, run_case};
use super::control::RunControl;
use super::resume::Finished;
use crate::planner::{Case, Planned};
use crate::results::manifest::{CaseEntry, Manifest};
use crate::results::read::CaseFile;
use crate::service::fleet::{Readiness, Services};
use crate::service::target::Resolved;
use crate::slo::Measured;

/// `1h02m`, `3m20s`, `12s`.
fn hms(secs: f64) -> String {
    let s = secs.round() as u64;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// A case's result could not be written: say which and why (even when quiet), and
/// stop the traffic.
fn stop_for_disk(o: &CaseOutcome, ctl: &RunControl) {
    eprintln!(
        "stopping: {}; no more traffic is sent (what it measured would be lost)",
        o.error
            .as_deref()
            .unwrap_or("a result could not be written")
    );
    ctl.halt();
}

/// Prints a progress line (unless quiet) and appends it to
/// bench_results/logs/<run folder>.log.
pub fn log(dir: &Path, line: &str, quiet: bool) {
    // A case's line may carry a server's error text: no control character goes out.
    let line = &line
        .split('\n')
        .map(crate::escape::console)
        .collect::<Vec<_>>()
        .join("\n");
    if !quiet {
        eprintln!("{line}");
    }
    let (Some(batch), Some(name)) = (dir.parent().and_then(Path::parent), dir.file_name()) else {
        return;
    };
    let logs = batch.join("logs");
    if std::fs::create_dir_all(&logs).is_ok() {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logs.join(format!("{}.log", name.to_string_lossy())))
        {
            let _ = std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes());
        }
    }
}

/// The manifest's entry for a case.
pub fn manifest_entry(id: &str, service: &str, o: &CaseOutcome) -> CaseEntry {
    CaseEntry {
        id: id.into(),
        service: service.into(),
        // Measured, and marked: its queue grew without bound.
        status: match o
            .result
            .as_ref()
            .and_then(|r| CaseFile::new(r).oversaturation())
        {
            Some(_) => crate::results::manifest::OVERSATURATED.into(),
            None => o.status.as_str().into(),
        },
        file: o.result.as_ref().map(|_| format!("{id}.json")),
        error: o.error.clone(),
        slo_pass: o.result.as_ref().and_then(|r| CaseFile::new(r).slos_pass()),
        ..CaseEntry::default()
    }
}

fn record(manifest: &mut Manifest, i: usize, id: &str, service: &str, o: &CaseOutcome, dir: &Path) {
    manifest.cases[i] = manifest_entry(id, service, o);
    if let Err(e) = manifest.write(dir) {
        eprintln!("warning: cannot update the manifest: {e}");
    }
}

/// The line after a case: what it measured, how long it took and what is left.
fn done_line(o: &CaseOutcome, took: f64, eta: Option<f64>) -> String {
    let what = match (&o.result, o.status) {
        (Some(r), _) => {
            // A repeated case's counts are means per run: shown whole.
            let r = CaseFile::new(r);
            let n = |x: Option<f64>| x.map_or(0, |n| n.round() as u64);
            format!("{} ok, {} failed", n(r.completed()), n(r.failed()))
        }
        (None, s) => s.as_str().to_string(),
    };
    let eta = eta.map_or_else(String::new, |s| format!(", ETA {}", hms(s)));
    format!("  {what} in {}{eta}", hms(took))
}

/// The sweep points a stop on over-saturation rules out: each over-saturated case's
/// service, its other matrix values and its rate. A case of the same service and values
/// at a higher rate would over-saturate too, so it is skipped (GPU hours saved).
#[derive(Default)]
struct Saturated(Vec<SweepPoint>);

/// A point of a sweep: its service, its other matrix values (key, value) and its rate.
type SweepPoint = (String, Vec<(String, String)>, f64);

impl Saturated {
    /// A case's matrix values other than its rate.
    fn others(case: &crate::planner::Case) -> Vec<(String, String)> {
        case.assignments
            .iter()
            .filter(|a| &*a.key != "request_rate")
            .map(|a| (a.key.to_string(), a.value.to_string()))
            .collect()
    }

    /// Notes `case` when its outcome over-saturated and the plan stops on it.
    fn note(&mut self, planned: &Planned, case: &crate::planner::Case, o: &CaseOutcome) {
        let stops = planned
            .plan
            .execution
            .stop_on
            .contains(&crate::plan::settings::StopOn::Oversaturation);
        let over = o
            .result
            .as_ref()
            .is_some_and(|r| CaseFile::new(r).oversaturation().is_some());
        if stops && over {
            self.0.push((
                case.service.clone(),
                Saturated::others(case),
                case.params.request_rate.0,
            ));
        }
    }

    /// Why `case` is not run: a lower rate of its sweep over-saturated.
    fn rules_out(&self, case: &crate::planner::Case) -> Option<String> {
        let rate = case.params.request_rate.0;
        let others = Saturated::others(case);
        self.0
            .iter()
            .find(|(s, o, r)| *s == case.service && *o == others && rate > *r)
            .map(|(_, _, r)| {
                format!(
                    "skipped: the same sweep over-saturated at {r} req/s, below this case's {rate} req/s (execution.stop_on = [\"oversaturation\"])"
                )
            })
    }
}

/// What the cases of a run share.
pub struct Scope<'a> {
    pub planned: &'a Planned,
    pub services: &'a Services,
    /// Cases an earlier run finished (resume).
    pub done: &'a Finished,
    pub dir: &'a Path,
    pub progress: super::case::Progress,
    pub quiet: bool,
    pub ctl: &'a Arc<RunControl>,
}

/// Runs every case not in `done`; returns one outcome per case, in plan order.
pub async fn run_all(scope: Scope<'_>, manifest: &mut Manifest) -> Vec<CaseOutcome> {
    let Scope {
        planned,
        services,
        done,
        dir,
        progress,
        quiet,
        ctl,
    } = scope;
    let ex = &planned.plan.execution;
    let total = planned.cases.len();
    let mut out: Vec<Option<CaseOutcome>> = planned
        .cases
        .iter()
        .map(|c| done.get(&c.id).map(|r| CaseOutcome::finished(r.clone())))
        .collect();
    let todo: Vec<usize> = (0..total).filter(|i| out[*i].is_none()).collect();
    // A case of an unavailable service fails at once, without traffic.
    let mut runnable = Vec::new();
    for i in todo {
        let case = &planned.cases[i];
        match &services[&case.service] {
            Readiness::Ready(_) | Readiness::WithItsCases => runnable.push(i),
            Readiness::Unavailable(e) => {
                let o = unavailable(&case.service, e);
                record(manifest, i, &case.id, &case.service, &o, dir);
                out[i] = Some(o);
            }
        }
    }
    // Simulators that start with their cases: up from a service's first case to its
    // last, at most `parallel` at a time (see `fleet::MAX_LIVE_SIMS`).
    let mut sims = LiveSims::new(services, planned, &runnable);
    // ETA from the measured pace, per request: cases differ in size.
    let prompts = |i: usize| planned.cases[i].params.num_prompts.max(1) as f64;
    let mut left: f64 = runnable.iter().map(|&i| prompts(i)).sum();
    let (mut spent, mut measured) = (0.0f64, 0.0f64);
    let t0 = std::time::Instant::now();

    let mut saturated = Saturated::default();
    if ex.parallel <= 1 {
        for (n, &i) in runnable.iter().enumerate() {
            let case = &planned.cases[i];
            if ctl.stopping() {
                break;
            }
            if let Some(why) = saturated.rules_out(case) {
                log(
                    dir,
                    &format!("[{}/{total}] {}: {why}", i + 1, case.id),
                    quiet,
                );
                let o = CaseOutcome::skipped(why);
                record(manifest, i, &case.id, &case.service, &o, dir);
                left -= prompts(i);
                out[i] = Some(o);
                continue;
            }
            if n > 0 && !ex.cooldown.0.is_zero() {
                tokio::time::sleep(ex.cooldown.0).await;
            }
            log(dir, &format!("[{}/{total}] {}", i + 1, case.id), quiet);
            let started = std::time::Instant::now();
            let o = match sims.get(planned, case).await {
                Ok(r) => run_case(planned, case, &r, dir, progress, ctl).await,
                Err(e) => unavailable(&case.service, &e),
            };
            sims.done(&case.service);
            let took = started.elapsed().as_secs_f64();
            left -= prompts(i);
            spent += took;
            measured += prompts(i);
            let eta = (left > 0.0).then(|| spent / measured * left);
            log(dir, &done_line(&o, took, eta), quiet);
            if let Some(e) = &o.error {
                log(dir, &format!("  case {}: {e}", o.status.as_str()), quiet);
            }
            record(manifest, i, &case.id, &case.service, &o, dir);
            saturated.note(planned, case, &o);
            let failed = matches!(o.status, Status::Failed | Status::TimedOut);
            if o.write_failed {
                stop_for_disk(&o, ctl);
            }
            out[i] = Some(o);
            if failed && !ex.continue_on_error {
                eprintln!("stopping: continue_on_error is off");
                break;
            }
        }
    } else {
        if ex.allow_shared_service {
            eprintln!(
                "warning: parallel cases may share a service; their loads disturb each other, so latencies measured together are not comparable with a run alone"
            );
        }
        let planned = Arc::new(planned.clone());
        let dir_owned = dir.to_path_buf();
        let mut pending: Vec<usize> = runnable;
        let mut busy: HashSet<String> = HashSet::new();
        let mut set = tokio::task::JoinSet::new();
        let mut stop = false;
        while !pending.is_empty() || !set.is_empty() {
            // Start what may start: a free slot and, unless allowed, a free service.
            while !stop && !ctl.stopping() && set.len() < ex.parallel as usize {
                let Some(pos) = pending.iter().position(|&i| {
                    ex.allow_shared_service || !busy.contains(&planned.cases[i].service)
                }) else {
                    break;
                };
                let i = pending.remove(pos);
                let case = planned.cases[i].clone();
                if let Some(why) = saturated.rules_out(&case) {
                    log(
                        &dir_owned,
                        &format!("[{}/{total}] {}: {why}", i + 1, case.id),
                        quiet,
                    );
                    let o = CaseOutcome::skipped(why);
                    record(manifest, i, &case.id, &case.service, &o, &dir_owned);
                    left -= prompts(i);
                    out[i] = Some(o);
                    continue;
                }
                busy.insert(case.service.clone());
                log(
                    &dir_owned,
                    &format!("[{}/{total}] {} (started)", i + 1, case.id),
                    quiet,
                );
                let r = sims.get(&planned, &case).await;
                let (planned, dir, ctl) = (planned.clone(), dir_owned.clone(), ctl.clone());
                set.spawn(async move {
                    let t = std::time::Instant::now();
                    // Cases side by side: no bars (they would overwrite each other);
                    // plain lines carry their case's id.
                    let progress = super::case::Progress {
                        bar: false,
                        ..progress
                    };
                    let o = match r {
                        Ok(r) => run_case(&planned, &case, &r, &dir, progress, &ctl).await,
                        Err(e) => unavailable(&case.service, &e),
                    };
                    (i, o, t.elapsed().as_secs_f64())
                });
            }
            let Some(joined) = set.join_next().await else {
                break;
            };
            let (i, o, took) = match joined {
                Ok(x) => x,
                Err(e) => {
                    // A case task that panicked: a bug, reported; the others go on.
                    eprintln!("error: a case task failed: {e}");
                    continue;
                }
            };
            let case = &planned.cases[i];
            busy.remove(&case.service);
            sims.done(&case.service);
            left -= prompts(i);
            measured += prompts(i);
            let rate = t0.elapsed().as_secs_f64() / measured;
            let eta = (left > 0.0).then_some(rate * left);
            log(
                dir,
                &format!(
                    "[{}/{total}] {} (finished){}",
                    i + 1,
                    case.id,
                    done_line(&o, took, eta)
                ),
                quiet,
            );
            if let Some(e) = &o.error {
                log(
                    dir,
                    &format!("  case {} {}: {e}", case.id, o.status.as_str()),
                    quiet,
                );
                stop |=
                    matches!(o.status, Status::Failed | Status::TimedOut) && !ex.continue_on_error;
            }
            record(manifest, i, &case.id, &case.service, &o, dir);
            saturated.note(&planned, case, &o);
            if o.write_failed && !ctl.halted() {
                stop_for_disk(&o, ctl);
            }
            out[i] = Some(o);
            if (stop || ctl.stopping()) && set.is_empty() {
                break;
            }
        }
    }
    out.into_iter()
        .map(|o| {
            o.unwrap_or_else(|| {
                CaseOutcome::not_run(if ctl.halted() {
                    "not run: an earlier result could not be written"
                } else if ctl.interrupted() {
                    "not run: the run was interrupted"
                } else {
                    "not run: an earlier case failed and continue_on_error is off"
                })
            })
        })
        .collect()
}

/// A case of an unavailable service: failed at once, without traffic.
fn unavailable(service: &str, why: &str) -> CaseOutcome {
    CaseOutcome::failed(format!("service `{service}` is unavailable: {why}"))
}

/// The services of a run as its cases take them: ready ones as they are, and
/// simulators that start with their service's first case ([`Readiness::WithItsCases`])
/// started then and dropped (stopped, once no case holds them) after its last.
struct LiveSims<'a> {
    services: &'a Services,
    live: HashMap<String, Result<Arc<Resolved>, String>>,
    /// Cases of each simulator service still to run.
    left: HashMap<String, usize>,
}

impl<'a> LiveSims<'a> {
    fn new(services: &'a Services, planned: &Planned, runnable: &[usize]) -> LiveSims<'a> {
        let mut left = HashMap::new();
        for &i in runnable {
            let s = &planned.cases[i].service;
            if matches!(services.get(s), Some(Readiness::WithItsCases)) {
                *left.entry(s.clone()).or_insert(0) += 1;
            }
        }
        LiveSims {
            services,
            live: HashMap::new(),
            left,
        }
    }

    /// `case`'s service, started now if it starts with its cases.
    async fn get(&mut self, planned: &Planned, case: &Case) -> Result<Arc<Resolved>, String> {
        match &self.services[&case.service] {
            Readiness::Ready(r) => Ok(r.clone()),
            Readiness::Unavailable(e) => Err(e.clone()),
            Readiness::WithItsCases => {
                if !self.live.contains_key(&case.service) {
                    let r = crate::service::fleet::bring_up(planned, case).await;
                    self.live.insert(case.service.clone(), r);
                }
                self.live[&case.service].clone()
            }
        }
    }

    /// One case of `service` ended: after its last, its simulator is let go.
    fn done(&mut self, service: &str) {
        if let Some(n) = self.left.get_mut(service) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.live.remove(service);
            }
        }
    }
}
