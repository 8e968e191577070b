//! Runs one case against one target: the unmeasured requests first (`prepare`), then
//! the measured requests on their precomputed schedule under the concurrency cap.
//!
//! A dedicated thread releases requests at their scheduled times (OS sleeps are
//! precise to tens of microseconds; tokio's timer rounds to milliseconds) and hands
//! each to the runtime. Each request records when it was scheduled, released, got a
//! concurrency slot and was sent, so schedule lag and client queueing are reported.
//!
//! Every scheduled request ends as one record (completed, or failed with a kind; a
//! panic in the client is a `client_panic` failure) or is counted as cancelled when
//! the case stops early; the run checks that the counts add up. A stop drains (no new
//! sends) and, after the grace period or at the case's deadline, aborts what is in
//! flight, so nothing of a stopped case loads the server during the next one.

use crate::energy::source::Readings;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::Semaphore;

use super::guard::CatchPanic;
use super::options::{RunError, RunOptions};
pub use super::prepare::{SMOKE_PREFIX, Smoke};
use super::prepare::{panicked, prepare, prewarm};
use super::schedule::{ScheduleSpec, arrival_offsets, permits, rate_at};
use super::stop::Stop;
use crate::client::backend::RequestInput;
use crate::client::request::{Target, send_input};
use crate::metrics::record::RequestRecord;
use crate::plan::CaseParams;

/// How many connections to open before the run: what its schedule can have in flight.
/// Under a concurrency cap, the cap; at a finite rate, the arrivals of twice a request's
/// latency (the smoke request's, at least 1 s) with three standard deviations of
/// Poisson headroom; never more than the requests. One request a second needs a
/// handful, not one socket per request.
pub fn prewarm_count(p: &CaseParams, n: usize, latency_s: Option<f64>) -> usize {
    let cap = p.max_concurrency.map_or(n, |c| (c as usize).min(n));
    let rate = match p.ramp_up_strategy {
        Some(_) => p.ramp_up_end_rps.unwrap_or(f64::INFINITY),
        None => p.request_rate.0,
    };
    if !rate.is_finite() || rate <= 0.0 {
        return cap;
    }
    let window = latency_s.unwrap_or(1.0).max(1.0) * 2.0;
    let mean = rate * window;
    let k = (mean + 3.0 * mean.sqrt()).ceil() as usize + 1;
    k.min(cap)
}

/// A whole request rate a ramp-up reached, and when (vLLM's `rps_change_events`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpsChange {
    pub rps: i64,
    pub at: SystemTime,
}

/// Where every scheduled request went: `completed + failed + cancelled + skipped`
/// equals `scheduled` unless requests were lost (a bug, reported and exit 1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Accounting {
    pub scheduled: u64,
    pub completed: u64,
    pub failed: u64,
    /// Not sent, or abandoned in flight, because the case stopped early.
    pub cancelled: u64,
    /// Multi-turn: turns not sent because a failed turn ended their conversation.
    pub skipped: u64,
    /// Accounted for by none of the above.
    pub lost: u64,
}

impl Accounting {
    pub(crate) fn of(
        scheduled: u64,
        records: &[RequestRecord],
        skipped: u64,
        stopped: bool,
    ) -> Accounting {
        let completed = records.iter().filter(|r| r.sample.success).count() as u64;
        let failed = records.len() as u64 - completed;
        let rest = scheduled.saturating_sub(completed + failed + skipped);
        Accounting {
            scheduled,
            completed,
            failed,
            cancelled: if stopped { rest } else { 0 },
            skipped,
            lost: if stopped { 0 } else { rest },
        }
    }

    /// Every scheduled request accounted for.
    pub fn balanced(&self) -> bool {
        self.lost == 0
            && self.completed + self.failed + self.cancelled + self.skipped == self.scheduled
    }
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
    /// Stopped early (Ctrl-C or the deadline): the records hold what finished.
    pub interrupted: bool,
    /// The case's deadline passed while it ran.
    pub timed_out: bool,
    pub accounting: Accounting,
    /// Multi-turn cases: the planned turns of each conversation (empty otherwise).
    pub planned_turns: Vec<u32>,
    /// The server's own metrics over the measured requests, when it serves them.
    pub server_metrics: Option<crate::servermetrics::ServerMetrics>,
    /// The GPUs' energy readings around and during the measured requests, when the
    /// service names a source.
    pub energy: Option<crate::energy::source::Readings>,
    /// How busy the measuring machine was over the measured requests.
    pub machine: Option<super::machine::Machine>,
    /// An open-loop case whose queue grew without bound: when, and whether it was
    /// stopped there (see `metrics::oversaturation`).
    pub oversaturation: Option<crate::metrics::oversaturation::Detection>,
}

/// Reads the server's page before the measured requests start (after the smoke
/// request, warmups and prewarmed connections, which must not count).
pub(crate) async fn scrape_before(
    opts: &RunOptions,
) -> Option<(
    Arc<crate::servermetrics::Source>,
    Result<Vec<crate::servermetrics::parse::Series>, String>,
)> {
    let src = opts.server_metrics.clone()?;
    let page = src.fetch().await;
    Some((src, page))
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
pub(crate) fn wait_unless_stopped(deadline: Instant, stop: &Stop) -> bool {
    while deadline.saturating_duration_since(Instant::now()) > Duration::from_millis(100)
        && !stop.draining()
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    crate::clock::sleep_until(deadline);
    !stop.draining()
}

/// The record of a request whose client code panicked.
pub(crate) fn panic_record(
    index: usize,
    scheduled: f64,
    dispatched: f64,
    input: &RequestInput,
    message: String,
) -> RequestRecord {
    RequestRecord {
        index,
        scheduled,
        dispatched,
        start: dispatched,
        written: None,
        connect: None,
        prompt_len: input.prompt_len,
        expected_output_len: input.output_len,
        sample: panicked(message),
        turn: None,
    }
}

/// Runs the case. `inputs` holds one request per prompt (already built).
pub async fn run_case(
    target: Arc<Target>,
    params: Arc<CaseParams>,
    inputs: Arc<Vec<RequestInput>>,
    opts: &RunOptions,
) -> Result<CaseRun, RunError> {
    let mut first = inputs.first().ok_or(RunError::Empty)?.clone();
    // A trace's smoke request must not warm the prefix cache for its first row: a
    // different leading word keeps every block apart (as a conversation's does).
    if matches!(params.dataset, crate::plan::Dataset::Trace(_))
        && let crate::client::backend::Prompt::Text(t) = &mut first.prompt
    {
        *t = format!("warmup {t}");
    }
    let sem = params
        .max_concurrency
        .map(|n| Arc::new(Semaphore::new(permits(n))));
    let (smoke, warmups_failed) = prepare(&target, &params, &first, sem.as_ref(), opts).await?;

    let n = inputs.len();
    let prewarmed = if opts.prewarm_connections {
        let latency = smoke.as_ref().map(|s| s.latency_ms / 1e3);
        prewarm(&target, prewarm_count(&params, n, latency), opts).await?
    } else {
        0
    };
    // A trace's own times replace the schedule when every request has one.
    let replayed: Option<Vec<f64>> = inputs.iter().map(|i| i.arrival).collect();
    let offsets = Arc::new(replayed.unwrap_or_else(|| schedule(&params, n)));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<RequestRecord>();
    let handle = tokio::runtime::Handle::current();
    let before = scrape_before(opts).await;
    // Idle power first, when asked: the server has nothing in flight.
    let idle_watts = match &opts.energy {
        Some(src) => src.idle_watts().await,
        None => None,
    };
    // The energy counters' first reading, stamped against the case's start.
    let energy_start = Instant::now();
    let energy = match &opts.energy {
        Some(src) => Some(src.start(energy_start).await),
        None => None,
    };
    // How busy the machine is while the measured requests run (see `machine`).
    let watch = super::machine::Watch::start();
    let start = Instant::now();
    let scraping = before.map(|(src, page)| src.sample(page, start));
    // vLLM's `rps_change_events` for a ramp-up: the start rate, then each whole rate
    // the ramp reaches, with the wall-clock time of the release that reached it.
    let ramp = params
        .ramp_up_strategy
        .is_some()
        .then(|| schedule_spec(&params, n));
    let released = Arc::new(AtomicU64::new(0));
    let sent = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicU64::new(0));
    let dispatcher = {
        let released = released.clone();
        let sent = sent.clone();
        let finished = finished.clone();
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
                    released.fetch_add(1, Ordering::Relaxed);
                    let (sent, finished) = (sent.clone(), finished.clone());
                    let (target, params, inputs, sem, tx, id, stop) = (
                        target.clone(),
                        params.clone(),
                        inputs.clone(),
                        sem.clone(),
                        tx.clone(),
                        format!("{prefix}{i}"),
                        stop.clone(),
                    );
                    let scheduled = offsets[i];
                    let measure = {
                        let inputs = inputs.clone();
                        async move {
                            // A drained case sends nothing more: not even what waits for a slot.
                            let _permit = match &sem {
                                Some(s) => tokio::select! {
                                    biased;
                                    _ = stop.until_draining() => return None,
                                    p = s.acquire() => Some(p.expect("semaphore open")),
                                },
                                None => None,
                            };
                            if stop.draining() {
                                return None;
                            }
                            // Past the concurrency cap: on its way (in flight).
                            sent.fetch_add(1, Ordering::Release);
                            let input = &inputs[i];
                            // Boxed: the request's future is about 7 KB, and this task is
                            // built here and moved into the runtime's task cell, so
                            // unboxed it would be copied twice per request, into memory
                            // not yet touched when many requests start together.
                            let outcome = stop
                                .unless_aborted(Box::pin(send_input(
                                    &target,
                                    &params,
                                    input,
                                    Some(&id),
                                    None,
                                )))
                                .await?;
                            // Ended, counted while its slot is still held: the next
                            // request cannot be counted as sent before this one ends.
                            finished.fetch_add(1, Ordering::Release);
                            let since_start = |t: Instant| (t - start).as_secs_f64();
                            let sent = outcome
                                .sent
                                .map_or_else(|| since_start(Instant::now()), since_start);
                            Some(RequestRecord {
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
                            })
                        }
                    };
                    handle.spawn(async move {
                        let record = match CatchPanic::new(measure).await {
                            Ok(Some(r)) => r,
                            Ok(None) => return, // cancelled by a stop: counted, not measured
                            Err(msg) => panic_record(i, scheduled, dispatched, &inputs[i], msg),
                        };
                        let _ = tx.send(record);
                    });
                }
                rps_changes
            })
            .expect("spawn the dispatcher thread")
    };

    // Only an open loop can over-saturate: a concurrency cap bounds its queue.
    let detector =
        (params.request_rate.0.is_finite() && params.max_concurrency.is_none()).then(|| {
            crate::metrics::oversaturation::Detector::new(
                opts.oversaturation,
                params.request_rate.0,
            )
        });
    let collected = collect(
        rx,
        n,
        Counts {
            released: &released,
            sent: &sent,
            finished: &finished,
        },
        opts,
        start,
        detector,
    )
    .await;
    let duration = start.elapsed().as_secs_f64();
    let machine = watch.finish().await;
    let rps_change_events = dispatcher.join().unwrap_or_default();
    let stopped_early = collected.oversaturation.is_some_and(|o| o.stopped);
    let accounting = Accounting::of(
        n as u64,
        &collected.records,
        0,
        collected.interrupted || stopped_early,
    );
    let server_metrics = match scraping {
        Some(s) => Some(s.finish().await),
        None => None,
    };
    let energy = match energy {
        Some(e) => Some(Readings {
            idle_watts,
            ..e.finish().await.shifted(energy_start, start)
        }),
        None => None,
    };
    Ok(CaseRun {
        records: collected.records,
        started: start,
        prewarmed,
        rps_change_events,
        duration,
        smoke,
        warmups_failed,
        interrupted: collected.interrupted,
        timed_out: collected.timed_out,
        machine: Some(machine),
        accounting,
        planned_turns: vec![],
        server_metrics,
        energy,
        oversaturation: collected.oversaturation,
    })
}

/// What `collect` gathered.
pub(crate) struct Collected {
    pub records: Vec<RequestRecord>,
    pub interrupted: bool,
    pub timed_out: bool,
    pub oversaturation: Option<crate::metrics::oversaturation::Detection>,
}

/// How far the requests of a run got: released by the schedule (`released`), and past
/// the concurrency cap on their way to the server (`sent`).
#[derive(Clone, Copy)]
pub(crate) struct Counts<'a> {
    pub released: &'a AtomicU64,
    pub sent: &'a AtomicU64,
    /// Sent and ended, counted before the request's concurrency slot is freed (its
    /// record may still be on its way to the collector).
    pub finished: &'a AtomicU64,
}

/// Gathers records, with a progress bar (or plain lines without a terminal), until
/// every request task has ended. A drain (Ctrl-C) becomes an abort after the grace
/// period; the deadline aborts at once. Sorted by index. `detector` watches an open
/// loop for over-saturation, and drains the case where it finds it when the plan asks.
pub(crate) async fn collect(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<RequestRecord>,
    n: usize,
    counts: Counts<'_>,
    opts: &RunOptions,
    start: Instant,
    mut detector: Option<crate::metrics::oversaturation::Detector>,
) -> Collected {
    let bar = opts.progress.then(|| progress_bar(n as u64));
    let mut next_line = opts.progress_lines.map(|every| (every, start + every));
    let mut records = Vec::with_capacity(n);
    let (mut interrupted, mut timed_out) = (false, false);
    let (mut drained_at, mut aborted_at): (Option<Instant>, Option<Instant>) = (None, None);
    let (mut errors, mut tokens) = (0u64, 0u64);
    // Over-saturation: the number in flight sampled every 100 ms, judged every 250 ms.
    let (mut next_sample, mut next_check) = (start, start);
    let mut stopped_here = false;
    loop {
        match tokio::time::timeout(Duration::from_millis(100), rx.recv()).await {
            Ok(Some(r)) => {
                if !r.sample.success {
                    errors += 1;
                } else if let Some(d) = detector.as_mut() {
                    d.ttft(r.start + r.sample.ttft, r.sample.ttft);
                }
                tokens += r
                    .sample
                    .usage_completion
                    .unwrap_or(u64::from(r.sample.chunks));
                records.push(r);
            }
            Ok(None) => break, // every request task has ended and the dispatcher is done
            Err(_) => {}
        }
        let tally = || Tally {
            n: n as u64,
            done: records.len() as u64,
            failed: errors,
            // `sent` before `finished`: a request that ends between the two reads only
            // lowers the count, so what is shown in flight never passes the cap.
            sent: counts.sent.load(Ordering::Acquire),
            finished: counts.finished.load(Ordering::Acquire),
            released: counts.released.load(Ordering::Relaxed),
            secs: start.elapsed().as_secs_f64().max(1e-9),
            tokens,
        };
        if let Some(b) = &bar {
            let p = tally();
            b.set_position(p.done);
            b.set_message(format!(
                "in flight {} | queued {} | errors {} | {:.1} req/s | {:.0} tok/s",
                p.in_flight(),
                p.queued(),
                p.failed,
                p.done as f64 / p.secs,
                p.tokens as f64 / p.secs
            ));
        }
        if let Some(d) = detector.as_mut().filter(|_| !opts.stop.draining()) {
            let now = Instant::now();
            let secs = (now - start).as_secs_f64();
            if now >= next_sample {
                d.in_flight(secs, tally().in_flight());
                next_sample = now + Duration::from_millis(100);
            }
            if now >= next_check {
                next_check = now + Duration::from_millis(250);
                if let Some(found) = d.check(secs)
                    && opts.stop_on_oversaturation
                {
                    eprintln!(
                        "  {}: over-saturated from {:.1} s (in flight and TTFT still rising): ending the case (execution.stop_on = \"oversaturation\")",
                        opts.label, found.at_s
                    );
                    stopped_here = true;
                    opts.stop.drain();
                }
            }
        }
        if let Some((every, at)) = next_line.as_mut() {
            if Instant::now() >= *at {
                eprintln!("{}", tally().line(&opts.label));
                *at += *every;
            }
        }
        let now = Instant::now();
        if opts.deadline.is_some_and(|d| now >= d) && !opts.stop.aborted() {
            timed_out = true;
            opts.stop.abort();
        }
        if opts.stop.draining() {
            // A drain of its own (over-saturation) is not an interruption.
            interrupted |= !stopped_here;
            let at = *drained_at.get_or_insert(now);
            if now - at >= opts.grace {
                opts.stop.abort();
            }
        }
        if opts.stop.aborted() {
            // Aborted tasks end at their next poll; this bounds a task that does not.
            let at = *aborted_at.get_or_insert(now);
            if now - at >= Duration::from_secs(2) {
                break;
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    records.sort_by_key(|r| r.index);
    Collected {
        records,
        interrupted,
        timed_out,
        oversaturation: detector.and_then(|d| d.found()).map(|f| {
            crate::metrics::oversaturation::Detection {
                stopped: stopped_here,
                ..f
            }
        }),
    }
}

/// Where a run's requests are, for the progress bar and the plain lines.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tally {
    /// Requests the case sends.
    pub n: u64,
    /// Finished (completed or failed).
    pub done: u64,
    pub failed: u64,
    /// Past the concurrency cap, on their way to the server.
    pub sent: u64,
    /// Of those, the ones that ended (read after `sent`).
    pub finished: u64,
    /// Released by the schedule (some may still wait for a slot).
    pub released: u64,
    pub secs: f64,
    pub tokens: u64,
}

impl Tally {
    /// Sent and not finished.
    pub fn in_flight(&self) -> u64 {
        self.sent.saturating_sub(self.finished)
    }

    /// Released by the schedule, waiting for a concurrency slot.
    pub fn queued(&self) -> u64 {
        self.released.saturating_sub(self.sent)
    }

    /// The plain line a CI log gets: sent, completed, failed, in flight, queued, rate, ETA.
    pub fn line(&self, label: &str) -> String {
        let rate = self.done as f64 / self.secs;
        let left = self.n.saturating_sub(self.done);
        let eta = if rate > 0.0 {
            format!("{:.0} s", left as f64 / rate)
        } else {
            "-".to_string()
        };
        format!(
            "  {label}: {:.1} s: sent {}, completed {}, failed {}, in flight {}, queued {}, {:.1} req/s, ETA {eta}",
            self.secs,
            self.sent,
            self.done - self.failed,
            self.failed,
            self.in_flight(),
            self.queued(),
            rate
        )
    }
}

fn progress_bar(n: u64) -> indicatif::ProgressBar {
    let b = indicatif::ProgressBar::new(n);
    b.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:30} {pos}/{len} requests | {msg} | {elapsed} (ETA {eta})",
        )
        .expect("valid template"),
    );
    b
}
