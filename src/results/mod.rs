//! Result files: the vLLM-compatible result JSON and its typed reader, the run folder's
//! typed manifest, file names, the folder lock, and the one result of a case's repeats.

pub mod deviations;
pub mod judge;
pub mod lock;
pub mod manifest;
pub mod read;
pub mod repeats;
pub mod vllm_json;
