//! `benchplan trend HISTORY` and `benchplan history import`: the change points of a
//! history, judged and written out; run folders and vLLM result files appended to one.

use std::path::{Path, PathBuf};

use crate::exit::Exit;
use crate::trend::analyze::{TrendSettings, analyze};
use crate::trend::{history, render};

/// What `trend` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TrendFormat {
    /// The markdown report, verdict first.
    Md,
    /// Every series with its change points.
    Json,
}

/// What `trend` was asked.
#[derive(Debug, Clone)]
pub struct TrendArgs {
    pub history: PathBuf,
    pub settings: TrendSettings,
    pub out: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    pub format: TrendFormat,
}

/// Judges the history: prints the markdown, writes the files asked for, appends the
/// step summary in a GitHub job. Exit 4 on a recent regression, 2 on bad input.
pub fn run(args: &TrendArgs) -> Exit {
    if args.settings.change.window < 2 {
        eprintln!("error: --window must be at least 2");
        return Exit::BadPlan;
    }
    if !(args.settings.change.max_pvalue > 0.0 && args.settings.change.max_pvalue < 1.0) {
        eprintln!("error: --max-pvalue must be between 0 and 1");
        return Exit::BadPlan;
    }
    let entries = match history::read(&args.history) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadPlan;
        }
    };
    let trend = analyze(&entries, &args.settings);
    let md = render::markdown(&trend);
    let mut code = if trend.regressions > 0 {
        Exit::Regression
    } else {
        Exit::Ok
    };
    let mut outputs: Vec<(PathBuf, String)> = Vec::new();
    if let Some(dir) = &args.out {
        outputs.push((dir.join("trend.md"), md.clone()));
        outputs.push((dir.join("trend.html"), render::html(&trend)));
    }
    if let Some(j) = &args.junit {
        outputs.push((j.clone(), render::junit(&trend)));
    }
    for (path, text) in outputs {
        if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(d);
        }
        if let Err(e) = crate::files::write_atomic(&path, text.as_bytes()) {
            eprintln!("error: cannot write {}: {e}", path.display());
            code = code.worst(Exit::Runtime);
        }
    }
    crate::report::write::append_step_summary(&render::summary(&trend));
    let text = if args.format == TrendFormat::Json {
        format!(
            "{}\n",
            serde_json::to_string_pretty(&trend).expect("a trend serialises")
        )
    } else {
        md
    };
    // A reader that stops early (`| head`) ends the printing, not the verdict.
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("error: cannot print the trend: {e}");
            code.worst(Exit::Runtime)
        }
        _ => code,
    }
}

/// Appends each path's cases to the history, in the order given.
pub fn import(history_path: &Path, paths: &[PathBuf]) -> Exit {
    let metrics = crate::report::compare::compared_metrics(&Default::default());
    let mut all = Vec::new();
    for p in paths {
        match history::entries_of(p, &metrics) {
            Ok(e) => all.extend(e),
            Err(e) => {
                eprintln!("error: {e}");
                return Exit::BadPlan;
            }
        }
    }
    if let Err(e) = history::append(history_path, &all) {
        eprintln!("error: {e}");
        return Exit::Runtime;
    }
    eprintln!(
        "appended {} case(s) of {} path(s) to {}",
        all.len(),
        paths.len(),
        history_path.display()
    );
    Exit::Ok
}
