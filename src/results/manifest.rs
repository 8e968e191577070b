//! A run folder's `manifest.json`, typed: what `run` and `merge` write, and what
//! `report`, `merge`, `--resume`, `compare` and the history read back. The one place
//! that names the manifest's keys; everything else reads fields.
//!
//! Every field has a default, so a manifest an older benchplan wrote (without
//! `judging`, `judged`, `verdict`, …) still reads; keys this version does not know are
//! kept out of the way, not refused.

use std::path::Path;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The manifest's file name in a run folder.
pub const FILE: &str = "manifest.json";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Manifest {
    pub tool: String,
    pub tool_version: String,
    pub plan: Option<String>,
    /// The plan's identity for resume and merge: its cases (see `executor::plan_hash`).
    pub plan_hash: String,
    /// How the plan judges its cases (name, SLOs, floors, regression settings), as
    /// `executor::judging` describes them; shards that differ here are not merged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judging: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judging_hash: Option<String>,
    /// The command line, redacted.
    pub command: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub commit: Option<String>,
    pub started: Option<String>,
    pub finished: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<bool>,
    pub services: IndexMap<String, ServiceEntry>,
    pub cases: Vec<CaseEntry>,
    /// A shard's share of the plan (`run --shard`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardEntry>,
    /// The shards a merged folder came from (`merge`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged_from: Option<Vec<MergedFrom>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_shards: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<bool>,
    /// What the run judged beside its cases (`report::view::Judged`, which the report
    /// room types: it sits above this one), so `report DIR` rebuilds the same verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judged: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// A service as the run found it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServiceEntry {
    /// `simulator`, `external`, or `vllm bench serve results`.
    pub kind: String,
    /// Without credentials (see `redact`).
    pub base_url: String,
    pub model: String,
    /// What the server's `/version` answered (its own JSON), if it answered.
    pub version: Option<Value>,
    /// Why it did not come up.
    pub error: Option<String>,
}

impl ServiceEntry {
    /// The version string a server reported (`{"version": "0.33.0"}`), if any.
    pub fn version_text(&self) -> Option<&str> {
        self.version.as_ref()?.get("version")?.as_str()
    }
}

/// A case and how it ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CaseEntry {
    pub id: String,
    pub service: String,
    /// `ok`, `failed`, `timeout`, `interrupted`, `not_run`, `pending` (not ended yet),
    /// `missing` (a merge without its shard).
    pub status: String,
    /// The result file, in the folder.
    pub file: Option<String>,
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo_pass: Option<bool>,
    /// The matrix values other than the service and the load, by axis key.
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub axes: IndexMap<String, String>,
    /// A merged case whose repeats ran on several shards: the repeats it pools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged_repeats: Option<Vec<u64>>,
}

/// The status of a measured case whose open-loop queue grew without bound.
pub const OVERSATURATED: &str = "oversaturated";

impl CaseEntry {
    /// Measured (an over-saturated case was measured too, and is not run again).
    pub fn is_ok(&self) -> bool {
        self.status == "ok" || self.status == OVERSATURATED
    }
}

/// A shard's share of its plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ShardEntry {
    pub index: u64,
    pub count: u64,
    /// `service`, `case` or `repeat` (the planner's `ShardBy`).
    pub by: String,
    /// How many cases the whole plan has, and their ids.
    pub plan_cases: usize,
    pub plan_case_ids: Vec<String>,
    /// The cases this shard owns.
    pub cases: Vec<String>,
    pub plan_repeats: u64,
    /// Cut by repeat: which runs of each case are here (`{id}.rep{k}.json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeats: Option<IndexMap<String, Vec<u64>>>,
}

/// One shard a merged folder came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MergedFrom {
    pub index: u64,
    pub count: u64,
    pub dir: String,
}

/// The run's verdict: its exit code and what decided it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Verdict {
    pub pass: bool,
    pub exit: u8,
    pub cases: usize,
    pub not_measured: usize,
    pub slo_failures: usize,
    pub regressions: usize,
    pub trend_regressions: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<usize>,
}

impl Manifest {
    /// The manifest of run folder `dir`; an error names the file and says why.
    pub fn read(dir: &Path) -> Result<Manifest, String> {
        let path = dir.join(FILE);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a manifest: {e}", path.display()))
    }

    /// The manifest of `dir` when it has one (a folder of plain `vllm bench serve`
    /// results has none); one that is there but damaged is an error.
    pub fn read_if_any(dir: &Path) -> Result<Option<Manifest>, String> {
        if dir.join(FILE).is_file() {
            Manifest::read(dir).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Writes the manifest into `dir`, whole or not at all.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("a manifest serialises");
        bytes.push(b'\n');
        crate::files::write_atomic(&dir.join(FILE), &bytes)
    }

    /// The entry of case `id`.
    pub fn case(&self, id: &str) -> Option<&CaseEntry> {
        self.cases.iter().find(|c| c.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_run_reads_back_and_writes_the_same_keys() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fixed-run");
        let m = Manifest::read(&dir).unwrap();
        assert_eq!(m.plan.as_deref(), Some("fixed-run"));
        assert_eq!(m.cases.len(), 4);
        assert!(m.cases.iter().all(CaseEntry::is_ok));
        assert_eq!(m.services["a"].version_text(), Some("benchplan-sim 0.1.0"));
        // Written again, it reads the same; every key of the file is one the type knows.
        let text = std::fs::read_to_string(dir.join(FILE)).unwrap();
        let raw: Value = serde_json::from_str(&text).unwrap();
        let back = serde_json::to_value(&m).unwrap();
        for k in raw.as_object().unwrap().keys() {
            assert!(back.get(k).is_some(), "{k} is lost on a round trip");
        }
        assert_eq!(serde_json::from_value::<Manifest>(back).unwrap(), m);
    }

    #[test]
    fn an_older_manifest_without_the_new_keys_reads() {
        let m: Manifest = serde_json::from_str(
            r#"{"tool":"benchplan","plan_hash":"x","cases":[{"id":"c","service":"s","status":"ok","file":"c.json"}]}"#,
        )
        .unwrap();
        assert!(m.verdict.is_none() && m.judged.is_none() && m.shard.is_none());
        assert_eq!(m.case("c").unwrap().file.as_deref(), Some("c.json"));
    }
}
