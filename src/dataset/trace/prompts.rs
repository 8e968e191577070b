//! A trace's rows as prompts: each hash id one fixed block of whole-word tokens, the
//! same on every run, shard and machine; single requests at their trace times, or a
//! session trace's sessions as conversations.

use std::collections::HashMap;
use std::path::Path;

use super::read::{read, window};
use super::row::Row;
use crate::client::backend::{Prompt, RequestInput};
use crate::plan::trace::TraceDataset;
use crate::tokenizer::TokenModel;

/// SplitMix64: spreads a counter into well-mixed bits (stable everywhere).
fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The word indices of one block: derived from (seed, id, length) alone.
fn block_words(seed: u64, id: u64, len: u64, words: usize) -> impl Iterator<Item = usize> {
    let mut key = Vec::with_capacity(24);
    key.extend_from_slice(&seed.to_le_bytes());
    key.extend_from_slice(&id.to_le_bytes());
    key.extend_from_slice(&len.to_le_bytes());
    let base = crate::hash::fnv1a64(&key);
    (0..len).map(move |j| (splitmix(base ^ splitmix(j)) % words as u64) as usize)
}

/// The prompt text of `row`: its blocks' words in order (exactly `row.input` tokens).
pub fn prompt(row: &Row, block: u64, seed: u64, words: &[String]) -> String {
    let mut text = String::with_capacity(row.input as usize * 7);
    for (k, id) in row.ids.iter().enumerate() {
        for w in block_words(seed, *id, row.block_len(k, block), words.len()) {
            text.push_str(&words[w]);
        }
    }
    text
}

/// The requests of a trace case: its window's rows as prompts, sent at their trace
/// times (relative to the first, times `time_scale`) unless `timestamps` is off.
pub fn build(
    d: &TraceDataset,
    n: usize,
    seed: u64,
    tokens: &TokenModel,
    dir: &Path,
) -> Result<Vec<RequestInput>, String> {
    let trace = read(d, dir)?;
    let rows = window(&trace, d, n);
    if rows.is_empty() {
        return Err("the trace's window holds no rows".into());
    }
    let words = tokens.word_table().ok_or(
        "a trace's prompts are built from whole-word tokens of a local tokenizer; the server tokenizer has none (set `tokenizer` to a local one or a Hugging Face id)",
    )?;
    let t0 = rows
        .iter()
        .filter_map(|r| r.t)
        .fold(f64::INFINITY, f64::min);
    Ok(rows
        .iter()
        .map(|r| RequestInput {
            model: None,
            prompt: Prompt::Text(prompt(r, trace.block, seed, &words)),
            prompt_len: r.input,
            output_len: r.output.max(1),
            arrival: d
                .timestamps
                .then(|| r.t.map(|t| (t - t0) * d.time_scale))
                .flatten(),
        })
        .collect())
}

/// A session trace's window as conversations: one per session in order of first
/// appearance, each turn its row's prompt on its own (the row's ids carry the context
/// it resends), the pause before it the row's think time (end of the previous answer
/// to this send, capped at `max_idle`), and each session starting at its first row's
/// trace time (times `time_scale`).
pub fn sessions(
    d: &TraceDataset,
    n: usize,
    seed: u64,
    tokens: &TokenModel,
    dir: &Path,
) -> Result<crate::dataset::conversations::Conversations, String> {
    use crate::dataset::conversations::{Conversation, Conversations, History, Turn};
    let trace = read(d, dir)?;
    let rows = window(&trace, d, n);
    let words = tokens.word_table().ok_or(
        "a trace's prompts are built from whole-word tokens of a local tokenizer; the server tokenizer has none",
    )?;
    let t0 = rows
        .iter()
        .filter_map(|r| r.t)
        .fold(f64::INFINITY, f64::min);
    let mut order: Vec<String> = Vec::new();
    let mut by: HashMap<String, (f64, Vec<Turn>)> = HashMap::new();
    let cap = d.max_idle.as_secs_f64();
    for r in &rows {
        let s = r
            .session
            .clone()
            .unwrap_or_else(|| format!("row-{}", r.line));
        let e = by.entry(s.clone()).or_insert_with(|| {
            order.push(s.clone());
            (r.t.map_or(0.0, |t| (t - t0) * d.time_scale), Vec::new())
        });
        e.1.push(Turn {
            user: prompt(r, trace.block, seed, &words),
            user_len: r.input,
            output_len: r.output.max(1),
            recorded_reply: None,
            recorded_reply_len: 0,
            headers: Vec::new(),
            think: Some(std::time::Duration::from_secs_f64(
                (r.think.unwrap_or(0.0) * d.time_scale).clamp(0.0, cap),
            )),
        });
    }
    let mut starts = Vec::with_capacity(order.len());
    let list = order
        .iter()
        .map(|s| {
            let (start, turns) = by.remove(s).expect("each session was seen");
            starts.push(start);
            // The session header (router affinity) carries the trace's own session id.
            Conversation {
                turns,
                headers: d
                    .session_header
                    .iter()
                    .map(|h| (h.clone(), s.clone()))
                    .collect(),
            }
        })
        .collect();
    Ok(Conversations {
        list,
        history: History::None,
        starts: Some(starts),
    })
}

/// The digest of the prompts a replay sent, in order (FNV-1a, hex): the same digest
/// means the same prompts, from any run, shard or machine.
pub fn digest<'a>(prompts: impl Iterator<Item = &'a str>) -> String {
    let mut w = crate::hash::FnvWriter::default();
    for p in prompts {
        w.update(p.as_bytes());
        w.update(&[0]);
    }
    format!("{:016x}", w.0)
}
