//! `benchplan merge DIR…`: the shards of one plan (`run --shard I/N`) into one run folder.
//!
//! The shards must come from the same plan (hash) and cover every case exactly once; a
//! duplicated shard is named (exit 2), and so is a missing one (exit 1: the run is not
//! whole yet). With `--allow-partial` what is there is merged,
//! the missing cases are listed as such and the exit code is 1. The merged folder is a
//! run folder like any other (manifest, case JSONs, report.md, summary.csv, JUnit,
//! `$GITHUB_STEP_SUMMARY`), so `report` and `compare` read it too.
//!
//! A case run whole on one shard is copied with the verdicts it was judged on. A case
//! whose repeats ran on several shards (`--shard-by repeat`) is pooled from its runs as
//! one machine pools its repeats: percentiles from the merged HDR histograms, never an
//! average of percentiles, and its SLOs judged again on the pooled numbers. The
//! baseline comparison (`--baseline`, else the plan's) is made on the merged folder.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Map, Value, json};

use crate::executor::RunSettings;
use crate::exit::Exit;
use crate::files::json_bytes;
use crate::files::write_atomic;
use crate::report::write::write_reports;
use crate::results::manifest::{CaseEntry, Manifest, MergedFrom, ShardEntry, Verdict};

/// A shard that ran a case: its position among the merged shards and, cut by repeat,
/// which of the case's repeats it ran.
type Owner = (usize, Option<Vec<u64>>);

/// One shard folder, its manifest and its share of the plan.
struct ShardDir {
    dir: PathBuf,
    manifest: Manifest,
    shard: ShardEntry,
}

impl ShardDir {
    fn index(&self) -> u64 {
        self.shard.index
    }
    fn count(&self) -> u64 {
        self.shard.count
    }
    /// The repeats of case `id` this shard ran, when it was cut by repeat.
    fn repeats_of(&self, id: &str) -> Option<Vec<u64>> {
        self.shard.repeats.as_ref()?.get(id).cloned()
    }
    /// This shard's manifest entry for case `id`.
    fn entry(&self, id: &str) -> Option<CaseEntry> {
        self.manifest.case(id).cloned()
    }
}

/// Case `id` into the merged folder `dir`: copied from the one shard that ran it, or,
/// cut by repeat, its runs from every shard pooled into one result as a single machine
/// pools its repeats ([`crate::results::repeats`]). Returns its manifest entry.
fn merge_case(
    shards: &[ShardDir],
    owners: &[Owner],
    id: &str,
    plan_repeats: u64,
    dir: &Path,
) -> Result<CaseEntry, String> {
    // A shard's file is read (and refused when damaged, naming the shard's own file)
    // before it is copied.
    let copy = |from: &Path, file: &str| {
        crate::results::read::read_file(&from.join(file))?;
        std::fs::copy(from.join(file), dir.join(file))
            .map_err(|e| format!("cannot copy {file} from {}: {e}", from.display()))
    };
    if let [(k, None)] = owners {
        let s = &shards[*k];
        let c = s.entry(id).unwrap_or_else(|| missing_entry(id));
        if let Some(file) = &c.file {
            copy(&s.dir, file)?;
        }
        for rep in 1..=plan_repeats {
            let file = format!("{id}.rep{rep}.json");
            if plan_repeats > 1 && s.dir.join(&file).is_file() {
                copy(&s.dir, &file)?;
            }
        }
        return Ok(c);
    }
    let mut runs: Vec<(u64, Map<String, Value>)> = Vec::new();
    let mut entry: Option<CaseEntry> = None;
    let mut errors = Vec::new();
    for (k, reps) in owners {
        let s = &shards[*k];
        let c = s.entry(id).unwrap_or_else(|| missing_entry(id));
        if !c.is_ok() {
            errors.push(format!(
                "shard {}/{}: {} ({})",
                s.index(),
                s.count(),
                c.status,
                c.error.as_deref().unwrap_or("")
            ));
        }
        // The first entry that did not go well speaks for the case.
        if entry.is_none() || (!c.is_ok() && entry.as_ref().is_some_and(CaseEntry::is_ok)) {
            entry = Some(c.clone());
        }
        for rep in reps.iter().flatten() {
            let file = format!("{id}.rep{rep}.json");
            let Ok(text) = std::fs::read_to_string(s.dir.join(&file)) else {
                continue;
            };
            let r: Map<String, Value> = serde_json::from_str(&text)
                .map_err(|e| format!("{} is not a result: {e}", s.dir.join(&file).display()))?;
            copy(&s.dir, &file)?;
            runs.push((*rep, r));
        }
    }
    runs.sort_by_key(|(rep, _)| *rep);
    let mut c = entry.unwrap_or_else(|| CaseEntry {
        id: id.into(),
        ..CaseEntry::default()
    });
    c.merged_repeats = Some(runs.iter().map(|(rep, _)| *rep).collect());
    if !errors.is_empty() {
        c.error = Some(errors.join("; "));
    }
    if runs.is_empty() {
        c.file = None;
        return Ok(c);
    }
    let results: Vec<Map<String, Value>> = runs.into_iter().map(|(_, r)| r).collect();
    let pooled = crate::results::repeats::combine(&results);
    let file = format!("{id}.json");
    write_atomic(&dir.join(&file), &json_bytes(&Value::Object(pooled)))
        .map_err(|e| format!("cannot write {file}: {e}"))?;
    c.file = Some(file);
    Ok(c)
}

/// Whether case `id` is merged whole: run whole on a shard, or, cut by repeat, every
/// one of its `plan_repeats` runs reported.
fn is_covered(
    owned: &std::collections::HashMap<String, Vec<Owner>>,
    id: &str,
    plan_repeats: u64,
) -> bool {
    owned.get(id).is_some_and(|list| {
        list.iter().any(|(_, r)| r.is_none())
            || list.iter().flat_map(|(_, r)| r.iter().flatten()).count() as u64 >= plan_repeats
    })
}

/// The entry of a case a shard does not list.
fn missing_entry(id: &str) -> CaseEntry {
    CaseEntry {
        id: id.into(),
        status: "missing".into(),
        ..CaseEntry::default()
    }
}

/// Shard folders under `dir` (itself, or folders below it, two levels deep at most).
fn find_shards(dir: &Path, depth: usize, out: &mut Vec<ShardDir>) {
    if let Ok(Some(manifest)) = Manifest::read_if_any(dir) {
        if let Some(shard) = manifest.shard.clone() {
            out.push(ShardDir {
                dir: dir.to_path_buf(),
                manifest,
                shard,
            });
            return;
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
    /// Compare with this run instead of the plan's `report.baseline`.
    pub baseline: Option<PathBuf>,
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

/// A run folder at most `depth` levels below `dir` that a live run holds (it may have
/// no manifest yet: a run takes its lock first).
fn locked_under(dir: &Path, depth: usize) -> Option<(PathBuf, u32)> {
    if let Some(pid) = crate::results::lock::holder(dir) {
        return Some((dir.to_path_buf(), pid));
    }
    if depth == 0 {
        return None;
    }
    let mut subs: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && !p.is_symlink())
        .collect();
    subs.sort();
    subs.iter().find_map(|s| locked_under(s, depth - 1))
}

fn merge(args: &MergeArgs) -> Result<Exit, String> {
    let mut shards = Vec::new();
    for d in &args.dirs {
        // A shard a run is still writing is not finished: merging it would lose cases.
        if let Some((dir, pid)) = locked_under(d, 2) {
            return Err(format!(
                "{} is in use by benchplan (pid {pid}): merge it once that run has ended",
                dir.display()
            ));
        }
        let before = shards.len();
        find_shards(d, 2, &mut shards);
        if shards.len() == before {
            return Err(format!(
                "{} holds no shard folder (a run folder written with `run --shard I/N`)",
                d.display()
            ));
        }
    }
    // A shard a run is still writing is not finished: merging it would lose cases.
    for s in &shards {
        if let Some(pid) = crate::results::lock::holder(&s.dir) {
            return Err(format!(
                "{} is in use by benchplan (pid {pid}): merge it once that run has ended",
                s.dir.display()
            ));
        }
    }
    check_one_cut(&shards)?;
    let first = &shards[0];
    let hash = first.manifest.plan_hash.clone();
    let count = first.count();
    let missing: Vec<u64> = (0..count)
        .filter(|i| !shards.iter().any(|s| s.index() == *i))
        .collect();
    let plan_ids: Vec<String> = first.shard.plan_case_ids.clone();
    let plan_repeats = first.shard.plan_repeats.max(1);
    let owned = owners(&shards)?;
    // Cut by repeat, a case is covered when all its repeats are.
    let covered = |id: &String| is_covered(&owned, id, plan_repeats);
    let uncovered: Vec<&String> = plan_ids.iter().filter(|id| !covered(id)).collect();
    if !missing.is_empty() && !args.allow_partial {
        // Not a bad input but a run that is not whole yet: exit 1, as an unclean run.
        eprintln!(
            "error: shard {} missing ({} of {} cases not covered); run it, or merge with --allow-partial",
            shard_names(&missing, count),
            uncovered.len(),
            plan_ids.len()
        );
        return Ok(Exit::Runtime);
    }

    // One run folder, as a single machine would have written it.
    let now = SystemTime::now();
    let dir = crate::executor::folder::new_run_dir(&args.results_dir.join("batch"), now)
        .map_err(|e| format!("cannot create the merged folder: {e}"))?;
    // A merge that fails leaves no half-written folder behind.
    let merged = write_merged(
        args,
        &shards,
        &dir,
        Merging {
            count,
            hash,
            missing,
            plan_ids: &plan_ids,
            plan_repeats,
            owned: &owned,
            uncovered: &uncovered,
        },
    );
    if merged.is_err() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    merged
}

/// What `merge` found out about the shards before it writes the merged folder.
struct Merging<'a> {
    count: u64,
    hash: String,
    missing: Vec<u64>,
    plan_ids: &'a [String],
    plan_repeats: u64,
    owned: &'a std::collections::HashMap<String, Vec<Owner>>,
    uncovered: &'a [&'a String],
}

/// The merged run folder `dir`: each case, the manifest, the baseline comparison, the
/// history and the reports.
fn write_merged(
    args: &MergeArgs,
    shards: &[ShardDir],
    dir: &Path,
    m: Merging<'_>,
) -> Result<Exit, String> {
    let Merging {
        count,
        hash,
        missing,
        plan_ids,
        plan_repeats,
        owned,
        uncovered,
    } = m;
    let first = &shards[0];
    let mut services = indexmap::IndexMap::new();
    let (mut started, mut finished): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for s in shards {
        services.extend(s.manifest.services.clone());
        started.extend(s.manifest.started.clone());
        finished.extend(s.manifest.finished.clone());
    }
    let cases = merged_cases(shards, dir, plan_ids, plan_repeats, owned, &missing, count)?;
    for f in ["plan.resolved.json", "plan.toml", "plan.yaml"] {
        if first.dir.join(f).is_file() {
            let _ = std::fs::copy(first.dir.join(f), dir.join(f));
        }
    }
    started.sort();
    finished.sort();
    let mut manifest = Manifest {
        tool: "benchplan".into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        plan: first.manifest.plan.clone(),
        plan_hash: hash,
        judging: first.manifest.judging.clone(),
        judging_hash: first.manifest.judging_hash.clone(),
        command: crate::redact::this_command(),
        started: started.first().cloned(),
        finished: finished.last().cloned(),
        services,
        cases,
        merged_from: Some(
            shards
                .iter()
                .map(|s| MergedFrom {
                    index: s.index(),
                    count,
                    dir: s.dir.display().to_string(),
                })
                .collect(),
        ),
        missing_shards: Some(missing.clone()),
        incomplete: Some(!missing.is_empty()),
        ..Manifest::default()
    };
    manifest
        .write(dir)
        .map_err(|e| format!("cannot write the manifest: {e}"))?;

    let (mut view, rows) = crate::report::folder::from_folder(dir)?;
    if !missing.is_empty() {
        let names = shard_names(&missing, count);
        view.description = Some(format!(
            "INCOMPLETE: shard {} did not report; {} of {} cases are missing.",
            names,
            uncovered.len(),
            plan_ids.len()
        ));
    }
    let (regressions, trend_regressions) = judge_merged(args, dir, &mut view)?;
    let settings = RunSettings::default();
    let code = write_reports(dir, &view, &rows, &settings.templates(), Path::new("."));
    if code != Exit::Ok {
        return Ok(code);
    }
    if let Some(path) = &args.junit {
        write_atomic(path, crate::report::junit::junit_xml(&view).as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let failed = view.failed_cases.len();
    let code = Exit::of_findings(
        failed > 0 || !missing.is_empty(),
        view.slo_failures,
        regressions + trend_regressions,
    );
    // What the merge judged, and its verdict, as a run records them (`report DIR`
    // rebuilds them from here).
    manifest.judged = Some(json!(crate::report::view::Judged::of(
        &view,
        view.cases.iter().any(|c| c.slo_pass.is_some())
    )));
    manifest.verdict = Some(Verdict {
        pass: code == Exit::Ok,
        exit: code.code(),
        cases: view.cases.len(),
        not_measured: failed,
        slo_failures: view.slo_failures,
        regressions,
        trend_regressions,
        warnings: None,
    });
    manifest
        .write(dir)
        .map_err(|e| format!("cannot write the manifest: {e}"))?;
    eprintln!(
        "merged {} shard(s) of {count} into {}",
        shards.len(),
        dir.display()
    );
    eprintln!(
        "verdict: {} case(s), {failed} not measured, {} SLO failure(s), {regressions} regression(s): exit {}",
        view.cases.len(),
        view.slo_failures,
        code.code()
    );
    Ok(code)
}

/// Every shard comes from one plan, judged one way, cut into the same number of
/// shards, each shard once.
fn check_one_cut(shards: &[ShardDir]) -> Result<(), String> {
    let first = &shards[0];
    let hash = &first.manifest.plan_hash;
    let count = first.count();
    for s in shards {
        if &s.manifest.plan_hash != hash {
            return Err(format!(
                "{} comes from another plan (hash {}) than {} (hash {hash}): merge shards of one plan",
                s.dir.display(),
                s.manifest.plan_hash,
                first.dir.display()
            ));
        }
        // One plan judges every case: its SLOs, floors, name and regression settings.
        if s.manifest.judging_hash != first.manifest.judging_hash {
            let differ = judging_differences(&first.manifest.judging, &s.manifest.judging);
            return Err(format!(
                "{} and {} judge their cases differently: {}; run every shard with the same plan and --set",
                first.dir.display(),
                s.dir.display(),
                crate::escape::console(&differ.join(", "))
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
    Ok(())
}

/// What two shards' judging settings differ in (`key` (a vs b)), for the error.
fn judging_differences(a: &Option<Value>, b: &Option<Value>) -> Vec<String> {
    match (
        a.as_ref().and_then(Value::as_object),
        b.as_ref().and_then(Value::as_object),
    ) {
        (Some(a), Some(b)) => a
            .keys()
            .chain(b.keys())
            .filter(|k| a.get(*k) != b.get(*k))
            .map(|k| {
                format!(
                    "`{k}` ({} vs {})",
                    a.get(k).unwrap_or(&Value::Null),
                    b.get(k).unwrap_or(&Value::Null)
                )
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect(),
        _ => vec!["one of them records no judging settings (written by an older benchplan)".into()],
    }
}

/// Which shards own each case (and which of its repeats, cut by repeat); a case or a
/// repeat owned twice is a broken cut.
fn owners(shards: &[ShardDir]) -> Result<std::collections::HashMap<String, Vec<Owner>>, String> {
    let mut owned: std::collections::HashMap<String, Vec<Owner>> = Default::default();
    for (k, s) in shards.iter().enumerate() {
        for id in &s.shard.cases {
            let id = id.clone();
            let reps = s.repeats_of(&id);
            let list = owned.entry(id.clone()).or_default();
            let clash = list.iter().any(|(_, r)| match (r, &reps) {
                (Some(a), Some(b)) => a.iter().any(|x| b.contains(x)),
                _ => true,
            });
            if clash {
                return Err(format!(
                    "case {id} is in two shards; were they cut with different --shard-by?"
                ));
            }
            list.push((k, reps));
        }
    }
    Ok(owned)
}

/// Every case of the plan in the plan's order: merged from the shards that own it, or
/// recorded as not merged (a partial merge) with the shards that did not report.
fn merged_cases(
    shards: &[ShardDir],
    dir: &Path,
    plan_ids: &[String],
    plan_repeats: u64,
    owned: &std::collections::HashMap<String, Vec<Owner>>,
    missing: &[u64],
    count: u64,
) -> Result<Vec<CaseEntry>, String> {
    let covered = |id: &String| is_covered(owned, id, plan_repeats);
    let mut cases = Vec::new();
    for id in plan_ids {
        let entry = match owned.get(id) {
            Some(list) => Some(merge_case(shards, list, id, plan_repeats, dir)?),
            None => None,
        };
        match entry {
            Some(mut c) => {
                if !covered(id) {
                    let note = format!(
                        "merged {} of {plan_repeats} repeats: shard {} did not report",
                        c.merged_repeats.as_ref().map_or(0, Vec::len),
                        shard_names(missing, count)
                    );
                    c.error = Some(note);
                }
                cases.push(c);
            }
            None => {
                let names = shard_names(missing, count);
                cases.push(CaseEntry {
                    error: Some(format!(
                        "not merged: shard {names} did not report (merged with --allow-partial)"
                    )),
                    ..missing_entry(id)
                });
            }
        }
    }
    Ok(cases)
}

/// The merged run judged as a run is: against the baseline (the command's, else the
/// plan's) and appended to the plan's history (its shards did not append themselves).
/// The regressions of each.
fn judge_merged(
    args: &MergeArgs,
    dir: &Path,
    view: &mut crate::report::view::ReportView,
) -> Result<(usize, usize), String> {
    // The plan's comparison settings travel in its resolved copy.
    let report_cfg = crate::report::compare::plan_report_settings(dir).unwrap_or_default();
    let mut regressions = 0;
    if let Some(b) = args.baseline.as_ref().or(report_cfg.baseline.as_ref()) {
        if b.is_dir() || b.is_file() {
            let past = report_cfg
                .history
                .as_deref()
                .filter(|h| h.is_file())
                .map(crate::trend::history::past_values)
                .unwrap_or_default();
            let c = crate::report::compare::compare_with(b, dir, &report_cfg, &past)
                .map_err(|e| format!("cannot compare with baseline {}: {e}", b.display()))?;
            regressions = c.regressions;
            view.comparison = Some(c);
        } else if args.baseline.is_some() {
            return Err(format!("baseline {} does not exist", b.display()));
        } else {
            eprintln!(
                "warning: baseline {} does not exist yet; no comparison this time",
                b.display()
            );
        }
    }
    // The merged run joins the plan's history (its shards did not append themselves).
    let mut trend_regressions = 0;
    if let Some(h) = &report_cfg.history {
        let t = crate::executor::record_history(dir, h, &report_cfg)
            .map_err(|e| format!("history {}: {e}", h.display()))?;
        trend_regressions = t.regressions;
        view.trend = Some(t);
    }
    Ok((regressions, trend_regressions))
}
