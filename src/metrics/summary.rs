//! The case summary: vLLM's `calculate_metrics` (reference §2.2) over the records.
//!
//! Only successful requests contribute to latencies and token totals; a failed one
//! counts in `failed` and by error kind. TPOT is taken only over outputs longer than
//! one token, but goodput counts shorter outputs as TPOT 0, as vLLM does. ITL
//! samples are pooled over all requests. Output tokens come from `usage`, else the
//! tokenizer, else 1, and the summary says which.

use indexmap::IndexMap;

use super::hist;
use super::record::RequestRecord;
use super::stats::{mean, percentile_sorted, std};
use crate::plan::{CaseParams, Metric};
use crate::tokenizer::TokenModel;

/// Mean, median, std and percentiles of one metric, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyStats {
    pub metric: Metric,
    pub mean: f64,
    pub median: f64,
    pub std: f64,
    /// (percentile, value)
    pub percentiles: Vec<(f64, f64)>,
}

impl LatencyStats {
    /// Stats of values given in seconds, computed as vLLM does: numpy over the seconds,
    /// then × 1000 (the order matters in the last bits).
    pub fn of(metric: Metric, values_s: &[f64], percentiles: &[f64]) -> LatencyStats {
        let mut sorted = values_s.to_vec();
        sorted.sort_by(f64::total_cmp);
        LatencyStats {
            metric,
            mean: mean(values_s) * 1e3,
            median: percentile_sorted(&sorted, 50.0) * 1e3,
            std: std(values_s) * 1e3,
            percentiles: percentiles
                .iter()
                .map(|p| (*p, percentile_sorted(&sorted, *p) * 1e3))
                .collect(),
        }
    }
}

/// Where output token counts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSource {
    Usage,
    Tokenizer,
    /// Neither usage nor a tokenizer: 1 per request (vLLM's last resort).
    One,
    Mixed,
}

impl TokenSource {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenSource::Usage => "usage",
            TokenSource::Tokenizer => "tokenizer",
            TokenSource::One => "one_per_request",
            TokenSource::Mixed => "mixed",
        }
    }
}

/// How the requests got their connections (benchplan's client only).
#[derive(Debug, Clone, Default)]
pub struct Connections {
    /// Opened before the measured requests.
    pub prewarmed: u64,
    /// Measured requests that had to open one (their TTFT and E2EL include it).
    pub connects_in_requests: u64,
    /// How long those connects took.
    pub connect: Option<LatencyStats>,
}

/// One whole request rate a ramp-up reached (vLLM's `rps_change_events`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpsChangeEvent {
    pub rps: i64,
    /// `datetime.isoformat()` of the release that reached it.
    pub timestamp: String,
}

/// Everything a case measured.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub pooling: bool,
    /// Output could be counted with a tokenizer (vLLM prints token totals and reports
    /// TTFT, TPOT and ITL only then).
    pub has_tokenizer: bool,
    pub duration: f64,
    pub completed: u64,
    pub failed: u64,
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    pub total_input_sequences: u64,
    pub request_throughput: f64,
    pub request_goodput: Option<f64>,
    pub output_throughput: f64,
    pub total_token_throughput: f64,
    pub input_sequence_throughput: f64,
    pub max_output_tokens_per_s: f64,
    /// vLLM's peak concurrency: the fullest one-second bucket (see [`peak_concurrency`]).
    pub max_concurrent_requests: u64,
    /// The exact peak of successful requests in flight at one instant.
    pub max_concurrent_requests_exact: u64,
    /// Σ input audio seconds of successful requests / duration (ASR).
    pub rtfx: f64,
    pub stats: Vec<LatencyStats>,
    // Per request, in request order, as vLLM lists them (a failure keeps what it
    // measured before failing, as vLLM's outputs do).
    pub input_lens: Vec<u64>,
    pub output_lens: Vec<u64>,
    pub ttfts: Vec<f64>,
    pub itls: Vec<Vec<f64>>,
    pub latencies: Vec<f64>,
    pub start_times: Vec<f64>,
    pub queue_times: Vec<f64>,
    pub generated_texts: Vec<String>,
    pub errors: Vec<String>,
    /// Token events each request streamed (beside `output_lens`, the server's usage
    /// where it sent one, so the two can be compared request by request).
    pub token_events: Vec<u32>,
    /// The server's own queue time and TTFT per request (seconds), when any response
    /// carried them; None where one did not.
    pub server_queue_times: Option<Vec<Option<f64>>>,
    pub server_ttfts: Option<Vec<Option<f64>>>,
    // benchplan's additions.
    pub errors_by_kind: IndexMap<String, u64>,
    pub first_errors: IndexMap<String, String>,
    pub token_source: Option<TokenSource>,
    pub schedule_lag: Option<LatencyStats>,
    pub client_queue: Option<LatencyStats>,
    pub mean_tokens_per_chunk: f64,
    pub streams_without_done: u64,
    pub cached_tokens: u64,
    /// Metric name → HDR histogram of its samples (µs); the result file stores it
    /// encoded (`results::vllm_json`, `metrics::hist::encode`).
    pub histograms: IndexMap<String, hdrhistogram::Histogram<u64>>,
    pub connections: Connections,
    /// Ramp-up runs: the whole rates reached, as vLLM records them.
    pub rps_change_events: Vec<RpsChangeEvent>,
    /// Speculative decoding over the run, from the server's counters (vLLM's keys).
    pub spec_decode: Option<crate::servermetrics::SpecDecode>,
    /// How token events arrived (see `checks`).
    pub delivery: super::checks::Delivery,
    /// Whether the server's token counts agree with its streams; short outputs.
    pub accounting: super::checks::TokenAccounting,
    /// An open-loop case's send rate against the one it asked for.
    pub load: Option<SendRate>,
    /// A reasoning model's time to its first token and to its answer, and its
    /// reasoning tokens (`benchplan.reasoning`); None when no request reasoned.
    pub reasoning: Option<super::reasoning::Reasoning>,
    /// The server's own TTFT and queue time beside the client's, and the gap between
    /// them (`benchplan.server_timings`); None when no response carried them.
    pub server_timings: Option<super::server_timings::ServerTimings>,
    /// Speculative decoding per request (`benchplan.speculative_decoding`); None when
    /// no response carried it.
    pub speculative: Option<super::spec_decode::SpecDecodeFigures>,
}

/// How fast an open-loop case's requests went out, against its schedule.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SendRate {
    /// `request_rate`, per second.
    pub asked: f64,
    /// The rate of the schedule drawn for it (Poisson or gamma gaps scatter it).
    pub scheduled: f64,
    /// The rate the requests actually went out at.
    pub sent: f64,
}

impl SendRate {
    /// Sends that fell this far behind the schedule did not give the case its load.
    pub const SHORT: f64 = 0.9;

    /// Of an open-loop run's records; None for a closed loop or under 10 requests.
    fn of(records: &[RequestRecord], params: &CaseParams) -> Option<SendRate> {
        let asked = params.request_rate.0;
        if !asked.is_finite() || records.len() < 10 {
            return None;
        }
        let rate = |t: &dyn Fn(&RequestRecord) -> f64| {
            let lo = records.iter().map(t).fold(f64::INFINITY, f64::min);
            let hi = records.iter().map(t).fold(f64::NEG_INFINITY, f64::max);
            (hi > lo).then(|| (records.len() - 1) as f64 / (hi - lo))
        };
        Some(SendRate {
            asked,
            scheduled: rate(&|r| r.scheduled)?,
            sent: rate(&|r| r.start)?,
        })
    }

    /// The warning when the sends fell behind the schedule.
    pub fn warning(&self, lag_p99_ms: Option<f64>, queue_p99_ms: Option<f64>) -> Option<String> {
        (self.sent < Self::SHORT * self.scheduled).then(|| {
            let mut why = Vec::new();
            if let Some(l) = lag_p99_ms {
                why.push(format!("schedule lag P99 {l:.0} ms"));
            }
            if let Some(q) = queue_p99_ms.filter(|q| *q > 0.0) {
                why.push(format!("client queue P99 {q:.0} ms behind the concurrency cap"));
            }
            format!(
                "the case did not get its load: asked {:.2} req/s (its schedule {:.2}), sent {:.2} req/s{}; a concurrency cap, an over-saturated server or a client that could not keep up held it back",
                self.asked,
                self.scheduled,
                self.sent,
                if why.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", why.join(", "))
                }
            )
        })
    }
}

impl Summary {
    pub fn success_rate(&self) -> f64 {
        let total = self.completed + self.failed;
        if total == 0 {
            0.0
        } else {
            self.completed as f64 / total as f64 * 100.0
        }
    }

    pub fn stat(&self, metric: Metric) -> Option<&LatencyStats> {
        self.stats.iter().find(|s| s.metric == metric)
    }

    /// What the console and the report warn about this case's numbers.
    pub fn warnings(&self) -> Vec<String> {
        let mut w: Vec<String> = self.delivery.warning().into_iter().collect();
        w.extend(self.accounting.warnings());
        w.extend(self.server_timings.iter().flat_map(|t| t.warnings()));
        w.extend(self.speculative.iter().flat_map(|f| f.warnings()));
        let p99 = |s: &Option<LatencyStats>| {
            s.as_ref().and_then(|s| {
                s.percentiles
                    .iter()
                    .find(|(p, _)| *p == 99.0)
                    .map(|(_, v)| *v)
            })
        };
        w.extend(
            self.load
                .and_then(|l| l.warning(p99(&self.schedule_lag), p99(&self.client_queue))),
        );
        w
    }
}

/// vLLM's 1-second buckets, relative to the earliest start of a successful request:
/// `int(ceil(max_end - min_start)) + 1` of them, a time going to `int(t - min_start)`.
struct Buckets {
    min_start: f64,
    counts: Vec<u64>,
}

impl Buckets {
    fn new(ok: &[&RequestRecord]) -> Option<Buckets> {
        let min_start = ok.iter().map(|r| r.start).min_by(f64::total_cmp)?;
        let max_end = ok
            .iter()
            .map(|r| r.start + r.sample.latency)
            .fold(f64::NEG_INFINITY, f64::max);
        let n = (max_end - min_start).ceil() as usize + 1;
        Some(Buckets {
            min_start,
            counts: vec![0; n],
        })
    }

    /// Python's `int(t - min_start)`: truncation toward zero.
    fn index(&self, t: f64) -> i64 {
        (t - self.min_start).trunc() as i64
    }

    fn add(&mut self, bucket: i64) {
        if let Some(slot) = usize::try_from(bucket)
            .ok()
            .and_then(|b| self.counts.get_mut(b))
        {
            *slot += 1;
        }
    }

    fn max(&self) -> u64 {
        self.counts.iter().copied().max().unwrap_or(0)
    }
}

/// vLLM's peak output rate: token events (one at `start + ttft`, then one per ITL gap,
/// accumulated left to right as vLLM adds them) in 1-second buckets; the fullest
/// bucket's count. It counts events (chunks), not tokens, as vLLM does.
fn max_output_tokens_per_s(ok: &[&RequestRecord]) -> f64 {
    let Some(mut b) = Buckets::new(ok) else {
        return 0.0;
    };
    for r in ok {
        let mut t = r.start + r.sample.ttft;
        b.add(b.index(t));
        for g in &r.sample.itl {
            t += g;
            b.add(b.index(t));
        }
    }
    b.max() as f64
}

/// vLLM 0.33's `max_concurrent_requests`: each successful request counts in every
/// 1-second bucket from `int(start - min_start)` to `int(start + latency - min_start)`
/// inclusive; the fullest bucket. Two requests that share a second count as two even
/// if they never overlap; [`exact_peak_concurrency`] is the instantaneous peak.
fn peak_concurrency(ok: &[&RequestRecord]) -> u64 {
    let Some(mut b) = Buckets::new(ok) else {
        return 0;
    };
    for r in ok {
        let (first, last) = (b.index(r.start), b.index(r.start + r.sample.latency));
        for k in first..=last {
            b.add(k);
        }
    }
    b.max()
}

/// Peak number of successful requests in flight: a sweep over [start, start + latency),
/// departures before arrivals at equal times.
fn exact_peak_concurrency(records: &[&RequestRecord]) -> u64 {
    let mut events: Vec<(f64, i64)> = Vec::with_capacity(records.len() * 2);
    for r in records {
        events.push((r.start, 1));
        events.push((r.start + r.sample.latency, -1));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut cur, mut peak) = (0i64, 0i64);
    for (_, d) in events {
        cur += d;
        peak = peak.max(cur);
    }
    peak as u64
}

/// A goodput limit in seconds as vLLM forms it: the SLO in milliseconds divided by
/// 1000 (so the same float rounding decides a request exactly at the limit).
fn slo_seconds(d: &crate::plan::units::Dur) -> f64 {
    d.0.as_nanos() as f64 / 1e6 / 1000.0
}

/// Computes the summary (vLLM's `calculate_metrics`, or `calculate_metrics_for_embeddings`
/// for pooling backends). `tokens` counts output text when a response has no usage;
/// without one, output counts fall back to 1 a request and, as in vLLM, TTFT, TPOT and
/// ITL statistics are not reported.
pub fn summarize(
    records: &[RequestRecord],
    duration: f64,
    params: &CaseParams,
    tokens: Option<&TokenModel>,
) -> Summary {
    let pooling = params.backend().is_pooling();
    let mut s = Summary {
        pooling,
        has_tokenizer: tokens.is_some(),
        duration,
        ..Summary::default()
    };
    let (mut ttfts, mut tpots, mut all_tpots, mut itls, mut e2els) =
        (vec![], vec![], vec![], vec![], vec![]);
    let (mut queue, mut e2el_q, mut lags) = (vec![], vec![], vec![]);
    // The first answer token's time; a request without channel information (a result
    // read back, vLLM's own) answered at its first token; one that only reasoned has none.
    let mut ttfos = vec![];
    // Requests counted by usage, by the tokenizer, as one token, and by their events
    // (usage that could not be true).
    let mut sources = (0u64, 0u64, 0u64, 0u64);
    let mut chunks = 0u64;
    let mut audio = 0.0;
    let mut ok: Vec<&RequestRecord> = Vec::new();
    let mut ok_outputs: Vec<u64> = Vec::new();
    let any_server_times = records
        .iter()
        .any(|r| r.sample.server_queue_time.is_some() || r.sample.server_ttft.is_some());
    let (mut server_queue, mut server_ttft) = (vec![], vec![]);
    for r in records {
        let o = &r.sample;
        s.start_times.push(r.start);
        s.queue_times.push(r.client_queue_time());
        s.ttfts.push(o.ttft);
        s.latencies.push(o.latency);
        s.itls.push(o.itl.clone());
        s.token_events.push(o.chunks);
        s.generated_texts.push(o.text.clone());
        s.errors.push(
            o.error
                .as_ref()
                .map_or_else(String::new, |e| e.message.clone()),
        );
        if any_server_times {
            server_queue.push(o.server_queue_time);
            server_ttft.push(o.server_ttft);
        }
        lags.push(r.schedule_lag());
        let input = o.usage_prompt.unwrap_or(r.prompt_len);
        s.input_lens.push(input);
        if !o.success {
            s.failed += 1;
            s.output_lens.push(0);
            if let Some(e) = &o.error {
                *s.errors_by_kind.entry(e.kind.clone()).or_insert(0) += 1;
                s.first_errors
                    .entry(e.kind.clone())
                    .or_insert_with(|| e.message.clone());
            }
            continue;
        }
        ok.push(r);
        s.completed += 1;
        // A server's usage is not trusted to fit: totals stop at u64::MAX (and say so).
        s.total_input_tokens = s.total_input_tokens.saturating_add(input);
        s.total_input_sequences = s.total_input_sequences.saturating_add(o.input_sequences);
        s.cached_tokens = s.cached_tokens.saturating_add(o.cached_tokens.unwrap_or(0));
        audio += o.input_audio_duration;
        if !pooling && !o.done {
            s.streams_without_done += 1;
        }
        let output = if pooling {
            0
        } else {
            match (o.usage_completion.filter(|n| *n > 0), tokens) {
                // Usage that cannot be true is not summed: the token events stand in
                // (`benchplan.token_accounting.corrected` counts these requests).
                (Some(n), _)
                    if super::checks::usage_impossible(
                        n,
                        u64::from(o.chunks),
                        r.expected_output_len,
                    ) =>
                {
                    sources.3 += 1;
                    u64::from(o.chunks)
                }
                (Some(n), _) => {
                    sources.0 += 1;
                    n
                }
                (None, Some(t)) => {
                    sources.1 += 1;
                    t.count(&o.text) as u64
                }
                (None, None) => {
                    sources.2 += 1;
                    1
                }
            }
        };
        s.output_lens.push(output);
        ok_outputs.push(output);
        s.total_output_tokens = s.total_output_tokens.saturating_add(output);
        chunks += u64::from(o.chunks);
        let tpot = if output > 1 {
            (o.latency - o.ttft) / (output - 1) as f64
        } else {
            0.0
        };
        if output > 1 {
            tpots.push(tpot);
        }
        all_tpots.push(tpot);
        itls.extend_from_slice(&o.itl);
        ttfts.push(o.ttft);
        match o.first_answer {
            Some(a) => ttfos.push(a),
            None if o.reasoning_events == 0 => ttfos.push(o.ttft),
            None => {}
        }
        e2els.push(o.latency);
        queue.push(r.client_queue_time());
        e2el_q.push(o.latency + r.client_queue_time());
    }
    if !pooling {
        s.reasoning = super::reasoning::Reasoning::of(&ok, &ok_outputs);
        s.server_timings = super::server_timings::ServerTimings::of(&ok);
        if params.server_timings == Some(true) && !ok.is_empty() {
            // Asked for: a block says so even when no response carried them.
            let t = s
                .server_timings
                .get_or_insert_with(super::server_timings::ServerTimings::none);
            t.asked = true;
        }
        s.speculative = super::spec_decode::SpecDecodeFigures::of(&ok, &ok_outputs);
        s.delivery = super::checks::Delivery::of(&ok);
        s.accounting = super::checks::TokenAccounting::of(
            &ok,
            &ok_outputs,
            params.ignore_eos == Some(true),
            tokens,
        );
        s.accounting.saturated = [s.total_input_tokens, s.total_output_tokens].contains(&u64::MAX);
    }
    if any_server_times {
        s.server_queue_times = Some(server_queue);
        s.server_ttfts = Some(server_ttft);
    }
    let d = if duration > 0.0 {
        duration
    } else {
        f64::INFINITY
    };
    s.request_throughput = s.completed as f64 / d;
    s.output_throughput = s.total_output_tokens as f64 / d;
    s.total_token_throughput =
        s.total_input_tokens.saturating_add(s.total_output_tokens) as f64 / d;
    s.input_sequence_throughput = s.total_input_sequences as f64 / d;
    s.rtfx = audio / d;
    if let Some(g) = &params.goodput {
        // A request is good when it meets every configured SLO (inclusive), as in DistServe.
        let limits = [g.ttft, g.tpot, g.e2el].map(|d| d.as_ref().map(slo_seconds));
        let good = (0..ttfts.len())
            .filter(|&i| {
                let vals = [ttfts[i], all_tpots[i], e2els[i]];
                limits
                    .iter()
                    .zip(vals)
                    .all(|(lim, v)| lim.is_none_or(|l| l >= v))
            })
            .count();
        s.request_goodput = Some(good as f64 / d);
    }
    if !pooling {
        s.max_output_tokens_per_s = max_output_tokens_per_s(&ok);
        s.max_concurrent_requests = peak_concurrency(&ok);
        s.token_source = Some(match sources {
            (_, 0, 0, 0) => TokenSource::Usage,
            (0, _, 0, 0) => TokenSource::Tokenizer,
            (0, 0, _, 0) => TokenSource::One,
            _ => TokenSource::Mixed,
        });
        s.mean_tokens_per_chunk = if chunks > 0 {
            s.total_output_tokens as f64 / chunks as f64
        } else {
            0.0
        };
    }
    s.max_concurrent_requests_exact = exact_peak_concurrency(&ok);
    let connects: Vec<f64> = records.iter().filter_map(|r| r.connect).collect();
    s.connections.connects_in_requests = connects.len() as u64;
    s.connections.connect = (!connects.is_empty())
        .then(|| LatencyStats::of(Metric::E2el, &connects, &[50.0, 99.0, 100.0]));

    let pcts = &params.metric_percentiles;
    // vLLM reports TTFT, TPOT and ITL only with a tokenizer (its output counts are
    // guesses without one).
    let token_metrics = !pooling && tokens.is_some();
    let mut metrics = params.percentile_metrics();
    // A reasoning case reports TTFO beside vLLM's TTFT (`mean_ttfo_ms`, …), so the
    // compare gate and the history can judge the answer's wait too.
    if s.reasoning.is_some() && !metrics.contains(&Metric::Ttfo) {
        metrics.push(Metric::Ttfo);
    }
    for m in metrics {
        let values: &[f64] = match m {
            Metric::Ttft if token_metrics => &ttfts,
            Metric::Ttfo if token_metrics => &ttfos,
            Metric::Tpot if token_metrics => &tpots,
            Metric::Itl if token_metrics => &itls,
            Metric::E2el => &e2els,
            // vLLM reports these only with a concurrency cap, and the second only at a finite rate.
            Metric::ClientQueueTime if params.max_concurrency.is_some() => &queue,
            Metric::E2elIncludingClientQueue
                if params.max_concurrency.is_some() && params.request_rate.is_finite() =>
            {
                &e2el_q
            }
            _ => continue,
        };
        s.stats.push(LatencyStats::of(m, values, pcts));
    }
    s.schedule_lag = Some(LatencyStats::of(Metric::E2el, &lags, &[50.0, 99.0, 100.0]));
    s.load = SendRate::of(records, params);
    s.client_queue = Some(LatencyStats::of(
        Metric::ClientQueueTime,
        &queue,
        &[50.0, 99.0, 100.0],
    ));
    let mut hists: Vec<(&str, &[f64])> = vec![("e2el", &e2els)];
    if !pooling {
        hists.extend([
            ("ttft", &ttfts[..]),
            ("tpot", &tpots[..]),
            ("itl", &itls[..]),
        ]);
        // TTFO's own samples, for the compare gate's p-value, where it is judged or
        // differs from TTFT.
        if s.reasoning.is_some() || params.percentile_metrics().contains(&Metric::Ttfo) {
            hists.push(("ttfo", &ttfos[..]));
        }
    }
    for (name, values) in hists {
        s.histograms
            .insert(name.to_string(), hist::from_seconds(values.iter().copied()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::sample::RequestError;
    use crate::plan::params::Goodput;
    use crate::plan::units::Dur;

    fn rec(i: usize, start: f64, ttft: f64, itl: &[f64], usage: Option<u64>) -> RequestRecord {
        RequestRecord {
            expected_output_len: 4,
            ..RequestRecord::streamed(i, start, ttft, itl, usage)
        }
    }

    /// Four requests computed by hand (numpy's linear percentiles, population std).
    #[test]
    fn a_hand_computed_sample() {
        let mut failed = rec(3, 0.3, 0.0, &[], None);
        failed.sample.success = false;
        failed.sample.error = Some(RequestError {
            kind: "http_500".into(),
            message: "boom".into(),
        });
        let records = vec![
            rec(0, 0.0, 0.1, &[0.05, 0.05, 0.05], Some(4)), // tpot (0.25 - 0.1) / 3 = 0.05
            rec(1, 0.1, 0.2, &[0.1], Some(2)),              // tpot 0.1
            rec(2, 0.2, 0.3, &[], Some(1)), // one token: no TPOT sample, TPOT 0 for goodput
            failed,
        ];
        let params = CaseParams {
            metric_percentiles: vec![50.0, 99.0],
            percentile_metrics: Some(vec![Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el]),
            goodput: Some(Goodput {
                ttft: Some(Dur::from_secs_f64(0.2)),
                tpot: Some(Dur::from_secs_f64(0.06)),
                e2el: None,
            }),
            ..CaseParams::default()
        };
        // A tokenizer is present (vLLM reports TTFT, TPOT and ITL only then); usage
        // gives every output count.
        let s = summarize(&records, 1.0, &params, Some(&TokenModel::Builtin));
        assert_eq!(
            (
                s.completed,
                s.failed,
                s.total_output_tokens,
                s.total_input_tokens
            ),
            (3, 1, 7, 30)
        );
        assert_eq!(s.errors_by_kind.get("http_500"), Some(&1));
        assert_eq!(s.request_throughput, 3.0);
        // Only request 0 meets TTFT <= 200 ms and TPOT <= 60 ms.
        assert_eq!(s.request_goodput, Some(1.0));
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let ttft = s.stat(Metric::Ttft).unwrap();
        assert!(close(ttft.mean, 200.0) && close(ttft.median, 200.0));
        assert!(close(ttft.std, (20_000.0f64 / 3.0).sqrt()), "{}", ttft.std);
        assert!(
            close(ttft.percentiles[1].1, 298.0),
            "{:?}",
            ttft.percentiles
        );
        let itl = s.stat(Metric::Itl).unwrap();
        assert!(
            close(itl.mean, 62.5)
                && close(itl.percentiles[0].1, 50.0)
                && close(itl.percentiles[1].1, 98.5),
            "{itl:?}"
        );
        let tpot = s.stat(Metric::Tpot).unwrap();
        assert!(
            close(tpot.mean, 75.0) && close(tpot.percentiles[1].1, 99.5),
            "{tpot:?}"
        );
        let e2el = s.stat(Metric::E2el).unwrap();
        assert!(close(e2el.mean, (250.0 + 300.0 + 300.0) / 3.0));
        // Intervals [0, .25), [.1, .4), [.2, .5) overlap three deep at 0.2 s.
        assert_eq!(s.max_concurrent_requests, 3);
        // Every token event falls in the first second: 4 + 2 + 1 chunks.
        assert_eq!(s.max_output_tokens_per_s, 7.0);
        assert_eq!(s.token_source, Some(TokenSource::Usage));
        assert!(close(s.mean_tokens_per_chunk, 1.0));
        assert_eq!(
            (s.ttfts[3], s.output_lens[3]),
            (0.0, 0),
            "a failure's own values in the per-request lists, output 0"
        );
        // Without a tokenizer, as vLLM: E2EL only, outputs from usage still.
        let s = summarize(&records, 1.0, &params, None);
        assert!(s.stat(Metric::Ttft).is_none() && s.stat(Metric::E2el).is_some());
        assert_eq!(s.total_output_tokens, 7);
    }

    #[test]
    fn output_counts_fall_back_to_the_tokenizer_then_to_one() {
        let mut r = rec(0, 0.0, 0.1, &[0.1], None);
        r.sample.text = "lobo kiba zumo".into();
        let p = CaseParams::default();
        let s = summarize(
            std::slice::from_ref(&r),
            1.0,
            &p,
            Some(&TokenModel::Builtin),
        );
        assert_eq!(
            (s.total_output_tokens, s.token_source),
            (3, Some(TokenSource::Tokenizer))
        );
        let s = summarize(&[r], 1.0, &p, None);
        assert_eq!(
            (s.total_output_tokens, s.token_source),
            (1, Some(TokenSource::One))
        );
    }
}
