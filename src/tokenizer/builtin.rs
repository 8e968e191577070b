//! The built-in tokenizer: one token per whitespace-separated word.
//!
//! Deterministic and file-free, so `/tokenize`, `usage` and a client that builds
//! prompts from [`word`] all agree on every count. Ids below [`VOCAB_SIZE`] are the
//! synthetic words `word(id)`; any other word gets a stable hashed id above them.

use std::collections::HashMap;
use std::sync::OnceLock;

const CONSONANTS: &[u8; 16] = b"bdfghjklmnprstvz";
const VOWELS: &[u8; 5] = b"aeiou";
const SYLLABLES: usize = CONSONANTS.len() * VOWELS.len();

/// Number of synthetic words (two syllables each).
pub const VOCAB_SIZE: u32 = (SYLLABLES * SYLLABLES) as u32;

/// Ids of words outside the vocabulary lie in [VOCAB_SIZE, VOCAB_SIZE + HASHED_IDS).
const HASHED_IDS: u32 = 1 << 20;

fn syllable(i: usize, out: &mut String) {
    out.push(CONSONANTS[i / VOWELS.len()] as char);
    out.push(VOWELS[i % VOWELS.len()] as char);
}

fn words() -> &'static (Vec<String>, HashMap<String, u32>) {
    static WORDS: OnceLock<(Vec<String>, HashMap<String, u32>)> = OnceLock::new();
    WORDS.get_or_init(|| {
        let list: Vec<String> = (0..VOCAB_SIZE as usize)
            .map(|i| {
                let mut w = String::with_capacity(4);
                syllable(i / SYLLABLES, &mut w);
                syllable(i % SYLLABLES, &mut w);
                w
            })
            .collect();
        let index = list
            .iter()
            .enumerate()
            .map(|(i, w)| (w.clone(), i as u32))
            .collect();
        (list, index)
    })
}

/// The text of a vocabulary id (ids outside the vocabulary wrap around).
pub fn word(id: u32) -> &'static str {
    &words().0[(id % VOCAB_SIZE) as usize]
}

/// The id of one word.
pub fn id_of(word: &str) -> u32 {
    match words().1.get(word) {
        Some(&id) => id,
        None => VOCAB_SIZE + (crate::hash::fnv1a64(word.as_bytes()) % u64::from(HASHED_IDS)) as u32,
    }
}

/// Token ids of a text.
pub fn encode(text: &str) -> Vec<u32> {
    text.split_whitespace().map(id_of).collect()
}

/// Number of tokens in a text, without allocating.
pub fn count(text: &str) -> usize {
    text.split_whitespace().count()
}

/// Text of token ids, space-separated.
pub fn decode(ids: &[u32]) -> String {
    let mut s = String::with_capacity(ids.len() * 5);
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(if *id < VOCAB_SIZE { word(*id) } else { "<unk>" });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_count() {
        assert_eq!(VOCAB_SIZE, 6400);
        let ids: Vec<u32> = vec![0, 1, 6399, 4242];
        let text = decode(&ids);
        assert_eq!(encode(&text), ids);
        assert_eq!(count(&text), 4);
        assert_eq!(count("  hello,  world\n\tagain "), 3);
        assert!(id_of("hello,") >= VOCAB_SIZE);
        assert_eq!(id_of("hello,"), id_of("hello,"));
        let mut all: Vec<&str> = (0..VOCAB_SIZE).map(word).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), VOCAB_SIZE as usize, "words are distinct");
    }
}
