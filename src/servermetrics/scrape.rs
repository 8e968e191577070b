//! Scraping a service's `/metrics` around and during one case: a page before the
//! measured requests, one every `scrape_interval` while they run, and one after.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use tokio::sync::watch;

use super::parse::{Kind, Series, parse};
use super::vocab::{GAUGES, gauge};

/// Where and how often to scrape one service.
#[derive(Debug, Clone)]
pub struct Source {
    pub url: String,
    pub client: reqwest::Client,
    pub headers: HeaderMap,
    pub interval: Duration,
}

/// One scrape during the case: when (seconds from the first measured request) and
/// the vocabulary's gauges, plus every raw gauge for an unknown server.
#[derive(Debug, Clone)]
pub(crate) struct Tick {
    pub t: f64,
    pub gauges: Vec<Option<f64>>,
    pub raw: Vec<(String, f64)>,
}

impl Source {
    /// The page `spec.path` under `base_url`, asked for with `client` and `headers`
    /// (the service's own, so an authenticated server answers).
    pub fn new(
        base_url: &crate::base_url::BaseUrl,
        client: &reqwest::Client,
        headers: &HeaderMap,
        spec: &crate::plan::server_metrics::ServerMetricsSpec,
    ) -> Source {
        Source {
            url: base_url.join(&spec.path),
            client: client.clone(),
            headers: headers.clone(),
            // The planner refuses 0; this keeps a timer from spinning on it regardless.
            interval: spec.scrape_interval.0.max(Duration::from_millis(10)),
        }
    }

    /// One page, parsed. Errors say what went wrong (never fatal to a case).
    pub async fn fetch(&self) -> Result<Vec<Series>, String> {
        let resp = self
            .client
            .get(&self.url)
            .headers(self.headers.clone())
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .map_err(|e| format!("GET {}: {e}", crate::redact::url(&self.url)))?;
        if !resp.status().is_success() {
            return Err(format!(
                "GET {}: HTTP {}",
                crate::redact::url(&self.url),
                resp.status().as_u16()
            ));
        }
        let body = resp
            .bytes()
            .await
            .map_err(|e| format!("GET {}: {e}", crate::redact::url(&self.url)))?;
        parse(&String::from_utf8_lossy(&body))
    }

    /// Starts sampling, given the page taken before the measured requests; `started`
    /// is the instant the case's times count from.
    pub fn sample(
        self: &Arc<Self>,
        before: Result<Vec<Series>, String>,
        started: Instant,
    ) -> Running {
        let (stop_tx, mut stop_rx) = watch::channel(false);
        let src = self.clone();
        let task = tokio::spawn(async move {
            let mut ticks = Vec::new();
            let mut failed = 0u64;
            let mut first_error = None;
            let mut every = tokio::time::interval(src.interval);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = every.tick() => {}
                    _ = stop_rx.changed() => break,
                }
                let t = started.elapsed().as_secs_f64();
                match src.fetch().await {
                    Ok(page) => ticks.push(tick(t, &page)),
                    Err(e) => {
                        failed += 1;
                        first_error.get_or_insert(e);
                    }
                }
            }
            (ticks, failed, first_error)
        });
        Running {
            source: self.clone(),
            before,
            stop: stop_tx,
            task,
        }
    }
}

pub(super) fn tick(t: f64, page: &[Series]) -> Tick {
    Tick {
        t,
        gauges: GAUGES.iter().map(|g| gauge(page, g)).collect(),
        raw: page
            .iter()
            .filter(|s| s.kind == Kind::Gauge)
            .map(|s| (s.key(), s.value))
            .collect(),
    }
}

/// A case being scraped.
pub struct Running {
    pub(super) source: Arc<Source>,
    pub(super) before: Result<Vec<Series>, String>,
    pub(super) stop: watch::Sender<bool>,
    pub(super) task: tokio::task::JoinHandle<(Vec<Tick>, u64, Option<String>)>,
}
