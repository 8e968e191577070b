//! Matrix expansion: services × axes (with zip, exclude, include) → cases.
//!
//! Order, documented in the README and tested: services outermost (the `service`
//! axis order if given, else file order), then the axes in declared order,
//! row-major (the last axis varies fastest); a zip group stands where its first
//! axis was declared. Included cases follow the product, in include order.

use indexmap::IndexMap;
use serde_json::Value;

use std::sync::Arc;

use super::case::{Assignment, Case, slug};
use crate::diag::{Diagnostic, did_you_mean};
use crate::hash::FnvWriter;
use crate::plan::source::{join_index, join_key};
use crate::plan::{CaseParams, Plan};

/// One dimension of the product: one axis, or a zip group of axes of equal length.
struct Dim {
    axes: Vec<usize>,
    len: usize,
}

/// A candidate case before resolution: the service and the assigned axis values.
pub struct Combo {
    pub service: String,
    /// The assigned values, in axis order.
    pub values: Vec<Assignment>,
    /// Made by `matrix.include` (its keys may differ from the product's).
    pub included: bool,
}

/// Keys a matrix axis may name at the top level, with the schema's names.
pub fn param_keys() -> Vec<String> {
    let schema = schemars::schema_for!(CaseParams).to_value();
    let mut keys: Vec<String> = schema["properties"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    keys.push("service".into());
    keys
}

/// Sets `value` at the dotted `key` inside a JSON object, creating tables on the way.
pub fn set_path(root: &mut Value, key: &str, value: Value) {
    let mut node = root;
    let mut parts = key.split('.').peekable();
    while let Some(part) = parts.next() {
        if !node.is_object() {
            *node = Value::Object(Default::default());
        }
        let map = node.as_object_mut().expect("made an object above");
        if parts.peek().is_none() {
            map.insert(part.to_string(), value);
            return;
        }
        node = map
            .entry(part.to_string())
            .or_insert_with(|| Value::Object(Default::default()));
    }
}

/// JSON equality where 4 and 4.0 are the same number.
pub fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Checks the matrix and lists the combinations to resolve.
pub fn combos(plan: &Plan, diags: &mut Vec<Diagnostic>) -> Vec<Combo> {
    let m = &plan.matrix;
    let axis_keys: Vec<&String> = m.axes.keys().collect();
    let defaults_json = serde_json::to_value(&plan.defaults).expect("params serialise");
    let mut axes_ok = check_axes(plan, &defaults_json, diags);
    let zipped_with = check_zip(plan, &axis_keys, diags, &mut axes_ok);
    check_filters(plan, &axis_keys, &defaults_json, diags, &mut axes_ok);
    if !axes_ok {
        return Vec::new();
    }
    let (dims, services) = dims(plan, &axis_keys, &zipped_with);
    // Shared once, cloned per case as reference counts.
    let shared_keys: Vec<Arc<str>> = axis_keys.iter().map(|k| Arc::from(k.as_str())).collect();
    let shared_origins: Vec<Vec<Arc<str>>> = axis_keys
        .iter()
        .map(|k| {
            (0..m.axes[*k].len())
                .map(|i| Arc::from(join_index(&join_key("matrix", k), i)))
                .collect()
        })
        .collect();
    let service_key: Arc<str> = Arc::from("service");

    // Counted before anything is built: a three-line matrix can declare 10^9 cases.
    let total = dims
        .iter()
        .fold(services.len() as u64, |acc, d| {
            acc.saturating_mul(d.len as u64)
        })
        .saturating_add(m.include.len() as u64 * plan.services.len() as u64);
    let max = plan.execution.max_cases;
    if total > max {
        diags.push(
            Diagnostic::error(
                "matrix",
                format!("the matrix expands to {total} cases (before excludes), more than execution.max_cases = {max}"),
            )
            .with_help("split the plan, shorten the axes, or raise execution.max_cases"),
        );
        return Vec::new();
    }
    let total = total as usize;
    let mut out = Vec::with_capacity(total);
    let mut exclude_hits = vec![0usize; m.exclude.len()];
    let mut idx = vec![0usize; dims.len()];
    for (service, service_origin) in &services {
        idx.iter_mut().for_each(|i| *i = 0);
        loop {
            let mut values = Vec::with_capacity(axis_keys.len());
            if m.axes.contains_key("service") {
                values.push(Assignment {
                    key: service_key.clone(),
                    value: Value::String(service.clone()),
                    origin: service_origin.clone(),
                });
            }
            for (d, dim) in dims.iter().enumerate() {
                for &ai in &dim.axes {
                    values.push(Assignment {
                        key: shared_keys[ai].clone(),
                        value: m.axes[ai][idx[d]].clone(),
                        origin: shared_origins[ai][idx[d]].clone(),
                    });
                }
            }
            let excluded = m.exclude.iter().enumerate().find(|(_, e)| {
                e.iter().all(|(k, v)| {
                    if k == "service" {
                        v.as_str() == Some(service.as_str())
                    } else {
                        values
                            .iter()
                            .any(|a| &*a.key == k && same_value(&a.value, v))
                    }
                })
            });
            match excluded {
                Some((i, _)) => exclude_hits[i] += 1,
                None => out.push(Combo {
                    service: service.clone(),
                    values,
                    included: false,
                }),
            }
            // Row-major increment: the last dimension varies fastest.
            let mut d = dims.len();
            let done = loop {
                if d == 0 {
                    break true;
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < dims[d].len {
                    break false;
                }
                idx[d] = 0;
            };
            if done {
                break;
            }
        }
    }
    for (i, hits) in exclude_hits.iter().enumerate() {
        if *hits == 0 {
            diags.push(
                Diagnostic::warning(
                    join_index("matrix.exclude", i),
                    "this exclude entry matches no case",
                )
                .with_help("check its values against the axes"),
            );
        }
    }

    for (i, entry) in m.include.iter().enumerate() {
        let epath = join_index("matrix.include", i);
        let targets: Vec<String> = match entry.get("service").and_then(Value::as_str) {
            Some(s) => vec![s.to_string()],
            None => plan.services.keys().cloned().collect(),
        };
        for service in targets {
            let values = entry
                .iter()
                .map(|(k, v)| Assignment {
                    key: Arc::from(k.as_str()),
                    value: v.clone(),
                    origin: Arc::from(join_key(&epath, k)),
                })
                .collect();
            out.push(Combo {
                service,
                values,
                included: true,
            });
        }
    }
    out
}

/// Each axis: a real parameter path, a non-empty list, values of the right type (a
/// `service` axis names defined services). False when any is not.
fn check_axes(plan: &Plan, defaults_json: &Value, diags: &mut Vec<Diagnostic>) -> bool {
    let m = &plan.matrix;
    let known = param_keys();
    let mut axes_ok = true;
    // Each axis: a real parameter path, a non-empty list, values of the right type.
    for (key, values) in &m.axes {
        let path = join_key("matrix", key);
        if values.is_empty() {
            diags.push(
                Diagnostic::error(&path, "axis has no values")
                    .with_help("list at least one value, or remove the axis"),
            );
            axes_ok = false;
        }
        let top = key.split('.').next().unwrap_or(key);
        if !known.iter().any(|k| k == top) {
            let mut d = Diagnostic::error(&path, format!("`{key}` is not a case parameter"));
            d = match did_you_mean(top, known.iter().map(String::as_str)) {
                Some(s) => d.with_help(format!("did you mean `{}`?", key.replacen(top, s, 1))),
                None => d.with_help("axes name a case parameter such as max_concurrency or \"dataset.input_len\", or `service`"),
            };
            diags.push(d);
            axes_ok = false;
            continue;
        }
        if key == "service" {
            for (i, v) in values.iter().enumerate() {
                match v.as_str() {
                    Some(s) if plan.services.contains_key(s) => {}
                    _ => {
                        let names: Vec<&str> = plan.services.keys().map(String::as_str).collect();
                        let mut d = Diagnostic::error(
                            join_index(&path, i),
                            format!("service {v} is not defined in `services`"),
                        );
                        if let Some(s) = v
                            .as_str()
                            .and_then(|s| did_you_mean(s, names.iter().copied()))
                        {
                            d = d.with_help(format!("did you mean `{s}`?"));
                        } else {
                            d = d.with_help(format!("defined services: {}", names.join(", ")));
                        }
                        diags.push(d);
                        axes_ok = false;
                    }
                }
            }
            continue;
        }
        for (i, v) in values.iter().enumerate() {
            let mut probe = defaults_json.clone();
            set_path(&mut probe, key, v.clone());
            if let Err(e) = serde_json::from_value::<CaseParams>(probe) {
                diags.push(
                    Diagnostic::error(
                        join_index(&path, i),
                        format!("bad value {v} for `{key}`: {e}"),
                    )
                    .with_help(
                        "give a value of the type this parameter takes (see `benchplan schema`)",
                    ),
                );
                axes_ok = false;
            }
        }
    }
    axes_ok
}

/// Zip groups: declared axes, each in one group at most, equal lengths, not `service`.
/// Returns each zipped axis's group.
fn check_zip(
    plan: &Plan,
    axis_keys: &[&String],
    diags: &mut Vec<Diagnostic>,
    axes_ok: &mut bool,
) -> IndexMap<usize, usize> {
    let m = &plan.matrix;
    // Zip groups: declared axes, each in one group at most, equal lengths, not `service`.
    let mut zipped_with: IndexMap<usize, usize> = IndexMap::new(); // axis index → group index
    for (g, group) in m.zip.iter().enumerate() {
        let gpath = join_index("matrix.zip", g);
        let mut len = None;
        for (j, name) in group.iter().enumerate() {
            let Some(ai) = axis_keys.iter().position(|k| *k == name) else {
                diags.push(undeclared(&join_index(&gpath, j), name, axis_keys));
                *axes_ok = false;
                continue;
            };
            if name == "service" {
                diags.push(
                    Diagnostic::error(join_index(&gpath, j), "`service` cannot be zipped")
                        .with_help("zip parameter axes only; services always form the outer loop"),
                );
                *axes_ok = false;
            }
            if zipped_with.insert(ai, g).is_some() {
                diags.push(
                    Diagnostic::error(
                        join_index(&gpath, j),
                        format!("axis `{name}` is in more than one zip group"),
                    )
                    .with_help("put each axis in one group"),
                );
                *axes_ok = false;
            }
            let n = m.axes[ai].len();
            match len {
                None => len = Some(n),
                Some(l) if l != n => {
                    diags.push(
                        Diagnostic::error(join_index(&gpath, j), format!("zipped axis `{name}` has {n} values, but the group's first axis has {l}"))
                            .with_help("zipped axes vary together, so they need the same number of values"),
                    );
                    *axes_ok = false;
                }
                _ => {}
            }
        }
        if group.len() < 2 {
            diags.push(Diagnostic::warning(
                &gpath,
                "a zip group of fewer than two axes changes nothing",
            ));
        }
    }
    zipped_with
}

/// Exclude and include entries refer to declared axes (or `service`), with values of
/// the parameter's type.
fn check_filters(
    plan: &Plan,
    axis_keys: &[&String],
    defaults_json: &Value,
    diags: &mut Vec<Diagnostic>,
    axes_ok: &mut bool,
) {
    let m = &plan.matrix;
    // Exclude and include entries refer to declared axes (or `service`).
    for (what, entries) in [("exclude", &m.exclude), ("include", &m.include)] {
        for (i, entry) in entries.iter().enumerate() {
            let epath = join_index(&format!("matrix.{what}"), i);
            if entry.is_empty() {
                diags.push(
                    Diagnostic::error(&epath, format!("empty {what} entry"))
                        .with_help("name at least one axis and its value"),
                );
                *axes_ok = false;
            }
            for (k, v) in entry {
                if k == "service" {
                    if !v.as_str().is_some_and(|s| plan.services.contains_key(s)) {
                        diags.push(
                            Diagnostic::error(
                                join_key(&epath, k),
                                format!("service {v} is not defined in `services`"),
                            )
                            .with_help("use a name from `services`"),
                        );
                        *axes_ok = false;
                    }
                } else if !axis_keys.contains(&k) {
                    diags.push(undeclared(&join_key(&epath, k), k, axis_keys));
                    *axes_ok = false;
                } else if what == "include" {
                    let mut probe = defaults_json.clone();
                    set_path(&mut probe, k, v.clone());
                    if let Err(e) = serde_json::from_value::<CaseParams>(probe) {
                        diags.push(
                            Diagnostic::error(
                                join_key(&epath, k),
                                format!("bad value {v} for `{k}`: {e}"),
                            )
                            .with_help("give a value of the type this parameter takes"),
                        );
                        *axes_ok = false;
                    }
                }
            }
        }
    }
}

/// The matrix's dimensions in declared order (a zip group at its first axis), and the
/// services its cases run on (the `service` axis's, else every service).
fn dims(
    plan: &Plan,
    axis_keys: &[&String],
    zipped_with: &IndexMap<usize, usize>,
) -> (Vec<Dim>, Vec<(String, Arc<str>)>) {
    let m = &plan.matrix;
    // Dimensions in declared order; a zip group sits at its first axis.
    let mut dims: Vec<Dim> = Vec::new();
    let mut service_axis = None;
    for (ai, key) in axis_keys.iter().enumerate() {
        if *key == "service" {
            service_axis = Some(ai);
            continue;
        }
        match zipped_with.get(&ai) {
            Some(&g) => {
                let first = m.zip[g]
                    .iter()
                    .filter_map(|n| axis_keys.iter().position(|k| *k == n))
                    .min();
                if first == Some(ai) {
                    let axes: Vec<usize> = m.zip[g]
                        .iter()
                        .filter_map(|n| axis_keys.iter().position(|k| *k == n))
                        .collect();
                    dims.push(Dim {
                        len: m.axes[ai].len(),
                        axes,
                    });
                }
            }
            None => dims.push(Dim {
                axes: vec![ai],
                len: m.axes[ai].len(),
            }),
        }
    }
    let services: Vec<(String, Arc<str>)> = match service_axis {
        Some(ai) => m.axes[ai]
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                v.as_str()
                    .map(|s| (s.to_string(), join_index("matrix.service", i).into()))
            })
            .collect(),
        None => plan
            .services
            .keys()
            .map(|s| (s.clone(), Arc::from("")))
            .collect(),
    };
    (dims, services)
}

fn undeclared(path: &str, name: &str, axes: &[&String]) -> Diagnostic {
    let d = Diagnostic::error(path, format!("`{name}` is not a declared matrix axis"));
    match did_you_mean(name, axes.iter().map(|s| s.as_str())) {
        Some(s) => d.with_help(format!("did you mean `{s}`?")),
        None if axes.is_empty() => d.with_help("declare the axis in [matrix] first"),
        None => d.with_help(format!(
            "declared axes: {}",
            axes.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The hash a case's id ends with: FNV-1a over the service name and the resolved parameters' JSON.
pub fn case_hash(service: &str, params: &CaseParams) -> u64 {
    let mut w = FnvWriter::default();
    std::io::Write::write_all(&mut w, service.as_bytes()).expect("hashing cannot fail");
    std::io::Write::write_all(&mut w, b"\n").expect("hashing cannot fail");
    serde_json::to_writer(&mut w, params).expect("params serialise");
    w.0
}

/// Builds the case from a combination; its id is set once its parameters are final.
pub fn make_case(combo: Combo, params: CaseParams) -> Case {
    Case {
        id: String::new(),
        service: combo.service,
        params,
        assignments: combo.values,
        repeats: None,
    }
}

/// `{slug}-{12 hex digits of the case hash}`.
pub fn case_id(case: &Case, hash: u64) -> String {
    format!(
        "{}-{:012x}",
        slug(&case.service, &case.assignments),
        hash >> 16
    )
}
