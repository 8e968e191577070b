//! The arrival schedule, computed up front from the seed (reference §5.1): gamma gaps
//! with shape = burstiness and mean 1/rate (Poisson at 1), accumulated and — without
//! ramp-up — rescaled so the last arrival is at exactly N/rate, as vLLM does; linear
//! and exponential ramp-up rates per request; `inf` sends everything at t = 0.
//!
//! Deliberate difference: the gaps come from benchplan's own seeded generator, not
//! numpy's, so a seed gives the same schedule on every machine but not vLLM's.

use crate::plan::params::RampUp;
use crate::rng::Rng;

/// What the schedule depends on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScheduleSpec {
    pub num_requests: usize,
    /// Requests per second; infinite sends all at once.
    pub rate: f64,
    /// Gamma shape; infinite gives constant gaps.
    pub burstiness: f64,
    pub ramp: Option<(RampUp, f64, f64)>,
    pub seed: u64,
}

/// The rate in force for request `i` of `n` (vLLM's `_get_current_request_rate`).
pub fn rate_at(spec: &ScheduleSpec, i: usize) -> f64 {
    let n = spec.num_requests;
    let frac = i as f64 / (n.saturating_sub(1).max(1)) as f64;
    match spec.ramp {
        Some((RampUp::Linear, start, end)) => start + (end - start) * frac,
        Some((RampUp::Exponential, start, end)) => start * (end / start).powf(frac),
        None => spec.rate,
    }
}

/// Send offsets in seconds from the start of the run, one per request, non-decreasing.
pub fn arrival_offsets(spec: &ScheduleSpec) -> Vec<f64> {
    let n = spec.num_requests;
    let mut rng = Rng::new(spec.seed ^ 0xa771_7a15);
    let mut t = 0.0;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let r = rate_at(spec, i);
        let gap = if !r.is_finite() {
            0.0
        } else if r <= 0.0 {
            // A ramp starting at 0 rps sends its first request at once (vLLM would divide by zero).
            0.0
        } else if !spec.burstiness.is_finite() {
            1.0 / r
        } else {
            rng.gamma(spec.burstiness, 1.0 / (r * spec.burstiness))
        };
        t += gap;
        out.push(t);
    }
    if spec.ramp.is_none() && spec.rate.is_finite() {
        if let Some(&last) = out.last() {
            if last > 0.0 {
                let scale = (n as f64 / spec.rate) / last;
                out.iter_mut().for_each(|d| *d *= scale);
            }
        }
    }
    out
}

/// A concurrency cap as semaphore permits: a cap above what tokio's semaphore holds
/// (2^61 - 1) caps nothing more than that does (no case has that many requests).
pub fn permits(cap: u64) -> usize {
    usize::try_from(cap)
        .unwrap_or(usize::MAX)
        .min(tokio::sync::Semaphore::MAX_PERMITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(n: usize, rate: f64, burstiness: f64, seed: u64) -> ScheduleSpec {
        ScheduleSpec {
            num_requests: n,
            rate,
            burstiness,
            ramp: None,
            seed,
        }
    }

    fn gaps(offsets: &[f64]) -> Vec<f64> {
        let mut g = vec![offsets[0]];
        g.extend(offsets.windows(2).map(|w| w[1] - w[0]));
        g
    }

    fn cv(xs: &[f64]) -> f64 {
        let n = xs.len() as f64;
        let m = xs.iter().sum::<f64>() / n;
        (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n).sqrt() / m
    }

    #[test]
    fn same_seed_same_schedule() {
        assert_eq!(
            arrival_offsets(&spec(100, 10.0, 1.0, 7)),
            arrival_offsets(&spec(100, 10.0, 1.0, 7))
        );
        assert_ne!(
            arrival_offsets(&spec(100, 10.0, 1.0, 7)),
            arrival_offsets(&spec(100, 10.0, 1.0, 8))
        );
    }

    #[test]
    fn mean_gap_is_one_over_rate_and_the_last_arrival_is_n_over_rate() {
        let o = arrival_offsets(&spec(20_000, 50.0, 1.0, 1));
        let g = gaps(&o);
        let mean = g.iter().sum::<f64>() / g.len() as f64;
        assert!((mean - 0.02).abs() < 1e-12, "{mean}");
        assert!((o.last().unwrap() - 400.0).abs() < 1e-9);
        assert!(o.windows(2).all(|w| w[1] >= w[0]));
    }

    #[test]
    fn burstiness_sets_the_coefficient_of_variation() {
        // CV of gamma gaps = 1/sqrt(shape).
        for k in [0.25, 1.0, 4.0, 16.0] {
            let c = cv(&gaps(&arrival_offsets(&spec(50_000, 100.0, k, 3))));
            let want = 1.0 / f64::sqrt(k);
            assert!(
                (c / want - 1.0).abs() < 0.05,
                "shape {k}: CV {c}, want {want}"
            );
        }
        let c = cv(&gaps(&arrival_offsets(&spec(
            1000,
            100.0,
            f64::INFINITY,
            3,
        ))));
        assert!(c < 1e-9, "infinite burstiness gives constant gaps");
    }

    #[test]
    fn infinite_rate_sends_everything_at_once() {
        assert!(
            arrival_offsets(&spec(10, f64::INFINITY, 1.0, 0))
                .iter()
                .all(|d| *d == 0.0)
        );
    }

    #[test]
    fn ramp_up_rates_follow_the_curve() {
        let lin = ScheduleSpec {
            num_requests: 11,
            rate: f64::INFINITY,
            burstiness: 1.0,
            ramp: Some((RampUp::Linear, 1.0, 21.0)),
            seed: 0,
        };
        let rates: Vec<f64> = (0..11).map(|i| rate_at(&lin, i)).collect();
        assert_eq!(
            rates,
            vec![1.0, 3.0, 5.0, 7.0, 9.0, 11.0, 13.0, 15.0, 17.0, 19.0, 21.0]
        );
        let exp = ScheduleSpec {
            ramp: Some((RampUp::Exponential, 1.0, 1024.0)),
            ..lin
        };
        assert!((rate_at(&exp, 5) - 32.0).abs() < 1e-9);
        assert!((rate_at(&exp, 10) - 1024.0).abs() < 1e-9);
        // Observed: the local rate (1 / mean gap) near each point tracks the ramp.
        let n = 40_000;
        let ramp = ScheduleSpec {
            num_requests: n,
            rate: f64::INFINITY,
            burstiness: 1.0,
            ramp: Some((RampUp::Linear, 10.0, 100.0)),
            seed: 5,
        };
        let o = arrival_offsets(&ramp);
        for (lo, hi) in [(0, 2000), (19_000, 21_000), (38_000, 40_000)] {
            let mean_gap = (o[hi - 1] - o[lo]) / (hi - lo - 1) as f64;
            let want = rate_at(&ramp, (lo + hi) / 2);
            assert!(
                (1.0 / mean_gap / want - 1.0).abs() < 0.06,
                "around {lo}: {} vs {want}",
                1.0 / mean_gap
            );
        }
    }
}
