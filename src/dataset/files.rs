//! Datasets read from files: ShareGPT JSON, custom JSONL and the BurstGPT CSV
//! (reference §6.2–6.4). Paths are relative to the plan's folder. A malformed line is
//! an error naming its line; an empty or fully filtered dataset is an error too.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::random::{allowed_ids, text_of_length};
use crate::client::backend::{Prompt, RequestInput};
use crate::plan::dataset::{BurstgptDataset, CustomDataset, SharegptDataset};
use crate::rng::Rng;
use crate::tokenizer::TokenModel;

fn read(dir: &Path, path: Option<&PathBuf>, kind: &str) -> Result<(PathBuf, String), String> {
    let p = path.ok_or_else(|| format!("dataset `{kind}` needs a `path`"))?;
    let full = dir.join(p);
    let text = std::fs::read_to_string(&full)
        .map_err(|e| format!("cannot read dataset file {}: {e}", full.display()))?;
    Ok((full, text))
}

pub(super) fn shuffle<T>(v: &mut [T], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        v.swap(i, rng.range(0, i as u64) as usize);
    }
}

/// vLLM's `maybe_oversample_requests`: repeat random samples until there are `n`.
pub(super) fn oversample(
    mut v: Vec<RequestInput>,
    n: usize,
    no_oversample: bool,
    rng: &mut Rng,
) -> Vec<RequestInput> {
    if v.len() < n && !no_oversample && !v.is_empty() {
        let base = v.len();
        while v.len() < n {
            let pick = v[rng.range(0, base as u64 - 1) as usize].clone();
            v.push(pick);
        }
    }
    v.truncate(n);
    v
}

/// The entries of a ShareGPT file: a JSON list of `{"conversations": [...]}` objects.
pub fn sharegpt_entries(path: &Path, text: &str) -> Result<Vec<Value>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        format!(
            "{} is not ShareGPT JSON (line {}): {e}",
            path.display(),
            e.line()
        )
    })?;
    match v {
        Value::Array(list) => Ok(list),
        _ => Err(format!(
            "{} must hold a JSON list of conversations",
            path.display()
        )),
    }
}

/// The first human/assistant pair of each ShareGPT conversation, filtered as vLLM does.
pub fn sharegpt(
    d: &SharegptDataset,
    n: usize,
    seed: u64,
    tokens: &TokenModel,
    dir: &Path,
) -> Result<Vec<RequestInput>, String> {
    let (path, text) = read(dir, d.path.as_ref(), "sharegpt")?;
    let list = sharegpt_entries(&path, &text)?;
    let mut convs: Vec<(&str, &str)> = list
        .iter()
        .filter_map(|e| e.get("conversations").and_then(Value::as_array))
        .filter(|c| c.len() >= 2)
        .filter_map(|c| Some((c[0].get("value")?.as_str()?, c[1].get("value")?.as_str()?)))
        .collect();
    let mut rng = Rng::new(seed);
    if !d.disable_shuffle {
        shuffle(&mut convs, &mut rng);
    }
    let mut out = Vec::new();
    for (prompt, completion) in convs {
        if out.len() >= n {
            break;
        }
        let prompt_len = tokens.count(prompt) as u64;
        let out_len = d
            .output_len
            .unwrap_or_else(|| tokens.count(completion) as u64);
        // vLLM's is_valid_sequence: min 4 tokens, prompt ≤ 1024, total ≤ 2048.
        let too_short = prompt_len < 4 || (d.output_len.is_none() && out_len < 4);
        if too_short || prompt_len > 1024 || prompt_len + out_len > 2048 {
            continue;
        }
        out.push(RequestInput {
            model: None,
            prompt: Prompt::Text(prompt.to_string()),
            prompt_len,
            output_len: out_len,
            arrival: None,
        });
    }
    if out.is_empty() {
        return Err(format!(
            "{}: no conversation passes the length filter (prompt 4..=1024 tokens, total ≤ 2048)",
            path.display()
        ));
    }
    Ok(oversample(out, n, d.no_oversample, &mut rng))
}

/// JSONL rows with `prompt`, optional `output_tokens`, `timestamp` and `images`.
pub fn custom(
    d: &CustomDataset,
    n: usize,
    seed: u64,
    tokens: &TokenModel,
    dir: &Path,
    chat_backend: bool,
) -> Result<Vec<RequestInput>, String> {
    let (path, text) = read(dir, d.path.as_ref(), "custom")?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .map_err(|e| format!("{}:{}: not a JSON object: {e}", path.display(), i + 1))?;
        let prompt = v
            .get("prompt")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                format!(
                    "{}:{}: each line needs a string `prompt`",
                    path.display(),
                    i + 1
                )
            })?
            .to_string();
        let output_len = if d.output_len < 0 {
            v.get("output_tokens")
                .and_then(Value::as_u64)
                .ok_or_else(|| {
                    format!(
                        "{}:{}: output_len = -1 needs `output_tokens` on every line",
                        path.display(),
                        i + 1
                    )
                })?
        } else {
            d.output_len as u64
        };
        let arrival = match v.get("timestamp") {
            Some(t) => Some(t.as_f64().ok_or_else(|| {
                format!(
                    "{}:{}: `timestamp` must be a number of seconds",
                    path.display(),
                    i + 1
                )
            })?),
            None if d.replay_timestamps => {
                return Err(format!(
                    "{}:{}: replay_timestamps needs a `timestamp` on every line",
                    path.display(),
                    i + 1
                ));
            }
            None => None,
        };
        // A completions request gets the chat template applied here; the chat API applies its own.
        let prompt = match (!chat_backend && !d.skip_chat_template)
            .then(|| tokens.apply_chat_template(&prompt))
            .flatten()
        {
            Some(Ok(templated)) => templated,
            Some(Err(e)) => {
                return Err(format!(
                    "{}:{}: {e}; set skip_chat_template = true to send raw prompts",
                    path.display(),
                    i + 1
                ));
            }
            None => prompt,
        };
        let prompt_len = tokens.count(&prompt) as u64;
        let images: Vec<String> = v
            .get("images")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let p =
            if d.multimodal && !images.is_empty() {
                let mut parts = vec![serde_json::json!({"type": "text", "text": prompt})];
                parts.extend(images.iter().map(
                    |url| serde_json::json!({"type": "image_url", "image_url": {"url": url}}),
                ));
                Prompt::Messages(serde_json::json!([{"role": "user", "content": parts}]))
            } else {
                Prompt::Text(prompt)
            };
        rows.push(RequestInput {
            model: None,
            prompt: p,
            prompt_len,
            output_len,
            arrival: if d.replay_timestamps { arrival } else { None },
        });
    }
    if rows.is_empty() {
        return Err(format!("{} holds no rows", path.display()));
    }
    let mut rng = Rng::new(seed);
    if d.replay_timestamps {
        return Ok(replay(rows, n, d.time_scale));
    }
    if !d.disable_shuffle {
        shuffle(&mut rows, &mut rng);
    }
    Ok(oversample(rows, n, d.no_oversample, &mut rng))
}

/// The first `n` rows in time order, their timestamps made offsets from the first and scaled.
fn replay(mut rows: Vec<RequestInput>, n: usize, scale: f64) -> Vec<RequestInput> {
    rows.sort_by(|a, b| {
        a.arrival
            .unwrap_or(0.0)
            .total_cmp(&b.arrival.unwrap_or(0.0))
    });
    rows.truncate(n);
    let t0 = rows.first().and_then(|r| r.arrival).unwrap_or(0.0);
    for r in &mut rows {
        r.arrival = r.arrival.map(|t| (t - t0) * scale);
    }
    rows
}

/// BurstGPT: GPT-4 rows with a response, their token counts as lengths, random prompts
/// of exactly those lengths; with replay_timestamps, the trace's times as the schedule.
pub fn burstgpt(
    d: &BurstgptDataset,
    n: usize,
    seed: u64,
    tokens: &TokenModel,
    dir: &Path,
) -> Result<Vec<RequestInput>, String> {
    let (path, text) = read(dir, d.path.as_ref(), "burstgpt")?;
    let mut rdr = csv::Reader::from_reader(text.as_bytes());
    let mut rows: Vec<(f64, u64, u64)> = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| format!("{}:{}: {e}", path.display(), i + 2))?;
        let field = |k: usize| rec.get(k).unwrap_or("").trim();
        if field(1) != "GPT-4" {
            continue;
        }
        let num = |k: usize| {
            field(k).parse::<f64>().map_err(|_| {
                format!(
                    "{}:{}: column {} is not a number",
                    path.display(),
                    i + 2,
                    k + 1
                )
            })
        };
        let (ts, input, output) = (num(0)?, num(2)? as u64, num(3)? as u64);
        if output > 0 && input > 0 {
            rows.push((ts, input, output));
        }
    }
    if rows.is_empty() {
        return Err(format!(
            "{}: no GPT-4 row with a response (the BurstGPT format: Timestamp,Model,Request tokens,Response tokens,…)",
            path.display()
        ));
    }
    let mut rng = Rng::new(seed);
    let picked: Vec<(f64, u64, u64)> = if d.replay_timestamps {
        rows.sort_by(|a, b| a.0.total_cmp(&b.0));
        rows.into_iter().take(n).collect()
    } else {
        // vLLM samples with replacement only when it needs more rows than there are.
        if n <= rows.len() {
            shuffle(&mut rows, &mut rng);
            rows.into_iter().take(n).collect()
        } else {
            (0..n)
                .map(|_| rows[rng.range(0, rows.len() as u64 - 1) as usize])
                .collect()
        }
    };
    let allowed = allowed_ids(tokens)?;
    let t0 = picked.first().map_or(0.0, |r| r.0);
    Ok(picked
        .into_iter()
        .enumerate()
        .map(|(i, (ts, input, output))| {
            let ids: Vec<u32> = (0..input)
                .map(|j| allowed[((i as u64 + j) % allowed.len() as u64) as usize])
                .collect();
            let (text, len) = text_of_length(tokens, ids, input as usize, &allowed, &mut rng);
            RequestInput {
                model: None,
                prompt: Prompt::Text(text),
                prompt_len: len as u64,
                output_len: output,
                arrival: d.replay_timestamps.then_some((ts - t0) * d.time_scale),
            }
        })
        .collect())
}
