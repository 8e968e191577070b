//! Random prompts of exact token lengths (vLLM's `RandomDataset`, reference §6.1):
//! lengths uniform in [⌊L(1−r)⌋, ⌈L(1+r)⌉] after subtracting the tokens the
//! tokenizer adds itself, consecutive ids from a random offset per request.
//!
//! Deliberate difference: where vLLM decodes random ids and re-encodes (drifting off
//! the length, vLLM #10847), prompts here are built from whole-word tokens, each of
//! which stays one token when concatenated, so lengths are exact by construction and
//! 100,000 prompts build in seconds. The server tokenizer (no vocabulary to inspect)
//! uses decode → re-encode → trim or extend instead.

use crate::client::backend::{Prompt, RequestInput};
use crate::plan::Backend;
use crate::plan::dataset::{PrefixRepetitionDataset, RandomDataset, RandomRerankDataset};
use crate::rng::Rng;
use crate::tokenizer::TokenModel;

/// Token ids a random prompt may use: the vocabulary without special tokens.
/// The token ids synthetic prompts are drawn from; an error (never a panic later) when
/// the tokenizer yields none, as a server tokenizer whose `/tokenize` does not answer.
pub fn allowed_ids(tokens: &TokenModel) -> Result<Vec<u32>, String> {
    let ids = tokens.allowed_ids();
    if ids.is_empty() {
        return Err(match tokens {
            TokenModel::Server(a) => format!(
                "the server tokenizer at {a} gave no tokens (its /tokenize did not answer with any); set a local tokenizer or a Hugging Face id instead (plan: `tokenizer`, bench: --tokenizer)"
            ),
            _ => "the tokenizer has no usable token to build prompts from".to_string(),
        });
    }
    Ok(ids)
}

/// Tokens the tokenizer adds by itself to every encoding (such as a BOS).
pub fn num_special_tokens(tokens: &TokenModel) -> u64 {
    tokens.num_special_tokens()
}

/// Uniform lengths in [⌊L(1−r)⌋, ⌈L(1+r)⌉], at least `min`.
fn lengths(rng: &mut Rng, n: usize, len: u64, r: f64, min: u64) -> Vec<u64> {
    let lo = ((len as f64 * (1.0 - r)).floor() as u64).max(min);
    let hi = ((len as f64 * (1.0 + r)).ceil() as u64).max(lo);
    (0..n).map(|_| rng.range(lo, hi)).collect()
}

/// Decodes `ids` to text with exactly `target` tokens when re-encoded (up to 10 tries),
/// returning the text and its real token count.
pub fn text_of_length(
    tokens: &TokenModel,
    mut ids: Vec<u32>,
    target: usize,
    allowed: &[u32],
    rng: &mut Rng,
) -> (String, usize) {
    if let Some(words) = tokens.word_table() {
        // Exact by construction: one whole-word token per id (see `TokenModel::word_table`).
        ids.truncate(target);
        while ids.len() < target {
            ids.push(rng.next_u64() as u32);
        }
        let mut text = String::with_capacity(target * 7);
        for id in &ids {
            text.push_str(&words[*id as usize % words.len()]);
        }
        // The built-in tokenizer ignores the leading space; a real one counts it in the first word.
        return (text, target);
    }
    let mut text = tokens.decode(&ids);
    for _ in 0..10 {
        let re = tokens.encode(&text);
        if re.len() == target {
            return (text, target);
        }
        ids = re;
        if ids.len() > target {
            ids.truncate(target);
        } else {
            while ids.len() < target {
                ids.push(allowed[rng.range(0, allowed.len() as u64 - 1) as usize]);
            }
        }
        text = tokens.decode(&ids);
    }
    // Rare: random byte-level pieces that never settle. Rebuild from whole-word tokens
    // that each start a new pre-token, so the count is exact by construction.
    let pool = tokens.space_pool();
    if !pool.is_empty() {
        let ids: Vec<u32> = (0..target)
            .map(|_| pool[rng.range(0, pool.len() as u64 - 1) as usize])
            .collect();
        let t = tokens.decode(&ids);
        let n = tokens.count(&t);
        if n == target {
            return (t, n);
        }
    }
    let n = tokens.count(&text);
    (text, n)
}

fn consecutive(allowed: &[u32], offset: u64, i: usize, len: u64) -> Vec<u32> {
    let n = allowed.len() as u64;
    (0..len)
        .map(|k| allowed[((offset + i as u64 + k) % n) as usize])
        .collect()
}

/// vLLM's random dataset.
pub fn random(
    d: &RandomDataset,
    n: usize,
    seed: u64,
    tokens: &TokenModel,
    backend: Backend,
) -> Result<Vec<RequestInput>, String> {
    let special = num_special_tokens(tokens);
    let real_in = d.input_len.saturating_sub(special);
    if d.prefix_len + ((real_in as f64) * (1.0 - d.range_ratio)).floor() as u64 == 0 {
        return Err(format!(
            "input_len {} leaves no room for prompt text after the {special} special token(s) the tokenizer adds; use a larger input_len",
            d.input_len
        ));
    }
    let mut rng = Rng::new(seed);
    let allowed = allowed_ids(tokens)?;
    let in_lens = lengths(
        &mut rng,
        n * d.batch_size.max(1) as usize,
        real_in,
        d.range_ratio,
        0,
    );
    let out_lens = lengths(
        &mut rng,
        n,
        d.output_len,
        d.output_range_ratio.unwrap_or(d.range_ratio),
        1,
    );
    let prefix: Vec<u32> = (0..d.prefix_len)
        .map(|_| allowed[rng.range(0, allowed.len() as u64 - 1) as usize])
        .collect();
    let mut prompts = Vec::with_capacity(in_lens.len());
    for (i, len) in in_lens.iter().enumerate() {
        let offset = rng.range(0, allowed.len() as u64 - 1);
        let mut ids = prefix.clone();
        ids.extend(consecutive(&allowed, offset, i, *len));
        let target = (d.prefix_len + len) as usize;
        prompts.push(text_of_length(tokens, ids, target, &allowed, &mut rng));
    }
    let batch = d.batch_size.max(1) as usize;
    let embeddings = backend.spec().batched_inputs && batch > 1;
    let mut out = Vec::with_capacity(n);
    let mut it = prompts.into_iter();
    for out_len in out_lens {
        if embeddings {
            let group: Vec<(String, usize)> = it.by_ref().take(batch).collect();
            let len = group.iter().map(|(_, l)| *l as u64).sum();
            out.push(RequestInput {
                model: None,
                prompt: Prompt::Batch(group.into_iter().map(|(t, _)| t).collect()),
                prompt_len: len,
                output_len: out_len,
                arrival: None,
            });
        } else {
            let (text, len) = it.next().expect("one prompt per request");
            out.push(RequestInput {
                model: None,
                prompt: Prompt::Text(text),
                prompt_len: len as u64,
                output_len: out_len,
                arrival: None,
            });
            // Prompts beyond the first of a batch are only used by embeddings.
            for _ in 1..batch {
                it.next();
            }
        }
    }
    Ok(out)
}

/// A random query with `batch_size` random documents per request.
pub fn rerank(
    d: &RandomRerankDataset,
    n: usize,
    seed: u64,
    tokens: &TokenModel,
) -> Result<Vec<RequestInput>, String> {
    let mut rng = Rng::new(seed);
    let allowed = allowed_ids(tokens)?;
    let docs = d.batch_size.max(1) as usize;
    let lens = lengths(&mut rng, n * (docs + 1), d.input_len, d.range_ratio, 1);
    let mut it = lens.into_iter().enumerate();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut texts = Vec::with_capacity(docs + 1);
        let mut total = 0u64;
        for (i, len) in it.by_ref().take(docs + 1) {
            let offset = rng.range(0, allowed.len() as u64 - 1);
            let (t, l) = text_of_length(
                tokens,
                consecutive(&allowed, offset, i, len),
                len as usize,
                &allowed,
                &mut rng,
            );
            total += l as u64;
            texts.push(t);
        }
        let query = texts.remove(0);
        out.push(RequestInput {
            model: None,
            prompt: Prompt::Rerank {
                query,
                documents: texts,
            },
            prompt_len: total,
            output_len: 0,
            arrival: None,
        });
    }
    Ok(out)
}

/// `num_prefixes` shared prefixes, each followed by different suffixes, shuffled.
pub fn prefix_repetition(
    d: &PrefixRepetitionDataset,
    n: usize,
    seed: u64,
    tokens: &TokenModel,
) -> Result<Vec<RequestInput>, String> {
    if (n as u64) < d.num_prefixes {
        return Err(format!(
            "num_prompts {n} is below num_prefixes {}: every prefix needs a request",
            d.num_prefixes
        ));
    }
    let mut rng = Rng::new(seed);
    let allowed = allowed_ids(tokens)?;
    let pick = |rng: &mut Rng, len: u64| -> Vec<u32> {
        (0..len)
            .map(|_| allowed[rng.range(0, allowed.len() as u64 - 1) as usize])
            .collect()
    };
    let mut out = Vec::with_capacity(n);
    for p in 0..d.num_prefixes {
        let prefix = pick(&mut rng, d.prefix_len);
        let count = n as u64 / d.num_prefixes + u64::from(p < n as u64 % d.num_prefixes);
        for _ in 0..count {
            let mut ids = prefix.clone();
            ids.extend(pick(&mut rng, d.suffix_len));
            let target = (d.prefix_len + d.suffix_len) as usize;
            let (text, len) = text_of_length(tokens, ids, target, &allowed, &mut rng);
            out.push(RequestInput {
                model: None,
                prompt: Prompt::Text(text),
                prompt_len: len as u64,
                output_len: d.output_len,
                arrival: None,
            });
        }
    }
    // Fisher–Yates with the dataset's own generator.
    for i in (1..out.len()).rev() {
        out.swap(i, rng.range(0, i as u64) as usize);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_prompts_have_exact_lengths_within_the_range() {
        let d = RandomDataset {
            input_len: 100,
            output_len: 20,
            range_ratio: 0.5,
            ..RandomDataset::default()
        };
        let reqs = random(&d, 500, 1, &TokenModel::Builtin, Backend::Openai).unwrap();
        for r in &reqs {
            let Prompt::Text(t) = &r.prompt else { panic!() };
            assert_eq!(crate::tokenizer::builtin::count(t) as u64, r.prompt_len);
            assert!((50..=150).contains(&r.prompt_len));
            assert!((10..=30).contains(&r.output_len));
        }
        let same = random(&d, 500, 1, &TokenModel::Builtin, Backend::Openai).unwrap();
        assert_eq!(reqs, same, "same seed, same prompts");
        let other = random(&d, 500, 2, &TokenModel::Builtin, Backend::Openai).unwrap();
        assert_ne!(
            reqs[0].prompt, other[0].prompt,
            "another seed, other prompts"
        );
    }

    #[test]
    fn length_one_is_not_empty_and_prefixes_are_shared() {
        let d = RandomDataset {
            input_len: 1,
            output_len: 1,
            prefix_len: 4,
            ..RandomDataset::default()
        };
        let reqs = random(&d, 3, 0, &TokenModel::Builtin, Backend::Openai).unwrap();
        let texts: Vec<&str> = reqs
            .iter()
            .map(|r| match &r.prompt {
                Prompt::Text(t) => t.as_str(),
                _ => "",
            })
            .collect();
        assert!(reqs.iter().all(|r| r.prompt_len == 5));
        let first4 = |t: &str| t.split(' ').take(4).collect::<Vec<_>>().join(" ");
        assert_eq!(first4(texts[0]), first4(texts[1]));
    }
}
