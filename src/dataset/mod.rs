//! Datasets: the prompts a case sends, built before any traffic so their cost is
//! never measured. Each kind returns one [`RequestInput`] per request.

pub mod random;

use crate::client::backend::RequestInput;
use crate::plan::{CaseParams, Dataset};
use crate::tokenizer::TokenModel;

/// Builds the requests of a case.
pub fn build(params: &CaseParams, tokens: &TokenModel) -> Result<Vec<RequestInput>, String> {
    let n = params.num_prompts as usize;
    let seed = params.seed;
    match &params.dataset {
        Dataset::Random(d) => random::random(d, n, seed, tokens, params.backend()),
        Dataset::RandomRerank(d) => random::rerank(d, n, seed, tokens),
        Dataset::PrefixRepetition(d) => random::prefix_repetition(d, n, seed, tokens),
        other => Err(format!(
            "dataset `{}` is not built yet by this version; use random, random-rerank or prefix_repetition",
            other.name()
        )),
    }
}
