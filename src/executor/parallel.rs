//! Running the cases: one at a time in plan order, or up to `execution.parallel` at
//! once, but never two on one service unless the plan allows it (two loads on one
//! endpoint disturb each other's measurements).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{CaseOutcome, json_bytes, run_case};
use crate::load::target::Resolved;
use crate::planner::Planned;
use crate::results::write::write_atomic;

/// `1h02m`, `3m20s`, `12s`.
fn hms(secs: f64) -> String {
    let s = secs.round() as u64;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// Prints a progress line and appends it to bench_results/logs/<run folder>.log.
pub fn log(dir: &Path, line: &str) {
    eprintln!("{line}");
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

fn record(manifest: &mut Value, i: usize, id: &str, service: &str, o: &CaseOutcome, dir: &Path) {
    let slo_pass =
        o.0.as_ref()
            .and_then(|r| r.get("benchplan"))
            .and_then(|b| b.get("slo_verdicts"))
            .and_then(Value::as_array)
            .map(|v| v.iter().all(|x| x.get("pass") == Some(&Value::Bool(true))));
    manifest["cases"][i] = json!({
        "id": id, "service": service, "status": if o.0.is_some() { "ok" } else { "failed" },
        "file": o.0.as_ref().map(|_| format!("{id}.json")), "error": o.1, "slo_pass": slo_pass,
    });
    if let Err(e) = write_atomic(&dir.join("manifest.json"), &json_bytes(manifest)) {
        eprintln!("warning: cannot update the manifest: {e}");
    }
}

/// Runs every case not in `done`; returns one outcome per case, in plan order.
pub async fn run_all(
    planned: &Planned,
    resolved: &HashMap<String, Arc<Resolved>>,
    done: &HashMap<String, Map<String, Value>>,
    dir: &Path,
    progress: bool,
    manifest: &mut Value,
) -> Vec<CaseOutcome> {
    let ex = &planned.plan.execution;
    let total = planned.cases.len();
    let mut out: Vec<Option<CaseOutcome>> = planned
        .cases
        .iter()
        .map(|c| done.get(&c.id).map(|r| (Some(r.clone()), None)))
        .collect();
    let todo: Vec<usize> = (0..total).filter(|i| out[*i].is_none()).collect();

    if ex.parallel <= 1 {
        let t0 = std::time::Instant::now();
        for (n, &i) in todo.iter().enumerate() {
            let case = &planned.cases[i];
            if n > 0 && !ex.cooldown.0.is_zero() {
                tokio::time::sleep(ex.cooldown.0).await;
            }
            let eta =
                (n > 0).then(|| t0.elapsed().as_secs_f64() / n as f64 * (todo.len() - n) as f64);
            log(
                dir,
                &format!(
                    "[{}/{total}] {}{}",
                    i + 1,
                    case.id,
                    eta.map_or_else(String::new, |s| format!(" (ETA {})", hms(s)))
                ),
            );
            let o = run_case(planned, case, &resolved[&case.service], dir, progress).await;
            if let Some(e) = &o.1 {
                log(dir, &format!("  case failed: {e}"));
            }
            record(manifest, i, &case.id, &case.service, &o, dir);
            let failed = o.1.is_some();
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
        let mut pending: Vec<usize> = todo;
        let mut busy: HashSet<String> = HashSet::new();
        let mut set = tokio::task::JoinSet::new();
        let mut stop = false;
        while !pending.is_empty() || !set.is_empty() {
            // Start what may start: a free slot and, unless allowed, a free service.
            while !stop && set.len() < ex.parallel as usize {
                let Some(pos) = pending.iter().position(|&i| {
                    ex.allow_shared_service || !busy.contains(&planned.cases[i].service)
                }) else {
                    break;
                };
                let i = pending.remove(pos);
                let case = planned.cases[i].clone();
                busy.insert(case.service.clone());
                log(
                    &dir_owned,
                    &format!("[{}/{total}] {} (started)", i + 1, case.id),
                );
                let (planned, r, dir) = (
                    planned.clone(),
                    resolved[&case.service].clone(),
                    dir_owned.clone(),
                );
                set.spawn(async move {
                    let o = run_case(&planned, &case, &r, &dir, false).await;
                    (i, o)
                });
            }
            let Some(joined) = set.join_next().await else {
                break;
            };
            let (i, o) = joined.expect("a case task does not panic");
            let case = &planned.cases[i];
            busy.remove(&case.service);
            if let Some(e) = &o.1 {
                log(dir, &format!("  case {} failed: {e}", case.id));
                stop |= !ex.continue_on_error;
            }
            record(manifest, i, &case.id, &case.service, &o, dir);
            out[i] = Some(o);
            if stop && set.is_empty() {
                break;
            }
        }
    }
    out.into_iter()
        .map(|o| {
            o.unwrap_or((
                None,
                Some("not run: an earlier case failed and continue_on_error is off".into()),
            ))
        })
        .collect()
}
