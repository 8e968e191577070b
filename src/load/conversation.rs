//! Runs a multi-turn case: conversations start on the case's arrival schedule (the
//! request rate applies to conversation starts), `multi_turn_concurrency` bounds
//! the conversations in flight and `max_concurrency` the requests in flight. Each
//! conversation sends its turns one after another, resending the history (with the
//! server's actual replies unless the dataset says otherwise) and waiting its think
//! time between a turn's end and the next send. A failed turn ends its conversation.
//!
//! A turn's record: `scheduled` is when it was meant to go (the conversation's
//! arrival for the first turn, the end of the think time for later ones),
//! `dispatched` when its conversation was released or its think time ended, `start`
//! when it was sent, after waiting for a conversation slot and a request slot.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::guard::CatchPanic;
use super::options::{RunError, RunOptions};
use super::prepare::{panicked, prepare, prewarm};
use super::run::{Accounting, CaseRun, collect, schedule, wait_unless_stopped};
use super::schedule::permits;
use super::stop::Stop;
use crate::client::backend::{Prompt, RequestInput, build_body};
use crate::client::request::{Target, send_with};
use crate::dataset::conversations::{Conversation, Conversations, History};
use crate::metrics::record::{RequestRecord, TurnRef};
use crate::plan::CaseParams;
use crate::plan::dataset::{DelayDistribution, MultiTurnDataset};
use crate::rng::Rng;

/// How conversations pause between turns.
#[derive(Debug, Clone, Copy)]
pub struct ThinkTime {
    pub mean: Duration,
    pub distribution: DelayDistribution,
}

impl ThinkTime {
    pub fn of(d: &MultiTurnDataset) -> ThinkTime {
        ThinkTime {
            mean: d.delay.0,
            distribution: d.delay_distribution,
        }
    }

    fn sample(&self, rng: &mut Rng) -> Duration {
        let m = self.mean.as_secs_f64();
        if m <= 0.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(match self.distribution {
            DelayDistribution::Constant => m,
            DelayDistribution::Exponential => rng.exponential(m),
            DelayDistribution::Uniform => rng.f64() * 2.0 * m,
        })
    }
}

/// Everything one conversation task shares with the others.
struct Shared {
    target: Arc<Target>,
    params: Arc<CaseParams>,
    convs: Arc<Conversations>,
    think: ThinkTime,
    session_header: Option<HeaderName>,
    requests: Option<Arc<Semaphore>>,
    conversations: Option<Arc<Semaphore>>,
    /// Index of each conversation's first turn among all turns (records sort by it).
    first_index: Vec<usize>,
    prefix: String,
    start: Instant,
    stop: Stop,
    /// Turns sent so far (for the progress bar's in-flight count).
    released: Arc<AtomicU64>,
    /// Turns sent and ended, counted while their request slot is held.
    finished: Arc<AtomicU64>,
    /// Turns never sent because a failed turn ended their conversation.
    skipped: Arc<AtomicU64>,
    tx: tokio::sync::mpsc::UnboundedSender<RequestRecord>,
}

fn user_message(text: &str) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": text}]})
}

/// The headers every turn of a conversation carries: the file's, then the session id.
fn conversation_headers(conv: &Conversation, shared: &Shared, ci: usize) -> HeaderMap {
    let mut h = HeaderMap::new();
    add_headers(&mut h, &conv.headers);
    if let Some(name) = &shared.session_header {
        let id = format!("{}conv-{ci}", shared.prefix);
        h.insert(name.clone(), HeaderValue::from_str(&id).expect("ascii id"));
    }
    h
}

fn add_headers(h: &mut HeaderMap, pairs: &[(String, String)]) {
    for (k, v) in pairs {
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            h.insert(k, v);
        }
    }
}

async fn conversation(shared: Arc<Shared>, ci: usize, arrival: f64, released: f64) {
    let conv = &shared.convs.list[ci];
    let stop = &shared.stop;
    let _slot = match &shared.conversations {
        Some(s) => tokio::select! {
            biased;
            _ = stop.until_draining() => return,
            p = s.acquire() => Some(p.expect("semaphore open")),
        },
        None => None,
    };
    let mut rng = Rng::new(shared.params.seed ^ (ci as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let base_headers = conversation_headers(conv, &shared, ci);
    let mut messages: Vec<Value> = Vec::new();
    let mut history_tokens = 0u64;
    let (mut scheduled, mut dispatched) = (arrival, released);
    for (k, turn) in conv.turns.iter().enumerate() {
        if k > 0 {
            // A trace's own pause for this turn, else a draw from the think time.
            let pause = turn.think.unwrap_or_else(|| shared.think.sample(&mut rng));
            let now = shared.start.elapsed().as_secs_f64();
            scheduled = now + pause.as_secs_f64();
            if !pause.is_zero() {
                tokio::select! {
                    biased;
                    _ = stop.until_draining() => return,
                    _ = tokio::time::sleep(pause) => {}
                }
            }
            dispatched = shared.start.elapsed().as_secs_f64();
        }
        if stop.draining() {
            return; // the rest of the conversation is cancelled
        }
        if shared.convs.history == History::None {
            messages.clear();
            history_tokens = 0;
        }
        messages.push(user_message(&turn.user));
        // The history moves into the request and back, so it is not copied per turn.
        let input = RequestInput {
            model: None,
            prompt: Prompt::Messages(Value::Array(std::mem::take(&mut messages))),
            prompt_len: history_tokens + turn.user_len,
            output_len: turn.output_len,
            arrival: None,
        };
        let body = build_body(
            shared.target.backend,
            &shared.target.model,
            &input,
            &shared.params,
        );
        if let Prompt::Messages(Value::Array(m)) = input.prompt {
            messages = m;
        }
        let mut headers = base_headers.clone();
        add_headers(&mut headers, &turn.headers);
        let id = format!("{}conv{ci}-turn{k}", shared.prefix);
        let outcome = {
            let _permit = match &shared.requests {
                Some(s) => tokio::select! {
                    biased;
                    _ = stop.until_draining() => return,
                    p = s.acquire() => Some(p.expect("semaphore open")),
                },
                None => None,
            };
            if stop.draining() {
                return;
            }
            shared.released.fetch_add(1, Ordering::Release);
            // Boxed, as in `run`: the conversation's task stays small when it is moved
            // into the runtime, and a turn's ~7 KB future is built in place.
            let send = CatchPanic::new(Box::pin(send_with(
                &shared.target,
                body,
                Some(&id),
                Some(headers),
            )));
            let Some(o) = stop.unless_aborted(send).await else {
                return;
            };
            // Ended, counted while its slot is still held (see `run::Counts`).
            shared.finished.fetch_add(1, Ordering::Release);
            o.unwrap_or_else(|msg| crate::client::request::Outcome {
                sample: panicked(msg),
                ..Default::default()
            })
        };
        let since_start = |t: Instant| (t - shared.start).as_secs_f64();
        let start = outcome
            .sent
            .map_or_else(|| since_start(Instant::now()), since_start);
        let written = outcome.written.map(since_start);
        let connect = outcome.connect.map(|d| d.as_secs_f64());
        // The boundary: from here on the request is a plain sample.
        let sample = outcome.sample;
        let ok = sample.success;
        // What the next turn resends of this one (nothing after a failure or without history).
        let reply = match (ok, shared.convs.history, &turn.recorded_reply) {
            (false, _, _) | (_, History::None, _) => None,
            (true, History::Recorded, Some(r)) => Some((r.clone(), turn.recorded_reply_len)),
            (true, _, _) => Some((
                sample.text.clone(),
                sample.usage_completion.unwrap_or(u64::from(sample.chunks)),
            )),
        };
        let _ = shared.tx.send(RequestRecord {
            index: shared.first_index[ci] + k,
            scheduled,
            dispatched,
            start,
            written,
            connect,
            prompt_len: input.prompt_len,
            expected_output_len: turn.output_len,
            sample,
            turn: Some(TurnRef {
                conversation: ci as u32,
                turn: k as u32,
            }),
        });
        match reply {
            None if !ok => {
                // A failed turn ends its conversation: the turns after it are not sent.
                let rest = conv.turns.len() - k - 1;
                shared.skipped.fetch_add(rest as u64, Ordering::Relaxed);
                return;
            }
            None => {}
            Some((text, tokens)) => {
                messages.push(json!({"role": "assistant", "content": text}));
                history_tokens += turn.user_len + tokens;
            }
        }
    }
}

/// Runs the conversations of a multi-turn case.
pub async fn run_conversations(
    target: Arc<Target>,
    params: Arc<CaseParams>,
    convs: Arc<Conversations>,
    think: ThinkTime,
    session_header: &str,
    opts: &RunOptions,
) -> Result<CaseRun, RunError> {
    let first_turn = convs
        .list
        .first()
        .and_then(|c| c.turns.first())
        .ok_or(RunError::Empty)?;
    // The smoke request and warmups must not warm the prefix cache for the first
    // conversation: a different leading word keeps every cached block apart.
    let first = RequestInput {
        model: None,
        prompt: Prompt::Text(format!("warmup {}", first_turn.user)),
        prompt_len: first_turn.user_len,
        output_len: first_turn.output_len,
        arrival: None,
    };
    let requests = params
        .max_concurrency
        .map(|n| Arc::new(Semaphore::new(permits(n))));
    let (smoke, warmups_failed) =
        prepare(&target, &params, &first, requests.as_ref(), opts).await?;

    let n = convs.list.len();
    let total = convs.total_turns();
    let in_flight = params
        .multi_turn_concurrency
        .map_or(n, |c| (c as usize).min(n));
    let prewarmed = if opts.prewarm_connections {
        prewarm(
            &target,
            params
                .max_concurrency
                .map_or(in_flight, |c| (c as usize).min(in_flight)),
            opts,
        )
        .await?
    } else {
        0
    };
    // A trace's session starts, else the case's arrival schedule.
    let offsets = convs.starts.clone().unwrap_or_else(|| schedule(&params, n));
    let mut first_index = Vec::with_capacity(n);
    let mut acc = 0;
    for c in &convs.list {
        first_index.push(acc);
        acc += c.turns.len();
    }
    let planned_turns = convs.list.iter().map(|c| c.turns.len() as u32).collect();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<RequestRecord>();
    let before = super::run::scrape_before(opts).await;
    let watch = super::machine::Watch::start();
    let start = Instant::now();
    let scraping = before.map(|(src, page)| src.sample(page, start));
    let shared = Arc::new(Shared {
        target,
        session_header: (!session_header.is_empty())
            .then(|| HeaderName::from_bytes(session_header.as_bytes()).ok())
            .flatten(),
        requests,
        conversations: params
            .multi_turn_concurrency
            .map(|c| Arc::new(Semaphore::new(permits(c)))),
        params,
        convs,
        think,
        first_index,
        prefix: opts.request_id_prefix.clone(),
        start,
        stop: opts.stop.clone(),
        released: Arc::new(AtomicU64::new(0)),
        finished: Arc::new(AtomicU64::new(0)),
        skipped: Arc::new(AtomicU64::new(0)),
        tx,
    });
    let released = shared.released.clone();
    let finished = shared.finished.clone();
    let handle = tokio::runtime::Handle::current();
    // Conversation starts are released by a thread, for the same timer precision as
    // single-turn arrivals (see `run`).
    let dispatcher = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("conversations".into())
            .spawn(move || {
                crate::clock::precise_timers();
                for (ci, &at) in offsets.iter().enumerate() {
                    if !wait_unless_stopped(start + Duration::from_secs_f64(at), &shared.stop) {
                        break;
                    }
                    let released = start.elapsed().as_secs_f64();
                    handle.spawn(conversation(shared.clone(), ci, at, released));
                }
            })
            .expect("spawn the conversation dispatcher")
    };
    // The records channel closes when the dispatcher and every conversation have let go.
    // (Holding `shared` would keep the records channel open.)
    let skipped = shared.skipped.clone();
    drop(shared);
    // A turn counts as released once it has its slot: released and sent are one here.
    let counts = super::run::Counts {
        released: &released,
        sent: &released,
        finished: &finished,
    };
    let collected = collect(rx, total, counts, opts, start, None).await;
    let duration = start.elapsed().as_secs_f64();
    let machine = watch.finish().await;
    let server_metrics = match scraping {
        Some(s) => Some(s.finish().await),
        None => None,
    };
    let _ = dispatcher.join();
    let accounting = Accounting::of(
        total as u64,
        &collected.records,
        skipped.load(Ordering::Relaxed),
        collected.interrupted,
    );
    Ok(CaseRun {
        records: collected.records,
        started: start,
        prewarmed,
        rps_change_events: Vec::new(),
        duration,
        smoke,
        warmups_failed,
        interrupted: collected.interrupted,
        timed_out: collected.timed_out,
        accounting,
        planned_turns,
        server_metrics,
        // Multi-turn cases do not read energy yet.
        energy: None,
        machine: Some(machine),
        // Its turns wait for their answers: a closed loop, which cannot over-saturate.
        oversaturation: None,
    })
}
