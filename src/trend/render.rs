//! A trend in the formats a nightly job reads: markdown (verdict first, then every
//! change point), HTML with one SVG chart per case and metric (the series, each
//! segment's mean, the change points marked, the SLO line), JUnit (one test per series)
//! and a short step summary. Everything from the history is escaped for where it lands.

use std::fmt::Write as _;

use super::analyze::{Series, Trend};
use crate::escape;

/// The one-line verdict.
pub fn verdict(t: &Trend) -> String {
    let suspect = if t.suspects > 0 {
        format!(
            " {} series suspect: worse in fewer than the {} runs that confirm a change (not failing).",
            t.suspects, t.settings.confirm
        )
    } else {
        String::new()
    };
    if t.regressions > 0 {
        format!(
            "**REGRESSION**: {} series changed for the worse in the last {} runs ({} runs, {} series).{suspect}",
            t.regressions,
            t.settings.recent,
            t.runs,
            t.series.len()
        )
    } else {
        format!(
            "**OK**: no regression among the change points of the last {} runs ({} runs, {} series).{suspect}",
            t.settings.recent,
            t.runs,
            t.series.len()
        )
    }
}

fn pct(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

/// The markdown report.
pub fn markdown(t: &Trend) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Trend\n\n{}\n", verdict(t));
    let _ = writeln!(
        s,
        "Change points by E-divisive means with a Student's t-test (Apache Otava's method): window {}, max p-value {}, min magnitude {}; a regression counts once {} run(s) sit after its change point.\n",
        t.settings.change.window,
        t.settings.change.max_pvalue,
        t.settings.min_magnitude_text(),
        t.settings.confirm
    );
    for line in recovered(t) {
        let _ = writeln!(s, "- {}", escape::markdown(&line));
    }
    let eps = episodes(t);
    if !eps.is_empty() {
        let _ = writeln!(
            s,
            "\n## Episodes\n\nThe regressions the history recorded, as they were judged:\n"
        );
        for line in eps {
            let _ = writeln!(s, "- {}", escape::markdown(&line));
        }
        s.push('\n');
    }
    let changed: Vec<&Series> = t.series.iter().filter(|s| !s.changes.is_empty()).collect();
    if changed.is_empty() {
        let _ = writeln!(s, "No change points.");
        return s;
    }
    let _ = writeln!(
        s,
        "| Case | Metric | Run | When | Before | After | Change | p-value | Verdict |\n|---|---|---|---|---|---|---|---|---|"
    );
    for se in changed {
        for (i, c) in se.changes.iter().enumerate() {
            let newest = i + 1 == se.changes.len();
            let verdict = match (c.regression, newest && se.regressed, newest && se.suspect) {
                (true, true, _) => "**regression**",
                (true, _, true) => "suspect",
                (true, _, _) => "worse",
                (false, _, _) => "better",
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {:.2} | {:.2} | {} | {:.2e} | {} |",
                escape::markdown(&se.case),
                escape::markdown(&se.metric),
                escape::markdown(&c.run),
                escape::markdown(&c.when),
                c.mean_before,
                c.mean_after,
                pct(c.change),
                c.pvalue,
                verdict
            );
        }
    }
    s
}

/// One line per regressed series, as plain text (`case metric: before → after
/// (+x%) from run R, p = …`): the step summary's list and the run report's.
pub fn regressions(t: &Trend) -> Vec<String> {
    lines(t, |s| s.regressed)
}

/// The same line for each suspect series (a recent regression not yet confirmed).
pub fn suspects(t: &Trend) -> Vec<String> {
    lines(t, |s| s.suspect)
}

/// One line per series back at its level after a recent regression (`case metric:
/// recovered, now X; was before → after from run R`).
pub fn recovered(t: &Trend) -> Vec<String> {
    t.series
        .iter()
        .filter(|s| s.recovered)
        .filter_map(|s| {
            let c = s.changes.get(s.judged?)?;
            Some(format!(
                "{} {}: recovered, now {:.2}; was {:.2} → {:.2} ({}) from run {}",
                s.case,
                s.metric,
                s.values.last()?,
                c.mean_before,
                c.mean_after,
                pct(c.change),
                c.run
            ))
        })
        .collect()
}

/// One line per episode the history recorded (`case metric: before → after (+x%) from
/// run R, judged regressed at runs A..B, recovered at run C`).
pub fn episodes(t: &Trend) -> Vec<String> {
    t.episodes
        .iter()
        .map(|e| {
            format!(
                "{} {}: {:.2} → {:.2} ({}) from run {}, judged regressed at run {}{}, {}",
                e.case,
                e.metric,
                e.before,
                e.after,
                pct(e.change),
                e.since,
                e.first_flagged,
                if e.last_flagged != e.first_flagged {
                    format!(" to {}", e.last_flagged)
                } else {
                    String::new()
                },
                e.recovered_at
                    .as_ref()
                    .map_or("not recovered yet".to_string(), |r| format!(
                        "recovered at run {r}"
                    ))
            )
        })
        .collect()
}

fn lines(t: &Trend, pick: impl Fn(&Series) -> bool) -> Vec<String> {
    t.series
        .iter()
        .filter(|s| pick(s))
        .filter_map(line)
        .collect()
}

/// A series' newest change point in one line: `case metric: before → after (+x%) from
/// run R, p = …`.
pub fn line(s: &Series) -> Option<String> {
    let c = s.changes.last()?;
    Some(format!(
        "{} {}: {:.2} → {:.2} ({}) from run {}, p = {:.1e}",
        s.case,
        s.metric,
        c.mean_before,
        c.mean_after,
        pct(c.change),
        c.run,
        c.pvalue
    ))
}

/// The step summary: the verdict and the regressions only (GitHub caps its size).
pub fn summary(t: &Trend) -> String {
    let mut s = format!("## Trend\n\n{}\n", verdict(t));
    for line in regressions(t) {
        let _ = write!(s, "\n- {}", escape::markdown(&line));
    }
    for line in suspects(t) {
        let _ = write!(s, "\n- suspect: {}", escape::markdown(&line));
    }
    for line in recovered(t) {
        let _ = write!(s, "\n- {}", escape::markdown(&line));
    }
    s.push('\n');
    s
}

/// JUnit: one test per series, failed when it regressed.
pub fn junit(t: &Trend) -> String {
    let mut cases = String::new();
    for se in &t.series {
        let _ = write!(
            cases,
            "  <testcase classname=\"trend.{}\" name=\"{}\"",
            escape::xml(&se.case),
            escape::xml(&se.metric)
        );
        match se.changes.last().filter(|_| se.regressed) {
            Some(c) => {
                let _ = writeln!(
                    cases,
                    "><failure message=\"{:.2} → {:.2} ({}) from run {}, p = {:.2e}\"/></testcase>",
                    c.mean_before,
                    c.mean_after,
                    pct(c.change),
                    escape::xml(&c.run),
                    c.pvalue
                );
            }
            None => cases.push_str("/>\n"),
        }
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"benchplan-trend\" tests=\"{}\" failures=\"{}\">\n{cases}</testsuite>\n",
        t.series.len(),
        t.regressions
    )
}

/// The HTML report: the verdict, the change-point table, one chart per series.
pub fn html(t: &Trend) -> String {
    let md_verdict = verdict(t).replace("**", "");
    let mut body = format!(
        "<h1>Trend</h1>\n<p class=\"verdict\">{}</p>\n",
        escape::xml(&md_verdict)
    );
    let _ = writeln!(
        body,
        "<table>\n<tr><th>Case</th><th>Metric</th><th>Run</th><th>When</th><th>Before</th><th>After</th><th>Change</th><th>p-value</th></tr>"
    );
    for se in &t.series {
        for c in &se.changes {
            let _ = writeln!(
                body,
                "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td><td>{:.2e}</td></tr>",
                if c.regression { "worse" } else { "better" },
                escape::xml(&se.case),
                escape::xml(&se.metric),
                escape::xml(&c.run),
                escape::xml(&c.when),
                c.mean_before,
                c.mean_after,
                pct(c.change),
                c.pvalue
            );
        }
    }
    body.push_str("</table>\n");
    for se in &t.series {
        let _ = writeln!(body, "<figure>{}</figure>", super::chart::chart(se));
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Trend</title>\n<style>body{{font-family:sans-serif;max-width:60rem;margin:auto}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px}}td:nth-child(-n+4){{white-space:nowrap}}tr.worse td{{color:#cc3311}}</style></head>\n<body>\n{body}</body></html>\n"
    )
}
