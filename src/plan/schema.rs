//! The plan's JSON schema, generated from the types, and the unknown-key check that
//! walks a plan's JSON tree against it (so the schema and the check never disagree).

use serde_json::{Map, Value};

use super::Plan;
use super::source::{join_index, join_key};
use crate::diag::{Diagnostic, did_you_mean};

/// The plan schema as pretty JSON with a trailing newline (what `benchplan schema` prints).
pub fn plan_schema_json() -> String {
    let schema = schemars::schema_for!(Plan);
    let mut s = serde_json::to_string_pretty(&schema).expect("a schema serialises");
    s.push('\n');
    s
}

/// Walks `value` against the plan schema, removing unknown keys (so typed
/// deserialisation can go on and report other problems) and returning a diagnostic for each.
pub fn strip_unknown_keys(value: &mut Value) -> Vec<Diagnostic> {
    let schema = schemars::schema_for!(Plan).to_value();
    let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
    let mut out = Vec::new();
    walk(value, &schema, &defs, "", &mut out);
    out
}

/// What a schema node allows an object to hold.
#[derive(Default)]
struct ObjectShape<'a> {
    properties: Map<String, Value>,
    /// `false`: no other keys; a schema: other keys' values follow it; None: anything goes.
    additional: Option<&'a Value>,
    closed: bool,
}

fn resolve<'a>(schema: &'a Value, defs: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => r
            .strip_prefix("#/$defs/")
            .and_then(|name| defs.get(name))
            .map_or(schema, |s| resolve(s, defs)),
        None => schema,
    }
}

/// Merges a node's own properties with those of its `$ref` and `allOf` parts.
fn shape<'a>(schema: &'a Value, defs: &'a Value, into: &mut ObjectShape<'a>) {
    if let Some(r) = schema.get("$ref") {
        if r.is_string() {
            let target = resolve(schema, defs);
            if !std::ptr::eq(target, schema) {
                shape(target, defs, into);
            }
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            into.properties.insert(k.clone(), v.clone());
        }
    }
    match schema.get("additionalProperties") {
        Some(Value::Bool(false)) => into.closed = true,
        Some(s @ Value::Object(_)) => into.additional = Some(s),
        _ => {}
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for part in all {
            shape(part, defs, into);
        }
    }
}

/// The branch of a tagged `oneOf` that an object picks with its tag value.
fn pick_branch<'a>(
    value: &Value,
    branches: &'a [Value],
    defs: &'a Value,
    path: &str,
    out: &mut Vec<Diagnostic>,
) -> Option<&'a Value> {
    // Find the tag: a property that is a `const` in every branch.
    let tag_of = |b: &Value| -> Option<(String, String)> {
        let mut sh = ObjectShape::default();
        shape(b, defs, &mut sh);
        sh.properties.iter().find_map(|(k, v)| {
            let v = resolve(v, defs);
            v.get("const")
                .and_then(Value::as_str)
                .map(|c| (k.clone(), c.to_string()))
        })
    };
    let tags: Vec<(String, String)> = branches.iter().filter_map(tag_of).collect();
    if tags.len() != branches.len() || tags.is_empty() {
        // Not a tagged union (an untagged choice such as SloSpec): pick by JSON type.
        return branches
            .iter()
            .find(|b| type_matches(value, resolve(b, defs)));
    }
    let tag_key = &tags[0].0;
    let names: Vec<&str> = tags.iter().map(|(_, c)| c.as_str()).collect();
    match value.get(tag_key) {
        Some(Value::String(t)) => {
            if let Some(i) = names.iter().position(|n| n == t) {
                Some(&branches[i])
            } else {
                let mut d = Diagnostic::error(
                    join_key(path, tag_key),
                    format!(
                        "unknown {tag_key} `{t}`; expected one of: {}",
                        names.join(", ")
                    ),
                );
                if let Some(s) = did_you_mean(t, names.iter().copied()) {
                    d = d.with_help(format!("did you mean `{s}`?"));
                }
                out.push(d);
                None
            }
        }
        _ => None, // a missing tag is reported by the typed step
    }
}

fn type_matches(value: &Value, schema: &Value) -> bool {
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("string") => value.is_string(),
        Some("number") | Some("integer") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        _ => true,
    }
}

fn walk(value: &mut Value, schema: &Value, defs: &Value, path: &str, out: &mut Vec<Diagnostic>) {
    let schema = resolve(schema, defs);
    if let Some(branches) = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Value::as_array)
    {
        // Options such as Option<T> are `anyOf: [T, null]`: pick the branch this value fits.
        if let Some(b) = pick_branch(value, branches, defs, path, out) {
            walk(value, b, defs, path, out);
        }
        return;
    }
    match value {
        Value::Object(map) => {
            let mut sh = ObjectShape::default();
            shape(schema, defs, &mut sh);
            if sh.properties.is_empty() && sh.additional.is_none() && !sh.closed {
                return; // free-form (extra_body, metadata values)
            }
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let child_path = join_key(path, &key);
                if let Some(s) = sh.properties.get(&key) {
                    walk(map.get_mut(&key).unwrap(), s, defs, &child_path, out);
                } else if let Some(s) = sh.additional {
                    walk(map.get_mut(&key).unwrap(), s, defs, &child_path, out);
                } else if sh.closed || !sh.properties.is_empty() {
                    let known: Vec<&str> = sh.properties.keys().map(String::as_str).collect();
                    let mut d = Diagnostic::error(child_path, format!("unknown key `{key}`"));
                    // A dataset setting written beside `dataset` instead of inside it.
                    let dataset_key = sh.properties.contains_key("dataset")
                        && crate::plan::dataset::is_dataset_key(&key);
                    d = match did_you_mean(&key, known.iter().copied()) {
                        _ if dataset_key => d.with_help(format!(
                            "`{key}` belongs to the dataset: write dataset = {{ name = \"random\", {key} = … }}, or `\"dataset.{key}\"` as a matrix axis"
                        )),
                        Some(s) => d.with_help(format!("did you mean `{s}`?")),
                        None => d.with_help(format!("known keys here: {}", known.join(", "))),
                    };
                    out.push(d);
                    map.shift_remove(&key);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(item, item_schema, defs, &join_index(path, i), out);
                }
            }
        }
        _ => {}
    }
}
