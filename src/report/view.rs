//! The report view model: what every report format shows, built once from a run.
//! templates/README.md documents each field for template authors.

use serde::Serialize;

use crate::metrics::summary::Summary;
use crate::plan::Metric;
use crate::planner::Case;
use crate::slo::{Slo, Verdict};

#[derive(Debug, Clone, Serialize)]
pub struct ServiceView {
    pub name: String,
    /// `simulator` or `external`
    pub kind: String,
    pub base_url: String,
    pub model: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct CaseView {
    pub id: String,
    pub service: String,
    /// `ok` or `failed`
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
    /// `http_500: 3, timeout: 1`, empty when nothing failed.
    pub errors: String,
    pub verdicts: Vec<Verdict>,
    /// None when the plan has no SLOs or the case did not run.
    pub slo_pass: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Recommendation {
    pub case: String,
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
    /// Why there is no recommendation, when there is none.
    pub no_recommendation: Option<String>,
    pub failed_cases: Vec<CaseView>,
    pub slo_failures: usize,
}

fn p99(s: &Summary, m: Metric) -> Option<f64> {
    s.stat(m).and_then(|st| {
        st.percentiles
            .iter()
            .find(|(q, _)| *q == 99.0)
            .map(|(_, v)| *v)
    })
}

/// The view of one case: its summary when it ran, its error when it did not.
pub fn case_view(
    case: &Case,
    summary: Option<&Summary>,
    error: Option<String>,
    slos: &[(Slo, String)],
) -> CaseView {
    let p = &case.params;
    let mut v = CaseView {
        id: case.id.clone(),
        service: case.service.clone(),
        status: if summary.is_some() {
            "ok".into()
        } else {
            "failed".into()
        },
        error,
        concurrency: p.max_concurrency,
        rate: p.request_rate.to_string(),
        prompts: p.num_prompts,
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
        errors: String::new(),
        verdicts: Vec::new(),
        slo_pass: None,
    };
    if let Some(s) = summary {
        v.completed = s.completed;
        v.failed = s.failed;
        v.req_s = Some(s.request_throughput);
        v.out_tok_s = (!s.pooling).then_some(s.output_throughput);
        v.ttft_mean = s.stat(Metric::Ttft).map(|x| x.mean);
        v.ttft_p99 = p99(s, Metric::Ttft);
        v.tpot_mean = s.stat(Metric::Tpot).map(|x| x.mean);
        v.tpot_p99 = p99(s, Metric::Tpot);
        v.itl_p99 = p99(s, Metric::Itl);
        v.e2el_p99 = p99(s, Metric::E2el);
        v.success_pct = Some(s.success_rate());
        v.errors = s
            .errors_by_kind
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        v.verdicts = slos.iter().map(|(slo, _)| slo.judge(s)).collect();
        if !slos.is_empty() {
            v.slo_pass = Some(v.verdicts.iter().all(|x| x.pass));
        }
    }
    v
}

/// The best case that meets every SLO: highest output throughput (request throughput for pooling).
pub fn recommend(cases: &[CaseView], have_slos: bool) -> Result<Recommendation, String> {
    let eligible: Vec<&CaseView> = cases
        .iter()
        .filter(|c| c.status == "ok" && c.slo_pass != Some(false))
        .collect();
    let score = |c: &CaseView| c.out_tok_s.or(c.req_s).unwrap_or(0.0);
    let best = eligible
        .iter()
        .max_by(|a, b| score(a).total_cmp(&score(b)))
        .ok_or_else(|| {
            if have_slos {
                "no case meets every SLO".to_string()
            } else {
                "no case finished".to_string()
            }
        })?;
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
