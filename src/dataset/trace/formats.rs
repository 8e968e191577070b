//! Reading each trace format into rows: Mooncake and Bailian JSONL, agentic sessions,
//! length-only CSV; the keys come from the format unless the plan maps them.

use std::collections::HashMap;

use serde_json::Value;

use super::row::Row;
use crate::plan::trace::{TraceDataset, TraceFormat};

/// A block key no other row has (a length-only row's blocks, a fitted row's added ones).
pub(super) fn unshared(name: &str, line: usize, k: usize) -> u64 {
    crate::hash::fnv1a64(format!("{name}\u{0}{line}\u{0}{k}\u{0}unshared").as_bytes())
}

/// The key of field `which` in `d` (the plan's mapping, else `default`).
fn key<'a>(mapped: &'a Option<String>, default: &'a str) -> &'a str {
    mapped.as_deref().unwrap_or(default)
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

fn ids_of(v: &Value) -> Option<Vec<u64>> {
    v.as_array()?
        .iter()
        .map(|x| {
            x.as_u64()
                .or_else(|| x.as_i64().map(|i| i as u64))
                .or_else(|| x.as_str().map(|s| crate::hash::fnv1a64(s.as_bytes())))
        })
        .collect()
}

/// A JSONL file's objects with their (1-based) line numbers, blank lines skipped.
fn json_lines<'a>(
    text: &'a str,
    name: &'a str,
) -> impl Iterator<Item = Result<(usize, Value), String>> + 'a {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(move |(i, line)| {
            serde_json::from_str(line)
                .map(|v| (i + 1, v))
                .map_err(|e| format!("{name}:{}: not a JSON object: {e}", i + 1))
        })
}

/// Mooncake and Bailian: one JSON object a line.
pub(super) fn jsonl_rows(
    text: &str,
    name: &str,
    d: &TraceDataset,
    unit: f64,
) -> Result<Vec<Row>, String> {
    let f = &d.fields;
    let (kt, ki, ko, kh) = (
        key(&f.timestamp, "timestamp"),
        key(&f.input_length, "input_length"),
        key(&f.output_length, "output_length"),
        key(&f.hash_ids, "hash_ids"),
    );
    let bailian = d.format == TraceFormat::Bailian;
    let (ks, kp) = (
        key(
            &f.session_id,
            if bailian { "chat_id" } else { "session_id" },
        ),
        key(&f.parent_id, "parent_chat_id"),
    );
    // Bailian: a row's session is the root of its parent chain.
    let mut root: HashMap<String, String> = HashMap::new();
    let mut rows = Vec::new();
    for line in json_lines(text, name) {
        let (at, v) = line?;
        let field = |k: &str| {
            v.get(k)
                .ok_or_else(|| format!("{name}:{at}: no `{k}` (set dataset.fields to map it)"))
        };
        let count = |k: &str| -> Result<u64, String> {
            num(field(k)?)
                .filter(|x| *x >= 0.0)
                .map(|x| x as u64)
                .ok_or_else(|| format!("{name}:{at}: `{k}` is not a count"))
        };
        let t =
            num(field(kt)?).ok_or_else(|| format!("{name}:{at}: `{kt}` is not a number"))? * unit;
        let ids = ids_of(field(kh)?)
            .ok_or_else(|| format!("{name}:{at}: `{kh}` is not a list of ids"))?;
        let id_text = |x: &Value| match x {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let session = v.get(ks).map(id_text).map(|own| {
            let parent = v
                .get(kp)
                .map(id_text)
                .filter(|p| p != "-1" && !p.is_empty());
            let r = parent
                .and_then(|p| root.get(&p).cloned())
                .unwrap_or_else(|| own.clone());
            root.insert(own, r.clone());
            r
        });
        rows.push(Row {
            line: at,
            t: Some(t),
            input: count(ki)?,
            output: count(ko)?,
            ids,
            session,
            think: f.think_time.as_ref().and_then(|k| v.get(k)).and_then(num),
        });
    }
    Ok(rows)
}

/// Agentic sessions: one JSON object a line, `{session_id | id | conversation_id,
/// timestamp?, requests: [{in | input_length, out | output_length, hash_ids,
/// think_time?, t?}]}`; ids are scoped to their session.
pub(super) fn session_rows(
    text: &str,
    name: &str,
    d: &TraceDataset,
    unit: f64,
) -> Result<Vec<Row>, String> {
    let f = &d.fields;
    let mut rows = Vec::new();
    for line in json_lines(text, name) {
        let (at, v) = line?;
        let sid = ["session_id", "id", "conversation_id"]
            .iter()
            .chain(f.session_id.as_deref().iter())
            .find_map(|k| v.get(*k))
            .map(|x| match x {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_else(|| format!("line-{at}"));
        let start = v
            .get(key(&f.timestamp, "timestamp"))
            .and_then(num)
            .unwrap_or(0.0)
            * unit;
        let reqs = v
            .get("requests")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("{name}:{at}: no `requests` list"))?;
        for (k, r) in reqs.iter().enumerate() {
            let pick = |mapped: &Option<String>, names: &[&str]| {
                mapped
                    .as_deref()
                    .into_iter()
                    .chain(names.iter().copied())
                    .find_map(|n| r.get(n))
            };
            let count = |mapped: &Option<String>, names: &[&str]| -> Result<u64, String> {
                pick(mapped, names)
                    .and_then(num)
                    .filter(|x| *x >= 0.0)
                    .map(|x| x as u64)
                    .ok_or_else(|| format!("{name}:{at}: request {} has no `{}`", k + 1, names[0]))
            };
            let ids = pick(&f.hash_ids, &["hash_ids"])
                .and_then(ids_of)
                .ok_or_else(|| format!("{name}:{at}: request {} has no `hash_ids`", k + 1))?
                .into_iter()
                .map(|id| crate::hash::fnv1a64(format!("{sid}\u{0}{id}").as_bytes()))
                .collect();
            let think = pick(&f.think_time, &["think_time"]).and_then(num);
            let t = pick(&None, &["t"]).and_then(num).map(|t| start + t * unit);
            rows.push(Row {
                line: at,
                t: t.or(Some(start)),
                input: count(&f.input_length, &["in", "input_length"])?,
                output: count(&f.output_length, &["out", "output_length"])?,
                ids,
                session: Some(sid.clone()),
                think: think.map(|s| s * unit),
            });
        }
    }
    Ok(rows)
}

/// Length-only CSV traces (Azure's `TIMESTAMP,ContextTokens,GeneratedTokens`): every
/// row's blocks are its own.
pub(super) fn lengths_rows(text: &str, name: &str, d: &TraceDataset) -> Result<Vec<Row>, String> {
    let f = &d.fields;
    let mut rdr = csv::Reader::from_reader(text.as_bytes());
    let headers = rdr.headers().map_err(|e| format!("{name}:1: {e}"))?.clone();
    let col = |k: &str| {
        headers
            .iter()
            .position(|h| h.trim() == k)
            .ok_or_else(|| format!("{name}:1: no column `{k}` (set dataset.fields to map it)"))
    };
    let (ct, ci, co) = (
        col(key(&f.timestamp, "TIMESTAMP"))?,
        col(key(&f.input_length, "ContextTokens"))?,
        col(key(&f.output_length, "GeneratedTokens"))?,
    );
    let block = d.block();
    let mut rows = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let at = i + 2;
        let rec = rec.map_err(|e| format!("{name}:{at}: {e}"))?;
        let cell = |c: usize| rec.get(c).unwrap_or("").trim();
        let count = |c: usize| {
            cell(c)
                .parse::<f64>()
                .ok()
                .filter(|x| *x >= 0.0)
                .map(|x| x as u64)
                .ok_or_else(|| format!("{name}:{at}: `{}` is not a count", cell(c)))
        };
        let t = datetime_seconds(cell(ct))
            .or_else(|| cell(ct).parse::<f64>().ok().map(|x| x * d.unit().seconds()))
            .ok_or_else(|| format!("{name}:{at}: `{}` is not a time", cell(ct)))?;
        let input = count(ci)?;
        let ids = (0..input.div_ceil(block) as usize)
            .map(|k| unshared(name, at, k))
            .collect();
        rows.push(Row {
            line: at,
            t: Some(t),
            input,
            output: count(co)?,
            ids,
            session: None,
            think: None,
        });
    }
    Ok(rows)
}

/// `2023-11-16 18:15:46.6805900` as seconds since 1970 (UTC, no zone).
pub fn datetime_seconds(s: &str) -> Option<f64> {
    let (date, time) = s.trim().split_once([' ', 'T'])?;
    let mut d = date.split('-').map(|x| x.parse::<i64>());
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let mut t = time.trim_end_matches('Z').split(':');
    let (h, mi) = (
        t.next()?.parse::<f64>().ok()?,
        t.next()?.parse::<f64>().ok()?,
    );
    let sec = t.next().unwrap_or("0").parse::<f64>().ok()?;
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days as f64 * 86_400.0 + h * 3600.0 + mi * 60.0 + sec)
}
