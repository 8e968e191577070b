//! A case's cost per token (`benchplan.cost`): the service's price per hour over the
//! tokens it produced per hour in the measured window, and with an energy price the
//! part of it that is the GPUs' energy.
//!
//! - per million output tokens = per_hour / (output tokens/s × 3600) × 10⁶;
//! - per million total tokens: the same over input + output tokens/s;
//! - at goodput: over the output tokens of the good requests only (output tokens/s ×
//!   goodput / request throughput), when the plan has a goodput;
//! - energy per million output tokens = J per output token × 10⁶ / 3.6 × 10⁶ J/kWh ×
//!   energy_price.

use serde::Serialize;

use super::figures::{EnergyFigures, Output};
use crate::plan::energy::CostSpec;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostFigures {
    pub currency: String,
    pub per_hour: f64,
    /// The window the token rates are of (`steady` or `run`).
    pub window: &'static str,
    pub per_million_output_tokens: Option<f64>,
    pub per_million_total_tokens: Option<f64>,
    pub per_million_output_tokens_at_goodput: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy_price_per_kwh: Option<f64>,
    pub energy_per_million_output_tokens: Option<f64>,
}

impl CostFigures {
    pub fn of(
        spec: &CostSpec,
        window: &'static str,
        out: Output,
        energy: Option<&EnergyFigures>,
    ) -> CostFigures {
        let per_million = |tps: f64| (tps > 0.0).then(|| spec.per_hour / (tps * 3600.0) * 1e6);
        let good_tps = match (out.goodput_rps, out.request_rps) {
            (Some(g), r) if r > 0.0 => Some(out.output_tps * g / r),
            _ => None,
        };
        CostFigures {
            currency: spec.currency.clone(),
            per_hour: spec.per_hour,
            window,
            per_million_output_tokens: per_million(out.output_tps),
            per_million_total_tokens: per_million(out.total_tps),
            per_million_output_tokens_at_goodput: good_tps.and_then(per_million),
            energy_price_per_kwh: spec.energy_price,
            energy_per_million_output_tokens: spec.energy_price.and_then(|price| {
                let j = energy?.joules_per_output_token?;
                Some(j * 1e6 / 3.6e6 * price)
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By hand: $98.32 an hour at 2000 output tokens/s (7.2 M an hour): $13.6556 per
    /// million; 10 000 total tokens/s: $2.7311; half the requests good: $27.3111; 0.5 J
    /// per output token at $0.12 per kWh: 500 000 J = 0.13889 kWh per million, $0.016667.
    #[test]
    fn the_price_per_hour_over_the_tokens_per_hour() {
        let spec = CostSpec {
            per_hour: 98.32,
            currency: "USD".into(),
            energy_price: Some(0.12),
        };
        let out = Output {
            output_tps: 2000.0,
            total_tps: 10_000.0,
            goodput_rps: Some(5.0),
            request_rps: 10.0,
        };
        let readings = crate::energy::source::Readings::default();
        let mut energy = EnergyFigures::of(&readings, "steady", 0.0, 1.0, out);
        energy.joules_per_output_token = Some(0.5);
        let c = CostFigures::of(&spec, "steady", out, Some(&energy));
        let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 1e-4;
        assert!(close(c.per_million_output_tokens, 13.65556), "{c:?}");
        assert!(close(c.per_million_total_tokens, 2.73111));
        assert!(close(c.per_million_output_tokens_at_goodput, 27.31111));
        assert!(close(c.energy_per_million_output_tokens, 0.016667));
    }
}
