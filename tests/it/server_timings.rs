//! The server's own clock beside the client's: the simulator serves vLLM's
//! per-request `metrics` object when a request asks (`include_metrics`), and each case
//! reports the server's TTFT and queue time and the gap (client TTFT − server TTFT).
//! On loopback the gap is small; a relay that holds each request for 30 ms adds 30 ms
//! to the gap and nothing to the server's TTFT.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use crate::support::{SimProcess, read_json, tempdir};
use crate::window::{case_file, run_plan};

/// A TCP relay on 127.0.0.1 in front of `upstream` that holds every write from the
/// client for `delay` before passing it on (the answers pass at once).
fn slow_relay(upstream: &str, delay: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let upstream = upstream.trim_start_matches("http://").to_string();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { break };
            let Ok(mut server) = TcpStream::connect(&upstream) else {
                continue;
            };
            // No Nagle: a small write held behind an unacknowledged one would add the
            // peer's delayed-ACK time (tens of ms) to the delay under test.
            let _ = (client.set_nodelay(true), server.set_nodelay(true));
            let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            // A delay line: each read is stamped as it arrives and written `delay`
            // after that, so a request in two writes (head, body) is held 30 ms, not 60.
            let (tx, rx) = std::sync::mpsc::channel::<(std::time::Instant, Vec<u8>)>();
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while let Ok(n) = c2.read(&mut buf) {
                    if n == 0
                        || tx
                            .send((std::time::Instant::now(), buf[..n].to_vec()))
                            .is_err()
                    {
                        break;
                    }
                }
            });
            std::thread::spawn(move || {
                for (at, bytes) in rx {
                    std::thread::sleep(
                        (at + delay).saturating_duration_since(std::time::Instant::now()),
                    );
                    if s2.write_all(&bytes).is_err() {
                        break;
                    }
                }
                let _ = s2.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut server, &mut client);
                let _ = client.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    format!("http://{addr}")
}

fn plan(base_url: &str) -> String {
    format!(
        r#"
[services.s]
base_url = "{base_url}"
tokenizer = "server"
[defaults]
backend = "openai-chat"
dataset = {{ name = "random", input_len = 16, output_len = 8 }}
num_prompts = 8
max_concurrency = 1
server_timings = true
"#
    )
}

/// The case's `benchplan.server_timings`, with its warnings as one string under
/// `warnings_text`.
fn timings(dir: &std::path::Path, tag: &str, base_url: &str) -> serde_json::Value {
    let run = run_plan(dir, tag, &plan(base_url), &[], 0);
    let file = std::fs::read_dir(&run)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.file_name().unwrap().to_str().unwrap().starts_with("s-")
        })
        .unwrap_or_else(|| case_file(&run));
    let r = read_json(&file);
    let mut t = r["benchplan"]["server_timings"].clone();
    assert!(t.is_object(), "no server_timings in {:#}", r["benchplan"]);
    t["warnings_text"] = r["benchplan"]["warnings"].to_string().into();
    t
}

#[test]
fn the_gap_is_small_on_loopback_and_grows_by_what_a_relay_holds() {
    let _cpu = crate::support::heavy();
    // ground-truth: prefill 20 ms, ITL 10 ms, no jitter.
    let sim = SimProcess::start(&["--preset", "ground-truth"]);
    let dir = tempdir("server-timings");
    let direct = timings(&dir, "direct", &sim.url);
    assert_eq!(direct["requests"], 8, "{direct:#}");
    assert_eq!(direct["rejected"], 0);
    let server = direct["mean_server_ttft_ms"].as_f64().unwrap();
    let gap = direct["mean_ttft_gap_ms"].as_f64().unwrap();
    // The engine's TTFT is its prefill; the client sees it a little later.
    assert!((server - 20.0).abs() < 3.0, "server TTFT {server}");
    assert!((0.0..5.0).contains(&gap), "loopback gap {gap} ms");
    assert!(direct["mean_server_queue_ms"].as_f64().unwrap() < 1.0);
    // Through a relay that holds each request 30 ms: the gap grows by 30 ms, the
    // server's own TTFT does not move.
    let relay = slow_relay(&sim.url, Duration::from_millis(30));
    let slow = timings(&dir, "relay", &relay);
    // The relay is on this host: a 30 ms path on loopback is worth a warning.
    let said = slow["warnings_text"].as_str().unwrap();
    assert!(said.contains("this client or its path adds"), "{said}");
    let server_slow = slow["mean_server_ttft_ms"].as_f64().unwrap();
    let gap_slow = slow["mean_ttft_gap_ms"].as_f64().unwrap();
    assert!(
        (server_slow - server).abs() < 3.0,
        "{server_slow} vs {server}"
    );
    assert!(
        (gap_slow - gap - 30.0).abs() < 5.0,
        "gap {gap_slow} through the relay, {gap} direct"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A server that answers chat like llama-server: its final chunk carries `usage` and
/// llama.cpp's `timings` (the shape llama-server streams, tools/server: `cache_n`,
/// `prompt_n`, `prompt_ms`, per-token and per-second rates, `draft_n`,
/// `draft_n_accepted`); the models list names `m`.
fn llama_like(timings: &'static str) -> String {
    final_chunk_server(format!(",\"timings\":{timings}"))
}

/// A chat server of three content tokens whose final chunk (`choices: []`, with
/// `usage`) ends with `fields` (`,"metrics":{…}`): the shape of vLLM's and
/// llama-server's last chunk; the models list names `m`.
pub fn final_chunk_server(fields: String) -> String {
    use crate::support::{read_request, scripted};
    let fields = std::sync::Arc::new(fields);
    scripted(move |_, s, _| {
        while let Some((head, _)) = read_request(s) {
            let line = head.lines().next().unwrap_or("").to_string();
            let send = |s: &mut TcpStream, kind: &str, body: &str| {
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
            };
            if line.starts_with("GET /v1/models") {
                send(s, "application/json", r#"{"object":"list","data":[{"id":"m","object":"model"}]}"#);
            } else {
                let head = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","#;
                let token = format!(
                    "data: {head}\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" a\"}},\"finish_reason\":null}}]}}\n\n"
                );
                let last = format!(
                    "data: {head}\"choices\":[],\"usage\":{{\"completion_tokens\":3,\"prompt_tokens\":808,\"total_tokens\":811,\"prompt_tokens_details\":{{\"cached_tokens\":804}}}}{fields}}}\n\n"
                );
                send(s, "text/event-stream", &format!("{token}{token}{token}{last}data: [DONE]\n\n"));
            }
        }
    })
    .0
}

pub fn llama_plan(base_url: &str) -> String {
    let tokenizer = crate::support::repo().join("tests/fixtures/tokenizer");
    format!(
        "[services.l]\nbase_url = \"{base_url}\"\nmodel = \"m\"\ntokenizer = \"{}\"\n\
         [defaults]\nbackend = \"openai-chat\"\nnum_prompts = 4\nmax_concurrency = 1\nready_check_timeout = \"0s\"\n\
         dataset = {{ name = \"random\", input_len = 8, output_len = 3 }}\n\
         server_metrics = {{ enabled = false }}\n",
        tokenizer.display()
    )
}

#[test]
fn llama_servers_prompt_time_is_its_ttft_and_hostile_timings_are_skipped() {
    let dir = tempdir("llama-timings");
    let good = llama_like(
        r#"{"cache_n":804,"prompt_n":4,"prompt_ms":12.5,"prompt_per_token_ms":3.125,"prompt_per_second":320.0,"predicted_n":3,"predicted_ms":30.0,"predicted_per_token_ms":10.0,"predicted_per_second":100.0,"draft_n":6,"draft_n_accepted":5}"#,
    );
    let run = run_plan(&dir, "good", &llama_plan(&good), &[], 0);
    let r = read_json(&first_result(&run));
    let t = &r["benchplan"]["server_timings"];
    assert_eq!(t["requests"], 4, "{t:#}");
    assert_eq!(t["mean_server_ttft_ms"].as_f64(), Some(12.5), "{t:#}");
    // The gap is the client's TTFT less the server's own, request by request.
    let client = r["mean_ttft_ms"].as_f64().unwrap();
    let gap = t["mean_ttft_gap_ms"].as_f64().unwrap();
    assert!(
        (gap - (client - 12.5)).abs() < 1e-6,
        "gap {gap}, client TTFT {client}"
    );
    // Its decode time, and its draft model's acceptance: 5 of 6 drafted tokens.
    assert_eq!(t["mean_server_generation_ms"].as_f64(), Some(30.0), "{t:#}");
    let sd = &r["benchplan"]["speculative_decoding"];
    assert_eq!(
        (sd["requests"].as_u64(), sd["spec_source"].as_str()),
        (Some(4), Some("llama")),
        "{sd:#}"
    );
    assert!((sd["acceptance_rate"].as_f64().unwrap() - 500.0 / 6.0).abs() < 1e-9);
    assert!(
        sd["acceptance_length"].is_null(),
        "llama-server reports no steps"
    );
    // vLLM's own list (server_ttfts) stays vLLM's: llama-server sends no `metrics`.
    assert!(r.get("server_ttfts").is_none_or(|v| v.is_null()));
    // Hostile timings: the wrong types, a negative and a huge value: the requests
    // succeed, the values are skipped or counted, nothing panics.
    for (tag, timings) in [
        ("types", r#"{"prompt_ms":"fast","predicted_ms":[1]}"#),
        ("negative", r#"{"prompt_ms":-5.0}"#),
        ("huge", r#"{"prompt_ms":1e300}"#),
        ("not-an-object", r#""soon""#),
    ] {
        let url = llama_like(timings);
        let run = run_plan(&dir, tag, &llama_plan(&url), &[], 0);
        let r = read_json(&first_result(&run));
        assert_eq!(r["completed"], 4, "{tag}");
        let t = &r["benchplan"]["server_timings"];
        match tag {
            "negative" | "huge" => assert_eq!(
                (t["requests"].as_u64(), t["rejected"].as_u64()),
                (Some(0), Some(4)),
                "{tag}: {t:#}"
            ),
            _ => assert!(t.is_null(), "{tag}: {t:#}"),
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The one case result of a run (any service).
pub fn first_result(run: &std::path::Path) -> std::path::PathBuf {
    std::fs::read_dir(run)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            p.extension().is_some_and(|e| e == "json")
                && !["manifest.json", "plan.resolved.json"].contains(&name)
        })
        .expect("a case result")
}
