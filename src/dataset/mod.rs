//! Datasets: the prompts a case sends, built before any traffic so their cost is
//! never measured. Each single-turn kind returns one [`RequestInput`] per request;
//! `multi_turn` builds [`conversations::Conversations`] instead.

pub mod audio;
pub mod conversations;
pub mod files;
pub mod image;
pub mod multimodal;
pub mod random;
pub mod trace;

use std::path::Path;

use crate::client::backend::RequestInput;
use crate::plan::{CaseParams, Dataset};
use crate::tokenizer::TokenModel;

/// Builds the requests of a case; file paths are relative to `dir` (the plan's folder).
pub fn build(
    params: &CaseParams,
    tokens: &TokenModel,
    dir: &Path,
) -> Result<Vec<RequestInput>, String> {
    let n = params.num_prompts as usize;
    let seed = params.seed;
    let mut inputs = match &params.dataset {
        Dataset::Random(d) => random::random(d, n, seed, tokens, params.backend()),
        Dataset::RandomRerank(d) => random::rerank(d, n, seed, tokens),
        Dataset::PrefixRepetition(d) => random::prefix_repetition(d, n, seed, tokens),
        Dataset::RandomMm(d) => multimodal::random_mm(d, n, seed, tokens),
        Dataset::Sharegpt(d) => files::sharegpt(d, n, seed, tokens, dir),
        Dataset::Custom(d) => files::custom(
            d,
            n,
            seed,
            tokens,
            dir,
            params.backend().spec().chat_messages,
        ),
        Dataset::Burstgpt(d) => files::burstgpt(d, n, seed, tokens, dir),
        Dataset::RandomAudio(d) => audio::random_audio(d, n, seed, tokens),
        Dataset::CustomAudio(d) => audio::custom_audio(d, n, seed, tokens, dir),
        Dataset::Trace(d) => trace::build(d, n, seed, tokens, dir),
        Dataset::MultiTurn(_) => {
            Err("multi_turn builds conversations: use dataset::conversations::build".into())
        }
    }?;
    assign_loras(&mut inputs, params);
    Ok(inputs)
}

/// Names each request's LoRA adapter as vLLM's benchmark does: round-robin gives
/// request i adapter i mod n; random draws one per request, here from the case's
/// seed (vLLM draws from Python's `random`, so the sequence differs but not the
/// distribution).
pub fn assign_loras(inputs: &mut [RequestInput], params: &CaseParams) {
    use crate::plan::params::LoraAssignment;
    let names: Vec<std::sync::Arc<str>> = params
        .lora_modules
        .iter()
        .map(|m| std::sync::Arc::from(m.as_str()))
        .collect();
    if names.is_empty() {
        return;
    }
    // Its own stream, so adding LoRAs changes no prompt.
    let mut rng = crate::rng::Rng::new(params.seed ^ 0x4c6f_5241);
    for (i, input) in inputs.iter_mut().enumerate() {
        let k = match params.lora_assignment.unwrap_or_default() {
            LoraAssignment::RoundRobin => i % names.len(),
            LoraAssignment::Random => rng.range(0, names.len() as u64 - 1) as usize,
        };
        input.model = Some(names[k].clone());
    }
}
