//! Reports: one typed view model built from a run's results, rendered by minijinja
//! templates (markdown and HTML, with SVG charts) and written as CSV. Every format reads the same view model.

pub mod charts;
pub mod compare;
pub mod cost_rank;
pub mod csv;
pub mod folder;
pub mod junit;
pub mod openmetrics;
pub mod view;
pub mod write;

use minijinja::Environment;

/// The built-in report template, embedded at build time.
pub const REPORT_MD: &str = include_str!("../../templates/report.md.j2");
/// The built-in HTML report: one self-contained file, charts inline.
pub const REPORT_HTML: &str = include_str!("../../templates/report.html.j2");
/// The step summary (`$GITHUB_STEP_SUMMARY`): the verdict, what failed, a pointer to
/// report.html; no charts, lists capped.
pub const SUMMARY_MD: &str = include_str!("../../templates/summary.md.j2");
/// "What failed", included by report.md.j2 and summary.md.j2 (custom templates may
/// `{% include "what-failed.md.j2" %}` too).
pub const WHAT_FAILED_MD: &str = include_str!("../../templates/what-failed.md.j2");
/// The built-in report of SLO searches.
pub const OPTIMIZE_MD: &str = include_str!("../../templates/optimize.md.j2");

/// The auto-escape mode of markdown templates (see [`render`]).
const MARKDOWN: minijinja::AutoEscape = minijinja::AutoEscape::Custom("markdown");

/// Renders a markdown template over a value it sees as `r` (the report view model, or
/// the searches' reports). Every value a template prints is escaped for markdown
/// (`escape::markdown`: a server's model id or error cannot add HTML, an image, a
/// heading or a table cell), whatever the template; `| safe` prints a value as it is.
/// Errors name the template, the line and the problem.
pub fn render<T: serde::Serialize>(
    template_name: &str,
    source: &str,
    value: &T,
) -> Result<String, String> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_auto_escape_callback(|_| MARKDOWN);
    env.set_formatter(|out, state, value| {
        if state.auto_escape() != MARKDOWN || value.is_safe() || value.is_undefined() {
            return minijinja::escape_formatter(out, state, value);
        }
        let text = match value.as_str() {
            Some(s) => crate::escape::markdown(s),
            None => crate::escape::markdown(&value.to_string()),
        };
        out.write_str(&text).map_err(minijinja::Error::from)
    });
    env.add_filter("num", num);
    env.add_filter("pval", pval);
    env.add_template("what-failed.md.j2", WHAT_FAILED_MD)
        .map_err(|e| describe(&e))?;
    env.add_template(template_name, source)
        .map_err(|e| describe(&e))?;
    let t = env.get_template(template_name).map_err(|e| describe(&e))?;
    t.render(minijinja::context! { r => value })
        .map_err(|e| describe(&e))
}

/// Renders an HTML template over the view model `r` and the charts' SVG text `svg`
/// (by file, such as `svg["charts/throughput_vs_ttft.svg"]`). Everything but what a
/// template marks `| safe` is HTML-escaped, whatever the template's file name.
pub fn render_html<T: serde::Serialize>(
    template_name: &str,
    source: &str,
    value: &T,
    svg: &std::collections::BTreeMap<&str, &str>,
) -> Result<String, String> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
    // Control and bidi characters go before the markup is escaped, as every other
    // format replaces them (`escape::html_text`).
    env.set_formatter(|out, state, value| match value.as_str() {
        Some(s) if !value.is_safe() => {
            let clean = crate::escape::html_text(s);
            minijinja::escape_formatter(out, state, &minijinja::Value::from(clean.as_ref()))
        }
        _ => minijinja::escape_formatter(out, state, value),
    });
    env.add_filter("num", num);
    env.add_filter("pval", pval);
    env.add_template(template_name, source)
        .map_err(|e| describe(&e))?;
    let t = env.get_template(template_name).map_err(|e| describe(&e))?;
    t.render(minijinja::context! { r => value, svg => svg })
        .map_err(|e| describe(&e))
}

fn describe(e: &minijinja::Error) -> String {
    let mut s = match (e.name(), e.line()) {
        (Some(n), Some(l)) => format!("template {n}, line {l}: {}", e.kind()),
        (Some(n), None) => format!("template {n}: {}", e.kind()),
        _ => format!("template: {}", e.kind()),
    };
    if let Some(d) = e.detail() {
        s.push_str(": ");
        s.push_str(d);
    }
    s
}

/// `{{ p | pval }}`: a p-value, `-` for none.
fn pval(v: minijinja::Value) -> minijinja::Value {
    let p = f64::try_from(v).ok();
    minijinja::Value::from_safe_string(compare::p_text(p))
}

/// `{{ x | num }}`: two decimals (bounded in width: `escape::number`), `-` for none (a number needs no escaping; anything
/// else is passed on to be escaped).
fn num(v: minijinja::Value) -> minijinja::Value {
    match f64::try_from(v.clone()) {
        Ok(x) if x.is_finite() => minijinja::Value::from_safe_string(crate::escape::number(x)),
        _ if v.is_none() || v.is_undefined() => minijinja::Value::from_safe_string("-".into()),
        _ => minijinja::Value::from(v.to_string()),
    }
}
