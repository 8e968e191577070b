//! Writing results: vLLM-compatible result JSON, file names, the folder lock, and the
//! one result of a case's repeats.

pub mod deviations;
pub mod lock;
pub mod repeats;
pub mod vllm_json;

use serde_json::{Map, Value};

/// Completed and failed requests of a result file (vLLM's `failed` is benchplan's key
/// too; older vLLM files keep it under `benchplan`).
pub fn counts(r: &Map<String, Value>) -> Option<(f64, f64)> {
    let ok = r.get("completed")?.as_f64()?;
    let failed = r
        .get("failed")
        .or_else(|| r.get("benchplan")?.get("failed"))
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    Some((ok, failed))
}

/// The success rate of a result file in percent; None without requests.
pub fn success_rate(r: &Map<String, Value>) -> Option<f64> {
    let (ok, failed) = counts(r)?;
    (ok + failed > 0.0).then(|| ok / (ok + failed) * 100.0)
}
