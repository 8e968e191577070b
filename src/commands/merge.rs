//! `benchplan merge DIR…`: the shards of one plan (`run --shard I/N`) into one run folder.
//!
//! The shards must come from the same plan (hash) and cover every case exactly once; a
//! missing or duplicated shard is named. With `--allow-partial` what is there is merged,
//! the missing cases are listed as such and the exit code is 1. The merged folder is a
//! run folder like any other (manifest, case JSONs, report.md, summary.csv, JUnit,
//! `$GITHUB_STEP_SUMMARY`), so `report` and `compare` read it too.
//!
//! By-service shards own whole cases, so a case's numbers come from one shard and
//! nothing is averaged; each case's SLO verdicts are those it was judged on.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Map, Value, json};

use crate::executor::{RunSettings, json_bytes, write_reports};
use crate::exit::Exit;
use crate::results::write::write_atomic;

/// One shard folder and its manifest.
struct ShardDir {
    dir: PathBuf,
    manifest: Value,
}

impl ShardDir {
    fn index(&self) -> u64 {
        self.manifest["shard"]["index"].as_u64().unwrap_or(u64::MAX)
    }
    fn count(&self) -> u64 {
        self.manifest["shard"]["count"].as_u64().unwrap_or(0)
    }
}

/// Shard folders under `dir` (itself, or folders below it, two levels deep at most).
fn find_shards(dir: &Path, depth: usize, out: &mut Vec<ShardDir>) {
    if let Ok(text) = std::fs::read_to_string(dir.join("manifest.json")) {
        if let Ok(m) = serde_json::from_str::<Value>(&text) {
            if m.get("shard").is_some_and(Value::is_object) {
                out.push(ShardDir {
                    dir: dir.to_path_buf(),
                    manifest: m,
                });
                return;
            }
        }
    }
    if depth == 0 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut subs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        // `latest` links to a run that is listed anyway.
        .filter(|p| p.is_dir() && !p.is_symlink())
        .collect();
    subs.sort();
    for s in subs {
        find_shards(&s, depth - 1, out);
    }
}

/// `1/3, 2/3`: shards as a user names them.
fn shard_names(indexes: &[u64], count: u64) -> String {
    let names: Vec<String> = indexes.iter().map(|i| format!("{i}/{count}")).collect();
    names.join(", ")
}

pub struct MergeArgs {
    pub dirs: Vec<PathBuf>,
    pub results_dir: PathBuf,
    pub allow_partial: bool,
    pub junit: Option<PathBuf>,
}

pub fn run(args: &MergeArgs) -> Exit {
    match merge(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            Exit::BadPlan
        }
    }
}

fn merge(args: &MergeArgs) -> Result<Exit, String> {
    let mut shards = Vec::new();
    for d in &args.dirs {
        let before = shards.len();
        find_shards(d, 2, &mut shards);
        if shards.len() == before {
            return Err(format!(
                "{} holds no shard folder (a run folder written with `run --shard I/N`)",
                d.display()
            ));
        }
    }
    let first = &shards[0];
    let hash = first.manifest["plan_hash"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let count = first.count();
    for s in &shards {
        if s.manifest["plan_hash"].as_str() != Some(hash.as_str()) {
            return Err(format!(
                "{} comes from another plan (hash {}) than {} (hash {hash}): merge shards of one plan",
                s.dir.display(),
                s.manifest["plan_hash"].as_str().unwrap_or("?"),
                first.dir.display()
            ));
        }
        if s.count() != count {
            return Err(format!(
                "{} is a shard of {} but {} of {count}: every shard must be cut the same way",
                s.dir.display(),
                s.count(),
                first.dir.display()
            ));
        }
    }
    for (k, a) in shards.iter().enumerate() {
        if let Some(b) = shards[k + 1..].iter().find(|b| b.index() == a.index()) {
            return Err(format!(
                "shard {}/{count} appears twice: {} and {}; keep one of them",
                a.index(),
                a.dir.display(),
                b.dir.display()
            ));
        }
    }
    let missing: Vec<u64> = (0..count)
        .filter(|i| !shards.iter().any(|s| s.index() == *i))
        .collect();
    let plan_ids: Vec<String> = first.manifest["shard"]["plan_case_ids"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    // Which shard owns each case; a case owned twice is a broken cut.
    let mut owner: Map<String, Value> = Map::new();
    for s in &shards {
        for id in s.manifest["shard"]["cases"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let id = id.as_str().unwrap_or("").to_string();
            if owner.contains_key(&id) {
                return Err(format!(
                    "case {id} is in two shards; were they cut with different --shard-by?"
                ));
            }
            owner.insert(id, json!(s.index()));
        }
    }
    let uncovered: Vec<&String> = plan_ids
        .iter()
        .filter(|id| !owner.contains_key(*id))
        .collect();
    if !missing.is_empty() && !args.allow_partial {
        let names = shard_names(&missing, count);
        return Err(format!(
            "shard {} missing ({} of {} cases not covered); run it, or merge with --allow-partial",
            names,
            uncovered.len(),
            plan_ids.len()
        ));
    }

    // One run folder, as a single machine would have written it.
    let now = SystemTime::now();
    let dir = crate::executor::folder::new_run_dir(&args.results_dir.join("batch"), now)
        .map_err(|e| format!("cannot create the merged folder: {e}"))?;
    let mut cases = Vec::new();
    let mut services = Map::new();
    let (mut started, mut finished): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for s in &shards {
        if let Some(m) = s.manifest["services"].as_object() {
            services.extend(m.clone());
        }
        started.extend(s.manifest["started"].as_str().map(str::to_string));
        finished.extend(s.manifest["finished"].as_str().map(str::to_string));
    }
    for id in &plan_ids {
        let entry = shards.iter().find_map(|s| {
            s.manifest["cases"]
                .as_array()?
                .iter()
                .find(|c| c["id"] == id.as_str())
                .map(|c| (s, c.clone()))
        });
        match entry {
            Some((s, c)) => {
                if let Some(file) = c["file"].as_str() {
                    std::fs::copy(s.dir.join(file), dir.join(file))
                        .map_err(|e| format!("cannot copy {file} from {}: {e}", s.dir.display()))?;
                }
                cases.push(c);
            }
            None => {
                let names = shard_names(&missing, count);
                cases.push(json!({
                    "id": id, "service": "", "status": "missing", "file": null,
                    "error": format!("not merged: shard {} did not report (merged with --allow-partial)", names),
                }));
            }
        }
    }
    for f in ["plan.resolved.json", "plan.toml", "plan.yaml"] {
        if first.dir.join(f).is_file() {
            let _ = std::fs::copy(first.dir.join(f), dir.join(f));
        }
    }
    started.sort();
    finished.sort();
    let manifest = json!({
        "tool": "benchplan", "tool_version": env!("CARGO_PKG_VERSION"),
        "plan": first.manifest["plan"], "plan_hash": hash,
        "command": crate::redact::this_command(),
        "started": started.first(), "finished": finished.last(),
        "services": services, "cases": cases,
        "merged_from": shards.iter().map(|s| json!({"index": s.index(), "count": count, "dir": s.dir.display().to_string()})).collect::<Vec<_>>(),
        "missing_shards": missing,
        "incomplete": !missing.is_empty(),
    });
    write_atomic(&dir.join("manifest.json"), &json_bytes(&manifest))
        .map_err(|e| format!("cannot write the manifest: {e}"))?;

    let (mut view, rows) = super::report::view_of(&dir)?;
    if !missing.is_empty() {
        let names = shard_names(&missing, count);
        view.description = Some(format!(
            "INCOMPLETE: shard {} did not report; {} of {} cases are missing.",
            names,
            uncovered.len(),
            plan_ids.len()
        ));
    }
    let settings = RunSettings::default();
    let code = write_reports(&dir, &view, &rows, &settings, Path::new("."));
    if code != Exit::Ok {
        return Ok(code);
    }
    if let Some(path) = &args.junit {
        write_atomic(path, crate::report::junit::junit_xml(&view).as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let failed = view.failed_cases.len();
    let mut code = Exit::Ok;
    if view.slo_failures > 0 {
        code = code.worst(Exit::SloViolated);
    }
    if failed > 0 || !missing.is_empty() {
        code = code.worst(Exit::Runtime);
    }
    eprintln!(
        "merged {} shard(s) of {count} into {}",
        shards.len(),
        dir.display()
    );
    eprintln!(
        "verdict: {} case(s), {failed} not measured, {} SLO failure(s): exit {}",
        view.cases.len(),
        view.slo_failures,
        code.code()
    );
    Ok(code)
}
