//! The commands that send no traffic, run in this process through `cli::run` (as oha
//! tests its command line): their exit codes and what they write, without a spawn.

use std::path::{Path, PathBuf};

use benchplan::cli::{Cli, run};
use benchplan::exit::Exit;

use crate::support::tempdir;

/// `benchplan ARGS` in this process; a usage error is the bad-plan exit, as `main` maps it.
fn cli(args: &[&str]) -> Exit {
    match Cli::parse_from_args(std::iter::once("benchplan").chain(args.iter().copied())) {
        Ok(c) => run(c),
        Err(e) if e.use_stderr() => Exit::BadPlan,
        Err(_) => Exit::Ok,
    }
}

/// A plain `vllm bench serve` result: the keys vLLM writes, no benchplan block.
fn vllm_result(tpot_ms: f64) -> String {
    serde_json::json!({
        "date": "20261207-100000", "backend": "vllm", "model_id": "m",
        "num_prompts": 20, "request_rate": "inf", "max_concurrency": 4,
        "duration": 2.0, "completed": 20, "failed": 0,
        "total_input_tokens": 2000, "total_output_tokens": 640,
        "request_throughput": 10.0, "output_throughput": 320.0 / (tpot_ms / 2.0).max(1.0),
        "total_token_throughput": 1320.0,
        "mean_ttft_ms": 20.0, "median_ttft_ms": 20.0, "std_ttft_ms": 1.0, "p99_ttft_ms": 22.0,
        "mean_tpot_ms": tpot_ms, "median_tpot_ms": tpot_ms, "std_tpot_ms": 0.1,
        "p99_tpot_ms": tpot_ms * 1.1,
        "mean_itl_ms": tpot_ms, "median_itl_ms": tpot_ms, "std_itl_ms": 0.1,
        "p99_itl_ms": tpot_ms * 1.2,
        "mean_e2el_ms": 20.0 + 31.0 * tpot_ms, "median_e2el_ms": 20.0 + 31.0 * tpot_ms,
        "std_e2el_ms": 1.0, "p99_e2el_ms": 25.0 + 31.0 * tpot_ms,
    })
    .to_string()
}

/// Two folders `base` and `cand` under `dir`, each holding one plain vLLM result
/// (`c4.json`) with the TPOT given.
fn two_folders(dir: &Path, base_tpot: f64, cand_tpot: f64) -> (PathBuf, PathBuf) {
    let (base, cand) = (dir.join("base"), dir.join("cand"));
    for (d, tpot) in [(&base, base_tpot), (&cand, cand_tpot)] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("c4.json"), vllm_result(tpot)).unwrap();
    }
    (base, cand)
}

#[test]
fn validate_and_cases_judge_a_plan_without_a_process() {
    assert_eq!(cli(&["validate", "plans/compare.yaml"]), Exit::Ok);
    assert_eq!(
        cli(&["cases", "plans/length-sweep.toml", "--json"]),
        Exit::Ok
    );
    assert_eq!(
        cli(&["validate", "plans/does-not-exist.toml"]),
        Exit::BadPlan
    );
    // A usage error, and a plan with an unknown key.
    assert_eq!(cli(&["validate"]), Exit::BadPlan);
    let dir = tempdir("inproc-validate");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[defaults]\nmax_concurency = 4\n").unwrap();
    assert_eq!(cli(&["validate", bad.to_str().unwrap()]), Exit::BadPlan);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn init_writes_a_plan_that_validates_and_never_overwrites_one() {
    let dir = tempdir("inproc-init");
    let plan = dir.join("benchplan.toml");
    let p = plan.to_str().unwrap();
    assert_eq!(cli(&["init", p]), Exit::Ok);
    let written = std::fs::read_to_string(&plan).unwrap();
    assert_eq!(cli(&["validate", p]), Exit::Ok);
    // A second init without --force leaves the plan as it was.
    assert_ne!(cli(&["init", p]), Exit::Ok);
    assert_eq!(std::fs::read_to_string(&plan).unwrap(), written);
    assert_eq!(cli(&["init", p, "--force"]), Exit::Ok);
    // Both starter plans, the simulator's and a server's, validate with no warning.
    use benchplan::commands::init::{Service, starter_plan};
    let server = Service::Server {
        base_url: "http://127.0.0.1:8000".into(),
        model: "m".into(),
        tokenizer: Some("server".into()),
    };
    for service in [Service::Sim, server] {
        let planned = crate::support::plan_toml(&starter_plan(&service, "benchplan.toml"));
        assert!(planned.warnings.is_empty(), "{:?}", planned.warnings);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn report_and_compare_read_vllm_results_without_a_process() {
    let dir = tempdir("inproc-report");
    let (base, cand) = two_folders(&dir, 1.0, 8.0);
    let (b, c) = (base.to_str().unwrap(), cand.to_str().unwrap());
    // A folder benchplan did not write is written into only with --out.
    assert_eq!(cli(&["report", b]), Exit::BadPlan);
    assert!(!base.join("report.md").exists());
    let out = dir.join("rep");
    assert_eq!(
        cli(&["report", b, "--out", out.to_str().unwrap()]),
        Exit::Ok
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("c4"), "{md}");
    // TPOT eight times slower: a regression; the same folder against itself is not.
    assert_eq!(cli(&["compare", b, c]), Exit::Regression);
    assert_eq!(cli(&["compare", b, b]), Exit::Ok);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn schema_completions_and_man_print_without_a_process() {
    assert_eq!(cli(&["schema"]), Exit::Ok);
    assert_eq!(cli(&["completions", "bash"]), Exit::Ok);
    let dir = tempdir("inproc-man");
    assert_eq!(cli(&["man", "--dir", dir.to_str().unwrap()]), Exit::Ok);
    assert!(dir.join("benchplan.1").is_file() && dir.join("benchplan-run.1").is_file());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn compare_judges_with_the_plans_own_thresholds_when_the_folders_carry_them() {
    let dir = tempdir("inproc-compare-plan");
    // TPOT 4% slower: within the default 5%, beyond this plan's 3%.
    let (base, cand) = two_folders(&dir, 10.0, 10.4);
    let (b, c) = (base.to_str().unwrap(), cand.to_str().unwrap());
    assert_eq!(cli(&["compare", b, c]), Exit::Ok);
    let plan = r#"{"plan": {"report": {"regression_threshold": "3%"}}}"#;
    std::fs::write(cand.join("plan.resolved.json"), plan).unwrap();
    assert_eq!(cli(&["compare", b, c]), Exit::Regression);
    // A flag still wins over the plan.
    assert_eq!(cli(&["compare", b, c, "--threshold", "5%"]), Exit::Ok);
    std::fs::remove_dir_all(&dir).ok();
}
