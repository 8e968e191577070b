//! A reasoning model's time, against the simulator's ground truth: it reasons for a
//! known number of tokens at a known pace before it answers, so the time to the first
//! token on any channel, the time to the answer and the reasoning between them are
//! known; vLLM's own keys stay what vLLM's client computes on each reasoning field.

use crate::support::{read_json, tempdir};
use crate::window::{case_file, run_plan};

/// ground-truth: prefill 20 ms, ITL 10 ms, no jitter. 20 reasoning tokens, then 12
/// answer tokens: the answer starts 20 decode steps (200 ms) after the first token.
fn plan(backend: &str, field: &str) -> String {
    format!(
        r#"
[services.sim]
sim = {{ preset = "ground-truth", reasoning_tokens = 20, reasoning_field = "{field}" }}
[defaults]
backend = "{backend}"
dataset = {{ name = "random", input_len = 16, output_len = 32 }}
num_prompts = 6
max_concurrency = 1
"#
    )
}

/// The tolerance of the other timing tests (`sim_timing`): 3 ms on a mean TTFT.
const TOL_MS: f64 = 3.0;

fn reasoning_of(backend: &str, field: &str) -> (serde_json::Value, serde_json::Value) {
    let dir = tempdir("reasoning");
    let run = run_plan(&dir, "r", &plan(backend, field), &[], 0);
    let r = read_json(&case_file(&run));
    // The report's section and summary.csv's columns, under vLLM's key names.
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        md.contains("### Reasoning") && md.contains("| sim c=1 | "),
        "{md}"
    );
    let csv = std::fs::read_to_string(run.join("summary.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    for col in [
        "mean_ttft_any_ms",
        "p99_ttfo_ms",
        "mean_reasoning_ms",
        "reasoning_tokens",
    ] {
        assert!(header.split(',').any(|c| c == col), "no {col} in {header}");
    }
    std::fs::remove_dir_all(&dir).ok();
    let block = r["benchplan"]["reasoning"].clone();
    assert!(block.is_object(), "no benchplan.reasoning in {r:#}");
    (r, block)
}

fn ms(block: &serde_json::Value, key: &str) -> f64 {
    block[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} in {block:#}"))
}

#[test]
fn reasoning_time_and_tokens_are_the_injected_ones_on_each_field_and_api() {
    let _cpu = crate::support::heavy();
    for (backend, field) in [
        ("openai-chat", "reasoning"),
        ("openai-chat", "reasoning_content"),
        ("openai-responses", "reasoning"),
    ] {
        let (r, b) = reasoning_of(backend, field);
        let at = format!("{backend} on `{field}`");
        // Exact counts: 20 of each request's 32 output tokens, from the server's usage.
        assert_eq!(b["requests"], 6, "{at}: {b:#}");
        assert_eq!(b["requests_with_reasoning"], 6, "{at}");
        assert_eq!(b["reasoning_tokens"], 120, "{at}: {b:#}");
        assert_eq!(b["answer_tokens"], 72, "{at}: {b:#}");
        assert_eq!(b["reasoning_tokens_source"], "usage", "{at}");
        // The times: reasoning is TTFO − TTFT (any) = 20 decode steps of 10 ms.
        let any = ms(&b, "mean_ttft_any_ms");
        let ttfo = ms(&b, "mean_ttfo_ms");
        let thinking = ms(&b, "mean_reasoning_ms");
        assert!((any - 20.0).abs() < TOL_MS, "{at}: TTFT (any) {any}");
        assert!(
            (thinking - 200.0).abs() < TOL_MS,
            "{at}: reasoning {thinking}"
        );
        assert!((ttfo - any - thinking).abs() < 1e-6, "{at}");
        // TTFO is also a vLLM-style latency family at the top, for compare and history.
        let top = r["mean_ttfo_ms"].as_f64().expect("mean_ttfo_ms");
        assert!((top - ttfo).abs() < 1e-6, "{at}: {top} {ttfo}");
        // The answer's own pace is the injected ITL.
        // The answer's own pace, and every token's, is the injected ITL: with and
        // without the reasoning, TPOT and ITL alike.
        for key in [
            "mean_tpot_answer_ms",
            "mean_tpot_all_ms",
            "median_itl_answer_ms",
            "median_itl_all_ms",
        ] {
            let v = ms(&b, key);
            assert!((v - 10.0).abs() < 0.5, "{at}: {key} {v}");
        }
        // vLLM's TTFT: the first token event, which a `reasoning_content` delta is not.
        let vllm_ttft = r["mean_ttft_ms"].as_f64().unwrap();
        let expected = if field == "reasoning_content" {
            ttfo
        } else {
            any
        };
        assert!(
            (vllm_ttft - expected).abs() < 1e-6,
            "{at}: vLLM's TTFT {vllm_ttft}, expected {expected}"
        );
    }
}

/// No reasoning, no block: a result of a plain model is what it was.
#[test]
fn a_model_that_does_not_reason_has_no_reasoning_block() {
    let dir = tempdir("no-reasoning");
    let run = run_plan(
        &dir,
        "r",
        &plan("openai-chat", "reasoning").replace("reasoning_tokens = 20, ", ""),
        &[],
        0,
    );
    let r = read_json(&case_file(&run));
    assert!(
        r["benchplan"].get("reasoning").is_none(),
        "{:#}",
        r["benchplan"]
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// An SLO on the answer: `p99_ttfo` judges the time to the first answer token, which
/// on a reasoning model is the reasoning later than vLLM's TTFT (here 20 ms, within
/// any TTFT SLO, while the answer comes at 220 ms).
#[test]
fn an_slo_on_ttfo_judges_the_answer_not_the_first_reasoning_token() {
    let dir = tempdir("ttfo-slo");
    let judged = |slo: &str, code: i32| {
        let text = format!(
            "{}[slo]\np99_ttft = \"<= 100ms\"\np99_ttfo = \"{slo}\"\n",
            plan("openai-chat", "reasoning")
        );
        let run = run_plan(&dir, &format!("r{code}"), &text, &[], code);
        read_json(&case_file(&run))
    };
    let r = judged("<= 300ms", 0);
    // The case computed TTFO as a latency family because its SLO reads it, from the
    // same samples as benchplan.reasoning.
    let top = r["p99_ttfo_ms"].as_f64().expect("p99_ttfo_ms");
    let block = r["benchplan"]["reasoning"]["p99_ttfo_ms"].as_f64().unwrap();
    assert!(
        (top - block).abs() < 1e-9 && (top - 220.0).abs() < TOL_MS,
        "{top} {block}"
    );
    let r = judged("<= 150ms", 3);
    let verdicts = r["benchplan"]["slo_verdicts"].as_array().unwrap();
    let verdict = |key: &str| {
        verdicts
            .iter()
            .find(|v| v["key"] == key)
            .unwrap_or_else(|| panic!("{key} in {verdicts:?}"))["pass"]
            .clone()
    };
    assert_eq!(verdict("p99_ttft"), true);
    assert_eq!(verdict("p99_ttfo"), false);
    std::fs::remove_dir_all(&dir).ok();
}

/// The compare gate judges the answer's wait: a model that reasons twice as long (40
/// reasoning tokens instead of 20, so its answer comes 200 ms later) at the same TTFT
/// is a regression on `p99_ttfo_ms` and none on vLLM's TTFT.
#[test]
fn the_compare_gate_judges_ttfo_beside_ttft() {
    let dir = tempdir("ttfo-compare");
    let text = format!(
        "{}[report]\ncharts = false\nmeasure = \"whole\"\ncompare_metrics = [\"p99_ttfo_ms\", \"p50_ttft_ms\"]\n",
        plan("openai-chat", "reasoning").replace("output_len = 32", "output_len = 64")
    );
    let base = run_plan(&dir, "base", &text, &[], 0);
    let baseline = format!("report.baseline={}", base.display());
    let longer = "services.sim.sim.reasoning_tokens=40";
    let run = run_plan(
        &dir,
        "longer",
        &text,
        &["--set", &baseline, "--set", longer],
        4,
    );
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    // The comparison table's row (the last table that names the key).
    let row = |key: &str| {
        md.lines()
            .rfind(|l| l.contains(key) && l.starts_with('|'))
            .unwrap_or_else(|| panic!("no {key} row in {md}"))
            .to_string()
    };
    assert!(row("p99_ttfo_ms").contains("REGRESSION"), "{md}");
    assert!(!row("p50_ttft_ms").contains("REGRESSION"), "{md}");
    std::fs::remove_dir_all(&dir).ok();
}
