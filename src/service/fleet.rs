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

/// Each pending service: ready, or why not.
pub type Services = HashMap<String, Result<Arc<Resolved>, String>>;

/// How long an external service gets to come up: its first case's ready-check timeout,
/// but at least a minute.
fn patience(case: &Case) -> Duration {
    case.params
        .ready_check_timeout
        .0
        .max(Duration::from_secs(60))
}

/// Resolves every service that has a case in `pending`.
pub async fn prepare(planned: &Planned, pending: &[&Case]) -> Services {
    let mut out: Services = HashMap::new();
    for case in pending {
        if out.contains_key(&case.service) {
            continue;
        }
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
        let ready = match ready {
            Ok(mut r) => {
                let spec = svc
                    .server_metrics
                    .clone()
                    .or_else(|| case.params.server_metrics.clone())
                    .unwrap_or_default();
                r.metrics = metrics_source(&r, &spec, &case.service).await;
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
        };
        out.insert(case.service.clone(), ready);
    }
    out
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

/// Each ready service's identity as it reports it: /version where served.
pub async fn versions(services: &Services) -> HashMap<String, Value> {
    let mut out = HashMap::new();
    for (name, r) in services {
        let Ok(r) = r else { continue };
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
