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
extra_body = {{ include_metrics = true }}
"#
    )
}

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
    let t = r["benchplan"]["server_timings"].clone();
    assert!(t.is_object(), "no server_timings in {:#}", r["benchplan"]);
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
    let server = direct["server_ttft_ms"]["mean"].as_f64().unwrap();
    let gap = direct["gap_ms"]["mean"].as_f64().unwrap();
    // The engine's TTFT is its prefill; the client sees it a little later.
    assert!((server - 20.0).abs() < 3.0, "server TTFT {server}");
    assert!((0.0..5.0).contains(&gap), "loopback gap {gap} ms");
    assert!(direct["server_queue_ms"]["mean"].as_f64().unwrap() < 1.0);
    // Through a relay that holds each request 30 ms: the gap grows by 30 ms, the
    // server's own TTFT does not move.
    let relay = slow_relay(&sim.url, Duration::from_millis(30));
    let slow = timings(&dir, "relay", &relay);
    let server_slow = slow["server_ttft_ms"]["mean"].as_f64().unwrap();
    let gap_slow = slow["gap_ms"]["mean"].as_f64().unwrap();
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
