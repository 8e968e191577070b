//! A trace case's cache reuse, expected and realised (`benchplan.trace`): what the
//! trace itself says a prefix cache could serve (every block sent before, as an
//! unbounded cache would keep it, and as an LRU of the server's capacity would), what
//! the server says it served (`usage.prompt_tokens_details.cached_tokens`), and their
//! ratio, with TTFT split by requests that hit the cache and those that did not.

use std::path::Path;

use serde::Serialize;

use crate::dataset::trace::{Row, Trace, expected_per_row, expected_reuse, read, window};
use crate::metrics::record::RequestRecord;
use crate::plan::trace::TraceDataset;

/// `benchplan.trace`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TraceReuse {
    pub format: &'static str,
    pub block_size: u64,
    /// Rows replayed (the window's, at most `num_prompts`).
    pub rows: usize,
    /// Rows whose ids were fitted to their length (`fit_inconsistent`).
    pub fitted: usize,
    /// The share of the replayed prompt tokens in blocks sent earlier in the replay
    /// (each row's leading blocks: an unbounded prefix cache).
    pub expected_reuse: f64,
    /// The same with a cache of `capacity_tokens` (an LRU of that many tokens' blocks);
    /// null when the capacity is not known.
    pub expected_reuse_at_capacity: Option<f64>,
    pub capacity_tokens: Option<u64>,
    /// The share of the successful requests' prompt tokens the server reported cached.
    pub realised_reuse: Option<f64>,
    /// `realised_reuse / expected_reuse`: how much of the trace's reuse the server
    /// realised.
    pub realised_over_expected: Option<f64>,
    /// Mean TTFT of requests the server served partly from its cache, and of the others.
    pub ttft_ms_cache_hit: Option<f64>,
    pub ttft_ms_cache_miss: Option<f64>,
    pub requests_with_hits: u64,
    /// FNV-1a of every prompt sent, in order: the same digest means the same prompts
    /// (two runs, two shards, two machines).
    pub prompt_digest: String,
    /// Sessions: each one's expected and realised reuse (the first 50 by name).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<SessionReuse>,
    /// Sessions: by turn (the row's place in its session, from 1), over every session.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<TurnReuse>,
    /// Every request: its row, what the trace expected it to reuse and what the server
    /// said it did.
    pub requests: Vec<RequestReuse>,
}

/// One turn index's reuse over every session.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TurnReuse {
    pub turn: usize,
    pub requests: usize,
    pub expected_reuse: f64,
    pub realised_reuse: Option<f64>,
}

/// One request's reuse.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RequestReuse {
    /// Its row's line in the trace.
    pub line: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    pub prompt_tokens: u64,
    /// Its leading tokens in blocks sent before it (unbounded cache).
    pub expected_reused_tokens: u64,
    /// What the server reported cached (None: it failed, or the server does not say).
    pub cached_tokens: Option<u64>,
    pub ttft_ms: Option<f64>,
}

/// One session's reuse.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SessionReuse {
    pub session: String,
    pub turns: usize,
    pub expected_reuse: f64,
    pub realised_reuse: Option<f64>,
}

/// The reuse of a trace case's run: its records by index into the window's rows
/// (`n` at most), the server's KV capacity when its `/metrics` said it, and the digest
/// of the prompts sent.
pub fn reuse(
    d: &TraceDataset,
    dir: &Path,
    n: usize,
    run: &super::run::CaseRun,
    prompt_digest: String,
) -> Result<TraceReuse, String> {
    let trace = read(d, dir)?;
    let rows = window(&trace, d, n);
    let capacity = run
        .server_metrics
        .as_ref()
        .and_then(|m| m.kv_capacity_tokens);
    Ok(TraceReuse {
        prompt_digest,
        ..of_rows(&trace, &rows, &run.records, capacity)
    })
}

fn of_rows(
    trace: &Trace,
    rows: &[&Row],
    records: &[RequestRecord],
    capacity_tokens: Option<u64>,
) -> TraceReuse {
    let expected = expected_reuse(rows, trace.block, None).ratio();
    let at_capacity =
        capacity_tokens.map(|c| expected_reuse(rows, trace.block, Some(c / trace.block)).ratio());
    let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.sample.success).collect();
    let realised = realised_of(&ok);
    let mean = |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let hit = |r: &RequestRecord| r.sample.cached_tokens.unwrap_or(0) > 0;
    let ttft_ms = |want: bool| {
        mean(
            ok.iter()
                .filter(|r| hit(r) == want)
                .map(|r| r.sample.ttft * 1e3)
                .collect(),
        )
    };
    let (ttft_hit, ttft_miss) = (ttft_ms(true), ttft_ms(false));
    // Per session, in name order.
    let mut names: Vec<&str> = rows.iter().filter_map(|r| r.session.as_deref()).collect();
    names.sort_unstable();
    names.dedup();
    let sessions = names
        .iter()
        .take(50)
        .map(|s| {
            let idx: Vec<usize> = rows
                .iter()
                .enumerate()
                .filter(|(_, r)| r.session.as_deref() == Some(*s))
                .map(|(i, _)| i)
                .collect();
            let mine: Vec<&Row> = idx.iter().map(|i| rows[*i]).collect();
            let recs: Vec<&RequestRecord> = ok
                .iter()
                .copied()
                .filter(|r| idx.contains(&r.index))
                .collect();
            SessionReuse {
                session: s.to_string(),
                turns: mine.len(),
                expected_reuse: expected_reuse(&mine, trace.block, None).ratio(),
                realised_reuse: realised_of(&recs),
            }
        })
        .collect();
    TraceReuse {
        format: trace.format.as_str(),
        block_size: trace.block,
        rows: rows.len(),
        fitted: trace.fitted,
        expected_reuse: expected,
        expected_reuse_at_capacity: at_capacity,
        capacity_tokens,
        realised_reuse: realised,
        realised_over_expected: realised.filter(|_| expected > 0.0).map(|r| r / expected),
        ttft_ms_cache_hit: ttft_hit,
        ttft_ms_cache_miss: ttft_miss,
        requests_with_hits: ok.iter().filter(|r| hit(r)).count() as u64,
        prompt_digest: String::new(),
        sessions,
        turns: turns(rows, trace.block, &ok),
        requests: per_request(rows, trace.block, records),
    }
}

/// Cached over prompt tokens, by the server's own counts; None when no request
/// reported cached tokens (the server does not say).
fn realised_of(ok: &[&RequestRecord]) -> Option<f64> {
    if !ok.iter().any(|r| r.sample.cached_tokens.is_some()) {
        return None;
    }
    let cached: u64 = ok.iter().map(|r| r.sample.cached_tokens.unwrap_or(0)).sum();
    let prompt: u64 = ok
        .iter()
        .map(|r| r.sample.usage_prompt.unwrap_or(r.prompt_len))
        .sum();
    (prompt > 0).then(|| cached as f64 / prompt as f64)
}

/// Every request's reuse, in row order (`records` by index into `rows`).
fn per_request(rows: &[&Row], block: u64, records: &[RequestRecord]) -> Vec<RequestReuse> {
    let expected = expected_per_row(rows, block, None);
    rows.iter()
        .zip(&expected)
        .enumerate()
        .map(|(i, (r, e))| {
            let rec = records.iter().find(|x| x.index == i);
            let ok = rec.filter(|x| x.sample.success);
            RequestReuse {
                line: r.line,
                session: r.session.clone(),
                prompt_tokens: r.input,
                expected_reused_tokens: e.reused,
                cached_tokens: ok.and_then(|x| x.sample.cached_tokens),
                ttft_ms: ok.map(|x| x.sample.ttft * 1e3),
            }
        })
        .collect()
}

/// Sessions by turn index: each row's place in its session (from 1).
fn turns(rows: &[&Row], block: u64, ok: &[&RequestRecord]) -> Vec<TurnReuse> {
    if rows.iter().all(|r| r.session.is_none()) {
        return Vec::new();
    }
    let expected = expected_per_row(rows, block, None);
    let mut seen: std::collections::HashMap<&str, usize> = Default::default();
    let mut by_turn: Vec<Vec<usize>> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let Some(s) = r.session.as_deref() else {
            continue;
        };
        let k = seen.entry(s).or_insert(0);
        if by_turn.len() <= *k {
            by_turn.push(Vec::new());
        }
        by_turn[*k].push(i);
        *k += 1;
    }
    by_turn
        .iter()
        .enumerate()
        .map(|(k, idx)| {
            let (tokens, reused) = idx.iter().fold((0, 0), |(t, u), i| {
                (t + expected[*i].tokens, u + expected[*i].reused)
            });
            let recs: Vec<&RequestRecord> = ok
                .iter()
                .copied()
                .filter(|r| idx.contains(&r.index))
                .collect();
            TurnReuse {
                turn: k + 1,
                requests: idx.len(),
                expected_reuse: if tokens == 0 {
                    0.0
                } else {
                    reused as f64 / tokens as f64
                },
                realised_reuse: realised_of(&recs),
            }
        })
        .collect()
}
