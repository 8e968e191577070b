//! Datasets: the prompts a case sends, built before any traffic so their cost is
//! never measured. Each single-turn kind returns one [`RequestInput`] per request;
//! `multi_turn` builds [`conversations::Conversations`] instead.

pub mod conversations;
pub mod files;
pub mod image;
pub mod multimodal;
pub mod random;

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
    match &params.dataset {
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
            params.backend() == crate::plan::Backend::OpenaiChat,
        ),
        Dataset::Burstgpt(d) => files::burstgpt(d, n, seed, tokens, dir),
        Dataset::MultiTurn(_) => {
            Err("multi_turn builds conversations: use dataset::conversations::build".into())
        }
    }
}
