//! `bench` builds a one-case plan from its flags, so the planner's messages speak plan
//! keys (`services.target.model`, `defaults.dataset.input_len`, "set the service's
//! `tokenizer`"). A user who typed flags gets them back in flag words.

/// Plan keys as the flags that set them.
const KEYS: &[(&str, &str)] = &[
    ("services.target.base_url", "--base-url"),
    ("services.target.model", "--model"),
    ("services.target.tokenizer", "--tokenizer"),
    ("services.target.endpoint", "--endpoint"),
    ("services.target.backend", "--backend"),
    ("services.target.headers", "--header"),
    ("services.target.served_model_name", "--served-model-name"),
    ("services.target.ca_cert", "--ca-cert"),
    (
        "services.target",
        "the target flags (--base-url, --model, --tokenizer)",
    ),
    ("defaults.dataset.input_len", "--random-input-len"),
    ("defaults.dataset.output_len", "--random-output-len"),
    ("defaults.dataset.range_ratio", "--random-range-ratio"),
    ("defaults.dataset.prefix_len", "--random-prefix-len"),
    ("defaults.dataset.path", "--dataset-path"),
    ("defaults.dataset", "--dataset-name"),
    (
        "defaults.request_shape.request_id_header",
        "--request-id-header",
    ),
    ("defaults.request_shape.request_id", "--request-id"),
    ("defaults.request_shape.chat_content", "--chat-content"),
    ("defaults.request_shape.stream_options", "--stream-options"),
    ("defaults.request_shape.max_tokens_key", "--max-tokens-key"),
];

/// Phrases of advice as a flag user would follow them.
const PHRASES: &[(&str, &str)] = &[
    ("no `tokenizer` is set", "no --tokenizer is given"),
    ("set the service's `tokenizer` to", "pass --tokenizer with"),
    ("set the service's `tokenizer`", "pass --tokenizer"),
    ("tokenizer = \"server\"", "--tokenizer server"),
    ("(plan: `tokenizer`, bench: --tokenizer)", "(--tokenizer)"),
    ("write base_url = ", "pass --base-url "),
    ("use endpoint = ", "use --endpoint "),
    ("remove `endpoint`", "drop --endpoint"),
    ("`model` in a plan or --model", "--model"),
    ("fix `model` in the plan", "fix --model"),
    ("point base_url at", "point --base-url at"),
    (
        "set request_shape (request_id, request_id_header, chat_content, stream_options, max_tokens_key)",
        "set --request-id, --request-id-header, --chat-content, --stream-options or --max-tokens-key",
    ),
    ("set max_tokens_key", "set --max-tokens-key"),
    (
        "paths are relative to the plan's folder",
        "a relative --dataset-path is read from the working directory",
    ),
    ("try backend = \"openai\"", "try --backend openai"),
    ("try backend = \"openai-chat\"", "try --backend openai-chat"),
    (
        "extra_body = { field = null }",
        "--extra-body '{\"field\": null}'",
    ),
    (
        "set `request_shape` on the service to choose",
        "set --request-id, --chat-content, --stream-options or --max-tokens-key to choose",
    ),
];

/// `text` with plan keys and advice in flag words, without the case id.
pub fn in_flag_words(text: &str) -> String {
    let mut s = text.to_string();
    for (from, to) in PHRASES {
        s = s.replace(from, to);
    }
    s = replace_keys(&s);
    drop_case_ids(&s)
}

/// Backticked plan keys (`defaults.max_concurrency`) as their flags (`--max-concurrency`).
fn replace_keys(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('`') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let Some(j) = after.find('`') else {
            out.push_str(&rest[i..]);
            return out;
        };
        let key = &after[..j];
        let flag = KEYS
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, f)| (*f).to_string())
            .or_else(|| {
                key.strip_prefix("defaults.")
                    .filter(|k| !k.contains('.'))
                    .map(|k| format!("--{}", k.replace('_', "-")))
            });
        match flag {
            Some(f) => {
                out.push('`');
                out.push_str(&f);
                out.push('`');
            }
            None => out.push_str(&rest[i..i + j + 2]),
        }
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    out
}

/// Without ` (case target-0123456789ab)`: a one-case command line has no case to name.
fn drop_case_ids(s: &str) -> String {
    let mut out = s.to_string();
    while let Some(i) = out.find(" (case target-") {
        match out[i..].find(')') {
            Some(j) => out.replace_range(i..i + j + 1, ""),
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_words_become_flag_words() {
        let tok = "error: `services.target.model`: no `tokenizer` is set and model `foo` is neither a tokenizer.json\n  help: set the service's `tokenizer` to a tokenizer.json, or \"server\"";
        let got = in_flag_words(tok);
        assert!(
            got.starts_with("error: `--model`: no --tokenizer is given"),
            "{got}"
        );
        assert!(
            got.contains("help: pass --tokenizer with a tokenizer.json"),
            "{got}"
        );
        let got = in_flag_words(
            "error: `defaults.dataset.input_len`: `input_len` must be at least 1 (case target-3804013f0e9f)",
        );
        assert_eq!(
            got,
            "error: `--random-input-len`: `input_len` must be at least 1"
        );
        let got = in_flag_words(
            "error: `defaults.max_concurrency`: too small (case target-3804013f0e9f)\n  help: write base_url = \"http://h:1\"",
        );
        assert_eq!(
            got,
            "error: `--max-concurrency`: too small\n  help: pass --base-url \"http://h:1\""
        );
        // Keys it does not know stay as they are.
        assert_eq!(in_flag_words("`slo.ttft` and `a"), "`slo.ttft` and `a");
    }
}
