//! Audio datasets for `openai-audio`: synthetic WAV clips of a requested length
//! (`random-audio`, as random-mm makes images) and local clips (`custom_audio`: a
//! JSONL file of rows naming clips, or a folder of .wav files, the way an ASR set is
//! kept on disk).
//!
//! The clip is what a request uploads; its text prompt is not sent (vLLM's audio
//! request sends none) and only sets `prompt_len`: vLLM's ASR datasets count the
//! Whisper decoder prompt, and so does benchplan unless a row gives its own.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::files::{oversample, shuffle};
use crate::client::backend::{AudioClip, Prompt, RequestInput};
use crate::client::multipart::contains_boundary;
use crate::plan::dataset::{CustomAudioDataset, RandomAudioDataset};
use crate::rng::Rng;
use crate::tokenizer::TokenModel;

/// The decoder prompt vLLM's ASR datasets count as a request's input.
pub const WHISPER_PROMPT: &str = "<|startoftranscript|><|en|><|transcribe|><|notimestamps|>";

/// `n` synthetic clips: lengths uniform within `duration_range_ratio` of `duration`,
/// output lengths within `range_ratio` of `output_len`.
pub fn random_audio(
    d: &RandomAudioDataset,
    n: usize,
    seed: u64,
    tokens: &TokenModel,
) -> Result<Vec<RequestInput>, String> {
    let mean = d.duration.as_secs_f64();
    if !(mean > 0.0) || d.sample_rate == 0 {
        return Err("random-audio: duration and sample_rate must be positive".into());
    }
    let mut rng = Rng::new(seed);
    let prompt_len = tokens.count(WHISPER_PROMPT) as u64;
    let (dr, r) = (d.duration_range_ratio, d.range_ratio);
    let out_lo = ((d.output_len as f64 * (1.0 - r)).floor() as u64).max(1);
    let out_hi = ((d.output_len as f64 * (1.0 + r)).ceil() as u64).max(out_lo);
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let seconds = mean * (1.0 - dr + 2.0 * dr * rng.f64());
        let clip = AudioClip::synthetic(seconds, d.sample_rate, &mut rng, "audio.wav");
        out.push(RequestInput {
            prompt: Prompt::Audio(Arc::new(clip)),
            prompt_len,
            output_len: rng.range(out_lo, out_hi),
            arrival: None,
            model: None,
        });
    }
    Ok(out)
}

/// One clip of a custom_audio set, before the dataset's rules pick and order them.
struct Row {
    audio: PathBuf,
    prompt: Option<String>,
    output_tokens: Option<u64>,
    /// Where the row was given, for errors (`file:line` or the clip's path).
    at: String,
}

/// The rows of a JSONL file; clip paths are relative to the file's folder.
fn jsonl_rows(path: &Path) -> Result<Vec<Row>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read dataset file {}: {e}", path.display()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("{}:{}", path.display(), i + 1);
        let v: Value =
            serde_json::from_str(line).map_err(|e| format!("{at}: not a JSON object: {e}"))?;
        let audio = v
            .get("audio")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{at}: each line needs `audio`, the path of a WAV clip"))?;
        rows.push(Row {
            audio: base.join(audio),
            prompt: v.get("prompt").and_then(Value::as_str).map(str::to_string),
            output_tokens: v.get("output_tokens").and_then(Value::as_u64),
            at,
        });
    }
    Ok(rows)
}

/// Every .wav file of a folder, in name order.
fn folder_rows(dir: &Path) -> Result<Vec<Row>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read dataset folder {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .and_then(|x| x.to_str())
                    .is_some_and(|x| x.eq_ignore_ascii_case("wav"))
        })
        .collect();
    files.sort();
    Ok(files
        .into_iter()
        .map(|audio| Row {
            at: audio.display().to_string(),
            audio,
            prompt: None,
            output_tokens: None,
        })
        .collect())
}

/// Local clips: the rows of `path` (a JSONL file or a folder of .wav files), those
/// outside `min_duration`..`max_duration` left out, shuffled and repeated to `n` as
/// vLLM's datasets are.
pub fn custom_audio(
    d: &CustomAudioDataset,
    n: usize,
    seed: u64,
    tokens: &TokenModel,
    dir: &Path,
) -> Result<Vec<RequestInput>, String> {
    let path = dir.join(
        d.path
            .as_ref()
            .ok_or("dataset `custom_audio` needs a `path`")?,
    );
    let rows = if path.is_dir() {
        if d.output_len < 0 {
            return Err(format!(
                "{}: a folder of clips has no `output_tokens`; set output_len to a number of tokens",
                path.display()
            ));
        }
        folder_rows(&path)?
    } else {
        jsonl_rows(&path)?
    };
    let (lo, hi) = (
        d.min_duration.map_or(0.0, |x| x.as_secs_f64()),
        d.max_duration.map_or(f64::INFINITY, |x| x.as_secs_f64()),
    );
    let whisper_len = tokens.count(WHISPER_PROMPT) as u64;
    let mut inputs = Vec::new();
    let mut skipped = 0;
    for row in rows {
        let wav = std::fs::read(&row.audio)
            .map_err(|e| format!("{}: cannot read {}: {e}", row.at, row.audio.display()))?;
        let duration = crate::wav::info(&wav)
            .map_err(|e| format!("{}: {}: {e}", row.at, row.audio.display()))?
            .duration();
        if !(lo..=hi).contains(&duration) {
            skipped += 1;
            continue;
        }
        if contains_boundary(&wav) {
            return Err(format!(
                "{}: {} holds the bytes of benchplan's form boundary and cannot be uploaded as it is",
                row.at,
                row.audio.display()
            ));
        }
        let output_len = if d.output_len < 0 {
            row.output_tokens.ok_or_else(|| {
                format!(
                    "{}: output_len = -1 needs `output_tokens` on every line",
                    row.at
                )
            })?
        } else {
            d.output_len as u64
        };
        let prompt_len = row
            .prompt
            .as_deref()
            .map_or(whisper_len, |p| tokens.count(p) as u64);
        let filename = row
            .audio
            .file_name()
            .map_or_else(|| "audio.wav".into(), |f| f.to_string_lossy().into_owned());
        inputs.push(RequestInput {
            prompt: Prompt::Audio(Arc::new(AudioClip {
                wav,
                filename,
                duration,
            })),
            prompt_len,
            output_len,
            arrival: None,
            model: None,
        });
    }
    if inputs.is_empty() {
        return Err(if skipped > 0 {
            format!(
                "{}: all {skipped} clips fall outside min_duration..max_duration",
                path.display()
            )
        } else {
            format!("{} holds no clips", path.display())
        });
    }
    let mut rng = Rng::new(seed);
    if !d.disable_shuffle {
        shuffle(&mut inputs, &mut rng);
    }
    Ok(oversample(inputs, n, d.no_oversample, &mut rng))
}
