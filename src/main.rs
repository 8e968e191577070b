//! The `benchplan` binary: parse the command line, run, map the verdict to an exit code.

use std::process::ExitCode;

use benchplan::exit::Exit;
fn main() -> ExitCode {
    // Before anything opens a socket: a high-concurrency case needs more than the
    // usual soft limit of open files.
    benchplan::load::fdlimit::raise();
    let cli = match benchplan::cli::Cli::parse_from_args(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // Usage errors share the bad-plan exit code; --help and --version are not errors.
            let verdict = if e.use_stderr() {
                Exit::BadPlan
            } else {
                Exit::Ok
            };
            return ExitCode::from(verdict.code());
        }
    };
    ExitCode::from(benchplan::cli::run(cli).code())
}
