//! Over-saturation: an open-loop run whose queue grows without bound. Above capacity,
//! requests arrive faster than the server answers them, so the number in flight and
//! the time to first token both keep rising, and a whole-run "mean TTFT" only measures
//! how long the run lasted. Detected live, as GuideLLM's `over_saturation` constraint
//! does: over a moving window, the slope of the number in flight (sampled as the run
//! goes) and of TTFT (by when each was measured: its first token) must both be positive,
//! significant and large, and stay so for a minimum duration. TTFT is placed at its
//! first token, not its send: behind a growing queue the answers to the last second's
//! sends have not begun, so a window by send time would hold none of them.

use serde::Serialize;

use super::window::trend;

/// When a queue counts as growing without bound (`report.oversaturation`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// The moving window the slopes are fitted over, seconds.
    pub window_s: f64,
    /// How long both slopes must hold before the case is marked, seconds.
    pub min_duration_s: f64,
    /// The largest p-value of each slope.
    pub pvalue: f64,
    /// The smallest rise each slope must make across the window, relative to the
    /// window's mean (0.5: up by half its level).
    pub min_rise: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings::of(&crate::plan::settings::Oversaturation::default())
    }
}

impl Settings {
    /// The plan's `execution.oversaturation` in seconds and fractions.
    pub fn of(p: &crate::plan::settings::Oversaturation) -> Settings {
        Settings {
            window_s: p.window.0.as_secs_f64(),
            min_duration_s: p.min_duration.0.as_secs_f64(),
            pvalue: p.p_value,
            min_rise: p.min_rise.0,
        }
    }
}

/// What was found: when the queue began to grow without bound and how fast.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Detection {
    /// Seconds from the case's start when both slopes first held (the case is marked
    /// `min_duration_s` later).
    pub at_s: f64,
    /// Seconds from the case's start when it was marked.
    pub marked_at_s: f64,
    /// The rate the case asked for, requests per second.
    pub rate: f64,
    /// The window's rises across it, relative to its mean, and their p-values.
    pub in_flight_rise: f64,
    pub in_flight_p: f64,
    pub ttft_rise: f64,
    pub ttft_p: f64,
    /// Whether `stop_on = "oversaturation"` ended the case there.
    pub stopped: bool,
}

/// The live detector: fed the number in flight and each answer's TTFT as the run goes.
#[derive(Debug, Clone)]
pub struct Detector {
    settings: Settings,
    rate: f64,
    in_flight: Vec<(f64, f64)>,
    ttft: Vec<(f64, f64)>,
    since: Option<f64>,
    found: Option<Detection>,
}

/// The fewest points of each series a window is fitted on.
const MIN_POINTS: usize = 6;

impl Detector {
    pub fn new(settings: Settings, rate: f64) -> Detector {
        Detector {
            settings,
            rate,
            in_flight: Vec::new(),
            ttft: Vec::new(),
            since: None,
            found: None,
        }
    }

    /// The number in flight at `t` seconds from the start.
    pub fn in_flight(&mut self, t: f64, n: u64) {
        self.in_flight.push((t, n as f64));
    }

    /// A successful request's TTFT, measured at `at` (its first token, seconds from the
    /// start).
    pub fn ttft(&mut self, at: f64, ttft: f64) {
        self.ttft.push((at, ttft));
    }

    /// Judges the window ending at `now`; the detection once the slopes held for the
    /// minimum duration (and from then on).
    pub fn check(&mut self, now: f64) -> Option<Detection> {
        if self.found.is_some() {
            return self.found;
        }
        let s = self.settings;
        let from = now - s.window_s;
        // Only the window is kept: a long run's memory stays bounded.
        self.in_flight.retain(|p| p.0 >= from);
        self.ttft.retain(|p| p.0 >= from);
        let growing = |points: &[(f64, f64)]| {
            if points.len() < MIN_POINTS {
                return None;
            }
            let span = points.last()?.0 - points.first()?.0;
            // A window not yet full is not judged: the ramp of every run rises.
            if span < s.window_s * 0.8 {
                return None;
            }
            let (rise, p) = trend(points, span)?;
            (rise >= s.min_rise && p < s.pvalue).then_some((rise, p))
        };
        match (growing(&self.in_flight), growing(&self.ttft)) {
            (Some((fr, fp)), Some((tr, tp))) => {
                let since = *self.since.get_or_insert(now);
                if now - since >= s.min_duration_s {
                    self.found = Some(Detection {
                        at_s: since,
                        marked_at_s: now,
                        rate: self.rate,
                        in_flight_rise: fr,
                        in_flight_p: fp,
                        ttft_rise: tr,
                        ttft_p: tp,
                        stopped: false,
                    });
                }
            }
            _ => self.since = None,
        }
        self.found
    }

    pub fn found(&self) -> Option<Detection> {
        self.found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            window_s: 2.0,
            min_duration_s: 1.0,
            ..Settings::default()
        }
    }

    /// A single-server queue fed at `lambda` and served at `mu` per second (both
    /// deterministic), sampled every 0.1 s for `secs`: in flight and each TTFT.
    fn queue(lambda: f64, mu: f64, secs: f64, noise: u64) -> Detector {
        let mut d = Detector::new(settings(), lambda);
        let mut rng = crate::rng::Rng::new(noise);
        let mut t = 0.0;
        let mut sent = 0.0;
        while t < secs {
            let arrived = lambda * t;
            let served = (mu * t).min(arrived);
            let jitter = rng.f64() * 2.0;
            d.in_flight(t, (arrived - served + jitter).max(0.0) as u64 + 1);
            while sent < lambda * t {
                let i = sent;
                // The request waits for those before it, then its own service.
                let wait = (i / mu - i / lambda).max(0.0);
                let ttft = wait + 0.05 + rng.f64() * 0.01;
                d.ttft(i / lambda + ttft, ttft);
                sent += 1.0;
            }
            d.check(t);
            t += 0.1;
        }
        d
    }

    #[test]
    fn twice_the_capacity_is_found_and_half_never() {
        let over = queue(40.0, 20.0, 8.0, 1).found().expect("a growing queue");
        assert!(over.at_s < 3.5, "{over:?}");
        assert!(over.marked_at_s - over.at_s >= 1.0, "{over:?}");
        assert_eq!(over.rate, 40.0);
        for seed in 0..50 {
            assert_eq!(queue(10.0, 20.0, 8.0, seed).found(), None, "seed {seed}");
        }
    }
}
