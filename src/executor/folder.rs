//! The run folder: created new and atomically for every run (two runs started in the
//! same second get `batch_…` and `batch_…_2`, never one folder), and the plan copies
//! archived in it with secret values replaced.

use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::json;

use crate::files::json_bytes;
use crate::files::write_atomic;
use crate::planner::Planned;
use crate::redact::{redact_json, scrub, secret_values};

/// Creates `batch/batch_YYYYMMDD_HHMMSS`, or the first free `…_N` after it.
/// `create_dir` fails on an existing folder, so no two runs can share one.
pub fn new_run_dir(batch: &Path, started: SystemTime) -> io::Result<PathBuf> {
    std::fs::create_dir_all(batch)?;
    let stem = format!("batch_{}", crate::timefmt::stamp_underscore(started));
    for n in 1..100_000u32 {
        let name = if n == 1 {
            stem.clone()
        } else {
            format!("{stem}_{n}")
        };
        let dir = batch.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!(
        "no free run folder name under {}",
        batch.display()
    )))
}

/// Writes `plan.toml|yaml` (the text as given, secret values replaced) and
/// `plan.resolved.json` (the plan with overrides applied, and the cases; redacted).
pub fn write_plan_copies(dir: &Path, planned: &Planned) -> Result<(), String> {
    let ext = match planned.source.format {
        crate::plan::Format::Toml => "toml",
        crate::plan::Format::Yaml => "yaml",
    };
    let secrets = secret_values(&planned.source.value);
    let mut plan = serde_json::to_value(&planned.plan).expect("plan serialises");
    redact_json(&mut plan);
    let mut cases: Vec<serde_json::Value> = planned
        .cases
        .iter()
        .map(|c| serde_json::to_value(c).expect("case serialises"))
        .collect();
    cases.iter_mut().for_each(redact_json);
    let writes = [
        (
            dir.join(format!("plan.{ext}")),
            scrub(&planned.source.text, &secrets).into_bytes(),
        ),
        (
            dir.join("plan.resolved.json"),
            json_bytes(&json!({"plan": plan, "cases": cases})),
        ),
    ];
    for (path, bytes) in writes {
        write_atomic(&path, &bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_runs_in_one_second_get_two_folders() {
        let base = std::env::temp_dir().join(format!("benchplan-folder-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let t = SystemTime::now();
        let a = new_run_dir(&base, t).unwrap();
        let b = new_run_dir(&base, t).unwrap();
        assert_ne!(a, b);
        assert!(b.file_name().unwrap().to_string_lossy().ends_with("_2"));
        let _ = std::fs::remove_dir_all(&base);
    }
}
