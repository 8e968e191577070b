//! `validate`: the plan's size once it planned without an error, and every value the
//! plan wrote in another form than the one it was read as (`"800 ms"` read as `800ms`,
//! `"<= 800 ms"` as `<= 800ms`), so a reader sees what the run will use.

use serde_json::Value;

use crate::exit::Exit;
use crate::plan::source::{join_index, join_key};
use crate::plan::units::{Dur, parse_duration};
use crate::planner::Planned;

/// Prints the plan's size and how its durations and SLOs were read.
pub fn run(p: &Planned) -> Exit {
    let services = p.service_count();
    println!(
        "{}: {} case{}, {} service{}",
        p.source.name,
        p.cases.len(),
        plural(p.cases.len()),
        services,
        plural(services)
    );
    for echo in read_as(p) {
        println!(
            "  {}: \"{}\" read as {}",
            echo.path, echo.written, echo.read
        );
    }
    Exit::Ok
}

/// A value written in one form and read in another.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadAs {
    /// The key path as diagnostics name it (`execution.cooldown`).
    pub path: String,
    /// The text the plan holds, trimmed.
    pub written: String,
    /// The canonical form the run uses.
    pub read: String,
}

/// Every duration and SLO the plan wrote in another form than its canonical one, in
/// the plan's order (durations, then SLOs).
pub fn read_as(p: &Planned) -> Vec<ReadAs> {
    let mut out = Vec::new();
    // The typed plan, serialised back: a duration field holds its canonical form, so a
    // written string that reads as that same duration is a duration field (a model
    // name or a header that happens to read as `2m` stays as written, and is skipped).
    let typed = serde_json::to_value(&p.plan).unwrap_or(Value::Null);
    let cases: Vec<Value> = p
        .cases
        .iter()
        .filter_map(|c| serde_json::to_value(&c.params).ok())
        .collect();
    walk(&p.source.value, Some(&typed), "", &cases, &mut out);
    slos(p, &mut out);
    out
}

fn walk(raw: &Value, typed: Option<&Value>, path: &str, cases: &[Value], out: &mut Vec<ReadAs>) {
    match raw {
        Value::Object(m) => {
            for (k, v) in m {
                let sub = typed.and_then(|t| t.get(k));
                walk(v, sub, &join_key(path, k), cases, out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                let sub = typed.and_then(|t| t.get(i));
                walk(v, sub, &join_index(path, i), cases, out);
            }
        }
        Value::String(s) => {
            let Ok(d) = parse_duration(s) else { return };
            let read = Dur(d).to_string();
            if s.trim() == read || plain(s) {
                return;
            }
            let field = typed == Some(&Value::String(read.clone()))
                || matrix_key(path).is_some_and(|key| {
                    cases
                        .iter()
                        .any(|c| param(c, key) == Some(&Value::String(read.clone())))
                });
            if field {
                out.push(ReadAs {
                    path: path.to_string(),
                    written: s.trim().to_string(),
                    read,
                });
            }
        }
        _ => {}
    }
}

/// A duration written in the form the plan documents (`1m`, `1.5s`): nothing to echo,
/// though it prints another way (`60s`).
fn plain(s: &str) -> bool {
    let (num, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len()));
    !num.is_empty()
        && num.chars().all(|c| c.is_ascii_digit() || c == '.')
        && ["ns", "us", "ms", "s", "m", "h"].contains(&unit)
}

/// The parameter a matrix value sets: `matrix.KEY[i]`, or `KEY` in an include or
/// exclude entry (`matrix.include[0].KEY`).
fn matrix_key(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("matrix.")?;
    let rest = rest
        .strip_prefix("include[")
        .or_else(|| rest.strip_prefix("exclude["))
        .and_then(|r| r.split_once("].").map(|(_, k)| k))
        .unwrap_or(rest);
    Some(rest.rsplit_once('[').map_or(rest, |(k, _)| k))
}

/// A case parameter by its dotted key (`dataset.duration`).
fn param<'a>(params: &'a Value, key: &str) -> Option<&'a Value> {
    key.split('.').try_fold(params, |v, k| v.get(k))
}

/// The SLOs (the plan's, each service's and optimize's) written in another form than
/// the one they were read as.
fn slos(p: &Planned, out: &mut Vec<ReadAs>) {
    let all = p
        .slos
        .iter()
        .chain(&p.optimize_slos)
        .chain(p.service_slos.values().flatten());
    for (slo, path) in all {
        let Some(written) = lookup(&p.source.value, path) else {
            continue;
        };
        let written = match written {
            Value::String(s) => s.trim().to_string(),
            other => other.to_string(),
        };
        let read = format!("{} {}{}", slo.op.symbol(), slo.threshold, slo.unit());
        let echo = ReadAs {
            path: path.clone(),
            written,
            read,
        };
        if echo.written != echo.read && !out.contains(&echo) {
            out.push(echo);
        }
    }
}

/// The value at a diagnostics key path, for the simple paths SLOs have
/// (`slo.p99_ttft`, `services.a.slo.p99_ttft`, `optimize.slo.p99_ttft`).
fn lookup<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(root, |v, k| v.get(k))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
