//! The simulator's power model: each simulated GPU draws `idle_watts` plus
//! `watts_per_sequence` for each running sequence, split evenly over `gpus`. The meter
//! integrates it exactly as the running count changes, and `/metrics` serves it as a
//! DCGM exporter does (`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` in mJ,
//! `DCGM_FI_DEV_POWER_USAGE` in W, one series per GPU with its index and UUID), so the
//! energy a case measured can be checked against the model's integral.

use std::fmt::Write;
use std::time::Instant;

/// The model and its integral so far.
#[derive(Debug, Clone, Default)]
pub struct Meter {
    pub idle_watts: f64,
    pub watts_per_sequence: f64,
    pub gpus: u64,
    /// Since when the current running count holds.
    since: Option<Instant>,
    running: u64,
    /// Joules up to `since`, over every GPU.
    joules: f64,
}

impl Meter {
    pub fn new(idle_watts: f64, watts_per_sequence: f64, gpus: u64) -> Meter {
        Meter {
            idle_watts,
            watts_per_sequence,
            gpus: gpus.max(1),
            since: Some(Instant::now()),
            ..Meter::default()
        }
    }

    /// Whether there is a model to serve.
    pub fn enabled(&self) -> bool {
        self.idle_watts > 0.0 || self.watts_per_sequence > 0.0
    }

    /// Watts over every GPU with `running` sequences.
    pub fn watts(&self, running: u64) -> f64 {
        self.idle_watts * self.gpus as f64 + self.watts_per_sequence * running as f64
    }

    /// The running count became `n` at `now`.
    pub fn set_running(&mut self, n: u64, now: Instant) {
        self.joules = self.joules_at(now);
        self.since = Some(now);
        self.running = n;
    }

    /// Joules over every GPU from the start to `now`.
    pub fn joules_at(&self, now: Instant) -> f64 {
        let held = self
            .since
            .map_or(0.0, |s| now.saturating_duration_since(s).as_secs_f64());
        self.joules + self.watts(self.running) * held
    }

    /// DCGM exporter series for every GPU at `now`.
    pub fn render(&self, now: Instant, out: &mut String) {
        if !self.enabled() {
            return;
        }
        let n = self.gpus as f64;
        let per_gpu_mj = self.joules_at(now) / n * 1e3;
        let per_gpu_w = self.watts(self.running) / n;
        let labels = |i: u64| {
            format!(
                "gpu=\"{i}\",UUID=\"GPU-5e4d0000-0000-4000-8000-{i:012}\",device=\"nvidia{i}\",modelName=\"benchplan-sim\",Hostname=\"benchplan-sim\""
            )
        };
        let name = super::super::energy::dcgm::POWER;
        let _ = writeln!(out, "# HELP {name} Power draw (in W).\n# TYPE {name} gauge");
        for i in 0..self.gpus {
            let _ = writeln!(out, "{name}{{{}}} {per_gpu_w:.3}", labels(i));
        }
        let name = super::super::energy::dcgm::ENERGY;
        let _ = writeln!(
            out,
            "# HELP {name} Total energy consumption since boot (in mJ).\n# TYPE {name} counter"
        );
        for i in 0..self.gpus {
            // DCGM reports whole millijoules.
            let _ = writeln!(out, "{name}{{{}}} {}", labels(i), per_gpu_mj.floor());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// By hand: 100 W idle on each of 2 GPUs, 50 W per sequence. 1 s idle (200 W),
    /// 2 s with 4 sequences (400 W): 200 + 800 = 1000 J, 500 J per GPU.
    #[test]
    fn the_meter_integrates_the_model_as_the_running_count_changes() {
        let mut m = Meter::new(100.0, 50.0, 2);
        let t0 = m.since.unwrap();
        m.set_running(4, t0 + Duration::from_secs(1));
        let at = t0 + Duration::from_secs(3);
        assert!((m.joules_at(at) - 1000.0).abs() < 1e-9);
        let mut out = String::new();
        m.render(at, &mut out);
        let page = crate::servermetrics::parse::parse(&out).unwrap();
        let gpus = crate::energy::dcgm::read(&page, &crate::energy::dcgm::Selector::default());
        assert_eq!(gpus.len(), 2, "{out}");
        assert_eq!(gpus[0].energy_mj, Some(500_000.0));
        assert_eq!(gpus[1].power_w, Some(200.0));
        assert!(!Meter::default().enabled());
    }
}
