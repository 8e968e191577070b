//! JSON tree → typed [`Plan`], collecting every unknown key and every type error.

use serde_json::Value;

use super::Plan;
use super::schema::strip_unknown_keys;
use super::source::{PlanSource, join_index, join_key};
use crate::diag::Diagnostic;

/// Most type errors reported from one plan before giving up (each costs a re-parse).
const MAX_TYPE_ERRORS: usize = 64;

/// Deserialises the plan. Returns the plan (typed with defaults where a value was
/// bad) and every problem found; the caller decides whether errors are fatal.
pub fn load(source: &PlanSource) -> (Plan, Vec<Diagnostic>) {
    let mut value = source.value.clone();
    let mut diags = strip_unknown_keys(&mut value);
    let plan = loop {
        match serde_path_to_error::deserialize::<_, Plan>(&value) {
            Ok(plan) => break plan,
            Err(err) => {
                let segments = segments(err.path());
                let path = render(&segments);
                diags.push(type_error(&path, &err.inner().to_string()));
                // Drop the bad value so its default applies, and look for the next problem.
                if segments.is_empty()
                    || !remove(&mut value, &segments)
                    || diags.len() >= MAX_TYPE_ERRORS
                {
                    break Plan::default();
                }
            }
        }
    };
    let mut plan = plan;
    if plan.name.is_none() {
        let stem = std::path::Path::new(&source.name)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("plan");
        plan.name = Some(stem.to_string());
    }
    for d in &mut diags {
        d.location = source.locate(&d.path);
    }
    (plan, diags)
}

enum Seg {
    Key(String),
    Index(usize),
}

fn segments(path: &serde_path_to_error::Path) -> Vec<Seg> {
    use serde_path_to_error::Segment;
    path.iter()
        .filter_map(|s| match s {
            Segment::Map { key } => Some(Seg::Key(key.clone())),
            Segment::Seq { index } => Some(Seg::Index(*index)),
            Segment::Enum { .. } | Segment::Unknown => None,
        })
        .collect()
}

fn render(segments: &[Seg]) -> String {
    segments.iter().fold(String::new(), |p, s| match s {
        Seg::Key(k) => join_key(&p, k),
        Seg::Index(i) => join_index(&p, *i),
    })
}

fn remove(value: &mut Value, segments: &[Seg]) -> bool {
    let (last, parents) = segments.split_last().expect("non-empty");
    let mut node = value;
    for s in parents {
        node = match (s, node) {
            (Seg::Key(k), Value::Object(m)) => match m.get_mut(k) {
                Some(v) => v,
                None => return false,
            },
            (Seg::Index(i), Value::Array(a)) => match a.get_mut(*i) {
                Some(v) => v,
                None => return false,
            },
            _ => return false,
        };
    }
    match (last, node) {
        (Seg::Key(k), Value::Object(m)) => m.shift_remove(k).is_some(),
        (Seg::Index(i), Value::Array(a)) if *i < a.len() => {
            a.remove(*i);
            true
        }
        _ => false,
    }
}

/// Turns serde's wording into a message and a fix.
fn type_error(path: &str, raw: &str) -> Diagnostic {
    if path == "slo" || path.starts_with("slo.") || path == "optimize.slo" {
        return Diagnostic::error(
            path,
            "SLOs must be a table of conditions or a list of KEY:VALUE strings",
        )
        .with_help("write [slo] p99_ttft = \"<= 500ms\", or slo = [\"p99_ttft:500\"]");
    }
    let help = if raw.contains("missing field `name`") {
        format!(
            "add name = \"random\" (one of: {})",
            super::Dataset::NAMES.join(", ")
        )
    } else if raw.contains("unknown variant") {
        "use one of the values listed".to_string()
    } else if path.ends_with("dataset") && raw.contains("expected internally tagged enum") {
        // `dataset = "random"`: serde names the Rust type; say the table it wants.
        return Diagnostic::error(path, "a dataset is a table with its `name` and settings, not a string")
            .with_help(format!(
                "write dataset = {{ name = \"random\", input_len = 1024, output_len = 128 }} (names: {})",
                super::Dataset::NAMES.join(", ")
            ));
    } else if raw.contains("invalid type") {
        "give a value of the type the key expects (see `benchplan schema`)".to_string()
    } else {
        "see `benchplan schema` for what this key takes".to_string()
    };
    Diagnostic::error(path, raw.to_string()).with_help(help)
}
