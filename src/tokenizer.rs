//! Token counting shared by the simulator and the client: the built-in word tokenizer
//! (no files needed) or a Hugging Face `tokenizer.json`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sim::vocab;

/// A tokenizer: built-in words, or a loaded `tokenizer.json`.
#[derive(Clone)]
pub enum TokenModel {
    Builtin,
    Hf(Arc<tokenizers::Tokenizer>),
}

impl std::fmt::Debug for TokenModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenModel::Builtin => f.write_str("TokenModel::Builtin"),
            TokenModel::Hf(t) => write!(f, "TokenModel::Hf(vocab {})", t.get_vocab_size(true)),
        }
    }
}

/// Finds `tokenizer.json` for a path that is the file itself or a folder holding it.
pub fn tokenizer_file(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join("tokenizer.json")
    } else {
        path.to_path_buf()
    }
}

impl TokenModel {
    /// Loads a `tokenizer.json` (or a folder holding one).
    pub fn load(path: &Path) -> Result<TokenModel, String> {
        let file = tokenizer_file(path);
        let t = tokenizers::Tokenizer::from_file(&file)
            .map_err(|e| format!("cannot load tokenizer {}: {e}", file.display()))?;
        Ok(TokenModel::Hf(Arc::new(t)))
    }

    /// Token ids of a text, without special tokens.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        match self {
            TokenModel::Builtin => vocab::encode(text),
            TokenModel::Hf(t) => t
                .encode_fast(text, false)
                .map(|e| e.get_ids().to_vec())
                .unwrap_or_default(),
        }
    }

    pub fn count(&self, text: &str) -> usize {
        match self {
            TokenModel::Builtin => vocab::count(text),
            TokenModel::Hf(t) => t.encode_fast(text, false).map(|e| e.len()).unwrap_or(0),
        }
    }

    pub fn decode(&self, ids: &[u32]) -> String {
        match self {
            TokenModel::Builtin => vocab::decode(ids),
            TokenModel::Hf(t) => t.decode(ids, true).unwrap_or_default(),
        }
    }

    /// Texts for generated tokens: (raw text, JSON-escaped text), each decoding to one token.
    pub fn output_table(&self) -> Vec<(String, String)> {
        let raw: Vec<String> = match self {
            TokenModel::Builtin => (0..vocab::VOCAB_SIZE)
                .map(|i| format!(" {}", vocab::word(i)))
                .collect(),
            TokenModel::Hf(t) => {
                let specials: std::collections::HashSet<u32> = t
                    .get_added_vocabulary()
                    .get_added_tokens_decoder()
                    .keys()
                    .copied()
                    .collect();
                let n = t.get_vocab_size(false).min(20_000) as u32;
                (0..n)
                    .filter(|id| !specials.contains(id))
                    .filter_map(|id| t.decode(&[id], true).ok())
                    .filter(|s| !s.is_empty() && !s.contains('\u{fffd}'))
                    // Only pieces that re-encode to one token, so counts of generated text agree.
                    .filter(|s| t.encode_fast(s.as_str(), false).is_ok_and(|e| e.len() == 1))
                    .take(8192)
                    .collect()
            }
        };
        raw.into_iter()
            .map(|r| {
                let quoted = serde_json::to_string(&r).expect("strings serialise");
                let escaped = quoted[1..quoted.len() - 1].to_string();
                (r, escaped)
            })
            .collect()
    }
}
