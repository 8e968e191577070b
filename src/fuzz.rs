//! Entry points for the property tests (`tests/it/props.rs`) and the `cargo fuzz`
//! targets (`fuzz/`): each feeds arbitrary bytes to one parser the way benchplan uses
//! it and checks what must hold whatever the input. A panic here is a bug.

use crate::client::sse::SseParser;
use crate::plan::{Format, PlanSource};

/// A plan file of either syntax: parsing, then planning, never panics.
pub fn plan(data: &[u8], format: Format) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(source) = PlanSource::parse(text, "fuzz", std::path::PathBuf::from("."), format) {
        let _ = crate::planner::plan(source);
    }
}

/// `--set KEY=VALUE` on a small valid plan, then planning.
pub fn set_override(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let base = "[services.s]\nsim = { preset = \"fast\" }\n[defaults]\nnum_prompts = 2\n";
    let mut source = PlanSource::parse(base, "fuzz.toml", ".".into(), Format::Toml)
        .expect("the base plan parses");
    if source.apply_set(text).is_ok() {
        let _ = crate::planner::plan(source);
    }
}

/// The SSE framer: splitting the bytes anywhere gives the same events as one read,
/// and no line or event is delivered past the limit.
pub fn sse(data: &[u8]) {
    let (split, body) = match data.split_first() {
        Some((s, rest)) => (*s as usize, rest),
        None => return,
    };
    let limit = 1 << 12;
    let run = |parts: &[&[u8]]| {
        let mut p = SseParser::with_limit(limit);
        let mut out: Vec<(Option<Vec<u8>>, Vec<u8>)> = Vec::new();
        let mut push = |e: crate::client::sse::SseEvent<'_>| {
            assert!(e.data.len() <= limit, "an event past the limit");
            out.push((e.event.map(<[u8]>::to_vec), e.data.to_vec()));
        };
        for part in parts {
            if p.feed(part, &mut push).is_err() {
                return None;
            }
        }
        p.finish(&mut push).ok()?;
        Some(out)
    };
    let at = split.min(body.len());
    let whole = run(&[body]);
    let halves = run(&[&body[..at], &body[at..]]);
    // The limit may trip at a different moment, but never on one side only.
    assert_eq!(
        whole.is_some(),
        halves.is_some(),
        "the limit depends on the split"
    );
    if let (Some(a), Some(b)) = (whole, halves) {
        assert_eq!(a, b, "events depend on where the bytes were split");
    }
}

/// An HTTP/1.1 response, head and body (chunked, length or close-delimited), read in
/// pieces split where the input's first bytes say.
pub fn http_response(data: &[u8]) {
    let (splits, wire) = data.split_at(data.len().min(4));
    let cuts: Vec<usize> = splits.iter().map(|b| *b as usize * 7).collect();
    let a = crate::client::h1::parse_response(wire, &cuts);
    let b = crate::client::h1::parse_response(wire, &[]);
    assert_eq!(a, b, "the decoded body depends on the read boundaries");
}

/// The SLO grammar: a key and a value (table form) and the seed's `KEY:VALUE` form.
pub fn slo(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (k, v) = text.split_once('=').unwrap_or((text, ""));
    if let Ok(s) = crate::slo::Slo::from_entry(k, &serde_json::Value::String(v.to_string())) {
        assert!(s.threshold.is_finite() && s.threshold >= 0.0);
    }
    let _ = crate::slo::Slo::from_seed(text);
}

/// The stream chunk reader on arbitrary JSON; its fast path never disagrees with the
/// full parse.
pub fn chunk(data: &[u8]) {
    let full = crate::client::chunk::full_parse(data);
    if let Ok(c) = crate::client::chunk::parse(data) {
        assert_eq!(
            full.as_ref().ok(),
            Some(&c),
            "the chunk scan disagrees with serde"
        );
        let _ = c.token(crate::client::chunk::Api::Chat);
        let _ = c.token(crate::client::chunk::Api::Completions);
    }
}

/// A plan in the syntax the first byte picks (even: TOML, odd: YAML).
pub fn plan_any(data: &[u8]) {
    match data.split_first() {
        Some((b, rest)) if b % 2 == 0 => plan(rest, Format::Toml),
        Some((_, rest)) => plan(rest, Format::Yaml),
        None => {}
    }
}

/// A target: a name (its `fuzz/` binary and its regression folder) and its entry point.
pub type Target = (&'static str, fn(&[u8]));

/// Every target by name (the fuzz script and the regression corpus use these names).
pub const TARGETS: &[Target] = &[
    ("plan", plan_any),
    ("plan_toml", |d| plan(d, Format::Toml)),
    ("plan_yaml", |d| plan(d, Format::Yaml)),
    ("set_override", set_override),
    ("sse", sse),
    ("http_response", http_response),
    ("slo", slo),
    ("chunk", chunk),
];
