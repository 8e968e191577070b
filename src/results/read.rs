//! Reading a case's result file back, typed: the one place that knows which key of
//! [`super::vllm_json::result_json`]'s output (and of a plain `vllm bench serve` file)
//! holds what. The SLOs, the report, repeats, optimize, sweep, compare, resume and the
//! executor read results through [`CaseFile`]; none of them names a key.

use std::path::Path;

use serde_json::{Map, Value};

use crate::metrics::hist;
use crate::metrics::summary::{LatencyStats, Summary};
use crate::metrics::table::MetricDef;
use crate::plan::CaseParams;
use crate::plan::params::Metric;
use crate::slo::{Measured, Stat, Verdict};

/// A result file's JSON: the whole file, or for vLLM's `--append-result` files (one
/// object per line) the last line. Impossible values are refused ([`check`]); a scalar
/// that contradicts its own histogram is warned about on stderr.
pub fn read_file(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let v: Value = serde_json::from_str(&text)
        .or_else(|_| serde_json::from_str(last))
        .map_err(|e| format!("{} is not a result JSON: {e}", path.display()))?;
    if let Value::Object(m) = &v {
        let warnings = check(m).map_err(|e| format!("{}: {e}", path.display()))?;
        for w in warnings {
            eprintln!(
                "warning: {}: {}",
                path.display(),
                crate::escape::console(&w)
            );
        }
    }
    Ok(v)
}

/// Past this, a latency in ms (31,000 years) or a rate is no measurement.
const IMPOSSIBLE: f64 = 1e15;

/// Whether a top-level key of a result holds a measured number: a latency statistic,
/// a throughput, a duration or a count.
fn is_measured_key(k: &str) -> bool {
    k.ends_with("_ms")
        || k.ends_with("_throughput")
        || k.ends_with("_goodput")
        || matches!(
            k,
            "duration"
                | "completed"
                | "failed"
                | "total_input_tokens"
                | "total_output_tokens"
                | "max_concurrent_requests"
        )
}

/// The values of a result that cannot have been measured: a measured key holding a
/// non-number, a negative number or one past [`IMPOSSIBLE`] is an error (the first,
/// by key); a mean latency that disagrees with the histogram beside it beyond its
/// rounding (3 significant digits: 2% and 0.01 ms allowed) is a warning.
pub fn check(m: &Map<String, Value>) -> Result<Vec<String>, String> {
    for (k, v) in m.iter().filter(|(k, _)| is_measured_key(k)) {
        match v {
            Value::Null => {}
            Value::Number(n) => {
                let x = n.as_f64().unwrap_or(f64::NAN);
                if !(0.0..=IMPOSSIBLE).contains(&x) {
                    return Err(format!(
                        "`{k}` is {}, which no measurement gives (negative, not finite, or above 1e15): the file was damaged or written by hand",
                        crate::escape::number(x)
                    ));
                }
            }
            other => {
                return Err(format!(
                    "`{k}` should be a number but is {}: the file was damaged or written by hand",
                    match other {
                        Value::String(_) => "a string",
                        Value::Bool(_) => "a boolean",
                        Value::Array(_) => "a list",
                        _ => "an object",
                    }
                ));
            }
        }
    }
    let f = CaseFile(m);
    let mut warnings = Vec::new();
    for metric in ["ttft", "tpot", "itl", "e2el"] {
        let (Some(scalar), Some(h)) = (f.latency_ms("mean", metric), f.histogram(metric)) else {
            continue;
        };
        if h.is_empty() {
            continue;
        }
        let from_hist = h.mean() / 1e3;
        if (scalar - from_hist).abs() > 0.02 * from_hist.abs().max(scalar.abs()) + 0.01 {
            warnings.push(format!(
                "`mean_{metric}_ms` is {} but its histogram's mean is {} ms: one of them was changed after the run",
                crate::escape::number(scalar),
                crate::escape::number(from_hist)
            ));
        }
    }
    Ok(warnings)
}

/// The key vLLM writes a `p50_` statistic under (`median_ttft_ms` for `p50_ttft_ms`).
fn median_alias(k: &str) -> Option<String> {
    k.strip_prefix("p50_").map(|rest| format!("median_{rest}"))
}

/// A multi-turn case's conversations ([`CaseFile::conversations`]).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Conversations {
    pub total: u64,
    pub completed: u64,
    /// Ended by a failed turn.
    pub failed: u64,
    /// Stopped early or never started.
    pub incomplete: u64,
    pub turns_successful: u64,
    pub avg_turns: Option<f64>,
    pub avg_duration_ms: Option<f64>,
}

/// One turn index across a case's conversations ([`CaseFile::turn`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Turn {
    /// 0 for the first turn.
    pub index: u64,
    pub completed: u64,
    pub failed: u64,
    pub mean_input_tokens: Option<f64>,
    pub mean_cached_tokens: Option<f64>,
}

/// The server's gauges over a case ([`CaseFile::server_series`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerSeries {
    /// When each scrape was, in seconds from the first measured request.
    pub t: Vec<f64>,
    pub running: Vec<(f64, f64)>,
    pub waiting: Vec<(f64, f64)>,
    pub kv_cache_usage_pct: Vec<(f64, f64)>,
}

/// A reasoning case's figures as a report shows them ([`CaseFile::reasoning`]); times
/// in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ReasoningFigures {
    pub ttft_any_mean: Option<f64>,
    pub ttfo_mean: Option<f64>,
    pub ttfo_p99: Option<f64>,
    pub reasoning_mean: Option<f64>,
    pub tpot_answer_mean: Option<f64>,
    pub tpot_all_mean: Option<f64>,
    pub itl_answer_mean: Option<f64>,
    pub reasoning_tokens: Option<u64>,
    /// `usage`, `events` or `mixed` (server text: escaped where it lands).
    pub source: Option<String>,
}

/// Where a case's time went, from the server's own timings (`benchplan.server_timings`)
/// and the client's means ([`CaseFile::time_split`]); milliseconds. Queue + prefill +
/// outside is the client's TTFT; decode is the client's E2EL less its TTFT.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct TimeSplit {
    pub queue: f64,
    pub prefill: f64,
    /// Client TTFT − server TTFT: frontend, network, proxies, the client.
    pub outside: f64,
    pub decode: Option<f64>,
    pub server_ttft: Option<f64>,
    pub gap_p99: Option<f64>,
    pub server_generation: Option<f64>,
    pub requests: u64,
}

/// A case's energy and cost as a report shows them ([`CaseFile::energy_cost`]).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct EnergyCost {
    /// `steady` or `run`: the window the figures cover, and its seconds.
    pub window: Option<String>,
    pub window_s: Option<f64>,
    pub joules: Option<f64>,
    pub mean_watts: Option<f64>,
    pub joules_per_output_token: Option<f64>,
    pub joules_per_total_token: Option<f64>,
    pub output_tokens_per_joule: Option<f64>,
    pub cost_per_million_output_tokens: Option<f64>,
    pub cost_per_million_total_tokens: Option<f64>,
    pub cost_at_goodput: Option<f64>,
    pub energy_cost_per_million_output_tokens: Option<f64>,
    /// The plan's word (escaped where it lands).
    pub currency: Option<String>,
}

/// A case's speculative decoding as a report shows it ([`CaseFile::speculative`]).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SpecFigures {
    /// Percent, pooled over the requests; tokens per step.
    pub acceptance_rate: Option<f64>,
    pub acceptance_length: Option<f64>,
    pub p10_acceptance_rate: Option<f64>,
    pub median_acceptance_rate: Option<f64>,
    pub tpot_correlation: Option<f64>,
    pub server_metrics_acceptance_rate: Option<f64>,
    pub disagrees: bool,
    /// `vllm`, `llama` or `mixed` (benchplan's word, escaped where it lands anyway).
    pub source: Option<String>,
    pub requests: u64,
    /// The summed histogram as shares of steps, in percent (`12 / 40 / 48`).
    pub histogram: Option<String>,
}

/// A case's measuring-machine figures as its result keeps them (see `load::machine`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct MachineFigures {
    pub cpu_pressure_pct: Option<f64>,
    pub client_runqueue_ms_per_s: Option<f64>,
    pub steal_pct: Option<f64>,
    pub event_loop_lag_p99_ms: Option<f64>,
    pub missing: Vec<String>,
}

/// A trace case's reuse as its result keeps it (see `load::trace`); fractions.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct TraceFigures {
    pub format: String,
    pub rows: u64,
    pub expected_reuse: f64,
    pub expected_reuse_at_capacity: Option<f64>,
    pub realised_reuse: Option<f64>,
    pub realised_over_expected: Option<f64>,
    pub ttft_ms_cache_hit: Option<f64>,
    pub ttft_ms_cache_miss: Option<f64>,
}

/// benchplan's blocks whose keys are flat, vLLM-style column names.
const FLAT_BLOCKS: [&str; 3] = ["reasoning", "server_timings", "speculative_decoding"];

/// A result file's JSON, read through typed accessors (borrowed: nothing is copied).
#[derive(Debug, Clone, Copy)]
pub struct CaseFile<'a>(&'a Map<String, Value>);

impl<'a> CaseFile<'a> {
    pub fn new(r: &'a Map<String, Value>) -> CaseFile<'a> {
        CaseFile(r)
    }

    /// benchplan's block (absent from a plain vLLM file).
    fn block(&self) -> Option<&'a Map<String, Value>> {
        self.0.get("benchplan")?.as_object()
    }

    fn in_block(&self, key: &str) -> Option<&'a Value> {
        self.block()?.get(key)
    }

    /// A top-level number in vLLM's wording (`p99_ttft_ms`, `request_throughput`, …):
    /// the results room's own; other rooms read the typed accessors.
    pub(in crate::results) fn number(&self, key: &str) -> Option<f64> {
        self.0.get(key)?.as_f64()
    }

    /// A compared metric's value (`report.compare_metrics`, the history): its result key
    /// (a `p50_` is also vLLM's `median_`), the success rate in percent from the counts.
    pub fn metric(&self, k: &str) -> Option<f64> {
        match crate::metrics::table::scalar_named(k) {
            Some(def) => Measured::scalar(self, def),
            None => self.number(k).or_else(|| self.number(&median_alias(k)?)),
        }
    }

    /// A top-level count (`num_conversations`, `turns_successful`, …), when it is whole.
    fn count(&self, key: &str) -> Option<u64> {
        self.0.get(key)?.as_u64()
    }

    /// A statistic of a latency in milliseconds: `stat` is `mean`, `median`, `std` or
    /// `pN`; `metric` is `ttft`, `tpot`, `itl` or `e2el`.
    pub(in crate::results) fn latency_ms(&self, stat: &str, metric: &str) -> Option<f64> {
        self.number(&format!("{stat}_{metric}_ms"))
    }

    /// Completed and failed requests (vLLM's `failed` is benchplan's key too; older
    /// vLLM files, and pooling results, keep it under `benchplan`).
    pub fn counts(&self) -> Option<(f64, f64)> {
        Some((self.number("completed")?, self.failed().unwrap_or(0.0)))
    }

    /// Failed requests, where the file says.
    pub fn failed(&self) -> Option<f64> {
        self.0
            .get("failed")
            .or_else(|| self.in_block("failed"))
            .and_then(Value::as_f64)
    }

    /// The success rate in percent, from the counts; None without requests.
    pub fn success_rate(&self) -> Option<f64> {
        let (ok, failed) = self.counts()?;
        (ok + failed > 0.0).then(|| ok / (ok + failed) * 100.0)
    }

    /// The success rate benchplan recorded (a repeated case's is the runs' mean).
    pub fn recorded_success_rate(&self) -> Option<f64> {
        self.in_block("success_rate").and_then(Value::as_f64)
    }

    /// Good requests per second over all requests per second.
    pub fn goodput_ratio(&self) -> Option<f64> {
        let good = self.number("request_goodput")?;
        let all = self.number("request_throughput").unwrap_or(0.0);
        Some(if all > 0.0 { good / all } else { 0.0 })
    }

    /// The case's timeslices (`benchplan.timeslices`): each slice's bounds, counts and
    /// metrics under the whole run's keys, oldest first.
    pub fn timeslices(&self) -> Vec<&'a Map<String, Value>> {
        self.in_block("timeslices")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_object).collect())
            .unwrap_or_default()
    }

    /// The steady window's block (`benchplan.steady`), when the case has one.
    pub fn steady(&self) -> Option<CaseFile<'a>> {
        self.in_block("steady")?.as_object().map(CaseFile)
    }

    /// The numbers a verdict judges under `measure`: the steady window's (its block
    /// reads as a result of its own), or the whole run's. None when the steady window is
    /// asked for and the case has none (a single request; a file from before it).
    pub fn measured(&self, measure: crate::plan::Measure) -> Option<CaseFile<'a>> {
        match measure {
            crate::plan::Measure::Whole => Some(*self),
            crate::plan::Measure::Steady => self.steady(),
        }
    }

    /// The result as read, for code that takes a result's map.
    pub fn map(&self) -> &'a Map<String, Value> {
        self.0
    }

    /// Why the steady window cannot be judged: "too few requests to judge: …" when it
    /// holds fewer than the plan's minimum; None when it can (or the case has none).
    pub fn too_few_to_judge(&self) -> Option<String> {
        self.unsteady()
            .filter(|(state, _)| state == "too_few")
            .map(|(_, why)| why)
    }

    /// How busy the measuring machine was (`benchplan.machine`): CPU pressure %,
    /// client run-queue ms/s, steal %, event-loop lag P99 ms, and what the kernel did
    /// not report.
    pub fn machine(&self) -> Option<MachineFigures> {
        let m = self.in_block("machine")?.as_object()?;
        let f = |k: &str| m.get(k).and_then(Value::as_f64);
        Some(MachineFigures {
            cpu_pressure_pct: f("cpu_pressure_pct"),
            client_runqueue_ms_per_s: f("client_runqueue_ms_per_s"),
            steal_pct: f("steal_pct"),
            event_loop_lag_p99_ms: f("event_loop_lag_p99_ms"),
            missing: m
                .get("missing")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// A trace case's reuse (`benchplan.trace`): expected, at capacity, realised.
    pub fn trace(&self) -> Option<TraceFigures> {
        let t = self.in_block("trace")?.as_object()?;
        let f = |k: &str| t.get(k).and_then(Value::as_f64);
        Some(TraceFigures {
            format: t.get("format")?.as_str()?.to_string(),
            rows: t.get("rows")?.as_u64()?,
            expected_reuse: f("expected_reuse")?,
            expected_reuse_at_capacity: f("expected_reuse_at_capacity"),
            realised_reuse: f("realised_reuse"),
            realised_over_expected: f("realised_over_expected"),
            ttft_ms_cache_hit: f("ttft_ms_cache_hit"),
            ttft_ms_cache_miss: f("ttft_ms_cache_miss"),
        })
    }

    /// An open loop that over-saturated (`benchplan.oversaturation`): from when
    /// (seconds from its start), at which asked rate, and whether it was ended there.
    pub fn oversaturation(&self) -> Option<(f64, f64, bool)> {
        let o = self.in_block("oversaturation")?.as_object()?;
        Some((
            o.get("at_s")?.as_f64()?,
            o.get("rate")?.as_f64()?,
            o.get("stopped").and_then(Value::as_bool).unwrap_or(false),
        ))
    }

    /// Why the case has no steady state to judge: (`trending` or `too_few`, in words);
    /// None when it is steady or has no steady window.
    pub fn unsteady(&self) -> Option<(String, String)> {
        let s = self.in_block("steady")?;
        if s.get("steady")?.as_bool()? {
            return None;
        }
        let status = s.get("status")?.as_str()?.to_string();
        let state = match s.get("state").and_then(Value::as_str) {
            Some(state) => state.to_string(),
            None if status.starts_with("too few") => "too_few".into(),
            None => "trending".into(),
        };
        Some((state, status))
    }

    /// Whether the steady window is steady (`benchplan.steady.steady`), and in words.
    pub fn steady_status(&self) -> Option<(bool, String)> {
        let s = self.in_block("steady")?;
        Some((
            s.get("steady")?.as_bool()?,
            s.get("status")?.as_str()?.to_string(),
        ))
    }

    /// The steady window's bounds in seconds from the first send, and its requests.
    pub fn steady_window(&self) -> Option<(f64, f64, u64)> {
        let w = self.in_block("steady")?.get("window")?;
        Some((
            w.get("start_s")?.as_f64()?,
            w.get("end_s")?.as_f64()?,
            w.get("requests")?.as_u64()?,
        ))
    }

    /// Why the machine that measured this case was busy (`benchplan.machine` at or above
    /// `thresholds`: CPU pressure in percent, client run-queue ms per second), with the
    /// figures; None when it was not, or the file does not say.
    pub fn machine_busy(&self, thresholds: (f64, f64)) -> Option<String> {
        let m = self.in_block("machine")?;
        let psi = m.get("cpu_pressure_pct").and_then(Value::as_f64);
        let rq = m.get("client_runqueue_ms_per_s").and_then(Value::as_f64);
        let mut why = Vec::new();
        if let Some(p) = psi.filter(|p| *p >= thresholds.0) {
            why.push(format!(
                "CPU pressure {p:.1}% (at or above {:.0}%)",
                thresholds.0
            ));
        }
        if let Some(q) = rq.filter(|q| *q >= thresholds.1) {
            why.push(format!(
                "client run-queue wait {q:.0} ms/s (at or above {:.0})",
                thresholds.1
            ));
        }
        (!why.is_empty()).then(|| why.join(", "))
    }

    /// Requests per second, in vLLM's wording.
    pub fn request_throughput(&self) -> Option<f64> {
        self.number("request_throughput")
    }

    /// A reasoning case's figures (`benchplan.reasoning`): the means and P99s of its
    /// times to the first token on any channel and to the answer, its reasoning
    /// time, the answer's TPOT and ITL, and its reasoning tokens.
    pub fn reasoning(&self) -> Option<ReasoningFigures> {
        let r = self.block()?.get("reasoning")?;
        let n = |k: &str| r.get(k).and_then(Value::as_f64);
        Some(ReasoningFigures {
            ttft_any_mean: n("mean_ttft_any_ms"),
            ttfo_mean: n("mean_ttfo_ms"),
            ttfo_p99: n("p99_ttfo_ms"),
            reasoning_mean: n("mean_reasoning_ms"),
            tpot_answer_mean: n("mean_tpot_answer_ms"),
            tpot_all_mean: n("mean_tpot_all_ms"),
            itl_answer_mean: n("mean_itl_answer_ms"),
            reasoning_tokens: r.get("reasoning_tokens").and_then(Value::as_u64),
            source: r
                .get("reasoning_tokens_source")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }

    /// Where the case's time went (queue, prefill, outside the engine, decode), when
    /// its responses carried the server's own timings.
    pub fn time_split(&self) -> Option<TimeSplit> {
        let t = self.in_block("server_timings")?;
        let n = |k: &str| t.get(k).and_then(Value::as_f64);
        let server_ttft = n("mean_server_ttft_ms")?;
        let queue = n("mean_server_queue_ms").unwrap_or(0.0);
        let decode = self
            .number("mean_e2el_ms")
            .zip(self.number("mean_ttft_ms"))
            .map(|(e, t)| (e - t).max(0.0));
        Some(TimeSplit {
            queue,
            prefill: n("mean_server_prefill_ms").unwrap_or((server_ttft - queue).max(0.0)),
            outside: n("mean_ttft_gap_ms").unwrap_or(0.0),
            decode,
            server_ttft: Some(server_ttft),
            gap_p99: n("p99_ttft_gap_ms"),
            server_generation: n("mean_server_generation_ms"),
            requests: t.get("requests").and_then(Value::as_u64).unwrap_or(0),
        })
    }

    /// A case's energy and cost (`benchplan.energy`, `benchplan.cost`), when it has
    /// either.
    pub fn energy_cost(&self) -> Option<EnergyCost> {
        let e = self.in_block("energy");
        let c = self.in_block("cost");
        if e.is_none() && c.is_none() {
            return None;
        }
        let en = |k: &str| e.and_then(|e| e.get(k)).and_then(Value::as_f64);
        let co = |k: &str| c.and_then(|c| c.get(k)).and_then(Value::as_f64);
        let text = |v: Option<&Value>, k: &str| {
            v.and_then(|v| v.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Some(EnergyCost {
            window: text(e, "window").or_else(|| text(c, "window")),
            window_s: en("window_s"),
            joules: en("joules"),
            mean_watts: en("mean_watts"),
            joules_per_output_token: en("joules_per_output_token"),
            joules_per_total_token: en("joules_per_total_token"),
            output_tokens_per_joule: en("output_tokens_per_joule"),
            cost_per_million_output_tokens: co("per_million_output_tokens"),
            cost_per_million_total_tokens: co("per_million_total_tokens"),
            cost_at_goodput: co("per_million_output_tokens_at_goodput"),
            energy_cost_per_million_output_tokens: co("energy_per_million_output_tokens"),
            currency: text(c, "currency"),
        })
    }

    /// A case's speculative decoding per request (`benchplan.speculative_decoding`).
    pub fn speculative(&self) -> Option<SpecFigures> {
        let s = self.in_block("speculative_decoding")?;
        let n = |k: &str| s.get(k).and_then(Value::as_f64);
        let hist: Vec<f64> = s
            .get("acceptance_histogram")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        let steps: f64 = hist.iter().sum();
        Some(SpecFigures {
            acceptance_rate: n("acceptance_rate").filter(|_| n("requests") > Some(0.0)),
            acceptance_length: n("acceptance_length"),
            p10_acceptance_rate: n("p10_acceptance_rate"),
            median_acceptance_rate: n("median_acceptance_rate"),
            tpot_correlation: n("tpot_acceptance_correlation"),
            server_metrics_acceptance_rate: n("server_metrics_acceptance_rate"),
            disagrees: s
                .get("disagrees_with_server_metrics")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            source: s
                .get("spec_source")
                .and_then(Value::as_str)
                .map(str::to_string),
            requests: s.get("requests").and_then(Value::as_u64).unwrap_or(0),
            histogram: (steps > 0.0).then(|| {
                hist.iter()
                    .map(|h| format!("{:.0}", h / steps * 100.0))
                    .collect::<Vec<_>>()
                    .join(" / ")
            }),
        })
    }

    /// Per request (acceptance rate %, TPOT ms), for the chart of one against the other.
    pub fn acceptance_points(&self) -> Vec<(f64, f64)> {
        let pts = self
            .in_block("speculative_decoding")
            .and_then(|s| s.get("per_request"));
        let list = |k: &str| -> Vec<f64> {
            pts.and_then(|p| p.get(k))
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default()
        };
        list("acceptance_rate")
            .into_iter()
            .zip(list("tpot_ms"))
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect()
    }

    /// The measured run's length in seconds (vLLM's `duration`).
    pub fn duration(&self) -> Option<f64> {
        self.number("duration")
    }

    /// Output tokens per second; None for a pooling result (it has no such key).
    pub fn output_throughput(&self) -> Option<f64> {
        self.number("output_throughput")
    }

    pub fn max_concurrency(&self) -> Option<u64> {
        self.0.get("max_concurrency")?.as_u64()
    }

    /// The request rate as written (`"inf"` or a number).
    pub fn request_rate_text(&self) -> Option<String> {
        match self.0.get("request_rate")? {
            Value::String(s) => Some(s.clone()),
            x => Some(x.to_string()),
        }
    }

    pub fn model_id(&self) -> Option<&'a str> {
        self.0.get("model_id")?.as_str()
    }

    pub fn date(&self) -> Option<&'a str> {
        self.0.get("date")?.as_str()
    }

    /// The case id benchplan wrote it under.
    pub fn case_id(&self) -> Option<&'a str> {
        self.in_block("case_id")?.as_str()
    }

    /// The service the case ran against.
    pub fn service(&self) -> Option<&'a str> {
        self.in_block("service")?.as_str()
    }

    /// A flag of benchplan's block (`interrupted`, `timed_out`), false when absent.
    fn flag(&self, key: &str) -> bool {
        self.in_block(key) == Some(&Value::Bool(true))
    }

    /// Whether a signal cut the case short (a partial result).
    pub fn interrupted(&self) -> bool {
        self.flag("interrupted")
    }

    /// Whether the case hit `execution.timeout` (a partial result).
    pub fn timed_out(&self) -> bool {
        self.flag("timed_out")
    }

    /// Every value of the result as summary.csv's flat columns, in the file's order:
    /// the top-level keys, then benchplan's block (a key of both is the block's), then
    /// the errors by kind as `errors_KIND`. Values that are not one cell (lists,
    /// objects) are the caller's to skip.
    pub fn columns(&self) -> Vec<(String, &'a Value)> {
        let mut out: Vec<(String, &'a Value)> =
            self.0.iter().map(|(k, v)| (k.clone(), v)).collect();
        if let Some(b) = self.block() {
            out.extend(b.iter().map(|(k, v)| (k.clone(), v)));
            if let Some(Value::Object(e)) = b.get("errors_by_kind") {
                out.extend(e.iter().map(|(k, v)| (format!("errors_{k}"), v)));
            }
            // The flat blocks (`benchplan.reasoning`, `.server_timings`,
            // `.speculative_decoding`): their keys are already vLLM-style column
            // names (`mean_ttfo_ms`, `p99_ttft_gap_ms`, `reasoning_tokens`); only their
            // bare counts take the block's name (`server_timings_requests`).
            for block in FLAT_BLOCKS {
                if let Some(Value::Object(r)) = b.get(block) {
                    for (k, v) in r.iter().filter(|(_, v)| !v.is_object() && !v.is_array()) {
                        match k.as_str() {
                            "requests" | "rejected" => out.push((format!("{block}_{k}"), v)),
                            _ => out.push((k.clone(), v)),
                        }
                    }
                }
            }
            // Energy and cost, one column each under their block's name
            // (`energy_joules_per_output_token`, `cost_per_million_output_tokens`).
            for block in ["energy", "cost"] {
                if let Some(Value::Object(e)) = b.get(block) {
                    out.extend(
                        e.iter()
                            .filter(|(_, v)| !v.is_object() && !v.is_array())
                            .map(|(k, v)| (format!("{block}_{k}"), v)),
                    );
                }
            }
            // A trace case's reuse, one column each (`trace_expected_reuse`, …).
            if let Some(Value::Object(t)) = b.get("trace") {
                out.extend(
                    t.iter()
                        .filter(|(_, v)| v.is_number() || v.is_null())
                        .map(|(k, v)| (format!("trace_{k}"), v)),
                );
            }
        }
        out
    }

    /// The prompts the case asked for (a mean per run for a repeated case).
    pub fn num_prompts(&self) -> Option<f64> {
        self.number("num_prompts")
    }

    /// A multi-turn case's conversations, as its result counts them.
    pub fn conversations(&self) -> Option<Conversations> {
        let n = |k: &str| self.count(k).unwrap_or(0);
        self.0.get("num_conversations")?;
        Some(Conversations {
            total: n("num_conversations"),
            completed: n("conversations_completed"),
            failed: n("conversations_failed"),
            incomplete: n("conversations_incomplete"),
            turns_successful: n("turns_successful"),
            avg_turns: self.number("avg_turns_completed"),
            avg_duration_ms: self.number("avg_conversation_duration_ms"),
        })
    }

    /// One turn index's metrics (an entry of [`CaseFile::per_turn_metrics`]): its
    /// index from 0, completed and failed requests, mean input and cached tokens.
    pub fn turn(&self) -> Turn {
        Turn {
            index: self.count("turn_index").unwrap_or(0),
            completed: self.count("completed").unwrap_or(0),
            failed: self.count("failed").unwrap_or(0),
            mean_input_tokens: self.number("mean_input_tokens"),
            mean_cached_tokens: self.number("mean_cached_tokens"),
        }
    }

    pub fn streams_without_done(&self) -> u64 {
        self.in_block("streams_without_done")
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }

    /// What the server's `/metrics` said during the case (its series over time).
    pub fn server_metrics(&self) -> Option<&'a Value> {
        self.in_block("server_metrics")
    }

    /// The server's gauges sampled during the case (`benchplan.server_metrics.series`):
    /// each scrape's time in seconds from the first measured request, and per gauge the
    /// (time, value) points it has (a scrape that lacked it is left out).
    pub fn server_series(&self) -> Option<ServerSeries> {
        let series = self.server_metrics()?.get("series")?;
        let t: Vec<f64> = series
            .get("t")?
            .as_array()?
            .iter()
            .filter_map(Value::as_f64)
            .collect();
        let gauge = |name: &str| -> Vec<(f64, f64)> {
            series
                .get(name)
                .and_then(Value::as_array)
                .map(|vals| {
                    t.iter()
                        .zip(vals)
                        .filter_map(|(t, v)| v.as_f64().map(|v| (*t, v)))
                        .collect()
                })
                .unwrap_or_default()
        };
        Some(ServerSeries {
            running: gauge("running"),
            waiting: gauge("waiting"),
            kv_cache_usage_pct: gauge("kv_cache_usage_pct"),
            t,
        })
    }

    /// The server's prefix-cache hit rate in percent, when `/metrics` was scraped.
    pub fn prefix_cache_hit_rate(&self) -> Option<f64> {
        self.in_block("server_metrics")?
            .get("prefix_cache_hit_rate_pct")?
            .as_f64()
    }

    pub fn warnings(&self) -> Vec<String> {
        self.in_block("warnings")
            .and_then(Value::as_array)
            .map(|w| {
                w.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Failed requests by kind (`http_500: 3`), in the file's order.
    pub fn errors_by_kind(&self) -> Vec<(String, Value)> {
        self.in_block("errors_by_kind")
            .and_then(Value::as_object)
            .map(|e| e.iter().map(|(k, n)| (k.clone(), n.clone())).collect())
            .unwrap_or_default()
    }

    /// The SLO verdicts the case was judged on; None without the list (an unreadable
    /// list reads as empty).
    pub fn slo_verdicts(&self) -> Option<Vec<Verdict>> {
        Some(serde_json::from_value(self.in_block("slo_verdicts")?.clone()).unwrap_or_default())
    }

    /// Whether no SLO failed (a "not steady" verdict is not a failure); None without
    /// verdicts.
    pub fn slos_pass(&self) -> Option<bool> {
        self.in_block("slo_verdicts")?;
        Some(self.slo_verdicts()?.iter().all(|v| !v.fails()))
    }

    /// Whether a floor every case is judged on (success rate, output ratio) failed.
    pub fn floor_failed(&self) -> bool {
        self.in_block("slo_verdicts")
            .and_then(Value::as_array)
            .is_some_and(|v| {
                v.iter().any(|x| {
                    x.get("key")
                        .and_then(Value::as_str)
                        .is_some_and(crate::slo::floors::is_floor)
                        && x.get("pass") == Some(&Value::Bool(false))
                })
            })
    }

    /// The samples' histogram of a metric (`ttft`, `tpot`, `itl`, `e2el`), in µs.
    pub fn histogram(&self, metric: &str) -> Option<hdrhistogram::Histogram<u64>> {
        let text = self.in_block("histograms_us")?.get(metric)?.as_str()?;
        hist::decode(text).ok()
    }

    /// The token accounting block (`ignore_eos` cases and usage checks).
    pub fn token_accounting(&self) -> Option<&'a Map<String, Value>> {
        self.in_block("token_accounting")?.as_object()
    }

    /// Returned over asked output tokens, in percent, under `ignore_eos`.
    pub fn output_ratio(&self) -> Option<f64> {
        self.token_accounting()?.get("output_ratio")?.as_f64()
    }

    /// How many runs a repeated case combines.
    pub fn repeat_count(&self) -> Option<u64> {
        self.in_block("repeats")?.get("count")?.as_u64()
    }

    /// A repeated case's spread of a number across its runs (population std as % of
    /// the mean).
    pub fn repeat_spread(&self, key: &str) -> Option<f64> {
        self.in_block("repeats")?
            .get("spread_pct")?
            .get(key)?
            .as_f64()
    }

    /// A repeated case's per-run values of a number (`p50_` reads `median_`), when
    /// there are at least two.
    pub fn run_values(&self, key: &str) -> Option<Vec<f64>> {
        let values = self.in_block("repeats")?.get("values")?;
        let list = values
            .get(key)
            .or_else(|| values.get(&median_alias(key)?))?;
        let xs: Option<Vec<f64>> = list.as_array()?.iter().map(Value::as_f64).collect();
        xs.filter(|x| x.len() >= 2)
    }

    /// The number of one run of a repeated case (before they were combined).
    pub fn repeat(&self) -> Option<&'a Value> {
        self.in_block("repeat")
    }

    /// Multi-turn results' per-turn metrics, each turn read as a result of its own.
    pub fn per_turn_metrics(&self) -> Option<Vec<CaseFile<'a>>> {
        let turns = self.0.get("per_turn_metrics")?.as_array()?;
        Some(
            turns
                .iter()
                .filter_map(Value::as_object)
                .map(CaseFile)
                .collect(),
        )
    }
}

impl CaseFile<'_> {
    /// A summary read back from a result JSON (another client's, such as `vllm bench
    /// serve`'s), with what SLO verdicts, reports and searches read: counts, token totals,
    /// throughputs, duration and every latency block it holds (`mean_/median_/std_/pNN_`).
    pub fn summary(&self, p: &CaseParams) -> Summary {
        let r = self.0;
        use crate::plan::Metric;
        let num = |k: &str| r.get(k).and_then(Value::as_f64);
        let int = |k: &str| r.get(k).and_then(Value::as_u64).unwrap_or(0);
        let mut s = Summary {
            pooling: p.backend().is_pooling(),
            has_tokenizer: r.get("tokenizer_id").is_some_and(|t| !t.is_null()),
            duration: num("duration").unwrap_or(0.0),
            completed: int("completed"),
            failed: int("failed"),
            total_input_tokens: int("total_input_tokens"),
            total_output_tokens: int("total_output_tokens"),
            request_throughput: num("request_throughput").unwrap_or(0.0),
            request_goodput: num("request_goodput"),
            output_throughput: num("output_throughput").unwrap_or(0.0),
            total_token_throughput: num("total_token_throughput").unwrap_or(0.0),
            max_output_tokens_per_s: num("max_output_tokens_per_s").unwrap_or(0.0),
            max_concurrent_requests: int("max_concurrent_requests"),
            rtfx: num("rtfx").unwrap_or(0.0),
            ..Summary::default()
        };
        for m in Metric::ALL {
            let n = m.name();
            let Some(mean) = num(&format!("mean_{n}_ms")) else {
                continue;
            };
            let suffix = format!("_{n}_ms");
            let mut percentiles: Vec<(f64, f64)> = r
                .iter()
                .filter_map(|(k, v)| {
                    let q: f64 = k.strip_prefix('p')?.strip_suffix(&suffix)?.parse().ok()?;
                    Some((q, v.as_f64()?))
                })
                .collect();
            percentiles.sort_by(|a, b| a.0.total_cmp(&b.0));
            s.stats.push(LatencyStats {
                metric: m,
                mean,
                median: num(&format!("median_{n}_ms")).unwrap_or(mean),
                std: num(&format!("std_{n}_ms")).unwrap_or(0.0),
                percentiles,
            });
        }
        let list = |k: &str| r.get(k).and_then(Value::as_array);
        if let Some(e) = list("errors") {
            s.errors = e
                .iter()
                .map(|x| x.as_str().unwrap_or_default().to_string())
                .collect();
            for msg in s.errors.iter().filter(|m| !m.is_empty()) {
                *s.errors_by_kind.entry("vllm_error".into()).or_default() += 1;
                s.first_errors
                    .entry("vllm_error".into())
                    .or_insert_with(|| msg.chars().take(500).collect());
            }
        }
        let floats = |k: &str| -> Vec<f64> {
            list(k)
                .map(|v| v.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default()
        };
        s.ttfts = floats("ttfts");
        s.latencies = floats("latencies");
        s.start_times = floats("start_times");
        s.input_lens = list("input_lens")
            .map(|v| v.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        s.output_lens = list("output_lens")
            .map(|v| v.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        s.itls = list("itls")
            .map(|v| {
                v.iter()
                    .map(|x| {
                        x.as_array()
                            .map(|a| a.iter().filter_map(Value::as_f64).collect())
                            .unwrap_or_default()
                    })
                    .collect()
            })
            .unwrap_or_default();
        s
    }
}

/// What the SLOs read of a result file: the same quantities as of a live summary.
impl Measured for CaseFile<'_> {
    fn completed(&self) -> Option<f64> {
        self.number("completed")
    }
    fn latency(&self, stat: Stat, metric: Metric) -> Option<f64> {
        self.latency_ms(&stat.label(), metric.name())
    }
    /// A row's result key, but for the few the file keeps in another form (a pooling
    /// result has no output throughput key, so it stays None).
    fn scalar(&self, def: &'static MetricDef) -> Option<f64> {
        match def.key {
            "success_rate" => self.success_rate(),
            "goodput_ratio" => self.goodput_ratio(),
            "output_ratio" => self.output_ratio(),
            "trace_realised_reuse" => self.trace()?.realised_reuse.map(|r| r * 100.0),
            "energy_joules_per_output_token" => self
                .in_block("energy")?
                .get("joules_per_output_token")?
                .as_f64(),
            "cost_per_million_output_tokens" => self
                .in_block("cost")?
                .get("per_million_output_tokens")?
                .as_f64(),
            k => self.number(k),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::metrics::summary::{LatencyStats, Summary};
    use crate::plan::CaseParams;
    use crate::results::vllm_json::{Header, result_json};
    use crate::slo::Slo;

    /// A summary written by the writer and read back by the reader gives every SLO the
    /// same actual value: the two sides agree on every key.
    #[test]
    fn what_the_writer_writes_the_reader_reads_and_the_slos_judge_alike() {
        let s = Summary {
            completed: 3,
            failed: 1,
            duration: 2.0,
            request_throughput: 1.5,
            request_goodput: Some(0.75),
            output_throughput: 48.0,
            max_output_tokens_per_s: 20.0,
            stats: vec![
                LatencyStats::of(Metric::Ttft, &[10.0, 20.0, 30.0], &[50.0, 99.0]),
                LatencyStats::of(Metric::Tpot, &[1.0, 2.0, 3.0], &[99.0]),
            ],
            ..Summary::default()
        };
        let mut extras = Map::new();
        extras.insert("failed".into(), json!(1));
        let r = result_json(
            &Header::default(),
            &CaseParams::default(),
            &s,
            None,
            false,
            extras,
        );
        let f = CaseFile::new(&r);
        assert_eq!(f.counts(), Some((3.0, 1.0)));
        assert_eq!(f.success_rate(), Some(75.0));
        assert_eq!(f.goodput_ratio(), Some(0.5));
        for key in [
            "p99_ttft",
            "p50_ttft",
            "mean_ttft",
            "median_ttft",
            "std_ttft",
            "p99_tpot",
        ]
        .into_iter()
        // Every one-number row an SLO may judge, so a new row is held to this too.
        .chain(crate::metrics::table::slo_scalar_keys())
        {
            let slo = Slo::from_entry(key, &json!(1)).unwrap();
            let (live, read) = (slo.actual(&s), slo.actual(&f));
            // A case sent without `ignore_eos` has no output ratio, on either side.
            assert!(live.is_some() || slo.metric.def().optional, "{key}");
            assert_eq!(live, read, "{key}");
        }
        // A metric the case did not measure reads as missing on both sides.
        let itl = Slo::from_entry("p99_itl", &json!("<= 1s")).unwrap();
        assert_eq!((itl.actual(&s), itl.actual(&f)), (None, None));
    }

    #[test]
    fn a_plain_vllm_file_and_benchplans_block_are_read_alike() {
        let vllm = json!({"completed": 8, "failed": 2, "p99_ttft_ms": 41.5, "request_rate": "inf"});
        let f = CaseFile::new(vllm.as_object().unwrap());
        assert_eq!(f.counts(), Some((8.0, 2.0)));
        assert_eq!(f.latency_ms("p99", "ttft"), Some(41.5));
        assert_eq!(f.request_rate_text().as_deref(), Some("inf"));
        assert_eq!(
            (f.case_id(), f.slos_pass(), f.repeat_count()),
            (None, None, None)
        );
        // A pooling result keeps `failed` in benchplan's block.
        let pooling = json!({"completed": 4, "benchplan": {"failed": 1, "case_id": "c1",
            "slo_verdicts": [{"key": "min_success_rate", "target": ">= 95%", "actual": 80.0,
                              "unit": "%", "pass": false, "message": ""}],
            "repeats": {"count": 3, "values": {"median_ttft_ms": [1.0, 2.0, 3.0]},
                        "spread_pct": {"p99_ttft_ms": 4.0}}}});
        let f = CaseFile::new(pooling.as_object().unwrap());
        assert_eq!(f.counts(), Some((4.0, 1.0)));
        assert_eq!(f.case_id(), Some("c1"));
        assert_eq!(f.slos_pass(), Some(false));
        assert!(f.floor_failed());
        assert_eq!(f.repeat_count(), Some(3));
        assert_eq!(f.repeat_spread("p99_ttft_ms"), Some(4.0));
        assert_eq!(f.run_values("p50_ttft_ms"), Some(vec![1.0, 2.0, 3.0]));
    }
}
