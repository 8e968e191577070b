//! Energy over the measured window, against the simulator's power model: each of its
//! GPUs draws `idle_watts`, and each running sequence adds `watts_per_sequence` over
//! them, served as a DCGM exporter's energy counter. In the steady window of a closed
//! loop of 4 the model draws 2 × 100 + 4 × 50 = 400 W exactly; idle time before the
//! case (200 W) and its ramp and drain must not be in the figure.

use crate::support::{SimProcess, read_json, tempdir};
use crate::window::run_plan;

/// ground-truth: prefill 20 ms, ITL 10 ms, no jitter; 48 requests of 32 tokens, 4 at
/// a time: about 4 s, most of it steady with 4 running.
fn plan(service: &str) -> String {
    format!(
        r#"
[services.s]
{service}
energy = {{ dcgm = "/metrics", interval = "100ms" }}
[defaults]
dataset = {{ name = "random", input_len = 16, output_len = 32 }}
ignore_eos = true
num_prompts = 48
max_concurrency = 4
"#
    )
}

#[test]
fn joules_are_the_power_models_integral_over_the_steady_window_only() {
    let _cpu = crate::support::heavy();
    let sim = SimProcess::start(&[
        "--preset",
        "ground-truth",
        "--set",
        "idle_watts=100",
        "--set",
        "watts_per_sequence=50",
        "--set",
        "gpus=2",
    ]);
    // Five seconds of idle (200 W, 1000 J on the counters) before the case.
    std::thread::sleep(std::time::Duration::from_secs(5));
    let dir = tempdir("energy");
    let service = format!("base_url = \"{}\"\ntokenizer = \"server\"", sim.url);
    let run = run_plan(&dir, "r", &plan(&service), &[], 0);
    let file = crate::server_timings::first_result(&run);
    let r = read_json(&file);
    let e = &r["benchplan"]["energy"];
    assert_eq!(e["window"], "steady", "{e:#}");
    assert_eq!(e["gpus"].as_array().unwrap().len(), 2, "{e:#}");
    let watts = e["mean_watts"].as_f64().unwrap();
    assert!(
        (watts - 400.0).abs() / 400.0 < 0.01,
        "mean {watts} W: {e:#}"
    );
    let (joules, window_s) = (
        e["joules"].as_f64().unwrap(),
        e["window_s"].as_f64().unwrap(),
    );
    assert!((joules - watts * window_s).abs() < 1e-6);
    let steady = &r["benchplan"]["steady"]["window"];
    assert_eq!(e["window_start_s"], steady["start_s"], "{steady}");
    assert_eq!(e["window_end_s"], steady["end_s"]);
    for g in e["gpus"].as_array().unwrap() {
        assert_eq!(g["method"], "counter", "{g}");
        assert!(
            (g["mean_watts"].as_f64().unwrap() - 200.0).abs() < 2.0,
            "{g}"
        );
    }
    // Per token: the joules over the window's own output tokens.
    let out_tps = r["benchplan"]["steady"]["output_throughput"]
        .as_f64()
        .unwrap();
    let per = e["joules_per_output_token"].as_f64().unwrap();
    assert!((per - joules / (out_tps * window_s)).abs() < 1e-9, "{per}");
    assert!((per * e["output_tokens_per_joule"].as_f64().unwrap() - 1.0).abs() < 1e-9);
    std::fs::remove_dir_all(&dir).ok();
}

/// A page without the series: the case runs on, and its result and warning name the
/// series and the URL.
#[test]
fn a_page_without_the_series_is_said_and_the_run_goes_on() {
    let dir = tempdir("energy-missing");
    let run = run_plan(
        &dir,
        "r",
        &plan("sim = { preset = \"fast\" }").replace("num_prompts = 48", "num_prompts = 4"),
        &[],
        0,
    );
    let r = read_json(&crate::server_timings::first_result(&run));
    assert_eq!(r["completed"], 4);
    let e = &r["benchplan"]["energy"];
    assert!(e["joules"].is_null(), "{e:#}");
    let warnings = r["benchplan"]["warnings"].to_string();
    assert!(
        warnings.contains("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") && warnings.contains("/metrics"),
        "{warnings}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Energy and cost are compared like any metric: the same load drawing twice the
/// power per sequence is an energy regression (exit 4) and no cost one (the price
/// per hour did not move); summary.csv has both blocks' columns.
#[test]
fn an_energy_regression_is_a_regression() {
    let dir = tempdir("energy-compare");
    let text = r#"
[services.sim]
sim = { preset = "ground-truth", idle_watts = 10, watts_per_sequence = 100 }
energy = { dcgm = "/metrics", interval = "50ms" }
cost = { per_hour = 2.0, currency = "EUR" }
[defaults]
dataset = { name = "random", input_len = 16, output_len = 16 }
ignore_eos = true
num_prompts = 24
max_concurrency = 2
[report]
charts = false
compare_metrics = ["energy_joules_per_output_token", "cost_per_million_output_tokens"]
"#;
    let base = run_plan(&dir, "base", text, &[], 0);
    let csv = std::fs::read_to_string(base.join("summary.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    for col in [
        "energy_joules",
        "energy_joules_per_output_token",
        "cost_per_million_output_tokens",
        "cost_currency",
    ] {
        assert!(header.split(',').any(|c| c == col), "no {col} in {header}");
    }
    let baseline = format!("report.baseline={}", base.display());
    let hungrier = "services.sim.sim.watts_per_sequence=200";
    let run = run_plan(
        &dir,
        "hungrier",
        text,
        &["--set", &baseline, "--set", hungrier],
        4,
    );
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    let row = |key: &str| {
        md.lines()
            .rfind(|l| l.contains(key) && l.starts_with('|'))
            .unwrap_or_else(|| panic!("no {key} row in {md}"))
            .to_string()
    };
    assert!(
        row("energy_joules_per_output_token").contains("REGRESSION"),
        "{md}"
    );
    assert!(
        !row("cost_per_million_output_tokens").contains("REGRESSION"),
        "{md}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
