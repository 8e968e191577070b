//! Writing a run's reports into its folder: report.md and report.html from the
//! plan's or the built-in templates, the charts, summary.csv and metrics.prom; the
//! markdown on stdout and the verdict in $GITHUB_STEP_SUMMARY. `run`, `report` and
//! `merge` all write through [`write_reports`].

use std::io::Write;
use std::path::{Path, PathBuf};

use super::csv::Row;
use super::view::ReportView;
use crate::exit::Exit;
use crate::files::write_atomic;

/// Which templates render the reports, and whether charts are drawn.
#[derive(Debug, Clone, Default)]
pub struct Templates {
    /// A minijinja template replacing the built-in report.md.
    pub template: Option<PathBuf>,
    /// A minijinja template replacing the built-in report.html.
    pub html_template: Option<PathBuf>,
    /// Draw no charts (`--no-charts`, or `report.charts = false`).
    pub no_charts: bool,
}

/// A template: the given file (relative to the plan's folder unless it exists as
/// given), or the built-in one.
fn template_source(
    custom: Option<&PathBuf>,
    plan_dir: &Path,
    builtin: (&str, &str),
) -> Result<(String, String), String> {
    match custom {
        Some(p) => {
            let p = if p.is_absolute() || p.exists() {
                p.clone()
            } else {
                plan_dir.join(p)
            };
            std::fs::read_to_string(&p)
                .map(|s| (p.display().to_string(), s))
                .map_err(|e| format!("cannot read template {}: {e}", p.display()))
        }
        None => Ok((builtin.0.to_string(), builtin.1.to_string())),
    }
}

/// Draws the charts into `dir/charts/` and lists them in the view (none with
/// `--no-charts`). A chart that cannot be written is a warning, not a failed run.
fn write_charts(
    dir: &Path,
    report: &mut ReportView,
    rows: &[Row],
    settings: &Templates,
) -> Vec<super::charts::Chart> {
    if settings.no_charts {
        return Vec::new();
    }
    let charts = super::charts::draw(&report.cases, rows);
    if charts.is_empty() {
        return charts;
    }
    if let Err(e) = std::fs::create_dir_all(dir.join("charts")) {
        eprintln!(
            "warning: cannot create {}: {e}; no charts",
            dir.join("charts").display()
        );
        return Vec::new();
    }
    let mut written = Vec::new();
    for c in charts {
        match write_atomic(&dir.join(&c.view.file), c.svg.as_bytes()) {
            Ok(()) => written.push(c),
            Err(e) => eprintln!("warning: cannot write {}: {e}", c.view.file),
        }
    }
    report.charts = written.iter().map(|c| c.view.clone()).collect();
    written
}

/// Renders report.md and report.html (the plan's or the built-in templates), draws
/// the charts, writes summary.csv and metrics.prom into `dir`, prints the markdown,
/// and appends it to $GITHUB_STEP_SUMMARY when that is set.
pub fn write_reports(
    dir: &Path,
    report: &ReportView,
    rows: &[Row],
    settings: &Templates,
    plan_dir: &Path,
) -> Exit {
    let sources = template_source(
        settings.template.as_ref(),
        plan_dir,
        ("report.md.j2", super::REPORT_MD),
    )
    .and_then(|md| {
        template_source(
            settings.html_template.as_ref(),
            plan_dir,
            ("report.html.j2", super::REPORT_HTML),
        )
        .map(|html| (md, html))
    });
    let ((name, source), (html_name, html_source)) = match sources {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadPlan;
        }
    };
    let mut report = report.clone();
    let charts = write_charts(dir, &mut report, rows, settings);
    let report = &report;
    let md = match super::render(&name, &source, report) {
        Ok(md) => md,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadPlan;
        }
    };
    let svgs: std::collections::BTreeMap<&str, &str> = charts
        .iter()
        .map(|c| (c.view.file.as_str(), c.svg.as_str()))
        .collect();
    let html = match super::render_html(&html_name, &html_source, report, &svgs) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadPlan;
        }
    };
    let csv = match super::csv::summary_csv(rows) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: cannot build summary.csv: {e}");
            return Exit::Runtime;
        }
    };
    let prom = super::openmetrics::openmetrics(rows, &report.cases);
    // Every output is tried, whatever failed before it (a full disk may still take a
    // small file), and each one that could not be written is named.
    let mut unwritten = Vec::new();
    for (file, bytes) in [
        ("report.md", md.as_bytes()),
        ("report.html", html.as_bytes()),
        ("summary.csv", csv.as_bytes()),
        ("metrics.prom", prom.as_bytes()),
    ] {
        if let Err(e) = write_atomic(&dir.join(file), bytes) {
            eprintln!("error: cannot write {}: {e}", dir.join(file).display());
            unwritten.push(file.to_string());
        }
    }
    if step_summary_path().is_some() {
        // The verdict and what failed, not the whole report: GitHub caps a step summary
        // at 1 MiB and cannot show the charts' relative links.
        match super::render("summary.md.j2", super::SUMMARY_MD, report) {
            Ok(text) => append_step_summary(&text),
            Err(e) => eprintln!("warning: no step summary: {e}"),
        }
    }
    // The report reaches stdout even when no file could hold it. A closed pipe
    // (`| head`) ends the printing, not the run.
    let _ = writeln!(std::io::stdout().lock(), "{md}");
    if unwritten.is_empty() {
        Exit::Ok
    } else {
        eprintln!(
            "error: not written: {} (the report above is on stdout)",
            unwritten.join(", ")
        );
        Exit::Runtime
    }
}

/// The job's step summary file: `$GITHUB_STEP_SUMMARY` when it is set and not empty
/// (an empty value, as a job that clears it leaves, means no step summary).
pub fn step_summary_path() -> Option<std::ffi::OsString> {
    std::env::var_os("GITHUB_STEP_SUMMARY").filter(|v| !v.is_empty())
}

/// Appends markdown to the job's step summary in a GitHub job (`$GITHUB_STEP_SUMMARY`),
/// a blank line from what an earlier step wrote; a failure to append is a warning.
pub fn append_step_summary(text: &str) {
    let Some(summary) = step_summary_path() else {
        return;
    };
    let text = format!("{}\n", text.trim_end());
    if let Err(e) = crate::files::append_json_line(Path::new(&summary), text.as_bytes()) {
        eprintln!("warning: cannot append to $GITHUB_STEP_SUMMARY: {e}");
    }
}
