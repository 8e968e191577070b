//! The import rules of the layout, read from `src/`: the rooms (top-level modules) in
//! one order, each importing only rooms below it; no import circle between files; and
//! the older specific rules (the command line's face is imported by nothing below it,
//! the metrics know no client types, the simulator leans on no client or planner).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::support::repo;

/// The layering, bottom first: a room may import only the rooms before it. The floor
/// (helpers that know no benchplan type) comes first, then the plan's types, the
/// measurement pieces, the services, the load generator, the reports, the runners and
/// the commands.
const ROOMS: &[&str] = &[
    // the floor
    "hash",
    "escape",
    "rng",
    "clock",
    "timefmt",
    "redact",
    "diag",
    "exit",
    "signals",
    "wav",
    "files",
    "proxy",
    "base_url",
    // what a plan says
    "plan",
    // counting tokens, the server's metrics page, the GPUs' energy, per-request
    // samples and summaries
    "tokenizer",
    "servermetrics",
    "energy",
    "metrics",
    "slo",
    // the ground truth
    "sim",
    // sending one request; building a dataset of them
    "client",
    "dataset",
    // the result files
    "results",
    // a plan's cases
    "planner",
    "fuzz",
    // reaching a service, then loading it
    "service",
    "load",
    // reports over result files; a plan's history and its change points
    "report",
    "trend",
    // running a plan; searching over runs
    "executor",
    "optimize",
    // the commands and the command line
    "commands",
    "cli",
];

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

/// The child modules a file declares (`mod case;`, `pub mod framing;`).
fn children_of(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l
                .strip_prefix("pub(crate) ")
                .or_else(|| l.strip_prefix("pub "))
                .unwrap_or(l);
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?;
            name.chars()
                .all(|c| c.is_alphanumeric() || c == '_')
                .then(|| name.to_string())
        })
        .collect()
}

/// The crate-absolute paths a file names (`crate::a::b`, `super::x` resolved against
/// its module, and a parent's bare or `self::` path into a child it declares:
/// `case::Status` in `executor/mod.rs` is `executor::case::Status`), outside comments.
/// Good enough for `use` lines and inline paths.
fn paths_named(text: &str, module: &[String]) -> Vec<String> {
    let mut out = paths_named_rooted(text, module);
    // The crate root declares every room: its own paths are not imports to check.
    if module.is_empty() {
        return out;
    }
    let children = children_of(text);
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let bytes = code.as_bytes();
        for child in &children {
            for prefix in [format!("{child}::"), format!("self::{child}::")] {
                let mut from = 0;
                while let Some(at) = code[from..].find(&prefix) {
                    let i = from + at;
                    from = i + prefix.len();
                    let boundary = i == 0
                        || !(bytes[i - 1].is_ascii_alphanumeric()
                            || bytes[i - 1] == b'_'
                            || bytes[i - 1] == b':');
                    if !boundary {
                        continue;
                    }
                    let rest = &code[i..];
                    let end = rest
                        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                        .unwrap_or(rest.len());
                    let segs = rest[..end]
                        .split("::")
                        .filter(|s| !s.is_empty() && *s != "self");
                    let mut abs: Vec<String> = module.to_vec();
                    abs.extend(segs.map(str::to_string));
                    out.push(abs.join("::"));
                }
            }
        }
    }
    out
}

/// [`paths_named`]'s `crate::` and `super::` paths.
fn paths_named_rooted(text: &str, module: &[String]) -> Vec<String> {
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

/// Every file under src/ as (module path, text).
fn sources() -> Vec<(Vec<String>, String)> {
    let src = repo().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(&src).unwrap().to_path_buf();
            (module_of(&rel), std::fs::read_to_string(&f).unwrap())
        })
        .collect()
}

/// `use` groups expanded: `crate::a::{b, c::{d, e}}` → `crate::a::b`, `crate::a::c::d`,
/// `crate::a::c::e` (one line per path, so `paths_named` reads each).
fn expand_groups(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("::{") {
        // The path before the group: back to the last character no path has.
        let start = rest[..i]
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |k| k + 1);
        out.push_str(&rest[..start]);
        let prefix = &rest[start..i];
        let mut depth = 0;
        let mut end = i + 2;
        for (k, c) in rest[i + 2..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 2 + k;
                        break;
                    }
                }
                _ => {}
            }
        }
        let inner = &rest[i + 3..end];
        let mut items = Vec::new();
        let (mut depth, mut from) = (0, 0);
        for (k, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&inner[from..k]);
                    from = k + 1;
                }
                _ => {}
            }
        }
        items.push(&inner[from..]);
        for item in items {
            let item = item.trim();
            let item = if item.contains('{') {
                item
            } else {
                item.split(" as ").next().unwrap().trim()
            };
            if item.is_empty() || item == "self" {
                out.push_str(&format!("\n{prefix}\n"));
            } else {
                out.push_str(&format!(
                    "\n{}\n",
                    expand_groups(&format!("{prefix}::{item}"))
                ));
            }
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The file-to-file imports under src/: each named path resolved to the longest
/// module prefix that is a file.
fn file_graph() -> BTreeMap<String, BTreeSet<String>> {
    let sources = sources();
    let files: BTreeSet<Vec<String>> = sources.iter().map(|(m, _)| m.clone()).collect();
    let mut graph = BTreeMap::new();
    for (module, text) in &sources {
        // A file's own tests (`#[cfg(test)] mod tests { use super::*; }`, at its end)
        // name the file itself, not its parent: they are not the house's imports.
        let uncommented: String = text
            .lines()
            .take_while(|l| l.trim() != "#[cfg(test)]")
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let mut to = BTreeSet::new();
        for p in paths_named(&expand_groups(&uncommented), module) {
            let segs: Vec<String> = p.split("::").map(str::to_string).collect();
            if let Some(k) = (1..=segs.len()).rev().find(|&k| files.contains(&segs[..k]))
                && segs[..k] != module[..]
            {
                to.insert(segs[..k].join("::"));
            }
        }
        graph.insert(module.join("::"), to);
    }
    graph
}

/// The import circles: strongly connected groups of more than one file (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.stack.contains(&w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut group = Vec::new();
            while let Some(w) = t.stack.pop() {
                group.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                t.out.push(group);
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// The imports that break the layering: a room naming a room after it in [`ROOMS`],
/// or a room the layering does not list.
fn upward(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let rank = |m: &str| {
        let room = m.split("::").next().unwrap_or("");
        ROOMS.iter().position(|r| *r == room)
    };
    let mut bad = Vec::new();
    for (from, tos) in graph {
        // The crate root and the binary sit above every room.
        if from.is_empty() {
            continue;
        }
        let Some(rf) = rank(from) else {
            bad.push(format!(
                "{from}: its room is not in ROOMS (add it where it belongs)"
            ));
            continue;
        };
        for to in tos {
            match rank(to) {
                Some(rt) if rt <= rf => {}
                Some(_) => bad.push(format!("{from} imports {to}, a room above it")),
                None => bad.push(format!("{from} imports {to}, a room not in ROOMS")),
            }
        }
    }
    bad
}

#[test]
fn the_rooms_import_only_the_rooms_below_them() {
    let bad = upward(&file_graph());
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn no_two_files_import_each_other_even_round_about() {
    let graph = file_graph();
    let found = circles(&graph);
    // Each circle with its edges inside it, so the one to cut is plain to see.
    let shown: Vec<String> = found
        .iter()
        .map(|c| {
            c.iter()
                .map(|f| {
                    let inside: Vec<&str> = graph[f]
                        .iter()
                        .filter(|t| c.contains(t))
                        .map(String::as_str)
                        .collect();
                    format!("{f} -> {}", inside.join(", "))
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    assert!(found.is_empty(), "import circles:\n{}", shown.join("\n\n"));
}

#[test]
fn the_graph_reader_finds_groups_circles_and_upward_imports() {
    // Groups, nested groups and renames are read as their paths.
    let m = vec!["load".to_string(), "case".to_string()];
    let text = expand_groups("use crate::client::{backend::{Prompt, RequestInput as R}, http};");
    assert_eq!(
        paths_named(&text, &m),
        vec![
            "client::backend::Prompt",
            "client::backend::RequestInput",
            "client::http"
        ]
    );
    // A circle of three files, and a room that imports one above it.
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("client::request", vec!["client::reader"]),
        ("client::reader", vec!["client::stream"]),
        ("client::stream", vec!["client::request"]),
        ("client::outcome", vec!["metrics::sample"]),
        ("metrics::sample", vec!["client::outcome"]),
        ("plan::service", vec!["load::target", "gpu::probe"]),
        ("hash", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(str::to_string).collect()))
    .collect();
    let c = circles(&g);
    assert_eq!(c.len(), 2, "{c:?}");
    assert!(c.contains(&vec![
        "client::reader".to_string(),
        "client::request".to_string(),
        "client::stream".to_string()
    ]));
    let up = upward(&g);
    assert_eq!(
        up,
        vec![
            "metrics::sample imports client::outcome, a room above it",
            "plan::service imports gpu::probe, a room not in ROOMS",
            "plan::service imports load::target, a room above it",
        ]
    );
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
    // A parent's bare or `self::` path into a child it declares is an import of it
    // (the blind spot that let six parent-child circles pass).
    let parent = vec!["executor".to_string()];
    assert_eq!(
        paths_named(
            "mod case;\npub mod folder;\nuse case::Status;\nlet f = self::folder::new_run_dir;\nlet s = showcase::x;",
            &parent
        ),
        vec!["executor::case::Status", "executor::folder::new_run_dir"]
    );
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
    // request and wording search live in `service::preflight`); the report layer reads no
    // optimizer or executor type (a search chart takes plain probes).
    let bad: Vec<String> = [
        violations("executor/", &["commands"], &[]),
        violations("load/", &["commands", "executor"], &[]),
        violations("report/", &["optimize", "executor", "commands"], &[]),
    ]
    .concat();
    assert!(bad.is_empty(), "{bad:#?}");
}

/// The lines of `src/` (before a file's own tests) in files `skip` does not take for
/// which `bad` holds on the code (comments cut), as `src/FILE:LINE: text`.
fn lines_where(skip: impl Fn(&str) -> bool, bad: impl Fn(&str) -> bool) -> Vec<String> {
    let src = repo().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut out = Vec::new();
    for f in files {
        let rel = f
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if skip(&rel) {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, line) in text
            .lines()
            .take_while(|l| l.trim() != "#[cfg(test)]")
            .enumerate()
        {
            if bad(line.split("//").next().unwrap_or("")) {
                out.push(format!("src/{rel}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    out
}

/// The lines of `src/` outside `owner` that read `manifest.json` by hand: its file
/// name spelled out, or a key taken from a JSON value named like a manifest.
fn manifest_reads_outside(owner: &str) -> Vec<String> {
    lines_where(
        |rel| rel == owner,
        |code| {
            code.contains("manifest[\"")
                || code.contains("manifest.get(\"")
                || code.contains("join(\"manifest.json\")")
        },
    )
}

#[test]
fn the_manifest_is_read_through_its_type_only() {
    let bad = manifest_reads_outside("results/manifest.rs");
    assert!(
        bad.is_empty(),
        "read the manifest through results::manifest::Manifest: {bad:#?}"
    );
}

#[test]
fn the_history_reads_no_report_type() {
    // Metric semantics come from `metrics::table`, statistics from
    // `metrics::significance`, a result's values from `results::read`.
    let bad = violations("trend/", &["report"], &[]);
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Whether a string is a key of a case's result file: vLLM's counts, throughputs and
/// latency statistics, and benchplan's block.
fn is_result_key(k: &str) -> bool {
    const KEYS: [&str; 11] = [
        "completed",
        "failed",
        "duration",
        "num_prompts",
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
        "request_goodput",
        "total_input_tokens",
        "total_output_tokens",
        "benchplan",
    ];
    if KEYS.contains(&k) {
        return true;
    }
    let Some(rest) = k.strip_suffix("_ms") else {
        return false;
    };
    let stat = rest.split('_').next().unwrap_or("");
    ["mean", "median", "std"].contains(&stat)
        || stat
            .strip_prefix('p')
            .is_some_and(|n| n.parse::<f64>().is_ok())
}

#[test]
fn a_result_is_read_through_its_reader_only() {
    // Every room but the results' own reads a result file through `CaseFile` (its key
    // readers are private to `results/`); this catches a key read off a raw map.
    let keyed = |code: &str| {
        ["[\"", ".get(\""].iter().any(|open| {
            code.match_indices(open).any(|(at, _)| {
                let start = at + open.len();
                let end = code[start..].find('"').map_or(code.len(), |e| start + e);
                is_result_key(&code[start..end])
            })
        })
    };
    let bad = lines_where(|rel| rel.starts_with("results/"), keyed);
    assert!(
        bad.is_empty(),
        "read results through results::read::CaseFile: {bad:#?}"
    );
}

#[test]
fn a_backend_is_told_apart_by_its_row_only() {
    // `== Backend::X` outside the backend table is a rule the compiler will not flag
    // when a backend is added: a row's field says it instead (a `match` is checked).
    let bad = lines_where(
        |rel| rel == "plan/backend.rs",
        |code| {
            code.contains("== Backend::")
                || code.contains("!= Backend::")
                || code.contains("== crate::plan::Backend::")
                || code.contains("!= crate::plan::Backend::")
        },
    );
    assert!(bad.is_empty(), "{bad:#?}");
}
