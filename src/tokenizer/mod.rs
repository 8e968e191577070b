//! Token counting shared by the simulator and the client: the built-in word tokenizer
//! (no files needed) or a Hugging Face `tokenizer.json`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod builtin;

/// A tokenizer: built-in words, a loaded `tokenizer.json`, or the target server's own
/// tokenize and detokenize endpoints (plain http only; used while building datasets).
#[derive(Clone)]
pub enum TokenModel {
    Builtin,
    Hf(Arc<HfTokenizer>),
    /// A server's own endpoints (vLLM's, llama.cpp's or llama-cpp-python's).
    Server(ServerAddr),
}

/// Where a server tokenizer is reached: `host:port`, directly or through an HTTP proxy
/// (the environment's, as every side request; see `proxy`).
#[derive(Clone, Debug)]
pub struct ServerAddr {
    pub addr: String,
    pub via: Option<crate::proxy::Via>,
    pub api: TokenizeApi,
    /// The special tokens the server puts before every tokenization (asked once).
    pub special_prefix: Arc<std::sync::OnceLock<Vec<u32>>>,
}

/// The tokenize endpoints servers offer, in the order they are tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenizeApi {
    /// vLLM (and SGLang): `/tokenize {prompt, add_special_tokens}` → `{tokens, count}`,
    /// `/detokenize {tokens}` → `{prompt}`.
    Vllm,
    /// llama.cpp's `llama-server`: `/tokenize {content, add_special}` → `{tokens}`,
    /// `/detokenize {tokens}` → `{content}`.
    LlamaCpp,
    /// llama-cpp-python's server: `/extras/tokenize {input}` → `{tokens}` (with the
    /// model's BOS when it adds one), `/extras/detokenize {tokens}` → `{text}`.
    LlamaCppPython,
}

impl TokenizeApi {
    pub const ALL: [TokenizeApi; 3] = [
        TokenizeApi::Vllm,
        TokenizeApi::LlamaCpp,
        TokenizeApi::LlamaCppPython,
    ];

    /// The server this form is known from.
    pub fn server(self) -> &'static str {
        match self {
            TokenizeApi::Vllm => "vLLM's",
            TokenizeApi::LlamaCpp => "llama.cpp's",
            TokenizeApi::LlamaCppPython => "llama-cpp-python's",
        }
    }

    /// The tokenize path.
    pub fn tokenize_path(self) -> &'static str {
        match self {
            TokenizeApi::Vllm | TokenizeApi::LlamaCpp => "/tokenize",
            TokenizeApi::LlamaCppPython => "/extras/tokenize",
        }
    }

    pub fn tokenize_body(self, text: &str, special: bool) -> serde_json::Value {
        match self {
            TokenizeApi::Vllm => serde_json::json!({"prompt": text, "add_special_tokens": special}),
            TokenizeApi::LlamaCpp => serde_json::json!({"content": text, "add_special": special}),
            TokenizeApi::LlamaCppPython => serde_json::json!({"input": text}),
        }
    }

    fn detokenize(self) -> (&'static str, &'static str) {
        match self {
            TokenizeApi::Vllm => ("/detokenize", "prompt"),
            TokenizeApi::LlamaCpp => ("/detokenize", "content"),
            TokenizeApi::LlamaCppPython => ("/extras/detokenize", "text"),
        }
    }
}

impl ServerAddr {
    /// Token ids of `text` (with the special tokens the server adds when `special`);
    /// empty when the server does not answer with tokens.
    fn tokenize(&self, text: &str, special: bool) -> Vec<u32> {
        let ids: Vec<u32> = server_call(
            self,
            self.api.tokenize_path(),
            &self.api.tokenize_body(text, special),
        )
        .ok()
        .and_then(|v| {
            v["tokens"].as_array().map(|a| {
                a.iter()
                    .filter_map(|x| x.as_u64())
                    .map(|x| x as u32)
                    .collect()
            })
        })
        .unwrap_or_default();
        if special || self.api != TokenizeApi::LlamaCppPython {
            return ids;
        }
        // llama-cpp-python always adds the model's special prefix (a BOS): drop it.
        match ids.strip_prefix(self.special_prefix()) {
            Some(rest) => rest.to_vec(),
            None => ids,
        }
    }

    /// The special tokens every tokenization starts with (a BOS), asked once.
    fn special_prefix(&self) -> &[u32] {
        self.special_prefix.get_or_init(|| self.tokenize("", true))
    }

    fn detokenize(&self, ids: &[u32]) -> String {
        let (path, key) = self.api.detokenize();
        server_call(self, path, &serde_json::json!({"tokens": ids}))
            .ok()
            .and_then(|v| v[key].as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

impl std::fmt::Display for ServerAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.addr)
    }
}

impl std::fmt::Debug for TokenModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenModel::Builtin => f.write_str("TokenModel::Builtin"),
            TokenModel::Hf(t) => {
                write!(f, "TokenModel::Hf(vocab {})", t.inner.get_vocab_size(true))
            }
            TokenModel::Server(a) => write!(f, "TokenModel::Server({a})"),
        }
    }
}

/// A loaded `tokenizer.json`, with the ids that make prompts exact computed once.
pub struct HfTokenizer {
    pub inner: tokenizers::Tokenizer,
    /// Tokens whose text starts with a space and encodes back to exactly themselves:
    /// appending one adds exactly one token (it starts a new pre-token).
    space_pool: std::sync::OnceLock<Vec<u32>>,
    /// The texts of `space_pool`, for building prompts without re-encoding them.
    words: std::sync::OnceLock<Arc<Vec<String>>>,
    /// From tokenizer_config.json beside tokenizer.json, when present.
    pub chat_template: Option<String>,
    pub bos_token: Option<String>,
    pub eos_token: Option<String>,
}

impl HfTokenizer {
    /// Ids of the added (special) tokens, which prompts and generated text avoid.
    fn special_ids(&self) -> std::collections::HashSet<u32> {
        self.inner
            .get_added_vocabulary()
            .get_added_tokens_decoder()
            .keys()
            .copied()
            .collect()
    }
}

/// A token field of tokenizer_config.json: a string or `{"content": …}`.
fn config_token(v: &serde_json::Value) -> Option<String> {
    v.as_str().map(str::to_string).or_else(|| {
        v.get("content")
            .and_then(|c| c.as_str())
            .map(str::to_string)
    })
}

/// Finds `tokenizer.json` for a path that is the file itself or a folder holding it.
pub fn tokenizer_file(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join("tokenizer.json")
    } else {
        path.to_path_buf()
    }
}

impl TokenModel {
    /// Loads a `tokenizer.json` (or a folder holding one).
    pub fn load(path: &Path) -> Result<TokenModel, String> {
        let file = tokenizer_file(path);
        let t = tokenizers::Tokenizer::from_file(&file)
            .map_err(|e| format!("cannot load tokenizer {}: {e}", file.display()))?;
        let config: serde_json::Value = file
            .parent()
            .and_then(|d| std::fs::read_to_string(d.join("tokenizer_config.json")).ok())
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        Ok(TokenModel::Hf(Arc::new(HfTokenizer {
            inner: t,
            space_pool: std::sync::OnceLock::new(),
            words: std::sync::OnceLock::new(),
            chat_template: config
                .get("chat_template")
                .and_then(|c| c.as_str())
                .map(str::to_string),
            bos_token: config.get("bos_token").and_then(config_token),
            eos_token: config.get("eos_token").and_then(config_token),
        })))
    }

    /// Token ids of a text, without special tokens.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        match self {
            TokenModel::Builtin => builtin::encode(text),
            TokenModel::Hf(t) => t
                .inner
                .encode_fast(text, false)
                .map(|e| e.get_ids().to_vec())
                .unwrap_or_default(),
            TokenModel::Server(addr) => addr.tokenize(text, false),
        }
    }

    pub fn count(&self, text: &str) -> usize {
        match self {
            TokenModel::Builtin => builtin::count(text),
            TokenModel::Hf(t) => t
                .inner
                .encode_fast(text, false)
                .map(|e| e.len())
                .unwrap_or(0),
            TokenModel::Server(_) => self.encode(text).len(),
        }
    }

    pub fn decode(&self, ids: &[u32]) -> String {
        match self {
            TokenModel::Builtin => builtin::decode(ids),
            TokenModel::Hf(t) => t.inner.decode(ids, true).unwrap_or_default(),
            TokenModel::Server(addr) => addr.detokenize(ids),
        }
    }

    /// The prompt wrapped in the tokenizer's chat template as one user message (what a
    /// completions request needs to look like a chat turn); None without a template.
    pub fn apply_chat_template(&self, prompt: &str) -> Option<Result<String, String>> {
        let TokenModel::Hf(t) = self else { return None };
        let template = t.chat_template.as_ref()?;
        let mut env = minijinja::Environment::new();
        env.add_function(
            "raise_exception",
            |msg: String| -> Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    msg,
                ))
            },
        );
        Some(
            env.render_str(
                template,
                minijinja::context! {
                    messages => vec![minijinja::context! { role => "user", content => prompt }],
                    add_generation_prompt => true,
                    bos_token => t.bos_token.clone().unwrap_or_default(),
                    eos_token => t.eos_token.clone().unwrap_or_default(),
                },
            )
            .map_err(|e| format!("the chat template failed: {e}")),
        )
    }

    /// Tokens the tokenizer adds by itself to every encoding (such as a BOS).
    pub fn num_special_tokens(&self) -> u64 {
        match self {
            TokenModel::Builtin => 0,
            TokenModel::Hf(t) => t.inner.encode_fast("", true).map_or(0, |e| e.len() as u64),
            TokenModel::Server(addr) => addr.special_prefix().len() as u64,
        }
    }

    /// Token ids a random prompt may use: the vocabulary without special tokens (for a
    /// server tokenizer, the ids its /tokenize gives the built-in words).
    pub fn allowed_ids(&self) -> Vec<u32> {
        match self {
            TokenModel::Builtin => (0..builtin::VOCAB_SIZE).collect(),
            TokenModel::Hf(t) => {
                let special = t.special_ids();
                (0..t.inner.get_vocab_size(false) as u32)
                    .filter(|id| !special.contains(id))
                    .collect()
            }
            TokenModel::Server(_) => {
                let words: Vec<&str> = (0..builtin::VOCAB_SIZE).map(builtin::word).collect();
                let mut ids = self.encode(&words.join(" "));
                ids.sort_unstable();
                ids.dedup();
                ids
            }
        }
    }

    /// Tokens that add exactly one token when appended (see [`HfTokenizer`]); the
    /// built-in and server tokenizers: every word is such a token.
    pub fn space_pool(&self) -> Vec<u32> {
        match self {
            TokenModel::Hf(t) => t
                .space_pool
                .get_or_init(|| {
                    let special = t.special_ids();
                    let n = t.inner.get_vocab_size(false).min(50_000) as u32;
                    (0..n)
                        .filter(|id| !special.contains(id))
                        .filter(|id| {
                            t.inner.decode(&[*id], true).is_ok_and(|s| {
                                s.len() >= 3
                                    && s.starts_with(' ')
                                    && s[1..].chars().all(|c| c.is_ascii_alphabetic())
                                    && t.inner
                                        .encode_fast(s.as_str(), false)
                                        .is_ok_and(|e| e.get_ids() == [*id])
                            })
                        })
                        .collect()
                })
                .clone(),
            TokenModel::Builtin | TokenModel::Server(_) => Vec::new(),
        }
    }

    /// Texts that are one token each and stay one token when concatenated (a space then
    /// letters: each starts a new pre-token), so a prompt of N of them has exactly N
    /// tokens without re-encoding. None for the server tokenizer (and a tokenizer
    /// with too few such tokens), which then goes through decode → re-encode.
    pub fn word_table(&self) -> Option<Arc<Vec<String>>> {
        static BUILTIN: std::sync::OnceLock<Arc<Vec<String>>> = std::sync::OnceLock::new();
        match self {
            TokenModel::Builtin => Some(
                BUILTIN
                    .get_or_init(|| {
                        Arc::new(
                            (0..builtin::VOCAB_SIZE)
                                .map(|i| format!(" {}", builtin::word(i)))
                                .collect(),
                        )
                    })
                    .clone(),
            ),
            TokenModel::Hf(t) => {
                let words = t
                    .words
                    .get_or_init(|| {
                        Arc::new(
                            self.space_pool()
                                .iter()
                                .filter_map(|id| t.inner.decode(&[*id], true).ok())
                                .collect(),
                        )
                    })
                    .clone();
                (words.len() >= 64).then_some(words)
            }
            TokenModel::Server(_) => None,
        }
    }

    /// Texts for generated tokens: (raw text, JSON-escaped text), each decoding to one token.
    pub fn output_table(&self) -> Vec<(String, String)> {
        let raw: Vec<String> = match self {
            TokenModel::Builtin | TokenModel::Server(_) => (0..builtin::VOCAB_SIZE)
                .map(|i| format!(" {}", builtin::word(i)))
                .collect(),
            TokenModel::Hf(t) => {
                let specials = t.special_ids();
                let n = t.inner.get_vocab_size(false).min(20_000) as u32;
                (0..n)
                    .filter(|id| !specials.contains(id))
                    .filter_map(|id| t.inner.decode(&[id], true).ok())
                    .filter(|s| !s.is_empty() && !s.contains('\u{fffd}'))
                    // Only pieces that re-encode to one token, so counts of generated text agree.
                    .filter(|s| {
                        t.inner
                            .encode_fast(s.as_str(), false)
                            .is_ok_and(|e| e.len() == 1)
                    })
                    .take(8192)
                    .collect()
            }
        };
        raw.into_iter()
            .map(|r| {
                let quoted = serde_json::to_string(&r).expect("strings serialise");
                let escaped = quoted[1..quoted.len() - 1].to_string();
                (r, escaped)
            })
            .collect()
    }
}

/// A JSON POST over plain HTTP/1.1 with std's blocking socket: dataset building is
/// synchronous and happens before any measured traffic.
fn server_call(
    server: &ServerAddr,
    path: &str,
    body: &serde_json::Value,
) -> Result<serde_json::Value, String> {
    use std::io::Write;
    let body = body.to_string();
    let addr = &server.addr;
    // Through a proxy: connect to it and name the whole URL (absolute form).
    let (connect, target, auth) = match &server.via {
        Some(v) => (
            v.authority.as_str(),
            format!("http://{addr}{path}"),
            v.auth
                .as_ref()
                .and_then(|a| a.to_str().ok())
                .map(|a| format!("Proxy-Authorization: {a}\r\n"))
                .unwrap_or_default(),
        ),
        None => (addr.as_str(), path.to_string(), String::new()),
    };
    let mut s = std::net::TcpStream::connect(connect)
        .map_err(|e| format!("cannot reach {connect}: {e}"))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .ok();
    write!(s, "POST {target} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
        .map_err(|e| e.to_string())?;
    let resp = read_answer(&mut s)?;
    let text = String::from_utf8_lossy(&resp);
    let (head, payload) = text
        .split_once("\r\n\r\n")
        .ok_or("a malformed HTTP answer")?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(format!(
            "{path} answered {}",
            head.lines().next().unwrap_or("")
        ));
    }
    serde_json::from_str(payload).map_err(|e| format!("{path} did not answer JSON: {e}"))
}

/// An HTTP/1.1 answer: its head, then the body by `Content-Length` when the head gives
/// one (a server that keeps the connection open despite `Connection: close` is not
/// waited on until the read timeout), else everything up to the close.
fn read_answer(s: &mut impl std::io::Read) -> Result<Vec<u8>, String> {
    let mut resp = Vec::new();
    let mut buf = [0u8; 8192];
    let mut want: Option<usize> = None;
    loop {
        if let Some(n) = want
            && resp.len() >= n
        {
            resp.truncate(n);
            return Ok(resp);
        }
        let k = s.read(&mut buf).map_err(|e| e.to_string())?;
        if k == 0 {
            return Ok(resp);
        }
        resp.extend_from_slice(&buf[..k]);
        if want.is_none()
            && let Some(end) = resp.windows(4).position(|w| w == b"\r\n\r\n")
        {
            let head = String::from_utf8_lossy(&resp[..end]).to_ascii_lowercase();
            want = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .map(|len| end + 4 + len);
        }
    }
}

/// Whether HF_HUB_OFFLINE forbids downloads, as the Hugging Face libraries read it.
pub fn hf_offline() -> bool {
    std::env::var("HF_HUB_OFFLINE").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// Downloads a hub model's tokenizer.json (and tokenizer_config.json when there is one)
/// into the local cache, unless HF_HUB_OFFLINE is set. The hub is `$HF_ENDPOINT`
/// (default https://huggingface.co); `$HF_TOKEN` authorises gated models.
pub async fn hf_download_tokenizer(
    model_id: &str,
    client: &reqwest::Client,
) -> Result<PathBuf, String> {
    if hf_offline() {
        return Err(format!(
            "`{model_id}` is not in the local Hugging Face cache and HF_HUB_OFFLINE is set"
        ));
    }
    let home = hf_home().ok_or("neither HF_HOME nor HOME is set")?;
    let dir = home
        .join("hub")
        .join(format!("models--{}", model_id.replace('/', "--")))
        .join("snapshots")
        .join("main");
    let endpoint = std::env::var("HF_ENDPOINT").unwrap_or_else(|_| "https://huggingface.co".into());
    for (file, required) in [("tokenizer.json", true), ("tokenizer_config.json", false)] {
        let url = format!(
            "{}/{model_id}/resolve/main/{file}",
            endpoint.trim_end_matches('/')
        );
        let mut req = client
            .get(&url)
            .timeout(std::time::Duration::from_secs(120));
        if let Ok(token) = std::env::var("HF_TOKEN") {
            req = req.bearer_auth(token);
        }
        let resp = match req.send().await {
            Ok(r) if r.status().is_success() => r,
            Ok(_) | Err(_) if !required => continue,
            Ok(r) => return Err(format!("{url} answered HTTP {}", r.status().as_u16())),
            Err(e) => return Err(format!("cannot download {url}: {e}")),
        };
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| format!("cannot download {url}: {e}"))?;
        crate::files::write_atomic(&dir.join(file), &bytes)
            .map_err(|e| format!("cannot store {file} in {}: {e}", dir.display()))?;
    }
    Ok(dir.join("tokenizer.json"))
}

fn hf_home() -> Option<PathBuf> {
    std::env::var_os("HF_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface")))
}

/// The tokenizer a name points at on this machine: a tokenizer.json, a folder holding
/// one, or a Hugging Face id already in the local cache.
pub fn find_local(name: &str) -> Option<PathBuf> {
    let p = Path::new(name);
    if tokenizer_file(p).is_file() {
        return Some(p.to_path_buf());
    }
    hf_cache_tokenizer(name)
}

/// Where a Hugging Face model id's tokenizer.json sits in the local hub cache
/// (`$HF_HOME/hub`, default `~/.cache/huggingface/hub`), if it was downloaded.
pub fn hf_cache_tokenizer(model_id: &str) -> Option<PathBuf> {
    let home = std::env::var_os("HF_HOME").map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface"))
    })?;
    let snapshots = home
        .join("hub")
        .join(format!("models--{}", model_id.replace('/', "--")))
        .join("snapshots");
    let mut found: Vec<PathBuf> = std::fs::read_dir(snapshots)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("tokenizer.json")))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.pop()
}

#[cfg(test)]
mod tests {
    use super::read_answer;

    #[test]
    fn an_answer_ends_at_its_content_length_not_at_the_close() {
        // Bytes past the body stand for a connection the server keeps open: a reader
        // that waited for the close would block on a socket here.
        let wire = b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nnoMORE".as_slice();
        let got = read_answer(&mut { wire }).unwrap();
        assert_eq!(
            got,
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno"
        );
        let closed = b"HTTP/1.0 200 OK\r\n\r\n{\"tokens\":[1]}".as_slice();
        assert_eq!(read_answer(&mut { closed }).unwrap(), closed);
    }
}
