//! `benchplan run`: a plan's selected cases through the executor, then its SLO
//! searches; its arguments, and the share of the plan a shard runs.

use std::path::PathBuf;

use crate::exit::Exit;
use crate::planner::Planned;

/// What `run` is told beside the plan.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Results folder (default: the plan's execution.results_dir).
    #[arg(long)]
    pub results_dir: Option<PathBuf>,
    /// A minijinja template replacing the built-in report.
    #[arg(long)]
    pub template: Option<PathBuf>,
    /// A minijinja template replacing the built-in report.html.
    #[arg(long)]
    pub html_template: Option<PathBuf>,
    /// Draw no SVG charts (report.md and report.html then have none).
    #[arg(long)]
    pub no_charts: bool,
    /// Build every case's dataset, print its lengths, send nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Without a terminal (a CI log), one progress line per running case this often,
    /// in seconds (0: none).
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub progress_every: f64,
    /// Finish the unfinished cases of an earlier run folder (the plan must be unchanged).
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// Run only the cases of these services or whose ids match these globs (`*`,
    /// `?`): into a new folder, or with --resume, again in that folder (their old
    /// results replaced; the others kept). Repeatable.
    #[arg(long, value_name = "PATTERN", num_args = 1..)]
    pub only: Vec<String>,
    /// Write JUnit XML: one test per case and SLO.
    #[arg(long)]
    pub junit: Option<PathBuf>,
}

/// Running one share of a plan's cases (see `planner::shard`).
#[derive(Debug, Clone, clap::Args)]
pub struct ShardArgs {
    /// Run only shard I of N (0-based I, such as 0/3): this process's share of the cases.
    #[arg(long, value_name = "I/N", conflicts_with = "shard_from_env")]
    pub shard: Option<String>,
    /// Read I (and N) from JOB_COMPLETION_INDEX (Kubernetes Indexed Jobs, with --shard-count), CI_NODE_INDEX/CI_NODE_TOTAL (GitLab) or BENCHPLAN_SHARD_INDEX/BENCHPLAN_SHARD_COUNT.
    #[arg(long)]
    pub shard_from_env: bool,
    /// N for --shard-from-env when the environment has only the index (a Job's `completions`).
    #[arg(long, value_name = "N")]
    pub shard_count: Option<usize>,
    /// Cut shards by service (default: no two shards load one endpoint), by case, or by repeat (one case's repeats on several shards, pooled by the merge).
    #[arg(long, value_enum, default_value_t)]
    pub shard_by: crate::planner::shard::ShardBy,
    /// Exit 0 whenever the shard ran, even when an SLO failed or a metric regressed: the merge judges.
    #[arg(long)]
    pub defer_verdict: bool,
}

impl ShardArgs {
    /// The shard this process runs, if it runs one.
    pub fn shard(&self) -> Result<Option<crate::planner::shard::Shard>, String> {
        use crate::planner::shard::Shard;
        if let Some(text) = &self.shard {
            return Shard::parse(text, self.shard_by).map(Some);
        }
        if self.shard_from_env {
            return Shard::from_env(self.shard_count, self.shard_by, &|k| std::env::var(k).ok())
                .map(Some);
        }
        Ok(None)
    }
}

/// Runs the cases of `full` that `--shard` and `--only` select, then its searches; the
/// worse verdict wins.
pub fn run(full: &Planned, args: RunArgs, shard: &ShardArgs) -> Exit {
    let picked = match shard.shard() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadPlan;
        }
    };
    let selection = match full.select(picked, &args.only, args.resume.is_some()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadPlan;
        }
    };
    for n in &selection.notes {
        eprintln!("{n}");
    }
    let p = &selection.planned;
    if args.dry_run {
        return crate::commands::dry_run::print(p);
    }
    let settings = settings(full, p, args, picked);
    let code = crate::executor::run(p, &settings);
    // A shard's verdict belongs to the merge; a tool error still fails the shard.
    if shard.defer_verdict && matches!(code, Exit::SloViolated | Exit::Regression) {
        eprintln!("verdict deferred to the merge (--defer-verdict): exit 0");
        return Exit::Ok;
    }
    if p.plan.optimize.is_none() || code == Exit::Runtime {
        return code;
    }
    // Then the searches; the worse verdict wins (see `Exit::worst`).
    code.worst(crate::optimize::run::run(
        p,
        settings.results_dir.as_deref(),
        !settings.no_charts,
    ))
}

/// The executor's settings: the flags over the plan's `report` and `execution`, the
/// progress display the terminal allows, and a shard's share of the whole plan.
fn settings(
    full: &Planned,
    p: &Planned,
    args: RunArgs,
    picked: Option<crate::planner::shard::Shard>,
) -> crate::executor::RunSettings {
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    crate::executor::RunSettings {
        results_dir: args.results_dir,
        template: args.template.or_else(|| p.plan.report.template.clone()),
        html_template: args
            .html_template
            .or_else(|| p.plan.report.html_template.clone()),
        no_charts: args.no_charts || !p.plan.report.charts,
        command: crate::redact::this_command(),
        progress: !args.quiet && terminal,
        progress_lines: (!args.quiet
            && !terminal
            && args.progress_every > 0.0
            && args.progress_every.is_finite())
        .then(|| std::time::Duration::from_secs_f64(args.progress_every)),
        quiet: args.quiet,
        resume: args.resume,
        rerun: args.only,
        junit: args.junit,
        shard: picked.map(|s| crate::executor::ShardRun {
            shard: s,
            plan_hash: crate::executor::plan_hash(full),
            all_cases: full.cases.len(),
            all_ids: full.cases.iter().map(|c| c.id.clone()).collect(),
        }),
    }
}
