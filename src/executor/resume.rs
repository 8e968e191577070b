//! Resume: what an earlier run finished.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Map, Value};

use crate::results::manifest::Manifest;
use crate::results::read::CaseFile;

/// The finished cases of a run folder (by case id, with their results), after checking
/// that the folder's plan is the current plan. A case is finished when its result file
/// is there (files are renamed into place only when whole, so one that exists is
/// complete, even if the run was killed before its manifest said so), unless the
/// result is partial (timed out or interrupted) or fell below the success-rate floor:
/// those run again.
/// Finished cases' results by case id.
pub type Finished = HashMap<String, Map<String, Value>>;

pub fn finished_cases(dir: &Path, plan_hash: &str, ids: &[&str]) -> Result<Finished, String> {
    let manifest = Manifest::read(dir)?;
    let theirs = manifest.plan_hash.as_str();
    if theirs != plan_hash {
        return Err(format!(
            "the plan changed since that run (its cases hash to {theirs}, the plan's now to {plan_hash}); resuming would mix two different plans, so start a new run"
        ));
    }
    let mut out = HashMap::new();
    for id in ids {
        let Ok(t) = std::fs::read_to_string(dir.join(format!("{id}.json"))) else {
            continue;
        };
        if let Ok(Value::Object(r)) = serde_json::from_str::<Value>(&t) {
            if CaseFile::new(&r).case_id() == Some(id) && complete(&r) {
                out.insert(id.to_string(), r);
            }
        }
    }
    Ok(out)
}

/// Whether a result counts as finished for resume: whole (not interrupted, not timed
/// out) and above the success-rate and output-ratio floors.
fn complete(r: &Map<String, Value>) -> bool {
    let r = CaseFile::new(r);
    !r.interrupted() && !r.timed_out() && !r.floor_failed()
}
