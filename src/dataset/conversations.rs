//! Multi-turn conversations (the Rust vllm-bench's `--multi-turn` datasets): synthetic
//! ones with exact token lengths per turn, or the human turns of a ShareGPT file.
//!
//! Three history modes decide what each turn sends:
//! * `Live` (default): the whole history, with the server's actual replies, so input
//!   grows turn by turn as in real use;
//! * `Recorded`: the whole history, with the file's recorded replies;
//! * `None`: vllm-bench's prefix-sharing mode (`prefix_global_ratio`,
//!   `prefix_conversation_ratio`): every turn is one fixed-length message built as
//!   [global prefix][conversation prefix][unique part], with no history.

use std::path::Path;

use serde_json::Value;

use super::random::{allowed_ids, num_special_tokens, text_of_length};
use crate::plan::dataset::{ConversationHistory, MultiTurnDataset};
use crate::rng::Rng;
use crate::tokenizer::TokenModel;

/// What the turns of a conversation resend of the earlier ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum History {
    Live,
    Recorded,
    /// Each turn stands alone (prefix-sharing mode).
    None,
}

/// One user turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub user: String,
    /// Tokens of `user`.
    pub user_len: u64,
    /// Output tokens asked for.
    pub output_len: u64,
    /// The reply the file recorded, if any.
    pub recorded_reply: Option<String>,
    /// Tokens of the recorded reply (0 without one).
    pub recorded_reply_len: u64,
    /// Extra request headers for this turn only (a file's per-message `headers`).
    pub headers: Vec<(String, String)>,
    /// The pause before this turn after the previous answer, when a trace says it
    /// (otherwise the dataset's think-time distribution is drawn).
    pub think: Option<std::time::Duration>,
}

/// One conversation: its turns in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub turns: Vec<Turn>,
    /// Extra request headers for every turn (a file's per-conversation `headers`).
    pub headers: Vec<(String, String)>,
}

/// The conversations of a case.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversations {
    pub list: Vec<Conversation>,
    pub history: History,
    /// When each conversation starts (seconds from the case's start), when a trace says
    /// it; otherwise the case's arrival schedule paces them.
    pub starts: Option<Vec<f64>>,
}

impl Conversations {
    pub fn total_turns(&self) -> usize {
        self.list.iter().map(|c| c.turns.len()).sum()
    }

    /// The input tokens each turn is expected to send, by conversation: its own
    /// message plus the history (live replies counted at their requested length).
    pub fn expected_input_lens(&self) -> Vec<Vec<u64>> {
        self.list
            .iter()
            .map(|c| {
                let mut history = 0;
                c.turns
                    .iter()
                    .map(|t| match self.history {
                        History::None => t.user_len,
                        History::Live | History::Recorded => {
                            let input = history + t.user_len;
                            history = input
                                + if self.history == History::Live {
                                    t.output_len
                                } else {
                                    t.recorded_reply_len
                                };
                            input
                        }
                    })
                    .collect()
            })
            .collect()
    }
}

/// Builds `n` conversations.
pub fn build(
    d: &MultiTurnDataset,
    n: usize,
    seed: u64,
    tokens: &TokenModel,
    dir: &Path,
) -> Result<Conversations, String> {
    if n == 0 {
        return Err("num_prompts (conversations) must be at least 1".into());
    }
    match &d.path {
        Some(p) => from_file(d, n, seed, tokens, &dir.join(p)),
        None => synthetic(d, n, seed, tokens),
    }
}

/// Turn counts, uniform in the bounds.
fn turn_counts(d: &MultiTurnDataset, n: usize, rng: &mut Rng) -> Vec<u64> {
    let (lo, hi) = d.turn_bounds();
    (0..n)
        .map(|_| rng.range(lo.max(1), hi.max(lo).max(1)))
        .collect()
}

/// Text of exactly `len` tokens from consecutive vocabulary ids at a random offset.
fn random_text(
    tokens: &TokenModel,
    allowed: &[u32],
    rng: &mut Rng,
    salt: u64,
    len: u64,
) -> (String, u64) {
    if len == 0 {
        return (String::new(), 0);
    }
    let k = allowed.len() as u64;
    let offset = rng.range(0, k - 1);
    let ids: Vec<u32> = (0..len)
        .map(|i| allowed[((offset + salt + i) % k) as usize])
        .collect();
    let (text, n) = text_of_length(tokens, ids, len as usize, allowed, rng);
    (text, n as u64)
}

fn synthetic(
    d: &MultiTurnDataset,
    n: usize,
    seed: u64,
    tokens: &TokenModel,
) -> Result<Conversations, String> {
    let special = num_special_tokens(tokens);
    let first = d.input_len.saturating_sub(special);
    let later = if d.per_turn_input_len > 0 {
        d.per_turn_input_len
    } else {
        d.input_len
    }
    .saturating_sub(special);
    if first == 0 || later == 0 {
        return Err(format!(
            "input_len {} / per_turn_input_len {} leave no room for text after the {special} special token(s) the tokenizer adds",
            d.input_len, d.per_turn_input_len
        ));
    }
    let output_len = d.output_len.unwrap_or(MultiTurnDataset::DEFAULT_OUTPUT_LEN);
    let allowed = allowed_ids(tokens)?;
    let mut rng = Rng::new(seed);
    let counts = turn_counts(d, n, &mut rng);
    let max_turns = counts.iter().copied().max().unwrap_or(1);
    let turn = |user: String, user_len: u64| Turn {
        user,
        user_len,
        output_len,
        recorded_reply: None,
        recorded_reply_len: 0,
        headers: vec![],
        think: None,
    };

    if !d.prefix_sharing() {
        let list = counts
            .iter()
            .enumerate()
            .map(|(c, &turns)| Conversation {
                turns: (0..turns)
                    .map(|t| {
                        let len = if t == 0 { first } else { later };
                        let salt = c as u64 * max_turns + t;
                        let (text, got) = random_text(tokens, &allowed, &mut rng, salt, len);
                        turn(text, got)
                    })
                    .collect(),
                headers: vec![],
            })
            .collect();
        return Ok(Conversations {
            list,
            history: History::Live,
            starts: None,
        });
    }

    // Prefix sharing: segment lengths come from the first-turn length, so the shared
    // prefixes are the same bytes in every turn whatever per_turn_input_len says.
    let global_len = (first as f64 * d.prefix_global_ratio).floor() as u64;
    let conv_len = (first as f64 * d.prefix_conversation_ratio).floor() as u64;
    if later <= global_len + conv_len || first <= global_len + conv_len {
        return Err(format!(
            "per_turn_input_len leaves no unique part: the prefixes already take {} of {later} tokens; raise per_turn_input_len or lower the prefix ratios",
            global_len + conv_len
        ));
    }
    let (global, _) = random_text(tokens, &allowed, &mut rng, 0, global_len);
    let list = counts
        .iter()
        .enumerate()
        .map(|(c, &turns)| {
            let (conv_prefix, _) = random_text(tokens, &allowed, &mut rng, c as u64, conv_len);
            Conversation {
                turns: (0..turns)
                    .map(|t| {
                        let total = if t == 0 { first } else { later };
                        let unique = total - global_len - conv_len;
                        let salt = c as u64 * max_turns + t;
                        let (tail, got) = random_text(tokens, &allowed, &mut rng, salt, unique);
                        let text = format!("{global}{conv_prefix}{tail}");
                        // Concatenation keeps counts additive for whole-word vocabularies;
                        // a real tokenizer may merge at the seams, so count the result.
                        let len = if tokens.word_table().is_some() {
                            global_len + conv_len + got
                        } else {
                            tokens.count(&text) as u64
                        };
                        turn(text, len)
                    })
                    .collect(),
                headers: vec![],
            }
        })
        .collect();
    Ok(Conversations {
        list,
        history: History::None,
        starts: None,
    })
}

fn headers_of(v: Option<&Value>) -> Vec<(String, String)> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                    (k.clone(), v)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// ShareGPT conversations: each human message becomes a turn; the assistant message
/// after it is its recorded reply. Conversations with fewer than the minimum turns
/// are skipped, longer ones cut. Each entry and each human message may carry a
/// `headers` object (benchplan's extension: routing hints, fault injection).
fn from_file(
    d: &MultiTurnDataset,
    n: usize,
    seed: u64,
    tokens: &TokenModel,
    path: &Path,
) -> Result<Conversations, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read dataset file {}: {e}", path.display()))?;
    let entries = super::files::sharegpt_entries(path, &text)?;
    let (lo, hi) = d.turn_bounds();
    let mut list = Vec::new();
    for e in &entries {
        let Some(msgs) = e.get("conversations").and_then(Value::as_array) else {
            continue;
        };
        let mut turns: Vec<Turn> = Vec::new();
        for m in msgs {
            let from = m.get("from").and_then(Value::as_str).unwrap_or("");
            let Some(value) = m.get("value").and_then(Value::as_str) else {
                continue;
            };
            match from {
                "human" | "user" => {
                    let user_len = tokens.count(value) as u64;
                    turns.push(Turn {
                        user: value.to_string(),
                        user_len,
                        output_len: d.output_len.unwrap_or(0),
                        recorded_reply: None,
                        recorded_reply_len: 0,
                        headers: headers_of(m.get("headers")),
                        think: None,
                    });
                }
                "gpt" | "assistant" | "chatgpt" | "bard" | "bing" => {
                    if let Some(t) = turns.last_mut().filter(|t| t.recorded_reply.is_none()) {
                        t.recorded_reply_len = tokens.count(value) as u64;
                        t.recorded_reply = Some(value.to_string());
                    }
                }
                _ => {}
            }
        }
        if (turns.len() as u64) < lo {
            continue;
        }
        turns.truncate(hi as usize);
        for t in &mut turns {
            if t.output_len == 0 {
                t.output_len = match t.recorded_reply_len {
                    0 => MultiTurnDataset::DEFAULT_OUTPUT_LEN,
                    n => n,
                };
            }
        }
        list.push(Conversation {
            turns,
            headers: headers_of(e.get("headers")),
        });
    }
    if list.is_empty() {
        return Err(format!(
            "{}: no conversation has at least {lo} human turn(s)",
            path.display()
        ));
    }
    let mut rng = Rng::new(seed);
    // Shuffled as the single-turn ShareGPT dataset is; repeated in order when the file
    // has fewer conversations than asked for (a repeat is a realistic returning user).
    for i in (1..list.len()).rev() {
        list.swap(i, rng.range(0, i as u64) as usize);
    }
    let base = list.len();
    let mut k = 0;
    while list.len() < n {
        list.push(list[k % base].clone());
        k += 1;
    }
    list.truncate(n);
    Ok(Conversations {
        list,
        history: match d.history {
            ConversationHistory::Live => History::Live,
            ConversationHistory::Recorded => History::Recorded,
        },
        starts: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ds() -> MultiTurnDataset {
        MultiTurnDataset {
            num_turns: Some(3),
            input_len: 40,
            per_turn_input_len: 10,
            output_len: Some(5),
            ..MultiTurnDataset::default()
        }
    }

    #[test]
    fn synthetic_lengths_are_exact_and_history_grows() {
        let c = build(&ds(), 4, 7, &TokenModel::Builtin, Path::new(".")).unwrap();
        assert_eq!(c.list.len(), 4);
        assert_eq!(c.history, History::Live);
        for conv in &c.list {
            let lens: Vec<u64> = conv.turns.iter().map(|t| t.user_len).collect();
            assert_eq!(lens, [40, 10, 10]);
            for t in &conv.turns {
                assert_eq!(TokenModel::Builtin.count(&t.user) as u64, t.user_len);
            }
        }
        // 40; 40+5+10; 55+5+10
        assert_eq!(c.expected_input_lens()[0], [40, 55, 70]);
        // Seeded: the same conversations again.
        assert_eq!(
            c,
            build(&ds(), 4, 7, &TokenModel::Builtin, Path::new(".")).unwrap()
        );
    }

    #[test]
    fn turn_counts_stay_in_bounds() {
        let d = MultiTurnDataset {
            num_turns: None,
            min_turns: 2,
            max_turns: 4,
            ..ds()
        };
        let c = build(&d, 200, 1, &TokenModel::Builtin, Path::new(".")).unwrap();
        let mut seen = [0; 5];
        for conv in &c.list {
            seen[conv.turns.len()] += 1;
        }
        assert_eq!(seen[0] + seen[1], 0);
        assert!(seen[2] > 30 && seen[3] > 30 && seen[4] > 30, "{seen:?}");
    }

    #[test]
    fn prefix_sharing_builds_fixed_turns_from_shared_prefixes() {
        let d = MultiTurnDataset {
            input_len: 100,
            per_turn_input_len: 0,
            prefix_global_ratio: 0.3,
            prefix_conversation_ratio: 0.2,
            ..ds()
        };
        let c = build(&d, 3, 2, &TokenModel::Builtin, Path::new(".")).unwrap();
        assert_eq!(c.history, History::None);
        let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let global = words(&c.list[0].turns[0].user)[..30].to_vec();
        for conv in &c.list {
            let conv_prefix = words(&conv.turns[0].user)[30..50].to_vec();
            for t in &conv.turns {
                assert_eq!(t.user_len, 100);
                let w = words(&t.user);
                assert_eq!(w.len(), 100);
                assert_eq!(w[..30], global[..], "global prefix shared by all");
                assert_eq!(w[30..50], conv_prefix[..], "conversation prefix shared");
            }
        }
        assert_ne!(
            words(&c.list[0].turns[0].user)[30..50],
            words(&c.list[1].turns[0].user)[30..50]
        );
        assert_eq!(c.expected_input_lens()[0], [100, 100, 100]);
    }
}
