//! Keeping secrets out of everything benchplan writes or prints. API keys come from
//! the environment and are never written; a plan may still carry secrets in `headers`
//! (an `Authorization` header) or in a key like the simulator's `api_key`, and a
//! command line in `--set`, `--header` or `--sim-set`. Every copy of the plan, the
//! manifest, the report and the console get the redacted forms from here.

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

/// Replaces, in place, the value of every secret-looking key of a JSON tree.
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
        _ => {}
    }
}

/// The secret values of a JSON tree (strings under secret-looking keys), longest first.
pub fn secret_values(v: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    match x {
                        Value::String(s) if is_secret_key(k) && !s.is_empty() => {
                            out.push(s.clone())
                        }
                        _ => walk(x, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|x| walk(x, out)),
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
                _ => None,
            };
            match (kind, inline) {
                (Some(k), Some(v)) => {
                    out.push(format!("--{name}={}", redact_assignment(v, k == "header")));
                    taking = None;
                }
                (k, None) => {
                    out.push(a.clone());
                    taking = k;
                }
                (None, Some(_)) => {
                    out.push(a.clone());
                    taking = None;
                }
            }
            continue;
        }
        match taking {
            Some("header") => out.push(redact_assignment(a, true)),
            Some(_) => {
                out.push(redact_assignment(a, false));
                taking = None; // --set takes one value
            }
            None => out.push(a.clone()),
        }
    }
    out.join(" ")
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
            "--model",
            "m",
        ]
        .map(String::from)
        .to_vec();
        let c = command_line(&args);
        for s in ["s3cr3t", "k-123", "abc", "zq9-val"] {
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
}
