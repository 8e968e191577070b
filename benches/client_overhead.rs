//! The load generator's own cost and accuracy, against `benchplan sim` in a separate
//! process. Run: `cargo bench --bench client_overhead`. Prints figures; asserts nothing.
//!
//! - fast preset (zero latency, many chunks per read): client CPU per streamed chunk
//!   and chunks per second, at 1, 100, 500 and 1,000 concurrent streams;
//! - paced chunks (ITL 10 ms, prefill 20 ms, about one read per chunk): CPU per chunk
//!   and the TTFT and ITL error against the simulator's configured latencies;
//! - a Poisson schedule at 1,000 req/s: achieved rate and schedule lag;
//! - peak RSS of this (client) process.
//!
//! CPU is read from /proc/self/stat around the measured run only (the dataset is built
//! before), so start-up and prompt building are not counted.

mod support;

use std::sync::Arc;

use benchplan::client::backend::RequestInput;
use benchplan::load::run::{RunOptions, run_case};
use benchplan::load::target::{resolve, target};
use benchplan::metrics::summary::summarize;
use benchplan::plan::dataset::RandomDataset;
use benchplan::plan::units::Rate;
use benchplan::plan::{Backend, CaseParams, Dataset, Metric, Service};
use support::{SimProcess, cpu_seconds_of, peak_rss_mib, percentile};

struct Figures {
    chunks: u64,
    wall: f64,
    cpu: f64,
    summary: benchplan::metrics::summary::Summary,
    records: Vec<benchplan::metrics::record::RequestRecord>,
}

async fn measure(
    sim: &SimProcess,
    streams: usize,
    requests: usize,
    output: u64,
    rate: f64,
) -> Figures {
    let svc = Service {
        base_url: Some(sim.base_url.clone()),
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
    let t = target(&resolved, &svc, &params);
    let me = std::process::id();
    let cpu0 = cpu_seconds_of(me);
    let run = run_case(t, params.clone(), inputs, &RunOptions::default())
        .await
        .unwrap();
    let cpu = cpu_seconds_of(me) - cpu0;
    let chunks = run
        .records
        .iter()
        .map(|r| u64::from(r.outcome.chunks))
        .sum();
    let summary = summarize(&run.records, run.duration, &params, None);
    Figures {
        chunks,
        wall: run.duration,
        cpu,
        summary,
        records: run.records,
    }
}

fn errors_ms(
    records: &[benchplan::metrics::record::RequestRecord],
    ttft_truth: f64,
    itl_truth: f64,
) -> (f64, f64, f64) {
    let mut ttft: Vec<f64> = records
        .iter()
        .map(|r| (r.outcome.ttft - ttft_truth).abs() * 1e3)
        .collect();
    let mut itl: Vec<f64> = records
        .iter()
        .flat_map(|r| r.outcome.itl.iter().map(|g| (g - itl_truth).abs() * 1e3))
        .collect();
    ttft.sort_by(f64::total_cmp);
    itl.sort_by(f64::total_cmp);
    (
        percentile(&ttft, 50.0),
        percentile(&itl, 50.0),
        percentile(&itl, 99.0),
    )
}

fn main() {
    let rt = if std::env::var_os("BENCH_MT").is_some() {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    rt.block_on(async {
        if only == "paced500" {
            let sim = SimProcess::start(&["--preset", "ground-truth", "--set", "max_num_seqs=2000"]);
            let f = measure(&sim, 500, 2000, 100, f64::INFINITY).await;
            let (ttft50, itl50, itl99) = errors_ms(&f.records, 0.020, 0.010);
            println!("paced 500: {} chunks, CPU {:.2} us/chunk, TTFT err p50 {ttft50:.3} ms, ITL err p50 {itl50:.3} p99 {itl99:.3}", f.chunks, f.cpu * 1e6 / f.chunks as f64);
            return;
        }
        println!("== fast preset (zero latency): client cost per streamed chunk");
        let sim = SimProcess::start(&["--preset", "fast"]);
        for (streams, requests, output) in [(1usize, 20usize, 10_000u64), (100, 400, 1000), (500, 1000, 400), (1000, 1000, 400)] {
            let f = measure(&sim, streams, requests, output, f64::INFINITY).await;
            println!(
                "{streams:>5} streams: {:>8} chunks in {:.2} s = {:>9.0} chunks/s; client CPU {:.2} us/chunk; failed {}",
                f.chunks,
                f.wall,
                f.chunks as f64 / f.wall,
                f.cpu * 1e6 / f.chunks as f64,
                f.summary.failed
            );
        }
        println!("== Poisson arrivals at 1000 req/s against the fast preset");
        let f = measure(&sim, 1000, 5000, 4, 1000.0).await;
        let lag = f.summary.schedule_lag.as_ref().unwrap();
        println!(
            "achieved {:.1} req/s ({:+.2}% of 1000); schedule lag p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms; failed {}",
            f.summary.request_throughput,
            (f.summary.request_throughput / 1000.0 - 1.0) * 100.0,
            lag.percentiles[0].1,
            lag.percentiles[1].1,
            lag.percentiles[2].1,
            f.summary.failed
        );
        drop(sim);

        println!("== paced chunks (prefill 20 ms, ITL 10 ms): cost and accuracy against the injected latencies");
        let sim = SimProcess::start(&["--preset", "ground-truth", "--set", "max_num_seqs=2000", "--set", "max_waiting_queue=10000"]);
        for (streams, output) in [(1usize, 100u64), (100, 100), (500, 100), (1000, 60)] {
            let f = measure(&sim, streams, streams.max(20), output, f64::INFINITY).await;
            let (ttft50, itl50, itl99) = errors_ms(&f.records, 0.020, 0.010);
            println!(
                "{streams:>5} streams: {:>7} chunks, {:>7.0} chunks/s, client CPU {:.2} us/chunk; |TTFT error| p50 {ttft50:.3} ms; |ITL error| p50 {itl50:.3} ms, p99 {itl99:.3} ms; failed {}",
                f.chunks,
                f.chunks as f64 / f.wall,
                f.cpu * 1e6 / f.chunks as f64,
                f.summary.failed
            );
        }
        println!("peak RSS of the client process: {:.1} MiB", peak_rss_mib());
    });
}
