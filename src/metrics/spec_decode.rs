//! Speculative decoding per request (`benchplan.speculative_decoding`): what each
//! request's drafts achieved, as the server reported it per request (vLLM's
//! `metrics.speculative_decoding`, vllm#48915; llama-server's `timings.draft_n` and
//! `draft_n_accepted`), beside the server-wide `/metrics` counters. Under speculative
//! decoding a request's TPOT depends on how much of its drafts were accepted, which
//! depends on the prompt: only the per-request acceptance explains a slow request.
//!
//! Per case, over the successful requests that carried the figures:
//!
//! - **acceptance rate**: accepted / drafted tokens, in percent (vLLM's
//!   `spec_decode_acceptance_rate` definition), pooled over the case and per request
//!   (mean, median, P10, P90: the low tail is the slow one);
//! - **acceptance length**: 1 + accepted / steps, the tokens one verification step
//!   yields (vLLM's definition; llama-server reports no steps, so none from it);
//! - the **acceptance histogram** summed: steps by how many drafted tokens they kept;
//! - **TPOT against acceptance**: the Pearson correlation of per-request TPOT with
//!   acceptance rate, and the mean TPOT per quarter of acceptance (0–25%, …);
//! - **the server-wide figure**: `/metrics`' acceptance rate over the same case, and
//!   whether the two disagree by more than [`DISAGREE_PP`] points (other traffic on
//!   the server, a restart, or a server whose two reports do not match).
//!
//! Server text: counts that cannot be true (no drafted tokens, more accepted than
//! drafted, a histogram whose steps or accepted tokens are not the counts) are not believed, and
//! counted as `rejected`.

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::record::RequestRecord;
use super::stats::{mean, percentile_sorted};

/// Percentage points between the per-request and the `/metrics` acceptance rate past
/// which the two are said to disagree.
pub const DISAGREE_PP: f64 = 5.0;

/// Per-request points kept for the chart at most (evenly spread over the case).
const MAX_POINTS: usize = 500;

/// A per-request figure's mean, median, P10 and P90.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub mean: f64,
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
}

impl Spread {
    fn of(mut v: Vec<f64>) -> Option<Spread> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Spread {
            mean: mean(&v),
            median: percentile_sorted(&v, 50.0),
            p10: percentile_sorted(&v, 10.0),
            p90: percentile_sorted(&v, 90.0),
        })
    }
}

/// Mean TPOT of the requests whose acceptance rate fell in one quarter.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Bucket {
    /// `0-25%`, `25-50%`, `50-75%`, `75-100%`.
    pub acceptance: &'static str,
    pub requests: u64,
    pub mean_tpot_ms: Option<f64>,
}

/// A case's speculative decoding.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecDecodeFigures {
    /// Requests whose figures were read, and those not believed.
    pub requests: u64,
    pub rejected: u64,
    /// `vllm` (`metrics.speculative_decoding`), `llama` (`timings.draft_*`) or `mixed`.
    pub source: &'static str,
    pub drafted_tokens: u64,
    pub accepted_tokens: u64,
    /// Pooled: accepted / drafted, percent.
    pub acceptance_rate: f64,
    /// Pooled: 1 + accepted / steps, over the requests that reported steps.
    pub acceptance_length: Option<f64>,
    pub rate: Option<Spread>,
    pub length: Option<Spread>,
    pub acceptance_histogram: Vec<u64>,
    /// Pearson's r of per-request TPOT on acceptance rate (3 requests or more, both
    /// varying).
    pub tpot_correlation: Option<f64>,
    pub tpot_by_acceptance: Vec<Bucket>,
    /// `/metrics`' acceptance rate over the case (percent), once compared.
    pub server_metrics_acceptance_rate: Option<f64>,
    pub disagrees_with_server_metrics: bool,
    /// (acceptance rate %, TPOT ms) per request, at most [`MAX_POINTS`].
    pub points: Vec<(f64, f64)>,
}

impl SpecDecodeFigures {
    /// Of the successful requests `ok` and their output token counts; None when none
    /// carried speculative-decoding figures.
    pub fn of(ok: &[&RequestRecord], outputs: &[u64]) -> Option<SpecDecodeFigures> {
        let mut f = SpecDecodeFigures {
            requests: 0,
            rejected: 0,
            source: "vllm",
            drafted_tokens: 0,
            accepted_tokens: 0,
            acceptance_rate: 0.0,
            acceptance_length: None,
            rate: None,
            length: None,
            acceptance_histogram: Vec::new(),
            tpot_correlation: None,
            tpot_by_acceptance: Vec::new(),
            server_metrics_acceptance_rate: None,
            disagrees_with_server_metrics: false,
            points: Vec::new(),
        };
        let (mut rates, mut lengths, mut pairs) = (vec![], vec![], vec![]);
        let (mut steps, mut accepted_with_steps) = (0u64, 0u64);
        let (mut vllm, mut llama) = (0u64, 0u64);
        let mut seen = false;
        for (r, &output) in ok.iter().zip(outputs) {
            let Some(sp) = &r.sample.spec else { continue };
            seen = true;
            // The histogram's steps are the step count, and its accepted tokens
            // (index × steps) the accepted count.
            let hist_steps = sp.histogram.iter().try_fold(0u64, |a, n| a.checked_add(*n));
            let hist_accepted = sp
                .histogram
                .iter()
                .enumerate()
                .try_fold(0u64, |a, (j, n)| a.checked_add((j as u64).checked_mul(*n)?));
            let believable = sp.drafted > 0
                && sp.accepted <= sp.drafted
                && sp.steps.is_none_or(|n| n > 0 && n <= sp.drafted)
                && (sp.histogram.is_empty()
                    || (hist_steps == sp.steps && hist_accepted == Some(sp.accepted)));
            if !believable {
                f.rejected += 1;
                continue;
            }
            f.requests += 1;
            f.drafted_tokens += sp.drafted;
            f.accepted_tokens += sp.accepted;
            let rate = sp.accepted as f64 / sp.drafted as f64 * 100.0;
            rates.push(rate);
            match sp.steps {
                Some(n) => {
                    vllm += 1;
                    steps += n;
                    accepted_with_steps += sp.accepted;
                    lengths.push(1.0 + sp.accepted as f64 / n as f64);
                }
                None => llama += 1,
            }
            if f.acceptance_histogram.len() < sp.histogram.len() {
                f.acceptance_histogram.resize(sp.histogram.len(), 0);
            }
            for (sum, n) in f.acceptance_histogram.iter_mut().zip(&sp.histogram) {
                *sum += n;
            }
            // vLLM's TPOT of the request: its decode time over its later tokens.
            if output > 1 {
                let s = &r.sample;
                pairs.push((rate, (s.latency - s.ttft) / (output - 1) as f64 * 1e3));
            }
        }
        if !seen {
            return None;
        }
        f.source = match (vllm, llama) {
            (_, 0) => "vllm",
            (0, _) => "llama",
            _ => "mixed",
        };
        if f.drafted_tokens > 0 {
            f.acceptance_rate = f.accepted_tokens as f64 / f.drafted_tokens as f64 * 100.0;
        }
        f.acceptance_length = (steps > 0).then(|| 1.0 + accepted_with_steps as f64 / steps as f64);
        f.rate = Spread::of(rates);
        f.length = Spread::of(lengths);
        f.tpot_correlation = pearson(&pairs);
        f.tpot_by_acceptance = ["0-25%", "25-50%", "50-75%", "75-100%"]
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let tpots: Vec<f64> = pairs
                    .iter()
                    .filter(|(rate, _)| quarter(*rate) == i)
                    .map(|p| p.1)
                    .collect();
                Bucket {
                    acceptance: name,
                    requests: tpots.len() as u64,
                    mean_tpot_ms: (!tpots.is_empty()).then(|| mean(&tpots)),
                }
            })
            .collect();
        let step = pairs.len().div_ceil(MAX_POINTS).max(1);
        f.points = pairs.iter().step_by(step).copied().collect();
        Some(f)
    }

    /// Sets the server-wide acceptance rate (percent, from `/metrics` over the case)
    /// and whether the per-request one disagrees with it.
    pub fn compare(&mut self, server_wide: Option<f64>) {
        self.server_metrics_acceptance_rate = server_wide;
        self.disagrees_with_server_metrics = self.requests > 0
            && server_wide.is_some_and(|w| (w - self.acceptance_rate).abs() > DISAGREE_PP);
    }

    /// What the console and the report warn about.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.rejected > 0 {
            w.push(format!(
                "{} request(s) reported speculative-decoding counts that cannot be true (no drafted tokens, more accepted than drafted, or a histogram that is not their steps): not used",
                self.rejected
            ));
        }
        if let (true, Some(wide)) = (
            self.disagrees_with_server_metrics,
            self.server_metrics_acceptance_rate,
        ) {
            w.push(format!(
                "the requests' own speculative decoding says {:.1}% of drafted tokens were accepted, the server's /metrics {wide:.1}% over the same case: other traffic on the server, a restart, or reports that do not match",
                self.acceptance_rate
            ));
        }
        w
    }
}

/// 0 to 3: the quarter of 0–100% a rate falls in (100% in the last).
fn quarter(rate: f64) -> usize {
    ((rate / 25.0).floor().max(0.0) as usize).min(3)
}

/// Pearson's r of (x, y); None under three pairs or when either does not vary.
fn pearson(pairs: &[(f64, f64)]) -> Option<f64> {
    if pairs.len() < 3 {
        return None;
    }
    let n = pairs.len() as f64;
    let (mx, my) = (
        pairs.iter().map(|p| p.0).sum::<f64>() / n,
        pairs.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (x, y) in pairs {
        sxy += (x - mx) * (y - my);
        sxx += (x - mx).powi(2);
        syy += (y - my).powi(2);
    }
    let r = sxy / (sxx * syy).sqrt();
    r.is_finite().then_some(r)
}

impl Serialize for SpecDecodeFigures {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("requests", &self.requests)?;
        m.serialize_entry("rejected", &self.rejected)?;
        m.serialize_entry("spec_source", self.source)?;
        m.serialize_entry("drafted_tokens", &self.drafted_tokens)?;
        m.serialize_entry("accepted_tokens", &self.accepted_tokens)?;
        m.serialize_entry("acceptance_rate", &self.acceptance_rate)?;
        m.serialize_entry("acceptance_length", &self.acceptance_length)?;
        for (name, spread) in [
            ("acceptance_rate", &self.rate),
            ("acceptance_length", &self.length),
        ] {
            if let Some(x) = spread {
                for (stat, v) in [
                    ("mean", x.mean),
                    ("median", x.median),
                    ("p10", x.p10),
                    ("p90", x.p90),
                ] {
                    m.serialize_entry(&format!("{stat}_{name}"), &v)?;
                }
            }
        }
        m.serialize_entry("acceptance_histogram", &self.acceptance_histogram)?;
        m.serialize_entry("tpot_acceptance_correlation", &self.tpot_correlation)?;
        m.serialize_entry("tpot_by_acceptance", &self.tpot_by_acceptance)?;
        m.serialize_entry(
            "server_metrics_acceptance_rate",
            &self.server_metrics_acceptance_rate,
        )?;
        m.serialize_entry(
            "disagrees_with_server_metrics",
            &self.disagrees_with_server_metrics,
        )?;
        let (x, y): (Vec<f64>, Vec<f64>) = self.points.iter().copied().unzip();
        m.serialize_entry(
            "per_request",
            &serde_json::json!({"acceptance_rate": x, "tpot_ms": y}),
        )?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::sample::{Sample, SpecSample};

    fn record(tpot_ms: f64, spec: Option<SpecSample>) -> RequestRecord {
        RequestRecord {
            sample: Sample {
                success: true,
                ttft: 0.0,
                // 11 output tokens: 10 gaps.
                latency: tpot_ms * 10.0 / 1e3,
                spec,
                ..Sample::default()
            },
            ..RequestRecord::streamed(0, 0.0, 0.0, &[], None)
        }
    }

    fn vllm(steps: u64, drafted: u64, accepted: u64, histogram: &[u64]) -> Option<SpecSample> {
        Some(SpecSample {
            steps: Some(steps),
            drafted,
            accepted,
            histogram: histogram.to_vec(),
        })
    }

    /// By hand, k = 2: request A 4 steps, 8 drafted, 6 accepted (histogram 0,2,2: 2
    /// steps kept 1, 2 kept 2), TPOT 5 ms; B 4 steps, 8 drafted, 2 accepted
    /// (2,2,0), TPOT 9 ms; C from llama-server, 10 drafted, 5 accepted, TPOT 7 ms.
    #[test]
    fn acceptance_is_accepted_over_drafted_and_slow_requests_are_the_low_acceptance_ones() {
        let a = record(5.0, vllm(4, 8, 6, &[0, 2, 2]));
        let b = record(9.0, vllm(4, 8, 2, &[2, 2, 0]));
        let c = record(
            7.0,
            Some(SpecSample {
                steps: None,
                drafted: 10,
                accepted: 5,
                histogram: vec![],
            }),
        );
        let none = record(6.0, None);
        let ok = [&a, &b, &c, &none];
        let mut f = SpecDecodeFigures::of(&ok, &[11; 4]).unwrap();
        assert_eq!((f.requests, f.rejected, f.source), (3, 0, "mixed"));
        assert_eq!((f.drafted_tokens, f.accepted_tokens), (26, 13));
        assert!((f.acceptance_rate - 50.0).abs() < 1e-9);
        // 1 + 8 accepted over 8 steps (llama's request has no steps).
        assert_eq!(f.acceptance_length, Some(2.0));
        assert_eq!(f.acceptance_histogram, vec![2, 4, 2]);
        let rate = f.rate.unwrap();
        assert!((rate.median - 50.0).abs() < 1e-9 && (rate.mean - 50.0).abs() < 1e-9);
        // Rates 75, 25, 50 against TPOTs 5, 9, 7: a perfect negative line.
        assert!((f.tpot_correlation.unwrap() + 1.0).abs() < 1e-9);
        let buckets: Vec<_> = f.tpot_by_acceptance.iter().map(|b| b.requests).collect();
        assert_eq!(buckets, vec![0, 1, 1, 1]);
        assert!((f.tpot_by_acceptance[3].mean_tpot_ms.unwrap() - 5.0).abs() < 1e-9);
        f.compare(Some(52.0));
        assert!(!f.disagrees_with_server_metrics);
        f.compare(Some(70.0));
        assert!(f.disagrees_with_server_metrics);
        assert_eq!(f.warnings().len(), 1);
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["median_acceptance_rate"], 50.0);
        assert_eq!(v["per_request"]["tpot_ms"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn counts_that_cannot_be_true_are_counted_not_used() {
        let bad = [
            record(5.0, vllm(4, 0, 0, &[])),
            record(5.0, vllm(4, 8, 9, &[])),
            record(5.0, vllm(0, 8, 2, &[])),
            record(5.0, vllm(4, 8, 2, &[1, 1])),
            // Four steps, but 0·1 + 1·2 + 2·1 = 4 accepted, not 2.
            record(5.0, vllm(4, 8, 2, &[1, 2, 1])),
        ];
        let ok: Vec<&RequestRecord> = bad.iter().collect();
        let f = SpecDecodeFigures::of(&ok, &[11; 5]).unwrap();
        assert_eq!((f.requests, f.rejected), (0, 5));
        assert_eq!(f.acceptance_length, None);
        assert_eq!(f.warnings().len(), 1);
        assert_eq!(SpecDecodeFigures::of(&ok[..0], &[]), None);
    }
}
