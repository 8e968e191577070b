//! The simulated engine: continuous batching on one dedicated thread.
//!
//! At most `max_num_seqs` sequences run; the rest wait in FIFO order. A sequence's
//! first token comes after its prefill (overhead + uncached tokens × time per token,
//! or a constant TTFT), each later token one decode step after the previous one, and
//! every latency is multiplied by the load factor of the moment. Deadlines are
//! absolute and computed from the previous deadline, so waking late never drifts
//! the schedule. A plain OS thread (not a tokio timer, which has 1 ms resolution)
//! sleeps until the next deadline and spins its last stretch for precision.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use super::config::SimConfig;
use super::metrics::Stats;
use super::prefix_cache::PrefixCache;
use crate::clock::SPIN;
use crate::rng::Rng;

/// Why a sequence ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// Reached max_tokens.
    Length,
    /// Stopped at EOS.
    Stop,
}

impl Finish {
    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Length => "length",
            Finish::Stop => "stop",
        }
    }
}

/// What the engine tells a request's response body.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Tokens `start .. start + n` of the output are ready (n = 0 for pooling requests).
    Tokens {
        start: u64,
        n: u64,
        finish: Option<Finish>,
        cached_tokens: u64,
        /// On the last event: the engine's own view of the request (vLLM's
        /// per-request `metrics`, served when a request asks with `include_metrics`).
        timings: Option<Box<Timings>>,
    },
    /// The stream is to be cut off here (injected disconnect).
    Cut,
}

/// A request's times as the engine saw them, in seconds: waiting for a slot, from
/// arrival to its first token, and from its first token to its last.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timings {
    pub queue: f64,
    pub ttft: f64,
    pub generation: f64,
    /// Its speculative decoding; None without a draft model.
    pub spec: Option<SpecTally>,
}

/// One request's speculative decoding, as vLLM's per-request
/// `metrics.speculative_decoding` counts it (vllm#48915).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SpecTally {
    /// Draft steps (verifications), tokens drafted and accepted.
    pub steps: u64,
    pub drafted: u64,
    pub accepted: u64,
    /// Speculative tokens per step.
    pub k: u64,
    /// Steps by accepted tokens (index 0: none accepted), `k + 1` of them used.
    pub histogram: [u64; super::metrics::SPEC_POSITIONS + 1],
}

/// One request handed to the engine.
#[derive(Debug)]
pub struct Job {
    /// Prompt token ids (for the prefix cache and the counts).
    pub prompt: Vec<u32>,
    /// Output tokens to produce at most.
    pub max_tokens: u64,
    pub min_tokens: u64,
    pub ignore_eos: bool,
    /// Embeddings and rerank: prefill only, one event.
    pub pooling: bool,
    pub arrived: Instant,
    pub events: UnboundedSender<Event>,
}

pub enum Command {
    Submit(Job),
    ResetPrefixCache,
    Shutdown,
}

struct Seq {
    job: Job,
    total: u64,
    emitted: u64,
    cut_after: Option<u64>,
    cached: u64,
    /// Tokens verified by past drafts and not yet streamed.
    drafted_ahead: u64,
    spec: SpecTally,
    /// When it left the waiting queue for a slot, and when its first token was due.
    admitted: Instant,
    first_at: Option<Instant>,
}

struct Engine {
    config: SimConfig,
    stats: Arc<Stats>,
    rng: Rng,
    cache: PrefixCache,
    waiting: VecDeque<Job>,
    seqs: HashMap<u64, Seq>,
    /// (deadline, sequence id) of every running sequence's next event.
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    next_id: u64,
}

impl Engine {
    fn jitter(&mut self, mean: f64, std: f64) -> f64 {
        if std > 0.0 {
            (mean + std * self.rng.normal()).max(0.0)
        } else {
            mean
        }
    }

    /// Takes a command; false on shutdown.
    fn handle(&mut self, c: Command) -> bool {
        match c {
            // Counted as waiting by `admit` only if no slot takes it: a request the
            // next admission serves at once never waited (a scrape between the two
            // saw it queued on a busy host).
            Command::Submit(job) => self.waiting.push_back(job),
            Command::ResetPrefixCache => self.cache.reset(),
            Command::Shutdown => return false,
        }
        true
    }

    fn can_admit(&self) -> bool {
        !self.waiting.is_empty() && (self.seqs.len() as u64) < self.config.max_num_seqs
    }

    /// Moves waiting requests into free slots, oldest first, and schedules their prefill.
    fn admit(&mut self) {
        while (self.seqs.len() as u64) < self.config.max_num_seqs {
            let Some(job) = self.waiting.pop_front() else {
                break;
            };
            if job.events.is_closed() {
                self.stats.in_system.fetch_sub(1, Relaxed);
                continue; // the client left while waiting
            }
            let prompt_len = job.prompt.len() as u64;
            let cached = if self.config.enable_prefix_caching {
                let hit = self.cache.lookup_and_insert(&job.prompt).cached_tokens;
                self.stats.prefix_queries.fetch_add(prompt_len, Relaxed);
                self.stats.prefix_hits.fetch_add(hit, Relaxed);
                hit
            } else {
                0
            };
            self.stats.prompt_tokens.fetch_add(prompt_len, Relaxed);
            let total = if job.pooling {
                0
            } else {
                output_len(&job, self.config.eos_probability, &mut self.rng)
            };
            // A cut comes after at least one chunk, so the client sees a broken stream, not silence.
            let cut_after =
                (!job.pooling && total > 1 && self.rng.chance(self.config.disconnect_rate))
                    .then(|| self.rng.range(1, total - 1));
            let lf = self.config.load_factor(self.seqs.len() as u64 + 1);
            // A warm-up request (see `SimParams::warmup_requests`) is slower throughout.
            let warm = self.config.warmup(self.next_id);
            let prefill = self.jitter(
                self.config.prefill_time(prompt_len - cached),
                self.config.ttft_std,
            ) * lf
                * warm;
            let id = self.next_id;
            self.next_id += 1;
            self.heap.push(Reverse((
                Instant::now() + Duration::from_secs_f64(prefill),
                id,
            )));
            self.seqs.insert(
                id,
                Seq {
                    job,
                    total,
                    emitted: 0,
                    cut_after,
                    cached,
                    drafted_ahead: 0,
                    spec: SpecTally::default(),
                    admitted: Instant::now(),
                    first_at: None,
                },
            );
            self.stats.set_running(self.seqs.len() as u64);
        }
        self.stats.waiting.store(self.waiting.len() as u64, Relaxed);
        self.publish_kv();
    }

    fn finish(&mut self, id: u64) {
        self.seqs.remove(&id);
        self.stats.set_running(self.seqs.len() as u64);
        self.stats.in_system.fetch_sub(1, Relaxed);
        self.publish_kv();
    }

    /// KV-cache use as vLLM reports it: the blocks the running sequences hold (their
    /// prompt and the tokens generated so far, in blocks of `block_size`) over the
    /// cache's capacity. Blocks a finished request left in the prefix cache are free to
    /// reuse, so they are not in use.
    fn publish_kv(&self) {
        let bs = self.config.block_size.max(1);
        let held: u64 = self
            .seqs
            .values()
            .map(|s| (s.job.prompt.len() as u64 + s.emitted).div_ceil(bs))
            .sum();
        let usage = if self.config.kv_cache_blocks == 0 {
            0.0
        } else {
            (held as f64 / self.config.kv_cache_blocks as f64).min(1.0)
        };
        self.stats.kv_usage_ppm.store((usage * 1e6) as u64, Relaxed);
    }

    /// Serves every sequence whose deadline has passed.
    fn serve_due(&mut self) {
        let now = Instant::now();
        while let Some(&Reverse((due, id))) = self.heap.peek() {
            if due > now {
                break;
            }
            self.heap.pop();
            let Some(seq) = self.seqs.get_mut(&id) else {
                continue;
            };
            if seq.emitted == 0 {
                self.stats
                    .ttft
                    .observe(due.saturating_duration_since(seq.job.arrived).as_secs_f64());
                seq.first_at = Some(due);
            }
            if seq.cut_after == Some(seq.emitted) {
                let _ = seq.job.events.send(Event::Cut);
                self.stats.requests_failed.fetch_add(1, Relaxed);
                self.stats.injected_cuts.fetch_add(1, Relaxed);
                self.finish(id);
                continue;
            }
            // The first chunk carries one token; later chunks bundle tokens_per_chunk.
            let n = if seq.job.pooling {
                0
            } else if seq.emitted == 0 {
                1
            } else {
                self.config.tokens_per_chunk.min(seq.total - seq.emitted)
            };
            let done = seq.emitted + n >= seq.total;
            let finish = done.then_some(if seq.total >= seq.job.max_tokens {
                Finish::Length
            } else {
                Finish::Stop
            });
            let since = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64();
            let first = seq.first_at.unwrap_or(due);
            let ev = Event::Tokens {
                start: seq.emitted,
                n,
                finish,
                cached_tokens: seq.cached,
                timings: None,
            };
            // The first token comes from prefill; later ones from decode steps.
            let decoded = if seq.emitted == 0 {
                n.saturating_sub(1)
            } else {
                n
            };
            seq.emitted += n;
            self.stats.generation_tokens.fetch_add(n, Relaxed);
            speculate(
                &self.config.spec_decode_acceptance,
                &self.stats,
                &mut self.rng,
                (&mut seq.drafted_ahead, &mut seq.spec),
                decoded,
            );
            let mut ev = ev;
            if let (true, Event::Tokens { timings, .. }) = (done, &mut ev) {
                *timings = Some(Box::new(Timings {
                    queue: since(seq.job.arrived, seq.admitted),
                    ttft: since(seq.job.arrived, first),
                    generation: since(first, due),
                    spec: (seq.spec.steps > 0).then_some(seq.spec),
                }));
            }
            if done {
                // Counters first: a client that sees the last chunk must see the engine idle.
                let events = seq.job.events.clone();
                self.stats
                    .e2e
                    .observe(due.saturating_duration_since(seq.job.arrived).as_secs_f64());
                self.stats.requests_ok.fetch_add(1, Relaxed);
                self.finish(id);
                let _ = events.send(ev);
                continue;
            }
            if seq.job.events.send(ev).is_err() {
                self.finish(id); // the client went away
                continue;
            }
            let k = self.config.tokens_per_chunk.min(seq.total - seq.emitted);
            let lf = self.config.load_factor(self.seqs.len() as u64);
            let warm = self.config.warmup(id);
            let (itl, std) = (self.config.itl, self.config.itl_std);
            let step: f64 = (0..k).map(|_| self.jitter(itl, std)).sum::<f64>() * lf * warm;
            self.heap
                .push(Reverse((due + Duration::from_secs_f64(step), id)));
        }
        // The running sequences grew by the tokens just emitted.
        self.publish_kv();
    }
}

/// Speculative decoding for `n` decode tokens: drafts until they cover them, each
/// proposing one token per position and yielding 1 + its accepted prefix; what a
/// draft verified beyond `n` is kept in `ahead` for the next step.
/// The request's own tally goes into `mine` (vLLM's per-request figures).
fn speculate(
    acceptance: &[f64],
    stats: &Stats,
    rng: &mut Rng,
    (ahead, mine): (&mut u64, &mut SpecTally),
    n: u64,
) {
    let k = acceptance.len().min(super::metrics::SPEC_POSITIONS);
    if k == 0 {
        return;
    }
    mine.k = k as u64;
    while *ahead < n {
        let mut accepted = 0;
        for (i, p) in acceptance.iter().take(k).enumerate() {
            if !rng.chance(*p) {
                break;
            }
            stats.spec_accepted_per_pos[i].fetch_add(1, Relaxed);
            accepted += 1;
        }
        stats.spec_drafts.fetch_add(1, Relaxed);
        stats.spec_draft_tokens.fetch_add(k as u64, Relaxed);
        stats.spec_accepted.fetch_add(accepted, Relaxed);
        mine.steps += 1;
        mine.drafted += k as u64;
        mine.accepted += accepted;
        mine.histogram[accepted as usize] += 1;
        *ahead += 1 + accepted;
    }
    *ahead -= n;
}

/// Runs the engine until every command sender is gone or a shutdown arrives.
pub fn run(config: SimConfig, stats: Arc<Stats>, commands: Receiver<Command>) {
    crate::clock::precise_timers();
    let mut e = Engine {
        rng: Rng::new(config.seed ^ 0x5eed),
        cache: PrefixCache::new(config.kv_cache_blocks, config.block_size),
        config,
        stats,
        waiting: VecDeque::new(),
        seqs: HashMap::new(),
        heap: BinaryHeap::new(),
        next_id: 0,
    };
    loop {
        // Wait for a command or the next deadline, unless a slot can be filled now.
        let now = Instant::now();
        let next = e.heap.peek().map(|Reverse((t, _))| *t);
        let first = if e.can_admit() {
            None
        } else {
            match next {
                None => match commands.recv() {
                    Ok(c) => Some(c),
                    Err(_) => return,
                },
                Some(t) if t > now + SPIN => match commands.recv_timeout(t - now - SPIN) {
                    Ok(c) => Some(c),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                },
                Some(_) => None,
            }
        };
        for c in first
            .into_iter()
            .chain(std::iter::from_fn(|| commands.try_recv().ok()))
        {
            if !e.handle(c) {
                return;
            }
        }
        e.admit();
        // Spin the last stretch to a close deadline, then serve every due one.
        if let Some(Reverse((t, _))) = e.heap.peek() {
            let t = *t;
            if t <= Instant::now() + SPIN {
                while Instant::now() < t {
                    std::hint::spin_loop();
                }
            }
        }
        e.serve_due();
        // Slots freed just now go to waiting requests at once.
        e.admit();
    }
}

/// Output length: max_tokens with ignore_eos; otherwise EOS may come after min_tokens,
/// with `eos_probability` per token (a geometric tail).
fn output_len(job: &Job, eos_probability: f64, rng: &mut Rng) -> u64 {
    let max = job.max_tokens.max(1);
    if job.ignore_eos || eos_probability <= 0.0 {
        return max;
    }
    let min = job.min_tokens.clamp(1, max);
    let mut n = min;
    while n < max && !rng.chance(eos_probability) {
        n += 1;
    }
    n
}

/// Starts the engine thread; dropping every sender stops it.
pub fn spawn(config: SimConfig, stats: Arc<Stats>) -> Sender<Command> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("sim-engine".into())
        .spawn(move || run(config, stats, rx))
        .expect("spawn the simulator engine thread");
    tx
}
