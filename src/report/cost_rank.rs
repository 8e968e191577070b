//! "Cheapest per token at the SLOs": a plan's measured cases that have a cost
//! (`benchplan.cost`), ranked by cost per million output tokens, those that met their
//! SLOs first. Across a fleet of services or serving configurations it answers which
//! one is cheapest per token while it meets the SLOs.

use serde::Serialize;

use crate::results::read::EnergyCost;

/// What a case brings to the ranking.
pub struct Entry<'a> {
    pub label: &'a str,
    pub id: &'a str,
    /// Measured (`ok`).
    pub measured: bool,
    pub slo_pass: Option<bool>,
    pub out_tok_s: Option<f64>,
    pub energy_cost: Option<&'a EnergyCost>,
}

/// One case's place.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostRank {
    /// 1 for the cheapest that met its SLOs; None for a case that did not meet them.
    pub rank: Option<usize>,
    pub label: String,
    pub id: String,
    pub cost_per_million_output_tokens: f64,
    /// The plan's word (escaped where it lands).
    pub currency: Option<String>,
    pub joules_per_output_token: Option<f64>,
    pub out_tok_s: Option<f64>,
    pub meets_slos: bool,
}

/// The ranking; empty unless a measured case has a cost.
pub fn rank(cases: &[Entry<'_>]) -> Vec<CostRank> {
    let mut out: Vec<CostRank> = cases
        .iter()
        .filter(|c| c.measured)
        .filter_map(|c| {
            let ec = c.energy_cost?;
            Some(CostRank {
                rank: None,
                label: c.label.to_string(),
                id: c.id.to_string(),
                cost_per_million_output_tokens: ec
                    .cost_per_million_output_tokens
                    .filter(|v| v.is_finite())?,
                currency: ec.currency.clone(),
                joules_per_output_token: ec.joules_per_output_token,
                out_tok_s: c.out_tok_s,
                meets_slos: c.slo_pass != Some(false),
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.meets_slos.cmp(&a.meets_slos).then(
            a.cost_per_million_output_tokens
                .total_cmp(&b.cost_per_million_output_tokens),
        )
    });
    for (i, r) in out.iter_mut().filter(|r| r.meets_slos).enumerate() {
        r.rank = Some(i + 1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three cases: the cheapest misses its SLOs, so the next is first.
    #[test]
    fn the_cheapest_that_meets_the_slos_is_first() {
        let cost = |c: f64| EnergyCost {
            cost_per_million_output_tokens: Some(c),
            currency: Some("USD".into()),
            ..EnergyCost::default()
        };
        let (a, b, c) = (cost(1.0), cost(2.0), cost(3.0));
        let e = |label: &'static str, pass: bool, ec: &'static EnergyCost| Entry {
            label,
            id: label,
            measured: true,
            slo_pass: Some(pass),
            out_tok_s: None,
            energy_cost: Some(ec),
        };
        let (a, b, c): (&'static _, &'static _, &'static _) = (
            Box::leak(Box::new(a)),
            Box::leak(Box::new(b)),
            Box::leak(Box::new(c)),
        );
        let r = rank(&[e("c", true, c), e("a", false, a), e("b", true, b)]);
        let order: Vec<(&str, Option<usize>)> =
            r.iter().map(|x| (x.label.as_str(), x.rank)).collect();
        assert_eq!(order, vec![("b", Some(1)), ("c", Some(2)), ("a", None)]);
    }
}
