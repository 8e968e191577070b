//! The unmeasured requests before a case: vLLM's ready check and warmups (both send
//! the case's first request, as vLLM does), benchplan's smoke request (a prefixed
//! copy, so it warms no cache block a measured request reuses), and the connections
//! opened before the run. Every step is bounded by the case's deadline and gives way to
//! a stop, so a server that never answers cannot hold a case past its timeout.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use super::guard::CatchPanic;
use super::options::{RunError, RunOptions};
use crate::client::backend::RequestInput;
use crate::client::request::{Target, send_input};
use crate::metrics::sample::{RequestError, Sample};
use crate::plan::CaseParams;

/// Put before the smoke request's texts (see `RequestInput::with_prefix`).
pub const SMOKE_PREFIX: &str = "benchplan smoke check. ";

/// The smoke request's result: reported, never measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Smoke {
    pub ok: bool,
    pub latency_ms: f64,
    pub attempts: u32,
    pub error: Option<String>,
}

/// Runs `fut` unless the case's deadline passes or the case is stopped first.
pub(crate) async fn bounded<T>(
    opts: &RunOptions,
    phase: &'static str,
    fut: impl Future<Output = T>,
) -> Result<T, RunError> {
    let deadline = async {
        match opts.deadline {
            Some(d) => tokio::time::sleep_until(d.into()).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        _ = opts.stop.until_draining() => Err(RunError::Interrupted(phase)),
        _ = deadline => Err(RunError::TimedOut(phase)),
        v = fut => Ok(v),
    }
}

/// One unmeasured request; a panic in the client becomes a failed sample.
pub(crate) async fn one(target: &Target, params: &CaseParams, input: &RequestInput) -> Sample {
    // Worded as the measured requests (a request id included), so a server that refuses
    // their wording refuses this one too.
    let id = Some(crate::service::preflight::SMOKE_ID);
    match CatchPanic::new(send_input(target, params, input, id, None)).await {
        Ok(o) => o.sample,
        Err(msg) => panicked(msg),
    }
}

/// The sample of a request whose client code panicked.
pub(crate) fn panicked(message: String) -> Sample {
    Sample {
        input_sequences: 1,
        error: Some(RequestError {
            kind: "client_panic".into(),
            message: format!("benchplan's client panicked (a bug; please report it): {message}"),
        }),
        ..Sample::default()
    }
}

fn last_error(o: &Sample) -> String {
    o.error.as_ref().map_or_else(
        || "unknown error".into(),
        |e| format!("{}: {}", e.kind, e.message),
    )
}

/// The ready check, the smoke request and the warmups (under the concurrency cap).
pub(crate) async fn prepare(
    target: &Arc<Target>,
    params: &Arc<CaseParams>,
    first: &RequestInput,
    sem: Option<&Arc<Semaphore>>,
    opts: &RunOptions,
) -> Result<(Option<Smoke>, u64), RunError> {
    let ready = params.ready_check_timeout.as_secs_f64();
    if ready > 0.0 {
        let until = Instant::now() + Duration::from_secs_f64(ready);
        bounded(opts, "the ready check", async {
            // vLLM's wait_for_endpoint: try, and 5 s after a failure try again, until
            // the deadline; a try still out at the deadline is the last.
            let mut last = "no answer in time".to_string();
            while Instant::now() < until {
                match tokio::time::timeout_at(until.into(), one(target, params, first)).await {
                    Ok(o) if o.success => return Ok(()),
                    Ok(o) => last = last_error(&o),
                    Err(_) => break,
                }
                let now = Instant::now();
                if now < until {
                    tokio::time::sleep((until - now).min(Duration::from_secs(5))).await;
                }
            }
            Err(RunError::NotReady(ready, last))
        })
        .await??;
    }

    let mut smoke = None;
    if opts.smoke {
        // benchplan's own check (vLLM sends none): prefixed, so it warms no cache
        // block a measured request would reuse.
        let smoke_input = first.with_prefix(SMOKE_PREFIX);
        smoke = Some(
            bounded(opts, "the smoke request", async {
                let mut attempts = 0;
                loop {
                    attempts += 1;
                    let t = Instant::now();
                    let o = announced(opts, target, one(target, params, &smoke_input)).await;
                    if o.success {
                        return Ok(Smoke {
                            ok: true,
                            latency_ms: t.elapsed().as_secs_f64() * 1e3,
                            attempts,
                            error: None,
                        });
                    }
                    // Transient errors (a 429, an injected fault) get two more tries; a
                    // dead endpoint fails the case.
                    if attempts >= 3 {
                        return Err(RunError::Smoke {
                            attempts,
                            error: last_error(&o),
                            kind: o
                                .error
                                .as_ref()
                                .map_or_else(String::new, |e| e.kind.clone()),
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            })
            .await??,
        );
    }

    let mut warmups_failed = 0;
    if params.num_warmups > 0 {
        // A JoinSet: if the case times out here, dropping it aborts what is in flight.
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..params.num_warmups {
            let (target, params, first, sem) =
                (target.clone(), params.clone(), first.clone(), sem.cloned());
            tasks.spawn(async move {
                let _permit = match &sem {
                    Some(s) => Some(s.acquire().await.expect("semaphore open")),
                    None => None,
                };
                one(&target, &params, &first).await.success
            });
        }
        warmups_failed = bounded(opts, "the warmups", async {
            let mut failed = 0;
            while let Some(ok) = tasks.join_next().await {
                failed += u64::from(!ok.unwrap_or(false));
            }
            failed
        })
        .await?;
    }

    Ok((smoke, warmups_failed))
}

/// Waits for `f`; with `opts.announce_waits`, every 5 s says on stderr what it waits
/// for, so a server that does not answer is never a silent wait.
async fn announced<T>(
    opts: &RunOptions,
    target: &Target,
    f: impl std::future::Future<Output = T>,
) -> T {
    if !opts.announce_waits {
        return f.await;
    }
    tokio::pin!(f);
    let start = Instant::now();
    let every = Duration::from_secs(5);
    let mut tick = tokio::time::interval_at((start + every).into(), every);
    loop {
        tokio::select! {
            v = &mut f => return v,
            _ = tick.tick() => eprintln!(
                "waiting for the smoke request to {} ({:.0} s so far; it fails after stream_idle_timeout = {:.0} s without an answer)",
                crate::proxy::without_credentials(&target.url),
                start.elapsed().as_secs_f64(),
                target.limits.idle.as_secs_f64()
            ),
        }
    }
}

/// Opens up to `k` pooled connections (reqwest: with concurrent GETs of /v1/models);
/// best effort, within the case's deadline. Returns how many are open for the run
/// (reqwest: how many GETs answered).
pub(crate) async fn prewarm(
    target: &Arc<Target>,
    k: usize,
    opts: &RunOptions,
) -> Result<usize, RunError> {
    let k = k.min(4096);
    if k <= 1 {
        return Ok(0);
    }
    if let Some(native) = &target.native {
        bounded(opts, "opening connections", native.pool.prewarm(k)).await?;
        return Ok(native.pool.idle_count());
    }
    let url = target.base_url.join("/v1/models");
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..k {
        let (client, url, headers) = (target.client.clone(), url.clone(), target.headers.clone());
        tasks.spawn(async move {
            match client
                .get(&url)
                .headers(headers)
                .timeout(Duration::from_secs(10))
                .send()
                .await
            {
                // Drain, so the connection returns to the pool.
                Ok(r) => r.bytes().await.is_ok(),
                Err(_) => false,
            }
        });
    }
    bounded(opts, "opening connections", async {
        let mut open = 0;
        while let Some(ok) = tasks.join_next().await {
            open += usize::from(ok.unwrap_or(false));
        }
        open
    })
    .await
}
