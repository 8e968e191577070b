//! random-mm: random text of exact length plus synthetic images (vLLM's
//! `RandomMultiModalDataset`): a per-request item count around
//! `base_items_per_request`, capped by `limit_mm_per_prompt`, sizes drawn from the
//! buckets by probability; text first, images after it, as chat content parts.

use serde_json::json;

use super::image::{data_url, random_png};
use super::random::{allowed_ids, num_special_tokens, text_of_length};
use crate::client::backend::{Prompt, RequestInput};
use crate::plan::dataset::RandomMmDataset;
use crate::rng::Rng;
use crate::tokenizer::TokenModel;

pub fn random_mm(
    d: &RandomMmDataset,
    n: usize,
    seed: u64,
    tokens: &TokenModel,
) -> Result<Vec<RequestInput>, String> {
    let buckets: Vec<_> = d.buckets.iter().filter(|b| b.probability > 0.0).collect();
    if buckets.iter().any(|b| b.frames > 1) {
        return Err(
            "random-mm: video buckets (frames > 1) are not supported yet; use images (frames = 1)"
                .into(),
        );
    }
    if buckets.iter().any(|b| b.width == 0 || b.height == 0) {
        return Err("random-mm: image sizes must be at least 1 x 1".into());
    }
    if buckets.is_empty() {
        return Err("random-mm: no bucket has a positive probability".into());
    }
    let total_p: f64 = buckets.iter().map(|b| b.probability).sum();
    let cap = d
        .limit_mm_per_prompt
        .get("image")
        .copied()
        .unwrap_or(u64::MAX);
    let base = d.base_items_per_request as f64;
    let lo = (base * (1.0 - d.num_mm_items_range_ratio)).floor() as u64;
    let hi = ((base * (1.0 + d.num_mm_items_range_ratio)).ceil() as u64)
        .min(cap)
        .max(lo.min(cap));
    let lo = lo.min(hi);

    let mut rng = Rng::new(seed);
    let allowed = allowed_ids(tokens)?;
    let real_in = d.input_len.saturating_sub(num_special_tokens(tokens));
    let in_lo = ((real_in as f64) * (1.0 - d.range_ratio)).floor() as u64;
    let in_hi = ((real_in as f64) * (1.0 + d.range_ratio)).ceil() as u64;
    let out_lo = ((d.output_len as f64 * (1.0 - d.range_ratio)).floor() as u64).max(1);
    let out_hi = ((d.output_len as f64 * (1.0 + d.range_ratio)).ceil() as u64).max(out_lo);
    let prefix: Vec<u32> = (0..d.prefix_len)
        .map(|_| allowed[rng.range(0, allowed.len() as u64 - 1) as usize])
        .collect();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let len = rng.range(in_lo, in_hi.max(in_lo));
        let offset = rng.range(0, allowed.len() as u64 - 1);
        let mut ids = prefix.clone();
        ids.extend(
            (0..len).map(|k| allowed[((offset + i as u64 + k) % allowed.len() as u64) as usize]),
        );
        let (text, text_len) = text_of_length(
            tokens,
            ids,
            (d.prefix_len + len) as usize,
            &allowed,
            &mut rng,
        );
        let mut parts = vec![json!({"type": "text", "text": text})];
        for _ in 0..rng.range(lo, hi) {
            let mut pick = rng.f64() * total_p;
            let b = buckets.iter().find(|b| {
                pick -= b.probability;
                pick <= 0.0
            });
            let b = b.unwrap_or(&buckets[buckets.len() - 1]);
            let url = data_url(&random_png(b.width, b.height, &mut rng));
            parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
        }
        out.push(RequestInput {
            model: None,
            prompt: Prompt::Messages(json!([{"role": "user", "content": parts}])),
            prompt_len: text_len as u64,
            output_len: rng.range(out_lo, out_hi),
            arrival: None,
        });
    }
    Ok(out)
}
