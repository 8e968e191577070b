//! The import rules of the layout, read from `src/`: the command line's face is
//! imported by nothing below it, the metrics know no client types, and the simulator
//! (the ground truth) leans on neither the planner, the client nor the metrics.

use std::path::{Path, PathBuf};

use crate::support::repo;

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file under src/ (`src/sim/http.rs` → `["sim", "http"]`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem.to_string());
    }
    parts
}

/// The crate-absolute paths a file names (`crate::a::b`, `super::x` resolved against
/// its module), outside comments. Good enough for `use` lines and inline paths.
fn paths_named(text: &str, module: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let bytes = code.as_bytes();
        let mut i = 0;
        while i < code.len() {
            let rest = &code[i..];
            let boundary =
                i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
            if boundary && (rest.starts_with("crate::") || rest.starts_with("super::")) {
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .unwrap_or(rest.len());
                let segs: Vec<&str> = rest[..end].split("::").filter(|s| !s.is_empty()).collect();
                let mut abs: Vec<String> = Vec::new();
                let mut base: Vec<String> = module.to_vec();
                let mut k = 0;
                if segs[0] == "crate" {
                    base.clear();
                    k = 1;
                } else {
                    while k < segs.len() && segs[k] == "super" {
                        base.pop();
                        k += 1;
                    }
                }
                abs.extend(base);
                abs.extend(segs[k..].iter().map(|s| s.to_string()));
                out.push(abs.join("::"));
                i += end;
            } else {
                i += rest.chars().next().map_or(1, char::len_utf8);
            }
        }
    }
    out
}

/// (file, forbidden path) for every file in `area` naming a module in `forbidden`.
fn violations(area: &str, forbidden: &[&str], exempt: &[&str]) -> Vec<String> {
    let src = repo().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut bad = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let rel_s = rel.to_string_lossy().replace('\\', "/");
        if !rel_s.starts_with(area) || exempt.contains(&rel_s.as_str()) {
            continue;
        }
        let module = module_of(rel);
        let text = std::fs::read_to_string(&f).unwrap();
        for p in paths_named(&text, &module) {
            let top = p.split("::").next().unwrap_or("");
            if forbidden.contains(&top) {
                bad.push(format!("src/{rel_s} names {p}"));
            }
        }
    }
    bad
}

#[test]
fn the_path_resolver_reads_what_it_should() {
    let m = vec!["sim".to_string(), "http".to_string()];
    assert_eq!(
        paths_named(
            "use super::body::X;\nuse crate::plan::sim::F; // crate::client::x\nlet a = super::super::metrics::y;",
            &m
        ),
        vec!["sim::body::X", "plan::sim::F", "metrics::y"]
    );
    assert!(paths_named("my_crate::cli::x", &m).is_empty());
}

#[test]
fn nothing_below_the_command_line_imports_it() {
    let bad = violations("", &["cli"], &["main.rs", "cli.rs"]);
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn the_metrics_know_no_client_types() {
    let bad = violations("metrics/", &["client"], &[]);
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn the_simulator_stands_alone() {
    let bad = violations("sim/", &["planner", "client", "metrics"], &[]);
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn the_runners_and_the_reports_do_not_reach_up() {
    // The executor and the load generator call no command (the service check, smoke
    // request and wording search live in `load::preflight`); the report layer reads no
    // optimizer or executor type (a search chart takes plain probes).
    let bad: Vec<String> = [
        violations("executor/", &["commands"], &[]),
        violations("load/", &["commands", "executor"], &[]),
        violations("report/", &["optimize", "executor", "commands"], &[]),
    ]
    .concat();
    assert!(bad.is_empty(), "{bad:#?}");
}
