//! Keeping secrets out of everything benchplan writes or prints: the one rule, owned
//! here. API keys come from the environment and are never written; a plan may still
//! carry secrets in `headers` (an `Authorization` header), in a key like `extra_body`'s
//! `api_key` or the simulator's, in a URL's userinfo (`http://user:pass@gateway`), and
//! a command line in `--set`, `--header`, `--sim-set` or `--base-url`. Every copy of
//! the plan, every result, the manifest, the reports and the console get the redacted
//! forms from here:
//!
//! - a value under a secret-looking key ([`is_secret_key`]) becomes `<redacted>`;
//! - a URL's userinfo becomes `<redacted>` (`http://<redacted>@gateway/v1`), wherever
//!   the URL stands ([`url`], [`text`]);
//! - the secret values of the plan are also registered ([`register`]) and every file
//!   benchplan writes is scrubbed of them ([`scrub_registered`], called by `files`), as
//!   a last line behind the structural rules above.
//!
//! The requests themselves still carry every credential: only what is recorded or shown
//! is redacted.

use std::borrow::Cow;
use std::sync::RwLock;

use serde_json::Value;

/// What a secret becomes.
pub const REDACTED: &str = "<redacted>";

/// Whether a key or header name looks like it holds a secret. `api_key_env` (a
/// variable's name), `tokenizer` and `max_tokens` do not.
pub fn is_secret_key(name: &str) -> bool {
    let n = name.to_ascii_lowercase().replace('-', "_");
    const ENDINGS: [&str; 13] = [
        "authorization",
        "api_key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "cookie",
        "credential",
        "credentials",
        "private_key",
        "bearer",
        "auth",
    ];
    ENDINGS
        .iter()
        .any(|e| n == *e || n.ends_with(&format!("_{e}")))
}

/// `v` as JSON with [`redact_json`] applied: a case's parameters (`extra_body`'s keys,
/// headers) as a result or manifest records them.
pub fn redacted<T: serde::Serialize>(v: &T) -> Value {
    let mut j = serde_json::to_value(v).unwrap_or(Value::Null);
    redact_json(&mut j);
    j
}

/// A JSON text (an `--extra-body` value) with [`redact_json`] applied; text that is
/// not JSON is hidden whole.
fn redact_json_text(t: &str) -> String {
    match serde_json::from_str::<Value>(t) {
        Ok(mut v) => {
            redact_json(&mut v);
            v.to_string()
        }
        Err(_) => REDACTED.into(),
    }
}

/// Replaces, in place, the value of every secret-looking key of a JSON tree, and the
/// userinfo of every URL in its strings.
pub fn redact_json(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if is_secret_key(k) && !x.is_null() {
                    *x = Value::String(REDACTED.into());
                } else {
                    redact_json(x);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_json),
        Value::String(s) => {
            if let Cow::Owned(t) = text(s) {
                *s = t;
            }
        }
        _ => {}
    }
}

/// Where the userinfo of the URL starting at byte `at` (its scheme's first byte) lies:
/// the bytes between `://` and the last `@` of its authority.
fn userinfo_span(s: &str, after_scheme: usize) -> Option<(usize, usize)> {
    let rest = &s[after_scheme..];
    let end = rest
        .find(|c: char| {
            matches!(c, '/' | '?' | '#')
                || c.is_whitespace()
                || matches!(c, '"' | '\'' | '<' | '>' | '`')
        })
        .unwrap_or(rest.len());
    let at = rest[..end].rfind('@')?;
    (at > 0).then_some((after_scheme, after_scheme + at))
}

/// `s` with the userinfo of every `scheme://user:pass@host` in it replaced by
/// `<redacted>`; borrowed when there is none (the common case costs one search).
pub fn text(s: &str) -> Cow<'_, str> {
    if !s.contains("://") || !s.contains('@') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut from = 0;
    let mut search = 0;
    while let Some(i) = s[search..].find("://") {
        let after = search + i + 3;
        match userinfo_span(s, after) {
            Some((a, b)) => {
                out.push_str(&s[from..a]);
                out.push_str(REDACTED);
                from = b;
                search = b;
            }
            None => search = after,
        }
    }
    if from == 0 {
        return Cow::Borrowed(s);
    }
    out.push_str(&s[from..]);
    Cow::Owned(out)
}

/// A URL as it may be shown or recorded: its userinfo replaced (see [`text`]).
pub fn url(u: &str) -> String {
    text(u).into_owned()
}

/// The userinfo of every URL in `s` (`user:pass`), for scrubbing text that holds them.
fn userinfos(s: &str, out: &mut Vec<String>) {
    let mut search = 0;
    while let Some(i) = s[search..].find("://") {
        let after = search + i + 3;
        if let Some((a, b)) = userinfo_span(s, after) {
            out.push(s[a..b].to_string());
        }
        search = after;
    }
}

/// The secret values of a JSON tree (strings under secret-looking keys, and the
/// userinfo of URLs in its strings), longest first.
pub fn secret_values(v: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    match x {
                        Value::String(s) if is_secret_key(k) && !s.is_empty() => {
                            out.push(s.clone())
                        }
                        Value::Number(n) if is_secret_key(k) => out.push(n.to_string()),
                        _ => walk(x, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|x| walk(x, out)),
            Value::String(s) => userinfos(s, out),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

/// `text` with every occurrence of each secret replaced (secrets of fewer than four
/// characters are left: replacing them would garble the text and hide nothing).
pub fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), REDACTED);
        }
    }
    out
}

/// The secrets every written file is scrubbed of (see [`register`]).
static REGISTERED: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Adds secret values (a plan's: [`secret_values`]; an API key from the environment)
/// to those every file benchplan writes is scrubbed of. Values shorter than eight
/// characters are not kept: replacing `1234` in every file would break its numbers,
/// and the structural rules already keep short secrets out.
pub fn register(values: impl IntoIterator<Item = String>) {
    let mut r = REGISTERED.write().unwrap_or_else(|e| e.into_inner());
    for v in values {
        if v.len() >= 8 && !r.contains(&v) {
            r.push(v);
        }
    }
    r.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// `bytes` with every registered secret and every URL's userinfo replaced, borrowed
/// when there is nothing to replace. Bytes that are not UTF-8 (none benchplan writes)
/// are left as they are.
pub fn scrub_registered(bytes: &[u8]) -> Cow<'_, [u8]> {
    let Ok(s) = std::str::from_utf8(bytes) else {
        return Cow::Borrowed(bytes);
    };
    let r = REGISTERED.read().unwrap_or_else(|e| e.into_inner());
    let hit = r.iter().any(|x| s.contains(x.as_str()));
    let urls = text(s);
    if !hit {
        return match urls {
            Cow::Borrowed(_) => Cow::Borrowed(bytes),
            Cow::Owned(t) => Cow::Owned(t.into_bytes()),
        };
    }
    Cow::Owned(scrub(&urls, &r).into_bytes())
}

/// `KEY=VALUE` with the value hidden when the key (or its last dotted segment, or a
/// `headers` table it sits in) looks secret.
fn redact_assignment(kv: &str, all_values: bool) -> String {
    match kv.split_once('=') {
        Some((k, _)) if all_values || secret_path(k) => format!("{k}={REDACTED}"),
        Some(_) => kv.to_string(),
        None if all_values => REDACTED.into(),
        None => kv.to_string(),
    }
}

/// Whether a dotted key path (`services.prod.headers.Authorization`) names a secret.
fn secret_path(path: &str) -> bool {
    path.split('.')
        .map(|s| s.trim_matches('"'))
        .any(is_secret_key)
}

/// A command line with secrets hidden: values of `--set`/`--sim-set` assignments whose
/// key looks secret, and every `--header` value (any header may carry a key).
pub fn command_line(args: &[String]) -> String {
    command_args(args).join(" ")
}

/// [`command_line`]'s arguments, one by one (a command another program is given).
pub fn command_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    // The flag whose values follow (`--header` takes several).
    let mut taking: Option<&str> = None;
    for a in args {
        if let Some(flag) = a.strip_prefix("--") {
            let (name, inline) = match flag.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (flag, None),
            };
            let kind = match name {
                "header" => Some("header"),
                "set" | "sim-set" => Some("set"),
                "extra-body" => Some("json"),
                _ => None,
            };
            match (kind, inline) {
                (Some("json"), Some(v)) => {
                    out.push(format!("--{name}={}", redact_json_text(v)));
                    taking = None;
                }
                (Some(k), Some(v)) => {
                    out.push(format!("--{name}={}", redact_assignment(v, k == "header")));
                    taking = None;
                }
                (k, None) => {
                    out.push(a.clone());
                    taking = k;
                }
                (None, Some(_)) => {
                    out.push(text(a).into_owned());
                    taking = None;
                }
            }
            continue;
        }
        match taking {
            Some("header") => out.push(redact_assignment(a, true)),
            Some("json") => {
                out.push(redact_json_text(a));
                taking = None;
            }
            Some(_) => {
                out.push(text(&redact_assignment(a, false)).into_owned());
                taking = None; // --set takes one value
            }
            None => out.push(text(a).into_owned()),
        }
    }
    out
}

/// This process's command line, redacted.
pub fn this_command() -> String {
    command_line(&std::env::args().collect::<Vec<_>>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_keys_and_not_their_neighbours() {
        for k in [
            "Authorization",
            "api_key",
            "x-api-key",
            "OPENAI_API_KEY",
            "token",
            "Access-Token",
            "password",
            "cookie",
        ] {
            assert!(is_secret_key(k), "{k}");
        }
        for k in [
            "api_key_env",
            "tokenizer",
            "max_tokens",
            "model",
            "session_header",
            "X-Session-ID",
        ] {
            assert!(!is_secret_key(k), "{k}");
        }
    }

    #[test]
    fn json_trees_and_command_lines_lose_their_secrets() {
        let mut v = json!({"services": {"p": {"headers": {"Authorization": "Bearer s3cr3t", "X-Env": "prod"},
            "api_key_env": "MY_KEY", "sim": {"api_key": "k-123"}}}});
        assert_eq!(secret_values(&v), vec!["Bearer s3cr3t", "k-123"]);
        redact_json(&mut v);
        let t = v.to_string();
        assert!(!t.contains("s3cr3t") && !t.contains("k-123"), "{t}");
        assert!(t.contains("prod") && t.contains("MY_KEY"));
        let args: Vec<String> = [
            "benchplan",
            "run",
            "p.toml",
            "--set",
            "services.p.headers.Authorization=Bearer s3cr3t",
            "--set",
            "defaults.num_prompts=5",
            "--set=services.p.sim.api_key=k-123",
            "--header",
            "X-Key=abc",
            "Y=zq9-val",
            "--extra-body",
            r#"{"api_key": "eb-777", "top_k": 5}"#,
            "--model",
            "m",
        ]
        .map(String::from)
        .to_vec();
        let c = command_line(&args);
        assert!(c.contains("top_k"), "{c}");
        for s in ["s3cr3t", "k-123", "abc", "zq9-val", "eb-777"] {
            assert!(!c.contains(s), "{s} in {c}");
        }
        assert!(
            c.contains("defaults.num_prompts=5") && c.contains("--model m"),
            "{c}"
        );
        assert_eq!(
            scrub("key Bearer s3cr3t here", &["Bearer s3cr3t".into()]),
            "key <redacted> here"
        );
    }

    #[test]
    fn url_userinfo_is_redacted_wherever_the_url_stands() {
        assert_eq!(
            url("http://u:p4ss@gw:8000/v1"),
            "http://<redacted>@gw:8000/v1"
        );
        assert_eq!(url("https://gw/v1?a=b@c"), "https://gw/v1?a=b@c");
        assert_eq!(url("http://127.0.0.1:8000"), "http://127.0.0.1:8000");
        assert_eq!(
            text("cannot reach http://a:b@h/x and https://c@d:1, said \"http://e:f@g\""),
            "cannot reach http://<redacted>@h/x and https://<redacted>@d:1, said \"http://<redacted>@g\""
        );
        assert!(matches!(
            text("mail me@host, see http://h/"),
            Cow::Borrowed(_)
        ));
        let mut v = json!({"base_url": "http://user:pw-9@gw", "n": [ "x http://k:v@h y" ]});
        assert_eq!(secret_values(&v), vec!["user:pw-9", "k:v"]);
        redact_json(&mut v);
        assert_eq!(
            v,
            json!({"base_url": "http://<redacted>@gw", "n": ["x http://<redacted>@h y"]})
        );
        let c = command_line(
            &[
                "benchplan",
                "bench",
                "--base-url",
                "http://u:zz-top@h:1",
                "--x=https://a:bb-cc@h",
            ]
            .map(String::from),
        );
        assert!(!c.contains("zz-top") && !c.contains("bb-cc"), "{c}");
    }

    #[test]
    fn registered_secrets_leave_every_written_file() {
        register(["reg-secret-41".to_string(), "ab".to_string()]);
        let out =
            scrub_registered(b"{\"k\": \"reg-secret-41\", \"u\": \"http://x:y@h\", \"s\": \"ab\"}");
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "{\"k\": \"<redacted>\", \"u\": \"http://<redacted>@h\", \"s\": \"ab\"}"
        );
        assert!(matches!(scrub_registered(b"plain"), Cow::Borrowed(_)));
    }
}
