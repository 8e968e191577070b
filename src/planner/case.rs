//! A case: one service and one fully resolved set of parameters, with a stable id.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::hash::fnv1a64;
use crate::plan::CaseParams;

/// One benchmark run to make: a service and its resolved parameters.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    /// `{service}-{varying parameters}-{hash}`: the same plan gives the same ids on every machine.
    pub id: String,
    /// The service's name in the plan.
    pub service: String,
    /// Every parameter resolved: defaults, matrix values, backend and endpoint filled in.
    pub params: CaseParams,
    /// The matrix values this case was made from, in axis order.
    #[serde(skip)]
    pub assignments: Vec<Assignment>,
    /// The repeats (1-based) this process runs when a shard owns only some of them
    /// (`--shard-by repeat`); None runs all of `execution.repeats`.
    #[serde(skip)]
    pub repeats: Option<Vec<u64>>,
}

/// One matrix value of a case. Keys and origins are shared by every case that uses them.
#[derive(Debug, Clone)]
pub struct Assignment {
    /// The axis key, such as `max_concurrency` or `dataset.input_len`.
    pub key: Arc<str>,
    pub value: Value,
    /// The key path in the plan that gave this value, such as `matrix.max_concurrency[2]`.
    pub origin: Arc<str>,
}

impl Case {
    /// The value this case assigns to an axis key, if it assigns one.
    pub fn assigned(&self, key: &str) -> Option<&Value> {
        self.assignments
            .iter()
            .find(|a| &*a.key == key)
            .map(|a| &a.value)
    }

    /// The key path in the plan that set parameter `key` for this case (for diagnostics).
    pub fn origin_of(&self, key: &str) -> String {
        // The most specific assignment that covers the key: `dataset.input_len` covers itself,
        // `dataset` covers `dataset.input_len`.
        let mut k = key;
        loop {
            if let Some(a) = self.assignments.iter().find(|a| &*a.key == k) {
                return a.origin.to_string();
            }
            match k.rsplit_once('.') {
                Some((parent, _)) => k = parent,
                None => return format!("defaults.{key}"),
            }
        }
    }
}

/// Short readable names of common axes, for case ids.
fn short_key(key: &str) -> Option<&'static str> {
    Some(match key {
        "max_concurrency" => "c",
        "request_rate" => "r",
        "num_prompts" => "n",
        "burstiness" => "b",
        "dataset.input_len" => "in",
        "dataset.output_len" => "out",
        "dataset.prefix_len" => "prefix",
        "multi_turn_concurrency" => "conv",
        "dataset.num_turns" => "turns",
        _ => return None,
    })
}

fn sanitize(text: &str, out: &mut String) {
    for c in text.chars() {
        let c = c.to_ascii_lowercase();
        out.push(if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            c
        } else {
            '_'
        });
    }
}

/// The readable part of a case id: service, then `{short key}{value}` per assignment.
pub fn slug(service: &str, assignments: &[Assignment]) -> String {
    let mut s = String::with_capacity(48);
    sanitize(service, &mut s);
    for Assignment { key, value, .. } in assignments {
        let key: &str = key;
        if key == "service" {
            continue;
        }
        s.push('-');
        match short_key(key) {
            Some(k) => s.push_str(k),
            None => {
                sanitize(key.rsplit('.').next().unwrap_or(key), &mut s);
                s.push('=');
            }
        }
        match value {
            Value::String(v) => sanitize(v, &mut s),
            Value::Number(n) => s.push_str(&n.to_string()),
            Value::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
            other => s.push_str(&format!(
                "{:08x}",
                fnv1a64(other.to_string().as_bytes()) as u32
            )),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn slugs_are_readable() {
        let a: Vec<Assignment> = [
            ("service", json!("Local GPU")),
            ("max_concurrency", json!(4)),
            ("dataset.input_len", json!(512)),
            ("temperature", json!(0.5)),
        ]
        .into_iter()
        .map(|(k, v)| Assignment {
            key: k.into(),
            value: v,
            origin: "matrix".into(),
        })
        .collect();
        assert_eq!(slug("Local GPU", &a), "local_gpu-c4-in512-temperature=0.5");
    }
}
