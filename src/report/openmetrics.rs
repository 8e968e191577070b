//! metrics.prom: the run's results in the OpenMetrics text format, one gauge series per
//! case × metric, labelled by case, service and matrix values. For teams that push
//! results to a Prometheus Pushgateway (`curl --data-binary @metrics.prom …`); the file
//! is the interface, benchplan pushes nothing.

use std::fmt::Write as _;

use indexmap::IndexMap;
use serde_json::Value;

use super::csv::Row;
use super::view::CaseView;

/// A Prometheus metric or label name from a result key or axis (`dataset.input_len` →
/// `dataset_input_len`).
fn name(key: &str) -> String {
    let mut s: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

/// A label value, escaped as the text format wants.
fn value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The text of metrics.prom: every finite numeric top-level result key of every case
/// that has a result, as `benchplan_<key>`, grouped by metric, ending with `# EOF`.
pub fn openmetrics(rows: &[Row], views: &[CaseView]) -> String {
    let mut series: IndexMap<String, Vec<(String, f64)>> = IndexMap::new();
    for row in rows {
        let Some(r) = &row.result else { continue };
        let mut labels = vec![
            format!("case=\"{}\"", value(&row.id)),
            format!("service=\"{}\"", value(&row.service)),
        ];
        if let Some(v) = views.iter().find(|v| v.id == row.id) {
            if let Some(c) = v.concurrency {
                labels.push(format!("max_concurrency=\"{c}\""));
            }
            labels.push(format!("request_rate=\"{}\"", value(&v.rate)));
            for (k, x) in &v.axes {
                labels.push(format!("{}=\"{}\"", name(k), value(x)));
            }
        }
        let labels = labels.join(",");
        for (k, v) in r {
            if let Some(x) = v.as_f64().filter(|x| x.is_finite()) {
                if matches!(v, Value::Number(_)) {
                    series
                        .entry(format!("benchplan_{}", name(k)))
                        .or_default()
                        .push((labels.clone(), x));
                }
            }
        }
    }
    let mut out = String::new();
    for (metric, points) in &series {
        let _ = writeln!(out, "# TYPE {metric} gauge");
        for (labels, x) in points {
            let _ = writeln!(out, "{metric}{{{labels}}} {x}");
        }
    }
    out.push_str("# EOF\n");
    out
}
