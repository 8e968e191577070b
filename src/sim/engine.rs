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
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event {
    /// Tokens `start .. start + n` of the output are ready (n = 0 for pooling requests).
    Tokens { start: u64, n: u64, finish: Option<Finish>, cached_tokens: u64 },
    /// The stream is to be cut off here (injected disconnect).
    Cut,
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
}

/// Spin instead of sleeping for the last stretch before a deadline: OS sleeps overshoot.
const SPIN: Duration = Duration::from_micros(150);

/// Runs the engine until every command sender is gone.
pub fn run(config: SimConfig, stats: Arc<Stats>, commands: Receiver<Command>) {
    let mut rng = Rng::new(config.seed ^ 0x5eed);
    let mut cache = PrefixCache::new(config.kv_cache_blocks, config.block_size);
    let mut waiting: VecDeque<Job> = VecDeque::new();
    let mut seqs: HashMap<u64, Seq> = HashMap::new();
    let mut heap: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
    let mut next_id = 0u64;
    let jitter = |rng: &mut Rng, mean: f64, std: f64| if std > 0.0 { (mean + std * rng.normal()).max(0.0) } else { mean };

    loop {
        // Wait for a command or the next deadline.
        let now = Instant::now();
        let next = heap.peek().map(|Reverse((t, _))| *t);
        let first = match next {
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
        };
        let mut handle = |c: Command, waiting: &mut VecDeque<Job>| match c {
            Command::Submit(job) => {
                stats.waiting.fetch_add(1, Relaxed);
                waiting.push_back(job);
            }
            Command::ResetPrefixCache => cache.reset(),
            Command::Shutdown => {}
        };
        let mut stop = false;
        for c in first.into_iter().chain(std::iter::from_fn(|| commands.try_recv().ok())) {
            stop |= matches!(c, Command::Shutdown);
            handle(c, &mut waiting);
        }
        if stop {
            return;
        }

        // Admit waiting requests into free slots, oldest first.
        while (seqs.len() as u64) < config.max_num_seqs {
            let Some(job) = waiting.pop_front() else { break };
            stats.waiting.fetch_sub(1, Relaxed);
            if job.events.is_closed() {
                stats.in_system.fetch_sub(1, Relaxed);
                continue; // the client left while waiting
            }
            let prompt_len = job.prompt.len() as u64;
            let cached = if config.enable_prefix_caching {
                let hit = cache.lookup_and_insert(&job.prompt).cached_tokens;
                stats.prefix_queries.fetch_add(prompt_len, Relaxed);
                stats.prefix_hits.fetch_add(hit, Relaxed);
                stats.kv_usage_ppm.store((cache.usage() * 1e6) as u64, Relaxed);
                hit
            } else {
                0
            };
            stats.prompt_tokens.fetch_add(prompt_len, Relaxed);
            let total = if job.pooling { 0 } else { output_len(&job, config.eos_probability, &mut rng) };
            // A cut comes after at least one chunk, so the client sees a broken stream, not silence.
            let cut_after = (!job.pooling && total > 1 && rng.chance(config.disconnect_rate)).then(|| rng.range(1, total - 1));
            let lf = config.load_factor(seqs.len() as u64 + 1);
            let prefill = jitter(&mut rng, config.prefill_time(prompt_len - cached), config.ttft_std) * lf;
            let now = Instant::now();
            let id = next_id;
            next_id += 1;
            heap.push(Reverse((now + Duration::from_secs_f64(prefill), id)));
            seqs.insert(id, Seq { job, total, emitted: 0, cut_after, cached });
            stats.running.store(seqs.len() as u64, Relaxed);
        }

        // Spin to the next deadline if it is close, then serve every due one.
        if let Some(Reverse((t, _))) = heap.peek() {
            if *t <= Instant::now() + SPIN {
                while Instant::now() < *t {
                    std::hint::spin_loop();
                }
            }
        }
        let now = Instant::now();
        while let Some(&Reverse((due, id))) = heap.peek() {
            if due > now {
                break;
            }
            heap.pop();
            let Some(seq) = seqs.get_mut(&id) else { continue };
            if seq.emitted == 0 {
                stats.ttft.observe(due.saturating_duration_since(seq.job.arrived).as_secs_f64());
            }
            if seq.cut_after == Some(seq.emitted) {
                let _ = seq.job.events.send(Event::Cut);
                stats.requests_failed.fetch_add(1, Relaxed);
                finish_seq(&mut seqs, id, &stats);
                continue;
            }
            // The first chunk carries one token; later chunks bundle tokens_per_chunk.
            let n = if seq.job.pooling {
                0
            } else if seq.emitted == 0 {
                1
            } else {
                config.tokens_per_chunk.min(seq.total - seq.emitted)
            };
            let done = seq.emitted + n >= seq.total;
            let finish = done.then(|| if seq.total >= seq.job.max_tokens { Finish::Length } else { Finish::Stop });
            let ev = Event::Tokens { start: seq.emitted, n, finish, cached_tokens: seq.cached };
            seq.emitted += n;
            stats.generation_tokens.fetch_add(n, Relaxed);
            if seq.job.events.send(ev).is_err() {
                finish_seq(&mut seqs, id, &stats); // the client went away
                continue;
            }
            if done {
                stats.e2e.observe(due.saturating_duration_since(seq.job.arrived).as_secs_f64());
                stats.requests_ok.fetch_add(1, Relaxed);
                finish_seq(&mut seqs, id, &stats);
                continue;
            }
            let k = config.tokens_per_chunk.min(seq.total - seq.emitted);
            let lf = config.load_factor(seqs.len() as u64);
            let step: f64 = (0..k).map(|_| jitter(&mut rng, config.itl, config.itl_std)).sum::<f64>() * lf;
            heap.push(Reverse((due + Duration::from_secs_f64(step), id)));
        }
    }
}

fn finish_seq(seqs: &mut HashMap<u64, Seq>, id: u64, stats: &Stats) {
    seqs.remove(&id);
    stats.running.store(seqs.len() as u64, Relaxed);
    stats.in_system.fetch_sub(1, Relaxed);
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
