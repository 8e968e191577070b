//! Runs one case against one target: ready check, smoke request, warmups, then the
//! measured requests on their precomputed schedule under the concurrency cap.
//!
//! A dedicated thread releases requests at their scheduled times (OS sleeps are
//! precise to tens of microseconds; tokio's timer rounds to milliseconds) and hands
//! each to the runtime. Each request records when it was scheduled, released, got a
//! concurrency slot and was sent, so schedule lag and client queueing are reported.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::Semaphore;

use super::schedule::{ScheduleSpec, arrival_offsets, rate_at};
use crate::client::backend::RequestInput;
use crate::client::request::{Target, send_input};
use crate::metrics::record::RequestRecord;
use crate::metrics::sample::Sample;
use crate::plan::CaseParams;

/// How a case runs, beyond its parameters.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Send one unmeasured request first and fail the case if it cannot succeed.
    pub smoke: bool,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// Set to stop sending new requests (Ctrl-C).
    pub stop: Arc<AtomicBool>,
    /// How long to wait for requests in flight after a stop.
    pub grace: Duration,
    /// Prefix of `x-request-id`.
    pub request_id_prefix: String,
    /// Open the connections the run will use before it starts, so TCP set-up is not
    /// measured as server latency (a production client keeps its connections warm).
    pub prewarm_connections: bool,
    /// Dataset file paths are relative to this folder (the plan's).
    pub data_dir: std::path::PathBuf,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            smoke: true,
            progress: false,
            stop: Arc::new(AtomicBool::new(false)),
            grace: Duration::from_secs(5),
            request_id_prefix: format!("benchplan-{:08x}-", std::process::id()),
            prewarm_connections: true,
            data_dir: std::path::PathBuf::from("."),
        }
    }
}

/// The smoke request's result: reported, never measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Smoke {
    pub ok: bool,
    pub latency_ms: f64,
    pub attempts: u32,
    pub error: Option<String>,
}

/// A whole request rate a ramp-up reached, and when (vLLM's `rps_change_events`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpsChange {
    pub rps: i64,
    pub at: SystemTime,
}

/// What running a case produced.
#[derive(Debug)]
pub struct CaseRun {
    pub records: Vec<RequestRecord>,
    /// The moment the records' times count from.
    pub started: Instant,
    /// Connections opened before the measured requests.
    pub prewarmed: usize,
    /// Ramp-up runs: each whole rate reached (empty otherwise).
    pub rps_change_events: Vec<RpsChange>,
    /// Seconds from the first release to the last answer.
    pub duration: f64,
    pub smoke: Option<Smoke>,
    pub warmups_failed: u64,
    /// Stopped early (Ctrl-C): the records hold what finished.
    pub interrupted: bool,
    /// Multi-turn cases: the planned turns of each conversation (empty otherwise).
    pub planned_turns: Vec<u32>,
}

/// Why a case could not be measured at all.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the endpoint was not ready within {0:.0} s: {1}")]
    NotReady(f64, String),
    #[error("the smoke request failed {attempts} times; last error: {error}")]
    Smoke { attempts: u32, error: String },
    #[error("the case has no requests")]
    Empty,
}

async fn one(target: &Target, params: &CaseParams, input: &RequestInput) -> Sample {
    send_input(target, params, input, None, None).await.sample
}

fn last_error(o: &Sample) -> String {
    o.error.as_ref().map_or_else(
        || "unknown error".into(),
        |e| format!("{}: {}", e.kind, e.message),
    )
}

/// The case's arrival offsets (seconds) for `n` arrivals.
pub(crate) fn schedule(params: &CaseParams, n: usize) -> Vec<f64> {
    arrival_offsets(&schedule_spec(params, n))
}

fn schedule_spec(params: &CaseParams, n: usize) -> ScheduleSpec {
    ScheduleSpec {
        num_requests: n,
        rate: params.request_rate.0,
        burstiness: params.burstiness.0,
        ramp: params.ramp_up_strategy.map(|s| {
            (
                s,
                params.ramp_up_start_rps.unwrap_or(0.0),
                params.ramp_up_end_rps.unwrap_or(0.0),
            )
        }),
        seed: params.seed,
    }
}

/// Sleeps precisely until `deadline` (long gaps in slices, so a stop is noticed within
/// 100 ms); false when a stop came first.
pub(crate) fn wait_unless_stopped(deadline: Instant, stop: &AtomicBool) -> bool {
    while deadline.saturating_duration_since(Instant::now()) > Duration::from_millis(100)
        && !stop.load(Ordering::Relaxed)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    crate::clock::sleep_until(deadline);
    !stop.load(Ordering::Relaxed)
}

/// Put before the smoke request's texts (see `RequestInput::with_prefix`).
pub const SMOKE_PREFIX: &str = "benchplan smoke check. ";

/// The unmeasured requests before a run: the ready check and the warmups send `first`
/// as vLLM sends its first request; the smoke request sends a prefixed copy.
pub(crate) async fn prepare(
    target: &Arc<Target>,
    params: &Arc<CaseParams>,
    first: &RequestInput,
    sem: Option<&Arc<Semaphore>>,
    opts: &RunOptions,
) -> Result<(Option<Smoke>, u64), RunError> {
    let ready = params.ready_check_timeout.as_secs_f64();
    if ready > 0.0 {
        let deadline = Instant::now() + Duration::from_secs_f64(ready);
        loop {
            let o = one(target, params, first).await;
            if o.success {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(RunError::NotReady(ready, last_error(&o)));
            }
            tokio::time::sleep((deadline - now).min(Duration::from_secs(5))).await;
        }
    }

    let mut smoke = None;
    if opts.smoke {
        // benchplan's own check (vLLM sends none): prefixed, so it warms no cache
        // block a measured request would reuse.
        let smoke_input = first.with_prefix(SMOKE_PREFIX);
        let mut attempts = 0;
        loop {
            attempts += 1;
            let t = Instant::now();
            let o = one(target, params, &smoke_input).await;
            if o.success {
                smoke = Some(Smoke {
                    ok: true,
                    latency_ms: t.elapsed().as_secs_f64() * 1e3,
                    attempts,
                    error: None,
                });
                break;
            }
            // Transient errors (a 429, an injected fault) get two more tries; a dead endpoint fails the case.
            if attempts >= 3 {
                return Err(RunError::Smoke {
                    attempts,
                    error: last_error(&o),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    let mut warmups_failed = 0;
    if params.num_warmups > 0 {
        let tasks: Vec<_> = (0..params.num_warmups)
            .map(|_| {
                let (target, params, first, sem) =
                    (target.clone(), params.clone(), first.clone(), sem.cloned());
                tokio::spawn(async move {
                    let _permit = match &sem {
                        Some(s) => Some(s.acquire().await.expect("semaphore open")),
                        None => None,
                    };
                    one(&target, &params, &first).await.success
                })
            })
            .collect();
        for t in tasks {
            if !t.await.unwrap_or(false) {
                warmups_failed += 1;
            }
        }
    }

    Ok((smoke, warmups_failed))
}

/// Runs the case. `inputs` holds one request per prompt (already built).
pub async fn run_case(
    target: Arc<Target>,
    params: Arc<CaseParams>,
    inputs: Arc<Vec<RequestInput>>,
    opts: &RunOptions,
) -> Result<CaseRun, RunError> {
    let first = inputs.first().ok_or(RunError::Empty)?.clone();
    let sem = params
        .max_concurrency
        .map(|n| Arc::new(Semaphore::new(n as usize)));
    let (smoke, warmups_failed) = prepare(&target, &params, &first, sem.as_ref(), opts).await?;

    let n = inputs.len();
    let prewarmed = if opts.prewarm_connections {
        prewarm(
            &target,
            params.max_concurrency.map_or(n, |c| (c as usize).min(n)),
        )
        .await
    } else {
        0
    };
    // A trace's own times replace the schedule when every request has one.
    let replayed: Option<Vec<f64>> = inputs.iter().map(|i| i.arrival).collect();
    let offsets = Arc::new(replayed.unwrap_or_else(|| schedule(&params, n)));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<RequestRecord>();
    let handle = tokio::runtime::Handle::current();
    let start = Instant::now();
    // vLLM's `rps_change_events` for a ramp-up: the start rate, then each whole rate
    // the ramp reaches, with the wall-clock time of the release that reached it.
    let ramp = params
        .ramp_up_strategy
        .is_some()
        .then(|| schedule_spec(&params, n));
    let dispatcher = {
        let (target, params, inputs, offsets, stop, prefix) = (
            target.clone(),
            params.clone(),
            inputs.clone(),
            offsets.clone(),
            opts.stop.clone(),
            opts.request_id_prefix.clone(),
        );
        std::thread::Builder::new()
            .name("dispatcher".into())
            .spawn(move || {
                crate::clock::precise_timers();
                let mut rps_changes = Vec::new();
                let mut last_int = ramp.map(|r| {
                    let first = rate_at(&r, 0).max(0.0) as i64;
                    rps_changes.push(RpsChange {
                        rps: first,
                        at: SystemTime::now(),
                    });
                    first
                });
                for i in 0..n {
                    if !wait_unless_stopped(start + Duration::from_secs_f64(offsets[i]), &stop) {
                        break;
                    }
                    let dispatched = start.elapsed().as_secs_f64();
                    if let (Some(r), Some(last)) = (&ramp, last_int.as_mut()) {
                        let now = rate_at(r, i) as i64;
                        if now > *last {
                            let at = SystemTime::now();
                            rps_changes.extend((*last + 1..=now).map(|rps| RpsChange { rps, at }));
                            *last = now;
                        }
                    }
                    let (target, params, inputs, sem, tx, id) = (
                        target.clone(),
                        params.clone(),
                        inputs.clone(),
                        sem.clone(),
                        tx.clone(),
                        format!("{prefix}{i}"),
                    );
                    let scheduled = offsets[i];
                    handle.spawn(async move {
                        let _permit = match &sem {
                            Some(s) => Some(s.acquire().await.expect("semaphore open")),
                            None => None,
                        };
                        let input = &inputs[i];
                        let outcome = send_input(&target, &params, input, Some(&id), None).await;
                        let since_start = |t: Instant| (t - start).as_secs_f64();
                        let sent = outcome
                            .sent
                            .map_or_else(|| since_start(Instant::now()), since_start);
                        let _ = tx.send(RequestRecord {
                            index: i,
                            scheduled,
                            dispatched,
                            start: sent,
                            written: outcome.written.map(since_start),
                            connect: outcome.connect.map(|d| d.as_secs_f64()),
                            prompt_len: input.prompt_len,
                            expected_output_len: input.output_len,
                            sample: outcome.sample,
                            turn: None,
                        });
                    });
                }
                rps_changes
            })
            .expect("spawn the dispatcher thread")
    };

    let (records, interrupted) = collect(rx, n, opts, start).await;
    let duration = start.elapsed().as_secs_f64();
    let rps_change_events = dispatcher.join().unwrap_or_default();
    Ok(CaseRun {
        records,
        started: start,
        prewarmed,
        rps_change_events,
        duration,
        smoke,
        warmups_failed,
        interrupted,
        planned_turns: vec![],
    })
}

/// Gathers records, with a progress bar, until every sender is done or a stop's grace
/// runs out; sorted by index.
pub(crate) async fn collect(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<RequestRecord>,
    n: usize,
    opts: &RunOptions,
    start: Instant,
) -> (Vec<RequestRecord>, bool) {
    let bar = opts.progress.then(|| progress_bar(n as u64));
    let mut records = Vec::with_capacity(n);
    let mut interrupted = false;
    let mut stopped_at: Option<Instant> = None;
    let (mut errors, mut tokens) = (0u64, 0u64);
    loop {
        match tokio::time::timeout(Duration::from_millis(100), rx.recv()).await {
            Ok(Some(r)) => {
                if !r.sample.success {
                    errors += 1;
                }
                tokens += r
                    .sample
                    .usage_completion
                    .unwrap_or(u64::from(r.sample.chunks));
                if let Some(b) = &bar {
                    b.inc(1);
                    let secs = start.elapsed().as_secs_f64().max(1e-9);
                    b.set_message(format!(
                        "errors {errors} | {:.1} req/s | {:.0} tok/s",
                        records.len() as f64 / secs,
                        tokens as f64 / secs
                    ));
                }
                records.push(r);
            }
            Ok(None) => break, // every request answered and the dispatcher is done
            Err(_) => {}
        }
        if opts.stop.load(Ordering::Relaxed) {
            interrupted = true;
            let at = *stopped_at.get_or_insert_with(Instant::now);
            if at.elapsed() >= opts.grace {
                break; // requests still in flight are abandoned
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    records.sort_by_key(|r| r.index);
    (records, interrupted)
}

/// Opens up to `k` pooled connections (reqwest: with concurrent GETs of /v1/models);
/// best effort. Returns how many are open for the run (reqwest: how many GETs answered).
pub(crate) async fn prewarm(target: &Arc<Target>, k: usize) -> usize {
    let k = k.min(4096);
    if k <= 1 {
        return 0;
    }
    if let Some(native) = &target.native {
        native.pool.prewarm(k).await;
        return native.pool.idle_count();
    }
    let url = format!("{}/v1/models", target.base_url);
    let tasks: Vec<_> = (0..k)
        .map(|_| {
            let (client, url, headers) =
                (target.client.clone(), url.clone(), target.headers.clone());
            tokio::spawn(async move {
                match client
                    .get(&url)
                    .headers(headers)
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await
                {
                    // Drain, so the connection returns to the pool.
                    Ok(r) => r.bytes().await.is_ok(),
                    Err(_) => false,
                }
            })
        })
        .collect();
    let mut open = 0;
    for t in tasks {
        open += usize::from(t.await.unwrap_or(false));
    }
    open
}

fn progress_bar(n: u64) -> indicatif::ProgressBar {
    let b = indicatif::ProgressBar::new(n);
    b.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:30} {pos}/{len} requests | {msg} | {elapsed}",
        )
        .expect("valid template"),
    );
    b
}
