//! Field truth: the numbers through the parts production traffic crosses. A real nginx
//! (started here with its own config on 127.0.0.1) in front of the ground-truth
//! simulator, compared with the direct run and with a plain reference reader written
//! here (a blocking socket with the kernel's default options); servers that batch
//! events, lie about usage or cut answers short; forward proxies, redirects,
//! compressed bodies, TLS with a private CA, and a server that never answers.
//!
//! The subprocess tests run `BENCHPLAN_UNDER_TEST` when set (another build of
//! benchplan, to show a test failing on older code), else this build's binary.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{SimProcess, read_request, repo, scripted, tempdir};

/// The benchplan binary these tests run.
fn binary() -> PathBuf {
    std::env::var_os("BENCHPLAN_UNDER_TEST")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_benchplan")))
}

const PROXY_VARS: [&str; 8] = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// What one `bench` run left: its exit code, stderr and result file.
pub(crate) struct Bench {
    pub(crate) code: Option<i32>,
    pub(crate) stderr: String,
    pub(crate) result: Option<Value>,
}

impl Bench {
    pub(crate) fn b(&self) -> &Value {
        &self.result.as_ref().expect("a result file")["benchplan"]
    }

    /// Every ITL sample (seconds) of the detailed result.
    fn itls(&self) -> Vec<f64> {
        self.result.as_ref().expect("a result file")["itls"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|l| l.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()))
            .collect()
    }

    fn ttfts(&self) -> Vec<f64> {
        self.result.as_ref().unwrap()["ttfts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    }
}

/// `benchplan bench` against `base` with `args` after the common ones, the proxy
/// variables of this process removed and `env` set; the detailed result read back.
pub(crate) fn bench(base: &str, args: &[&str], env: &[(&str, &str)]) -> Bench {
    let tok = repo()
        .join("tests/fixtures/tokenizer")
        .display()
        .to_string();
    let mut all = vec!["--base-url", base, "--model", "benchplan-sim"];
    if !args.contains(&"--tokenizer") {
        all.extend(["--tokenizer", &tok]);
    }
    all.extend(["--disable-tqdm", "--save-detailed"]);
    all.extend_from_slice(args);
    let r = crate::support::bench_run(&binary(), &all, &PROXY_VARS, env);
    Bench {
        code: r.code,
        stderr: r.stderr,
        result: r.result,
    }
}

/// numpy's linear percentile of `xs`, in milliseconds.
fn pct_ms(xs: &[f64], p: f64) -> f64 {
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = p / 100.0 * (s.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    (s[lo] + (s[hi] - s[lo]) * (rank - lo as f64)) * 1e3
}

fn near_zero_pct(itls: &[f64]) -> f64 {
    itls.iter().filter(|g| **g < 0.0005).count() as f64 / itls.len() as f64 * 100.0
}

// ---------------------------------------------------------------- nginx

/// nginx, if this machine has it (Debian puts it in /usr/sbin).
fn nginx_bin() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("nginx"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        let p = PathBuf::from("/usr/sbin/nginx");
        p.is_file().then_some(p)
    })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An nginx in the foreground with one `server` block per entry of `servers` (extra
/// directives for it), each proxying to `upstream`; killed on drop.
struct Nginx {
    child: Child,
    ports: Vec<u16>,
    dir: PathBuf,
}

impl Nginx {
    fn start(bin: &Path, upstream: &str, servers: &[&str]) -> Nginx {
        let dir = tempdir("nginx");
        let ports: Vec<u16> = servers.iter().map(|_| free_port()).collect();
        let d = dir.display();
        let mut conf = format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 256; }}\nhttp {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n  keepalive_timeout 1s;\n"
        );
        for (port, extra) in ports.iter().zip(servers) {
            conf.push_str(&format!(
                "  server {{\n    listen 127.0.0.1:{port};\n    {extra}\n    location / {{ proxy_pass {upstream}; }}\n  }}\n"
            ));
        }
        conf.push_str("}\n");
        let path = dir.join("nginx.conf");
        std::fs::write(&path, conf).unwrap();
        let child = Command::new(bin)
            .arg("-p")
            .arg(&dir)
            .arg("-e")
            .arg(dir.join("error.log"))
            .arg("-c")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("nginx starts");
        let until = Instant::now() + Duration::from_secs(10);
        for p in &ports {
            while TcpStream::connect(("127.0.0.1", *p)).is_err() {
                assert!(
                    Instant::now() < until,
                    "nginx did not listen on {p}: {}",
                    std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Nginx { child, ports, dir }
    }

    fn url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[i])
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A plain reader of `n` streamed completions sent together to `base`: blocking
/// sockets with the kernel's default options, one thread a request, a read's time for
/// every event in it. Returns the TTFTs and ITL gaps (seconds).
fn reference_reader(base: &str, n: usize, output: u32) -> (Vec<f64>, Vec<f64>) {
    let addr = base.trim_start_matches("http://").to_string();
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let body = format!(
                    r#"{{"model":"benchplan-sim","prompt":"reference reader request {i}","max_tokens":{output},"stream":true,"ignore_eos":true}}"#
                );
                let mut s = TcpStream::connect(&addr).unwrap();
                let sent = Instant::now();
                write!(
                    s,
                    "POST /v1/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .unwrap();
                let (mut times, mut buf, mut pending) = (Vec::new(), [0u8; 65536], Vec::new());
                loop {
                    let k = s.read(&mut buf).unwrap();
                    if k == 0 {
                        break;
                    }
                    let at = Instant::now();
                    pending.extend_from_slice(&buf[..k]);
                    // Count whole token events (`"text":`) in what arrived so far.
                    let text = String::from_utf8_lossy(&pending).into_owned();
                    let events = text.matches("\"text\":").count();
                    while times.len() < events {
                        times.push(at);
                    }
                    if text.contains("[DONE]") {
                        break;
                    }
                }
                let ttft = (times[0] - sent).as_secs_f64();
                let itl: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect();
                (ttft, itl)
            })
        })
        .collect();
    let (mut ttfts, mut itls) = (Vec::new(), Vec::new());
    for t in threads {
        let (ttft, itl) = t.join().unwrap();
        ttfts.push(ttft);
        itls.extend(itl);
    }
    (ttfts, itls)
}

/// The case every nginx check runs: 8 streams of 24 tokens sent together (the
/// simulator: TTFT 20 ms, ITL 10 ms), each on a connection of its own.
const NGINX_CASE: [&str; 12] = [
    "--num-prompts",
    "8",
    "--random-input-len",
    "16",
    "--random-output-len",
    "24",
    "--ignore-eos",
    "--no-smoke",
    "--percentile-metrics",
    "ttft,itl",
    "--metric-percentiles",
    "50,99",
];

#[test]
fn through_nginx_the_numbers_match_the_direct_run_and_a_plain_reader() {
    let Some(bin) = nginx_bin() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the nginx test: .ci/run installs nginx"
        );
        eprintln!(
            "SKIPPED the nginx test: no nginx (Debian: apt-get install nginx; .ci/run installs it)"
        );
        return;
    };
    let sim = SimProcess::start(&["--preset", "ground-truth", "--set", "ttft=20ms"]);
    let nginx = Nginx::start(
        &bin,
        &sim.url,
        &[
            // nginx's defaults: responses buffered (proxy_buffering on).
            "",
            // Unbuffered, and Nagle on for nginx's writes (as nginx has it on a
            // connection that is not yet kept alive): a client that delays its ACKs
            // meets a 40 ms stall here.
            "proxy_buffering off; tcp_nodelay off;",
            "proxy_buffering off;",
        ],
    );
    crate::support::timing_check_sync(5, || {
        let direct = bench(&sim.url, &NGINX_CASE, &[]);
        assert_eq!(direct.code, Some(0), "{}", direct.stderr);
        let direct_p99 = pct_ms(&direct.itls(), 99.0);
        let mut failures = Vec::new();
        for (i, what) in [(1, "unbuffered, Nagle on"), (2, "unbuffered")] {
            let via = bench(&nginx.url(i), &NGINX_CASE, &[]);
            assert_eq!(via.code, Some(0), "{what}: {}", via.stderr);
            let itls = via.itls();
            let (p99, zero) = (pct_ms(&itls, 99.0), near_zero_pct(&itls));
            let (ref_ttft, ref_itl) = reference_reader(&nginx.url(i), 8, 24);
            let ref_p99 = pct_ms(&ref_itl, 99.0);
            eprintln!(
                "nginx {what}: ITL p99 {p99:.2} ms (direct {direct_p99:.2}, reference reader {ref_p99:.2}), {zero:.1}% under 0.5 ms; TTFT p50 {:.2} ms (reference {:.2})",
                pct_ms(&via.ttfts(), 50.0),
                pct_ms(&ref_ttft, 50.0)
            );
            // Within 2 ms or a quarter, whichever is larger: the defect this guards
            // against read 44 ms for 10, and a busy 2-core runner moves a p99 of 10 ms
            // by 3-4 ms between runs.
            let near = |a: f64, b: f64| (a - b).abs() <= 2.0f64.max(0.25 * b);
            if !near(p99, direct_p99) {
                failures.push(format!(
                    "{what}: ITL p99 {p99:.2} ms, direct {direct_p99:.2}"
                ));
            }
            if !near(p99, ref_p99) {
                failures.push(format!(
                    "{what}: ITL p99 {p99:.2} ms, reference reader {ref_p99:.2}"
                ));
            }
            if zero >= 5.0 {
                failures.push(format!("{what}: {zero:.1}% of ITL samples under 0.5 ms"));
            }
            let ttft = pct_ms(&via.ttfts(), 50.0);
            if (ttft - pct_ms(&ref_ttft, 50.0)).abs() > 3.0f64.max(0.2 * pct_ms(&ref_ttft, 50.0)) {
                failures.push(format!(
                    "{what}: TTFT p50 {ttft:.2} ms against the reference reader's {:.2}",
                    pct_ms(&ref_ttft, 50.0)
                ));
            }
            if via.b()["delivery"]["batched"] != Value::Bool(false) {
                failures.push(format!("{what}: delivery {}", via.b()["delivery"]));
            }
        }
        // nginx's default buffers the stream for every reader: the events come in
        // batches of about 4 KiB. benchplan sees what the plain reader sees, and says so.
        let buffered = bench(&nginx.url(0), &NGINX_CASE, &[]);
        let (_, ref_itl) = reference_reader(&nginx.url(0), 8, 24);
        let (zero, ref_zero) = (near_zero_pct(&buffered.itls()), near_zero_pct(&ref_itl));
        eprintln!(
            "nginx buffered: {zero:.1}% of ITL under 0.5 ms (reference reader {ref_zero:.1}%); {}",
            buffered.b()["delivery"]
        );
        if (zero - ref_zero).abs() > 15.0 {
            failures.push(format!(
                "buffered: {zero:.1}% near-zero ITL, reference reader {ref_zero:.1}%"
            ));
        }
        if buffered.b()["delivery"]["batched"] != Value::Bool(true)
            || !buffered.stderr.contains("token events arrived batched")
        {
            failures.push(format!(
                "buffered: batching not reported: {}\n{}",
                buffered.b()["delivery"],
                buffered.stderr
            ));
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("\n"))
        }
    });
}

// ------------------------------------------------------- servers that batch or lie

/// A completions token event.
pub(crate) fn token(text: &str) -> String {
    format!("data: {{\"choices\":[{{\"index\":0,\"text\":\"{text}\"}}]}}\n\n")
}

pub(crate) fn usage(prompt: u64, completion: u64) -> String {
    format!(
        "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":{prompt},\"completion_tokens\":{completion}}}}}\n\n"
    )
}

/// A server answering every request with a close-delimited event stream: `writes`,
/// each written on its own after `gap`, then the connection closed.
fn streaming(writes: Vec<String>, gap: Duration) -> String {
    streaming_logged(writes, gap).0
}

/// [`streaming`], and the number of requests it has answered so far.
fn streaming_logged(writes: Vec<String>, gap: Duration) -> (String, Arc<Mutex<Vec<String>>>) {
    scripted(move |_, s, log| {
        if read_request(s).is_none() {
            return;
        }
        log.lock().unwrap().push("request".into());
        let _ = s.set_nodelay(true);
        let _ = s.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
        );
        for w in &writes {
            std::thread::sleep(gap);
            if s.write_all(w.as_bytes()).is_err() {
                return;
            }
        }
        let _ = s.shutdown(std::net::Shutdown::Both);
    })
}

/// Four requests of `output` tokens with ignore_eos, one at a time, no smoke request.
pub(crate) fn small_case(output: &str) -> Vec<&str> {
    vec![
        "--num-prompts",
        "4",
        "--max-concurrency",
        "1",
        "--random-input-len",
        "4",
        "--random-output-len",
        output,
        "--ignore-eos",
        "--no-smoke",
    ]
}

#[test]
fn events_written_in_pairs_are_reported_as_batched() {
    // Ten tokens written two at a time, 10 ms apart.
    let pair = format!("{}{}", token(" a"), token(" b"));
    let mut writes = vec![pair; 5];
    writes.push(format!("{}data: [DONE]\n\n", usage(4, 10)));
    let base = streaming(writes, Duration::from_millis(10));
    let r = bench(&base, &small_case("10"), &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let d = &r.b()["delivery"];
    assert_eq!(d["batched"], Value::Bool(true), "{d}");
    let per_read = d["events_per_read"].as_f64().unwrap();
    assert!((per_read - 2.0).abs() < 0.3, "{d}");
    // Every second gap is zero: 5 of the 9 gaps of each request.
    let zero = d["near_zero_itl_percent"].as_f64().unwrap();
    assert!((zero - 5.0 / 9.0 * 100.0).abs() < 12.0, "{d}");
    assert!(
        r.stderr.contains("token events arrived batched"),
        "{}",
        r.stderr
    );
    let w = r.b()["warnings"].as_array().unwrap();
    assert!(
        w[0].as_str().unwrap().contains("reflects the path"),
        "{w:?}"
    );
}

#[test]
fn usage_that_contradicts_the_stream_is_counted_and_warned_about() {
    // Ten token events, usage 1000 (above max_tokens 10 too): usage that cannot be
    // true is not believed; the events stand in, in every sum.
    let high = |completion: u64| {
        let mut w: Vec<String> = (0..10).map(|_| token(" a")).collect();
        w.push(format!("{}data: [DONE]\n\n", usage(4, completion)));
        w
    };
    let r = bench(
        &streaming(high(1000), Duration::ZERO),
        &small_case("10"),
        &[],
    );
    assert_eq!(
        r.code,
        Some(0),
        "usage above is warned about, not failed: {}",
        r.stderr
    );
    let a = &r.b()["token_accounting"];
    assert_eq!(
        (
            a["usage_mismatch"].as_u64(),
            a["usage_over_max_tokens"].as_u64()
        ),
        (Some(4), Some(4)),
        "{a}"
    );
    assert_eq!(a["largest_difference"], 990, "{a}");
    assert_eq!(a["corrected"], 4, "{a}");
    assert_eq!(
        a["corrected_requests"],
        serde_json::json!([0, 1, 2, 3]),
        "{a}"
    );
    // Per request: the events streamed, and they are what is counted.
    assert_eq!(r.b()["token_events"], serde_json::json!([10, 10, 10, 10]));
    let res = r.result.as_ref().unwrap();
    assert_eq!(res["output_lens"], serde_json::json!([10, 10, 10, 10]));
    assert_eq!(res["total_output_tokens"], 40);
    assert!(
        r.stderr
            .contains("4 request(s) got a usage.completion_tokens that disagrees")
            && r.stderr.contains("none was believed"),
        "{}",
        r.stderr
    );

    // Ten token events, usage 3: fewer tokens than events cannot be true. Every token
    // arrived, so the output floor (judged on what was received) holds.
    let r = bench(&streaming(high(3), Duration::ZERO), &small_case("10"), &[]);
    let a = &r.b()["token_accounting"];
    assert_eq!(
        (
            a["usage_mismatch"].as_u64(),
            a["largest_difference"].as_i64(),
            a["corrected"].as_u64(),
            a["short_outputs"].as_u64()
        ),
        (Some(4), Some(-7), Some(4), Some(0)),
        "{a}"
    );
    assert_eq!(
        r.result.as_ref().unwrap()["output_lens"],
        serde_json::json!([10, 10, 10, 10])
    );
    assert_eq!(
        r.code,
        Some(0),
        "the output floor is judged on what was received: {}",
        r.stderr
    );

    // Usage near u64::MAX: the totals stop at the largest number, never wrap.
    let huge = u64::MAX - 5;
    let mut w: Vec<String> = (0..10).map(|_| token(" a")).collect();
    w.push(format!("{}data: [DONE]\n\n", usage(huge, 10)));
    let r = bench(&streaming(w, Duration::ZERO), &small_case("10"), &[]);
    let res = r.result.as_ref().unwrap();
    assert_eq!(
        res["total_input_tokens"].as_u64(),
        Some(u64::MAX),
        "{}",
        res["total_input_tokens"]
    );
    assert_eq!(r.b()["token_accounting"]["saturated"], Value::Bool(true));
    assert!(
        r.stderr.contains("largest countable number"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_server_that_cuts_answers_short_fails_bench_and_a_nightly_run() {
    // Asked for 32 tokens with ignore_eos, the server sends 2 and ends the stream
    // (what llama-cpp-python's server does to a stream a newer request interrupts).
    let writes = vec![
        token(" a"),
        token(" b"),
        format!("{}data: [DONE]\n\n", usage(4, 2)),
    ];
    let (base, served) = streaming_logged(writes, Duration::ZERO);
    let r = bench(&base, &small_case("32"), &[]);
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    let a = &r.b()["token_accounting"];
    assert_eq!(
        (a["short_outputs"].as_u64(), a["output_ratio"].as_f64()),
        (Some(4), Some(6.25)),
        "{a}"
    );
    assert!(r.stderr.contains("min_output_ratio"), "{}", r.stderr);
    // A lower floor lets it pass.
    let mut args = small_case("32");
    args.extend(["--min-output-ratio", "5%"]);
    assert_eq!(bench(&base, &args, &[]).code, Some(0));

    // `run`: the case fails its verdict, is not recommended, and a resume reruns it.
    let dir = tempdir("truncating");
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"nightly\"\n[services.cut]\nbase_url = \"{base}\"\nmodel = \"m\"\ntokenizer = \"{}\"\n[defaults]\nnum_prompts = 3\nmax_concurrency = 1\ndataset = {{ name = \"random\", input_len = 4, output_len = 32 }}\n[execution]\nresults_dir = \"{}\"\n",
            repo().join("tests/fixtures/tokenizer").display(),
            dir.join("results").display()
        ),
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let mut c = Command::new(binary());
        c.arg("run").arg(&plan).args(["--quiet"]).args(extra);
        for v in PROXY_VARS {
            c.env_remove(v);
        }
        c.output().unwrap()
    };
    let out = run(&[]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(3), "{err}");
    let batch = crate::support::batch_dir(&dir.join("results"));
    let result = std::fs::read_dir(&batch)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with("cut"))
        .map(|p| crate::support::read_json(&p))
        .expect("the case's result");
    let verdicts = result["benchplan"]["slo_verdicts"].as_array().unwrap();
    let floor = verdicts
        .iter()
        .find(|v| v["key"] == "min_output_ratio")
        .expect("the output floor is judged");
    assert_eq!(floor["pass"], Value::Bool(false), "{floor}");
    let md = std::fs::read_to_string(batch.join("report.md")).unwrap();
    assert!(
        md.contains("returned fewer tokens than they asked for"),
        "{md}"
    );
    assert!(!md.contains("**PASS**"), "{md}");
    let before = served.lock().unwrap().len();
    let resumed = run(&["--resume", batch.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&resumed.stderr).into_owned();
    assert_eq!(resumed.status.code(), Some(3), "{err}");
    assert!(
        served.lock().unwrap().len() > before,
        "the resume must run the case below the output floor again"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------------------------ proxies

/// A logging forward proxy on 127.0.0.1: `CONNECT host:port` is tunnelled; a request
/// in absolute form (`POST http://host:port/path`) is sent on to its server in origin
/// form and the answer relayed, one request per connection. Logs each request line
/// and whether it carried `Proxy-Authorization`.
fn forward_proxy() -> (String, Arc<Mutex<Vec<String>>>) {
    let (url, log) = scripted(|_, client, log| {
        let Some((head, body)) = read_request(client) else {
            return;
        };
        let line = head.lines().next().unwrap_or("").to_string();
        let auth = head
            .to_ascii_lowercase()
            .contains("proxy-authorization: basic");
        log.lock()
            .unwrap()
            .push(format!("{line}{}", if auth { " [auth]" } else { "" }));
        let mut parts = line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let relay = |mut upstream: TcpStream, client: &mut TcpStream| {
            let mut back = upstream.try_clone().unwrap();
            let mut c2 = client.try_clone().unwrap();
            let up = std::thread::spawn(move || {
                let _ = std::io::copy(&mut c2, &mut upstream);
                let _ = upstream.shutdown(std::net::Shutdown::Write);
            });
            let _ = std::io::copy(&mut back, client);
            let _ = client.shutdown(std::net::Shutdown::Both);
            let _ = up.join();
        };
        if method == "CONNECT" {
            let Ok(upstream) = TcpStream::connect(target) else {
                let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n");
                return;
            };
            let _ = client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
            relay(upstream, client);
            return;
        }
        let Some(rest) = target.strip_prefix("http://") else {
            let _ = client.write_all(
                b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
            return;
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let Ok(mut upstream) = TcpStream::connect(authority) else {
            return;
        };
        let mut forwarded = format!("{method} {path} HTTP/1.1\r\n");
        for h in head.lines().skip(1) {
            let l = h.to_ascii_lowercase();
            if !l.starts_with("proxy-authorization") && !l.starts_with("connection") {
                forwarded.push_str(h);
                forwarded.push_str("\r\n");
            }
        }
        forwarded.push_str("connection: close\r\n\r\n");
        let _ = upstream.write_all(forwarded.as_bytes());
        let _ = upstream.write_all(&body);
        relay(upstream, client);
    });
    (url, log)
}

#[test]
fn the_environments_proxies_carry_every_request_and_are_recorded_without_credentials() {
    let sim = SimProcess::start(&["--preset", "fast"]);
    let (proxy, log) = forward_proxy();
    let port = proxy.trim_start_matches("http://127.0.0.1:");
    let with_auth = format!("http://user:s3cret@127.0.0.1:{port}");
    let case = [
        "--num-prompts",
        "3",
        "--random-input-len",
        "4",
        "--random-output-len",
        "3",
        "--tokenizer",
        "server",
    ];
    // --tokenizer server: the dataset is built with the server's /tokenize, a side
    // request that must take the proxy too.
    let r = bench(&sim.url, &case, &[("HTTP_PROXY", &with_auth)]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let seen = log.lock().unwrap().clone();
    let host = sim.url.trim_start_matches("http://");
    let completions = seen
        .iter()
        .filter(|l| {
            l.starts_with(&format!(
                "POST http://{host}/v1/completions HTTP/1.1 [auth]"
            ))
        })
        .count();
    assert_eq!(
        completions, 4,
        "3 measured requests and the smoke request: {seen:?}"
    );
    assert!(
        seen.iter().any(|l| l.contains("/tokenize")),
        "the tokenizer's side requests go through the proxy too: {seen:?}"
    );
    assert_eq!(r.b()["route"]["proxy"], format!("http://127.0.0.1:{port}"));
    assert_eq!(r.b()["route"]["proxy_variable"], "HTTP_PROXY");
    let text = serde_json::to_string(r.result.as_ref().unwrap()).unwrap();
    assert!(!text.contains("s3cret") && !r.stderr.contains("s3cret"));
    assert!(r.stderr.contains("went through the proxy"), "{}", r.stderr);

    // NO_PROXY and --no-proxy send everything directly.
    log.lock().unwrap().clear();
    let r = bench(
        &sim.url,
        &case,
        &[("HTTP_PROXY", &proxy), ("NO_PROXY", "127.0.0.1")],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let mut direct = case.to_vec();
    direct.push("--no-proxy");
    let r2 = bench(&sim.url, &direct, &[("http_proxy", &proxy)]);
    assert_eq!(r2.code, Some(0), "{}", r2.stderr);
    assert!(log.lock().unwrap().is_empty(), "{:?}", log.lock().unwrap());
    assert!(r.b().get("route").is_none() && r2.b().get("route").is_none());

    // HTTPS through HTTPS_PROXY: a CONNECT tunnel.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sim_addr: std::net::SocketAddr = host.parse().unwrap();
    let (front, _) = rt.block_on(crate::support::tls_front(sim_addr));
    let https = format!("https://127.0.0.1:{}", front.port());
    let mut tls = case[..6].to_vec();
    tls.push("--insecure");
    let r = bench(&https, &tls, &[("HTTPS_PROXY", &proxy)]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let seen = log.lock().unwrap().clone();
    assert!(
        seen.iter()
            .any(|l| l.starts_with(&format!("CONNECT 127.0.0.1:{}", front.port()))),
        "{seen:?}"
    );
    assert_eq!(r.b()["route"]["proxy_variable"], "HTTPS_PROXY");
}

// ---------------------------------------------------------- redirects, encodings

/// A server answering every request with `status` and `Location: location`.
fn redirecting(status: &'static str, location: String) -> String {
    scripted(move |_, s, _| {
        if read_request(s).is_some() {
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
        }
    })
    .0
}

#[test]
fn redirects_are_followed_as_aiohttp_follows_them() {
    let sim = SimProcess::start(&["--preset", "fast"]);
    let case = small_case("3");
    // 307 and 308 keep the method and the body: every request completes at the sim.
    for status in ["307 Temporary Redirect", "308 Permanent Redirect"] {
        let to = format!("{}/v1/completions", sim.url);
        let r = bench(&redirecting(status, to.clone()), &case, &[]);
        assert_eq!(r.code, Some(0), "{status}: {}", r.stderr);
        let res = r.result.as_ref().unwrap();
        assert_eq!(res["completed"], 4, "{status}");
        assert_eq!(
            res["total_output_tokens"], 12,
            "the body reached the server: {status}"
        );
        assert_eq!(r.b()["route"]["redirected_to"], to);
        assert!(r.stderr.contains("redirected the requests"), "{}", r.stderr);
    }
    // 302 on a POST: failed, naming where it pointed.
    let r = bench(
        &redirecting(
            "302 Found",
            "http://elsewhere.invalid/v1/completions".into(),
        ),
        &case,
        &[],
    );
    assert_eq!(r.code, Some(1));
    assert_eq!(r.b()["errors_by_kind"]["http_302"], 4);
    let msg = r.b()["first_errors"]["http_302"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("http://elsewhere.invalid/v1/completions"),
        "{msg}"
    );
    // A redirect to itself ends after ten hops.
    let me = Arc::new(Mutex::new(String::new()));
    let to = me.clone();
    let (looped, _) = scripted(move |_, s, _| {
        if read_request(s).is_some() {
            let l = to.lock().unwrap().clone();
            let _ = write!(
                s,
                "HTTP/1.1 307 Temporary Redirect\r\nlocation: {l}/v1/completions\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
        }
    });
    *me.lock().unwrap() = looped.clone();
    let r = bench(&looped, &case, &[]);
    assert_eq!(
        r.b()["errors_by_kind"]["too_many_redirects"],
        4,
        "{}",
        r.b()["errors_by_kind"]
    );
}

/// A server streaming `events` compressed as `encoding` (each flushed on its own).
fn compressed(encoding: &'static str, events: Vec<String>) -> String {
    scripted(move |_, s, _| {
        if read_request(s).is_none() {
            return;
        }
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: {encoding}\r\nconnection: close\r\n\r\n"
        );
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        for e in &events {
            gz.write_all(e.as_bytes()).unwrap();
            gz.flush().unwrap();
            let _ = s.write_all(&std::mem::take(gz.get_mut()));
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = s.write_all(&gz.finish().unwrap());
        let _ = s.shutdown(std::net::Shutdown::Both);
    })
    .0
}

#[test]
fn compressed_streams_are_decoded_or_refused_by_name() {
    let mut events: Vec<String> = (0..3).map(|_| token(" a")).collect();
    events.push(format!("{}data: [DONE]\n\n", usage(4, 3)));
    let r = bench(&compressed("gzip", events.clone()), &small_case("3"), &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let res = r.result.as_ref().unwrap();
    assert_eq!(
        (
            res["completed"].as_u64(),
            res["total_output_tokens"].as_u64()
        ),
        (Some(4), Some(12))
    );
    assert_eq!(
        res["itls"][0].as_array().unwrap().len(),
        2,
        "three token events, one per read"
    );
    let r = bench(&compressed("br", events), &small_case("3"), &[]);
    assert_eq!(r.b()["errors_by_kind"]["unsupported_encoding"], 4);
    let msg = r.b()["first_errors"]["unsupported_encoding"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("Content-Encoding: br"), "{msg}");
}

// ------------------------------------------------------------------------ TLS

#[test]
fn a_private_ca_is_named_by_ca_cert_and_a_certificate_error_says_what_to_set() {
    let sim = SimProcess::start(&["--preset", "fast"]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (front, pem) = rt.block_on(crate::support::tls_front(
        sim.url.trim_start_matches("http://").parse().unwrap(),
    ));
    let dir = tempdir("ca");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, pem).unwrap();
    let https = format!("https://127.0.0.1:{}", front.port());
    let case = small_case("3");
    let r = bench(&https, &case, &[]);
    assert_ne!(r.code, Some(0));
    for word in ["ca_cert", "insecure", "SSL_CERT_FILE", "certificate"] {
        assert!(
            r.stderr.contains(word),
            "the hint names {word}:\n{}",
            r.stderr
        );
    }
    let mut with_ca = case.clone();
    with_ca.extend(["--ca-cert", ca.to_str().unwrap()]);
    let r = bench(&https, &with_ca, &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.result.as_ref().unwrap()["completed"], 4);
    // SSL_CERT_FILE, as OpenSSL (and so vLLM's client) reads it.
    let r = bench(&https, &case, &[("SSL_CERT_FILE", ca.to_str().unwrap())]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // The plan keys, in `run`.
    let plan = dir.join("tls.toml");
    std::fs::write(
        &plan,
        format!(
            "[services.private]\nbase_url = \"{https}\"\nmodel = \"benchplan-sim\"\ntokenizer = \"{}\"\nca_cert = \"{}\"\n[services.selfsigned]\nbase_url = \"{https}\"\nmodel = \"benchplan-sim\"\ntokenizer = \"{}\"\ninsecure = true\n[defaults]\nnum_prompts = 2\ndataset = {{ name = \"random\", input_len = 4, output_len = 3 }}\n[execution]\nresults_dir = \"{}\"\n",
            repo().join("tests/fixtures/tokenizer").display(),
            ca.display(),
            repo().join("tests/fixtures/tokenizer").display(),
            dir.join("results").display()
        ),
    )
    .unwrap();
    let out = Command::new(binary())
        .arg("run")
        .arg(&plan)
        .arg("--quiet")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// -------------------------------------------------------------------- waits

#[test]
fn a_server_that_never_answers_is_an_idle_timeout_and_bench_says_what_it_waits_for() {
    // Reads the request and never sends a head.
    let (silent, _) = scripted(|_, s, _| {
        if read_request(s).is_some() {
            std::thread::sleep(Duration::from_secs(30));
        }
    });
    let args = [
        "--num-prompts",
        "4",
        "--max-concurrency",
        "4",
        "--random-input-len",
        "4",
        "--random-output-len",
        "3",
        "--no-smoke",
        "--stream-idle-timeout",
        "1",
    ];
    let t = Instant::now();
    let r = bench(&silent, &args, &[]);
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    assert_eq!(
        r.b()["errors_by_kind"]["idle_timeout"],
        4,
        "{}",
        r.b()["errors_by_kind"]
    );
    let msg = r.b()["first_errors"]["idle_timeout"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("no response head"), "{msg}");

    // A smoke request answered after 6 s: bench says what it is waiting for meanwhile.
    let writes = vec![
        token(" a"),
        token(" b"),
        token(" c"),
        format!("{}data: [DONE]\n\n", usage(4, 3)),
    ];
    let slow = scripted(move |i, s, _| {
        if read_request(s).is_none() {
            return;
        }
        if i == 0 {
            std::thread::sleep(Duration::from_secs(6));
        }
        let _ = s.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
        );
        for w in &writes {
            let _ = s.write_all(w.as_bytes());
        }
        let _ = s.shutdown(std::net::Shutdown::Both);
    })
    .0;
    let r = bench(
        &slow,
        &[
            "--num-prompts",
            "1",
            "--random-input-len",
            "4",
            "--random-output-len",
            "3",
            "--ignore-eos",
        ],
        &[],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains("waiting for the smoke request to"),
        "{}",
        r.stderr
    );
}
