//! The parser and the vocabulary on recorded pages of vLLM, SGLang and TGI
//! (tests/fixtures/metrics), and a case's sums from two pages.

use std::time::Duration;

use super::parse::{Kind, parse};
use super::scrape::{Source, tick};
use super::vocab::{self, COUNTERS, GAUGES, Server};
use super::{GaugeSamples, ServerMetrics};

const VLLM: &str = include_str!("../../tests/fixtures/metrics/vllm.txt");
const SGLANG: &str = include_str!("../../tests/fixtures/metrics/sglang.txt");
const TGI: &str = include_str!("../../tests/fixtures/metrics/tgi.txt");

fn gauge(page: &str, name: &str) -> Option<f64> {
    let s = parse(page).unwrap();
    vocab::gauge(&s, GAUGES.iter().find(|g| g.name == name).unwrap())
}

fn counter(page: &str, name: &str) -> Option<f64> {
    let s = parse(page).unwrap();
    vocab::total(&s, COUNTERS.iter().find(|(n, _)| *n == name).unwrap().1)
}

#[test]
fn vllm_page_maps_to_the_vocabulary_summed_over_engines() {
    let s = parse(VLLM).unwrap();
    assert_eq!(Server::detect(&s), Server::Vllm);
    assert_eq!(gauge(VLLM, "running"), Some(21.0));
    assert_eq!(gauge(VLLM, "waiting"), Some(4.0));
    // A usage fraction per engine: averaged, then in percent.
    assert_eq!(gauge(VLLM, "kv_cache_usage_pct"), Some(37.5));
    assert_eq!(counter(VLLM, "prompt_tokens"), Some(163_840.0));
    assert_eq!(counter(VLLM, "generation_tokens"), Some(38_400.0));
    assert_eq!(counter(VLLM, "prefix_cache_queries"), Some(160_000.0));
    assert_eq!(counter(VLLM, "prefix_cache_hits"), Some(64_000.0));
    assert_eq!(counter(VLLM, "preemptions"), Some(3.0));
    // Every finished_reason label set counts.
    assert_eq!(counter(VLLM, "request_success"), Some(300.0));
    assert_eq!(counter(VLLM, "spec_decode_drafts"), Some(1000.0));
    assert_eq!(counter(VLLM, "spec_decode_draft_tokens"), Some(3000.0));
    assert_eq!(counter(VLLM, "spec_decode_accepted_tokens"), Some(1500.0));
    assert_eq!(vocab::per_position(&s), vec![800.0, 500.0, 200.0]);
}

#[test]
fn label_values_keep_commas_quotes_and_backslashes_and_histograms_give_sum_and_count() {
    let s = parse(VLLM).unwrap();
    let lora = s
        .iter()
        .find(|x| x.name == "vllm:lora_requests_info")
        .unwrap();
    assert_eq!(
        lora.label("running_lora_adapters"),
        Some("sql-lora,chat-lora")
    );
    assert_eq!(
        lora.label("waiting_lora_adapters"),
        Some("say \"hi\", then\\wait")
    );
    let sum = s
        .iter()
        .find(|x| x.name == "vllm:time_to_first_token_seconds_sum")
        .unwrap();
    assert_eq!((sum.kind, sum.value), (Kind::Counter, 12.75));
    let count = s
        .iter()
        .find(|x| x.name == "vllm:time_to_first_token_seconds_count")
        .unwrap();
    assert_eq!(count.value, 200.0);
    // `_created` timestamps are gauges of their own, never mistaken for the counter.
    let created = s
        .iter()
        .find(|x| x.name == "vllm:prompt_tokens_created")
        .unwrap();
    assert_eq!(created.kind, Kind::Gauge);
    // Python's own series are read too (kept raw for unknown servers).
    assert!(
        s.iter()
            .any(|x| x.name == "python_gc_objects_collected_total"
                && x.label("generation") == Some("2")
                && x.value == 412.0)
    );
}

#[test]
fn sglang_page_maps_running_queue_token_usage_and_cached_tokens() {
    let s = parse(SGLANG).unwrap();
    assert_eq!(Server::detect(&s), Server::Sglang);
    assert_eq!(gauge(SGLANG, "running"), Some(28.0));
    assert_eq!(gauge(SGLANG, "waiting"), Some(5.0));
    assert_eq!(
        gauge(SGLANG, "kv_cache_usage_pct"),
        Some(28.000000000000004)
    );
    assert_eq!(counter(SGLANG, "prompt_tokens"), Some(8_128_902.0));
    assert_eq!(counter(SGLANG, "prefix_cache_queries"), Some(8_128_902.0));
    assert_eq!(counter(SGLANG, "prefix_cache_hits"), Some(2_032_000.0));
    assert_eq!(counter(SGLANG, "request_success"), Some(83.0));
    assert_eq!(counter(SGLANG, "preemptions"), None);
}

#[test]
fn tgi_page_maps_batch_queue_and_the_length_histograms() {
    let s = parse(TGI).unwrap();
    assert_eq!(Server::detect(&s), Server::Tgi);
    assert_eq!(gauge(TGI, "running"), Some(16.0));
    assert_eq!(gauge(TGI, "waiting"), Some(7.0));
    assert_eq!(gauge(TGI, "kv_cache_usage_pct"), None);
    assert_eq!(counter(TGI, "request_success"), Some(410.0));
    assert_eq!(counter(TGI, "prompt_tokens"), Some(209_920.0));
    assert_eq!(counter(TGI, "generation_tokens"), Some(52_480.0));
    let q = s
        .iter()
        .find(|x| x.name == "tgi_request_queue_duration_count")
        .unwrap();
    assert_eq!(q.value, 410.0);
}

#[test]
fn an_empty_page_has_no_series_and_a_broken_one_is_an_error() {
    assert_eq!(parse("").unwrap(), vec![]);
    assert_eq!(parse("\n\n").unwrap(), vec![]);
    assert!(parse("this is { not metrics").is_err());
}

fn source() -> Source {
    // reqwest is built without a default TLS provider (the client room installs one).
    let _ = rustls::crypto::ring::default_provider().install_default();
    Source {
        url: "http://127.0.0.1:1/metrics".into(),
        client: reqwest::Client::builder().no_proxy().build().unwrap(),
        headers: Default::default(),
        interval: Duration::from_millis(100),
    }
}

/// `VLLM` with engine 0's counters moved on by one case.
fn vllm_after() -> String {
    let e0 = |name: &str, extra: &str| {
        format!("{name}{{engine=\"0\",{extra}model_name=\"Qwen/Qwen2.5-7B-Instruct\"}}")
    };
    let mut t = VLLM.to_string();
    for (name, extra, old, new) in [
        ("vllm:spec_decode_num_drafts_total", "", "1000.0", "1100.0"),
        (
            "vllm:spec_decode_num_draft_tokens_total",
            "",
            "3000.0",
            "3300.0",
        ),
        (
            "vllm:spec_decode_num_accepted_tokens_total",
            "",
            "1500.0",
            "1700.0",
        ),
        (
            "vllm:prefix_cache_queries_total",
            "",
            "100000.0",
            "110000.0",
        ),
        ("vllm:prefix_cache_hits_total", "", "40000.0", "44000.0"),
        ("vllm:generation_tokens_total", "", "25600.0", "26600.0"),
    ] {
        let line = format!("{} {old}", e0(name, extra));
        assert!(t.contains(&line), "{line}");
        t = t.replace(&line, &format!("{} {new}", e0(name, extra)));
    }
    let per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"Qwen/Qwen2.5-7B-Instruct\",position=";
    for (pos, old, new) in [
        ("0", "800.0", "890.0"),
        ("1", "500.0", "560.0"),
        ("2", "200.0", "250.0"),
    ] {
        let line = format!("{per_pos}\"{pos}\"}} {old}");
        assert!(t.contains(&line), "{line}");
        t = t.replace(&line, &format!("{per_pos}\"{pos}\"}} {new}"));
    }
    t
}

fn case(before: &str, after: &str, during: &[(f64, &str)]) -> ServerMetrics {
    let ticks = during
        .iter()
        .map(|(t, p)| tick(*t, &parse(p).unwrap()))
        .collect();
    ServerMetrics::from_scrapes(
        &source(),
        Some(parse(before).unwrap()),
        Some(parse(after).unwrap()),
        GaugeSamples(ticks),
        2 + during.len() as u64,
        0,
        None,
    )
}

#[test]
fn a_case_gets_counter_deltas_and_vllms_spec_decode_stats() {
    let after = vllm_after();
    let m = case(VLLM, &after, &[(0.5, VLLM), (1.5, &after)]);
    assert_eq!(m.server, Server::Vllm);
    assert_eq!(m.counters["prefix_cache_queries"], 10_000.0);
    assert_eq!(m.counters["prefix_cache_hits"], 4_000.0);
    assert_eq!(m.counters["generation_tokens"], 1_000.0);
    assert_eq!(m.counters["prompt_tokens"], 0.0);
    assert_eq!(m.prefix_cache_hit_rate_pct(), Some(40.0));
    assert!(!m.counter_reset);
    // vLLM's calculate_spec_decode_stats: 200 of 300 drafted tokens in 100 drafts.
    let sd = m.spec_decode().unwrap();
    assert_eq!(
        (sd.num_drafts, sd.draft_tokens, sd.accepted_tokens),
        (100, 300, 200)
    );
    assert!((sd.acceptance_rate - 200.0 / 3.0).abs() < 1e-12);
    assert_eq!(sd.acceptance_length, 3.0);
    assert_eq!(sd.per_position_acceptance_rates, vec![0.9, 0.6, 0.5]);
    // Gauges: one value per scrape during the case, mean and max.
    assert_eq!(m.t, vec![0.5, 1.5]);
    assert_eq!(m.series["running"], vec![Some(21.0), Some(21.0)]);
    assert_eq!(m.gauges["kv_cache_usage_pct"].max, 37.5);
    let j = m.to_json();
    assert_eq!(j["prefix_cache_hit_rate_pct"], 40.0);
    assert_eq!(j["series"]["t"][1], 1.5);
    assert!(j.get("raw").is_none());
}

#[test]
fn no_spec_decode_stats_when_no_draft_token_moved() {
    let m = case(VLLM, VLLM, &[]);
    assert_eq!(m.spec_decode(), None);
    assert_eq!(m.prefix_cache_hit_rate_pct(), None);
    assert!(m.series.is_empty() && m.t.is_empty());
}

#[test]
fn a_counter_that_went_down_is_a_restart_and_counts_from_zero() {
    let after = vllm_after();
    let m = case(&after, VLLM, &[]);
    assert!(m.counter_reset);
    // Restarted: what the counter shows after is what the case added.
    assert_eq!(m.counters["prefix_cache_queries"], 160_000.0);
}

#[test]
fn an_unknown_server_keeps_its_raw_series() {
    let before = "# TYPE my_jobs_total counter\nmy_jobs_total{q=\"a\"} 5\n# TYPE my_depth gauge\nmy_depth 2\n";
    let after = "# TYPE my_jobs_total counter\nmy_jobs_total{q=\"a\"} 12\n# TYPE my_depth gauge\nmy_depth 6\n";
    let m = case(before, after, &[(0.1, before), (0.2, after)]);
    assert_eq!(m.server, Server::Unknown);
    assert!(m.counters.is_empty());
    let (c, g) = m.raw.clone().unwrap();
    assert_eq!(c["my_jobs_total{q=\"a\"}"], 7.0);
    assert_eq!((g["my_depth"].mean, g["my_depth"].max), (4.0, 6.0));
    assert!(m.to_json()["raw"]["counters"].is_object());
}

#[test]
fn a_counter_first_seen_after_the_case_began_counts_from_zero() {
    let before: String = VLLM
        .lines()
        .filter(|l| !l.contains("spec_decode"))
        .map(|l| format!("{l}\n"))
        .collect();
    let m = case(&before, VLLM, &[]);
    assert!(!m.counter_reset);
    let sd = m.spec_decode().unwrap();
    assert_eq!(
        (sd.num_drafts, sd.draft_tokens, sd.accepted_tokens),
        (1000, 3000, 1500)
    );
    assert_eq!(sd.per_position_acceptance_rates, vec![0.8, 0.5, 0.2]);
}
