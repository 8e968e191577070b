//! What a case's energy source gave: each GPU's readings in time order (seconds from
//! the case's first send), from a page, a command, NVML or Prometheus.

use std::time::Instant;

use super::dcgm::{self, Selector};
use super::window::Reading;

/// Every reading of a case, per GPU (its id, its readings in time order), and the
/// first failed fetch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Readings {
    /// `dcgm`, `prometheus` or `command`.
    pub kind: &'static str,
    /// Where they came from, as it may be shown (a URL without credentials, or the
    /// command).
    pub url: String,
    pub gpus: Vec<(dcgm::GpuReading, Vec<Reading>)>,
    pub failed: u64,
    pub first_error: Option<String>,
    /// The chosen GPUs' watts while the server was idle before the case, summed.
    pub idle_watts: Option<f64>,
}

impl Readings {
    /// A command's watts at `t`, GPU by line (`command/0`, `command/1`, …).
    pub(super) fn add_watts(&mut self, t: f64, watts: &[f64]) {
        for (i, w) in watts.iter().enumerate() {
            let id = format!("command/{i}");
            let r = Reading {
                t,
                energy_mj: None,
                power_w: Some(*w),
            };
            match self.gpus.iter_mut().find(|(g, _)| g.id == id) {
                Some((_, rs)) => rs.push(r),
                None => self.gpus.push((
                    dcgm::GpuReading {
                        id,
                        gpu: Some(i.to_string()),
                        hostname: None,
                        energy_mj: None,
                        power_w: None,
                    },
                    vec![r],
                )),
            }
        }
    }

    /// The same readings with their times counted from `start` instead of `origin`.
    pub fn shifted(mut self, origin: Instant, start: Instant) -> Readings {
        let offset = if origin >= start {
            (origin - start).as_secs_f64()
        } else {
            -(start - origin).as_secs_f64()
        };
        for (_, rs) in &mut self.gpus {
            for r in rs {
                r.t += offset;
            }
        }
        self
    }

    pub(super) fn add(
        &mut self,
        t: f64,
        page: &[crate::servermetrics::parse::Series],
        sel: &Selector,
    ) {
        self.add_gpus(t, dcgm::read(page, sel), sel);
    }

    /// Each chosen GPU's figures at `t`.
    pub(super) fn add_gpus(&mut self, t: f64, gpus: Vec<dcgm::GpuReading>, sel: &Selector) {
        for g in gpus.into_iter().filter(|g| sel.chooses(g)) {
            let r = Reading {
                t,
                energy_mj: g.energy_mj,
                power_w: g.power_w,
            };
            match self.gpus.iter_mut().find(|(id, _)| id.id == g.id) {
                Some((_, rs)) => rs.push(r),
                None => self.gpus.push((g, vec![r])),
            }
        }
    }
}
