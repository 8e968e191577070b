//! One case run several times (`execution.repeats`, or its repeats spread over shards)
//! as one result.
//!
//! Rates and counts are the mean per run, with each one's spread across the runs. The
//! latency distributions are pooled instead: the TTFT, TPOT, ITL and E2EL percentiles
//! are those of every request of every run, taken from the runs' merged HDR histograms
//! the way numpy (and so vLLM) takes them, and their means and standard deviations come
//! from the runs' exact moments. A p99 is the p99 of all requests, never a mean of p99s.
//! The SLOs are judged again on the pooled numbers.

use serde_json::{Map, Value, json};

use super::read::CaseFile;
use crate::metrics::hist;
use crate::metrics::stats;

/// The latency metrics whose distributions a result keeps as histograms.
const POOLED: [&str; 4] = ["ttft", "tpot", "itl", "e2el"];

/// Per-request lists (vLLM's, some only with `save_detailed`): every run's requests, in
/// run order. `start_times` stay relative to their own run's start.
const PER_REQUEST: [&str; 9] = [
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "latencies",
    "start_times",
    "queue_times",
    "generated_texts",
    "errors",
];

/// The runs of one case as one result (see the module docs). `runs` is not empty.
pub fn combine(runs: &[Map<String, Value>]) -> Map<String, Value> {
    let mut out = runs[0].clone();
    let spread = average_numbers(runs, &mut out, Some);
    let mut block = out
        .get("benchplan")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    // benchplan's own counts (failed, success_rate, …) are per-run means too.
    average_numbers(runs, &mut block, |r| {
        r.get("benchplan").and_then(Value::as_object)
    });
    for k in PER_REQUEST {
        let lists: Option<Vec<&Vec<Value>>> = runs.iter().map(|r| r.get(k)?.as_array()).collect();
        if let Some(lists) = lists {
            let all: Vec<Value> = lists.into_iter().flatten().cloned().collect();
            out.insert(k.into(), Value::Array(all));
        }
    }
    let mut pooled = Vec::new();
    for m in POOLED {
        if let Some(merged) = pool(runs, m, &mut out) {
            if let Some(h) = block
                .entry("histograms_us")
                .or_insert_with(|| json!({}))
                .as_object_mut()
            {
                h.insert(m.to_string(), json!(hist::encode(&merged)));
            }
            pooled.push(m);
        }
    }
    pool_accounting(runs, &mut block);
    let numbers: Vec<Value> = runs
        .iter()
        .filter_map(|r| CaseFile::new(r).repeat().cloned())
        .collect();
    block.remove("repeat");
    block.insert(
        "repeats".into(),
        json!({"count": runs.len(), "runs": numbers, "spread_pct": spread, "pooled": pooled,
               "values": run_values(runs)}),
    );
    if let Some(steady) = combine_steady(runs) {
        block.insert("steady".into(), Value::Object(steady));
    }
    out.insert("benchplan".into(), Value::Object(block));
    super::judge::rejudge(&mut out);
    out
}

/// The runs' steady windows as one, the way their whole runs are (a window block reads
/// as a result of its own): steady only when every run's is, else the first run's
/// reason. None unless every run has one.
fn combine_steady(runs: &[Map<String, Value>]) -> Option<Map<String, Value>> {
    let windows: Option<Vec<Map<String, Value>>> = runs
        .iter()
        .map(|r| CaseFile::new(r).steady().map(|s| s.map().clone()))
        .collect();
    let windows = windows?;
    let mut out = combine(&windows);
    if let Some(unsteady) = windows
        .iter()
        .find(|w| w.get("steady") != Some(&Value::Bool(true)))
    {
        for k in ["steady", "state", "status"] {
            if let Some(v) = unsteady.get(k) {
                out.insert(k.into(), v.clone());
            }
        }
    }
    let requests: u64 = windows
        .iter()
        .filter_map(|w| w.get("window")?.get("requests")?.as_u64())
        .sum();
    if let Some(Value::Object(w)) = out.get_mut("window") {
        w.insert("requests".into(), json!(requests));
    }
    Some(out)
}

/// Each run's own value of every top-level number (its p99 TTFT, its throughput, …)
/// and its success rate, in run order: the samples of a comparison across runs
/// (Welch's t in `report::significance`).
fn run_values(runs: &[Map<String, Value>]) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in &runs[0] {
        if !v.is_number() {
            continue;
        }
        let xs: Option<Vec<f64>> = runs.iter().map(|r| r.get(k)?.as_f64()).collect();
        if let Some(xs) = xs {
            out.insert(k.clone(), json!(xs));
        }
    }
    let rates: Option<Vec<f64>> = runs
        .iter()
        .map(|r| CaseFile::new(r).success_rate())
        .collect();
    if let Some(rates) = rates {
        out.insert("success_rate".into(), json!(rates));
    }
    out
}

/// The runs' token accounting added up (counts summed, the output ratio over every
/// run's tokens, the largest difference of any run), so the output-ratio floor is
/// judged on all the requests.
fn pool_accounting(runs: &[Map<String, Value>], block: &mut Map<String, Value>) {
    let parts: Option<Vec<&Map<String, Value>>> = runs
        .iter()
        .map(|r| CaseFile::new(r).token_accounting())
        .collect();
    let Some(parts) = parts else { return };
    let sum = |k: &str| -> u64 {
        parts
            .iter()
            .filter_map(|p| p.get(k)?.as_u64())
            .fold(0u64, u64::saturating_add)
    };
    let mut a = parts[0].clone();
    for k in [
        "usage_mismatch",
        "usage_over_max_tokens",
        "ignore_eos_requests",
        "short_outputs",
        "requested_tokens",
        "returned_tokens",
    ] {
        a.insert(k.into(), json!(sum(k)));
    }
    let largest = parts
        .iter()
        .filter_map(|p| p.get("largest_difference")?.as_i64())
        .max_by_key(|d| d.unsigned_abs())
        .unwrap_or(0);
    a.insert("largest_difference".into(), json!(largest));
    let saturated = parts
        .iter()
        .any(|p| p.get("saturated") == Some(&Value::Bool(true)));
    a.insert("saturated".into(), json!(saturated));
    let (asked, got) = (sum("requested_tokens"), sum("returned_tokens"));
    a.insert(
        "output_ratio".into(),
        json!((asked > 0).then(|| got as f64 / asked as f64 * 100.0)),
    );
    block.insert("token_accounting".into(), Value::Object(a));
}

/// Averages the numbers `part` finds in every run into `out`; returns each one's spread
/// (population std as % of the mean).
fn average_numbers<'a>(
    runs: &'a [Map<String, Value>],
    out: &mut Map<String, Value>,
    part: impl Fn(&'a Map<String, Value>) -> Option<&'a Map<String, Value>>,
) -> Map<String, Value> {
    let mut spread = Map::new();
    let keys: Vec<String> = out
        .iter()
        .filter(|(_, v)| v.is_number())
        .map(|(k, _)| k.clone())
        .collect();
    for k in keys {
        let xs: Vec<f64> = runs
            .iter()
            .filter_map(|r| part(r)?.get(&k)?.as_f64())
            .collect();
        if xs.len() != runs.len() {
            continue;
        }
        let m = stats::mean(&xs);
        // Counts stay integers when the runs agree on them (readers take them as such).
        let exact = m.fract() == 0.0 && part(&runs[0]).and_then(|r| r.get(&k)?.as_u64()).is_some();
        out.insert(k.clone(), if exact { json!(m as u64) } else { json!(m) });
        if m != 0.0 {
            spread.insert(k, json!(stats::std(&xs) / m.abs() * 100.0));
        }
    }
    spread
}

/// Pools metric `m` of every run into `out`'s `mean_/median_/std_/pN_{m}_ms` keys;
/// returns the merged histogram, or None (the keys stay averaged) when a run lacks one.
fn pool(
    runs: &[Map<String, Value>],
    m: &str,
    out: &mut Map<String, Value>,
) -> Option<hdrhistogram::Histogram<u64>> {
    let mut hists = Vec::new();
    for r in runs {
        hists.push(CaseFile::new(r).histogram(m)?);
    }
    let mut merged = hists[0].clone();
    for h in &hists[1..] {
        merged.add(h).ok()?;
    }
    let total = merged.len() as f64;
    let key = |stat: &str| format!("{stat}_{m}_ms");
    if total == 0.0 || !out.contains_key(&key("mean")) {
        return Some(merged);
    }
    // Exact pooled moments from each run's count, mean and (population) std.
    let moments: Option<Vec<(f64, f64, f64)>> = runs
        .iter()
        .zip(&hists)
        .map(|(r, h)| {
            let r = CaseFile::new(r);
            let mean = r.latency_ms("mean", m)?;
            let std = r.latency_ms("std", m).unwrap_or(0.0);
            Some((h.len() as f64, mean, std))
        })
        .collect();
    if let Some(moments) = moments {
        let mean = moments.iter().map(|(n, mu, _)| n * mu).sum::<f64>() / total;
        let var = moments
            .iter()
            .map(|(n, mu, sd)| n * (sd * sd + (mu - mean) * (mu - mean)))
            .sum::<f64>()
            / total;
        out.insert(key("mean"), json!(mean));
        if out.contains_key(&key("std")) {
            out.insert(key("std"), json!(var.max(0.0).sqrt()));
        }
    }
    let ms = |p: f64| hist::percentile_linear(&merged, p).map(|us| us / 1000.0);
    if out.contains_key(&key("median")) {
        out.insert(key("median"), json!(ms(50.0)));
    }
    let suffix = format!("_{m}_ms");
    let pcts: Vec<(String, f64)> = out
        .keys()
        .filter_map(|k| {
            let p: f64 = k.strip_prefix('p')?.strip_suffix(&suffix)?.parse().ok()?;
            Some((k.clone(), p))
        })
        .collect();
    for (k, p) in pcts {
        out.insert(k, json!(ms(p)));
    }
    Some(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slo::{Slo, Verdict};

    /// A result as `result_json` writes one, for latencies in seconds.
    fn run(rep: u64, ttfts: &[f64], verdicts: Value) -> Map<String, Value> {
        let ms: Vec<f64> = ttfts.iter().map(|t| t * 1000.0).collect();
        let mut sorted = ms.clone();
        sorted.sort_by(f64::total_cmp);
        let r = json!({
            "completed": ttfts.len(), "failed": 0, "request_throughput": rep as f64,
            "mean_ttft_ms": stats::mean(&ms), "std_ttft_ms": stats::std(&ms),
            "median_ttft_ms": 0.0, "p99_ttft_ms": sorted[sorted.len() - 1],
            "benchplan": {
                "repeat": rep, "success_rate": 100.0,
                "histograms_us": {"ttft": hist::encode(&hist::from_seconds(ttfts.iter().copied()))},
                "slo_verdicts": verdicts,
            },
        });
        r.as_object().unwrap().clone()
    }

    #[test]
    fn latencies_pool_rates_average_and_slos_are_judged_again() {
        let slo = Slo::from_entry("p99_ttft", &json!("<= 35ms")).unwrap();
        let pass = json!([slo
            .judge(&CaseFile::new(&run(1, &[0.010], json!([]))))
            .unwrap()]);
        // Run 1 is fast, run 2 slow: p99 of run 1 alone passes, the pooled one does not.
        let a = run(1, &[0.010, 0.020, 0.030], pass.clone());
        let b = run(2, &[0.040, 0.050, 0.060], pass);
        let c = combine(&[a, b]);
        // numpy over all six: mean 35, std 17.078, median 35, p99 59.5 ms.
        let close = |k: &str, want: f64| {
            let got = c[k].as_f64().unwrap();
            assert!(
                (got - want).abs() <= want * 5e-4 + 1e-3,
                "{k}: {got} vs {want}"
            );
        };
        close("mean_ttft_ms", 35.0);
        close("std_ttft_ms", 17.078_251);
        close("median_ttft_ms", 35.0);
        close("p99_ttft_ms", 59.5);
        close("request_throughput", 1.5);
        assert_eq!(
            c["completed"],
            json!(3),
            "a count both runs agree on stays whole"
        );
        let b = &c["benchplan"];
        assert_eq!(b["repeats"]["runs"], json!([1, 2]));
        assert_eq!(b["repeats"]["pooled"], json!(["ttft"]));
        // Each run's own numbers stay, for a comparison across runs.
        assert_eq!(
            b["repeats"]["values"]["request_throughput"],
            json!([1.0, 2.0])
        );
        assert_eq!(
            b["repeats"]["values"]["success_rate"],
            json!([100.0, 100.0])
        );
        assert!(b.get("repeat").is_none());
        let v: Vec<Verdict> = serde_json::from_value(b["slo_verdicts"].clone()).unwrap();
        assert!(!v[0].pass, "{v:?}");
        assert!((v[0].actual.unwrap() - 59.5).abs() < 0.05);
        // The merged histogram is kept, so combined results combine again.
        let h = hist::decode(b["histograms_us"]["ttft"].as_str().unwrap()).unwrap();
        assert_eq!(h.len(), 6);
    }

    #[test]
    fn the_success_floor_reads_back_from_its_verdict() {
        let floor = Slo::from_verdict(&Verdict {
            key: crate::slo::floors::MIN_SUCCESS_RATE.into(),
            target: ">= 95%".into(),
            actual: None,
            unit: "%".into(),
            pass: false,
            message: String::new(),
            ..Verdict::default()
        })
        .unwrap();
        let r = json!({"completed": 9, "failed": 1});
        let v = floor.judge(&CaseFile::new(r.as_object().unwrap())).unwrap();
        assert_eq!(
            (v.key.as_str(), v.actual, v.pass),
            ("min_success_rate", Some(90.0), false)
        );
        let back = Slo::from_verdict(&floor.judge(&CaseFile::new(r.as_object().unwrap())).unwrap())
            .unwrap();
        assert_eq!(back.threshold, 95.0);
    }
}
