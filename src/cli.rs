//! The command line: clap definitions and the commands that need no traffic.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::diag::Diagnostics;
use crate::exit::Exit;
use crate::plan::{Format, PlanSource};
use crate::planner::{self, Planned};

#[derive(Debug, Parser)]
#[command(
    name = "benchplan",
    version,
    about = "Benchmark LLM serving endpoints from plan files"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The full command: the derive's, with the `vllm bench serve` flags `bench`
    /// refuses added (hidden) so they reach [`crate::commands::bench::refused`].
    pub fn full_command() -> clap::Command {
        use clap::CommandFactory;
        Cli::command().mut_subcommand("bench", crate::commands::bench::refused::with_refused_flags)
    }

    /// Parses a command line; a refused `vllm bench serve` flag is a usage error that
    /// says what to use instead.
    pub fn parse_from_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::FromArgMatches;
        let m = Cli::full_command().try_get_matches_from(args)?;
        if let Some(("bench", b)) = m.subcommand() {
            crate::commands::bench::refused::check(b).map_err(|msg| {
                clap::Error::raw(clap::error::ErrorKind::ArgumentConflict, format!("{msg}\n"))
            })?;
        }
        Cli::from_arg_matches(&m)
    }
}

#[derive(Debug, Subcommand)]
pub enum HistoryAction {
    /// Append run folders and `vllm bench serve` result files (or folders of them).
    Import {
        /// The history file to append to (created when missing).
        #[arg(long)]
        history: PathBuf,
        /// Run folders, result files or folders of result files, oldest first.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum TraceAction {
    /// What a trace will do to a cache: rows, span, request rate over time, length
    /// percentiles, sessions, and the share of prompt tokens an unbounded prefix cache
    /// would serve.
    Stats {
        /// The trace file (JSONL, or CSV for length-only traces).
        file: PathBuf,
        /// The trace's layout (detected from its first line when not given, and said).
        #[arg(long = "trace-format", value_parser = ["mooncake", "bailian", "sessions", "lengths"])]
        trace_format: Option<String>,
        /// Tokens per hash id (default: the format's: mooncake 512, bailian 16, sessions 64).
        #[arg(long)]
        block_size: Option<u64>,
        /// Fit rows whose hash ids do not cover their length, and count them, instead
        /// of refusing the trace.
        #[arg(long)]
        fit_inconsistent: bool,
        /// md or json.
        #[arg(long, default_value = "md", value_parser = ["md", "json"])]
        format: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Parse and validate a plan; list every problem with file, line, key path and a fix.
    Validate(PlanArgs),
    /// Print the expanded cases (ids and parameters); sends no traffic.
    Cases {
        #[command(flatten)]
        plan: PlanArgs,
        /// Print a JSON array of {id, service, params}.
        #[arg(long)]
        json: bool,
    },
    /// Print the plan JSON schema.
    Schema,
    /// Run the embedded simulator as a standalone OpenAI-compatible server.
    Sim(crate::sim::cli::SimArgs),
    /// Run every case of a plan, write the results tree and the report, exit with a verdict.
    Run {
        #[command(flatten)]
        plan: PlanArgs,
        #[command(flatten)]
        run: crate::commands::run::RunArgs,
        #[command(flatten)]
        shard: crate::commands::run::ShardArgs,
    },
    /// Run only the plan's SLO searches (`run` runs them after the matrix).
    Optimize {
        #[command(flatten)]
        plan: PlanArgs,
        /// Results folder (default: the plan's execution.results_dir).
        #[arg(long)]
        results_dir: Option<PathBuf>,
        /// Draw no search charts.
        #[arg(long)]
        no_charts: bool,
    },
    /// Ask a service what it is and whether it is ready: health, models, endpoints, one smoke request.
    Probe {
        /// The server's base URL, such as http://127.0.0.1:8000.
        url: String,
        /// Probe only this backend's endpoint.
        #[arg(long, value_enum)]
        backend: Option<crate::plan::Backend>,
        /// The model to send (default: the first of /v1/models).
        #[arg(long)]
        model: Option<String>,
        /// Skip TLS certificate verification.
        #[arg(long)]
        insecure: bool,
        /// A header sent with every request, KEY=VALUE (its value is never printed). Repeatable.
        #[arg(long, value_name = "KEY=VALUE")]
        header: Vec<String>,
        /// The environment variable holding the API key (sent as a bearer token).
        #[arg(long, default_value = "OPENAI_API_KEY")]
        api_key_env: String,
    },
    /// Re-render the report of a run folder (or a folder of `vllm bench serve` results).
    Report {
        /// A run folder, or a folder of `vllm bench serve` result files.
        dir: PathBuf,
        /// A minijinja template replacing the built-in report.
        #[arg(long)]
        template: Option<PathBuf>,
        /// A minijinja template replacing the built-in report.html.
        #[arg(long)]
        html_template: Option<PathBuf>,
        /// Draw no SVG charts.
        #[arg(long)]
        no_charts: bool,
        /// md, csv or json.
        #[arg(long, default_value = "md")]
        format: String,
        /// Write report.md, report.html, charts/, summary.csv and metrics.prom here
        /// (created if missing) instead of into DIR; needed for a folder benchplan did
        /// not write.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Change points over a history (E-divisive means with a t-test, as Apache Otava):
    /// exit 4 when a series' newest change, within the last runs, is a regression.
    Trend {
        /// A history file (JSON lines) that `run` (report.history) or `history import` wrote.
        history: PathBuf,
        /// Points per sliding window.
        #[arg(long, default_value_t = 50)]
        window: usize,
        /// A change point must have a t-test p-value below this.
        #[arg(long, default_value_t = 0.001)]
        max_pvalue: f64,
        /// A change point must change the mean by more than this fraction (0.05 = 5%).
        /// Default: each metric's baseline-gate threshold (5%); 0 with --confirm 1 is
        /// Apache Otava's own answer.
        #[arg(long)]
        min_magnitude: Option<f64>,
        /// A regression counts once this many runs sit after its change point; with
        /// fewer it is "suspect": listed, exit 0.
        #[arg(long, default_value_t = 2)]
        confirm: usize,
        /// A regression fails the trend when its change point is among the newest this
        /// many runs (a change is seen a few runs after it happened; a job that ran on it
        /// nightly has had ten nights to act).
        #[arg(long, default_value_t = 10)]
        last: usize,
        /// Write trend.md and trend.html into this folder.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Write a JUnit XML file.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// What to print.
        #[arg(long, value_enum, default_value_t = crate::commands::trend::TrendFormat::Md)]
        format: crate::commands::trend::TrendFormat,
    },
    /// A plan's history of runs.
    History {
        #[command(subcommand)]
        action: HistoryAction,
    },
    /// Production traces (Mooncake, Bailian, agentic sessions, length-only).
    Trace {
        #[command(subcommand)]
        action: TraceAction,
    },
    /// Compare two runs: per-metric deltas, exit 4 on a regression beyond the threshold.
    Compare {
        /// The baseline: a run folder or one result file.
        base: PathBuf,
        /// The candidate: a run folder or one result file.
        cand: PathBuf,
        /// A throughput drop or latency rise beyond this is a regression (default: the
        /// plan's `report.regression_threshold` when the folders carry their plan, else 5%).
        #[arg(long)]
        threshold: Option<String>,
        /// Per-metric threshold, such as p99_ttft_ms=10%. Repeatable.
        #[arg(long = "metric-threshold", value_name = "KEY=PCT")]
        metric_threshold: Vec<String>,
        /// What to compare: each case's steady window (`steady`) or the whole run
        /// (`whole`). Default: the plan's `report.measure`, else steady.
        #[arg(long, value_parser = ["steady", "whole"])]
        measure: Option<String>,
    },
    /// Merge the shard folders of one plan (`run --shard I/N`) into one run folder and report.
    Merge {
        /// Shard folders, or folders holding them (such as the shared results folder).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Where the merged run folder goes (under batch/).
        #[arg(long, default_value = "bench_results")]
        results_dir: PathBuf,
        /// Merge the shards that are there: the report says which are missing, exit 1.
        #[arg(long)]
        allow_partial: bool,
        /// Write JUnit XML of the merged run.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Compare the merged run with this run folder (default: the plan's report.baseline); a regression exits 4.
        #[arg(long)]
        baseline: Option<PathBuf>,
    },
    /// Benchmark one case with `vllm bench serve`'s flags.
    Bench(Box<crate::commands::bench::BenchArgs>),
    /// Write a commented starter plan (the simulator, or a server's first model) that validates as written.
    Init(crate::commands::init::InitArgs),
    /// Print a shell completion script, such as `benchplan completions bash > ~/.local/share/bash-completion/completions/benchplan`.
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write one page per command into a folder.
    Man {
        /// Write benchplan.1 and benchplan-COMMAND.1 here instead of printing benchplan.1.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

/// How a plan is read: the file, its format, and overrides.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Plan file (.toml, .yaml, .yml), or - for stdin with --format.
    pub plan: PathBuf,
    /// Override a plan value: --set defaults.num_prompts=50 (dotted path; JSON or plain value). Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Plan syntax, when the file name does not tell.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
}

impl PlanArgs {
    /// Reads, overrides and plans; diagnostics on failure.
    pub fn load(&self) -> Result<Planned, Diagnostics> {
        let mut source = PlanSource::load(&self.plan, self.format)?;
        let mut errs = Vec::new();
        for s in &self.set {
            if let Err(d) = source.apply_set(s) {
                errs.push(d);
            }
        }
        if !errs.is_empty() {
            return Err(Diagnostics(errs));
        }
        planner::plan(source)
    }
}

/// Runs a parsed command line; `main` turns the verdict into the process exit code.
pub fn run(cli: Cli) -> Exit {
    match cli.command {
        Command::Validate(args) => with_plan(&args, crate::commands::validate::run),
        Command::Cases { plan, json } => with_plan(&plan, |p| cases(p, json)),
        Command::Schema => {
            print!("{}", crate::plan::schema::plan_schema_json());
            Exit::Ok
        }
        Command::Sim(args) => crate::sim::cli::run(&args),
        Command::Bench(args) => crate::commands::bench::run(&args),
        Command::Init(args) => crate::commands::init::run(&args),
        Command::Completions { shell } => completions(shell),
        Command::Man { dir } => match write_man(dir.as_deref()) {
            Ok(()) => Exit::Ok,
            Err(e) => {
                eprintln!("error: {e}");
                Exit::Runtime
            }
        },
        Command::Optimize {
            plan,
            results_dir,
            no_charts,
        } => with_plan(&plan, |p| {
            crate::optimize::run::run(
                p,
                results_dir.as_deref(),
                !no_charts && p.plan.report.charts,
            )
        }),
        Command::Probe {
            url,
            backend,
            model,
            insecure,
            header,
            api_key_env,
        } => crate::commands::probe::run(crate::commands::probe::ProbeArgs {
            url,
            backend,
            model,
            insecure,
            headers: header,
            api_key_env: Some(api_key_env),
        }),
        Command::Trend {
            history,
            window,
            max_pvalue,
            min_magnitude,
            confirm,
            last,
            out,
            junit,
            format,
        } => crate::commands::trend::run(&crate::commands::trend::TrendArgs {
            history,
            settings: crate::trend::analyze::TrendSettings {
                change: crate::trend::edivisive::Settings {
                    window,
                    max_pvalue,
                    min_magnitude: min_magnitude.unwrap_or(0.0),
                },
                recent: last,
                confirm,
                // Without --min-magnitude, each metric's baseline-gate threshold.
                gate: min_magnitude
                    .is_none()
                    .then(crate::plan::settings::Report::default),
            },
            out,
            junit,
            format,
        }),
        Command::History {
            action: HistoryAction::Import { history, paths },
        } => crate::commands::trend::import(&history, &paths),
        Command::Trace {
            action:
                TraceAction::Stats {
                    file,
                    trace_format,
                    block_size,
                    fit_inconsistent,
                    format,
                },
        } => crate::commands::trace::stats(
            &file,
            trace_format.as_deref(),
            block_size,
            fit_inconsistent,
            &format,
        ),
        Command::Report {
            dir,
            template,
            html_template,
            no_charts,
            format,
            out,
        } => crate::commands::report::run(
            &dir,
            out.as_deref(),
            crate::executor::RunSettings {
                template,
                html_template,
                no_charts,
                ..crate::executor::RunSettings::default()
            },
            &format,
        ),
        Command::Merge {
            dirs,
            results_dir,
            allow_partial,
            junit,
            baseline,
        } => crate::commands::merge::run(&crate::commands::merge::MergeArgs {
            dirs,
            results_dir,
            allow_partial,
            junit,
            baseline,
        }),
        Command::Compare {
            base,
            cand,
            threshold,
            metric_threshold,
            measure,
        } => crate::commands::report::compare(
            &base,
            &cand,
            threshold.as_deref(),
            &metric_threshold,
            measure.as_deref().map(|m| {
                if m == "whole" {
                    crate::plan::Measure::Whole
                } else {
                    crate::plan::Measure::Steady
                }
            }),
        ),
        Command::Run { plan, run, shard } => {
            with_plan(&plan, |full| crate::commands::run::run(full, run, &shard))
        }
    }
}

/// `cases`: the planned cases as a table or JSON (a closed pipe is not an error).
fn cases(p: &Planned, json: bool) -> Exit {
    let mut out = std::io::stdout().lock();
    let r = if json {
        print_cases_json(p, &mut out)
    } else {
        print_cases_table(p, &mut out)
    };
    match r {
        Ok(()) => Exit::Ok,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Exit::Ok,
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Runtime
        }
    }
}

/// `completions`: the shell's completion script.
fn completions(shell: clap_complete::Shell) -> Exit {
    // Into a buffer first: clap_complete panics on a closed pipe (`| head`).
    let mut script = Vec::new();
    // The derive's command: refused vLLM flags are not offered.
    let mut cmd = <Cli as clap::CommandFactory>::command();
    clap_complete::generate(shell, &mut cmd, "benchplan", &mut script);
    match std::io::stdout().write_all(&script) {
        Ok(()) => Exit::Ok,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Exit::Ok,
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Runtime
        }
    }
}

/// Man pages from the command line's own definitions (clap_mangen), so they never
/// drift from `--help`.
/// Prints benchplan.1, or writes it and one page per command into `dir`.
fn write_man(dir: Option<&std::path::Path>) -> Result<(), String> {
    let cmd = <Cli as clap::CommandFactory>::command();
    let Some(dir) = dir else {
        let mut out = std::io::stdout().lock();
        return clap_mangen::Man::new(cmd)
            .render(&mut out)
            .map_err(|e| e.to_string());
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let page = |cmd: clap::Command, name: String| -> Result<(), String> {
        let mut buf = Vec::new();
        // git's convention: the page of `benchplan bench` is benchplan-bench(1). A
        // command's name is 'static in clap; one leaked string per page is the price.
        let full: &'static str = Box::leak(name.clone().into_boxed_str());
        clap_mangen::Man::new(cmd.name(full))
            .render(&mut buf)
            .map_err(|e| e.to_string())?;
        let path = dir.join(format!("{name}.1"));
        crate::files::write_atomic(&path, &buf)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        page(sub.clone(), format!("benchplan-{}", sub.get_name()))?;
    }
    page(cmd, "benchplan".into())
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Loads the plan, prints warnings, and runs `f`; a bad plan prints every diagnostic and exits 2.
fn with_plan(args: &PlanArgs, f: impl FnOnce(&Planned) -> Exit) -> Exit {
    match args.load() {
        Ok(p) => {
            for w in &p.warnings {
                eprintln!("{w}");
            }
            f(&p)
        }
        Err(diags) => {
            eprintln!("{diags}");
            let n = diags.0.iter().filter(|d| d.is_error()).count();
            eprintln!("{n} error{} in {}", plural(n), args.plan.display());
            Exit::BadPlan
        }
    }
}

fn print_cases_json(p: &Planned, out: &mut impl Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &p.cases)?;
    writeln!(out)
}

fn print_cases_table(p: &Planned, out: &mut impl Write) -> std::io::Result<()> {
    // Columns: the matrix axes (what varies), after the id and service.
    let mut axes: Vec<&str> = p
        .plan
        .matrix
        .axes
        .keys()
        .map(String::as_str)
        .filter(|k| *k != "service")
        .collect();
    for c in &p.cases {
        for a in &c.assignments {
            if &*a.key != "service" && !axes.contains(&&*a.key) {
                axes.push(&a.key);
            }
        }
    }
    let mut rows: Vec<Vec<String>> = vec![
        ["#", "id", "service"]
            .iter()
            .map(|s| s.to_string())
            .chain(axes.iter().map(|s| s.to_string()))
            .collect(),
    ];
    for (i, c) in p.cases.iter().enumerate() {
        let mut row = vec![(i + 1).to_string(), c.id.clone(), c.service.clone()];
        for a in &axes {
            row.push(c.assigned(a).map_or_else(
                || "-".to_string(),
                |v| v.as_str().map_or_else(|| v.to_string(), str::to_string),
            ));
        }
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|j| rows.iter().map(|r| r[j].chars().count()).max().unwrap_or(0))
        .collect();
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        writeln!(out, "{}", line.join("  ").trim_end())?;
    }
    let (n, s) = (p.cases.len(), p.service_count());
    writeln!(out, "{n} case{}, {s} service{}", plural(n), plural(s))
}
