//! Reading a trace file: its rows by format, consistency (ids against lengths), and
//! the window a case replays.

use std::path::Path;

use super::formats;
use super::row::{Row, Trace};
use crate::plan::trace::{TraceDataset, TraceFormat};

/// Reads the trace file of `d` (relative to `dir`).
pub fn read(d: &TraceDataset, dir: &Path) -> Result<Trace, String> {
    let p = d
        .path
        .as_ref()
        .ok_or("dataset `trace` needs a `path` (the trace file)")?;
    let full = dir.join(p);
    let text = std::fs::read_to_string(&full)
        .map_err(|e| format!("cannot read trace {}: {e}", full.display()))?;
    parse(&text, &full.display().to_string(), d)
}

/// Parses a trace's text (`name` for messages).
pub fn parse(text: &str, name: &str, d: &TraceDataset) -> Result<Trace, String> {
    let block = d.block();
    let unit = d.unit().seconds();
    let mut rows = match d.format {
        TraceFormat::Lengths => formats::lengths_rows(text, name, d)?,
        TraceFormat::Sessions => formats::session_rows(text, name, d, unit)?,
        TraceFormat::Mooncake | TraceFormat::Bailian => formats::jsonl_rows(text, name, d, unit)?,
    };
    let mut fitted = 0;
    let mut bad = Vec::new();
    for r in &mut rows {
        let need = r.input.div_ceil(block) as usize;
        if r.ids.len() == need {
            continue;
        }
        if d.fit_inconsistent {
            fitted += 1;
            if r.ids.len() > need {
                r.ids.truncate(need);
            } else {
                let line = r.line;
                let extra = (r.ids.len()..need).map(|k| formats::unshared(name, line, k));
                r.ids.extend(extra.collect::<Vec<_>>());
            }
        } else {
            bad.push(format!(
                "{name}:{}: input_length {} needs {need} blocks of {block} tokens, but the row has {} hash ids",
                r.line,
                r.input,
                r.ids.len()
            ));
        }
    }
    if !bad.is_empty() {
        let more = if bad.len() > 5 {
            format!(" (and {} more)", bad.len() - 5)
        } else {
            String::new()
        };
        bad.truncate(5);
        return Err(format!(
            "{}{more}; check block_size ({block}), or set fit_inconsistent = true to fit such rows and count them",
            bad.join("; ")
        ));
    }
    if rows.is_empty() {
        return Err(format!("{name}: the trace has no rows"));
    }
    Ok(Trace {
        format: d.format,
        block,
        rows,
        fitted,
    })
}

/// The rows a case replays: the window's, in trace order, at most `n`.
pub fn window<'a>(trace: &'a Trace, d: &TraceDataset, n: usize) -> Vec<&'a Row> {
    let t0 = trace
        .rows
        .iter()
        .filter_map(|r| r.t)
        .fold(f64::INFINITY, f64::min);
    let w = d.window.clone().unwrap_or_default();
    trace
        .rows
        .iter()
        .filter(|r| {
            w.rows
                .is_none_or(|[a, b]| (r.line as u64) >= a && (r.line as u64) <= b)
        })
        .filter(|r| {
            let rel = r.t.map_or(0.0, |t| t - t0);
            let from = w.start.map_or(0.0, |s| s.as_secs_f64());
            rel >= from && w.duration.is_none_or(|dur| rel < from + dur.as_secs_f64())
        })
        .take(n)
        .collect()
}
