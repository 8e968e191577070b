//! The simulator's latencies measured at the client against the configured ones.
//! Tolerances come from measurement on the 2-core CI machine: the engine thread wakes
//! within ~0.1 ms of a deadline; the rest is loopback and scheduling noise. Measured
//! mean TTFT error: 0.5-0.8 ms idle, up to 2.4 ms while a compiler loads both cores,
//! hence 3 ms; the mean ITL stays within 0.1 ms even then.

use std::time::{Duration, Instant};

use benchplan::plan::sim::Preset;
use benchplan::sim::{SimConfig, Simulator};
use serde_json::json;

/// TTFT and the arrival time of every chunk after the first, for one streamed request.
async fn timed(
    c: &reqwest::Client,
    url: &str,
    max_tokens: u64,
) -> (Duration, Vec<Duration>, Duration) {
    let start = Instant::now();
    let mut resp = c
        .post(url)
        .header("content-type", "application/json")
        .body(json!({"prompt": "a b c", "max_tokens": max_tokens, "stream": true, "ignore_eos": true}).to_string())
        .send()
        .await
        .unwrap();
    let mut times = Vec::new();
    while let Some(bytes) = resp.chunk().await.unwrap() {
        let at = start.elapsed();
        let frames = std::str::from_utf8(&bytes)
            .unwrap()
            .matches("\"text\"")
            .count();
        times.extend(std::iter::repeat_n(at, frames));
    }
    assert_eq!(times.len() as u64, max_tokens);
    let gaps = times.windows(2).map(|w| w[1] - w[0]).collect();
    (times[0], gaps, *times.last().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ground_truth_ttft_and_itl_match_the_configuration() {
    crate::support::timing_check(3, ground_truth_once).await;
}

async fn ground_truth_once() -> Result<(), String> {
    // ground-truth: prefill 20 ms, ITL 10 ms, no jitter, no load factor.
    let sim = Simulator::start(SimConfig::preset(Preset::GroundTruth))
        .await
        .unwrap();
    let c = benchplan::client::http::build_client(false, None).unwrap();
    let url = format!("{}/v1/completions", sim.base_url);
    timed(&c, &url, 2).await; // connection set-up is not part of the measurement
    let mut ttfts = Vec::new();
    let mut gaps = Vec::new();
    let mut on_time = 0;
    for _ in 0..5 {
        let (ttft, g, _) = timed(&c, &url, 20).await;
        ttfts.push(ttft.as_secs_f64() * 1e3);
        let g: Vec<f64> = g.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        on_time += chunks_on_their_deadlines(&g);
        gaps.extend(g);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    // TTFT: the median of five, so one request the OS delayed cannot decide it.
    ttfts.sort_by(f64::total_cmp);
    let (ttft, itl) = (ttfts[2], mean(&gaps));
    if (ttft - 20.0).abs() >= 3.0 {
        return Err(format!(
            "median TTFT {ttft:.3} ms, configured 20 ms: {ttfts:?}"
        ));
    }
    if (itl - 10.0).abs() >= 0.5 {
        return Err(format!("mean ITL {itl:.3} ms, configured 10 ms"));
    }
    // Each chunk goes out on its own deadline, 10 ms after the one before. A chunk the
    // OS delays on a busy machine makes one long gap and one short one (the next chunk
    // is still on time), so chunks are judged by their place on the request's schedule,
    // not by gaps: with two CPU hogs running, up to 12% of chunks were 2-7 ms late
    // (and 23% of gaps off), none when idle.
    if on_time * 10 < gaps.len() * 8 {
        return Err(format!(
            "{on_time} of {} chunks within 2 ms of their place on the 10 ms schedule: {gaps:?}",
            gaps.len()
        ));
    }
    Ok(())
}

/// How many chunks after the first sit within 2 ms of their place on a 10 ms grid,
/// the grid laid where most chunks sit (the median offset).
fn chunks_on_their_deadlines(gaps: &[f64]) -> usize {
    let mut at = 0.0;
    let offsets: Vec<f64> = gaps
        .iter()
        .enumerate()
        .map(|(k, g)| {
            at += g;
            at - 10.0 * (k + 1) as f64
        })
        .collect();
    let mut sorted = offsets.clone();
    sorted.sort_by(f64::total_cmp);
    let base = sorted[sorted.len() / 2];
    offsets.iter().filter(|o| (**o - base).abs() < 2.0).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_max_num_seqs_wait_for_a_slot() {
    // 4 slots, 8 requests at once; each holds its slot for 20 + 9 × 10 = 110 ms.
    let config = SimConfig {
        max_num_seqs: 4,
        ..SimConfig::preset(Preset::GroundTruth)
    };
    let sim = Simulator::start(config).await.unwrap();
    let c = benchplan::client::http::build_client(false, None).unwrap();
    let url = format!("{}/v1/completions", sim.base_url);
    // Warm 8 connections so set-up does not skew the order.
    let warm: Vec<_> = (0..8)
        .map(|_| {
            tokio::spawn({
                let (c, url) = (c.clone(), url.clone());
                async move { timed(&c, &url, 1).await }
            })
        })
        .collect();
    for w in warm {
        w.await.unwrap();
    }
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (c, url) = (c.clone(), url.clone());
            tokio::spawn(async move { timed(&c, &url, 10).await })
        })
        .collect();
    let mut ttfts = Vec::new();
    for t in tasks {
        ttfts.push(t.await.unwrap().0.as_secs_f64() * 1e3);
    }
    ttfts.sort_by(f64::total_cmp);
    for t in &ttfts[..4] {
        assert!(
            (*t - 20.0).abs() < 8.0,
            "the first four start at once: {ttfts:?}"
        );
    }
    for t in &ttfts[4..] {
        assert!(
            (*t - 130.0).abs() < 12.0,
            "the last four wait 110 ms for a slot, then prefill: {ttfts:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throughput_saturates_where_littles_law_says() {
    crate::support::timing_check(3, throughput_once).await;
}

async fn throughput_once() -> Result<(), String> {
    // Little's law: throughput = slots / time in slot = 4 / (0.020 + 4 × 0.005) = 100 req/s.
    let config = SimConfig {
        max_num_seqs: 4,
        prefill_overhead: 0.020,
        itl: 0.005,
        ..SimConfig::preset(Preset::GroundTruth)
    };
    let sim = Simulator::start(config).await.unwrap();
    let c = benchplan::client::http::build_client(false, None).unwrap();
    let url = format!("{}/v1/completions", sim.base_url);
    let n = 60;
    let start = Instant::now();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (c, url) = (c.clone(), url.clone());
            tokio::spawn(async move { timed(&c, &url, 5).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    if (rate / 100.0 - 1.0).abs() >= 0.06 {
        return Err(format!("measured {rate:.1} req/s, the model predicts 100"));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_running_and_waiting_under_load() {
    let config = SimConfig {
        max_num_seqs: 4,
        itl: 0.05,
        ..SimConfig::preset(Preset::Fast)
    };
    let sim = Simulator::start(config).await.unwrap();
    let c = benchplan::client::http::build_client(false, None).unwrap();
    let url = format!("{}/v1/completions", sim.base_url);
    let tasks: Vec<_> = (0..6)
        .map(|_| {
            let (c, url) = (c.clone(), url.clone());
            tokio::spawn(async move { timed(&c, &url, 20).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let text = scrape(&c, &sim.base_url).await;
    let value = |name: &str| metric(&text, name);
    assert_eq!(value("vllm:num_requests_running{"), 4.0, "{text}");
    assert_eq!(value("vllm:num_requests_waiting{"), 2.0, "{text}");
    for t in tasks {
        t.await.unwrap();
    }
    let text = scrape(&c, &sim.base_url).await;
    let value = |name: &str| metric(&text, name);
    assert_eq!(value("vllm:num_requests_running{"), 0.0);
    assert_eq!(value("vllm:generation_tokens_total{"), 120.0);
    assert_eq!(value("vllm:prompt_tokens_total{"), 18.0);
    assert_eq!(value("vllm:time_to_first_token_seconds_count{"), 6.0);
}

async fn scrape(c: &reqwest::Client, base: &str) -> String {
    c.get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The value of the first series whose line starts with `name`.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_timings_are_the_actual_sends_and_match_what_the_client_saw() {
    use benchplan::client::request::{Target, send};
    let mut config = SimConfig::preset(Preset::GroundTruth);
    config.record_timings = true;
    let sim = Simulator::start(config).await.unwrap();
    let c = benchplan::client::http::build_client(false, None).unwrap();
    let url = format!("{}/v1/completions", sim.base_url);
    let target = Target::new(
        url,
        benchplan::base_url::BaseUrl::parse(&sim.base_url).unwrap(),
        benchplan::plan::Backend::Openai,
        "benchplan-sim".into(),
        Default::default(),
        c.clone(),
        benchplan::client::outcome::Limits {
            total: Duration::from_secs(10),
            ..Default::default()
        },
    );
    let body = json!({"prompt": "a b c", "max_tokens": 6, "stream": true, "ignore_eos": true})
        .to_string()
        .into_bytes();
    let mut outcomes = Vec::new();
    for i in 0..5 {
        outcomes.push(send(&target, body.clone(), Some(&format!("t-{i}"))).await);
    }
    let bytes = c
        .get(format!("{}/sim/timings", sim.base_url))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let records = v["requests"].as_array().unwrap();
    assert_eq!(records.len(), 5, "{v}");
    let (mut extra, mut response_leg) = (Vec::new(), Vec::new());
    for (i, o) in outcomes.iter().enumerate() {
        let r = records
            .iter()
            .find(|r| r["request_id"] == format!("t-{i}"))
            .expect("a record per request id");
        let us: Vec<f64> = r["chunks_us"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap() / 1e3)
            .collect();
        // One time per token chunk; never before it was due (20 ms, then every 10 ms).
        assert_eq!(us.len(), 6);
        for (k, t) in us.iter().enumerate() {
            assert!(*t >= 20.0 + 10.0 * k as f64 - 0.05, "chunk {k} at {t} ms");
        }
        // What the client measured is what was sent plus the way there and back, never
        // less: the client's clock starts before the arrival and stops after the send.
        let ttft = o.sample.ttft * 1e3;
        assert!(
            ttft >= us[0],
            "client TTFT {ttft} ms, simulator sent at {} ms",
            us[0]
        );
        extra.push(ttft - us[0]);
        // The same on the shared monotonic clock: the client's first-chunk stamp is after
        // the simulator's send (0.05 ms for the two clock reads of the conversion).
        let arrived_ns = r["arrived_monotonic_ns"].as_u64().unwrap() as f64;
        let sent_ns = benchplan::clock::monotonic_ns(o.sent.unwrap()) as f64;
        assert!(arrived_ns >= sent_ns - 5e4, "arrived before it was sent");
        let leg = (sent_ns + o.sample.ttft * 1e9 - (arrived_ns + us[0] * 1e6)) / 1e6;
        assert!(
            leg >= -0.05,
            "client stamped the first chunk {leg} ms before it was sent"
        );
        response_leg.push(leg);
    }
    // "A little": a typical request (the median of five; one machine stall in the
    // simulator between recording and writing a chunk must not decide it).
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (extra, leg) = (median(&mut extra), median(&mut response_leg));
    assert!(
        extra < 5.0,
        "client TTFT exceeds the simulator's send by {extra} ms (median)"
    );
    assert!(
        leg < 5.0,
        "simulator send -> client stamp {leg} ms (median)"
    );
    // Without --record-timings the endpoint says how to turn it on.
    let plain = Simulator::start(SimConfig::preset(Preset::Fast))
        .await
        .unwrap();
    let resp = c
        .get(format!("{}/sim/timings", plain.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    assert!(resp.text().await.unwrap().contains("--record-timings"));
}

/// `warmup_requests` and `warmup_factor`: the first admitted requests are slower by the
/// factor in TTFT and ITL, the ones after at the configured latencies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_requests_warm_up_slower_by_the_factor() {
    crate::support::timing_check(3, warmup_once).await;
}

async fn warmup_once() -> Result<(), String> {
    // ground-truth: prefill 20 ms, ITL 10 ms; the first 3 requests 3x slower.
    let sim = Simulator::start(SimConfig {
        warmup_requests: 3,
        warmup_factor: 3.0,
        ..SimConfig::preset(Preset::GroundTruth)
    })
    .await
    .unwrap();
    let c = benchplan::client::http::build_client(false, None).unwrap();
    let url = format!("{}/v1/completions", sim.base_url);
    let mut rows = Vec::new();
    for _ in 0..6 {
        let (ttft, gaps, _) = timed(&c, &url, 5).await;
        let itl = gaps.iter().map(Duration::as_secs_f64).sum::<f64>() / gaps.len() as f64;
        rows.push((ttft.as_secs_f64() * 1e3, itl * 1e3));
    }
    // The first request also sets up the connection: a few ms more than the engine's.
    for (i, (ttft, itl)) in rows.iter().enumerate() {
        let (want_ttft, want_itl) = if i < 3 { (60.0, 30.0) } else { (20.0, 10.0) };
        let slack = if i == 0 { 10.0 } else { 4.0 };
        if (ttft - want_ttft).abs() > slack || (itl - want_itl).abs() > 1.0 {
            return Err(format!(
                "request {i}: TTFT {ttft:.1} ms, ITL {itl:.1} ms; want {want_ttft}, {want_itl}: {rows:?}"
            ));
        }
    }
    Ok(())
}
