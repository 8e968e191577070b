//! The dataset block of a case: `dataset = { name = "random", input_len = …, … }`.
//!
//! Tagged by `name`; each kind takes only its own fields, so a field that a kind
//! does not use is an unknown key with a suggestion, not silently ignored.

use std::path::PathBuf;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::units::Dur;

/// Which prompts a case sends. The `name` picks the kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "name")]
pub enum Dataset {
    /// Random token ids of a given length (vLLM's `random`).
    #[serde(rename = "random")]
    Random(RandomDataset),
    /// Random text plus synthetic images, for chat backends (vLLM's `random-mm`).
    #[serde(rename = "random-mm")]
    RandomMm(RandomMmDataset),
    /// A random query and random documents, for `vllm-rerank` (vLLM's `random-rerank`).
    #[serde(rename = "random-rerank")]
    RandomRerank(RandomRerankDataset),
    /// A few shared prefixes, each reused with many suffixes (vLLM's `prefix_repetition`).
    #[serde(rename = "prefix_repetition")]
    PrefixRepetition(PrefixRepetitionDataset),
    /// Conversations from a local ShareGPT-format JSON file.
    #[serde(rename = "sharegpt")]
    Sharegpt(SharegptDataset),
    /// A local JSONL file with `prompt` and optional `output_tokens` per line.
    #[serde(rename = "custom")]
    Custom(CustomDataset),
    /// The BurstGPT trace CSV: token counts and timestamps.
    #[serde(rename = "burstgpt")]
    Burstgpt(BurstgptDataset),
    /// Multi-turn conversations, synthetic or from a ShareGPT file.
    #[serde(rename = "multi_turn")]
    MultiTurn(MultiTurnDataset),
    /// Synthetic WAV clips of a requested length, for `openai-audio`.
    #[serde(rename = "random-audio")]
    RandomAudio(RandomAudioDataset),
    /// Local audio clips (an ASR set): a JSONL file of `{"audio": "clip.wav", …}` rows
    /// or a folder of .wav files, for `openai-audio` (vLLM's `custom_audio`).
    #[serde(rename = "custom_audio")]
    CustomAudio(CustomAudioDataset),
    /// A production trace replayed with its prefix structure (Mooncake, Bailian,
    /// agentic sessions, length-only): see "Replaying production traces" in the README.
    #[serde(rename = "trace")]
    Trace(super::trace::TraceDataset),
}

impl Default for Dataset {
    fn default() -> Self {
        Dataset::Random(RandomDataset::default())
    }
}

/// Whether `key` is a setting of some dataset (`input_len`, `path`, …), read from the
/// schema so a new dataset field is known here without a list to keep in step.
pub fn is_dataset_key(key: &str) -> bool {
    static KEYS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        fn collect(v: &serde_json::Value, out: &mut Vec<String>) {
            match v {
                serde_json::Value::Object(m) => {
                    if let Some(serde_json::Value::Object(props)) = m.get("properties") {
                        out.extend(props.keys().filter(|k| *k != "name").cloned());
                    }
                    m.values().for_each(|c| collect(c, out));
                }
                serde_json::Value::Array(a) => a.iter().for_each(|c| collect(c, out)),
                _ => {}
            }
        }
        let mut keys = Vec::new();
        collect(&schemars::schema_for!(Dataset).to_value(), &mut keys);
        keys
    })
    .iter()
    .any(|k| k == key)
}

impl Dataset {
    pub const NAMES: [&'static str; 11] = [
        "random",
        "random-mm",
        "random-rerank",
        "prefix_repetition",
        "sharegpt",
        "custom",
        "burstgpt",
        "multi_turn",
        "random-audio",
        "custom_audio",
        "trace",
    ];

    /// Why `client = "vllm"` cannot run this dataset, if it cannot: whether it maps
    /// onto `vllm bench serve`'s flags.
    pub fn vllm_unsupported(&self) -> Option<String> {
        match self {
            Dataset::Random(_)
            | Dataset::PrefixRepetition(_)
            | Dataset::Sharegpt(_)
            | Dataset::Burstgpt(_) => None,
            Dataset::Custom(c) if c.multimodal || c.replay_timestamps => Some(
                "a custom dataset with multimodal or replay_timestamps is benchplan's own; vllm bench serve's custom dataset has neither".into(),
            ),
            Dataset::Custom(_) => None,
            other => Some(format!(
                "dataset `{}` is not mapped onto vllm bench serve's flags (random, prefix_repetition, sharegpt, custom and burstgpt are)",
                other.name()
            )),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Dataset::Random(_) => "random",
            Dataset::RandomMm(_) => "random-mm",
            Dataset::RandomRerank(_) => "random-rerank",
            Dataset::PrefixRepetition(_) => "prefix_repetition",
            Dataset::Sharegpt(_) => "sharegpt",
            Dataset::Custom(_) => "custom",
            Dataset::Burstgpt(_) => "burstgpt",
            Dataset::MultiTurn(_) => "multi_turn",
            Dataset::RandomAudio(_) => "random-audio",
            Dataset::CustomAudio(_) => "custom_audio",
            Dataset::Trace(_) => "trace",
        }
    }

    /// The file this dataset reads, if it reads one.
    pub fn path(&self) -> Option<&PathBuf> {
        match self {
            Dataset::Sharegpt(d) => d.path.as_ref(),
            Dataset::Custom(d) => d.path.as_ref(),
            Dataset::Burstgpt(d) => d.path.as_ref(),
            Dataset::MultiTurn(d) => d.path.as_ref(),
            Dataset::CustomAudio(d) => d.path.as_ref(),
            Dataset::Trace(d) => d.path.as_ref(),
            _ => None,
        }
    }

    /// Whether this kind must read a file (multi-turn only when no synthetic turns are described).
    pub fn requires_path(&self) -> bool {
        matches!(
            self,
            Dataset::Sharegpt(_)
                | Dataset::Custom(_)
                | Dataset::Burstgpt(_)
                | Dataset::CustomAudio(_)
                | Dataset::Trace(_)
        )
    }

    /// Whether requests carry audio clips (the `openai-audio` backend's multipart upload).
    pub fn is_audio(&self) -> bool {
        matches!(self, Dataset::RandomAudio(_) | Dataset::CustomAudio(_))
    }

    /// Whether requests carry images (chat content parts).
    pub fn is_multimodal(&self) -> bool {
        matches!(self, Dataset::RandomMm(_)) || matches!(self, Dataset::Custom(c) if c.multimodal)
    }

    /// What this dataset gives each request, which decides the backends that can send
    /// it (`plan::backend`).
    pub fn inputs(&self) -> super::backend::Inputs {
        use super::backend::Inputs;
        match self {
            _ if self.is_audio() => Inputs::Audio,
            _ if self.is_multimodal() => Inputs::Images,
            Dataset::RandomRerank(_) => Inputs::RerankPairs,
            Dataset::MultiTurn(_) => Inputs::Conversation,
            // A session trace's turns are sent as conversations (chat).
            Dataset::Trace(d) if d.format == super::trace::TraceFormat::Sessions => {
                Inputs::Conversation
            }
            _ => Inputs::Text,
        }
    }

    /// Whether vLLM turns `ignore_eos` on by default for this kind.
    pub fn ignores_eos_by_default(&self) -> bool {
        matches!(
            self,
            Dataset::Random(_) | Dataset::RandomMm(_) | Dataset::MultiTurn(_) | Dataset::Trace(_)
        )
    }
}

/// Random prompts of exact token lengths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RandomDataset {
    /// Mean input length in tokens.
    pub input_len: u64,
    /// Mean output length in tokens (max_tokens).
    pub output_len: u64,
    /// Lengths are uniform in [⌊L(1−r)⌋, ⌈L(1+r)⌉]; r in [0, 1).
    pub range_ratio: f64,
    /// Range ratio for output lengths only; defaults to range_ratio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_range_ratio: Option<f64>,
    /// Tokens of one random prefix shared by every request, added on top of input_len.
    pub prefix_len: u64,
    /// Prompts per request, for embedding backends.
    pub batch_size: u64,
}

impl Default for RandomDataset {
    fn default() -> Self {
        RandomDataset {
            input_len: 1024,
            output_len: 128,
            range_ratio: 0.0,
            output_range_ratio: None,
            prefix_len: 0,
            batch_size: 1,
        }
    }
}

/// Synthetic audio clips: mono 16-bit PCM WAV, a tone under noise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RandomAudioDataset {
    /// Mean clip length ("10s", "500ms").
    pub duration: Dur,
    /// Clip lengths are uniform within this ratio around the mean; r in [0, 1).
    pub duration_range_ratio: f64,
    /// Samples a second (16 kHz is what Whisper-style models take).
    pub sample_rate: u32,
    /// Mean output length in tokens (max_completion_tokens).
    pub output_len: u64,
    /// Output lengths are uniform within this ratio around the mean; r in [0, 1).
    pub range_ratio: f64,
}

impl Default for RandomAudioDataset {
    fn default() -> Self {
        RandomAudioDataset {
            duration: Dur::from_secs_f64(10.0),
            duration_range_ratio: 0.0,
            sample_rate: 16_000,
            output_len: 128,
            range_ratio: 0.0,
        }
    }
}

/// Local audio clips.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct CustomAudioDataset {
    /// A JSONL file (one `{"audio": "clip.wav", "prompt"?, "output_tokens"?}` a line,
    /// clip paths relative to the file) or a folder whose .wav files are the clips;
    /// relative to the plan's folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Output length; -1 uses each line's `output_tokens`.
    pub output_len: i64,
    /// Skip clips shorter than this (vLLM's --asr-min-audio-len-sec).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_duration: Option<Dur>,
    /// Skip clips longer than this (vLLM's --asr-max-audio-len-sec).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_duration: Option<Dur>,
    /// Do not repeat clips to reach num_prompts.
    pub no_oversample: bool,
    /// Keep the file (or sorted folder) order.
    pub disable_shuffle: bool,
}

impl Default for CustomAudioDataset {
    fn default() -> Self {
        CustomAudioDataset {
            path: None,
            output_len: 256,
            min_duration: None,
            max_duration: None,
            no_oversample: false,
            disable_shuffle: false,
        }
    }
}

/// One bucket of synthetic images or videos for random-mm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MmBucket {
    /// Height in pixels.
    pub height: u32,
    /// Width in pixels.
    pub width: u32,
    /// Frames: 1 is an image, more is a video.
    #[serde(default = "one")]
    pub frames: u32,
    /// Probability of this bucket (normalised over all buckets).
    pub probability: f64,
}

fn one() -> u32 {
    1
}

/// Random text plus synthetic images.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RandomMmDataset {
    /// Mean input text length in tokens.
    pub input_len: u64,
    /// Mean output length in tokens.
    pub output_len: u64,
    /// Range ratio of the lengths.
    pub range_ratio: f64,
    /// Shared random prefix length in tokens.
    pub prefix_len: u64,
    /// Base number of images per request.
    pub base_items_per_request: u64,
    /// Range ratio of the item count.
    pub num_mm_items_range_ratio: f64,
    /// Most items per prompt, by modality (`image`, `video`).
    pub limit_mm_per_prompt: IndexMap<String, u64>,
    /// Image and video sizes with their probabilities.
    pub buckets: Vec<MmBucket>,
}

impl Default for RandomMmDataset {
    fn default() -> Self {
        RandomMmDataset {
            input_len: 1024,
            output_len: 128,
            range_ratio: 0.0,
            prefix_len: 0,
            base_items_per_request: 1,
            num_mm_items_range_ratio: 0.0,
            limit_mm_per_prompt: IndexMap::from([
                ("image".to_string(), 255),
                ("video".to_string(), 1),
            ]),
            buckets: vec![
                MmBucket {
                    height: 256,
                    width: 256,
                    frames: 1,
                    probability: 0.5,
                },
                MmBucket {
                    height: 720,
                    width: 1280,
                    frames: 1,
                    probability: 0.5,
                },
            ],
        }
    }
}

/// A random query with random documents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RandomRerankDataset {
    /// Mean document length in tokens.
    pub input_len: u64,
    /// Range ratio of the lengths.
    pub range_ratio: f64,
    /// Documents per request.
    pub batch_size: u64,
    /// The model has no native reranking: no separator-token accounting.
    pub no_reranker: bool,
}

impl Default for RandomRerankDataset {
    fn default() -> Self {
        RandomRerankDataset {
            input_len: 1024,
            range_ratio: 0.0,
            batch_size: 1,
            no_reranker: false,
        }
    }
}

/// Shared prefixes reused with different suffixes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct PrefixRepetitionDataset {
    /// Tokens in each prefix.
    pub prefix_len: u64,
    /// Tokens in each suffix.
    pub suffix_len: u64,
    /// Number of distinct prefixes.
    pub num_prefixes: u64,
    /// Output length in tokens.
    pub output_len: u64,
}

impl Default for PrefixRepetitionDataset {
    fn default() -> Self {
        PrefixRepetitionDataset {
            prefix_len: 256,
            suffix_len: 256,
            num_prefixes: 10,
            output_len: 128,
        }
    }
}

/// A ShareGPT-format JSON file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SharegptDataset {
    /// The JSON file, relative to the plan's folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Fixed output length; unset uses each conversation's recorded reply length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_len: Option<u64>,
    /// Do not repeat samples to reach num_prompts.
    pub no_oversample: bool,
    /// Keep the file order.
    pub disable_shuffle: bool,
}

/// A JSONL file of prompts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct CustomDataset {
    /// The JSONL file, relative to the plan's folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Output length; -1 uses each line's `output_tokens`.
    pub output_len: i64,
    /// Lines carry images, sent as chat content parts (needs openai-chat).
    pub multimodal: bool,
    /// Send prompts as they are; by default a completions request wraps each in the
    /// tokenizer's chat template (from tokenizer_config.json), as vLLM does.
    pub skip_chat_template: bool,
    /// Use each line's `timestamp` (seconds) as the arrival schedule.
    pub replay_timestamps: bool,
    /// Multiply trace timestamps by this (0.5 replays twice as fast).
    pub time_scale: f64,
    /// Do not repeat samples to reach num_prompts.
    pub no_oversample: bool,
    /// Keep the file order.
    pub disable_shuffle: bool,
}

impl Default for CustomDataset {
    fn default() -> Self {
        CustomDataset {
            path: None,
            output_len: 256,
            multimodal: false,
            skip_chat_template: false,
            replay_timestamps: false,
            time_scale: 1.0,
            no_oversample: false,
            disable_shuffle: false,
        }
    }
}

/// The BurstGPT CSV trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct BurstgptDataset {
    /// The CSV file, relative to the plan's folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Use the trace's timestamps as the arrival schedule.
    pub replay_timestamps: bool,
    /// Multiply trace timestamps by this (0.5 replays twice as fast).
    pub time_scale: f64,
}

impl Default for BurstgptDataset {
    fn default() -> Self {
        BurstgptDataset {
            path: None,
            replay_timestamps: false,
            time_scale: 1.0,
        }
    }
}

/// Conversations that grow turn by turn.
/// Where a conversation's earlier assistant turns come from when the next turn is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConversationHistory {
    /// The server's actual responses (input grows as in real use).
    #[default]
    Live,
    /// The assistant turns recorded in the file (same input whatever the server answers).
    Recorded,
}

/// How think time varies around `delay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DelayDistribution {
    /// Exactly `delay`.
    #[default]
    Constant,
    /// Exponential with mean `delay` (memoryless users).
    Exponential,
    /// Uniform in [0, 2·delay].
    Uniform,
}

/// Multi-turn conversations: synthetic, or the human turns of a ShareGPT file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct MultiTurnDataset {
    /// A ShareGPT-format file to take conversations from; unset makes synthetic ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Turns per conversation; overrides min_turns/max_turns. With a file: turns kept per conversation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_turns: Option<u64>,
    /// Fewest turns per conversation (a file's shorter conversations are skipped).
    pub min_turns: u64,
    /// Most turns per conversation (a file's longer conversations are cut).
    pub max_turns: u64,
    /// First-turn input length in tokens (synthetic).
    pub input_len: u64,
    /// Input tokens added by each later turn; 0 means the first-turn length (synthetic).
    pub per_turn_input_len: u64,
    /// Output length per turn in tokens: 128 for synthetic conversations; with a file,
    /// unset takes each recorded reply's length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_len: Option<u64>,
    /// Think time between a turn's end and the next turn's send.
    pub delay: Dur,
    /// How think time varies around `delay`.
    pub delay_distribution: DelayDistribution,
    /// Share of each turn taken from a prefix common to all conversations; with
    /// prefix_conversation_ratio, switches to fixed-length turns without history.
    pub prefix_global_ratio: f64,
    /// Share of each turn taken from a prefix common to the conversation.
    pub prefix_conversation_ratio: f64,
    /// Whose assistant turns fill the history: the live responses or the file's.
    pub history: ConversationHistory,
    /// Header that carries the conversation id, so routers keep a conversation on one replica.
    pub session_header: String,
}

impl MultiTurnDataset {
    /// Synthetic conversations' output length per turn.
    pub const DEFAULT_OUTPUT_LEN: u64 = 128;

    /// The bounds of turns per conversation.
    pub fn turn_bounds(&self) -> (u64, u64) {
        match self.num_turns {
            Some(n) => (n, n),
            None => (self.min_turns, self.max_turns),
        }
    }

    /// Fixed-length turns built from shared prefixes, without history (vllm-bench's mode).
    pub fn prefix_sharing(&self) -> bool {
        self.prefix_global_ratio > 0.0 || self.prefix_conversation_ratio > 0.0
    }
}

impl Default for MultiTurnDataset {
    fn default() -> Self {
        MultiTurnDataset {
            path: None,
            num_turns: None,
            min_turns: 2,
            max_turns: 5,
            input_len: 512,
            per_turn_input_len: 0,
            output_len: None,
            delay: Dur::default(),
            delay_distribution: DelayDistribution::Constant,
            prefix_global_ratio: 0.0,
            prefix_conversation_ratio: 0.0,
            history: ConversationHistory::Live,
            session_header: "X-Session-ID".into(),
        }
    }
}
