//! A plan's history: one JSON line per case per run, appended, so it lives in a
//! repository (text that diffs line by line, merges by keeping both sides' lines) and
//! grows by a bounded amount (about 3 KB a case a run: the compared numbers, their
//! sample sizes, SLO targets, and the four latency histograms that let percentiles be
//! recomputed).
//!
//! A line: `{"v": 1, "when", "run", "plan", "plan_hash", "case", "service", "params",
//! "model", "server_version", "benchplan", "commit", "metrics": {key: {"value", "n"}},
//! "slos": {key: threshold}, "histograms_us": {ttft, tpot, itl, e2el}}`. Lines are read
//! in file order and sorted by `when`; a line that does not parse is an error naming
//! its line number (nothing is skipped silently).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::results::manifest::Manifest;
use crate::results::read::CaseFile;
use crate::slo::Measured;

/// The history format's version.
pub const VERSION: u32 = 1;

/// One number of a case in one run, and how many samples it is of.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub value: f64,
    /// Completed requests the value is computed from.
    pub n: u64,
}

/// One case of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub v: u32,
    /// When the run started (ISO 8601, UTC).
    pub when: String,
    /// The run folder's name (`batch_…`), or the result file's for an import.
    pub run: String,
    pub plan: String,
    #[serde(default)]
    pub plan_hash: String,
    pub case: String,
    #[serde(default)]
    pub service: String,
    /// The case's matrix values.
    #[serde(default)]
    pub params: Map<String, Value>,
    #[serde(default)]
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
    /// The benchplan version that measured it.
    #[serde(default)]
    pub benchplan: String,
    /// The commit of the plan's repository, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub metrics: BTreeMap<String, Point>,
    /// SLO thresholds on the compared metrics, in their units.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub slos: BTreeMap<String, f64>,
    /// The latency histograms (µs, HdrHistogram V2 deflate, base64).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub histograms_us: BTreeMap<String, String>,
    /// The metrics the history gate judged regressed at this run, each with the change
    /// it judged: so an episode outlives the statistics that found it (a 3-run episode
    /// no longer separates in a long history).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub regressed: BTreeMap<String, Flag>,
}

/// A regression the history gate judged at a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flag {
    /// The run of its change point (the first run at the new level).
    pub since: String,
    pub before: f64,
    pub after: f64,
}

/// What a run says about itself, beside each case's result.
#[derive(Debug, Clone, Default)]
pub struct RunFacts {
    pub when: String,
    pub run: String,
    pub plan: String,
    pub plan_hash: String,
    /// Service name → the version its server reported.
    pub versions: BTreeMap<String, String>,
    pub commit: Option<String>,
}

/// The history line of one case's result.
pub fn entry(
    facts: &RunFacts,
    case: &str,
    service: &str,
    params: Map<String, Value>,
    result: &Map<String, Value>,
    metrics: &[String],
) -> Entry {
    let f = CaseFile::new(result);
    let n = f.completed().unwrap_or(0.0).round() as u64;
    // The load point always, beside the matrix values the manifest lists.
    let mut params = params;
    for k in ["max_concurrency", "request_rate", "num_prompts"] {
        if let Some(v) = result.get(k).filter(|v| !v.is_null()) {
            params.entry(k.to_string()).or_insert_with(|| v.clone());
        }
    }
    let mut points = BTreeMap::new();
    for k in metrics {
        if let Some(v) = f.metric(k) {
            points.insert(k.clone(), Point { value: v, n });
        }
    }
    // The plan's SLOs the case was judged on (not the floors every case has), by the
    // result key of what they judge.
    let slos = f
        .slo_verdicts()
        .unwrap_or_default()
        .iter()
        .filter(|v| !crate::slo::floors::is_floor(&v.key))
        .filter_map(|v| crate::slo::Slo::from_verdict(v).ok())
        .map(|slo| (slo.metric.result_key(), slo.threshold))
        .filter(|(key, _)| metrics.contains(key))
        .collect();
    let histograms_us = ["ttft", "tpot", "itl", "e2el"]
        .iter()
        .filter_map(|m| {
            let h = f.histogram(m)?;
            Some((m.to_string(), crate::metrics::hist::encode(&h)))
        })
        .collect();
    Entry {
        v: VERSION,
        when: facts.when.clone(),
        run: facts.run.clone(),
        plan: facts.plan.clone(),
        plan_hash: facts.plan_hash.clone(),
        case: case.to_string(),
        service: service.to_string(),
        params,
        model: f.model_id().unwrap_or_default().to_string(),
        server_version: facts.versions.get(service).cloned(),
        benchplan: env!("CARGO_PKG_VERSION").to_string(),
        regressed: BTreeMap::new(),
        commit: facts.commit.clone(),
        metrics: points,
        slos,
        histograms_us,
    }
}

/// Every case of a run folder (benchplan's, with its manifest) or of a plain
/// `vllm bench serve` result file or folder of them.
pub fn entries_of(path: &Path, metrics: &[String]) -> Result<Vec<Entry>, String> {
    if path.is_file() {
        let r = read_result(path)?;
        let name = stem(path);
        let facts = RunFacts {
            when: CaseFile::new(&r).date().map_or_else(String::new, vllm_date),
            run: name.clone(),
            plan: "vllm-bench-serve".into(),
            ..RunFacts::default()
        };
        let case = CaseFile::new(&r).case_id().map_or(name, str::to_string);
        return Ok(vec![entry(&facts, &case, "", Map::new(), &r, metrics)]);
    }
    let Some(manifest) = Manifest::read_if_any(path)? else {
        // A folder of plain vLLM results: each file its own run.
        let mut out = Vec::new();
        let mut files: Vec<_> = std::fs::read_dir(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        for f in files {
            out.extend(entries_of(&f, metrics)?);
        }
        return Ok(out);
    };
    let versions = manifest
        .services
        .iter()
        .filter_map(|(name, m)| Some((name.clone(), m.version_text()?.to_string())))
        .collect();
    let facts = RunFacts {
        when: manifest.started.clone().unwrap_or_default(),
        run: path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        plan: manifest.plan.clone().unwrap_or_default(),
        plan_hash: manifest.plan_hash.clone(),
        versions,
        commit: manifest.commit.clone(),
    };
    let mut out = Vec::new();
    for c in manifest.cases.iter().filter(|c| c.is_ok()) {
        let Some(file) = &c.file else {
            continue;
        };
        let r = read_result(&path.join(file))?;
        let params = c
            .axes
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        out.push(entry(&facts, &c.id, &c.service, params, &r, metrics));
    }
    Ok(out)
}

fn stem(p: &Path) -> String {
    p.file_stem()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

fn read_result(path: &Path) -> Result<Map<String, Value>, String> {
    match crate::results::read::read_file(path)? {
        Value::Object(m) => Ok(m),
        _ => Err(format!("{}: not a result object", path.display())),
    }
}

/// vLLM's `%Y%m%d-%H%M%S` as ISO 8601 (UTC assumed).
fn vllm_date(d: &str) -> String {
    if d.len() == 15 && d.as_bytes()[8] == b'-' {
        format!(
            "{}-{}-{}T{}:{}:{}Z",
            &d[0..4],
            &d[4..6],
            &d[6..8],
            &d[9..11],
            &d[11..13],
            &d[13..15]
        )
    } else {
        d.to_string()
    }
}

/// Appends entries to a history file (created with its folder if missing), one whole
/// line each.
pub fn append(path: &Path, entries: &[Entry]) -> Result<(), String> {
    let mut text = String::new();
    for e in entries {
        text.push_str(&serde_json::to_string(e).expect("an entry serialises"));
        text.push('\n');
    }
    crate::files::append_lines(path, &text)
        .map_err(|e| format!("cannot append to {}: {e}", path.display()))
}

/// Each case's past values of each of its metrics, oldest first, by (case, metric): the
/// spread between runs the baseline gate judges a difference against. Empty when the
/// history cannot be read (it is the history's own verdict that reports that).
pub fn past_values(path: &Path) -> std::collections::HashMap<(String, String), Vec<f64>> {
    let mut out: std::collections::HashMap<(String, String), Vec<f64>> = Default::default();
    for e in read_healing(path).map(|r| r.0).unwrap_or_default() {
        for (m, p) in &e.metrics {
            out.entry((e.case.clone(), m.clone()))
                .or_default()
                .push(p.value);
        }
    }
    out
}

/// Every entry of a history file, oldest first (by `when`, then file order). A line
/// that does not parse (the torn last line of a killed append, a hand edit) is skipped
/// with a warning on stderr naming `file:line`, so one bad night does not break every
/// later one; a file with no good line at all is an error naming its first bad one.
pub fn read(path: &Path) -> Result<Vec<Entry>, String> {
    let (entries, skipped) = read_healing(path)?;
    for s in &skipped {
        eprintln!("warning: {s}; the line is skipped");
    }
    Ok(entries)
}

/// [`read`]'s entries and the lines it skipped (`file:line: why`).
pub fn read_healing(path: &Path) -> Result<(Vec<Entry>, Vec<String>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Entry>(line) {
            Ok(e) => out.push(e),
            Err(e) => skipped.push(format!(
                "{}:{}: not a history line: {e}",
                path.display(),
                i + 1
            )),
        }
    }
    if out.is_empty() && !skipped.is_empty() {
        return Err(format!(
            "{} (and every other line of it: this is no benchplan history)",
            skipped[0]
        ));
    }
    out.sort_by(|a, b| a.when.cmp(&b.when));
    Ok((out, skipped))
}

/// The commit of the repository holding `dir`: `$GITHUB_SHA` in a GitHub job, else
/// `git rev-parse HEAD` there; None outside a repository.
pub fn commit_of(dir: &Path) -> Option<String> {
    if let Ok(sha) = std::env::var("GITHUB_SHA")
        && !sha.is_empty()
    {
        return Some(sha);
    }
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let sha = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !sha.is_empty()).then_some(sha)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_a_bad_line_is_named() {
        let dir = std::env::temp_dir().join(format!("benchplan-hist-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("h/plan.jsonl");
        let e = |when: &str, v: f64| Entry {
            v: VERSION,
            when: when.into(),
            run: "r".into(),
            plan: "p".into(),
            plan_hash: String::new(),
            case: "c".into(),
            service: "s".into(),
            params: Map::new(),
            model: "m".into(),
            server_version: None,
            benchplan: "0".into(),
            commit: None,
            metrics: [("p99_ttft_ms".to_string(), Point { value: v, n: 10 })].into(),
            slos: BTreeMap::new(),
            histograms_us: BTreeMap::new(),
            regressed: BTreeMap::new(),
        };
        append(&path, &[e("2026-01-02T00:00:00Z", 2.0)]).unwrap();
        append(&path, &[e("2026-01-01T00:00:00Z", 1.0)]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with('\n') && !text.contains("\n\n"), "{text}");
        let back = read(&path).unwrap();
        assert_eq!(
            back,
            vec![
                e("2026-01-01T00:00:00Z", 1.0),
                e("2026-01-02T00:00:00Z", 2.0)
            ]
        );
        // A torn last line is skipped and named; the next append starts on a clean line.
        let good = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, format!("{good}{{\"v\":1,\"when\":\"2026-0")).unwrap();
        let (back, skipped) = read_healing(&path).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(skipped.len(), 1);
        assert!(
            skipped[0].contains("plan.jsonl:3: not a history line"),
            "{skipped:?}"
        );
        append(&path, &[e("2026-01-03T00:00:00Z", 3.0)]).unwrap();
        let (back, skipped) = read_healing(&path).unwrap();
        assert_eq!((back.len(), skipped.len()), (3, 1));
        // A file wrong throughout is no history.
        std::fs::write(&path, "{\"v\":1}\nnot json\n").unwrap();
        let err = read(&path).unwrap_err();
        assert!(err.contains("plan.jsonl:1: not a history line"), "{err}");
        assert_eq!(vllm_date("20260301-142530"), "2026-03-01T14:25:30Z");
        // SLO targets by result key; the floors every case has are not the plan's.
        let verdict = |key: &str, target: &str| {
            serde_json::json!({"key": key, "target": target, "actual": 1.0, "unit": "",
                               "pass": true, "message": ""})
        };
        let result = serde_json::json!({"completed": 4, "p50_ttft_ms": 50.0,
            "benchplan": {"slo_verdicts": [verdict("p50_ttft", "<= 70ms"),
                verdict("success_rate", ">= 99%"), verdict("min_success_rate", ">= 95%")]}});
        let metrics = vec!["p50_ttft_ms".to_string(), "success_rate".to_string()];
        let got = entry(
            &RunFacts::default(),
            "c",
            "s",
            Map::new(),
            result.as_object().unwrap(),
            &metrics,
        );
        assert_eq!(
            got.slos,
            [
                ("p50_ttft_ms".to_string(), 70.0),
                ("success_rate".to_string(), 99.0)
            ]
            .into()
        );
        assert_eq!(got.metrics["p50_ttft_ms"], Point { value: 50.0, n: 4 });
        std::fs::remove_dir_all(&dir).ok();
    }
}
