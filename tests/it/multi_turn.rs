//! Multi-turn conversations against the simulator: history resent with the server's
//! replies (checked against its `usage.prompt_tokens`), the prefix cache's benefit by
//! turn against the simulator's prefill model, a failed turn ending its conversation,
//! the conversation cap and think time from recorded send times, and the CLI.

use benchplan::load::case::execute;
use benchplan::load::options::RunOptions;
use benchplan::metrics::record::RequestRecord;
use benchplan::plan::dataset::MultiTurnDataset;
use benchplan::plan::sim::{Preset, SimParams, SimSpec};
use benchplan::plan::units::Dur;
use benchplan::plan::{Backend, CaseParams, Dataset, Metric, Service};
use benchplan::service::target::resolve;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::support::{benchplan, stderr, stdout};

fn sim(params: SimParams) -> Service {
    Service {
        sim: Some(SimSpec {
            preset: Some(Preset::GroundTruth),
            params,
        }),
        ..Service::default()
    }
}

fn ms(x: f64) -> Dur {
    Dur::from_secs_f64(x / 1e3)
}

fn case(n: u64, d: MultiTurnDataset) -> CaseParams {
    CaseParams {
        backend: Some(Backend::OpenaiChat),
        num_prompts: n,
        dataset: Dataset::MultiTurn(d),
        ignore_eos: Some(true),
        percentile_metrics: Some(vec![Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el]),
        metric_percentiles: vec![50.0, 99.0],
        ..CaseParams::default()
    }
}

/// Records grouped by conversation, in turn order.
fn by_conversation(records: &[RequestRecord]) -> Vec<Vec<&RequestRecord>> {
    let n = records
        .iter()
        .filter_map(|r| r.turn)
        .map(|t| t.conversation as usize + 1)
        .max()
        .unwrap_or(0);
    let mut out = vec![Vec::new(); n];
    for r in records {
        let t = r.turn.expect("every multi-turn record knows its turn");
        out[t.conversation as usize].push(r);
    }
    for c in &mut out {
        c.sort_by_key(|r| r.turn.unwrap().turn);
    }
    out
}

/// Runs four 3-turn conversations one at a time (no load noise) against a simulator
/// whose TTFT is 5 ms + 0.1 ms per uncached prompt token.
async fn three_turns(prefix_caching: bool) -> benchplan::load::result::CaseResult {
    let svc = sim(SimParams {
        prefill_overhead: Some(ms(5.0)),
        prefill_time_per_token: Some(ms(0.1)),
        itl: Some(ms(1.0)),
        enable_prefix_caching: Some(prefix_caching),
        ..SimParams::default()
    });
    let resolved = resolve(&svc, false, None).await.unwrap();
    let p = CaseParams {
        multi_turn_concurrency: Some(1),
        ..case(
            4,
            MultiTurnDataset {
                num_turns: Some(3),
                input_len: 200,
                per_turn_input_len: 200,
                output_len: Some(10),
                ..MultiTurnDataset::default()
            },
        )
    };
    execute(&resolved, &svc, &p, &RunOptions::default())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_grows_and_the_prefix_cache_cuts_later_turns_ttft() {
    for caching in [true, false] {
        let r = three_turns(caching).await;
        let s = &r.summary;
        assert_eq!((s.completed, s.failed), (12, 0), "every turn is a request");
        // Each turn resends the history with the server's actual replies: 200, then
        // 200 + 10 + 200, then 410 + 10 + 200, as the server itself counted them.
        for conv in by_conversation(&r.run.records) {
            let served: Vec<u64> = conv
                .iter()
                .map(|r| r.sample.usage_prompt.unwrap())
                .collect();
            assert_eq!(served, [200, 410, 620]);
            for t in &conv {
                assert_eq!(t.sample.usage_prompt, Some(t.prompt_len));
            }
        }
        let mt = r.multi_turn.as_ref().unwrap();
        assert_eq!((mt.conversations_total, mt.conversations_completed), (4, 4));
        assert_eq!(mt.per_turn.len(), 3);
        let mut excess = Vec::new();
        for (k, t) in mt.per_turn.iter().enumerate() {
            let input = t.input_tokens.mean;
            assert_eq!(input, [200.0, 410.0, 620.0][k]);
            // The previous turn's prompt is cached in full 16-token blocks (the
            // simulator caches prompt blocks, not generated ones); the first turn has none.
            let want_cached = match (caching, k) {
                (false, _) | (true, 0) => 0.0,
                (true, 1) => 192.0, // 200 → 12 blocks
                _ => 400.0,         // 410 → 25 blocks
            };
            assert_eq!(
                t.mean_cached_tokens, want_cached,
                "turn {k}, caching {caching}"
            );
            // TTFT against the simulator's prefill model over the uncached tokens
            // (5 ms + 0.1 ms a token). No request is faster than the model: the
            // simulator never sends early and the client's clock brackets its send.
            let want = 5.0 + 0.1 * (input - want_cached);
            for rec in r
                .run
                .records
                .iter()
                .filter(|rec| rec.turn.unwrap().turn == k as u32)
            {
                let ttft = rec.sample.ttft * 1e3;
                assert!(
                    ttft >= want - 0.1,
                    "turn {k}, caching {caching}: TTFT {ttft:.2} ms below the model's {want:.2} ms"
                );
            }
            // The median of the four: one request delayed by a busy machine (seen once
            // in CI, 12 ms late) must not decide a model check.
            let ttft = t.summary.stat(Metric::Ttft).unwrap().median;
            excess.push(ttft - want);
        }
        // A loaded machine adds its wake-up delay to every request (3–4 ms with two
        // CPU hogs on this 2-core machine), so the model is checked in what changes
        // from turn to turn: each turn's median exceeds the model by the same amount
        // to within 4 ms (a wrong cached-token count moves one turn by ≥ 20 ms; 3 ms was
        // once exceeded by 0.01 ms with three test processes on 2 cores), and
        // that common amount is a delay, not a model error.
        let (lo, hi) = excess
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(*x), b.max(*x)));
        assert!(
            hi - lo < 4.0,
            "caching {caching}: TTFT above the model per turn {excess:.2?} ms"
        );
        assert!(
            hi < 10.0,
            "caching {caching}: TTFT {hi:.2} ms above the model"
        );
        if !caching {
            let first = mt.per_turn[0].summary.stat(Metric::Ttft).unwrap().median;
            let last = mt.per_turn[2].summary.stat(Metric::Ttft).unwrap().median;
            assert!(
                last > first + 35.0,
                "without the cache, 420 more tokens cost ~42 ms: {first:.1} → {last:.1} ms"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversation_cap_request_cap_and_think_time_hold() {
    let svc = sim(SimParams {
        prefill_overhead: Some(ms(5.0)),
        itl: Some(ms(2.0)),
        ..SimParams::default()
    });
    let resolved = resolve(&svc, false, None).await.unwrap();
    let d = MultiTurnDataset {
        num_turns: Some(3),
        input_len: 20,
        output_len: Some(5),
        delay: ms(30.0),
        ..MultiTurnDataset::default()
    };
    let p = CaseParams {
        multi_turn_concurrency: Some(2),
        ..case(6, d.clone())
    };
    let r = execute(&resolved, &svc, &p, &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(r.summary.completed, 18);
    let convs = by_conversation(&r.run.records);
    // Conversation spans from first send to last answer never overlap more than twice.
    let mut events: Vec<(f64, i32)> = Vec::new();
    for c in &convs {
        let last = c.last().unwrap();
        events.push((c[0].start, 1));
        events.push((last.start + last.sample.latency, -1));
        // Think time: at least the delay between an answer and the next send, and not
        // much more (a timer's lateness and the rest of the stream).
        for w in c.windows(2) {
            let gap = w[1].start - (w[0].start + w[0].sample.latency);
            assert!(
                (0.030..0.060).contains(&gap),
                "think time between turns: {:.1} ms",
                gap * 1e3
            );
            assert!(
                w[1].scheduled >= w[0].start + w[0].sample.latency + 0.030,
                "the turn was scheduled after the think time"
            );
        }
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut cur, mut peak) = (0, 0);
    for (_, d) in events {
        cur += d;
        peak = peak.max(cur);
    }
    assert_eq!(
        peak, 2,
        "two conversations in flight at most, and at times two"
    );
    // Six conversations two at a time: the later ones waited for a conversation slot.
    assert!(
        r.summary
            .client_queue
            .as_ref()
            .unwrap()
            .percentiles
            .last()
            .unwrap()
            .1
            > 100.0
    );

    // max_concurrency still bounds requests when more conversations are in flight.
    let p = CaseParams {
        multi_turn_concurrency: Some(4),
        max_concurrency: Some(1),
        ..case(4, d)
    };
    let r = execute(&resolved, &svc, &p, &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(r.summary.completed, 12);
    assert_eq!(r.summary.max_concurrent_requests_exact, 1);
}

/// Four ShareGPT conversations of three human turns; the second turn of `fails` asks
/// the simulator for an HTTP 500 through a per-message header.
fn sharegpt_file(dir: &std::path::Path) -> std::path::PathBuf {
    let conv = |name: &str, fail: bool| {
        let mut second = serde_json::json!({"from": "human", "value": format!("{name} second question about the same thing")});
        if fail {
            second["headers"] = serde_json::json!({"X-Return-Error": "500"});
        }
        serde_json::json!({"id": name, "conversations": [
            {"from": "human", "value": format!("{name} first question with several words")},
            {"from": "gpt", "value": "a recorded answer of some length here"},
            second,
            {"from": "gpt", "value": "another recorded answer"},
            {"from": "human", "value": format!("{name} third and last question")},
        ]})
    };
    let list = serde_json::json!([
        conv("alpha", false),
        conv("bravo", true),
        conv("charlie", false),
        conv("delta", false)
    ]);
    let path = dir.join("conversations.json");
    std::fs::write(&path, list.to_string()).unwrap();
    path
}

#[test]
fn a_failed_turn_ends_its_conversation_and_is_counted() {
    let dir = std::env::temp_dir().join(format!("benchplan-mt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = sharegpt_file(&dir);
    let out_dir = dir.join("out");
    let out = benchplan(&[
        "bench",
        "--multi-turn",
        "--sim",
        "ground-truth",
        "--sim-set",
        "itl=1ms",
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        data.to_str().unwrap(),
        "--output-len",
        "4",
        "--num-prompts",
        "4",
        "--multi-turn-num-turns",
        "3",
        "--multi-turn-concurrency",
        "2",
        "--save-result",
        "--result-dir",
        out_dir.to_str().unwrap(),
        "--result-filename",
        "mt.json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("Conversations completed:                3 of 4"),
        "{text}"
    );
    let r: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("mt.json")).unwrap()).unwrap();
    // vLLM's `completed` counts successful turns: 3 × 3 + the failed one's first.
    assert_eq!(r["completed"], 10);
    assert_eq!(r["failed"], 1);
    assert_eq!(r["mode"], "multi_turn");
    assert_eq!(r["num_conversations"], 4);
    assert_eq!(r["conversations_completed"], 3);
    assert_eq!(r["conversations_failed"], 1);
    assert_eq!(r["turns_planned"], 12);
    assert_eq!(r["turns_successful"], 10);
    assert_eq!(r["benchplan"]["errors_by_kind"]["http_500"], 1);
    let turns = r["per_turn_metrics"].as_array().unwrap();
    assert_eq!(turns.len(), 3);
    let col = |k: &str| {
        turns
            .iter()
            .map(|t| t[k].as_u64().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        col("completed"),
        [4, 3, 3],
        "the failed conversation sent no third turn"
    );
    assert_eq!(col("failed"), [0, 1, 0]);
    for t in turns {
        for key in [
            "mean_ttft_ms",
            "p99_itl_ms",
            "mean_tpot_ms",
            "median_e2el_ms",
            "mean_input_tokens",
        ] {
            assert!(t[key].as_f64().is_some(), "per-turn {key}: {t}");
        }
    }
    // Later turns carry the history: more input by turn.
    let input: Vec<f64> = turns
        .iter()
        .map(|t| t["mean_input_tokens"].as_f64().unwrap())
        .collect();
    assert!(input[0] < input[1] && input[1] < input[2], "{input:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn dry_run_prints_per_turn_input_lengths() {
    let out = benchplan(&[
        "bench",
        "--multi-turn",
        "--sim",
        "fast",
        "--dry-run",
        "--num-prompts",
        "5",
        "--multi-turn-num-turns",
        "3",
        "--random-input-len",
        "50",
        "--per-turn-input-len",
        "20",
        "--random-output-len",
        "10",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("5 conversations, 15 turns, history: live replies"),
        "{text}"
    );
    // Turn, conversations, new input, input sent with history (50; 50+10+20; 80+10+20).
    let rows: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| l.trim_start().starts_with(char::is_numeric))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            ["1", "5", "50/50.0/50", "50/50.0/50/50", "10.0"],
            ["2", "5", "20/20.0/20", "80/80.0/80/80", "10.0"],
            ["3", "5", "20/20.0/20", "110/110.0/110/110", "10.0"],
        ]
    );
}

#[test]
fn the_example_plan_sweeps_turns_and_conversation_concurrency() {
    let out = benchplan(&["run", "plans/multi-turn.toml", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for id in [
        "sim-turns2-conv2-",
        "sim-turns2-conv6-",
        "sim-turns4-conv2-",
        "sim-turns4-conv6-",
    ] {
        assert!(text.contains(id), "{id} in {text}");
    }
    assert_eq!(
        text.matches("24 conversations, 96 turns").count(),
        2,
        "{text}"
    );
}

/// A chat server that records, per request, its session header and how many user
/// messages it carried, and answers every request with one streamed token.
async fn recording_server() -> (String, Arc<Mutex<Vec<(String, usize)>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    // One request: headers, then Content-Length bytes of body.
                    let head_end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
                    let header = |name: &str| {
                        head.lines()
                            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
                            .map(|v| v.trim().to_string())
                    };
                    let len: usize = header("content-length").map_or(0, |v| v.parse().unwrap());
                    while buf.len() < head_end + len {
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let body: Value =
                        serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or_default();
                    buf.drain(..head_end + len);
                    let users = body["messages"]
                        .as_array()
                        .map_or(0, |m| m.iter().filter(|x| x["role"] == "user").count());
                    if head.starts_with("post") {
                        log.lock()
                            .unwrap()
                            .push((header("x-session-id").unwrap_or_default(), users));
                    }
                    let (kind, payload) = if head.starts_with("get") {
                        (
                            "application/json",
                            r#"{"data":[{"id":"m","root":"m"}]}"#.to_string(),
                        )
                    } else {
                        (
                            "text/event-stream",
                            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" hi\"}}]}\n\n\
                             data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n\
                             data: [DONE]\n\n"
                                .to_string(),
                        )
                    };
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n{payload}",
                        payload.len()
                    );
                    if sock.write_all(resp.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_turn_of_a_conversation_carries_its_session_id() {
    let (url, seen) = recording_server().await;
    let svc = Service {
        base_url: Some(url),
        model: Some("m".into()),
        tokenizer: Some(
            crate::support::repo()
                .join("tests/fixtures/tokenizer")
                .display()
                .to_string(),
        ),
        ..Service::default()
    };
    let resolved = resolve(&svc, false, None).await.unwrap();
    let p = case(
        3,
        MultiTurnDataset {
            num_turns: Some(4),
            input_len: 8,
            output_len: Some(1),
            ..MultiTurnDataset::default()
        },
    );
    let opts = RunOptions {
        smoke: false,
        request_id_prefix: "t-".into(),
        ..RunOptions::default()
    };
    let r = execute(&resolved, &svc, &p, &opts).await.unwrap();
    assert_eq!(r.summary.completed, 12);
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    let want: Vec<(String, usize)> = (0..3)
        .flat_map(|c| (1..=4).map(move |turns| (format!("t-conv-{c}"), turns)))
        .collect();
    assert_eq!(
        seen, want,
        "one session id per conversation, on each of its turns"
    );
}

#[test]
fn the_report_shows_conversations_and_metrics_by_turn() {
    let dir = std::env::temp_dir().join(format!("benchplan-mt-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plan = dir.join("mt.toml");
    std::fs::write(
        &plan,
        "name = \"mt\"\n[services.s]\nsim = { preset = \"ground-truth\", itl = \"1ms\", enable_prefix_caching = true }\n\
         [defaults]\nbackend = \"openai-chat\"\nnum_prompts = 3\n\
         dataset = { name = \"multi_turn\", num_turns = 2, input_len = 40, output_len = 4 }\n",
    )
    .unwrap();
    let results = dir.join("results");
    let out = benchplan(&[
        "run",
        plan.to_str().unwrap(),
        "--results-dir",
        results.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    let report = err
        .lines()
        .find_map(|l| l.strip_prefix("report: "))
        .unwrap_or_else(|| panic!("no report line in {err}"));
    let md = std::fs::read_to_string(report).unwrap();
    assert!(md.contains("## Conversations"), "{md}");
    assert!(
        md.contains("3 of 3 conversations completed, 0 ended by a failed turn; 6 successful turns"),
        "{md}"
    );
    // One row per turn: the second sends 40 + 4 + 40 tokens, 32 of them cached.
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| 1 |") || l.starts_with("| 2 |"))
        .collect();
    assert_eq!(rows.len(), 2, "{md}");
    assert!(
        rows[0].starts_with("| 1 | 3 | 0 | 40.00 | 0.00 |"),
        "{}",
        rows[0]
    );
    assert!(
        rows[1].starts_with("| 2 | 3 | 0 | 84.00 | 32.00 |"),
        "{}",
        rows[1]
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_history_resends_the_files_replies() {
    use benchplan::plan::dataset::ConversationHistory;
    use benchplan::tokenizer::TokenModel;
    let dir = std::env::temp_dir().join(format!("benchplan-mt-rec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = sharegpt_file(&dir);
    let svc = sim(SimParams {
        itl: Some(ms(1.0)),
        ..SimParams::default()
    });
    let resolved = resolve(&svc, false, None).await.unwrap();
    let mut results = Vec::new();
    for history in [ConversationHistory::Recorded, ConversationHistory::Live] {
        let p = case(
            3,
            MultiTurnDataset {
                path: Some(data.clone()),
                num_turns: Some(3),
                output_len: Some(4),
                history,
                ..MultiTurnDataset::default()
            },
        );
        // One of the file's conversations asks for an error on its second turn; the
        // checks below skip it.
        let r = execute(&resolved, &svc, &p, &RunOptions::default())
            .await
            .unwrap();
        results.push(r);
    }
    let count = |s: &str| TokenModel::Builtin.count(s) as u64;
    let (user, first, second) = (
        |name: &str, k: usize| {
            [
                format!("{name} first question with several words"),
                format!("{name} second question about the same thing"),
                format!("{name} third and last question"),
            ][k]
                .clone()
        },
        count("a recorded answer of some length here"),
        count("another recorded answer"),
    );
    for (r, recorded) in results.iter().zip([true, false]) {
        for conv in by_conversation(&r.run.records) {
            if !conv.iter().all(|t| t.sample.success) {
                continue; // the conversation with the injected failure
            }
            // Each name is one word, so every conversation's messages count the same.
            let name = "alpha";
            let served: Vec<u64> = conv
                .iter()
                .map(|t| t.sample.usage_prompt.unwrap())
                .collect();
            let u: Vec<u64> = (0..3).map(|k| count(&user(name, k))).collect();
            let (r0, r1) = if recorded { (first, second) } else { (4, 4) };
            assert_eq!(
                served,
                [u[0], u[0] + r0 + u[1], u[0] + r0 + u[1] + r1 + u[2]],
                "recorded history: {recorded}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_rate_paces_conversation_starts() {
    use benchplan::load::schedule::{ScheduleSpec, arrival_offsets};
    let svc = sim(SimParams {
        prefill_overhead: Some(ms(2.0)),
        itl: Some(ms(1.0)),
        ..SimParams::default()
    });
    let resolved = resolve(&svc, false, None).await.unwrap();
    let p = CaseParams {
        request_rate: benchplan::plan::units::Rate(40.0),
        seed: 9,
        ..case(
            8,
            MultiTurnDataset {
                num_turns: Some(2),
                input_len: 10,
                output_len: Some(2),
                ..MultiTurnDataset::default()
            },
        )
    };
    let r = execute(&resolved, &svc, &p, &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(r.summary.completed, 16);
    let want = arrival_offsets(&ScheduleSpec {
        num_requests: 8,
        rate: 40.0,
        burstiness: 1.0,
        ramp: None,
        seed: 9,
    });
    for conv in by_conversation(&r.run.records) {
        let c = conv[0].turn.unwrap().conversation as usize;
        assert_eq!(
            conv[0].scheduled, want[c],
            "first turns follow the schedule"
        );
        // The schedule itself is checked exactly above; the start may lag it by the
        // machine's wake-up delay (11 ms seen once on a busy 2-core CI run).
        assert!(
            conv[0].start - want[c] < 0.020,
            "conversation {c} started {:.1} ms late",
            (conv[0].start - want[c]) * 1e3
        );
        // The second turn follows its own answer, not the schedule.
        assert!(conv[1].start > conv[0].start + conv[0].sample.latency);
    }
}
