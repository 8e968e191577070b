//! Plan text → a generic JSON tree plus a map from key paths to line and column.
//!
//! The typed plan is deserialised from the JSON tree, and every later check asks
//! [`PlanSource::locate`] where a key path sits in the file, so TOML and YAML
//! diagnostics point at the same kind of place. `--set` overrides are applied here,
//! before anything is typed, so an override is validated like a line of the file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

use crate::diag::{Diagnostic, Diagnostics, Location};

/// The two plan syntaxes; they carry the same structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Toml,
    Yaml,
}

impl Format {
    /// The format a file name implies, if any.
    pub fn from_path(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()? {
            "toml" => Some(Format::Toml),
            "yaml" | "yml" => Some(Format::Yaml),
            _ => None,
        }
    }
}

/// A plan as read: its JSON tree, its origin, and where each key path stands.
#[derive(Debug, Clone)]
pub struct PlanSource {
    /// How diagnostics name the file (`-` reads as `<stdin>`).
    pub name: String,
    /// Relative dataset paths are resolved against this folder.
    pub dir: PathBuf,
    pub format: Format,
    /// The text as given (kept so runs can archive the plan exactly).
    pub text: String,
    pub value: Value,
    spans: HashMap<String, (usize, usize)>,
    /// Paths set by `--set`, with the override's text.
    overrides: HashMap<String, String>,
}

/// Appends a map key to a key path, quoting keys that contain dots or spaces.
pub fn join_key(base: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let key = if plain {
        key.to_string()
    } else {
        format!("\"{key}\"")
    };
    if base.is_empty() {
        key
    } else {
        format!("{base}.{key}")
    }
}

/// Appends a list index to a key path.
pub fn join_index(base: &str, index: usize) -> String {
    format!("{base}[{index}]")
}

impl PlanSource {
    /// Reads a plan file (`-` is stdin, which needs `format`).
    pub fn load(path: &Path, format: Option<Format>) -> Result<PlanSource, Diagnostics> {
        let fail = |msg: String, help: &str| {
            Diagnostics(vec![Diagnostic::error("", msg).with_help(help.to_string())])
        };
        if path == Path::new("-") {
            let format = format.ok_or_else(|| {
                fail(
                    "reading a plan from stdin needs its format".into(),
                    "add `--format toml` or `--format yaml`",
                )
            })?;
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| fail(format!("cannot read stdin: {e}"), "pipe a plan in"))?;
            let dir = std::env::current_dir().unwrap_or_default();
            return PlanSource::parse(&text, "<stdin>", dir, format);
        }
        let format = format.or_else(|| Format::from_path(path)).ok_or_else(|| {
            fail(
                format!("cannot tell the format of {}", path.display()),
                "name the file .toml, .yaml or .yml, or pass `--format`",
            )
        })?;
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if size > MAX_PLAN_BYTES as u64 {
            return Err(fail(
                format!(
                    "plan {} is {size} bytes; a plan may be at most {MAX_PLAN_BYTES} bytes",
                    path.display()
                ),
                "a plan describes cases; put large data in a dataset file it points to",
            ));
        }
        let bytes = std::fs::read(path).map_err(|e| {
            fail(
                format!("cannot read plan {}: {e}", path.display()),
                "check the path",
            )
        })?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let at = e.utf8_error().valid_up_to();
            let before = String::from_utf8_lossy(&e.as_bytes()[..at]).into_owned();
            let (line, column) = line_col(&before, before.len());
            Diagnostics(vec![
                Diagnostic::error("", "the plan is not UTF-8 text")
                    .at(Some(Location {
                        file: path.display().to_string(),
                        line,
                        column,
                    }))
                    .with_help(
                        "save the file as UTF-8 (the byte at this position is not valid UTF-8)",
                    ),
            ])
        })?;
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("."));
        PlanSource::parse(&text, &path.display().to_string(), dir, format)
    }

    /// Parses plan text; a syntax error comes back with its line and column.
    pub fn parse(
        text: &str,
        name: &str,
        dir: PathBuf,
        format: Format,
    ) -> Result<PlanSource, Diagnostics> {
        let too = |msg: String, line: usize, column: usize, help: &str| {
            Diagnostics(vec![
                Diagnostic::error("", msg)
                    .at(Some(Location {
                        file: name.into(),
                        line,
                        column,
                    }))
                    .with_help(help.to_string()),
            ])
        };
        if text.len() > MAX_PLAN_BYTES {
            return Err(too(
                format!(
                    "the plan is {} bytes; a plan may be at most {MAX_PLAN_BYTES} bytes",
                    text.len()
                ),
                1,
                1,
                "a plan describes cases; put large data in a dataset file it points to",
            ));
        }
        // The parsers and the typed loader recurse per level: refuse absurd nesting
        // before it can exhaust the stack.
        if let Some(offset) = nesting_past(text, MAX_NESTING) {
            let (line, column) = line_col(text, offset);
            return Err(too(
                format!("the plan nests lists or tables more than {MAX_NESTING} levels deep"),
                line,
                column,
                "a plan needs only a few levels; flatten the structure",
            ));
        }
        let mut spans = HashMap::new();
        let value = match format {
            Format::Toml => parse_toml(text, name, &mut spans)?,
            Format::Yaml => parse_yaml(text, name, &mut spans)?,
        };
        if !value.is_object() {
            return Err(Diagnostics(vec![
                Diagnostic::error(
                    "",
                    "a plan must be a table of keys (name, services, defaults, …)",
                )
                .at(Some(Location {
                    file: name.into(),
                    line: 1,
                    column: 1,
                })),
            ]));
        }
        Ok(PlanSource {
            name: name.to_string(),
            dir,
            format,
            text: text.to_string(),
            value,
            spans,
            overrides: HashMap::new(),
        })
    }

    /// A plan built in code (such as from `benchplan bench` flags): no file, no lines.
    pub fn from_value(name: &str, value: Value) -> PlanSource {
        PlanSource {
            name: name.to_string(),
            dir: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            format: Format::Toml,
            text: serde_json::to_string_pretty(&value).unwrap_or_default(),
            value,
            spans: HashMap::new(),
            overrides: HashMap::new(),
        }
    }

    /// Where a key path is: the path itself, else its nearest ancestor in the file.
    pub fn locate(&self, path: &str) -> Option<Location> {
        let mut p = path;
        loop {
            if let Some(text) = self.overrides.get(p) {
                return Some(Location {
                    file: format!("--set {text}"),
                    line: 1,
                    column: 1,
                });
            }
            if let Some(&(line, column)) = self.spans.get(p) {
                return Some(Location {
                    file: self.name.clone(),
                    line,
                    column,
                });
            }
            p = parent_path(p)?;
        }
    }

    /// Whether the file (or a `--set`) gives this exact key path.
    pub fn has(&self, path: &str) -> bool {
        self.spans.contains_key(path) || self.overrides.contains_key(path)
    }

    /// Applies `KEY=VALUE`: a dotted path (quote keys holding dots: `matrix."dataset.input_len"`)
    /// and a value read as JSON when it parses as JSON, else as a plain string.
    pub fn apply_set(&mut self, assignment: &str) -> Result<(), Diagnostic> {
        let (key, raw) = assignment.split_once('=').ok_or_else(|| {
            Diagnostic::error("", format!("--set `{assignment}` has no `=`"))
                .with_help("write --set KEY=VALUE, for example --set defaults.num_prompts=50")
        })?;
        let segments = split_dotted(key.trim()).map_err(|m| {
            Diagnostic::error(key, m)
                .with_help("quote keys that hold dots: matrix.\"dataset.input_len\"=[128]")
        })?;
        let new: Value =
            serde_json::from_str(raw.trim()).unwrap_or_else(|_| Value::String(raw.to_string()));
        let mut path = String::new();
        for seg in &segments[..segments.len() - 1] {
            path = join_key(&path, seg);
        }
        let last = segments
            .last()
            .expect("split_dotted gives at least one segment");
        let full = join_key(&path, last);
        let parent = segments[..segments.len() - 1].iter().try_fold(
            &mut self.value,
            |node, seg| match node {
                Value::Object(map) => Some(
                    map.entry(seg.clone())
                        .or_insert_with(|| Value::Object(Map::new())),
                ),
                _ => None,
            },
        );
        match parent {
            Some(Value::Object(map)) => {
                map.insert(last.clone(), new);
            }
            _ => {
                return Err(Diagnostic::error(
                    full,
                    "cannot set a key inside a value that is not a table",
                ));
            }
        }
        let path = full;
        self.overrides.insert(path, assignment.to_string());
        Ok(())
    }
}

/// The largest plan accepted, in bytes.
pub const MAX_PLAN_BYTES: usize = 16 << 20;
/// The deepest nesting of lists and tables accepted.
pub const MAX_NESTING: usize = 64;

/// The byte offset where bracket nesting (`[`, `{`, outside quoted strings and
/// comments) first passes `max`, if it does. YAML block nesting is bounded by the
/// indentation that many levels would need, within the size limit, and by the YAML
/// parser's own recursion limit.
fn nesting_past(text: &str, max: usize) -> Option<usize> {
    let b = text.as_bytes();
    let (mut depth, mut i) = (0usize, 0usize);
    let mut quote: Option<u8> = None;
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(q) => {
                if c == b'\\' && q == b'"' {
                    i += 1;
                } else if c == q || c == b'\n' {
                    quote = None;
                }
            }
            None => match c {
                b'"' | b'\'' => quote = Some(c),
                b'#' => {
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                }
                b'[' | b'{' => {
                    depth += 1;
                    if depth > max {
                        return Some(i);
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        i += 1;
    }
    None
}

/// The parent of a key path (`a.b[2]` → `a.b`, `a.b` → `a`), or None at the top.
fn parent_path(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    if path.ends_with(']') {
        return path.rfind('[').map(|i| &path[..i]);
    }
    // The last dot outside quotes.
    let mut in_quotes = false;
    let mut last = None;
    for (i, c) in path.char_indices() {
        match c {
            '"' => in_quotes = !in_quotes,
            '.' if !in_quotes => last = Some(i),
            _ => {}
        }
    }
    Some(last.map_or("", |i| &path[..i]))
}

/// Splits `a."b.c".d` into `["a", "b.c", "d"]`.
fn split_dotted(key: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    for c in key.chars() {
        match c {
            '"' => in_quotes = !in_quotes,
            '.' if !in_quotes => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    if in_quotes {
        return Err("unclosed quote in the key".into());
    }
    out.push(cur);
    if out.iter().any(String::is_empty) {
        return Err("empty key segment".into());
    }
    Ok(out)
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    LineIndex::new(text).at(offset)
}

/// Where each line of a text starts, so the line and column of a byte offset cost a
/// binary search and the line's length, not a scan from the top: a plan of 100,000
/// keys is located in linear time, not quadratic.
struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    fn new(text: &'a str) -> LineIndex<'a> {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { text, starts }
    }

    /// 1-based line and column (in characters) of `offset`.
    fn at(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&s| s <= offset);
        let start = self.starts[line - 1];
        let column = self
            .text
            .get(start..offset)
            .map_or(0, |l| l.chars().count())
            + 1;
        (line, column)
    }
}

fn parse_toml(
    text: &str,
    name: &str,
    spans: &mut HashMap<String, (usize, usize)>,
) -> Result<Value, Diagnostics> {
    use toml::de::{DeTable, DeValue};
    let table = DeTable::parse(text).map_err(|e| {
        let (line, column) = e.span().map_or((1, 1), |s| line_col(text, s.start));
        Diagnostics(vec![
            Diagnostic::error("", format!("TOML syntax error: {}", e.message().trim()))
                .at(Some(Location {
                    file: name.into(),
                    line,
                    column,
                }))
                .with_help("fix the syntax at this line; see https://toml.io for the format"),
        ])
    })?;

    fn convert(
        v: &DeValue<'_>,
        path: &str,
        lines: &LineIndex<'_>,
        spans: &mut HashMap<String, (usize, usize)>,
    ) -> Value {
        match v {
            DeValue::String(s) => Value::String(s.to_string()),
            DeValue::Integer(i) => {
                let digits = i.as_str().replace('_', "");
                let (neg, body) = match digits.strip_prefix('-') {
                    Some(b) => (true, b.to_string()),
                    None => (false, digits.trim_start_matches('+').to_string()),
                };
                let body = body
                    .trim_start_matches("0x")
                    .trim_start_matches("0o")
                    .trim_start_matches("0b");
                match i64::from_str_radix(body, i.radix()) {
                    Ok(n) => Value::from(if neg { -n } else { n }),
                    Err(_) => Value::String(i.as_str().to_string()),
                }
            }
            DeValue::Float(f) => {
                let s = f.as_str().replace('_', "");
                match s.parse::<f64>() {
                    Ok(x) if x.is_finite() => Value::from(x),
                    // JSON has no infinity: keep it as the string the plan types accept.
                    _ => Value::String(s.trim_start_matches('+').to_string()),
                }
            }
            DeValue::Boolean(b) => Value::Bool(*b),
            DeValue::Datetime(d) => Value::String(d.to_string()),
            DeValue::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        let p = join_index(path, i);
                        spans
                            .entry(p.clone())
                            .or_insert_with(|| lines.at(item.span().start));
                        convert(item.get_ref(), &p, lines, spans)
                    })
                    .collect(),
            ),
            DeValue::Table(t) => {
                let mut map = Map::new();
                for (k, item) in t.iter() {
                    let p = join_key(path, k.get_ref());
                    spans
                        .entry(p.clone())
                        .or_insert_with(|| lines.at(k.span().start));
                    map.insert(
                        k.get_ref().to_string(),
                        convert(item.get_ref(), &p, lines, spans),
                    );
                }
                Value::Object(map)
            }
        }
    }
    Ok(convert(
        &DeValue::Table(table.into_inner()),
        "",
        &LineIndex::new(text),
        spans,
    ))
}

fn parse_yaml(
    text: &str,
    name: &str,
    spans: &mut HashMap<String, (usize, usize)>,
) -> Result<Value, Diagnostics> {
    let raw: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| {
        let (line, column) = e.location().map_or((1, 1), |l| (l.line(), l.column()));
        let msg = e.to_string();
        // serde_yaml appends " at line L column C"; the location is shown separately.
        let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
        Diagnostics(vec![
            Diagnostic::error("", format!("YAML syntax error: {msg}"))
                .at(Some(Location {
                    file: name.into(),
                    line,
                    column,
                }))
                .with_help("check the indentation and the `key: value` form at this line"),
        ])
    })?;
    let mut recv = YamlSpans {
        stack: Vec::new(),
        spans,
    };
    // Already parsed by serde_yaml, so this second pass only collects positions.
    let _ = Parser::new_from_str(text).load(&mut recv, false);
    Ok(yaml_to_json(raw))
}

fn yaml_to_json(v: serde_yaml::Value) -> Value {
    use serde_yaml::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if f.is_finite() {
                    Value::from(f)
                } else if f.is_nan() {
                    Value::String("nan".into())
                } else if f > 0.0 {
                    Value::String("inf".into())
                } else {
                    Value::String("-inf".into())
                }
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(yaml_to_json).collect()),
        Y::Mapping(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| {
                    let key = match k {
                        Y::String(s) => s,
                        other => serde_yaml::to_string(&other)
                            .unwrap_or_default()
                            .trim()
                            .to_string(),
                    };
                    (key, yaml_to_json(v))
                })
                .collect(),
        ),
        Y::Tagged(t) => yaml_to_json(t.value),
    }
}

enum YamlFrame {
    Map { path: String, key: Option<String> },
    Seq { path: String, next: usize },
}

struct YamlSpans<'a> {
    stack: Vec<YamlFrame>,
    spans: &'a mut HashMap<String, (usize, usize)>,
}

impl YamlSpans<'_> {
    /// The path of the node that starts now, or None when this scalar is a mapping key.
    fn node_path(&mut self, scalar: Option<&str>, mark: Marker) -> Option<String> {
        let pos = (mark.line(), mark.col() + 1);
        match self.stack.last_mut() {
            None => Some(String::new()),
            Some(YamlFrame::Map { path, key }) => match key.take() {
                None => {
                    let k = scalar.unwrap_or_default().to_string();
                    self.spans.entry(join_key(path, &k)).or_insert(pos);
                    *key = Some(k);
                    None
                }
                Some(k) => Some(join_key(path, &k)),
            },
            Some(YamlFrame::Seq { path, next }) => {
                let p = join_index(path, *next);
                *next += 1;
                self.spans.entry(p.clone()).or_insert(pos);
                Some(p)
            }
        }
    }
}

impl MarkedEventReceiver for YamlSpans<'_> {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        match ev {
            Event::Scalar(s, ..) => {
                self.node_path(Some(&s), mark);
            }
            Event::Alias(_) => {
                self.node_path(Some(""), mark);
            }
            Event::MappingStart(..) => {
                let path = self.node_path(None, mark).unwrap_or_default();
                self.stack.push(YamlFrame::Map { path, key: None });
            }
            Event::SequenceStart(..) => {
                let path = self.node_path(None, mark).unwrap_or_default();
                self.stack.push(YamlFrame::Seq { path, next: 0 });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toml(text: &str) -> PlanSource {
        PlanSource::parse(text, "t.toml", ".".into(), Format::Toml).unwrap()
    }

    fn yaml(text: &str) -> PlanSource {
        PlanSource::parse(text, "t.yaml", ".".into(), Format::Yaml).unwrap()
    }

    #[test]
    fn toml_spans_point_at_keys() {
        let s = toml(
            "name = \"x\"\n\n[defaults]\nnum_prompts = 5\n\n[matrix]\n\"dataset.input_len\" = [1, 2]\n",
        );
        assert_eq!(s.locate("defaults.num_prompts").unwrap().line, 4);
        assert_eq!(s.locate("matrix.\"dataset.input_len\"[1]").unwrap().line, 7);
        assert_eq!(s.locate("defaults.nothing").unwrap().line, 3);
        assert_eq!(s.value["defaults"]["num_prompts"], 5);
    }

    #[test]
    fn yaml_spans_point_at_keys() {
        let s = yaml(
            "name: x\ndefaults:\n  num_prompts: 5\nmatrix:\n  max_concurrency: [1, 2]\n  exclude:\n    - service: a\n",
        );
        let loc = s.locate("defaults.num_prompts").unwrap();
        assert_eq!((loc.line, loc.column), (3, 3));
        assert_eq!(s.locate("matrix.exclude[0].service").unwrap().line, 7);
        assert_eq!(s.locate("matrix.max_concurrency[1]").unwrap().line, 5);
    }

    #[test]
    fn infinities_become_strings() {
        assert_eq!(toml("r = inf").value["r"], "inf");
        assert_eq!(yaml("r: .inf").value["r"], "inf");
    }

    #[test]
    fn set_overrides_dotted_and_quoted_paths() {
        let mut s = toml("[defaults]\nnum_prompts = 5\n");
        s.apply_set("defaults.num_prompts=50").unwrap();
        s.apply_set("matrix.\"dataset.input_len\"=[128, 256]")
            .unwrap();
        s.apply_set("name=nightly run").unwrap();
        assert_eq!(s.value["defaults"]["num_prompts"], 50);
        assert_eq!(s.value["matrix"]["dataset.input_len"][1], 256);
        assert_eq!(s.value["name"], "nightly run");
        assert!(
            s.locate("defaults.num_prompts")
                .unwrap()
                .file
                .starts_with("--set")
        );
        assert!(s.apply_set("novalue").is_err());
    }

    #[test]
    fn parent_paths() {
        assert_eq!(parent_path("a.b[2]"), Some("a.b"));
        assert_eq!(parent_path("matrix.\"x.y\""), Some("matrix"));
        assert_eq!(parent_path("a"), Some(""));
        assert_eq!(parent_path(""), None);
    }
}
