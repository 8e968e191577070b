//! The report view model: what every report format shows, built once from a run.
//! templates/README.md documents each field for template authors.

use serde::{Deserialize, Serialize};

use serde_json::{Map, Value};

use crate::metrics::summary::Summary;
use crate::plan::params::Metric;
use crate::results::read::CaseFile;
use crate::slo::{Measured, Slo, Stat, Verdict};

/// The tail the report's columns show.
const P99: Stat = Stat::Percentile(99.0);

#[derive(Debug, Clone, Serialize)]
pub struct ServiceView {
    pub name: String,
    /// `simulator` or `external`
    pub kind: String,
    pub base_url: String,
    pub model: String,
    /// Why the service did not come up (its cases failed), if it did not.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CaseView {
    pub id: String,
    pub service: String,
    /// `ok` (measured), `failed`, `timeout` or `interrupted` (a partial result), `not_run`.
    pub status: String,
    pub error: Option<String>,
    pub concurrency: Option<u64>,
    pub rate: String,
    pub prompts: u64,
    pub completed: u64,
    pub failed: u64,
    pub req_s: Option<f64>,
    pub out_tok_s: Option<f64>,
    pub ttft_mean: Option<f64>,
    pub ttft_p99: Option<f64>,
    pub tpot_mean: Option<f64>,
    pub tpot_p99: Option<f64>,
    pub itl_p99: Option<f64>,
    pub e2el_p99: Option<f64>,
    pub success_pct: Option<f64>,
    /// The server's prefix-cache hits over queried prompt tokens during the case, in
    /// percent (from its `/metrics`; None when it does not report both).
    pub prefix_hit_pct: Option<f64>,
    /// `http_500: 3, timeout: 1`, empty when nothing failed.
    pub errors: String,
    /// Successful streams that ended without `[DONE]` (the server closed them early;
    /// vLLM counts them as successes, and so does benchplan).
    pub streams_without_done: u64,
    /// What makes the numbers less than they seem (batched delivery, token counts the
    /// streams contradict, short outputs, a proxy or redirect on the way).
    pub warnings: Vec<String>,
    pub verdicts: Vec<Verdict>,
    /// None when the plan has no SLOs or the case did not run.
    pub slo_pass: Option<bool>,
    /// With execution.repeats > 1: how many runs the numbers average, and their spread.
    pub repeats: Option<u64>,
    /// `req/s ±1.2%, TTFT P99 ±4.0%` (population std as % of the mean).
    pub spread: Option<String>,
    /// Multi-turn cases: what the conversations did, and each turn index's metrics.
    pub conversations: Option<ConversationsView>,
    /// The matrix values of this case other than the service and the load
    /// (concurrency and rate have their own columns), by axis key.
    pub axes: indexmap::IndexMap<String, String>,
    /// A short name for tables (`sim c=4 in=512`): the service, the load and the
    /// matrix values, so a table's first column never wraps; the id goes last.
    pub label: String,
    /// The steady window: where it is and what it measured beside the whole run.
    pub steady: Option<SteadyView>,
    /// A reasoning model's times to its first token and to its answer.
    pub reasoning: Option<crate::results::read::ReasoningFigures>,
    /// Where the time went, from the server's own timings.
    pub time_split: Option<crate::results::read::TimeSplit>,
    /// Speculative decoding per request.
    pub speculative: Option<crate::results::read::SpecFigures>,
    /// Energy and cost over the measured window.
    pub energy_cost: Option<crate::results::read::EnergyCost>,
    /// An open loop whose queue grew without bound: OVERSATURATED, when and at what rate.
    pub oversaturated: Option<String>,
    /// How busy the measuring machine was over the case (`benchplan.machine`).
    pub machine: Option<crate::results::read::MachineFigures>,
    /// A trace case's prefix reuse, expected and realised (`benchplan.trace`).
    pub trace: Option<crate::results::read::TraceFigures>,
}

/// A case's steady window (`benchplan.steady`) as the report shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SteadyView {
    /// Seconds from the case's first send.
    pub start_s: f64,
    pub end_s: f64,
    pub requests: u64,
    /// Whether it holds a steady state, and in words (`steady`, `no steady state: …`,
    /// `too few requests to judge: …`).
    pub steady: bool,
    pub status: String,
    pub ttft_mean: Option<f64>,
    pub ttft_p99: Option<f64>,
    pub tpot_mean: Option<f64>,
    pub out_tok_s: Option<f64>,
}

/// A multi-turn case's conversations: the counts the result holds (`total`,
/// `completed`, `failed`, `incomplete`, `turns_successful`, `avg_turns`,
/// `avg_duration_ms`, flattened for templates) and each turn index's metrics.
#[derive(Debug, Clone, Serialize)]
pub struct ConversationsView {
    #[serde(flatten)]
    pub counts: crate::results::read::Conversations,
    pub turns: Vec<TurnView>,
}

/// One turn index across the conversations (latencies in ms).
#[derive(Debug, Clone, Serialize)]
pub struct TurnView {
    /// 1 for the first turn.
    pub turn: u64,
    pub completed: u64,
    pub failed: u64,
    pub input_tokens_mean: Option<f64>,
    pub cached_tokens_mean: Option<f64>,
    pub ttft_mean: Option<f64>,
    pub ttft_p99: Option<f64>,
    pub tpot_mean: Option<f64>,
    pub itl_p99: Option<f64>,
    pub e2el_mean: Option<f64>,
    pub e2el_p99: Option<f64>,
}

fn conversations_view(r: &Map<String, Value>) -> Option<ConversationsView> {
    let f = CaseFile::new(r);
    let turns = f.per_turn_metrics()?;
    Some(ConversationsView {
        counts: f.conversations()?,
        turns: turns
            .iter()
            .map(|t| {
                let turn = t.turn();
                TurnView {
                    turn: turn.index + 1,
                    completed: turn.completed,
                    failed: turn.failed,
                    input_tokens_mean: turn.mean_input_tokens,
                    cached_tokens_mean: turn.mean_cached_tokens,
                    ttft_mean: t.latency(Stat::Mean, Metric::Ttft),
                    ttft_p99: t.latency(P99, Metric::Ttft),
                    tpot_mean: t.latency(Stat::Mean, Metric::Tpot),
                    itl_p99: t.latency(P99, Metric::Itl),
                    e2el_mean: t.latency(Stat::Mean, Metric::E2el),
                    e2el_p99: t.latency(P99, Metric::E2el),
                }
            })
            .collect(),
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct Recommendation {
    pub case: String,
    pub reason: String,
}

/// The best case of one service and workload, if one meets every SLO.
#[derive(Debug, Clone, Serialize)]
pub struct GroupRecommendation {
    pub service: String,
    pub axes: indexmap::IndexMap<String, String>,
    pub case: Option<String>,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReportView {
    pub plan: String,
    pub description: Option<String>,
    pub started: String,
    pub finished: String,
    pub tool_version: String,
    pub command: String,
    pub services: Vec<ServiceView>,
    /// SLO targets as written, such as `p99_ttft <= 500ms`.
    pub slos: Vec<String>,
    pub cases: Vec<CaseView>,
    pub recommendation: Option<Recommendation>,
    /// The matrix axes shown as columns (see `CaseView::axes`), in declared order.
    pub axes: Vec<String>,
    /// With more than one service or workload: the best load point of each (cases that
    /// differ only in concurrency or rate), since comparing across workloads picks the
    /// cheapest workload, not the best setting.
    pub recommendations: Vec<GroupRecommendation>,
    /// Why there is no recommendation, when there is none.
    pub no_recommendation: Option<String>,
    pub failed_cases: Vec<CaseView>,
    pub slo_failures: usize,
    /// The comparison with the plan's baseline, when there is one.
    pub comparison: Option<super::compare::Comparison>,
    /// The trend of the plan's history with this run appended (`report.history`).
    pub trend: Option<TrendVerdict>,
    /// The charts drawn into the run folder's `charts/` (none with `--no-charts`).
    pub charts: Vec<ChartView>,
    /// The run folder, for the step summary's pointer to report.html.
    pub folder: Option<String>,
    /// The busiest the measuring machine was over any case, in one line (the step
    /// summary's): CPU pressure, client run-queue wait, event-loop lag.
    pub machine_line: Option<String>,
    /// The cases with a cost, cheapest per token at the SLOs first.
    pub cost_ranking: Vec<super::cost_rank::CostRank>,
}

/// The trend verdict a run's report carries: how many series of the history regressed
/// recently, and a line for each.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrendVerdict {
    pub history: String,
    pub runs: usize,
    pub series: usize,
    pub regressions: usize,
    /// `case metric: before → after (+x%) from run R, p = …`, one per regression.
    pub lines: Vec<String>,
    /// The same, one per suspect series: a recent regression too few runs confirm yet
    /// (listed, never failing).
    #[serde(default)]
    pub suspects: Vec<String>,
    /// One per series back at its level after a recent regression.
    #[serde(default)]
    pub recovered: Vec<String>,
    /// A regression whose newest run was measured on a busy machine (`report.busy_*`):
    /// its line and the figures; not failing unless `report.exit_on_inconclusive`.
    #[serde(default)]
    pub inconclusive: Vec<String>,
}

/// What a report says about the run as a whole, beside its cases.
#[derive(Debug, Clone, Default)]
pub struct RunHead {
    pub plan: String,
    pub description: Option<String>,
    pub started: String,
    pub finished: String,
    pub command: String,
    pub services: Vec<ServiceView>,
    /// SLO targets as written.
    pub slos: Vec<String>,
    /// The run folder.
    pub folder: Option<String>,
}

/// What a run judged beside its cases (the plan's description and SLOs, the baseline
/// comparison, the history's trend), kept in its manifest (`judged`) so that
/// `benchplan report DIR` rebuilds exactly the verdict and sections the run wrote,
/// whether or not the baseline and the history are still where they were.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Judged {
    pub description: Option<String>,
    pub slos: Vec<String>,
    /// The plan set SLOs of its own (see [`ReportView::assemble`]).
    pub have_slos: bool,
    pub comparison: Option<super::compare::Comparison>,
    pub trend: Option<TrendVerdict>,
}

impl Judged {
    /// What `view` judged.
    pub fn of(view: &ReportView, have_slos: bool) -> Judged {
        Judged {
            description: view.description.clone(),
            slos: view.slos.clone(),
            have_slos,
            comparison: view.comparison.clone(),
            trend: view.trend.clone(),
        }
    }
}

impl ReportView {
    /// The one way a report's view is assembled (by `run`, and by `report` and `merge`
    /// from a folder): the cases with what is derived from them (failures, SLO
    /// failures, recommendations, axes). `have_slos`: the plan set SLOs of its own.
    pub fn assemble(head: RunHead, mut cases: Vec<CaseView>, have_slos: bool) -> ReportView {
        label(&mut cases);
        let (recommendation, no_recommendation) = match recommend(&cases, have_slos) {
            Ok(r) => (Some(r), None),
            Err(why) => (None, Some(why)),
        };
        let machine_line = machine_line(&cases);
        ReportView {
            cost_ranking: super::cost_rank::rank(
                &cases
                    .iter()
                    .map(|c| super::cost_rank::Entry {
                        label: &c.label,
                        id: &c.id,
                        measured: c.status == "ok",
                        slo_pass: c.slo_pass,
                        out_tok_s: c.out_tok_s,
                        energy_cost: c.energy_cost.as_ref(),
                    })
                    .collect::<Vec<_>>(),
            ),
            axes: axes_of(&cases),
            recommendations: recommend_groups(&cases, have_slos),
            plan: head.plan,
            description: head.description,
            started: head.started,
            finished: head.finished,
            tool_version: env!("CARGO_PKG_VERSION").into(),
            command: head.command,
            services: head.services,
            slos: head.slos,
            // A case skipped on purpose (above an over-saturated rate) did not fail.
            failed_cases: cases
                .iter()
                .filter(|v| v.status != "ok" && v.status != "skipped")
                .cloned()
                .collect(),
            slo_failures: cases.iter().filter(|v| v.slo_pass == Some(false)).count(),
            cases,
            recommendation,
            no_recommendation,
            comparison: None,
            trend: None,
            charts: Vec::new(),
            folder: head.folder,
            machine_line,
        }
    }
}

/// The busiest figures of the measuring machine over the cases, each with its case.
fn machine_line(cases: &[CaseView]) -> Option<String> {
    let most = |get: fn(&crate::results::read::MachineFigures) -> Option<f64>| {
        cases
            .iter()
            .filter_map(|c| Some((get(c.machine.as_ref()?)?, c.id.as_str())))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    };
    let mut parts = Vec::new();
    if let Some((v, id)) = most(|m| m.cpu_pressure_pct) {
        parts.push(format!("CPU pressure up to {v:.1}% ({id})"));
    }
    if let Some((v, id)) = most(|m| m.client_runqueue_ms_per_s) {
        parts.push(format!("client run-queue wait up to {v:.0} ms/s ({id})"));
    }
    if let Some((v, id)) = most(|m| m.event_loop_lag_p99_ms) {
        parts.push(format!("event-loop lag P99 up to {v:.1} ms ({id})"));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The view of one case, from its result JSON (benchplan's or a plain `vllm bench
/// serve` result; partial for a timed-out or interrupted case); `result` is None when
/// the case failed with `error`.
pub fn case_view(
    id: &str,
    service: &str,
    status: &str,
    result: Option<&Map<String, Value>>,
    error: Option<String>,
) -> CaseView {
    let mut v = CaseView {
        id: id.to_string(),
        service: service.to_string(),
        status: status.to_string(),
        error,
        concurrency: None,
        rate: "-".into(),
        prompts: 0,
        completed: 0,
        failed: 0,
        req_s: None,
        out_tok_s: None,
        ttft_mean: None,
        ttft_p99: None,
        tpot_mean: None,
        tpot_p99: None,
        itl_p99: None,
        e2el_p99: None,
        success_pct: None,
        prefix_hit_pct: None,
        errors: String::new(),
        streams_without_done: 0,
        warnings: Vec::new(),
        verdicts: Vec::new(),
        slo_pass: None,
        repeats: None,
        spread: None,
        conversations: None,
        axes: indexmap::IndexMap::new(),
        label: String::new(),
        steady: None,
        reasoning: None,
        time_split: None,
        speculative: None,
        energy_cost: None,
        oversaturated: None,
        machine: None,
        trace: None,
    };
    let Some(r) = result else { return v };
    v.conversations = conversations_view(r);
    let f = CaseFile::new(r);
    v.concurrency = f.max_concurrency();
    v.rate = f.request_rate_text().unwrap_or_else(|| "-".into());
    // Counts of repeated cases are means per run, which need not be whole.
    let count = |x: Option<f64>| x.map_or(0, |n| n.round() as u64);
    v.prompts = count(f.num_prompts());
    v.completed = count(f.completed());
    v.failed = count(f.failed());
    v.req_s = f.request_throughput();
    v.out_tok_s = f.output_throughput();
    v.ttft_mean = f.latency(Stat::Mean, Metric::Ttft);
    v.ttft_p99 = f.latency(P99, Metric::Ttft);
    v.tpot_mean = f.latency(Stat::Mean, Metric::Tpot);
    v.tpot_p99 = f.latency(P99, Metric::Tpot);
    v.itl_p99 = f.latency(P99, Metric::Itl);
    v.e2el_p99 = f.latency(P99, Metric::E2el);
    v.steady = steady_view(&f);
    v.reasoning = f.reasoning();
    v.time_split = f.time_split();
    v.speculative = f.speculative();
    v.energy_cost = f.energy_cost();
    v.machine = f.machine();
    v.trace = f.trace();
    v.oversaturated = f.oversaturation().map(|(at, rate, stopped)| {
        format!(
            "OVERSATURATED: at {rate:.2} req/s, in flight and TTFT rose without bound from {at:.1} s{}",
            if stopped {
                "; ended there (execution.stop_on), the rest of its requests not sent"
            } else {
                ""
            }
        )
    });
    let total = v.completed + v.failed;
    v.success_pct = f
        .recorded_success_rate()
        .or_else(|| (total > 0).then(|| v.completed as f64 / total as f64 * 100.0));
    v.prefix_hit_pct = f.prefix_cache_hit_rate();
    v.streams_without_done = f.streams_without_done();
    v.warnings = f.warnings();
    let errors = f.errors_by_kind();
    if !errors.is_empty() {
        v.errors = errors
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect::<Vec<_>>()
            .join(", ");
    }
    if let Some(count) = f.repeat_count() {
        v.repeats = Some(count);
        // The metrics whose spread a reader checks first, named by the metric table.
        let parts: Vec<String> = [
            "request_throughput",
            "output_throughput",
            "p99_ttft_ms",
            "p99_tpot_ms",
        ]
        .iter()
        .filter_map(|k| {
            let label = crate::metrics::table::short_label(k)?;
            f.repeat_spread(k).map(|x| format!("{label} ±{x:.1}%"))
        })
        .collect();
        v.spread = (!parts.is_empty()).then(|| parts.join(", "));
    }
    if let Some(verdicts) = f.slo_verdicts() {
        v.verdicts = verdicts;
        if !v.verdicts.is_empty() {
            v.slo_pass = Some(v.verdicts.iter().all(|x| !x.fails()));
        }
    }
    v
}

/// The steady window of a result, when it has one.
fn steady_view(f: &CaseFile) -> Option<SteadyView> {
    let (start_s, end_s, requests) = f.steady_window()?;
    let (steady, status) = f.steady_status()?;
    let s = f.steady()?;
    Some(SteadyView {
        start_s,
        end_s,
        requests,
        steady,
        status,
        ttft_mean: s.latency(Stat::Mean, Metric::Ttft),
        ttft_p99: s.latency(P99, Metric::Ttft),
        tpot_mean: s.latency(Stat::Mean, Metric::Tpot),
        out_tok_s: s.output_throughput(),
    })
}

/// Every SLO judged on a summary.
pub fn verdicts(summary: &Summary, slos: &[(Slo, String)]) -> Vec<Verdict> {
    slos.iter()
        .filter_map(|(slo, _)| slo.judge(summary))
        .collect()
}

/// The best case that meets every SLO: highest output throughput (request throughput for pooling).
pub fn recommend(cases: &[CaseView], have_slos: bool) -> Result<Recommendation, String> {
    // Only measured cases that pass every verdict (the success-rate floor included).
    let eligible: Vec<&CaseView> = cases
        .iter()
        // A case whose verdicts are "not steady" met nothing that can be recommended.
        .filter(|c| {
            c.status == "ok"
                && c.slo_pass != Some(false)
                && c.verdicts.iter().all(|v| v.unsteady.is_none())
        })
        .collect();
    let score = |c: &CaseView| c.out_tok_s.or(c.req_s).unwrap_or(0.0);
    let best = eligible
        .iter()
        .max_by(|a, b| score(a).total_cmp(&score(b)))
        .ok_or_else(|| not_recommended(cases))?;
    let what = if best.out_tok_s.is_some() {
        "output throughput"
    } else {
        "request throughput"
    };
    let unit = if best.out_tok_s.is_some() {
        "tok/s"
    } else {
        "req/s"
    };
    let among = if have_slos {
        format!("among the {} case(s) that meet every SLO", eligible.len())
    } else {
        format!(
            "among {} finished case(s); the plan sets no SLOs",
            eligible.len()
        )
    };
    Ok(Recommendation {
        case: best.id.clone(),
        reason: format!("highest {what} ({:.2} {unit}) {among}", score(best)),
    })
}

/// Why no case was recommended, case by case: not measured, below the success-rate or
/// output-ratio floor, or which SLO it missed.
fn not_recommended(cases: &[CaseView]) -> String {
    let why: Vec<String> = cases
        .iter()
        .map(|c| {
            if c.status != "ok" {
                return format!("{}: not measured ({})", c.id, c.status);
            }
            let missed: Vec<String> = c
                .verdicts
                .iter()
                .filter(|v| v.fails())
                .map(|v| {
                    let actual = v
                        .actual
                        .map_or("not measured".to_string(), |a| format!("{a:.2}{}", v.unit));
                    let what = match v.key.as_str() {
                        crate::slo::floors::MIN_SUCCESS_RATE => "below the success-rate floor",
                        crate::slo::floors::MIN_OUTPUT_RATIO => {
                            "below the output-ratio floor (answers cut short)"
                        }
                        _ => "misses",
                    };
                    format!("{what} {} ({actual} vs {})", v.key, v.target)
                })
                .collect();
            format!("{}: {}", c.id, missed.join(", "))
        })
        .collect();
    if why.is_empty() {
        "no case ran".to_string()
    } else {
        format!("no case is recommended: {}", why.join("; "))
    }
}

/// A matrix value's short label for a table or a legend: `c=2` for max_concurrency, `r=4` for
/// request_rate, `in=512`/`out=128` for dataset lengths, `n=` for num_prompts, else
/// the key's last part.
pub fn axis_label(key: &str, value: &str) -> String {
    let short = match key {
        "max_concurrency" => "c",
        "request_rate" => "r",
        "dataset.input_len" => "in",
        "dataset.output_len" => "out",
        "num_prompts" => "n",
        k => k.rsplit('.').next().unwrap_or(k),
    };
    format!("{short}={value}")
}

/// Each case's short label: its service, its load (`c=4`, `r=2`) and its matrix values
/// in their short names; a label two cases share gives way to their ids.
fn label(cases: &mut [CaseView]) {
    for c in cases.iter_mut() {
        let mut parts = vec![c.service.clone()];
        if let Some(n) = c.concurrency {
            parts.push(format!("c={n}"));
        }
        if c.rate != "inf" && c.rate != "-" && !c.rate.is_empty() {
            parts.push(format!("r={}", c.rate));
        }
        parts.extend(c.axes.iter().map(|(k, v)| axis_label(k, v)));
        c.label = parts.join(" ");
    }
    let labels: Vec<String> = cases.iter().map(|c| c.label.clone()).collect();
    for c in cases.iter_mut() {
        if labels.iter().filter(|l| **l == c.label).count() > 1 {
            c.label = c.id.clone();
        }
    }
}

/// The axes of a run's cases, in first-seen order (the report's axis columns).
pub fn axes_of(cases: &[CaseView]) -> Vec<String> {
    let mut axes: Vec<String> = Vec::new();
    for k in cases.iter().flat_map(|v| v.axes.keys()) {
        if !axes.contains(k) {
            axes.push(k.clone());
        }
    }
    axes
}

/// One recommendation per service and workload (see `ReportView::recommendations`).
pub fn recommend_groups(cases: &[CaseView], have_slos: bool) -> Vec<GroupRecommendation> {
    let mut groups: Vec<(String, indexmap::IndexMap<String, String>, Vec<CaseView>)> = Vec::new();
    for c in cases {
        match groups
            .iter_mut()
            .find(|(s, a, _)| *s == c.service && *a == c.axes)
        {
            Some(g) => g.2.push(c.clone()),
            None => groups.push((c.service.clone(), c.axes.clone(), vec![c.clone()])),
        }
    }
    groups
        .into_iter()
        .map(|(service, axes, members)| {
            let (case, reason) = match recommend(&members, have_slos) {
                Ok(r) => (Some(r.case), r.reason),
                Err(why) => (None, why),
            };
            GroupRecommendation {
                service,
                axes,
                case,
                reason,
            }
        })
        .collect()
}

/// The axis values of a case for the report: every matrix key but the service and the
/// load, values as written (strings unquoted).
pub fn axis_values<'a>(
    assigned: impl Iterator<Item = (&'a str, &'a Value)>,
) -> indexmap::IndexMap<String, String> {
    assigned
        .filter(|(k, _)| !matches!(*k, "service" | "max_concurrency" | "request_rate"))
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.to_string(), text)
        })
        .collect()
}

/// What the report says about one chart.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChartView {
    /// `pareto`, `cdf`, `server` or `search`.
    pub kind: String,
    pub title: String,
    /// Relative to the run folder, such as `charts/throughput_vs_ttft.svg`.
    pub file: String,
    /// The service a per-service chart is of.
    pub service: Option<String>,
    /// The case a per-case chart is of.
    pub case: Option<String>,
}
