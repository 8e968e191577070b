//! The load generator's own cost and accuracy, against `benchplan sim` in a separate
//! process. Run: `cargo bench --bench client_overhead`. Prints figures; asserts nothing.
//!
//! - fast preset (zero latency, many chunks per read): client CPU per streamed chunk
//!   and chunks per second, at 1, 100, 500 and 1,000 concurrent streams;
//! - paced chunks (ITL 10 ms, prefill 20 ms, about one read per chunk): CPU per chunk
//!   and the TTFT and ITL error against the simulator's configured latencies;
//! - a Poisson schedule at 1,000 req/s: achieved rate and schedule lag;
//! - peak RSS of this (client) process at the end of the run.
//!
//! Rows ending in `@pinned` bind the client to CPU 0 and the simulator to CPU 1: the
//! client's accuracy when nothing else competes for its core (the simulator, on one
//! core, is then later against its configuration). Rows ending in `+reqwest` repeat a scenario through reqwest/hyper instead of the
//! native HTTP/1.1 client that plain-http targets use, to show what the latter saves.
//!
//! Each scenario runs in a fresh child process (so its peak RSS is its own) with a
//! single-threaded tokio runtime, as `benchplan bench` uses against an external server.
//! CPU is read with getrusage around the measured run only (the dataset is built and
//! the smoke request sent before), so start-up and prompt building are not counted. `BENCH_ONLY=paced` runs
//! the scenarios whose name starts with that; `BENCH_OUTPUT=N` sets the output tokens
//! per request (to tell per-request costs from per-chunk ones). While a scenario is
//! measured it prints `measuring: pid N` on stderr, for `perf record -p N`.
//!
//! `paced-N-floor` reads the paced streams with a bare epoll loop (no runtime, no
//! HTTP or SSE parsing, no timestamps): the kernel's price of a chunk on this machine,
//! which no client can go below. `paced-N-tokio` reads them with bare tokio tasks on the
//! client's runtime (readiness and a plain read, nothing else): the runtime's floor, so
//! the client's own cost is what it spends above that row. Every row ends with the hypervisor's steal share of
//! the machine's CPU time during the run: on a busy host the figures move with it.

mod support;

use std::sync::Arc;

use benchplan::client::backend::RequestInput;
use benchplan::load::options::RunOptions;
use benchplan::load::run::run_case;
use benchplan::metrics::summary::summarize;
use benchplan::plan::dataset::RandomDataset;
use benchplan::plan::units::Rate;
use benchplan::plan::{Backend, CaseParams, Dataset, Metric, Service};
use benchplan::service::target::{resolve, target};
use support::{
    SimProcess, own_cpu, peak_rss_mib, percentile, steal_and_total_ticks, steal_percent,
};

struct Figures {
    chunks: u64,
    wall: f64,
    cpu: f64,
    /// The user-space part of `cpu` (the rest is the kernel's: reads, wake-ups, ACKs).
    cpu_user: f64,
    /// Percent of the machine's CPU time the hypervisor stole during the run.
    steal: f64,
    /// This process's peak RSS when the run ended, MiB (before the analysis below
    /// parses the simulator's record of every chunk, which is the bench's, not the
    /// client's).
    rss: f64,
    summary: benchplan::metrics::summary::Summary,
    records: Vec<benchplan::metrics::record::RequestRecord>,
    /// The run's start on the monotonic clock (ns), which the records' times count from.
    started_ns: f64,
    /// Per request (by index): the simulator's actual send times of its chunks, seconds
    /// from the request's arrival (paced scenarios, which run `sim --record-timings`).
    emitted: Vec<Option<Emitted>>,
}

/// What the simulator recorded for one request.
#[derive(Clone)]
struct Emitted {
    /// Arrival on the host's monotonic clock, ns.
    arrived_ns: u64,
    /// Send times of its chunks, seconds after arrival.
    chunks: Vec<f64>,
}

const ID_PREFIX: &str = "bench-";

/// The simulator's record of what it actually sent, by request index.
async fn emitted_times(
    sim: &SimProcess,
    client: &reqwest::Client,
    n: usize,
) -> Vec<Option<Emitted>> {
    let mut by_index = vec![None; n];
    let Ok(resp) = client
        .get(format!("{}/sim/timings", sim.base_url))
        .send()
        .await
    else {
        return by_index;
    };
    if !resp.status().is_success() {
        return by_index; // not recording
    }
    let v: serde_json::Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
    for r in v["requests"].as_array().unwrap() {
        let Some(i) = r["request_id"]
            .as_str()
            .and_then(|id| id.strip_prefix(ID_PREFIX))
            .and_then(|i| i.parse::<usize>().ok())
        else {
            continue; // the smoke request and warmups carry no id
        };
        let times = r["chunks_us"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap() / 1e6)
            .collect();
        if i < n {
            by_index[i] = Some(Emitted {
                arrived_ns: r["arrived_monotonic_ns"].as_u64().unwrap(),
                chunks: times,
            });
        }
    }
    by_index
}

async fn measure(
    sim: &SimProcess,
    streams: usize,
    requests: usize,
    output: u64,
    rate: f64,
    native: bool,
) -> Figures {
    let svc = Service {
        base_url: Some(sim.base_url.clone()),
        tokenizer: Some("server".into()),
        ..Service::default()
    };
    let resolved = resolve(&svc, false, Some(streams)).await.unwrap();
    let params = CaseParams {
        backend: Some(Backend::Openai),
        num_prompts: requests as u64,
        max_concurrency: Some(streams as u64),
        request_rate: Rate(rate),
        dataset: Dataset::Random(RandomDataset {
            input_len: 16,
            output_len: output,
            ..RandomDataset::default()
        }),
        ignore_eos: Some(true),
        percentile_metrics: Some(vec![Metric::Ttft, Metric::Itl]),
        metric_percentiles: vec![50.0, 99.0],
        ..CaseParams::default()
    };
    let inputs: Arc<Vec<RequestInput>> = Arc::new(
        benchplan::dataset::build(&params, &resolved.tokens, std::path::Path::new(".")).unwrap(),
    );
    let params = Arc::new(params);
    let mut t = target(&resolved, &svc, &params);
    if !native {
        // The comparison rows: the same requests through reqwest/hyper.
        Arc::get_mut(&mut t).expect("sole owner").native = None;
    }
    // The smoke request, sent before the meter starts: a single stream whose chunks
    // are not among the measured ones, so its CPU (100 unbatched wake-ups at 100
    // tokens, ~0.3 us a measured chunk of the 100-stream row) would be charged to
    // chunks it did not carry. The floor rows send none.
    let smoke = benchplan::client::request::send_input(&t, &params, &inputs[0], None, None).await;
    assert!(
        smoke.sample.success,
        "smoke request: {:?}",
        smoke.sample.error
    );
    let me = std::process::id();
    // For a profiler attached to the measured part only (`perf record -p`).
    eprintln!("measuring: pid {me}");
    let (user0, sys0) = own_cpu();
    let steal0 = steal_and_total_ticks();
    let opts = RunOptions {
        request_id_prefix: ID_PREFIX.into(),
        smoke: false,
        ..RunOptions::default()
    };
    let run = run_case(t, params.clone(), inputs, &opts).await.unwrap();
    let (user1, sys1) = own_cpu();
    let steal = steal_percent(steal0, steal_and_total_ticks());
    let (cpu, cpu_user) = (user1 + sys1 - user0 - sys0, user1 - user0);
    let rss = peak_rss_mib();
    let emitted = emitted_times(sim, &resolved.client, requests).await;
    let chunks = run.records.iter().map(|r| u64::from(r.sample.chunks)).sum();
    let summary = summarize(&run.records, run.duration, &params, None);
    Figures {
        chunks,
        wall: run.duration,
        cpu,
        cpu_user,
        steal,
        rss,
        summary,
        started_ns: benchplan::clock::monotonic_ns(run.started) as f64,
        records: run.records,
        emitted,
    }
}

/// Client accuracy against what the simulator actually did (its recorded send times).
/// A request's true TTFT runs from the moment it leaves the client to the server's first
/// send, on the shared monotonic clock; the client's error is what it adds to that: the
/// time between its send stamp and its write returning, plus the response leg.
struct VsEmitted {
    /// |client ITL − gap between the two sends|: p50 and p99, ms.
    itl_p50: f64,
    itl_p99: f64,
    /// The TTFT error split on the shared monotonic clock (medians, ms): from the
    /// client's send stamp to the simulator having parsed the request, and from the
    /// simulator's first send to the client's timestamp of it.
    request_leg_p50: f64,
    response_leg_p50: f64,
    response_leg_p99: f64,
    /// How late the simulator's first sends were against the configured TTFT (median, ms).
    sim_late_p50: f64,
    /// The client's TTFT error (ms, p50 and p99): writing the request (stamp to write
    /// returned) plus the response leg; None where the client does not report its
    /// write (reqwest). What remains of the request leg is the server reading the
    /// request, which is part of the true TTFT whatever the client.
    client_own: Option<(f64, f64)>,
    server_read_p50: f64,
}

fn errors_vs_emitted(f: &Figures, ttft_configured: f64) -> Option<VsEmitted> {
    let (mut itl, mut late, mut req_leg, mut resp_leg) = (vec![], vec![], vec![], vec![]);
    let (mut own, mut server_read) = (vec![], vec![]);
    for (r, e) in f.records.iter().zip(&f.emitted) {
        let e = e.as_ref()?;
        if !r.sample.success || e.chunks.is_empty() {
            continue;
        }
        let c = &e.chunks;
        late.push((c[0] - ttft_configured) * 1e3);
        let sent_ns = f.started_ns + r.start * 1e9;
        let arrived_ns = e.arrived_ns as f64;
        req_leg.push((arrived_ns - sent_ns) / 1e6);
        let response_leg = (sent_ns + r.sample.ttft * 1e9 - (arrived_ns + c[0] * 1e9)) / 1e6;
        resp_leg.push(response_leg);
        if let Some(w) = r.written {
            let written_ns = f.started_ns + w * 1e9;
            own.push((written_ns - sent_ns) / 1e6 + response_leg);
            server_read.push((arrived_ns - written_ns) / 1e6);
        }
        for (k, got) in r.sample.itl.iter().enumerate() {
            if let (Some(a), Some(b)) = (c.get(k), c.get(k + 1)) {
                itl.push((got - (b - a)).abs() * 1e3);
            }
        }
    }
    for v in [
        &mut itl,
        &mut late,
        &mut req_leg,
        &mut resp_leg,
        &mut own,
        &mut server_read,
    ] {
        v.sort_by(f64::total_cmp);
    }
    Some(VsEmitted {
        itl_p50: percentile(&itl, 50.0),
        itl_p99: percentile(&itl, 99.0),
        request_leg_p50: percentile(&req_leg, 50.0),
        response_leg_p50: percentile(&resp_leg, 50.0),
        response_leg_p99: percentile(&resp_leg, 99.0),
        sim_late_p50: percentile(&late, 50.0),
        client_own: (!own.is_empty()).then(|| (percentile(&own, 50.0), percentile(&own, 99.0))),
        server_read_p50: percentile(&server_read, 50.0),
    })
}

fn errors_ms(
    records: &[benchplan::metrics::record::RequestRecord],
    ttft_truth: f64,
    itl_truth: f64,
) -> (f64, f64, f64) {
    let mut ttft: Vec<f64> = records
        .iter()
        .map(|r| (r.sample.ttft - ttft_truth).abs() * 1e3)
        .collect();
    let mut itl: Vec<f64> = records
        .iter()
        .flat_map(|r| r.sample.itl.iter().map(|g| (g - itl_truth).abs() * 1e3))
        .collect();
    ttft.sort_by(f64::total_cmp);
    itl.sort_by(f64::total_cmp);
    (
        percentile(&ttft, 50.0),
        percentile(&itl, 50.0),
        percentile(&itl, 99.0),
    )
}

/// One scenario, in this process: (sim arguments, streams, requests, output tokens, rate).
/// `BENCH_OUTPUT=N` overrides the output tokens per request (to separate per-request
/// costs from per-chunk ones).
fn scenario(name: &str) -> Option<(&'static [&'static str], usize, usize, u64, f64)> {
    let (sim_args, streams, requests, output, rate) = preset_scenario(name)?;
    let output = std::env::var("BENCH_OUTPUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(output);
    Some((sim_args, streams, requests, output, rate))
}

fn preset_scenario(name: &str) -> Option<(&'static [&'static str], usize, usize, u64, f64)> {
    const FAST: &[&str] = &["--preset", "fast"];
    const PACED: &[&str] = &[
        "--preset",
        "ground-truth",
        "--set",
        "max_num_seqs=2000",
        "--set",
        "max_waiting_queue=10000",
        "--record-timings",
    ];
    Some(match name {
        "fast-1" => (FAST, 1, 20, 10_000, f64::INFINITY),
        "fast-100" => (FAST, 100, 400, 1000, f64::INFINITY),
        "fast-500" => (FAST, 500, 1000, 400, f64::INFINITY),
        "fast-1000" => (FAST, 1000, 1000, 400, f64::INFINITY),
        "poisson-1000" => (FAST, 1000, 5000, 4, 1000.0),
        "paced-1" => (PACED, 1, 20, 100, f64::INFINITY),
        "paced-100" => (PACED, 100, 100, 100, f64::INFINITY),
        "paced-500" => (PACED, 500, 500, 100, f64::INFINITY),
        "paced-1000" => (PACED, 1000, 1000, 60, f64::INFINITY),
        _ => return None,
    })
}

/// CPU, wall time and steal of a floor row, from its start.
struct FloorMeter {
    cpu: (f64, f64),
    steal: (u64, u64),
    start: std::time::Instant,
}

impl FloorMeter {
    fn start() -> FloorMeter {
        FloorMeter {
            cpu: own_cpu(),
            steal: steal_and_total_ticks(),
            start: std::time::Instant::now(),
        }
    }

    /// Prints the row's figures: what `streams` streams of `output` chunks cost.
    fn report(self, streams: usize, output: u64, reads: u64, bytes: u64, frames: u64) {
        let wall = self.start.elapsed().as_secs_f64();
        let (user1, sys1) = own_cpu();
        let steal = steal_percent(self.steal, steal_and_total_ticks());
        let cpu = user1 + sys1 - self.cpu.0 - self.cpu.1;
        let chunks = streams as u64 * output;
        println!(
            "{chunks} chunks ({frames} SSE frames, {reads} reads, {:.1} KiB a stream) in {wall:.1} s, CPU {:.2} us/chunk ({:.2} user); host steal {steal:.0}%",
            bytes as f64 / 1024.0 / streams as f64,
            cpu * 1e6 / chunks as f64,
            (user1 - self.cpu.0) * 1e6 / chunks as f64
        );
    }
}

/// The floor under any client on this machine: the same streams read by the least a
/// client can do (one epoll loop, one plain `read` per readiness, no HTTP or SSE
/// parsing, no timestamps, no runtime). What it costs per chunk is the kernel's price
/// of a loopback TCP stream (wake-ups, reads, ACKs, and the delivery of those ACKs to
/// the server's socket, which loopback runs in the client's context).
fn floor(sim: &SimProcess, streams: usize, output: u64) {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    let request = floor_request(sim, output);
    // Measured from before the connects to after the closes: a client opens and closes
    // its connections inside the run too, so the floor pays for the same sockets.
    let meter = FloorMeter::start();
    let mut socks: Vec<std::net::TcpStream> = (0..streams)
        .map(|_| std::net::TcpStream::connect(sim.host_port()).unwrap())
        .collect();
    // SAFETY (this and the other libc calls below): epoll calls on descriptors this
    // function owns, with buffers it owns.
    let ep = unsafe { libc::epoll_create1(0) };
    for (i, s) in socks.iter().enumerate() {
        s.set_nodelay(true).unwrap();
        s.set_nonblocking(true).unwrap();
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET | libc::EPOLLRDHUP) as u32,
            u64: i as u64,
        };
        unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, s.as_raw_fd(), &mut ev) };
    }
    for s in &mut socks {
        s.write_all(request.as_bytes()).unwrap();
    }
    let mut open = streams;
    let mut ended = vec![false; streams];
    let (mut reads, mut bytes, mut frames) = (0u64, 0u64, 0u64);
    let mut buf = vec![0u8; 64 * 1024];
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    while open > 0 {
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, -1) };
        for ev in &events[..n.max(0) as usize] {
            // After the server's close, read on to the end of the stream.
            let closing = ev.events & libc::EPOLLRDHUP as u32 != 0;
            let i = ev.u64 as usize;
            if ended[i] {
                continue; // one more edge (the hang-up) after the end was read
            }
            let s = &mut socks[i];
            loop {
                match s.read(&mut buf) {
                    Ok(0) => {
                        ended[i] = true;
                        open -= 1;
                        break;
                    }
                    Ok(k) => {
                        reads += 1;
                        bytes += k as u64;
                        frames += memchr::memmem::find_iter(&buf[..k], b"\n\n").count() as u64;
                        if k < buf.len() && !closing {
                            break; // drained: the next segment brings a new edge
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("{e}"),
                }
            }
        }
    }
    drop(socks);
    meter.report(streams, output, reads, bytes, frames);
    unsafe { libc::close(ep) };
}

/// The request every floor row sends: the paced scenario's, with `Connection: close`.
fn floor_request(sim: &SimProcess, output: u64) -> String {
    let words = vec!["hello"; 16].join(" ");
    let body = format!(
        r#"{{"model":"benchplan-sim","prompt":"{words}","max_tokens":{output},"stream":true,"ignore_eos":true}}"#
    );
    format!(
        "POST /v1/completions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        sim.host_port(),
        body.len()
    )
}

/// The runtime's floor: the same streams read on the current-thread tokio runtime the
/// client uses, one task a stream that waits for readiness and reads until the socket
/// is drained (a short read clears the readiness, as the client's reads do), with no
/// HTTP or SSE parsing, no timestamps and no timers. What this row spends above the
/// epoll floor is tokio's price of a wake-up on this machine (its driver's park and
/// poll, the task's schedule and poll); what the client spends above this row is its
/// own work.
fn tokio_floor(sim: &SimProcess, streams: usize, output: u64) {
    use std::os::fd::AsRawFd;
    use tokio::io::{AsyncWriteExt, Interest};
    let request = std::sync::Arc::new(floor_request(sim, output));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let meter = FloorMeter::start();
    let (reads, bytes, frames) = rt.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..streams {
            let (addr, request) = (sim.host_port(), request.clone());
            tasks.spawn(async move {
                let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                s.set_nodelay(true).unwrap();
                s.write_all(request.as_bytes()).await.unwrap();
                let mut buf = vec![0u8; 64 * 1024];
                let (mut reads, mut bytes, mut frames) = (0u64, 0u64, 0u64);
                loop {
                    s.readable().await.unwrap();
                    let mut got = None;
                    let r = s.try_io(Interest::READABLE, || {
                        // SAFETY: a read into a buffer this task owns.
                        let k = unsafe {
                            libc::read(s.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len())
                        };
                        if k < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        let k = k as usize;
                        if k > 0 && k < buf.len() {
                            got = Some(k);
                            return Err(std::io::ErrorKind::WouldBlock.into());
                        }
                        Ok(k)
                    });
                    let k = match (r, got) {
                        (_, Some(k)) | (Ok(k), None) => k,
                        (Err(e), None) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                        (Err(e), None) => panic!("{e}"),
                    };
                    if k == 0 {
                        return (reads, bytes, frames);
                    }
                    reads += 1;
                    bytes += k as u64;
                    frames += memchr::memmem::find_iter(&buf[..k], b"\n\n").count() as u64;
                }
            });
        }
        let mut total = (0, 0, 0);
        while let Some(r) = tasks.join_next().await {
            let (a, b, c) = r.unwrap();
            total = (total.0 + a, total.1 + b, total.2 + c);
        }
        total
    });
    meter.report(streams, output, reads, bytes, frames);
}

/// The user-space read path alone, no network: vLLM-shaped SSE frames (completions and
/// chat, one frame per read as on a paced stream) through the SSE parser and the chunk
/// reader, against the same frames read with serde's full parse. Deterministic where
/// the stream rows move with the host's scheduling, so it shows what a parsing change
/// buys on its own.
fn parse_row() {
    use benchplan::client::chunk::{self, Api};
    use benchplan::client::sse::SseParser;
    let frames: Vec<(Api, Vec<u8>)> = (0..1000)
        .map(|i| {
            if i % 2 == 0 {
                (Api::Completions, format!(
                    "data: {{\"id\":\"cmpl-{i}\",\"object\":\"text_completion\",\"created\":1733300000,\"model\":\"Qwen/Qwen2.5-0.5B-Instruct\",\"choices\":[{{\"index\":0,\"text\":\" tok{i}\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}}],\"usage\":null}}\n\n"
                ))
            } else {
                (Api::Chat, format!(
                    "data: {{\"id\":\"chatcmpl-{i}\",\"object\":\"chat.completion.chunk\",\"created\":1733300000,\"model\":\"Qwen/Qwen2.5-0.5B-Instruct\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" tok{i}\"}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n"
                ))
            }
        })
        .map(|(api, f)| (api, f.into_bytes()))
        .collect();
    let rounds = 2000;
    let time = |full: bool| {
        let mut parser = SseParser::new();
        let mut text_bytes = 0usize;
        let t = std::time::Instant::now();
        for _ in 0..rounds {
            for (api, f) in &frames {
                parser
                    .feed(f, &mut |ev| {
                        let c = if full {
                            chunk::full_parse(ev.data)
                        } else {
                            chunk::parse(ev.data)
                        };
                        text_bytes += c.unwrap().token(*api).map_or(0, str::len);
                    })
                    .unwrap();
            }
        }
        let ns = t.elapsed().as_secs_f64() * 1e9 / (rounds * frames.len()) as f64;
        (ns, std::hint::black_box(text_bytes))
    };
    let (serde_ns, a) = time(true);
    let (ns, b) = time(false);
    assert_eq!(a, b, "both readers read the same text");
    println!(
        "{:<17} SSE framing + chunk read {ns:.0} ns/chunk (with serde's full parse instead: {serde_ns:.0} ns/chunk)",
        "parse"
    );
}

fn run_one(name: &str) {
    if name == "parse" {
        return parse_row();
    }
    // `<row>@pinned` gives the client (or a floor row's reader) CPU 0 and the simulator
    // CPU 1, as when the client runs on a machine of its own.
    let (base, pinned) = match name.strip_suffix("@pinned") {
        Some(b) => (b, true),
        None => (name, false),
    };
    if pinned {
        support::pin_to_cpu(0);
    }
    let sim_cpu = pinned.then_some(1);
    // `<scenario>-tokio` reads them with bare tokio tasks (the runtime's floor).
    if let Some(scenario_name) = base.strip_suffix("-tokio") {
        let (sim_args, streams, _, output, _) = scenario(scenario_name).expect("a known scenario");
        let sim = SimProcess::start_on(sim_args, sim_cpu);
        print!("{name:<17} bare tokio reader: ");
        return tokio_floor(&sim, streams, output);
    }
    // `<scenario>-floor` reads the scenario's streams with a bare epoll loop instead.
    if let Some(scenario_name) = base.strip_suffix("-floor") {
        let (sim_args, streams, _, output, _) = scenario(scenario_name).expect("a known scenario");
        let sim = SimProcess::start_on(sim_args, sim_cpu);
        print!("{name:<17} bare epoll reader: ");
        return floor(&sim, streams, output);
    }
    // `<scenario>+reqwest` runs the scenario through reqwest instead of the native client.
    let (base, native) = match base.strip_suffix("+reqwest") {
        Some(b) => (b, false),
        None => (base, true),
    };
    let (sim_args, streams, requests, output, rate) = scenario(base).expect("a known scenario");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let sim = SimProcess::start_on(sim_args, sim_cpu);
        let f = measure(&sim, streams, requests, output, rate, native).await;
        let rss = f.rss;
        if name.starts_with("poisson") {
            let lag = f.summary.schedule_lag.as_ref().unwrap();
            println!(
                "{name:<17} achieved {:.1} req/s ({:+.2}% of {rate}); schedule lag p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms; peak RSS {rss:.0} MiB; failed {}; host steal {:.0}%",
                f.summary.request_throughput,
                (f.summary.request_throughput / rate - 1.0) * 100.0,
                lag.percentiles[0].1,
                lag.percentiles[1].1,
                lag.percentiles[2].1,
                f.summary.failed,
                f.steal
            );
        } else if name.starts_with("fast") {
            println!(
                "{name:<17} {:>8} chunks, {:>9.0} chunks/s, client CPU {:.2} us/chunk ({:.2} user); peak RSS {rss:.0} MiB; failed {}; host steal {:.0}%",
                f.chunks,
                f.chunks as f64 / f.wall,
                f.cpu * 1e6 / f.chunks as f64,
                f.cpu_user * 1e6 / f.chunks as f64,
                f.summary.failed,
                f.steal
            );
        } else {
            let (ttft50, itl50, itl99) = errors_ms(&f.records, 0.020, 0.010);
            println!(
                "{name:<17} {:>7} chunks, {:>7.0} chunks/s, client CPU {:.2} us/chunk ({:.2} user); peak RSS {rss:.0} MiB; failed {}; host steal {:.0}%",
                f.chunks,
                f.chunks as f64 / f.wall,
                f.cpu * 1e6 / f.chunks as f64,
                f.cpu_user * 1e6 / f.chunks as f64,
                f.summary.failed,
                f.steal
            );
            println!(
                "{:<17} vs configured 20/10 ms: |TTFT error| p50 {ttft50:.3} ms; |ITL error| p50 {itl50:.3} ms, p99 {itl99:.3} ms",
                ""
            );
            if let Some(v) = errors_vs_emitted(&f, 0.020) {
                let ttft = match v.client_own {
                    Some((p50, p99)) => format!(
                        "TTFT error (request write + response leg) p50 {p50:.3} ms, p99 {p99:.3} ms"
                    ),
                    None => "TTFT error not split (reqwest does not report its write)".into(),
                };
                println!(
                    "{:<17} vs the simulator's actual sends: {ttft}; |ITL error| p50 {:.3} ms, p99 {:.3} ms",
                    "", v.itl_p50, v.itl_p99
                );
                let reading = match v.client_own {
                    Some(_) => format!(", of which the simulator reading it p50 {:.3} ms", v.server_read_p50),
                    None => String::new(),
                };
                println!(
                    "{:<17} TTFT legs (shared clock): request (client stamp -> simulator parsed) p50 {:.3} ms{reading}; response (simulator sent -> client stamp) p50 {:.3} ms, p99 {:.3} ms; simulator's first send late by p50 {:.3} ms",
                    "",
                    v.request_leg_p50,
                    v.response_leg_p50,
                    v.response_leg_p99,
                    v.sim_late_p50
                );
            }
        }
    });
}

fn main() {
    // Each scenario runs in a fresh process, so its peak RSS is its own.
    if let Ok(name) = std::env::var("BENCH_SCENARIO") {
        return run_one(&name);
    }
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    for name in [
        "parse",
        "fast-1",
        "fast-100",
        "fast-500",
        "fast-1000",
        "fast-500+reqwest",
        "poisson-1000",
        "paced-1",
        "paced-100",
        "paced-500",
        "paced-1000",
        "paced-500+reqwest",
        "paced-500@pinned",
        "paced-1000@pinned",
        "paced-1-floor",
        "paced-100-floor",
        "paced-500-floor",
        "paced-1000-floor",
        "paced-100-tokio",
        "paced-500-tokio",
        "paced-1000-tokio",
    ] {
        if !only.is_empty() && !name.starts_with(&only) {
            continue;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .env("BENCH_SCENARIO", name)
            .output()
            .unwrap();
        print!("{}", String::from_utf8_lossy(&out.stdout));
        if !out.status.success() {
            eprintln!("{name} failed: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}
