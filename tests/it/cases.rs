//! Matrix expansion: counts, the documented order, include/zip, stable ids, resolution.

use serde_json::Value;

use crate::support::{benchplan, plan_toml, stdout};

const TWO_SERVICES: &str = r#"
[services.a]
sim = { preset = "fast" }
[services.b]
base_url = "http://127.0.0.1:9"
backend = "openai-chat"

[matrix]
max_concurrency = [1, 2, 4]
[[matrix.exclude]]
service = "b"
max_concurrency = 2
"#;

fn summary(p: &benchplan::planner::Planned) -> Vec<(String, Option<u64>)> {
    p.cases
        .iter()
        .map(|c| (c.service.clone(), c.params.max_concurrency))
        .collect()
}

#[test]
fn services_outer_axes_row_major_with_exclude() {
    let p = plan_toml(TWO_SERVICES);
    let got = summary(&p);
    let want = vec![
        ("a".to_string(), Some(1)),
        ("a".to_string(), Some(2)),
        ("a".to_string(), Some(4)),
        ("b".to_string(), Some(1)),
        ("b".to_string(), Some(4)),
    ];
    assert_eq!(got, want);
    // Backend and endpoint are resolved: the case's, else the service's, else vLLM's default.
    assert_eq!(
        p.cases[0].params.endpoint.as_deref(),
        Some("/v1/completions")
    );
    assert_eq!(
        p.cases[3].params.endpoint.as_deref(),
        Some("/v1/chat/completions")
    );
}

#[test]
fn cases_json_is_stable_across_runs() {
    let dir = std::env::temp_dir().join(format!("benchplan-cases-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("two.toml");
    std::fs::write(&path, TWO_SERVICES).unwrap();
    let path = path.to_str().unwrap();
    let first = benchplan(&["cases", path, "--json"]);
    let second = benchplan(&["cases", path, "--json"]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(stdout(&first), stdout(&second));
    let cases: Vec<Value> = serde_json::from_str(&stdout(&first)).unwrap();
    assert_eq!(cases.len(), 5);
    let ids: Vec<&str> = cases.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert!(
        ids[0].starts_with("a-c1-") && ids[4].starts_with("b-c4-"),
        "{ids:?}"
    );
    for c in &cases {
        assert!(c["service"].is_string() && c["params"]["dataset"]["name"] == "random");
        assert_eq!(
            c.as_object().unwrap().len(),
            3,
            "each case is {{id, service, params}}"
        );
    }
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn ids_are_a_pure_function_of_the_resolved_parameters() {
    // Writing a default explicitly changes nothing; changing a value changes the hash.
    let a = plan_toml("[matrix]\nmax_concurrency = [4]\n");
    let b = plan_toml("[defaults]\nnum_prompts = 1000\n[matrix]\nmax_concurrency = [4]\n");
    let c = plan_toml("[defaults]\nnum_prompts = 999\n[matrix]\nmax_concurrency = [4]\n");
    assert_eq!(a.cases[0].id, b.cases[0].id);
    assert_ne!(a.cases[0].id, c.cases[0].id);
    assert!(a.cases[0].id.starts_with("sim-c4-"));
}

#[test]
fn zip_groups_vary_together_at_their_first_axis() {
    let p = plan_toml(
        "[matrix]\n\"dataset.input_len\" = [128, 1024]\nmax_concurrency = [1, 8]\n\"dataset.output_len\" = [64, 16]\nzip = [[\"dataset.input_len\", \"dataset.output_len\"]]\n",
    );
    let got: Vec<(u64, u64, u64)> = p
        .cases
        .iter()
        .map(|c| match &c.params.dataset {
            benchplan::plan::Dataset::Random(d) => {
                (d.input_len, d.output_len, c.params.max_concurrency.unwrap())
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        got,
        vec![(128, 64, 1), (128, 64, 8), (1024, 16, 1), (1024, 16, 8)]
    );
}

#[test]
fn include_adds_cases_after_the_product() {
    let p = plan_toml(
        "[services.x]\nsim = {}\n[services.y]\nsim = {}\n[matrix]\nmax_concurrency = [1]\n[[matrix.include]]\nmax_concurrency = 64\n[[matrix.include]]\nservice = \"y\"\nmax_concurrency = 128\n",
    );
    assert_eq!(
        summary(&p),
        vec![
            ("x".to_string(), Some(1)),
            ("y".to_string(), Some(1)),
            ("x".to_string(), Some(64)),
            ("y".to_string(), Some(64)),
            ("y".to_string(), Some(128)),
        ]
    );
}

#[test]
fn a_service_axis_sets_the_service_order() {
    let p = plan_toml(
        "[services.x]\nsim = {}\n[services.y]\nsim = {}\n[matrix]\nservice = [\"y\", \"x\"]\nnum_prompts = [10, 20]\n",
    );
    let got: Vec<(String, u64)> = p
        .cases
        .iter()
        .map(|c| (c.service.clone(), c.params.num_prompts))
        .collect();
    assert_eq!(
        got,
        vec![
            ("y".into(), 10),
            ("y".into(), 20),
            ("x".into(), 10),
            ("x".into(), 20)
        ]
    );
}

#[test]
fn slos_add_the_percentiles_and_metrics_they_judge() {
    let p = plan_toml("[slo]\n\"p99.9_ttft\" = \"<= 1s\"\np50_e2el = \"<= 2s\"\nmean_tpot = 50\n");
    let params = &p.cases[0].params;
    assert_eq!(params.metric_percentiles, vec![99.0, 99.9, 50.0]);
    let metrics: Vec<&str> = params
        .percentile_metrics
        .as_ref()
        .unwrap()
        .iter()
        .map(|m| m.name())
        .collect();
    assert_eq!(metrics, vec!["ttft", "tpot", "itl", "e2el"]);
    assert_eq!(
        params.ignore_eos,
        Some(true),
        "vLLM turns ignore_eos on for random data"
    );
}

#[test]
fn set_overrides_plan_values() {
    let out = benchplan(&[
        "cases",
        "plans/quickstart.toml",
        "--json",
        "--set",
        "defaults.num_prompts=7",
        "--set",
        "matrix.max_concurrency=[2, 3]",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cases: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(cases.len(), 2);
    assert_eq!(cases[0]["params"]["num_prompts"], 7);
    assert_eq!(cases[1]["params"]["max_concurrency"], 3);
}

#[test]
fn a_services_own_keys_win_over_defaults_and_the_matrix_wins_over_both() {
    use benchplan::plan::Backend;
    let p = crate::support::plan_toml(
        r#"
[services.chat]
sim = { preset = "tiny" }
backend = "openai-chat"
endpoint = "/proxy/v1/chat/completions"
[services.plain]
sim = { preset = "tiny" }
[defaults]
backend = "openai"
"#,
    );
    let by = |svc: &str| p.cases.iter().find(|c| c.service == svc).unwrap();
    assert_eq!(
        by("chat").params.backend,
        Some(Backend::OpenaiChat),
        "the service's backend wins over [defaults]"
    );
    assert_eq!(
        by("chat").params.endpoint.as_deref(),
        Some("/proxy/v1/chat/completions")
    );
    assert_eq!(
        by("plain").params.backend,
        Some(Backend::Openai),
        "[defaults] fills what the service leaves"
    );
    let m = crate::support::plan_toml(
        r#"
[services.chat]
sim = { preset = "tiny" }
backend = "openai-chat"
[matrix]
backend = ["openai"]
"#,
    );
    assert_eq!(
        m.cases[0].params.backend,
        Some(Backend::Openai),
        "a matrix value is the case's own"
    );
}
