//! How fast the simulator streams, and how well it keeps its ITL under load.
//! Run: `cargo bench --bench sim_throughput`. Prints figures; asserts nothing about time.
//!
//! The simulator runs as `benchplan sim` in its own process; the load comes from a
//! deliberately minimal client (raw HTTP/1.1 over tokio TCP, counting SSE frames),
//! so the figures are the simulator's, not a client library's.

mod support;

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use support::{SimProcess, percentile};

/// Sends one streamed completion on a fresh connection and returns each frame's arrival time.
async fn stream(host: &str, max_tokens: u64) -> Vec<Instant> {
    let body = format!(
        r#"{{"prompt":"a b c d","max_tokens":{max_tokens},"ignore_eos":true,"stream":true}}"#
    );
    let req = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(host).await.unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 256 * 1024];
    let mut times = Vec::with_capacity(max_tokens as usize);
    let mut tail: Vec<u8> = Vec::new();
    loop {
        let n = s.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        let now = Instant::now();
        tail.extend_from_slice(&buf[..n]);
        // Count `"text":` occurrences: one per token chunk.
        let mut start = 0;
        while let Some(i) = find(&tail[start..], b"\"text\":") {
            times.push(now);
            start += i + 7;
        }
        tail.drain(..start.max(tail.len().saturating_sub(8)).min(tail.len()));
    }
    times
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

async fn throughput(sim: &SimProcess, streams: usize, tokens: u64) {
    let host = sim.host_port();
    let cpu0 = sim.cpu_seconds();
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..streams)
        .map(|_| {
            tokio::spawn({
                let host = host.clone();
                async move { stream(&host, tokens).await.len() }
            })
        })
        .collect();
    let mut chunks = 0usize;
    for t in tasks {
        chunks += t.await.unwrap();
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = sim.cpu_seconds() - cpu0;
    println!(
        "fast preset, {streams:>4} streams x {tokens} tokens: {chunks} chunks in {wall:.2} s = {:.0} chunks/s; simulator CPU {:.2} us/chunk",
        chunks as f64 / wall,
        cpu * 1e6 / chunks as f64
    );
}

async fn itl_accuracy(streams: usize) {
    let sim = SimProcess::start(&[
        "--preset",
        "ground-truth",
        "--set",
        "max_num_seqs=1024",
        "--set",
        "itl=10ms",
        "--set",
        "prefill_overhead=20ms",
    ]);
    let host = sim.host_port();
    let tasks: Vec<_> = (0..streams)
        .map(|_| {
            tokio::spawn({
                let host = host.clone();
                async move { stream(&host, 100).await }
            })
        })
        .collect();
    let mut gaps = Vec::new();
    for t in tasks {
        let times = t.await.unwrap();
        gaps.extend(times.windows(2).map(|w| (w[1] - w[0]).as_secs_f64() * 1e3));
    }
    gaps.sort_by(f64::total_cmp);
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    let mut errs: Vec<f64> = gaps.iter().map(|g| (g - 10.0).abs()).collect();
    errs.sort_by(f64::total_cmp);
    println!(
        "ITL 10 ms, {streams} concurrent streams: mean {mean:.3} ms, p50 {:.3}, p99 {:.3}; |error| p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        percentile(&gaps, 50.0),
        percentile(&gaps, 99.0),
        percentile(&errs, 50.0),
        percentile(&errs, 99.0),
        errs.last().copied().unwrap_or(0.0)
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let sim = SimProcess::start(&["--preset", "fast"]);
        tokio::time::sleep(Duration::from_millis(100)).await;
        throughput(&sim, 16, 200_000).await;
        throughput(&sim, 64, 50_000).await;
        throughput(&sim, 256, 10_000).await;
        drop(sim);
        itl_accuracy(256).await;
    });
}
