//! The `benchplan` binary: parse the command line, run, map the outcome to an exit code.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match benchplan::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // Usage errors share the bad-plan exit code; --help and --version are not errors.
            return ExitCode::from(if e.use_stderr() {
                benchplan::cli::exit::BAD_PLAN
            } else {
                0
            });
        }
    };
    benchplan::cli::run(cli)
}
