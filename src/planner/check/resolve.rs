//! Filling in what a case implies: its backend and endpoint from the service, and what
//! its SLOs need measured.

use crate::plan::Service;
use crate::plan::backend::Backend;
use crate::plan::params::CaseParams;
use crate::slo::{Slo, SloMetric, Stat};

/// Fills in the backend, endpoint, client and request shape. Precedence, one rule for them all: a
/// matrix value of the case, then the service's own key, then `[defaults]`, then
/// vLLM's default (a service that says `backend = "openai-chat"` is never overridden by
/// the plan-wide default `init` writes). `from_matrix(key)`: whether the case's matrix
/// values set `key`.
pub fn resolve_target(
    params: &mut CaseParams,
    service: &Service,
    from_matrix: impl Fn(&str) -> bool,
) {
    let backend = if from_matrix("backend") {
        params.backend
    } else {
        service.backend.or(params.backend)
    }
    .unwrap_or(Backend::Openai);
    params.backend = Some(backend);
    params.client = if from_matrix("client") {
        params.client.or(service.client)
    } else {
        service.client.or(params.client)
    };
    if !from_matrix("endpoint") && service.endpoint.is_some() {
        params.endpoint = service.endpoint.clone();
    }
    if params.endpoint.is_none() {
        params.endpoint = Some(backend.default_endpoint().to_string());
    }
    // The request shape, field by field: what the matrix sets, else the service's, else
    // the defaults'.
    let matrix =
        |f: &str| from_matrix("request_shape") || from_matrix(&format!("request_shape.{f}"));
    let (s, p) = (&service.request_shape, &mut params.request_shape);
    if !matrix("chat_content") {
        p.chat_content = s.chat_content.or(p.chat_content);
    }
    if !matrix("request_id") {
        p.request_id = s.request_id.or(p.request_id);
    }
    if !matrix("request_id_header") {
        p.request_id_header = s.request_id_header.clone().or(p.request_id_header.take());
    }
    if !matrix("stream_options") {
        p.stream_options = s.stream_options.or(p.stream_options);
    }
    if !matrix("max_tokens_key") {
        p.max_tokens_key = s.max_tokens_key.or(p.max_tokens_key);
    }
}

/// Fills in what a checked case implies: vLLM's ignore_eos default, and the percentiles
/// and metrics its SLOs read (a p99.9 SLO makes the case compute p99.9).
pub fn resolve_implied(params: &mut CaseParams, slos: &[(Slo, String)]) {
    if params.ignore_eos.is_none()
        && !params.backend().is_pooling()
        && params.dataset.ignores_eos_by_default()
    {
        params.ignore_eos = Some(true);
    }
    let mut metrics = params.percentile_metrics();
    for (slo, _) in slos {
        if let SloMetric::Latency { stat, metric } = slo.metric {
            if !metrics.contains(&metric) {
                metrics.push(metric);
            }
            if let Stat::Percentile(q) = stat {
                if !params.metric_percentiles.contains(&q) {
                    params.metric_percentiles.push(q);
                }
            }
        }
    }
    params.percentile_metrics = Some(metrics);
}
