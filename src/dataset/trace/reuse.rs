//! What a trace promises a cache: the prompt tokens a prefix cache could serve
//! (unbounded, or an LRU of a capacity), and a trace's numbers (`trace stats`).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::row::{Row, Trace};
use crate::plan::trace::TraceFormat;

/// Prompt tokens a cache would serve, replaying `rows` in order: each row's leading
/// blocks already sent earlier (a block is reused only with every block before it, as
/// a prefix cache reuses), with an unbounded cache or an LRU of `capacity` blocks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reuse {
    pub tokens: u64,
    pub reused: u64,
}

impl Reuse {
    /// The share of prompt tokens reused.
    pub fn ratio(&self) -> f64 {
        if self.tokens == 0 {
            0.0
        } else {
            self.reused as f64 / self.tokens as f64
        }
    }
}

/// See [`Reuse`]: `capacity` in blocks of the trace's size (None: unbounded).
pub fn expected_reuse(rows: &[&Row], block: u64, capacity: Option<u64>) -> Reuse {
    expected_per_row(rows, block, capacity)
        .into_iter()
        .fold(Reuse::default(), |a, r| Reuse {
            tokens: a.tokens + r.tokens,
            reused: a.reused + r.reused,
        })
}

/// [`expected_reuse`] row by row, in order.
pub fn expected_per_row(rows: &[&Row], block: u64, capacity: Option<u64>) -> Vec<Reuse> {
    // A block is its id and its length (a partial last block is its own block).
    let mut last_use: HashMap<(u64, u64), u64> = HashMap::new();
    let mut lru: std::collections::BTreeMap<u64, (u64, u64)> = Default::default();
    let mut tick = 0u64;
    let mut all = Vec::with_capacity(rows.len());
    for r in rows {
        let mut out = Reuse::default();
        let mut prefix = true;
        for (k, id) in r.ids.iter().enumerate() {
            let len = r.block_len(k, block);
            let b = (*id, len);
            out.tokens += len;
            let hit = last_use.contains_key(&b);
            if prefix && hit {
                out.reused += len;
            } else {
                prefix = false;
            }
            tick += 1;
            if let Some(old) = last_use.insert(b, tick) {
                lru.remove(&old);
            }
            lru.insert(tick, b);
            if let Some(cap) = capacity {
                while lru.len() as u64 > cap {
                    if let Some((_, gone)) = lru.pop_first() {
                        last_use.remove(&gone);
                    }
                }
            }
        }
        all.push(out);
    }
    all
}

/// What a trace is, in numbers (`benchplan trace stats`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Stats {
    pub format: &'static str,
    pub block_size: u64,
    pub rows: usize,
    /// Seconds from the first row to the last.
    pub span_s: f64,
    /// Rows per second over the span, and per minute of it.
    pub rate_per_s: f64,
    pub rate_by_minute: Vec<f64>,
    pub input_len: Percentiles,
    pub output_len: Percentiles,
    pub sessions: usize,
    pub turns_per_session_mean: f64,
    /// The share of prompt tokens an unbounded prefix cache would serve.
    pub reuse: f64,
    /// Distinct blocks (what an unbounded cache would hold).
    pub distinct_blocks: usize,
    /// Rows fitted to their length (`fit_inconsistent`).
    pub fitted: usize,
}

/// P50, P90, P99, min, max and mean of a length.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Percentiles {
    pub mean: f64,
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

fn percentiles(mut v: Vec<u64>) -> Percentiles {
    if v.is_empty() {
        return Percentiles::default();
    }
    v.sort_unstable();
    let at = |q: f64| v[((q * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)];
    Percentiles {
        mean: v.iter().sum::<u64>() as f64 / v.len() as f64,
        min: v[0],
        p50: at(0.5),
        p90: at(0.9),
        p99: at(0.99),
        max: v[v.len() - 1],
    }
}

/// The numbers of a whole trace.
pub fn stats(trace: &Trace) -> Stats {
    let rows: Vec<&Row> = trace.rows.iter().collect();
    let times: Vec<f64> = rows.iter().filter_map(|r| r.t).collect();
    let t0 = times.iter().copied().fold(f64::INFINITY, f64::min);
    let t1 = times.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = if times.is_empty() { 0.0 } else { t1 - t0 };
    let mut minutes = vec![0.0; (span / 60.0).floor() as usize + 1];
    for t in &times {
        minutes[((t - t0) / 60.0).floor() as usize] += 1.0 / 60.0;
    }
    let sessions: HashSet<&str> = rows.iter().filter_map(|r| r.session.as_deref()).collect();
    let distinct: HashSet<(u64, u64)> = rows
        .iter()
        .flat_map(|r| {
            r.ids
                .iter()
                .enumerate()
                .map(|(k, id)| (*id, r.block_len(k, trace.block)))
        })
        .collect();
    Stats {
        format: trace.format.as_str(),
        block_size: trace.block,
        rows: rows.len(),
        span_s: span,
        rate_per_s: if span > 0.0 {
            rows.len() as f64 / span
        } else {
            0.0
        },
        rate_by_minute: minutes,
        input_len: percentiles(rows.iter().map(|r| r.input).collect()),
        output_len: percentiles(rows.iter().map(|r| r.output).collect()),
        sessions: sessions.len(),
        turns_per_session_mean: if sessions.is_empty() {
            0.0
        } else {
            rows.iter().filter(|r| r.session.is_some()).count() as f64 / sessions.len() as f64
        },
        reuse: expected_reuse(&rows, trace.block, None).ratio(),
        distinct_blocks: distinct.len(),
        fitted: trace.fitted,
    }
}

/// The format a trace file looks like, from its first line: JSON with `requests`
/// (sessions), with `chat_id` (bailian), with `hash_ids` (mooncake), else CSV
/// (lengths).
pub fn detect(text: &str) -> TraceFormat {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    match serde_json::from_str::<Value>(first) {
        Ok(v) if v.get("requests").is_some() => TraceFormat::Sessions,
        Ok(v) if v.get("chat_id").is_some() => TraceFormat::Bailian,
        Ok(_) => TraceFormat::Mooncake,
        Err(_) => TraceFormat::Lengths,
    }
}
