//! `benchplan bench`: one case from the command line, with `vllm bench serve`'s flags,
//! names and meanings, so a script can swap the command and keep its arguments.
//! [`args`] turns the flags into a one-case plan; this module validates it like any
//! plan, runs it and writes the result where vLLM would.

pub mod args;
mod flag_words;
mod one;
pub mod print;
pub mod refused;
pub mod sweep;

pub use args::BenchArgs;
pub use one::{OneRun, run_one};
pub use print::print_summary;

use crate::exit::Exit;

/// `bench`: the A/B comparison form, a sweep, or one run.
pub fn run(args: &BenchArgs) -> Exit {
    // vllm-bench's A/B form: no traffic, the same comparison and exit codes as `compare`.
    if let [base, cand] = &args.compare[..] {
        // vLLM's form compares vLLM's numbers: the whole run.
        return crate::commands::report::compare(
            base,
            cand,
            Some("5%"),
            &[],
            Some(crate::plan::Measure::Whole),
        );
    }
    if args.trust_remote_code {
        eprintln!(
            "note: --trust-remote-code changes nothing here: benchplan runs no model or tokenizer code"
        );
    }
    if args.sweep_max_concurrency.is_some() || args.sweep_request_rate.is_some() {
        return sweep::run(args);
    }
    run_one(args).exit
}
