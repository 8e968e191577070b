//! Bringing the plan's services up before their cases run: a simulator starts in
//! process; an external service must list the plan's model and answer one request
//! (retried until its cases' ready-check timeout, at least a minute). A service that
//! does not come up fails its own cases, with the reason, and the others still run.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::plan::server_metrics::ServerMetricsSpec;
use crate::planner::{Case, Planned};
use crate::servermetrics::Source;
use crate::service::preflight::{self, Fit};
use crate::service::target::{Resolved, resolve};

/// Each pending service: ready, why not, or a simulator that starts with its cases.
pub type Services = HashMap<String, Readiness>;

/// Where a service stands before its cases run.
#[derive(Clone)]
pub enum Readiness {
    Ready(Arc<Resolved>),
    /// Why it is unavailable: its cases fail with this.
    Unavailable(String),
    /// A simulator that starts with its service's first case and stops after its last
    /// (a plan with more than [`MAX_LIVE_SIMS`] of them): [`bring_up`] starts it.
    WithItsCases,
}

impl Readiness {
    fn of(r: Result<Arc<Resolved>, String>) -> Readiness {
        match r {
            Ok(r) => Readiness::Ready(r),
            Err(e) => Readiness::Unavailable(e),
        }
    }
}

/// How long an external service gets to come up: its first case's ready-check timeout,
/// but at least a minute.
fn patience(case: &Case) -> Duration {
    case.params
        .ready_check_timeout
        .0
        .max(Duration::from_secs(60))
}

/// At most this many simulators are up at once. A plan with more simulator services
/// starts each one with its service's first case and stops it after its last (a
/// simulator holds about a megabyte and a port; 10,000 at once would hold 10 GB).
pub const MAX_LIVE_SIMS: usize = 16;

/// Resolves every service that has a case in `pending`; with more than
/// [`MAX_LIVE_SIMS`] simulator services, the simulators are left to start with their
/// cases ([`Readiness::WithItsCases`], see [`bring_up`]).
pub async fn prepare(planned: &Planned, pending: &[&Case]) -> Services {
    let mut sims: Vec<&str> = pending
        .iter()
        .filter(|c| planned.plan.services[&c.service].is_sim())
        .map(|c| c.service.as_str())
        .collect();
    sims.sort_unstable();
    sims.dedup();
    let lazy_sims = sims.len() > MAX_LIVE_SIMS;
    let mut out: Services = HashMap::new();
    for case in pending {
        if out.contains_key(&case.service) {
            continue;
        }
        if lazy_sims && planned.plan.services[&case.service].is_sim() {
            out.insert(case.service.clone(), Readiness::WithItsCases);
            continue;
        }
        let ready = bring_up(planned, case).await;
        out.insert(case.service.clone(), Readiness::of(ready));
    }
    out
}

/// Brings `case`'s service up: resolved, its model checked, an external one answering
/// a request worded as its cases word theirs, its metrics page found. The error says
/// why it is unavailable (and is printed).
pub async fn bring_up(planned: &Planned, case: &Case) -> Result<Arc<Resolved>, String> {
    let svc = &planned.plan.services[&case.service];
    let limit = patience(case);
    let ready = tokio::time::timeout(limit + Duration::from_secs(30), async {
        let mut r = resolve(svc, false, None).await?;
        preflight::check_model(&r, svc).await?;
        // An external service must answer one request, worded as its cases word
        // theirs, before its cases run (a refused wording is searched for one that
        // works: see `preflight`). A simulator is ours: a faulty one is part of the
        // plan, and its cases record their failures.
        if !svc.is_sim() {
            let until = Instant::now() + limit;
            loop {
                match preflight::fit_service(&r, svc, &case.params).await {
                    Fit::Ok => break,
                    Fit::Found(f) => {
                        eprintln!("note: {}", f.note(&case.service));
                        r.found = Some(f);
                        break;
                    }
                    Fit::Refused(e) => return Err(e),
                    Fit::Failed(e) if Instant::now() >= until => {
                        return Err(format!(
                            "it did not answer a smoke request within {:.0} s: {e}",
                            limit.as_secs_f64()
                        ));
                    }
                    Fit::Failed(_) => tokio::time::sleep(Duration::from_secs(2)).await,
                }
            }
        }
        Ok(r)
    })
    .await
    .unwrap_or_else(|_| {
        Err(format!(
            "it did not come up within {:.0} s",
            limit.as_secs_f64() + 30.0
        ))
    });
    match ready {
        Ok(mut r) => {
            let spec = svc
                .server_metrics
                .clone()
                .or_else(|| case.params.server_metrics.clone())
                .unwrap_or_default();
            r.metrics = metrics_source(&r, &spec, &case.service).await;
            r.energy = svc.energy.as_ref().map(|e| Arc::new(energy_source(&r, e)));
            Ok(Arc::new(r))
        }
        Err(e) => {
            eprintln!(
                "error: service `{}` is unavailable, its cases fail: {}",
                case.service,
                crate::escape::console(&e)
            );
            Err(e)
        }
    }
}

/// The service's metrics page, when scraping is on and the page answers; a service
/// without one is reported once (never an error: its cases run without).
pub async fn metrics_source(
    r: &Resolved,
    spec: &ServerMetricsSpec,
    name: &str,
) -> Option<Arc<Source>> {
    if !spec.enabled {
        return None;
    }
    let src = Source::new(&r.base_url, &r.client, &r.headers, spec);
    match src.fetch().await {
        Ok(page) if !page.is_empty() => Some(Arc::new(src)),
        Ok(_) => {
            eprintln!(
                "note: service `{name}`: {} is empty; its cases have no server metrics",
                src.url
            );
            None
        }
        Err(e) => {
            eprintln!(
                "note: service `{name}`: no server metrics ({}); its cases run without them",
                crate::escape::console(&e.to_string())
            );
            None
        }
    }
}

/// The service's energy page: `spec.dcgm` as a URL, or a path on its base URL (asked
/// with the service's client and headers). A page that fails or lacks the series is
/// said in each case's result, which runs on.
pub fn energy_source(
    r: &Resolved,
    spec: &crate::plan::energy::EnergySpec,
) -> crate::energy::source::Source {
    let at = spec
        .prometheus
        .as_deref()
        .or(spec.dcgm.as_deref())
        .unwrap_or("/metrics");
    let url = if at.starts_with("http://") || at.starts_with("https://") {
        at.to_string()
    } else {
        r.base_url.join(at)
    };
    crate::energy::source::Source {
        page: Source {
            url,
            client: r.client.clone(),
            headers: r.headers.clone(),
            interval: spec.interval.0.max(Duration::from_millis(10)),
        },
        selector: crate::energy::dcgm::Selector(spec.gpus.clone()),
        prometheus_wait: spec
            .prometheus
            .is_some()
            .then(|| spec.wait.map_or(Duration::from_secs(30), |w| w.0)),
        command: spec.command.clone(),
        idle: spec.idle.map(|d| d.0),
        nvml: (spec.nvml == Some(true)).then(|| crate::energy::nvml::Nvml::open().map(Arc::new)),
    }
}

/// Each ready service's identity as it reports it: /version where served.
pub async fn versions(services: &Services) -> HashMap<String, Value> {
    let mut out = HashMap::new();
    for (name, r) in services {
        // A simulator left to start with its cases has no version to ask for here.
        let Readiness::Ready(r) = r else { continue };
        let v = r
            .client
            .get(r.base_url.join("/version"))
            .headers(r.headers.clone())
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .ok()
            .filter(|resp| resp.status().is_success());
        let v = match v {
            Some(resp) => serde_json::from_slice(&resp.bytes().await.unwrap_or_default())
                .unwrap_or(Value::Null),
            None => Value::Null,
        };
        out.insert(name.clone(), v);
    }
    out
}
