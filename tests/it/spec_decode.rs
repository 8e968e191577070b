//! Speculative decoding per request (`benchplan.speculative_decoding`), against the
//! simulator's acceptance model and against the recorded public formats: vLLM's
//! `metrics.speculative_decoding` (the object in vllm#48915's description, captured
//! from a real server in llama-swap#1032) and llama-server's `timings.draft_*`.

use crate::server_timings::{final_chunk_server, first_result, llama_plan};
use crate::support::{read_json, tempdir};
use crate::window::run_plan;

/// Two simulated services in one plan: `exact` accepts exactly two of its three
/// drafted tokens every step (acceptance 1, 1, 0); `model` accepts position by
/// position with conditional chances 0.8, 0.6, 0.4.
const PLAN: &str = r#"
[services.exact]
sim = { preset = "fast", spec_decode_acceptance = [1.0, 1.0, 0.0] }
server_metrics = { scrape_interval = "50ms" }

[services.model]
sim = { preset = "fast", spec_decode_acceptance = [0.8, 0.6, 0.4] }
server_metrics = { scrape_interval = "50ms" }

[defaults]
backend = "openai-chat"
dataset = { name = "random", input_len = 16, output_len = 64 }
ignore_eos = true
num_prompts = 24
max_concurrency = 4
server_timings = true
"#;

fn by_service(run: &std::path::Path) -> (serde_json::Value, serde_json::Value) {
    let m = read_json(&run.join("manifest.json"));
    let mut exact = None;
    let mut model = None;
    for c in m["cases"].as_array().unwrap() {
        let r = read_json(&run.join(format!("{}.json", c["id"].as_str().unwrap())));
        match r["benchplan"]["service"].as_str() {
            Some("exact") => exact = Some(r),
            Some("model") => model = Some(r),
            other => panic!("{other:?}"),
        }
    }
    (exact.unwrap(), model.unwrap())
}

#[test]
fn acceptance_figures_are_the_simulators_model_and_agree_with_its_metrics() {
    let dir = tempdir("spec-decode");
    let run = run_plan(&dir, "r", PLAN, &[], 0);
    let (exact, model) = by_service(&run);

    // Exact: 63 decode tokens per request, 21 steps of 1 + 2 accepted each.
    let sd = &exact["benchplan"]["speculative_decoding"];
    assert_eq!(sd["requests"], 24, "{sd:#}");
    assert_eq!(sd["spec_source"], "vllm");
    assert_eq!(sd["acceptance_length"], 3.0, "{sd:#}");
    assert!((sd["acceptance_rate"].as_f64().unwrap() - 200.0 / 3.0).abs() < 1e-9);
    assert_eq!(
        sd["acceptance_histogram"],
        serde_json::json!([0, 0, 504, 0])
    );
    assert!((sd["p10_acceptance_rate"].as_f64().unwrap() - 200.0 / 3.0).abs() < 1e-9);

    // The model: P(accept ≥ 1, 2, 3) = 0.8, 0.48, 0.192, so 1.472 of 3 drafted tokens
    // accepted per step (49.07%) and 2.472 tokens per step; steps by accepted tokens
    // in shares 0.2, 0.32, 0.288, 0.192.
    let sd = &model["benchplan"]["speculative_decoding"];
    let rate = sd["acceptance_rate"].as_f64().unwrap();
    let length = sd["acceptance_length"].as_f64().unwrap();
    assert!((rate - 49.07).abs() < 5.0, "rate {rate}: {sd:#}");
    assert!((length - 2.472).abs() < 0.15, "length {length}");
    let hist: Vec<f64> = sd["acceptance_histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let steps: f64 = hist.iter().sum();
    for (share, want) in hist
        .iter()
        .map(|h| h / steps)
        .zip([0.2, 0.32, 0.288, 0.192])
    {
        assert!((share - want).abs() < 0.06, "{hist:?}");
    }

    // Both simulated engines count the same drafts per request and server-wide: the
    // per-request figures and /metrics agree exactly, and no disagreement is flagged.
    for r in [&exact, &model] {
        let sd = &r["benchplan"]["speculative_decoding"];
        let wide = r["spec_decode_acceptance_rate"].as_f64().unwrap();
        assert!((sd["acceptance_rate"].as_f64().unwrap() - wide).abs() < 1e-9);
        assert_eq!(sd["server_metrics_acceptance_rate"].as_f64(), Some(wide));
        assert_eq!(sd["accepted_tokens"], r["spec_decode_accepted_tokens"]);
        assert_eq!(sd["disagrees_with_server_metrics"], false);
        assert_eq!(
            sd["per_request"]["tpot_ms"].as_array().unwrap().len(),
            24,
            "one chart point per request"
        );
    }

    // summary.csv's columns and the report's section.
    let csv = std::fs::read_to_string(run.join("summary.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    for col in [
        "acceptance_rate",
        "mean_acceptance_length",
        "p10_acceptance_rate",
        "mean_ttft_gap_ms",
    ] {
        assert!(header.split(',').any(|c| c == col), "no {col} in {header}");
    }
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(md.contains("### Speculative decoding"), "{md}");
    assert!(md.contains("### Where the time goes"), "{md}");
    std::fs::remove_dir_all(&dir).ok();
}

/// vLLM's per-request object as vllm#48915 documents it (43 steps, 10 of 129 drafted
/// tokens accepted, histogram 39, 1, 0, 3), with #46768's timings beside it.
const VLLM_METRICS: &str = r#","metrics":{"time_to_first_token_ms":12.5,"generation_time_ms":30.0,"queue_time_ms":2.5,"mean_itl_ms":15.0,"tokens_per_second":100.0,"speculative_decoding":{"mean_acceptance_length":1.2325581395348837,"draft_acceptance_rate":0.07751937984496124,"acceptance_histogram":[39,1,0,3],"num_spec_steps":43,"num_accepted_draft_tokens":10,"num_draft_tokens":129,"num_spec_tokens":3}}"#;

#[test]
fn vllms_recorded_object_reads_and_hostile_variants_never_fail_a_request() {
    let dir = tempdir("spec-recorded");
    let url = final_chunk_server(VLLM_METRICS.to_string());
    let run = run_plan(&dir, "vllm", &llama_plan(&url), &[], 0);
    let r = read_json(&first_result(&run));
    let sd = &r["benchplan"]["speculative_decoding"];
    assert_eq!(sd["requests"], 4, "{sd:#}");
    assert!((sd["acceptance_rate"].as_f64().unwrap() - 1000.0 / 129.0).abs() < 1e-9);
    assert!((sd["acceptance_length"].as_f64().unwrap() - (1.0 + 10.0 / 43.0)).abs() < 1e-9);
    assert_eq!(
        sd["acceptance_histogram"],
        serde_json::json!([156, 4, 0, 12])
    );
    let t = &r["benchplan"]["server_timings"];
    assert_eq!(t["mean_server_ttft_ms"].as_f64(), Some(12.5), "{t:#}");
    assert_eq!(t["mean_server_queue_ms"].as_f64(), Some(2.5));
    assert_eq!(t["mean_server_prefill_ms"].as_f64(), Some(10.0));
    assert_eq!(t["mean_server_generation_ms"].as_f64(), Some(30.0));

    // Hostile: wrong types, negatives, Python's NaN and Infinity, counts that cannot
    // be true, and a 10 MB object. Every request still succeeds; values are skipped
    // or counted as rejected.
    let huge = format!(
        r#","metrics":{{"time_to_first_token_ms":"{}","speculative_decoding":{{"acceptance_histogram":[{}1]}}}}"#,
        "x".repeat(5 << 20),
        "1,".repeat(2 << 20)
    );
    let cases: Vec<(&str, String)> = vec![
        ("types", r#","metrics":{"time_to_first_token_ms":"fast","speculative_decoding":"many"}"#.into()),
        ("not-an-object", r#","metrics":[1,2]"#.into()),
        ("nan", r#","metrics":{"time_to_first_token_ms":NaN,"queue_time_ms":-Infinity,"speculative_decoding":{"num_spec_steps":NaN,"num_draft_tokens":9,"num_accepted_draft_tokens":3}}"#.into()),
        ("negative", r#","metrics":{"time_to_first_token_ms":-3.0,"speculative_decoding":{"num_spec_steps":-1,"num_draft_tokens":-9,"num_accepted_draft_tokens":3}}"#.into()),
        ("impossible", r#","metrics":{"speculative_decoding":{"num_spec_steps":3,"num_draft_tokens":9,"num_accepted_draft_tokens":12,"acceptance_histogram":[0,0,0,3]}}"#.into()),
        ("huge", huge),
    ];
    for (tag, fields) in cases {
        let url = final_chunk_server(fields);
        let run = run_plan(&dir, tag, &llama_plan(&url), &[], 0);
        let r = read_json(&first_result(&run));
        assert_eq!(r["completed"], 4, "{tag}: {r:#}");
        let t = &r["benchplan"]["server_timings"];
        let sd = &r["benchplan"]["speculative_decoding"];
        match tag {
            // NaN reads as absent (null); the steps being absent, the rate stands.
            "nan" => {
                assert!(t.is_null(), "{tag}: {t:#}");
                assert_eq!(sd["requests"], 4, "{tag}: {sd:#}");
                assert!((sd["acceptance_rate"].as_f64().unwrap() - 100.0 / 3.0).abs() < 1e-9);
            }
            "negative" => {
                assert_eq!(t["rejected"], 4, "{tag}: {t:#}");
                assert!(sd.is_null(), "{tag}: {sd:#}");
            }
            "impossible" => {
                assert_eq!(
                    (sd["requests"].as_u64(), sd["rejected"].as_u64()),
                    (Some(0), Some(4)),
                    "{tag}: {sd:#}"
                );
                let warnings = r["benchplan"]["warnings"].to_string();
                assert!(warnings.contains("cannot be true"), "{warnings}");
            }
            _ => {
                assert!(t.is_null(), "{tag}: {t:#}");
                assert!(sd.is_null(), "{tag}: {sd:#}");
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The simulator asked for its timings by a plan that says so; a server that ignores
/// the ask is named (here: the plan asks, the scripted server never sends them).
#[test]
fn an_ask_the_server_ignores_is_said() {
    let dir = tempdir("spec-ignored");
    let url = final_chunk_server(String::new());
    let plan = llama_plan(&url).replace("[defaults]\n", "[defaults]\nserver_timings = true\n");
    let run = run_plan(&dir, "r", &plan, &[], 0);
    let r = read_json(&first_result(&run));
    assert_eq!(r["benchplan"]["server_timings"]["asked"], true);
    let warnings = r["benchplan"]["warnings"].to_string();
    assert!(warnings.contains("does not honour it"), "{warnings}");
    std::fs::remove_dir_all(&dir).ok();
}
