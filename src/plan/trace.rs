//! The trace dataset of a case: `dataset = { name = "trace", path = "…", format =
//! "mooncake", … }`. A production trace replayed with its prefix structure; what each
//! format means is in `dataset::trace`.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::units::Dur;

/// A trace's layout. Each fills the block size and time unit its publisher documents.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// Mooncake (FAST'25): JSONL `{timestamp, input_length, output_length, hash_ids}`,
    /// timestamps in milliseconds, 512-token blocks.
    #[default]
    Mooncake,
    /// Alibaba Bailian: JSONL with `chat_id`, `parent_chat_id`, `timestamp` (seconds),
    /// `input_length`, `output_length`, `type`, `turn`, `hash_ids` over 16-token blocks.
    Bailian,
    /// Agentic sessions (WEKA-style): one JSON object per session with `requests`, each
    /// `{in, out, hash_ids, think_time}` (ids scoped to the session), 64-token blocks.
    Sessions,
    /// Lengths only (Azure LLM inference traces): CSV `TIMESTAMP`, `ContextTokens`,
    /// `GeneratedTokens`; no hash ids, so every prompt is its own.
    Lengths,
}

impl TraceFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            TraceFormat::Mooncake => "mooncake",
            TraceFormat::Bailian => "bailian",
            TraceFormat::Sessions => "sessions",
            TraceFormat::Lengths => "lengths",
        }
    }

    /// The tokens one hash id stands for, as the format's publisher documents it.
    pub fn block_size(self) -> u64 {
        match self {
            TraceFormat::Mooncake => 512,
            TraceFormat::Bailian => 16,
            TraceFormat::Sessions => 64,
            TraceFormat::Lengths => 512,
        }
    }

    /// The unit of its timestamps.
    pub fn time_unit(self) -> TimeUnit {
        match self {
            TraceFormat::Mooncake => TimeUnit::Ms,
            TraceFormat::Bailian | TraceFormat::Sessions | TraceFormat::Lengths => TimeUnit::S,
        }
    }
}

/// The unit of a trace's timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TimeUnit {
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
}

impl TimeUnit {
    /// Seconds per unit.
    pub fn seconds(self) -> f64 {
        match self {
            TimeUnit::Ms => 1e-3,
            TimeUnit::S => 1.0,
        }
    }
}

/// The part of a trace to replay: from `start` for `duration` (trace time, before
/// `time_scale`), or the rows `rows = [first, last]` (1-based lines, inclusive).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TraceWindow {
    /// Trace time of the first request replayed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<Dur>,
    /// Trace time replayed from `start`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<Dur>,
    /// The first and last row replayed (1-based, inclusive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<[u64; 2]>,
}

/// The keys of a trace's fields, for traces whose keys differ from their format's
/// (vLLM's `--timed-trace-label-*`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TraceFields {
    /// The send time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// The prompt's tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_length: Option<String>,
    /// The answer's tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_length: Option<String>,
    /// The prompt's block ids.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash_ids: Option<String>,
    /// The session (conversation) a row belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The row a row follows (Bailian's `parent_chat_id`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// The pause before a row, after the previous answer of its session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub think_time: Option<String>,
}

/// A production trace replayed with its prefix structure: each hash id becomes one
/// fixed block of tokens, the same on every run, shard and machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TraceDataset {
    /// The trace file (JSONL; CSV for `lengths`), relative to the plan's folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// The trace's layout: fills `block_size` and `time_unit` when they are unset.
    pub format: TraceFormat,
    /// Tokens per hash id (the format's: mooncake 512, bailian 16, sessions 64).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u64>,
    /// The unit of the trace's timestamps (the format's: mooncake ms, others s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_unit: Option<TimeUnit>,
    /// Multiply the trace's times by this (0.1 replays ten times faster).
    pub time_scale: f64,
    /// Send each row at its trace time (true); false sends the rows in trace order at
    /// the case's request rate or concurrency.
    pub timestamps: bool,
    /// The part of the trace to replay (default: all of it, up to `num_prompts` rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<TraceWindow>,
    /// Keys of the fields, where they differ from the format's.
    #[serde(skip_serializing_if = "is_default_fields")]
    pub fields: TraceFields,
    /// A row whose hash ids do not cover its input length (`ceil(input / block) !=
    /// len(hash_ids)`) is refused at validation; true fits its ids to its length
    /// (dropping or adding unshared blocks) and counts it.
    pub fit_inconsistent: bool,
    /// Sessions: the longest pause between a session's turns (idle gaps above it are
    /// cut to it).
    pub max_idle: Dur,
    /// A request header carrying each row's session id (router affinity), such as
    /// `x-session-id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_header: Option<String>,
}

fn is_default_fields(f: &TraceFields) -> bool {
    *f == TraceFields::default()
}

impl Default for TraceDataset {
    fn default() -> Self {
        TraceDataset {
            path: None,
            format: TraceFormat::default(),
            block_size: None,
            time_unit: None,
            time_scale: 1.0,
            timestamps: true,
            window: None,
            fields: TraceFields::default(),
            fit_inconsistent: false,
            max_idle: Dur::from_secs_f64(10.0),
            session_header: None,
        }
    }
}

impl TraceDataset {
    /// The block size in effect: the plan's, else the format's.
    pub fn block(&self) -> u64 {
        self.block_size.unwrap_or(self.format.block_size()).max(1)
    }

    /// The time unit in effect: the plan's, else the format's.
    pub fn unit(&self) -> TimeUnit {
        self.time_unit.unwrap_or(self.format.time_unit())
    }

    /// What the format filled that the plan left unset, in words (printed at
    /// validation, so a wrong preset is seen before traffic).
    pub fn filled(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.block_size.is_none() {
            out.push(format!(
                "block_size = {} ({}'s)",
                self.format.block_size(),
                self.format.as_str()
            ));
        }
        if self.time_unit.is_none() && self.format != TraceFormat::Lengths {
            out.push(format!(
                "time_unit = \"{}\" ({}'s)",
                match self.format.time_unit() {
                    TimeUnit::Ms => "ms",
                    TimeUnit::S => "s",
                },
                self.format.as_str()
            ));
        }
        out
    }
}
