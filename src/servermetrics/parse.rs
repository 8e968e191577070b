//! Reading one `/metrics` page: the Prometheus text format, parsed by the
//! `prom_text_format_parser` crate (it reads the `:` of vLLM's and SGLang's names), flattened to one number per series. A histogram or a
//! summary gives its `_sum` and `_count` as counters (what a delta needs).

/// How a series' value may be used: counters are differenced, gauges sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    /// Untyped: kept raw, never differenced.
    Other,
}

/// One sample of one series.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    /// Label pairs, sorted by name (a stable key).
    pub labels: Vec<(String, String)>,
    pub kind: Kind,
    pub value: f64,
}

impl Series {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// `name{a="1",b="2"}`: the series' identity in raw output.
    pub fn key(&self) -> String {
        if self.labels.is_empty() {
            return self.name.clone();
        }
        let l: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect();
        format!("{}{{{}}}", self.name, l.join(","))
    }
}

/// Parses a page. An empty page has no series; a page the parser refuses is an error
/// with its message (the scrape counts as failed, the case goes on).
pub fn parse(text: &str) -> Result<Vec<Series>, String> {
    use prom_text_format_parser::{Scrape, Type, ValueType};
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let scrape = Scrape::parse(text).map_err(|e| format!("unparsable metrics page: {e:?}"))?;
    let mut out = Vec::new();
    for m in &scrape.metrics {
        for sample in &m.samples {
            let mut labels: Vec<(String, String)> = sample
                .labels
                .iter()
                .map(|l| (l.key.clone(), unescape(&l.value)))
                .collect();
            labels.sort();
            let value = sample.value.value.parse::<f64>().unwrap_or(f64::NAN);
            let (name, kind) = match (m.kind, sample.value.value_type) {
                (_, ValueType::Sum) => (format!("{}_sum", m.name), Kind::Counter),
                (_, ValueType::Count) => (format!("{}_count", m.name), Kind::Counter),
                // Buckets and quantiles: kept as they are, never differenced.
                (Type::Histogram | Type::Summary, ValueType::Sample) => {
                    let suffix = if m.kind == Type::Histogram {
                        "_bucket"
                    } else {
                        ""
                    };
                    (format!("{}{suffix}", m.name), Kind::Other)
                }
                (Type::Counter, _) => (m.name.clone(), Kind::Counter),
                (Type::Gauge, _) => (m.name.clone(), Kind::Gauge),
                (Type::Untyped, _) => (m.name.clone(), Kind::Other),
            };
            out.push(Series {
                name,
                labels,
                kind,
                value,
            });
        }
    }
    out.sort_by(|a, b| (&a.name, &a.labels).cmp(&(&b.name, &b.labels)));
    Ok(out)
}

/// A label value as written (`\\`, `\"`, `\n` escaped) to what it says.
fn unescape(v: &str) -> String {
    if !v.contains('\\') {
        return v.to_string();
    }
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}
