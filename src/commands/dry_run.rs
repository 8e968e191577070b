//! `--dry-run`: builds every case's dataset and prints its shape; sends nothing.

use crate::cli::exit;
use crate::metrics::stats::{mean, percentile};
use crate::planner::Planned;
use crate::tokenizer::TokenModel;

/// Prints, per case, the request count and input/output length statistics.
pub fn print(p: &Planned) -> u8 {
    println!(
        "{:<44} {:>6}  {:>34}  {:>34}  {:>10}",
        "case", "reqs", "input min/mean/p50/p99/max", "output min/mean/p50/p99/max", "tokens"
    );
    for case in &p.cases {
        let svc = &p.plan.services[&case.service];
        // Without traffic, only a local tokenizer can be used; the simulator's is built in.
        let tokens = match svc.tokenizer_path() {
            Some(path) => match TokenModel::load(&path) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("error: {}: {e}", case.id);
                    return exit::RUNTIME;
                }
            },
            None => TokenModel::Builtin,
        };
        let inputs = match crate::dataset::build(&case.params, &tokens, &p.source.dir) {
            Ok(i) => i,
            Err(e) => {
                eprintln!("error: {}: {e}", case.id);
                return exit::BAD_PLAN;
            }
        };
        let ins: Vec<f64> = inputs.iter().map(|r| r.prompt_len as f64).collect();
        let outs: Vec<f64> = inputs.iter().map(|r| r.output_len as f64).collect();
        let five = |v: &[f64]| {
            format!(
                "{:.0}/{:.1}/{:.0}/{:.0}/{:.0}",
                v.iter().copied().fold(f64::INFINITY, f64::min),
                mean(v),
                percentile(v, 50.0),
                percentile(v, 99.0),
                v.iter().copied().fold(0.0, f64::max)
            )
        };
        let total: f64 = ins.iter().sum::<f64>() + outs.iter().sum::<f64>();
        println!(
            "{:<44} {:>6}  {:>34}  {:>34}  {:>10}",
            case.id,
            inputs.len(),
            five(&ins),
            five(&outs),
            total
        );
    }
    exit::OK
}
