//! `--dry-run`: builds every case's dataset and prints its shape; sends nothing.

use crate::dataset::conversations::{self, Conversations, History};
use crate::exit::Exit;
use crate::metrics::stats::{mean, percentile};
use crate::plan::Dataset;
use crate::plan::Service;
use crate::planner::Planned;
use crate::planner::tokenizer::{TOKENIZER_OPTIONS, is_hub_id};
use crate::service::target::resolve_tokenizer;
use crate::tokenizer::{TokenModel, hf_offline};

/// Prints, per case, the request count and input/output length statistics.
pub fn print(p: &Planned) -> Exit {
    let mut header = false;
    let mut noted = std::collections::HashSet::new();
    for case in &p.cases {
        let svc = &p.plan.services[&case.service];
        let tokens = match tokens_for(svc) {
            Ok(Tokens::Found(t)) => t,
            Ok(Tokens::NeedsServer(why)) => {
                if noted.insert(case.service.clone()) {
                    eprintln!(
                        "note: {}: {why}, which --dry-run does not contact; lengths below use the built-in word tokenizer",
                        case.service
                    );
                }
                TokenModel::Builtin
            }
            Err(e) => {
                eprintln!("error: {}: {e}", case.id);
                return Exit::BadPlan;
            }
        };
        if let Dataset::MultiTurn(d) = &case.params.dataset {
            let n = case.params.num_prompts as usize;
            match conversations::build(d, n, case.params.seed, &tokens, &p.source.dir) {
                Ok(c) => print_turns(&case.id, &c),
                Err(e) => {
                    eprintln!("error: {}: {e}", case.id);
                    return Exit::BadPlan;
                }
            }
            continue;
        }
        let inputs = match crate::dataset::build(&case.params, &tokens, &p.source.dir) {
            Ok(i) => i,
            Err(e) => {
                eprintln!("error: {}: {e}", case.id);
                return Exit::BadPlan;
            }
        };
        if !std::mem::replace(&mut header, true) {
            println!(
                "{:<44} {:>6}  {:>34}  {:>34}  {:>10}",
                "case",
                "reqs",
                "input min/mean/p50/p99/max",
                "output min/mean/p50/p99/max",
                "tokens"
            );
        }
        let ins: Vec<f64> = inputs.iter().map(|r| r.prompt_len as f64).collect();
        let outs: Vec<f64> = inputs.iter().map(|r| r.output_len as f64).collect();
        let total: f64 = ins.iter().sum::<f64>() + outs.iter().sum::<f64>();
        println!(
            "{:<44} {:>6}  {:>34}  {:>34}  {:>10}",
            case.id,
            inputs.len(),
            five(&ins, 0, 1),
            five(&outs, 0, 1),
            total
        );
        // Audio cases upload clips: their lengths are the workload more than the tokens.
        let secs: Vec<f64> = inputs.iter().map(|r| r.audio_duration()).collect();
        if secs.iter().any(|s| *s > 0.0) {
            println!(
                "{:<44} {:>6}  audio s min/mean/p50/p99/max {}  total {:.1} s",
                "",
                "",
                five(&secs, 2, 2),
                secs.iter().sum::<f64>()
            );
        }
    }
    Exit::Ok
}

/// min/mean/p50/p99/max of `v`, the mean with `mean_digits` decimals and the rest
/// with `digits`.
fn five(v: &[f64], digits: usize, mean_digits: usize) -> String {
    format!(
        "{:.d$}/{:.m$}/{:.d$}/{:.d$}/{:.d$}",
        v.iter().copied().fold(f64::INFINITY, f64::min),
        mean(v),
        percentile(v, 50.0),
        percentile(v, 99.0),
        v.iter().copied().fold(0.0, f64::max),
        d = digits,
        m = mean_digits
    )
}

/// The tokenizer a dry run can use: the one the run would load, when it is on this machine.
enum Tokens {
    Found(TokenModel),
    /// Only the server (its /tokenize, its /v1/models, or the hub) can tell.
    NeedsServer(String),
}

fn tokens_for(svc: &Service) -> Result<Tokens, String> {
    let name = match (svc.tokenizer.as_deref(), svc.model.as_deref()) {
        _ if svc.is_sim() => "",
        (Some("server"), _) => {
            return Ok(Tokens::NeedsServer(
                "tokenizer = \"server\" counts tokens on the server".into(),
            ));
        }
        (Some(t), _) => t,
        (None, Some(m)) => m,
        (None, None) => {
            return Ok(Tokens::NeedsServer(
                "the tokenizer is the model root that /v1/models reports".into(),
            ));
        }
    };
    let base_url = svc
        .base_url
        .as_deref()
        .and_then(|u| crate::base_url::BaseUrl::parse(u).ok());
    match resolve_tokenizer(svc, base_url.as_ref(), name) {
        Ok((t, _)) => Ok(Tokens::Found(t)),
        Err(_) if is_hub_id(name) && !hf_offline() => Ok(Tokens::NeedsServer(format!(
            "`{name}` is downloaded from the Hugging Face hub at run time"
        ))),
        Err(e) => Err(format!("{e}; {TOKENIZER_OPTIONS}")),
    }
}

/// A multi-turn case: per turn index, the conversations that reach it, the tokens the
/// turn's own message adds, and the input it sends with its history (live replies
/// counted at their requested length).
fn print_turns(id: &str, c: &Conversations) {
    let expected = c.expected_input_lens();
    let history = match c.history {
        History::Live => "live replies",
        History::Recorded => "recorded replies",
        History::None => "none (prefix sharing)",
    };
    println!(
        "{id}: {} conversations, {} turns, history: {history}",
        c.list.len(),
        c.total_turns()
    );
    println!(
        "  {:>4} {:>6}  {:>22}  {:>30}  {:>8}",
        "turn", "convs", "new input min/mean/max", "input sent min/mean/p50/max", "output"
    );
    let max_turns = c.list.iter().map(|c| c.turns.len()).max().unwrap_or(0);
    for k in 0..max_turns {
        let turns: Vec<_> = c.list.iter().filter_map(|conv| conv.turns.get(k)).collect();
        let new: Vec<f64> = turns.iter().map(|t| t.user_len as f64).collect();
        let sent: Vec<f64> = expected
            .iter()
            .filter_map(|e| e.get(k))
            .map(|&x| x as f64)
            .collect();
        let out: Vec<f64> = turns.iter().map(|t| t.output_len as f64).collect();
        let lo = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        println!(
            "  {:>4} {:>6}  {:>22}  {:>30}  {:>8.1}",
            k + 1,
            turns.len(),
            format!("{:.0}/{:.1}/{:.0}", lo(&new), mean(&new), hi(&new)),
            format!(
                "{:.0}/{:.1}/{:.0}/{:.0}",
                lo(&sent),
                mean(&sent),
                percentile(&sent, 50.0),
                hi(&sent)
            ),
            mean(&out)
        );
    }
}
