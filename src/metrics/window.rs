//! The measured window of a case: its requests cut into timeslices, and the steady
//! window, where the load was what the case asked for (ramp-up and drain left out).
//!
//! Both are computed by the whole run's own code ([`summarize`]) over a subset of the
//! run's records, so a slice covering the whole run is the whole run, number for
//! number. A request belongs to the slice it was sent in: its TTFT and its tokens count
//! there, even when it ends in the next one.
//!
//! The steady window:
//! - **closed loop** (a concurrency cap, every request released at once): from the end
//!   of the ramp (the moment the target number is first in flight) to the start of the
//!   drain (the first answer after the last send, from which in flight only falls);
//! - **open loop** (a finite request rate): from the warm-up cut that MSER-5 finds on
//!   the per-request TTFT and TPOT series in issue order, to the last send.
//!
//! Its requests are those that ran inside it: for a closed loop, sent and answered
//! within it (each one met the full load all the time); for an open loop, sent within
//! it. Whether the window is steady (enough requests, and TTFT and in-flight not still
//! trending inside it) is judged by [`steadiness`].

use super::record::RequestRecord;
use super::summary::{Summary, summarize};
use crate::plan::CaseParams;
use crate::tokenizer::TokenModel;

/// A case's measured window: its timeslices (when asked) and its steady window.
#[derive(Debug, Clone, Default)]
pub struct Window {
    pub timeslices: Vec<Slice>,
    pub steady: Option<Steady>,
}

impl Window {
    /// The window of a run: slices of `slice` seconds when asked, and the steady window
    /// judged on at least `min_requests` requests.
    pub fn of(
        records: &[RequestRecord],
        duration: f64,
        params: &CaseParams,
        tokens: Option<&TokenModel>,
        slice: Option<f64>,
        min_requests: usize,
    ) -> Window {
        Window {
            timeslices: slice
                .map(|w| timeslices(records, w, duration, params, tokens))
                .unwrap_or_default(),
            steady: steady(records, params, tokens, min_requests),
        }
    }
}

/// One timeslice of a case.
#[derive(Debug, Clone)]
pub struct Slice {
    /// Seconds from the case's start (its first release).
    pub start_s: f64,
    pub end_s: f64,
    /// Requests sent in it.
    pub started: u64,
    /// Requests that ended in it (answered or failed).
    pub finished: u64,
    /// Requests that failed and ended in it.
    pub errors: u64,
    /// Requests in flight at its end.
    pub in_flight: u64,
    /// The metrics of the requests sent in it, over its length.
    pub summary: Summary,
}

fn end(r: &RequestRecord) -> f64 {
    r.start + r.sample.latency
}

/// The run cut into slices of `width` seconds from its start; `duration` is the
/// run's (its first release to its last answer). The last slice ends with the run.
pub fn timeslices(
    records: &[RequestRecord],
    width: f64,
    duration: f64,
    params: &CaseParams,
    tokens: Option<&TokenModel>,
) -> Vec<Slice> {
    if !(width > 0.0 && width.is_finite()) || records.is_empty() {
        return Vec::new();
    }
    // The run ends with its duration (a send after it, of an interrupted run, extends
    // it to that send).
    let last = records.iter().map(|r| r.start).fold(duration, f64::max);
    let count = ((last / width).ceil() as usize).max(1);
    (0..count)
        .map(|k| {
            let (a, b) = (k as f64 * width, ((k + 1) as f64 * width).min(last));
            let in_slice = |t: f64| t >= a && (t < b || (k + 1 == count && t <= b));
            let sent: Vec<RequestRecord> = records
                .iter()
                .filter(|r| in_slice(r.start))
                .cloned()
                .collect();
            let ended: Vec<&RequestRecord> = records.iter().filter(|r| in_slice(end(r))).collect();
            Slice {
                start_s: a,
                end_s: b,
                started: sent.len() as u64,
                finished: ended.len() as u64,
                errors: ended.iter().filter(|r| !r.sample.success).count() as u64,
                in_flight: records.iter().filter(|r| r.start < b && end(r) > b).count() as u64,
                summary: summarize(&sent, b - a, params, tokens),
            }
        })
        .collect()
}

/// How the steady window was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loop {
    /// A concurrency cap with every request released at once.
    Closed { target: u64 },
    /// A finite request rate.
    Open,
}

/// A case's steady window and what it measured.
#[derive(Debug, Clone)]
pub struct Steady {
    pub how: Loop,
    /// Seconds from the case's first send: `start_s` is also the ramp-up (or warm-up)
    /// before the window.
    pub start_s: f64,
    pub end_s: f64,
    /// The drain after the window, in seconds.
    pub drain_s: f64,
    /// Open loop: the requests MSER-5 cut as warm-up.
    pub warmup_requests: usize,
    /// The requests inside it and their metrics (over their own span).
    pub requests: usize,
    pub summary: Summary,
    /// Whether the window can be judged.
    pub status: Steadiness,
}

/// Whether a steady window holds a steady state.
#[derive(Debug, Clone, PartialEq)]
pub enum Steadiness {
    Steady,
    /// Fewer requests inside than the minimum to judge.
    TooFew {
        requests: usize,
        minimum: usize,
    },
    /// A quantity still trends inside the window: its slope per second, the relative
    /// change the slope makes over the window, and the p-value of the slope.
    Trending {
        what: &'static str,
        change: f64,
        pvalue: f64,
    },
}

impl Steadiness {
    /// Its name in a result (`benchplan.steady.state`): `steady`, `too_few` or
    /// `trending`.
    pub fn kind(&self) -> &'static str {
        match self {
            Steadiness::Steady => "steady",
            Steadiness::TooFew { .. } => "too_few",
            Steadiness::Trending { .. } => "trending",
        }
    }

    /// In words, for a report and a verdict.
    pub fn describe(&self) -> String {
        match self {
            Steadiness::Steady => "steady".into(),
            Steadiness::TooFew { requests, minimum } => format!(
                "too few requests to judge: {requests} in the steady window (at least {minimum})"
            ),
            Steadiness::Trending {
                what,
                change,
                pvalue,
            } => format!(
                "no steady state: {what} still {} by {:.0}% across the window (slope p = {pvalue:.1e})",
                if *change >= 0.0 { "rising" } else { "falling" },
                change.abs() * 100.0
            ),
        }
    }
}

/// The smallest number of requests a steady window is judged on, unless the plan says.
pub const MIN_STEADY_REQUESTS: usize = 20;

/// A trend inside the window is "still moving" when its slope is this significant and
/// changes the quantity by at least [`TREND_CHANGE`] across the window.
const TREND_PVALUE: f64 = 0.001;
const TREND_CHANGE: f64 = 0.10;
/// ... and moves TTFT by at least this many seconds, or the number in flight by at
/// least one request, across the window.
const TREND_MIN_TTFT_S: f64 = 0.002;
const TREND_MIN_IN_FLIGHT: f64 = 1.0;

/// The steady window of a run (see the module doc); None when the run measured
/// nothing or its load has no steady part (a single request).
pub fn steady(
    records: &[RequestRecord],
    params: &CaseParams,
    tokens: Option<&TokenModel>,
    min_requests: usize,
) -> Option<Steady> {
    if records.len() < 2 {
        return None;
    }
    let first = records
        .iter()
        .map(|r| r.start)
        .fold(f64::INFINITY, f64::min);
    let last_end = records.iter().map(end).fold(0.0, f64::max);
    let closed = !params.request_rate.is_finite();
    let (how, a, b, inside, cut): (Loop, f64, f64, Vec<RequestRecord>, usize) = if closed {
        let target = params
            .max_concurrency
            .unwrap_or(params.num_prompts)
            .min(records.len() as u64)
            .max(1);
        let (a, b) = closed_window(records, target)?;
        let inside = records
            .iter()
            .filter(|r| r.start >= a && end(r) <= b)
            .cloned()
            .collect();
        (Loop::Closed { target }, a, b, inside, 0)
    } else {
        let mut by_index: Vec<&RequestRecord> = records.iter().collect();
        by_index.sort_by_key(|r| r.index);
        let ok: Vec<&&RequestRecord> = by_index.iter().filter(|r| r.sample.success).collect();
        let ttft: Vec<f64> = ok.iter().map(|r| r.sample.ttft).collect();
        let tpot: Vec<f64> = ok.iter().filter_map(|r| tpot_of(r)).collect();
        // The cut in successful requests, as an index into issue order.
        let cut_ok = mser5(&ttft).max(mser5(&tpot).min(ok.len()));
        let cut = ok.get(cut_ok).map_or(by_index.len(), |r| {
            by_index
                .iter()
                .position(|x| x.index == r.index)
                .unwrap_or(0)
        });
        let last_send = by_index.iter().map(|r| r.start).fold(0.0, f64::max);
        let a = by_index.get(cut).map_or(last_send, |r| r.start);
        let inside = by_index[cut.min(by_index.len())..]
            .iter()
            .map(|r| (*r).clone())
            .collect();
        (Loop::Open, a, last_send, inside, cut)
    };
    let span = match (
        inside.iter().map(|r| r.start).reduce(f64::min),
        inside.iter().map(end).reduce(f64::max),
    ) {
        (Some(s), Some(e)) => e - s,
        _ => 0.0,
    };
    let mut summary = summarize(&inside, span, params, tokens);
    // Its throughputs are what the server did inside the window, over its length: the
    // requests that ran wholly inside it are fewer than the ones it served there.
    if b > a {
        let per_s = inside_rates(records, &summary, a, b);
        summary.request_throughput = per_s.requests;
        summary.output_throughput = per_s.output_tokens;
        summary.total_token_throughput = per_s.output_tokens + per_s.input_tokens;
    }
    let status = steadiness(&inside, records, a, b, min_requests);
    Some(Steady {
        how,
        start_s: a - first,
        end_s: b - first,
        drain_s: (last_end - b).max(0.0),
        warmup_requests: cut,
        requests: inside.len(),
        summary,
        status,
    })
}

/// Rates inside a window, per second.
struct Rates {
    requests: f64,
    output_tokens: f64,
    input_tokens: f64,
}

/// What the server did in [a, b]: successful answers that ended in it, output tokens
/// streamed in it (each token event at its arrival, a request's tokens spread evenly
/// over its events) and the prompt tokens of the requests sent in it.
fn inside_rates(records: &[RequestRecord], summary: &Summary, a: f64, b: f64) -> Rates {
    let len = b - a;
    let within = |t: f64| t >= a && t <= b;
    let mut answers = 0u64;
    let mut output = 0.0;
    let mut input = 0.0;
    // Tokens per request as the summary counted them, over its events.
    let per_token = if summary.completed > 0 {
        summary.total_output_tokens as f64 / summary.completed as f64
    } else {
        0.0
    };
    for r in records.iter().filter(|r| r.sample.success) {
        if within(end(r)) {
            answers += 1;
        }
        if within(r.start) {
            input += r.sample.usage_prompt.unwrap_or(r.prompt_len) as f64;
        }
        let events = r.sample.itl.len() + 1;
        let tokens = r.sample.usage_completion.map_or(per_token, |n| n as f64);
        let each = tokens / events as f64;
        let mut t = r.start + r.sample.ttft;
        let mut n = usize::from(within(t));
        for g in &r.sample.itl {
            t += g;
            n += usize::from(within(t));
        }
        output += each * n as f64;
    }
    Rates {
        requests: answers as f64 / len,
        output_tokens: output / len,
        input_tokens: input / len,
    }
}

/// A closed loop's window: from the first moment `target` requests are in flight to the
/// first answer after the last send. None when the target is never reached.
fn closed_window(records: &[RequestRecord], target: u64) -> Option<(f64, f64)> {
    let mut events: Vec<(f64, i64)> = records
        .iter()
        .flat_map(|r| [(r.start, 1), (end(r), -1)])
        .collect();
    // At one instant an answer frees its slot before the next request takes it.
    events.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    let mut n = 0i64;
    let mut ramp_end = None;
    for (t, d) in &events {
        n += d;
        if ramp_end.is_none() && n >= target as i64 {
            ramp_end = Some(*t);
        }
    }
    let a = ramp_end?;
    let last_send = records.iter().map(|r| r.start).fold(0.0, f64::max);
    let b = records
        .iter()
        .map(end)
        .filter(|e| *e > last_send)
        .fold(f64::INFINITY, f64::min);
    Some((a, b.max(a)))
}

/// A request's TPOT in seconds, for the warm-up cut: (E2EL − TTFT) over its output
/// tokens after the first (the server's count, else its chunks); None for one token.
fn tpot_of(r: &RequestRecord) -> Option<f64> {
    let out = r
        .sample
        .usage_completion
        .unwrap_or(u64::from(r.sample.chunks));
    (out > 1).then(|| (r.sample.latency - r.sample.ttft) / (out - 1) as f64)
}

/// MSER-5 (White, 1997): the warm-up cut of a series in issue order, in items. The
/// series is averaged in batches of 5; the cut is the number of batches `d` (at most
/// half of them) minimizing the variance of the mean of what is left,
/// `Σ (x̄_j − mean)² / (m − d)²` over the `m − d` batches kept, times 5.
pub fn mser5(series: &[f64]) -> usize {
    let batches: Vec<f64> = series
        .chunks_exact(5)
        .map(|c| c.iter().sum::<f64>() / 5.0)
        .collect();
    let m = batches.len();
    if m < 4 {
        return 0;
    }
    let stats: Vec<f64> = (0..=m / 2)
        .map(|d| {
            let kept = &batches[d..];
            let k = kept.len() as f64;
            let mean = kept.iter().sum::<f64>() / k;
            let ss: f64 = kept.iter().map(|x| (x - mean) * (x - mean)).sum();
            ss / (k * k)
        })
        .collect();
    // The smallest cut that achieves nearly all of the reduction the best one does:
    // past the warm-up, cutting more of a steady tail only trades noise for noise (on
    // measured latencies the exact minimum wanders into the steady part, which would
    // throw steady requests away), and a flat tail ties to the last bit of rounding.
    let min = stats.iter().copied().fold(f64::INFINITY, f64::min);
    let scale = batches.iter().map(|x| x * x).sum::<f64>() / m as f64;
    let tie = min + 0.05 * (stats[0] - min) + 1e-12 * scale;
    stats.iter().position(|s| *s <= tie).unwrap_or(0) * 5
}

/// Whether the window holds a steady state: enough requests, and neither TTFT (of the
/// requests inside) nor the number in flight (sampled at each send inside) trending
/// across it (an OLS slope over time, significant at [`TREND_PVALUE`] and moving the
/// quantity by at least [`TREND_CHANGE`] across the window).
fn steadiness(
    inside: &[RequestRecord],
    all: &[RequestRecord],
    a: f64,
    b: f64,
    min_requests: usize,
) -> Steadiness {
    if inside.len() < min_requests.max(3) {
        return Steadiness::TooFew {
            requests: inside.len(),
            minimum: min_requests.max(3),
        };
    }
    let ttft: Vec<(f64, f64)> = inside
        .iter()
        .filter(|r| r.sample.success)
        .map(|r| (r.start, r.sample.ttft))
        .collect();
    // In flight at each send inside: sends so far less answers so far (sorted, so a
    // long run costs n log n).
    let mut starts: Vec<f64> = all.iter().map(|r| r.start).collect();
    let mut ends: Vec<f64> = all.iter().map(end).collect();
    starts.sort_by(f64::total_cmp);
    ends.sort_by(f64::total_cmp);
    let in_flight: Vec<(f64, f64)> = inside
        .iter()
        .map(|r| {
            let sent = starts.partition_point(|t| *t <= r.start);
            let done = ends.partition_point(|t| *t <= r.start);
            (r.start, sent.saturating_sub(done) as f64)
        })
        .collect();
    // Each with the smallest absolute move that counts: a sub-millisecond TTFT drifts
    // by 10% with the client's own jitter, which says nothing of the server.
    for (what, points, floor) in [
        ("TTFT", ttft, TREND_MIN_TTFT_S),
        ("the number in flight", in_flight, TREND_MIN_IN_FLIGHT),
    ] {
        let level = points.iter().map(|p| p.1).sum::<f64>() / points.len().max(1) as f64;
        if let Some((change, p)) = trend(&points, b - a) {
            if p < TREND_PVALUE && change.abs() >= TREND_CHANGE && (change * level).abs() >= floor {
                return Steadiness::Trending {
                    what,
                    change,
                    pvalue: p,
                };
            }
        }
    }
    Steadiness::Steady
}

/// An OLS line through `points` (time, value): the relative change its slope makes over
/// `span` seconds (against the mean), and the two-sided p-value of the slope.
pub fn trend(points: &[(f64, f64)], span: f64) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if n < 3.0 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= 0.0 || my == 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let resid: f64 = points
        .iter()
        .map(|p| (p.1 - my - slope * (p.0 - mx)).powi(2))
        .sum();
    let se = (resid / (n - 2.0) / sxx).sqrt();
    let p = if se == 0.0 {
        if slope == 0.0 { 1.0 } else { 0.0 }
    } else {
        2.0 * super::significance::student_t_sf((slope / se).abs(), n - 2.0)
    };
    Some((slope * span / my, p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: usize, start: f64, ttft: f64, itl: f64, tokens: usize) -> RequestRecord {
        RequestRecord::streamed(i, start, ttft, &vec![itl; tokens - 1], Some(tokens as u64))
    }

    fn params(concurrency: Option<u64>, rate: f64, n: u64) -> CaseParams {
        CaseParams {
            max_concurrency: concurrency,
            request_rate: crate::plan::units::Rate(rate),
            num_prompts: n,
            ..CaseParams::default()
        }
    }

    /// A closed loop of `c` slots over `n` requests each `secs` long, sent as slots free.
    fn closed(c: usize, n: usize, ttft: f64) -> Vec<RequestRecord> {
        let len = ttft + 9.0 * 0.01;
        (0..n)
            .map(|i| rec(i, (i / c) as f64 * len, ttft, 0.01, 10))
            .collect()
    }

    fn json(s: &Summary, p: &CaseParams) -> serde_json::Map<String, serde_json::Value> {
        let h = crate::results::vllm_json::Header::default();
        crate::results::vllm_json::result_json(&h, p, s, None, false, Default::default())
    }

    #[test]
    fn a_slice_covering_the_whole_run_is_the_whole_run() {
        let p = params(Some(4), f64::INFINITY, 40);
        let records = closed(4, 40, 0.05);
        let duration = records.iter().map(end).fold(0.0, f64::max);
        let whole = summarize(&records, duration, &p, Some(&TokenModel::Builtin));
        let one = timeslices(
            &records,
            duration * 2.0,
            duration,
            &p,
            Some(&TokenModel::Builtin),
        );
        assert_eq!(one.len(), 1);
        assert_eq!(
            (one[0].started, one[0].finished, one[0].in_flight),
            (40, 40, 0)
        );
        let (mut a, mut b) = (json(&whole, &p), json(&one[0].summary, &p));
        // The steady window is the whole run's only.
        a["benchplan"].as_object_mut().unwrap().remove("steady");
        b["benchplan"].as_object_mut().unwrap().remove("steady");
        assert_eq!(a, b);
        // Slices of a second: every request in exactly one, counts that add up.
        let cut = timeslices(&records, 0.25, duration, &p, Some(&TokenModel::Builtin));
        assert_eq!(cut.iter().map(|s| s.started).sum::<u64>(), 40);
        assert_eq!(cut.iter().map(|s| s.finished).sum::<u64>(), 40);
        assert!(cut.iter().all(|s| s.in_flight <= 4));
        assert_eq!(cut.last().unwrap().end_s, duration);
    }

    #[test]
    fn a_closed_loop_window_leaves_out_its_ramp_and_drain() {
        // 4 slots, 40 requests of 0.14 s in 10 waves: in flight 4 from the first send to
        // the first answer after the last send.
        let p = params(Some(4), f64::INFINITY, 40);
        let records = closed(4, 40, 0.05);
        let st = steady(&records, &p, Some(&TokenModel::Builtin), 20).unwrap();
        assert_eq!(st.how, Loop::Closed { target: 4 });
        assert!((st.start_s - 0.0).abs() < 1e-9, "{}", st.start_s);
        // The last wave is sent at 9 × 0.14 s and its first answer ends the window.
        assert!((st.end_s - 10.0 * 0.14).abs() < 1e-9, "{}", st.end_s);
        assert_eq!(st.requests, 40);
        assert!(st.drain_s.abs() < 1e-9 && st.start_s.abs() < 1e-9);
        // A staggered ramp: slot k opens at k × 0.1 s; the window starts at the fourth.
        let mut ramped = closed(4, 40, 0.05);
        for r in &mut ramped {
            r.start += (r.index % 4) as f64 * 0.01;
        }
        let st = steady(&ramped, &p, Some(&TokenModel::Builtin), 20).unwrap();
        assert!((st.start_s - 0.03).abs() < 1e-9, "{}", st.start_s);
        assert!(st.drain_s > 0.0 && st.requests < 40);
    }

    #[test]
    fn mser5_cuts_a_warm_up_and_leaves_a_flat_series_whole() {
        let flat: Vec<f64> = (0..100).map(|i| 50.0 + (i % 3) as f64 * 0.1).collect();
        assert_eq!(mser5(&flat), 0);
        let mut warm: Vec<f64> = (0..20).map(|_| 150.0).collect();
        warm.extend(&flat);
        let cut = mser5(&warm);
        assert!((20..=25).contains(&cut), "{cut}");
    }

    #[test]
    fn an_open_loop_window_starts_after_its_warm_up_and_its_ttft_is_the_injected_one() {
        // 100 requests at 10/s, the first 15 three times slower.
        let p = params(None, 10.0, 100);
        let records: Vec<RequestRecord> = (0..100)
            .map(|i| {
                let f = if i < 15 { 3.0 } else { 1.0 };
                rec(i, i as f64 * 0.1, 0.05 * f, 0.01 * f, 10)
            })
            .collect();
        let st = steady(&records, &p, Some(&TokenModel::Builtin), 20).unwrap();
        assert_eq!(st.how, Loop::Open);
        assert!(
            (15..=20).contains(&st.warmup_requests),
            "{}",
            st.warmup_requests
        );
        let steady_ttft = st
            .summary
            .stat(crate::plan::params::Metric::Ttft)
            .unwrap()
            .mean;
        let whole = summarize(&records, 10.0, &p, Some(&TokenModel::Builtin));
        let whole_ttft = whole.stat(crate::plan::params::Metric::Ttft).unwrap().mean;
        assert!((steady_ttft - 50.0).abs() / 50.0 < 0.03, "{steady_ttft}");
        assert!((whole_ttft - 50.0).abs() / 50.0 > 0.03, "{whole_ttft}");
        assert_eq!(st.status, Steadiness::Steady);
    }

    #[test]
    fn a_queue_that_keeps_growing_is_no_steady_state_and_too_few_requests_say_so() {
        // Open loop above capacity: each TTFT longer than the last.
        let p = params(None, 10.0, 100);
        let records: Vec<RequestRecord> = (0..100)
            .map(|i| rec(i, i as f64 * 0.1, 0.05 + i as f64 * 0.02, 0.01, 10))
            .collect();
        let st = steady(&records, &p, Some(&TokenModel::Builtin), 20).unwrap();
        assert!(
            matches!(st.status, Steadiness::Trending { what: "TTFT", .. }),
            "{:?}",
            st.status
        );
        assert!(st.status.describe().starts_with("no steady state"));
        let few: Vec<RequestRecord> = records.into_iter().take(8).collect();
        let st = steady(&few, &params(None, 10.0, 8), Some(&TokenModel::Builtin), 20).unwrap();
        assert!(
            matches!(st.status, Steadiness::TooFew { .. }),
            "{:?}",
            st.status
        );
    }
}
