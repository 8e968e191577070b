//! Production traces end to end against the simulator: a real Mooncake slice replayed
//! with exact prompts and the server's realised reuse measured against what the
//! simulator counted; Bailian sessions; agentic sessions with their think times end to
//! start; inconsistent rows refused at validation; `trace stats`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{batch_dir, benchplan, read_json, repo, stderr, stdout, tempdir};

fn fixture(name: &str) -> PathBuf {
    repo().join("tests/fixtures/traces").join(name)
}

/// Runs `plan` (written into `dir`) into `dir/r`, expecting exit 0; the run folder.
fn run(dir: &Path, plan: &str) -> PathBuf {
    let path = dir.join("plan.toml");
    std::fs::write(&path, plan).unwrap();
    let out = benchplan(&[
        "run",
        path.to_str().unwrap(),
        "--quiet",
        "--no-charts",
        "--results-dir",
        dir.join("r").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    batch_dir(&dir.join("r"))
}

/// The result files of a run, by name.
fn results(run: &Path) -> Vec<Value> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(run)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            n.starts_with("sim-") && n.ends_with(".json") && !n.contains(".timeslices")
        })
        .collect();
    names.sort();
    names.iter().map(|p| read_json(p)).collect()
}

#[test]
fn a_mooncake_slice_replays_and_the_realised_reuse_is_what_the_simulator_counted() {
    let _cpu = crate::support::heavy();
    let dir = tempdir("trace-mooncake");
    // Forty real rows (up to 30k tokens each), ten times faster than the trace, against
    // a simulator whose cache holds them all; the plan says the block size and unit.
    let run = run(
        &dir,
        &format!(
            r#"
name = "replay"
[services.sim]
sim = {{ preset = "tiny", enable_prefix_caching = true, max_model_len = 65536, kv_cache_blocks = 65536, itl = "200us" }}
[defaults]
backend = "openai"
num_prompts = 40
server_metrics = {{ scrape_interval = "250ms" }}
dataset = {{ name = "trace", path = "{}", format = "mooncake", block_size = 512, time_unit = "ms", time_scale = 0.1 }}
"#,
            fixture("mooncake-conversation-4181-4220.jsonl").display()
        ),
    );
    let r = &results(&run)[0];
    let t = &r["benchplan"]["trace"];
    assert_eq!(t["rows"], 40, "{t:#}");
    // The slice's own reuse (12% of its prompt tokens are blocks sent before).
    let expected = t["expected_reuse"].as_f64().unwrap();
    assert!((expected - 0.119).abs() < 0.002, "{t:#}");
    // Every request got exactly its row's prompt tokens (the server's own count).
    assert_eq!(
        r["total_input_tokens"], 395_608,
        "{}",
        r["total_input_tokens"]
    );
    // Realised: what the server said per request, against what it counted on /metrics.
    let realised = t["realised_reuse"].as_f64().unwrap();
    let counted = r["benchplan"]["server_metrics"]["prefix_cache_hit_rate_pct"]
        .as_f64()
        .unwrap()
        / 100.0;
    assert!((realised - counted).abs() < 0.01, "{realised} vs {counted}");
    // The simulator reuses 16-token blocks of the trace's shared 512-token blocks:
    // all of them but the partial tails.
    assert!(
        realised > expected * 0.9 && realised <= expected + 0.001,
        "{t:#}"
    );
    assert_eq!(t["capacity_tokens"], 65536 * 16, "{t:#}");
    // The hits' TTFT is shorter: their prefill skips the cached blocks.
    assert!(t["requests_with_hits"].as_u64().unwrap() > 0, "{t:#}");
    // The report shows the reuse beside the realised one; the CSV has its columns.
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(md.contains("### Trace replay: prefix reuse"), "{md}");
    let csv = std::fs::read_to_string(run.join("summary.csv")).unwrap();
    assert!(csv.contains("trace_expected_reuse"), "{csv}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bailian_rows_replay_as_sessions_of_their_parent_chains() {
    let dir = tempdir("trace-bailian");
    let run = run(
        &dir,
        &format!(
            r#"
name = "bailian"
[services.sim]
sim = {{ preset = "tiny", enable_prefix_caching = true }}
[defaults]
backend = "openai"
dataset = {{ name = "trace", path = "{}", format = "bailian" }}
"#,
            fixture("bailian-small.jsonl").display()
        ),
    );
    let r = &results(&run)[0];
    let t = &r["benchplan"]["trace"];
    assert_eq!(
        (t["rows"].as_u64(), t["block_size"].as_u64()),
        (Some(6), Some(16))
    );
    let sessions: Vec<&str> = t["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session"].as_str().unwrap())
        .collect();
    assert_eq!(sessions, ["101", "201", "301"], "{t:#}");
    // Chat 101's turns: 0, then 32 of 70, then 64 of 100 tokens seen before.
    let s101 = &t["sessions"][0];
    assert_eq!(s101["turns"], 3);
    let want = (32.0 + 64.0) / (40.0 + 70.0 + 100.0);
    assert!(
        (s101["expected_reuse"].as_f64().unwrap() - want).abs() < 1e-9,
        "{s101:#}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn agentic_sessions_wait_their_think_time_from_the_end_of_the_previous_answer() {
    let dir = tempdir("trace-sessions");
    let run = run(
        &dir,
        &format!(
            r#"
name = "sessions"
[services.sim]
sim = {{ preset = "ground-truth", ttft = "20ms", itl = "2ms", enable_prefix_caching = true }}
[defaults]
backend = "openai-chat"
dataset = {{ name = "trace", path = "{}", format = "sessions", session_header = "x-session-id" }}
[execution]
save_detailed = true
"#,
            fixture("sessions-small.jsonl").display()
        ),
    );
    let r = &results(&run)[0];
    // Agent a's turns, then agent b's: turn k+1 is sent its think time after turn k
    // ended (end to start), not after turn k was sent.
    let starts: Vec<f64> = r["start_times"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let lat: Vec<f64> = r["latencies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(starts.len(), 5, "{starts:?}");
    for (prev, next, think) in [(0, 1, 0.3), (1, 2, 0.2), (3, 4, 0.4)] {
        let gap = starts[next] - (starts[prev] + lat[prev]);
        assert!(
            gap >= think - 0.005 && gap < think + 0.1,
            "turn {next}: {gap} s after the previous answer, think {think}"
        );
    }
    let t = &r["benchplan"]["trace"];
    assert_eq!(t["format"], "sessions");
    // By turn: two sessions have a first and a second turn, one a third.
    let turns: Vec<u64> = t["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["requests"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, [2, 2, 1], "{t:#}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_inconsistent_row_is_refused_at_validation_with_its_line() {
    let dir = tempdir("trace-bad");
    let path = dir.join("plan.toml");
    std::fs::write(
        &path,
        format!(
            "[services.sim]\nsim = {{ preset = \"tiny\" }}\n[defaults]\ndataset = {{ name = \"trace\", path = \"{}\" }}\n",
            fixture("inconsistent.jsonl").display()
        ),
    )
    .unwrap();
    let out = benchplan(&["validate", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("inconsistent.jsonl:3: input_length 2000 needs 4 blocks of 512 tokens, but the row has 2 hash ids"),
        "{err}"
    );
    // The format's presets are said.
    let ok = dir.join("ok.toml");
    std::fs::write(
        &ok,
        format!(
            "[services.sim]\nsim = {{ preset = \"tiny\" }}\n[defaults]\ndataset = {{ name = \"trace\", path = \"{}\" }}\n",
            fixture("mooncake-conversation-4181-4220.jsonl").display()
        ),
    )
    .unwrap();
    let out = benchplan(&["validate", ok.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("trace format `mooncake` filled block_size = 512 (mooncake's) and time_unit = \"ms\" (mooncake's)"),
        "{}",
        stderr(&out)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn trace_stats_says_what_the_slice_will_do_to_a_cache() {
    let f = fixture("mooncake-conversation-4181-4220.jsonl");
    let out = benchplan(&["trace", "stats", f.to_str().unwrap(), "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("trace format: mooncake (detected"),
        "{}",
        stderr(&out)
    );
    let s: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(s["rows"], 40);
    assert!(
        (s["span_s"].as_f64().unwrap() - 12.001).abs() < 1e-9,
        "{s:#}"
    );
    assert!(
        (s["reuse"].as_f64().unwrap() - 0.119).abs() < 0.002,
        "{s:#}"
    );
    assert_eq!(s["input_len"]["max"], 30655);
    let md = benchplan(&["trace", "stats", f.to_str().unwrap()]);
    assert!(
        stdout(&md).contains("| prompt tokens an unbounded prefix cache would serve | 11.9% |"),
        "{}",
        stdout(&md)
    );
}

#[test]
fn bench_takes_vllms_timed_trace_flags_and_says_where_its_prompts_differ() {
    let dir = tempdir("trace-bench");
    let f = fixture("mooncake-conversation-4181-4220.jsonl");
    let out = benchplan(&[
        "bench",
        "--sim",
        "tiny",
        "--sim-set",
        "max_model_len=65536",
        "--sim-set",
        "itl=100us",
        "--backend",
        "openai",
        "--dataset-name",
        "timed_trace",
        "--dataset-path",
        f.to_str().unwrap(),
        "--timed-trace-chunk-hash-size",
        "512",
        "--timed-trace-sec-multiplier",
        "0.0001",
        "--num-prompts",
        "8",
        "--save-result",
        "--result-dir",
        dir.to_str().unwrap(),
        "--disable-tqdm",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("timed_trace's prompts differ from vLLM's on purpose"),
        "{}",
        stderr(&out)
    );
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap();
    let r = read_json(&file);
    assert_eq!(r["completed"], 8);
    assert_eq!(r["benchplan"]["trace"]["rows"], 8);
    assert_eq!(r["benchplan"]["trace"]["block_size"], 512);
    std::fs::remove_dir_all(&dir).ok();
}

/// Two shards of one run (each its own process, its own simulator) send the same
/// prompts for the same rows: their results carry the same prompt digest, and the
/// per-request and per-session reuse.
#[test]
fn two_shards_of_one_run_send_byte_identical_prompts() {
    let dir = tempdir("trace-shards");
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            r#"
name = "shards"
[services.sim]
sim = {{ preset = "tiny", enable_prefix_caching = true }}
[defaults]
backend = "openai"
dataset = {{ name = "trace", path = "{}", format = "bailian" }}
[execution]
repeats = 2
"#,
            fixture("bailian-small.jsonl").display()
        ),
    )
    .unwrap();
    let mut digests = Vec::new();
    for shard in ["0/2", "1/2"] {
        let out_dir = dir.join(shard.replace('/', "-of-"));
        let out = benchplan(&[
            "run",
            plan.to_str().unwrap(),
            "--quiet",
            "--no-charts",
            "--shard",
            shard,
            "--shard-by",
            "repeat",
            "--results-dir",
            out_dir.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let run = batch_dir(&out_dir);
        for r in results(&run) {
            let t = &r["benchplan"]["trace"];
            assert_eq!(t["requests"].as_array().unwrap().len(), 6, "{t:#}");
            digests.push(t["prompt_digest"].as_str().unwrap().to_string());
        }
    }
    // Each shard's repeat file and its case file: all one digest.
    assert!(digests.len() >= 2, "{digests:?}");
    assert!(digests.iter().all(|d| *d == digests[0]), "{digests:?}");
    std::fs::remove_dir_all(&dir).ok();
}
