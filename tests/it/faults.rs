//! The fault matrix: purpose-built misbehaving servers (scripted here, on 127.0.0.1,
//! port 0) and the simulator under `run`, and for each fault what benchplan must do:
//! count it by kind, exit with the right code, write valid JSON, never panic, and end
//! in bounded time and memory.

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{SimProcess, read_request, repo, scripted};

/// One token event of a completions stream.
const TOKEN: &str = "data: {\"choices\":[{\"index\":0,\"text\":\" a\"}]}\n\n";
const USAGE: &str =
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}\n\n";
const DONE: &str = "data: [DONE]\n\n";

fn good_stream() -> String {
    format!("{TOKEN}{TOKEN}{TOKEN}{USAGE}{DONE}")
}

/// A response head. These servers close after each answer, and say so: a server that
/// closes a kept-alive connection unannounced races the client's next request on it,
/// which then fails as `connection` (benchplan does not resend a POST).
fn head(status: &str, kind: &str, framing: &str) -> String {
    format!("HTTP/1.1 {status}\r\ncontent-type: {kind}\r\nconnection: close\r\n{framing}\r\n")
}

/// A response with a Content-Length body.
fn whole(status: &str, kind: &str, body: &[u8]) -> Vec<u8> {
    let mut r = head(status, kind, &format!("content-length: {}\r\n", body.len())).into_bytes();
    r.extend_from_slice(body);
    r
}

fn chunk(data: &[u8]) -> Vec<u8> {
    let mut c = format!("{:x}\r\n", data.len()).into_bytes();
    c.extend_from_slice(data);
    c.extend_from_slice(b"\r\n");
    c
}

/// A server answering every request with `respond(stream)` (after reading it).
fn server(respond: impl Fn(&mut TcpStream) + Send + Sync + 'static) -> String {
    scripted(move |_, s, _| {
        if read_request(s).is_some() {
            respond(s);
            // Close after each answer: every request opens its own connection.
            let _ = s.flush();
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    })
    .0
}

fn answer(bytes: Vec<u8>) -> String {
    server(move |s| {
        let _ = s.write_all(&bytes);
    })
}

struct Ran {
    code: Option<i32>,
    stderr: String,
    result: Option<Value>,
    took: Duration,
}

impl Ran {
    fn kinds(&self) -> Value {
        self.result
            .as_ref()
            .map_or(Value::Null, |r| r["benchplan"]["errors_by_kind"].clone())
    }
}

/// `benchplan bench` against `base` with four requests, one at a time, no smoke request.
fn bench(base: &str, extra: &[&str]) -> Ran {
    let tok = repo()
        .join("tests/fixtures/tokenizer")
        .display()
        .to_string();
    let mut args = vec![
        "--base-url",
        base,
        "--model",
        "m",
        "--tokenizer",
        &tok,
        "--num-prompts",
        "4",
        "--max-concurrency",
        "1",
        "--random-input-len",
        "4",
        "--random-output-len",
        "3",
        "--no-smoke",
        "--disable-tqdm",
    ];
    args.extend_from_slice(extra);
    let r = crate::support::bench_run(Path::new(env!("CARGO_BIN_EXE_benchplan")), &args, &[], &[]);
    Ran {
        code: r.code,
        stderr: r.stderr,
        result: r.result,
        took: r.took,
    }
}

/// Runs one fault and checks: every request failed with `kind`, exit 1 (no request
/// succeeded), the result file written, within `max` seconds.
fn all_fail_as(name: &str, base: &str, extra: &[&str], kind: &str, max: f64) -> Ran {
    let r = bench(base, extra);
    assert_eq!(r.code, Some(1), "{name}: exit code\n{}", r.stderr);
    let kinds = r.kinds();
    assert_eq!(
        kinds[kind], 4,
        "{name}: errors by kind {kinds}\n{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("no request succeeded"),
        "{name}: {}",
        r.stderr
    );
    let req = &r.result.as_ref().unwrap()["benchplan"]["requests"];
    assert_eq!(
        (req["failed"].as_u64(), req["balanced"].as_bool()),
        (Some(4), Some(true)),
        "{name}"
    );
    assert!(
        r.took.as_secs_f64() < max,
        "{name}: took {:?}, bounded at {max} s",
        r.took
    );
    r
}

#[test]
fn a_refused_connection_is_a_counted_connection_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    all_fail_as(
        "refused",
        &format!("http://127.0.0.1:{port}"),
        &[],
        "connection",
        20.0,
    );
}

#[test]
fn http_errors_with_and_without_bodies_are_counted_by_status() {
    let json = br#"{"error":{"message":"slow down","type":"RateLimitError","code":429}}"#;
    for (name, bytes, kind) in [
        (
            "429 json",
            whole("429 Too Many Requests", "application/json", json),
            "http_429",
        ),
        (
            "429 empty",
            whole("429 Too Many Requests", "text/plain", b""),
            "http_429",
        ),
        (
            "500 json",
            whole(
                "500 Internal Server Error",
                "application/json",
                br#"{"error":{"message":"boom"}}"#,
            ),
            "http_500",
        ),
        (
            "500 empty",
            whole("500 Internal Server Error", "text/plain", b""),
            "http_500",
        ),
        (
            "503 html",
            whole(
                "503 Service Unavailable",
                "text/html",
                b"<html><body><h1>503</h1></body></html>",
            ),
            "http_503",
        ),
        (
            "502 proxy page",
            whole(
                "502 Bad Gateway",
                "text/html",
                b"<html>\n<head><title>502 Bad Gateway</title></head>\n\n<body>nginx</body></html>",
            ),
            "http_502",
        ),
    ] {
        let r = all_fail_as(name, &answer(bytes), &[], kind, 20.0);
        if name == "429 json" {
            let first = &r.result.as_ref().unwrap()["benchplan"]["first_errors"]["http_429"];
            assert!(first.as_str().unwrap().contains("slow down"), "{first}");
        }
    }
}

#[test]
fn a_long_multibyte_error_body_is_cut_at_a_character_and_counted() {
    // ~600 bytes of Chinese: cutting at byte 500 would split a character (the panic
    // that once lost the request's record).
    let msg = "服务器内部错误，请稍后再试。".repeat(15);
    let body = format!(r#"{{"error":{{"message":"{msg}"}}}}"#);
    let r = all_fail_as(
        "chinese 500",
        &answer(whole(
            "500 Internal Server Error",
            "application/json",
            body.as_bytes(),
        )),
        &[],
        "http_500",
        20.0,
    );
    let first = r.result.as_ref().unwrap()["benchplan"]["first_errors"]["http_500"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        first.chars().count() <= 500 && first.contains("服务器"),
        "{first}"
    );
}

#[test]
fn a_200_that_is_not_an_event_stream_fails_with_what_it_was() {
    let html = b"<html>\n<head><title>Gateway</title></head>\n\n<body>maintenance</body></html>\n";
    let r = all_fail_as(
        "200 html",
        &answer(whole("200 OK", "text/html", html)),
        &[],
        "no_tokens",
        20.0,
    );
    let first = r.result.as_ref().unwrap()["benchplan"]["first_errors"]["no_tokens"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        first.contains("text/html") && first.contains("<html>"),
        "{first}"
    );
}

#[test]
fn broken_and_malformed_streams_are_counted_by_kind() {
    let sse = "text/event-stream";
    // Two tokens, then the connection drops without the last chunk.
    let cut = {
        let mut b = head("200 OK", sse, "transfer-encoding: chunked\r\n").into_bytes();
        b.extend(chunk(TOKEN.as_bytes()));
        b.extend(chunk(TOKEN.as_bytes()));
        b
    };
    all_fail_as(
        "mid-stream disconnect",
        &answer(cut),
        &[],
        "stream_broken",
        20.0,
    );
    // A chunk size that is not hex.
    let bogus = {
        let mut b = head("200 OK", sse, "transfer-encoding: chunked\r\n").into_bytes();
        b.extend(chunk(TOKEN.as_bytes()));
        b.extend_from_slice(b"zz\r\nnot a chunk\r\n");
        b
    };
    all_fail_as(
        "bogus chunk size",
        &answer(bogus),
        &[],
        "stream_broken",
        20.0,
    );
    // A Content-Length longer than what is sent before the close.
    let short = {
        let body = good_stream();
        let mut b = head(
            "200 OK",
            sse,
            &format!("content-length: {}\r\n", body.len() + 500),
        )
        .into_bytes();
        b.extend_from_slice(body.as_bytes());
        b
    };
    all_fail_as(
        "short content-length",
        &answer(short),
        &[],
        "stream_broken",
        20.0,
    );
    // A data line that is not JSON.
    let bad_json = whole(
        "200 OK",
        sse,
        format!("{TOKEN}data: {{not json\n\n{DONE}").as_bytes(),
    );
    all_fail_as(
        "invalid JSON",
        &answer(bad_json),
        &[],
        "invalid_chunk",
        20.0,
    );
    // Bytes that are not UTF-8 inside a JSON string.
    let mut raw = b"data: {\"choices\":[{\"text\":\"\xff\xfe\"}]}\n\n".to_vec();
    raw.extend_from_slice(DONE.as_bytes());
    all_fail_as(
        "non-UTF-8",
        &answer(whole("200 OK", sse, &raw)),
        &[],
        "invalid_chunk",
        20.0,
    );
    // An error event inside a 200 stream.
    let ev = whole(
        "200 OK",
        sse,
        format!("{TOKEN}event: error\ndata: {{\"error\":{{\"message\":\"engine died\"}}}}\n\n")
            .as_bytes(),
    );
    all_fail_as("error event", &answer(ev), &[], "stream_error", 20.0);
}

#[test]
fn streams_that_end_oddly_but_carry_tokens_succeed_and_are_counted() {
    let sse = "text/event-stream";
    // Garbage lines around the events: SSE ignores unknown fields.
    let garbage = whole(
        "200 OK",
        sse,
        format!("garbage line\nanother: field\n\n{TOKEN}retry: 10\n{TOKEN}{TOKEN}{USAGE}{DONE}")
            .as_bytes(),
    );
    // No [DONE]: still a success, as in vLLM, and counted.
    let no_done = whole(
        "200 OK",
        sse,
        format!("{TOKEN}{TOKEN}{TOKEN}{USAGE}").as_bytes(),
    );
    // HTTP/1.0, the body delimited by the close.
    let close = {
        let mut b = b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n".to_vec();
        b.extend_from_slice(good_stream().as_bytes());
        b
    };
    for (name, bytes, without_done) in [
        ("garbage lines", garbage, 0),
        ("no [DONE]", no_done, 4),
        ("HTTP/1.0 close-delimited", close, 0),
    ] {
        let r = bench(&answer(bytes), &[]);
        assert_eq!(r.code, Some(0), "{name}\n{}", r.stderr);
        let res = r.result.unwrap();
        assert_eq!(
            (res["completed"].as_u64(), res["failed"].as_u64()),
            (Some(4), Some(0)),
            "{name}"
        );
        assert_eq!(res["total_output_tokens"], 12, "{name}");
        assert_eq!(
            res["benchplan"]["streams_without_done"], without_done,
            "{name}"
        );
        if without_done > 0 {
            assert!(
                r.stderr.is_empty() || !r.stderr.contains("error:"),
                "{name}: {}",
                r.stderr
            );
        }
    }
}

#[test]
fn a_stalled_server_is_an_idle_timeout_not_a_hang() {
    let sse = "text/event-stream";
    // Headers, then nothing.
    let after_headers = server(move |s| {
        let _ = s.write_all(head("200 OK", sse, "transfer-encoding: chunked\r\n").as_bytes());
        std::thread::sleep(Duration::from_secs(20));
    });
    all_fail_as(
        "stall after headers",
        &after_headers,
        &["--stream-idle-timeout", "0.3"],
        "idle_timeout",
        15.0,
    );
    // A token, then nothing.
    let mid = server(move |s| {
        let mut b = head("200 OK", sse, "transfer-encoding: chunked\r\n").into_bytes();
        b.extend(chunk(TOKEN.as_bytes()));
        let _ = s.write_all(&b);
        std::thread::sleep(Duration::from_secs(20));
    });
    all_fail_as(
        "stall mid-stream",
        &mid,
        &["--stream-idle-timeout", "0.3"],
        "idle_timeout",
        15.0,
    );
    // Keep-alive comments forever: never idle, so the total request timeout ends it.
    let trickle = server(move |s| {
        let _ = s.write_all(head("200 OK", sse, "transfer-encoding: chunked\r\n").as_bytes());
        for _ in 0..200 {
            if s.write_all(&chunk(b": ping\n\n")).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    all_fail_as(
        "endless keep-alives",
        &trickle,
        &["--request-timeout", "0.5"],
        "timeout",
        15.0,
    );
    // No answer at all: the request timeout ends the wait for the response head.
    let silent = server(move |_| std::thread::sleep(Duration::from_secs(20)));
    all_fail_as(
        "no response head",
        &silent,
        &["--request-timeout", "0.5"],
        "timeout",
        15.0,
    );
}

/// The peak resident memory of this process while `f` runs (sampled every 5 ms), above
/// what it was before.
fn rss_growth<T>(f: impl FnOnce() -> T) -> (T, u64) {
    fn rss() -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|k| k.parse::<u64>().ok())
            })
            .unwrap_or(0)
            * 1024
    }
    let base = rss();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(rss());
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        })
    };
    let out = f();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = sampler.join().unwrap().max(rss());
    (out, peak.saturating_sub(base))
}

#[test]
fn an_endless_line_fails_as_oversized_in_bounded_memory() {
    // `data: ` and then bytes without a newline, 256 MiB of them if nobody stops reading.
    let base = server(|s| {
        let mut b = head("200 OK", "text/event-stream", "").into_bytes();
        b.extend_from_slice(b"data: {\"choices\":[{\"text\":\"");
        if s.write_all(&b).is_err() {
            return;
        }
        let block = vec![b'x'; 1 << 20];
        for _ in 0..256 {
            if s.write_all(&block).is_err() {
                return;
            }
        }
    });
    let (r, grew) = rss_growth(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            use benchplan::client::outcome::Limits;
            use benchplan::client::request::{Target, send};
            let t = Target::new(
                format!("{base}/v1/completions"),
                benchplan::base_url::BaseUrl::parse(&base).unwrap(),
                benchplan::plan::Backend::Openai,
                "m".into(),
                reqwest::header::HeaderMap::new(),
                benchplan::client::http::build_client(false, None).unwrap(),
                Limits {
                    total: Duration::from_secs(60),
                    ..Limits::default()
                },
            );
            send(&t, b"{}".to_vec(), None).await.sample
        })
    });
    assert_eq!(
        r.error.as_ref().map(|e| e.kind.as_str()),
        Some("oversized_response"),
        "{:?}",
        r.error
    );
    // The default 16 MiB event limit, with the read buffers around it.
    assert!(
        grew < 64 << 20,
        "resident memory grew by {} MiB",
        grew >> 20
    );
    // The same through the command, with a small limit.
    let r = bench(
        &server(|s| {
            let _ = s.write_all(head("200 OK", "text/event-stream", "").as_bytes());
            let _ = s.write_all(b"data: ");
            let block = vec![b'y'; 64 << 10];
            for _ in 0..64 {
                if s.write_all(&block).is_err() {
                    return;
                }
            }
        }),
        &["--max-event-bytes", "100000"],
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!(r.kinds()["oversized_response"], 4, "{}", r.stderr);
}

#[test]
fn a_server_killed_mid_case_during_run_is_counted_and_reported() {
    let sim = SimProcess::start(&["--preset", "ground-truth"]);
    let dir = std::env::temp_dir().join(format!("benchplan-fault-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "[services.ext]\nbase_url = \"{}\"\ntokenizer = \"{}\"\n\
             [defaults]\nnum_prompts = 200\nrequest_rate = 50\nmax_concurrency = 8\n\
             dataset = {{ name = \"random\", input_len = 8, output_len = 4 }}\n",
            sim.url,
            repo().join("tests/fixtures/tokenizer").display()
        ),
    )
    .unwrap();
    let child = crate::support::spawn_run(&plan, &dir.join("r"));
    // The case runs for ~4 s; the server dies a second and a half in.
    std::thread::sleep(Duration::from_millis(1500));
    drop(sim);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    // Most requests failed: below the success-rate floor, an SLO verdict (exit 3).
    assert_eq!(out.status.code(), Some(3), "{err}");
    let batch = crate::support::batch_dir(&dir.join("r"));
    let result = std::fs::read_dir(&batch)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("ext-"))
        .unwrap();
    let v = crate::support::read_json(&result);
    let kinds = &v["benchplan"]["errors_by_kind"];
    assert!(kinds["connection"].as_u64().unwrap_or(0) > 0, "{kinds}");
    assert_eq!(v["benchplan"]["requests"]["balanced"], true);
    let total = v["completed"].as_u64().unwrap() + v["failed"].as_u64().unwrap();
    assert_eq!(total, 200);
    let manifest = crate::support::read_json(&batch.join("manifest.json"));
    assert_eq!(manifest["cases"][0]["slo_pass"], false);
    assert!(batch.join("report.md").is_file());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_signal_mid_run_keeps_the_partial_case_and_writes_report_junit_and_summary() {
    // SIGINT (Ctrl-C), SIGTERM (Kubernetes deleting the pod), SIGHUP: 128 + the signal.
    for (signal, code) in [
        (libc::SIGINT, 130),
        (libc::SIGTERM, 143),
        (libc::SIGHUP, 129),
    ] {
        signal_mid_run(signal, code);
    }
}

fn signal_mid_run(signal: i32, code: i32) {
    let dir = crate::support::tempdir("fault-signal");
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        "[services.s]\nsim = { preset = \"ground-truth\" }\n\
         [defaults]\nnum_prompts = 300\nmax_concurrency = 2\n\
         dataset = { name = \"random\", input_len = 8, output_len = 10 }\n\
         [matrix]\nseed = [1, 2]\n",
    )
    .unwrap();
    let (junit, summary) = (dir.join("junit.xml"), dir.join("summary.md"));
    let child = Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .arg("run")
        .arg(&plan)
        .arg("--results-dir")
        .arg(dir.join("r"))
        .arg("--quiet")
        .arg("--junit")
        .arg(&junit)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (out, took) = crate::support::signal_after(child, Duration::from_millis(1500), signal);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert!(
        took < Duration::from_secs(15),
        "ended {took:?} after signal {signal}"
    );
    assert!(junit.is_file(), "junit.xml written");
    let s = std::fs::read_to_string(&summary).unwrap();
    assert!(s.contains("interrupted"), "step summary: {s}");
    let batch = crate::support::batch_dir(&dir.join("r"));
    let manifest = crate::support::read_json(&batch.join("manifest.json"));
    assert_eq!(manifest["interrupted"], true);
    let statuses: Vec<&str> = manifest["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, vec!["interrupted", "not_run"]);
    let partial = manifest["cases"][0]["file"].as_str().unwrap();
    let v = crate::support::read_json(&batch.join(partial));
    assert_eq!(v["benchplan"]["interrupted"], true);
    assert_eq!(v["benchplan"]["requests"]["balanced"], true);
    let report = std::fs::read_to_string(batch.join("report.md")).unwrap();
    assert!(report.contains("interrupted"), "{report}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_post_the_server_may_have_read_is_never_sent_twice() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let seen = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = seen.clone();
    // The first request is answered on a kept-alive connection; the second, sent on
    // that same connection, is read and then the server closes without answering.
    let (base, _) = scripted(move |conn, s, _| {
        let mut n = 0;
        while read_request(s).is_some() {
            counted.fetch_add(1, Ordering::SeqCst);
            n += 1;
            if conn == 0 && n == 1 {
                let body = good_stream();
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                continue;
            }
            let _ = s.shutdown(std::net::Shutdown::Both);
            return;
        }
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (first, second) = rt.block_on(async {
        use benchplan::client::outcome::Limits;
        use benchplan::client::request::{Target, send};
        let t = Target::new(
            format!("{base}/v1/completions"),
            benchplan::base_url::BaseUrl::parse(&base).unwrap(),
            benchplan::plan::Backend::Openai,
            "m".into(),
            reqwest::header::HeaderMap::new(),
            benchplan::client::http::build_client(false, None).unwrap(),
            Limits::default(),
        );
        let a = send(&t, b"{}".to_vec(), None).await.sample;
        let b = send(&t, b"{}".to_vec(), None).await.sample;
        (a, b)
    });
    assert!(first.success, "{:?}", first.error);
    let e = second.error.expect("the second request failed");
    assert_eq!(e.kind, "connection", "{e:?}");
    assert!(e.message.contains("not sent again"), "{e:?}");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        seen.load(Ordering::SeqCst),
        2,
        "the server saw the POST twice"
    );
}

#[test]
fn a_case_past_its_deadline_stops_its_traffic_and_keeps_what_finished() {
    use benchplan::load::case::execute;
    use benchplan::load::options::RunOptions;
    use benchplan::plan::sim::Preset;
    use benchplan::service::target::resolve;
    let svc = crate::support::sim_service(Preset::GroundTruth, Default::default());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let resolved = resolve(&svc, false, None).await.unwrap();
        let p = benchplan::plan::CaseParams {
            num_prompts: 200,
            max_concurrency: Some(4),
            dataset: benchplan::plan::Dataset::Random(benchplan::plan::dataset::RandomDataset {
                input_len: 8,
                output_len: 20,
                ..Default::default()
            }),
            ignore_eos: Some(true),
            ..Default::default()
        };
        let opts = RunOptions {
            deadline: Some(Instant::now() + Duration::from_millis(1200)),
            ..RunOptions::default()
        };
        let t = Instant::now();
        let r = execute(&resolved, &svc, &p, &opts).await.unwrap();
        assert!(r.run.timed_out && r.run.interrupted);
        assert!(t.elapsed() < Duration::from_secs(6), "{:?}", t.elapsed());
        let a = r.run.accounting;
        assert!(a.balanced(), "{a:?}");
        assert!(a.completed > 0 && a.cancelled > 0, "{a:?}");
        // Nothing of the stopped case still loads the server: the requests it had in
        // flight end (the simulator finishes a sequence at most one step after its
        // client left), and no new one arrives.
        let stats = resolved.sim.as_ref().unwrap().stats();
        let seen = || {
            use std::sync::atomic::Ordering::Relaxed;
            stats.requests_ok.load(Relaxed)
                + stats.requests_failed.load(Relaxed)
                + stats.in_system.load(Relaxed)
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after = seen();
        assert_eq!(
            stats.in_system.load(std::sync::atomic::Ordering::Relaxed),
            0
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(seen(), after, "requests arrived after the deadline");
        // At most the smoke request, the completed ones and those cut in flight.
        assert!(after <= 1 + a.completed + 4, "{after} requests for {a:?}");
    });
}

#[test]
fn probe_sends_the_key_from_its_variable_and_headers() {
    let sim = SimProcess::start(&["--preset", "fast", "--set", "api_key=probe-key-123"]);
    let out = Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args([
            "probe",
            &sim.url,
            "--backend",
            "openai",
            "--api-key-env",
            "BP_PROBE_KEY",
        ])
        .env("BP_PROBE_KEY", "probe-key-123")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Probe tells what /metrics offers before a plan relies on it.
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.lines().any(|l| l.starts_with("metrics:")
            && l.contains("vllm names")
            && l.contains("running")
            && l.contains("prefix_cache_hits")),
        "{said}"
    );
    let without = Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args([
            "probe",
            &sim.url,
            "--backend",
            "openai",
            "--model",
            "benchplan-sim",
        ])
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&without.stdout).into_owned();
    assert_eq!(without.status.code(), Some(1), "{text}");
    assert!(
        text.contains("http_401") && text.contains("api_key_env"),
        "{text}"
    );
    assert!(!text.contains("probe-key-123"));
    let with_header = Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args([
            "probe",
            &sim.url,
            "--backend",
            "openai",
            "--header",
            "Authorization=Bearer probe-key-123",
        ])
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    assert_eq!(
        with_header.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&with_header.stdout)
    );
}
