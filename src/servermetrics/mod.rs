//! The server's own view of a case: its Prometheus `/metrics` scraped before, during
//! and after the measured requests ([`scrape`]), parsed ([`parse`]) and mapped to one
//! vocabulary for vLLM, SGLang and TGI ([`vocab`]). What a case gets is a
//! [`ServerMetrics`]: counter deltas (tokens, prefix-cache queries and hits,
//! preemptions, successes, speculative decoding), gauge means, maxima and time series
//! (running, waiting, KV-cache use), and for a server of unknown names its raw series.
//! vLLM's `spec_decode_*` result keys are computed from it as vLLM computes them.

pub mod parse;
pub mod scrape;
pub mod vocab;

use indexmap::IndexMap;
use serde_json::{Map, Value, json};

use parse::{Kind, Series};
use scrape::Tick;
pub use scrape::{Running, Source};
use vocab::{COUNTERS, GAUGES, Server};

/// The gauges sampled while the measured requests ran.
#[derive(Debug, Clone, Default)]
pub(super) struct GaugeSamples(pub(super) Vec<Tick>);

/// Mean and maximum of a gauge over the scrapes during a case.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaugeStats {
    pub mean: f64,
    pub max: f64,
}

fn stats(vals: impl Iterator<Item = f64>) -> Option<GaugeStats> {
    let (mut n, mut sum, mut max) = (0usize, 0.0, f64::NEG_INFINITY);
    for v in vals {
        n += 1;
        sum += v;
        max = max.max(v);
    }
    (n > 0).then(|| GaugeStats {
        mean: sum / n as f64,
        max,
    })
}

/// Speculative decoding over the case, as vLLM's `calculate_spec_decode_stats`.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecDecode {
    pub acceptance_rate: f64,
    pub acceptance_length: f64,
    pub num_drafts: u64,
    pub draft_tokens: u64,
    pub accepted_tokens: u64,
    pub per_position_acceptance_rates: Vec<f64>,
}

/// What the server said about one case.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerMetrics {
    pub server: Server,
    pub url: String,
    pub interval_s: f64,
    /// Pages read (before, during, after).
    pub scrapes: u64,
    pub failed_scrapes: u64,
    pub first_error: Option<String>,
    /// Vocabulary counters: after minus before (only those the server has).
    pub counters: IndexMap<&'static str, f64>,
    /// A counter went down (the server restarted): its delta is its value after.
    pub counter_reset: bool,
    /// vLLM's accepted tokens per draft position, differenced.
    pub accepted_per_position: Vec<f64>,
    pub gauges: IndexMap<&'static str, GaugeStats>,
    /// Seconds from the first measured request, one per scrape during the case.
    pub t: Vec<f64>,
    /// Per vocabulary gauge, its value at each of `t` (None: not on that page).
    pub series: IndexMap<&'static str, Vec<Option<f64>>>,
    /// An unknown server: every counter's delta and every gauge's mean and max.
    pub raw: Option<(IndexMap<String, f64>, IndexMap<String, GaugeStats>)>,
    /// The KV cache's capacity in tokens: vLLM's `cache_config_info` labels
    /// `num_gpu_blocks` × `block_size`, when the page has them.
    pub kv_capacity_tokens: Option<u64>,
}

/// `vllm:cache_config_info{block_size="16",num_gpu_blocks="1024",…} 1` → 16384.
pub fn kv_capacity_tokens(page: &[Series]) -> Option<u64> {
    let s = page.iter().find(|s| s.name == "vllm:cache_config_info")?;
    let n = |k: &str| s.label(k)?.parse::<u64>().ok();
    Some(n("num_gpu_blocks")? * n("block_size")?)
}

fn delta(before: f64, after: f64, reset: &mut bool) -> f64 {
    if after < before {
        *reset = true;
        after
    } else {
        after - before
    }
}

impl ServerMetrics {
    pub(super) fn from_scrapes(
        src: &Source,
        before: Option<Vec<Series>>,
        after: Option<Vec<Series>>,
        during: GaugeSamples,
        scrapes: u64,
        failed_scrapes: u64,
        first_error: Option<String>,
    ) -> ServerMetrics {
        let ticks = during.0;
        let after_page = after.as_deref();
        let server = after_page
            .or(before.as_deref())
            .map_or(Server::Unknown, Server::detect);
        let mut counter_reset = false;
        let mut counters = IndexMap::new();
        let mut accepted_per_position = Vec::new();
        let mut raw = None;
        if let (Some(b), Some(a)) = (before.as_deref(), after_page) {
            for (name, series) in COUNTERS {
                // A series first seen after the case started at 0 (servers create
                // label sets lazily: vLLM's spec-decode counters, a new finish reason).
                if let Some(y) = vocab::total(a, series) {
                    let x = vocab::total(b, series).unwrap_or(0.0);
                    counters.insert(*name, delta(x, y, &mut counter_reset));
                }
            }
            let (pb, pa) = (vocab::per_position(b), vocab::per_position(a));
            accepted_per_position = pa
                .iter()
                .enumerate()
                .map(|(i, y)| delta(pb.get(i).copied().unwrap_or(0.0), *y, &mut counter_reset))
                .collect();
            if server == Server::Unknown {
                let old: IndexMap<String, f64> = b
                    .iter()
                    .filter(|s| s.kind == Kind::Counter)
                    .map(|s| (s.key(), s.value))
                    .collect();
                let c = a
                    .iter()
                    .filter(|s| s.kind == Kind::Counter)
                    .map(|s| {
                        let k = s.key();
                        let d = delta(
                            old.get(&k).copied().unwrap_or(0.0),
                            s.value,
                            &mut counter_reset,
                        );
                        (k, d)
                    })
                    .collect();
                let mut keys: Vec<&String> = ticks
                    .iter()
                    .flat_map(|t| t.raw.iter().map(|(k, _)| k))
                    .collect();
                keys.sort();
                keys.dedup();
                let g = keys
                    .into_iter()
                    .filter_map(|k| {
                        let vals = ticks
                            .iter()
                            .filter_map(|t| t.raw.iter().find(|(kk, _)| kk == k).map(|(_, v)| *v));
                        stats(vals).map(|s| (k.clone(), s))
                    })
                    .collect();
                raw = Some((c, g));
            }
        }
        let mut gauges = IndexMap::new();
        let mut series = IndexMap::new();
        for (i, g) in GAUGES.iter().enumerate() {
            let vals: Vec<Option<f64>> = ticks.iter().map(|t| t.gauges[i]).collect();
            if vals.iter().all(Option::is_none) {
                continue;
            }
            if let Some(s) = stats(vals.iter().flatten().copied()) {
                gauges.insert(g.name, s);
            }
            series.insert(g.name, vals);
        }
        ServerMetrics {
            server,
            url: crate::redact::url(&src.url),
            interval_s: src.interval.as_secs_f64(),
            scrapes,
            failed_scrapes,
            first_error,
            counters,
            counter_reset,
            accepted_per_position,
            gauges,
            t: ticks.iter().map(|t| t.t).collect(),
            series,
            raw,
            kv_capacity_tokens: after_page
                .or(before.as_deref())
                .and_then(kv_capacity_tokens),
        }
    }

    /// Prefix-cache hits over queries, in percent, when the server counts both.
    pub fn prefix_cache_hit_rate_pct(&self) -> Option<f64> {
        let q = *self.counters.get("prefix_cache_queries")?;
        let h = *self.counters.get("prefix_cache_hits")?;
        (q > 0.0).then(|| h / q * 100.0)
    }

    /// vLLM's speculative-decoding stats: only when draft tokens moved during the case.
    pub fn spec_decode(&self) -> Option<SpecDecode> {
        let c = |k: &str| self.counters.get(k).copied().unwrap_or(0.0);
        let (drafts, draft_tokens, accepted) = (
            c("spec_decode_drafts"),
            c("spec_decode_draft_tokens"),
            c("spec_decode_accepted_tokens"),
        );
        if draft_tokens <= 0.0 {
            return None;
        }
        Some(SpecDecode {
            acceptance_rate: accepted / draft_tokens * 100.0,
            acceptance_length: if drafts > 0.0 {
                1.0 + accepted / drafts
            } else {
                0.0
            },
            num_drafts: drafts as u64,
            draft_tokens: draft_tokens as u64,
            accepted_tokens: accepted as u64,
            per_position_acceptance_rates: if drafts > 0.0 {
                self.accepted_per_position
                    .iter()
                    .map(|a| a / drafts)
                    .collect()
            } else {
                Vec::new()
            },
        })
    }

    /// The result's `server_metrics` block.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("server".into(), json!(self.server.as_str()));
        o.insert("url".into(), json!(self.url));
        o.insert("interval_s".into(), json!(self.interval_s));
        o.insert("scrapes".into(), json!(self.scrapes));
        o.insert("failed_scrapes".into(), json!(self.failed_scrapes));
        o.insert("first_error".into(), json!(self.first_error));
        o.insert("counters".into(), json!(self.counters));
        o.insert("counter_reset".into(), json!(self.counter_reset));
        if !self.accepted_per_position.is_empty() {
            o.insert(
                "spec_decode_accepted_per_position".into(),
                json!(self.accepted_per_position),
            );
        }
        o.insert(
            "prefix_cache_hit_rate_pct".into(),
            json!(self.prefix_cache_hit_rate_pct()),
        );
        o.insert("kv_capacity_tokens".into(), json!(self.kv_capacity_tokens));
        let g: Map<String, Value> = self
            .gauges
            .iter()
            .map(|(k, s)| (k.to_string(), json!({"mean": s.mean, "max": s.max})))
            .collect();
        o.insert("gauges".into(), Value::Object(g));
        let mut s = Map::new();
        s.insert("t".into(), json!(self.t));
        for (k, v) in &self.series {
            s.insert(k.to_string(), json!(v));
        }
        o.insert("series".into(), Value::Object(s));
        if let Some((c, g)) = &self.raw {
            let g: Map<String, Value> = g
                .iter()
                .map(|(k, s)| (k.clone(), json!({"mean": s.mean, "max": s.max})))
                .collect();
            o.insert("raw".into(), json!({"counters": c, "gauges": g}));
        }
        Value::Object(o)
    }
}

// Summing up is the parent's: the scraper knows pages and ticks, not the summary.
impl Running {
    /// Stops sampling, takes the page after the case and sums up.
    pub async fn finish(self) -> ServerMetrics {
        let _ = self.stop.send(true);
        let (ticks, mut failed, mut first_error) = self.task.await.unwrap_or((Vec::new(), 0, None));
        let after = self.source.fetch().await;
        let mut note = |r: &Result<Vec<Series>, String>| {
            if let Err(e) = r {
                failed += 1;
                first_error.get_or_insert(e.clone());
            }
        };
        note(&self.before);
        note(&after);
        let scrapes =
            ticks.len() as u64 + u64::from(self.before.is_ok()) + u64::from(after.is_ok());
        ServerMetrics::from_scrapes(
            &self.source,
            self.before.ok(),
            after.ok(),
            GaugeSamples(ticks),
            scrapes,
            failed,
            first_error,
        )
    }
}

#[cfg(test)]
mod tests;
