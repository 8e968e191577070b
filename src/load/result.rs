//! What measuring one case produced ([`CaseResult`]) and the facts a result records
//! beside the numbers: the route the requests took, warnings, LoRA adapters, the
//! `benchplan` block.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::run::CaseRun;
use crate::client::backend::RequestInput;
use crate::metrics::summary::Summary;
use crate::metrics::turns::MultiTurnSummary;
use crate::plan::CaseParams;
use crate::results::deviations::{self, Facts};

/// A measured case.
#[derive(Debug)]
pub struct CaseResult {
    pub summary: Summary,
    /// The measured window: timeslices and the steady window (see `metrics::window`).
    pub window: crate::metrics::window::Window,
    /// Conversation outcomes and per-turn metrics, for multi-turn cases.
    pub multi_turn: Option<MultiTurnSummary>,
    pub run: CaseRun,
    /// The requests as built (lengths are reported); a multi-turn case's first turns.
    pub inputs: Arc<Vec<RequestInput>>,
    /// Which other client measured the case, and how (`client = "vllm"`); None for
    /// benchplan's own.
    pub engine: Option<Value>,
    /// That client's own result JSON, which is then the case's result as written.
    pub raw: Option<Map<String, Value>>,
    /// The way the measured requests went, when not straight to the URL.
    pub route: RouteFacts,
    /// What the service costs per hour, when the plan says (`benchplan.cost`).
    pub cost: Option<crate::plan::energy::CostSpec>,
    /// A trace case's cache reuse, expected and realised (`benchplan.trace`).
    pub trace: Option<super::trace::TraceReuse>,
}

/// Where the measured requests went on their way: a proxy, a redirect.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct RouteFacts {
    /// The proxy (`http://host:port`, never its credentials).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// The variable that named it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_variable: Option<String>,
    /// The URL a followed 307/308 redirect led to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirected_to: Option<String>,
    /// The other origin a redirect led to, which the requests reached without their
    /// credentials (`Authorization`, cookies, secret headers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials_withheld_at: Option<String>,
    /// The target is this host (its loopback or one of its addresses), reached with
    /// no proxy: what a path adds to TTFT is then the client's own (the gap's warning).
    #[serde(skip)]
    pub this_host: bool,
}

impl RouteFacts {
    pub(super) fn of(t: &crate::client::request::Target) -> RouteFacts {
        RouteFacts {
            proxy: t.proxy.as_ref().map(|v| v.shown.clone()),
            proxy_variable: t.proxy.as_ref().map(|v| v.variable.to_string()),
            redirected_to: t.route.final_url(),
            credentials_withheld_at: t.route.withheld_at(),
            this_host: t.proxy.is_none() && t.base_url.is_this_host(),
        }
    }

    pub fn is_direct(&self) -> bool {
        // Where the target is (this host or not) is no step on the way.
        let way = RouteFacts {
            this_host: false,
            ..self.clone()
        };
        way == RouteFacts::default()
    }

    /// What the console says of the route.
    pub fn notes(&self) -> Vec<String> {
        let mut n = Vec::new();
        if let (Some(p), Some(var)) = (&self.proxy, &self.proxy_variable) {
            n.push(format!(
                "the measured requests went through the proxy {p} (from {var}); its time is in every latency. Set proxy = false on the service (bench: --no-proxy) or NO_PROXY to go direct"
            ));
        }
        if let Some(u) = &self.redirected_to {
            n.push(format!(
                "the server redirected the requests to {u} (followed on every request, inside its latency); set base_url to go there directly"
            ));
        }
        if let Some(o) = &self.credentials_withheld_at {
            n.push(format!(
                "a redirect led to another origin, {o}: the requests went there without Authorization, cookies or secret headers (credentials never leave their origin; cross_origin_redirects = \"refuse\" fails such requests instead)"
            ));
        }
        n
    }
}

impl CaseResult {
    /// benchplan's facts about the run for the result's `benchplan` block: the smoke
    /// request, warmups, interruption, and the deviations from vLLM that applied
    /// (`prepared`: what the caller did to the service before the case, see `preflight`).
    pub fn extras(
        &self,
        params: &CaseParams,
        prepared: &crate::service::preflight::Prepared,
    ) -> Map<String, Value> {
        let facts = Facts {
            prewarmed: self.run.prewarmed,
            smoke: self.run.smoke.is_some(),
            prefix_cache_reset: prepared.prefix_cache_reset(),
        };
        let mut m = Map::new();
        m.insert("interrupted".into(), json!(self.run.interrupted));
        m.insert("smoke".into(), json!(self.run.smoke));
        m.insert("warmups_failed".into(), json!(self.run.warmups_failed));
        // vLLM's own client measured it: none of benchplan's client's deviations apply.
        m.insert(
            "deviations".into(),
            match &self.engine {
                Some(_) => json!([]),
                None => deviations::json(params, &facts),
            },
        );
        if let Some(e) = &self.engine {
            m.insert("engine".into(), e.clone());
        }
        let a = &self.run.accounting;
        let mut req = serde_json::to_value(a).expect("accounting serialises");
        req["balanced"] = json!(a.balanced());
        m.insert("requests".into(), req);
        m.insert("timed_out".into(), json!(self.run.timed_out));
        // Null when not found (a closed loop cannot over-saturate: its cap bounds it).
        m.insert("oversaturation".into(), json!(self.run.oversaturation));
        if let Some(t) = &self.trace {
            m.insert("trace".into(), json!(t));
        }
        if let Some(sm) = &self.run.server_metrics {
            m.insert("server_metrics".into(), sm.to_json());
        }
        let energy = self.energy();
        if let Some(e) = &energy {
            m.insert("energy".into(), json!(e));
        }
        if let (Some(spec), Some((window, _, _, out))) = (&self.cost, self.measured()) {
            let c = crate::energy::cost::CostFigures::of(spec, window, out, energy.as_ref());
            m.insert("cost".into(), json!(c));
        }
        if !params.lora_modules.is_empty() {
            m.insert("lora".into(), self.lora_json(params));
        }
        if !self.route.is_direct() {
            m.insert("route".into(), json!(self.route));
        }
        prepared.insert_into(&mut m);
        let mut warnings = self.warnings();
        warnings.extend(prepared.warnings());
        if !warnings.is_empty() {
            m.insert("warnings".into(), json!(warnings));
        }
        m
    }

    /// What the console and the report say about this case's numbers: batched
    /// delivery, token counts the streams contradict, short outputs, the route.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = self.summary.warnings();
        w.extend(self.route.notes());
        w.extend(self.energy().iter().flat_map(|e| e.warnings()));
        if self.route.this_host {
            let ttft = self.summary.stat(crate::plan::params::Metric::Ttft);
            let t = self.summary.server_timings.as_ref();
            w.extend(t.zip(ttft).and_then(|(t, c)| t.gap_warning(c.mean)));
        }
        w
    }

    /// The case's energy over its measured window: the steady window when it holds a
    /// steady state, else first send to last answer; the tokens of the same window.
    pub fn energy(&self) -> Option<crate::energy::figures::EnergyFigures> {
        let readings = self.run.energy.as_ref()?;
        let (name, a, b, out) = self.measured()?;
        Some(crate::energy::figures::EnergyFigures::of(
            readings, name, a, b, out,
        ))
    }

    /// The measured window (its name and bounds in seconds from the first send) and
    /// what its requests produced per second.
    fn measured(&self) -> Option<(&'static str, f64, f64, crate::energy::figures::Output)> {
        let steady = self
            .window
            .steady
            .as_ref()
            .filter(|s| s.status == crate::metrics::window::Steadiness::Steady);
        let (name, a, b, s) = match steady {
            Some(st) => ("steady", st.start_s, st.end_s, &st.summary),
            None => {
                let ok = self.run.records.iter().filter(|r| r.sample.success);
                let a = self
                    .run
                    .records
                    .iter()
                    .map(|r| r.start)
                    .fold(f64::INFINITY, f64::min);
                let b = ok
                    .map(|r| r.start + r.sample.latency)
                    .fold(f64::NEG_INFINITY, f64::max);
                (a.is_finite() && b > a).then_some(("run", a, b, &self.summary))?
            }
        };
        let out = crate::energy::figures::Output {
            output_tps: s.output_throughput,
            total_tps: s.total_token_throughput,
            goodput_rps: s.request_goodput,
            request_rps: s.request_throughput,
        };
        Some((name, a, b, out))
    }

    /// Which LoRA adapter each measured request named (in request order) and how
    /// each adapter's requests ended.
    fn lora_json(&self, params: &CaseParams) -> Value {
        let mut records: Vec<_> = self.run.records.iter().collect();
        records.sort_by_key(|r| r.index);
        let mut per_request = Vec::with_capacity(records.len());
        let mut by_adapter: Map<String, Value> = params
            .lora_modules
            .iter()
            .map(|l| (l.clone(), json!({"completed": 0, "failed": 0})))
            .collect();
        for r in records {
            let name = self
                .inputs
                .get(r.index)
                .and_then(|i| i.model.as_deref())
                .unwrap_or_default();
            per_request.push(json!(name));
            if let Some(v) = by_adapter.get_mut(name) {
                let k = if r.sample.success {
                    "completed"
                } else {
                    "failed"
                };
                v[k] = json!(v[k].as_u64().unwrap_or(0) + 1);
            }
        }
        json!({
            "assignment": params.lora_assignment.unwrap_or_default(),
            "adapters": by_adapter,
            "per_request": per_request,
        })
    }

    /// The case's result JSON: vLLM-shaped from the summary, or the other client's own
    /// result as it wrote it; either with `extras` as its `benchplan` block.
    pub fn result_json(
        &self,
        header: &crate::results::vllm_json::Header,
        params: &CaseParams,
        detailed: bool,
        extras: Map<String, Value>,
    ) -> Map<String, Value> {
        let mut extras = extras;
        extras.extend(crate::results::vllm_json::window_json(params, &self.window));
        // Energy and cost over the steady window belong to it too: the compare gate
        // reads the steady window as a result of its own (`report.measure`).
        for key in ["energy", "cost"] {
            let of_steady = extras
                .get(key)
                .filter(|v| v.get("window").and_then(Value::as_str) == Some("steady"))
                .cloned();
            let inner = extras
                .get_mut("steady")
                .and_then(|s| s.get_mut("benchplan"))
                .and_then(Value::as_object_mut);
            if let (Some(v), Some(inner)) = (of_steady, inner) {
                inner.insert(key.into(), v);
            }
        }
        if let Some(m) = &self.run.machine {
            extras.insert("machine".into(), serde_json::json!(m));
        }
        match &self.raw {
            Some(raw) => {
                let mut r = raw.clone();
                r.insert("benchplan".into(), Value::Object(extras));
                r
            }
            None => crate::results::vllm_json::result_json(
                header,
                params,
                &self.summary,
                self.multi_turn.as_ref(),
                detailed,
                extras,
            ),
        }
    }

    /// What makes this case's numbers untrustworthy as a tool result (each a reason to
    /// exit 1): requests the client lost track of, client panics, no success at all.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let a = &self.run.accounting;
        if !a.balanced() {
            out.push(format!(
                "{} of {} scheduled requests are unaccounted for (a benchplan bug; please report it)",
                a.lost, a.scheduled
            ));
        }
        if let Some(n) = self.summary.errors_by_kind.get("client_panic") {
            out.push(format!(
                "{n} request(s) ended in a panic of benchplan's client (a bug; please report it): {}",
                self.summary
                    .first_errors
                    .get("client_panic")
                    .map_or("", String::as_str)
            ));
        }
        if self.summary.completed == 0 && !self.run.records.is_empty() {
            // The first error of each kind says why (a certificate hint, a refused
            // connection) where a bare count would not.
            let why: Vec<String> = self
                .summary
                .first_errors
                .iter()
                .map(|(kind, msg)| format!("{kind}: {msg}"))
                .collect();
            out.push(format!(
                "no request succeeded ({} failed{})",
                self.summary.failed,
                if why.is_empty() {
                    String::new()
                } else {
                    format!("; {}", why.join("; "))
                }
            ));
        }
        out
    }
}
