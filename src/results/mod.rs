//! Writing results: vLLM-compatible result JSON, file names, atomic writes, and the
//! one result of a case's repeats.

pub mod deviations;
pub mod lock;
pub mod repeats;
pub mod vllm_json;
pub mod write;
