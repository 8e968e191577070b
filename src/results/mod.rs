//! Writing results: vLLM-compatible result JSON, file names, atomic writes.

pub mod deviations;
pub mod vllm_json;
pub mod write;
