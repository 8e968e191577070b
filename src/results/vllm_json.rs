//! The result JSON: every key `vllm bench serve --save-result` writes, in its order,
//! names and units (reference §3), then benchplan's additions under `benchplan`.

use serde_json::{Map, Value, json};

use crate::metrics::summary::{LatencyStats, Summary};
use crate::metrics::turns::MultiTurnSummary;
use crate::plan::{CaseParams, Dataset};
use crate::slo::percentile_label;

/// The run-level facts of the header.
#[derive(Debug, Clone, Default)]
pub struct Header {
    /// `%Y%m%d-%H%M%S`
    pub date: String,
    pub label: Option<String>,
    /// As vLLM fills it: the model as given, else the `root` of the first model of
    /// /v1/models (its id is what requests send).
    pub model_id: String,
    pub tokenizer_id: Option<String>,
}

fn stats_keys(out: &mut Map<String, Value>, s: &LatencyStats) {
    let m = s.metric.name();
    out.insert(format!("mean_{m}_ms"), json!(s.mean));
    out.insert(format!("median_{m}_ms"), json!(s.median));
    out.insert(format!("std_{m}_ms"), json!(s.std));
    for (p, v) in &s.percentiles {
        out.insert(format!("p{}_{m}_ms", percentile_label(*p)), json!(v));
    }
}

fn small_stats(s: &LatencyStats) -> Value {
    let mut o = Map::new();
    o.insert("mean_ms".into(), json!(s.mean));
    for (p, v) in &s.percentiles {
        let key = if *p == 100.0 {
            "max_ms".to_string()
        } else {
            format!("p{}_ms", percentile_label(*p))
        };
        o.insert(key, json!(v));
    }
    Value::Object(o)
}

/// The vLLM-shaped result, with `benchplan` extras given by the caller appended.
pub fn result_json(
    h: &Header,
    p: &CaseParams,
    s: &Summary,
    multi_turn: Option<&MultiTurnSummary>,
    detailed: bool,
    extras: Map<String, Value>,
) -> Map<String, Value> {
    let mut o = vllm_keys(h, p, s, multi_turn, detailed);
    o.insert(
        "benchplan".into(),
        Value::Object(benchplan_block(s, detailed, extras)),
    );
    o
}

/// The keys vLLM writes, in its order.
fn vllm_keys(
    h: &Header,
    p: &CaseParams,
    s: &Summary,
    multi_turn: Option<&MultiTurnSummary>,
    detailed: bool,
) -> Map<String, Value> {
    let backend = p.backend().name();
    let mut o = Map::new();
    o.insert("date".into(), json!(h.date));
    o.insert("endpoint_type".into(), json!(backend));
    o.insert("backend".into(), json!(backend));
    o.insert("label".into(), json!(h.label));
    o.insert("model_id".into(), json!(h.model_id));
    o.insert("tokenizer_id".into(), json!(h.tokenizer_id));
    o.insert("num_prompts".into(), json!(p.num_prompts));
    for (k, v) in &p.metadata {
        o.insert(k.clone(), json!(v));
    }
    o.insert(
        "request_rate".into(),
        serde_json::to_value(p.request_rate).expect("rate serialises"),
    );
    // vLLM dumps an infinite burstiness as the literal `Infinity`, which is not JSON;
    // benchplan writes the string "inf", as vLLM does for the request rate.
    o.insert("burstiness".into(), json!(p.burstiness));
    o.insert("max_concurrency".into(), json!(p.max_concurrency));
    if let Some(r) = p.ramp_up_strategy {
        o.insert(
            "ramp_up_strategy".into(),
            serde_json::to_value(r).expect("enum serialises"),
        );
        // vLLM's ramp-up rates are integers (argparse type=int).
        o.insert("ramp_up_start_rps".into(), rps_json(p.ramp_up_start_rps));
        o.insert("ramp_up_end_rps".into(), rps_json(p.ramp_up_end_rps));
    }
    o.insert("duration".into(), json!(s.duration));
    o.insert("completed".into(), json!(s.completed));
    if !s.pooling {
        // vLLM's pooling result has no `failed` key; benchplan's block always has it.
        o.insert("failed".into(), json!(s.failed));
    }
    o.insert("total_input_tokens".into(), json!(s.total_input_tokens));
    if s.pooling {
        o.insert(
            "total_input_sequences".into(),
            json!(s.total_input_sequences),
        );
        o.insert("request_throughput".into(), json!(s.request_throughput));
        o.insert(
            "input_sequence_throughput".into(),
            json!(s.input_sequence_throughput),
        );
        o.insert(
            "total_token_throughput".into(),
            json!(s.total_token_throughput),
        );
        if detailed {
            o.insert("input_lens".into(), json!(s.input_lens));
        }
        o.insert("latencies".into(), json!(s.latencies));
        o.insert("queue_times".into(), json!(s.queue_times));
        if detailed {
            o.insert("errors".into(), json!(s.errors));
        }
    } else {
        o.insert("total_output_tokens".into(), json!(s.total_output_tokens));
        o.insert("request_throughput".into(), json!(s.request_throughput));
        o.insert("request_goodput".into(), json!(s.request_goodput));
        o.insert("output_throughput".into(), json!(s.output_throughput));
        o.insert(
            "total_token_throughput".into(),
            json!(s.total_token_throughput),
        );
        if detailed {
            o.insert("input_lens".into(), json!(s.input_lens));
            o.insert("output_lens".into(), json!(s.output_lens));
            o.insert("ttfts".into(), json!(s.ttfts));
            o.insert("itls".into(), json!(s.itls));
        }
        o.insert("latencies".into(), json!(s.latencies));
        if detailed {
            o.insert("start_times".into(), json!(s.start_times));
        }
        o.insert("queue_times".into(), json!(s.queue_times));
        if detailed {
            o.insert("generated_texts".into(), json!(s.generated_texts));
            o.insert("errors".into(), json!(s.errors));
        }
        o.insert(
            "max_output_tokens_per_s".into(),
            json!(s.max_output_tokens_per_s),
        );
        o.insert(
            "max_concurrent_requests".into(),
            json!(s.max_concurrent_requests),
        );
        o.insert("rtfx".into(), json!(s.rtfx));
        if let (Some(q), Some(t)) = (&s.server_queue_times, &s.server_ttfts) {
            o.insert("server_queue_times".into(), json!(q));
            o.insert("server_ttfts".into(), json!(t));
        }
    }
    if !s.rps_change_events.is_empty() {
        o.insert(
            "rps_change_events".into(),
            Value::Array(
                s.rps_change_events
                    .iter()
                    .map(|e| json!({"rps": e.rps, "timestamp": e.timestamp}))
                    .collect(),
            ),
        );
    }
    // As vLLM: filled from the server's spec-decode counters when drafts moved.
    if let Some(sd) = &s.spec_decode {
        o.insert(
            "spec_decode_acceptance_rate".into(),
            json!(sd.acceptance_rate),
        );
        o.insert(
            "spec_decode_acceptance_length".into(),
            json!(sd.acceptance_length),
        );
        o.insert("spec_decode_num_drafts".into(), json!(sd.num_drafts));
        o.insert("spec_decode_draft_tokens".into(), json!(sd.draft_tokens));
        o.insert(
            "spec_decode_accepted_tokens".into(),
            json!(sd.accepted_tokens),
        );
        o.insert(
            "spec_decode_per_position_acceptance_rates".into(),
            json!(sd.per_position_acceptance_rates),
        );
    }
    for st in &s.stats {
        stats_keys(&mut o, st);
    }
    if let Some(mt) = multi_turn {
        multi_turn_keys(&mut o, p, mt);
    }
    o
}

/// A summary's latency histograms as the file stores them: base64 of HDR's V2 deflate
/// form, by metric.
fn encoded_histograms(s: &Summary) -> Value {
    let hists: Map<String, Value> = s
        .histograms
        .iter()
        .map(|(k, h)| (k.clone(), json!(crate::metrics::hist::encode(h))))
        .collect();
    Value::Object(hists)
}

/// benchplan's block: what vLLM's keys do not say, then the caller's `extras`.
fn benchplan_block(s: &Summary, detailed: bool, extras: Map<String, Value>) -> Map<String, Value> {
    let mut b = Map::new();
    b.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    b.insert("failed".into(), json!(s.failed));
    b.insert("success_rate".into(), json!(s.success_rate()));
    b.insert(
        "max_concurrent_requests_exact".into(),
        json!(s.max_concurrent_requests_exact),
    );
    b.insert(
        "goodput_ratio".into(),
        json!(s.request_goodput.map(|g| if s.request_throughput > 0.0 {
            g / s.request_throughput
        } else {
            0.0
        })),
    );
    b.insert("errors_by_kind".into(), json!(s.errors_by_kind));
    b.insert("first_errors".into(), json!(s.first_errors));
    b.insert(
        "token_count_source".into(),
        json!(s.token_source.map(|t| t.as_str())),
    );
    b.insert(
        "mean_tokens_per_chunk".into(),
        json!(s.mean_tokens_per_chunk),
    );
    b.insert("streams_without_done".into(), json!(s.streams_without_done));
    if !s.pooling {
        b.insert("delivery".into(), json!(s.delivery));
        b.insert("token_accounting".into(), json!(s.accounting));
        if detailed {
            b.insert("token_events".into(), json!(s.token_events));
        }
    }
    b.insert("cached_tokens".into(), json!(s.cached_tokens));
    if let Some(l) = &s.schedule_lag {
        b.insert("schedule_lag".into(), small_stats(l));
    }
    if let Some(q) = &s.client_queue {
        b.insert("client_queue_time".into(), small_stats(q));
    }
    if let Some(l) = &s.load {
        b.insert("send_rate".into(), json!(l));
    }
    if let Some(r) = &s.reasoning {
        b.insert("reasoning".into(), json!(r));
    }
    if let Some(t) = &s.server_timings {
        b.insert("server_timings".into(), json!(t));
    }
    if let Some(f) = &s.speculative {
        b.insert("speculative_decoding".into(), json!(f));
    }
    b.insert("histograms_us".into(), encoded_histograms(s));
    let c = &s.connections;
    let mut conn = Map::new();
    conn.insert("prewarmed".into(), json!(c.prewarmed));
    conn.insert("connects_in_requests".into(), json!(c.connects_in_requests));
    if let Some(t) = &c.connect {
        conn.insert("connect_time".into(), small_stats(t));
    }
    b.insert("connections".into(), Value::Object(conn));
    for (k, v) in extras {
        b.insert(k, v);
    }
    b
}

/// The whole run's metric keys of a partial summary (a slice's, the steady window's):
/// the same names (`mean_ttft_ms`, `output_throughput`, …) from the same writer.
fn metric_keys(p: &CaseParams, s: &Summary) -> Map<String, Value> {
    const COUNTS: [&str; 5] = [
        "completed",
        "failed",
        "duration",
        "total_input_tokens",
        "total_output_tokens",
    ];
    // vLLM's keys only: the benchplan block (its encoded histograms above all) is the
    // whole run's alone.
    vllm_keys(&Header::default(), p, s, None, false)
        .into_iter()
        .filter(|(k, v)| {
            v.is_number()
                && (COUNTS.contains(&k.as_str())
                    || crate::metrics::table::of_result_key(k).is_some())
        })
        .collect()
}

/// A case's measured window as its result's `benchplan` block keeps it: `timeslices`
/// (when cut) and `steady`.
pub fn window_json(p: &CaseParams, w: &crate::metrics::window::Window) -> Map<String, Value> {
    let mut b = Map::new();
    if !w.timeslices.is_empty() {
        b.insert(
            "timeslices".into(),
            Value::Array(w.timeslices.iter().map(|x| slice_json(p, x)).collect()),
        );
    }
    if let Some(st) = &w.steady {
        b.insert("steady".into(), steady_json(p, st));
    }
    b
}

/// One timeslice: its bounds and counts, then its metrics under the whole run's keys.
fn slice_json(p: &CaseParams, x: &crate::metrics::window::Slice) -> Value {
    let mut o = Map::new();
    o.insert("start_s".into(), json!(x.start_s));
    o.insert("end_s".into(), json!(x.end_s));
    o.insert("started".into(), json!(x.started));
    o.insert("finished".into(), json!(x.finished));
    o.insert("errors".into(), json!(x.errors));
    o.insert("in_flight".into(), json!(x.in_flight));
    o.extend(metric_keys(p, &x.summary));
    Value::Object(o)
}

/// The steady window (`benchplan.steady`): where it is, whether it is steady, and its
/// metrics under the whole run's keys.
fn steady_json(p: &CaseParams, st: &crate::metrics::window::Steady) -> Value {
    use crate::metrics::window::{Loop, Steadiness};
    let mut o = Map::new();
    o.insert(
        "window".into(),
        json!({
            "start_s": st.start_s,
            "end_s": st.end_s,
            "requests": st.requests,
            "ramp_s": st.start_s,
            "drain_s": st.drain_s,
        }),
    );
    o.insert(
        "found_by".into(),
        match st.how {
            Loop::Closed { target } => json!({"loop": "closed", "in_flight": target}),
            Loop::Open => json!({"loop": "open", "mser5_warmup_requests": st.warmup_requests}),
        },
    );
    o.insert("steady".into(), json!(st.status == Steadiness::Steady));
    o.insert("state".into(), json!(st.status.kind()));
    o.insert("status".into(), json!(st.status.describe()));
    o.extend(metric_keys(p, &st.summary));
    // Its samples, so the gate tests a difference on the window's own requests; the
    // block reads as a result of its own (`read::CaseFile`).
    o.insert(
        "benchplan".into(),
        json!({"histograms_us": encoded_histograms(&st.summary)}),
    );
    Value::Object(o)
}

/// The Rust vllm-bench's multi-turn keys, `per_turn_metrics` included.
fn multi_turn_keys(o: &mut Map<String, Value>, p: &CaseParams, mt: &MultiTurnSummary) {
    o.insert("mode".into(), json!("multi_turn"));
    o.insert("num_conversations".into(), json!(mt.conversations_total));
    if let Dataset::MultiTurn(d) = &p.dataset {
        let (lo, hi) = d.turn_bounds();
        o.insert("min_turns".into(), json!(lo));
        o.insert("max_turns".into(), json!(hi));
        o.insert(
            "inter_turn_delay_ms".into(),
            json!(d.delay.as_secs_f64() * 1e3),
        );
        if d.prefix_sharing() {
            o.insert("prefix_global_ratio".into(), json!(d.prefix_global_ratio));
            o.insert(
                "prefix_conversation_ratio".into(),
                json!(d.prefix_conversation_ratio),
            );
            o.insert(
                "prefix_unique_ratio".into(),
                json!((1.0 - d.prefix_global_ratio - d.prefix_conversation_ratio).max(0.0)),
            );
            o.insert("no_history_accumulation".into(), json!(true));
        }
    }
    o.insert(
        "multi_turn_concurrency".into(),
        json!(p.multi_turn_concurrency),
    );
    o.insert(
        "conversations_completed".into(),
        json!(mt.conversations_completed),
    );
    o.insert(
        "conversations_failed".into(),
        json!(mt.conversations_failed),
    );
    o.insert(
        "conversations_incomplete".into(),
        json!(mt.conversations_incomplete),
    );
    o.insert("turns_planned".into(), json!(mt.turns_planned));
    o.insert("turns_successful".into(), json!(mt.turns_successful));
    o.insert("avg_turns_completed".into(), json!(mt.avg_turns_completed));
    o.insert(
        "avg_conversation_duration_ms".into(),
        json!(mt.avg_conversation_duration_ms),
    );
    let per_turn: Vec<Value> = mt
        .per_turn
        .iter()
        .map(|t| {
            let s = &t.summary;
            let d = if s.duration > 0.0 {
                s.duration
            } else {
                f64::INFINITY
            };
            let mut m = Map::new();
            m.insert("turn_index".into(), json!(t.turn_index));
            m.insert("num_samples".into(), json!(s.completed + s.failed));
            m.insert("completed".into(), json!(s.completed));
            m.insert("failed".into(), json!(s.failed));
            m.insert("total_input_tokens".into(), json!(s.total_input_tokens));
            m.insert("total_output_tokens".into(), json!(s.total_output_tokens));
            m.insert("request_throughput".into(), json!(s.request_throughput));
            m.insert(
                "input_throughput".into(),
                json!(s.total_input_tokens as f64 / d),
            );
            m.insert("output_throughput".into(), json!(s.output_throughput));
            m.insert(
                "total_token_throughput".into(),
                json!(s.total_token_throughput),
            );
            m.insert("mean_input_tokens".into(), json!(t.input_tokens.mean));
            m.insert("median_input_tokens".into(), json!(t.input_tokens.median));
            m.insert("min_input_tokens".into(), json!(t.input_tokens.min));
            m.insert("max_input_tokens".into(), json!(t.input_tokens.max));
            m.insert("mean_cached_tokens".into(), json!(t.mean_cached_tokens));
            m.insert("errors_by_kind".into(), json!(s.errors_by_kind));
            for st in &s.stats {
                stats_keys(&mut m, st);
            }
            Value::Object(m)
        })
        .collect();
    o.insert("per_turn_metrics".into(), Value::Array(per_turn));
}

/// vLLM's file name: `{label}-{rate}qps[-concurrency{N}]-{model basename}-{date}.json`.
pub fn vllm_file_name(h: &Header, p: &CaseParams) -> String {
    let label = h
        .label
        .clone()
        .unwrap_or_else(|| p.backend().name().to_string());
    // The server names its model (`/v1/models`): a printable, bounded part of a file
    // name (vLLM's own name, for the ordinary model ids that are already that).
    let model = crate::escape::file_name(
        h.model_id.rsplit('/').next().unwrap_or(&h.model_id),
        crate::escape::FILE_NAME_MAX,
    );
    let conc = p
        .max_concurrency
        .map_or_else(String::new, |c| format!("-concurrency{c}"));
    let rate = |r: f64| {
        if r.is_finite() {
            python_float(r)
        } else {
            "inf".to_string()
        }
    };
    match p.ramp_up_strategy {
        Some(s) => format!(
            "{label}-ramp-up-{}-{}qps-{}qps{conc}-{model}-{}.json",
            serde_json::to_value(s)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            rps_name(p.ramp_up_start_rps.unwrap_or(0.0)),
            rps_name(p.ramp_up_end_rps.unwrap_or(0.0)),
            h.date
        ),
        None => format!(
            "{label}-{}qps{conc}-{model}-{}.json",
            rate(p.request_rate.0),
            h.date
        ),
    }
}

/// A ramp-up rate as vLLM writes it: an integer when whole.
fn rps_json(r: Option<f64>) -> Value {
    match r {
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => json!(x as i64),
        Some(x) => json!(x),
        None => Value::Null,
    }
}

/// A ramp-up rate in a file name: `1`, or `2.5` when not whole.
fn rps_name(r: f64) -> String {
    if r.fract() == 0.0 && r.abs() < 1e15 {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

/// Python's `str(float)`: `10.0`, `2.5`.
fn python_float(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e16 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::units::Rate;

    #[test]
    fn file_names_follow_vllm() {
        let h = Header {
            date: "20260301-142530".into(),
            label: None,
            model_id: "meta-llama/Llama-3.1-8B".into(),
            tokenizer_id: None,
        };
        let mut p = CaseParams {
            backend: Some(crate::plan::Backend::OpenaiChat),
            max_concurrency: Some(64),
            ..CaseParams::default()
        };
        assert_eq!(
            vllm_file_name(&h, &p),
            "openai-chat-infqps-concurrency64-Llama-3.1-8B-20260301-142530.json"
        );
        p.max_concurrency = None;
        p.request_rate = Rate(10.0);
        p.backend = Some(crate::plan::Backend::Vllm);
        assert_eq!(
            vllm_file_name(&h, &p),
            "vllm-10.0qps-Llama-3.1-8B-20260301-142530.json"
        );
        // Ramp-up rates are vLLM integers: `1qps`, not `1.0qps`.
        p.request_rate = Rate(f64::INFINITY);
        p.ramp_up_strategy = Some(crate::plan::params::RampUp::Linear);
        p.ramp_up_start_rps = Some(1.0);
        p.ramp_up_end_rps = Some(20.0);
        assert_eq!(
            vllm_file_name(&h, &p),
            "vllm-ramp-up-linear-1qps-20qps-Llama-3.1-8B-20260301-142530.json"
        );
        let r = result_json(&h, &p, &Summary::default(), None, false, Map::new());
        assert_eq!(
            (&r["ramp_up_start_rps"], &r["ramp_up_end_rps"]),
            (&json!(1), &json!(20))
        );
        p.burstiness = crate::plan::units::Burstiness(f64::INFINITY);
        let r = result_json(&h, &p, &Summary::default(), None, false, Map::new());
        assert_eq!(r["burstiness"], "inf");
    }
}
