//! A case's energy (`benchplan.energy`): each chosen GPU's joules over the measured
//! window (see [`super::window`]), their sum, and per-token figures, the tokens being
//! the window's own (its output and total token throughput × its length, so the
//! joules and the tokens cover the same seconds).

use serde::Serialize;

use super::source::Readings;
use super::window::{Method, over};

/// One GPU's energy over the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuFigures {
    pub id: String,
    pub gpu: Option<String>,
    pub hostname: Option<String>,
    pub joules: Option<f64>,
    pub mean_watts: Option<f64>,
    pub method: Option<Method>,
    pub samples: usize,
    pub counter_reset: bool,
    /// Why there is no figure (server text: escaped where it lands).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// What the window's requests produced, for the per-token figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Output {
    /// Output and total (input + output) tokens per second over the window.
    pub output_tps: f64,
    pub total_tps: f64,
    /// Good requests per second (the plan's goodput), when it has one, and all.
    pub goodput_rps: Option<f64>,
    pub request_rps: f64,
}

/// A case's energy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnergyFigures {
    pub source: &'static str,
    pub url: String,
    /// `steady` (the steady window) or `run` (first send to last answer).
    pub window: &'static str,
    pub window_start_s: f64,
    pub window_end_s: f64,
    /// The seconds the joules cover.
    pub window_s: f64,
    /// Summed over the GPUs; None unless every chosen GPU was measured.
    pub joules: Option<f64>,
    pub mean_watts: Option<f64>,
    pub joules_per_output_token: Option<f64>,
    pub joules_per_total_token: Option<f64>,
    pub output_tokens_per_joule: Option<f64>,
    pub joules_per_good_request: Option<f64>,
    /// Idle watts measured before the case (`idle`), and the window's energy above
    /// them, in all and per output token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_watts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub joules_above_idle: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub joules_per_output_token_above_idle: Option<f64>,
    pub gpus: Vec<GpuFigures>,
    /// Failed reads of the page.
    pub failed_reads: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

impl EnergyFigures {
    /// Of `readings` over `[a, b]` (seconds from the first send), named `window`.
    pub fn of(readings: &Readings, window: &'static str, a: f64, b: f64, out: Output) -> Self {
        let mut problems = Vec::new();
        if readings.gpus.is_empty() {
            let why = readings
                .first_error
                .as_ref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default();
            problems.push(if readings.kind == "nvml" {
                format!(
                    "{}: no energy for this case",
                    readings
                        .first_error
                        .as_deref()
                        .unwrap_or("NVML gave no GPU")
                )
            } else if readings.kind == "command" {
                format!(
                    "{} printed no watts{why}: no energy for this case",
                    readings.url
                )
            } else {
                format!(
                    "{} has no {} or {} series{why}: no energy for this case",
                    readings.url,
                    super::dcgm::ENERGY,
                    super::dcgm::POWER,
                )
            });
        }
        let gpus: Vec<GpuFigures> = readings
            .gpus
            .iter()
            .map(|(g, rs)| {
                let e = over(rs, a, b);
                if let Err(why) = &e {
                    problems.push(format!("GPU {}: {why}", g.id));
                }
                let e = e.ok();
                GpuFigures {
                    id: g.id.clone(),
                    gpu: g.gpu.clone(),
                    hostname: g.hostname.clone(),
                    joules: e.as_ref().map(|e| e.joules),
                    mean_watts: e.as_ref().map(|e| e.mean_watts),
                    method: e.as_ref().map(|e| e.method),
                    samples: e.as_ref().map_or(0, |e| e.samples),
                    counter_reset: e.as_ref().is_some_and(|e| e.counter_reset),
                    problem: None,
                }
            })
            .collect();
        for g in &gpus {
            if g.counter_reset {
                problems.push(format!(
                    "GPU {}: its energy counter went down inside the window (a driver reload or an exporter restart); its power readings were integrated instead",
                    g.id
                ));
            }
        }
        let window_s = b - a;
        let joules = (!gpus.is_empty() && gpus.iter().all(|g| g.joules.is_some()))
            .then(|| gpus.iter().filter_map(|g| g.joules).sum::<f64>());
        let above = joules
            .zip(readings.idle_watts)
            .map(|(j, w)| j - w * window_s);
        let per = |tokens_per_s: f64| {
            let n = tokens_per_s * window_s;
            joules.filter(|_| n > 0.0).map(|j| j / n)
        };
        EnergyFigures {
            source: if readings.kind.is_empty() {
                "dcgm"
            } else {
                readings.kind
            },
            url: readings.url.clone(),
            window,
            window_start_s: a,
            window_end_s: b,
            window_s,
            joules,
            mean_watts: joules.map(|j| j / window_s),
            joules_per_output_token: per(out.output_tps),
            joules_per_total_token: per(out.total_tps),
            output_tokens_per_joule: per(out.output_tps).filter(|j| *j > 0.0).map(|j| 1.0 / j),
            joules_per_good_request: out.goodput_rps.and_then(per),
            idle_watts: readings.idle_watts,
            joules_above_idle: above,
            joules_per_output_token_above_idle: above.and_then(|j| {
                let n = out.output_tps * window_s;
                (n > 0.0).then(|| j / n)
            }),
            gpus,
            failed_reads: readings.failed,
            problems,
        }
    }

    /// What the console and the report warn about.
    pub fn warnings(&self) -> Vec<String> {
        self.problems
            .iter()
            .map(|p| format!("energy: {p}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy::dcgm::GpuReading;
    use crate::energy::window::Reading;

    fn gpu(id: &str) -> GpuReading {
        GpuReading {
            id: id.into(),
            gpu: None,
            hostname: None,
            energy_mj: None,
            power_w: None,
        }
    }

    /// By hand: two GPUs at 300 W and 100 W (counters), a 2 s window: 800 J, 400 W.
    /// 50 output tokens/s and 250 total over it: 100 and 500 tokens, 8 and 1.6 J per
    /// token, 0.125 tokens per joule; 4 good requests/s: 8 of them, 100 J each.
    #[test]
    fn per_token_figures_share_the_window_with_the_joules() {
        let line = |w: f64| -> Vec<Reading> {
            (0..=4)
                .map(|i| Reading {
                    t: i as f64,
                    energy_mj: Some(w * i as f64 * 1e3),
                    power_w: Some(w),
                })
                .collect()
        };
        let readings = Readings {
            kind: "dcgm",
            url: "http://x/metrics".into(),
            gpus: vec![(gpu("GPU-a"), line(300.0)), (gpu("GPU-b"), line(100.0))],
            failed: 0,
            first_error: None,
            idle_watts: Some(100.0),
        };
        let out = Output {
            output_tps: 50.0,
            total_tps: 250.0,
            goodput_rps: Some(4.0),
            request_rps: 5.0,
        };
        let f = EnergyFigures::of(&readings, "steady", 1.0, 3.0, out);
        let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 1e-9;
        assert!(close(f.joules, 800.0), "{f:?}");
        assert!(close(f.mean_watts, 400.0));
        assert!(close(f.joules_per_output_token, 8.0));
        assert!(close(f.joules_per_total_token, 1.6));
        assert!(close(f.output_tokens_per_joule, 0.125));
        assert!(close(f.joules_per_good_request, 100.0));
        // 100 W idle: 600 J above it over the 2 s, 6 J per output token.
        assert!(close(f.joules_above_idle, 600.0));
        assert!(close(f.joules_per_output_token_above_idle, 6.0));
        assert!(f.problems.is_empty());
        // A page without the series: no figures, and a message naming both and the URL.
        let none = Readings {
            url: "http://x/metrics".into(),
            ..Readings::default()
        };
        let f = EnergyFigures::of(&none, "run", 0.0, 1.0, out);
        assert_eq!(f.joules, None);
        assert!(f.warnings()[0].contains("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"));
        assert!(f.warnings()[0].contains("http://x/metrics"));
    }
}
