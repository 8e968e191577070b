//! SLO searches against simulators whose capacity follows from their model.

use serde_json::Value;

use crate::support::{benchplan, stderr};

fn search(name: &str, plan: &str) -> Value {
    let dir = std::env::temp_dir().join(format!("benchplan-opt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plan.toml");
    std::fs::write(&path, plan).unwrap();
    let out = benchplan(&[
        "optimize",
        path.to_str().unwrap(),
        "--results-dir",
        dir.join("r").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let opt = std::fs::read_dir(dir.join("r/optimize"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let cell = std::fs::read_dir(&opt)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    // The evidence at the answer: every target and actual with its unit, every floor
    // measured (none is `-`).
    let md = std::fs::read_to_string(opt.join("report.md")).unwrap();
    {
        let evidence = md
            .split("SLO evidence at the answer:")
            .nth(1)
            .unwrap_or_else(|| panic!("no evidence table: {md}"));
        let table: Vec<&str> = evidence
            .lines()
            .skip_while(|l| !l.starts_with("| SLO"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .collect();
        assert!(!table.is_empty(), "{md}");
        for row in table {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let (target, actual) = (cells[2], cells[3]);
            assert!(actual != "-", "{row}");
            let unit = target.trim_start_matches(|c: char| !c.is_ascii_digit());
            let unit = unit.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
            assert!(actual.ends_with(unit), "{row}: `{actual}` lacks `{unit}`");
        }
    }
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(cell.join("optimization_report.json")).unwrap(),
    )
    .unwrap();
    // The answer is a value that was measured and passed, and its file is in the archive.
    let answer = report["optimal_value"].as_f64().expect("an answer");
    let archived = |f: &str| {
        [
            cell.join(f),
            cell.join("stage1").join(f),
            cell.join("stage2").join(f),
        ]
        .iter()
        .any(|p| p.is_file())
    };
    let evidence = report["exploration_history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["value"].as_f64() == Some(answer) && s["slo_pass"] == true);
    let file = evidence.expect("the answer appears in the history as a passing run")["file"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(archived(&file), "{file} archived");
    assert!(opt.join("report.md").is_file());
    // The search history as a chart: one marker per probe, linked from report.md.
    let chart = report["chart"].as_str().expect("a search chart");
    let md = std::fs::read_to_string(opt.join("report.md")).unwrap();
    assert!(
        md.contains(&format!("]({chart})")),
        "report.md links {chart}"
    );
    let svg = std::fs::read_to_string(opt.join(chart)).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("the chart is XML");
    let steps = report["exploration_history"].as_array().unwrap();
    let markers: Vec<_> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "circle")
        .collect();
    // One marker per probe, and the legend's two (met, failed) in its strip.
    assert_eq!(markers.len(), steps.len() + 2, "one marker per probe");
    crate::reports::legend_clear(chart, &doc, &["met every SLO", "failed one"]);
    let fails = markers
        .iter()
        .filter(|m| m.attribute("fill") == Some("#D55E00"))
        .count();
    let failed_steps = steps.iter().filter(|s| s["slo_pass"] == false).count();
    assert_eq!(fails, failed_steps + 1, "failed probes drawn as failed");
    let runs = report["runs"].as_u64().unwrap();
    eprintln!(
        "{name}: answer {answer} in {runs} runs, {:.1} s",
        report["total_seconds"].as_f64().unwrap()
    );
    std::fs::remove_dir_all(&dir).ok();
    report
}

/// A simulator whose steps slow with the batch: load factor 1 + (f - 1)(c - 1)/20 on a
/// 1 ms step, so mean TPOT = 1 + (f - 1)(c - 1)/20 ms at concurrency c, under an SLO of
/// mean TPOT <= 11.4 ms. Why these numbers: the SLO must sit clear of neighbouring
/// concurrencies (f = 21 gives TPOT = c, 11 and 12 ms, 9% apart), and the mean TPOT a
/// client measures at c sits a little *below* the model because each finished request
/// leaves its slot empty until the client sends the next one; a busy machine refills
/// late (an earlier model with 2.5% between c = 11 and 12 answered 12 under load). Ten
/// steps a request keep the empty slot a small share of the time; the SLO sits nearer
/// the lower value since that is the side the measurement leans to.
fn tpot_model(factor: f64) -> String {
    format!(
        "[services.s]\nsim = {{ preset = \"ground-truth\", itl = \"1ms\", prefill_overhead = \"1ms\", max_num_seqs = 21, time_factor_under_load = {factor} }}\n\
         [defaults]\ndataset = {{ name = \"random\", input_len = 8, output_len = 11 }}\n[slo]\nmean_tpot = \"<= 11.4ms\"\n"
    )
}

const BUDGET: &str = "warmup_prompts = 20\nprobe = { multiplier = 3, floor = 30 }\nbisect = { multiplier = 4, floor = 40 }\nvalidation = { multiplier = 6, floor = 60 }\n";

#[test]
fn mode_a_max_concurrency_under_a_tpot_slo() {
    let _cpu = crate::support::heavy();
    // Load factor 1 + (21 - 1)(c - 1)/(21 - 1) = c on a 1 ms step: mean TPOT = c ms.
    // TPOT <= 11.4 ms holds up to c = 11 and breaks at 12: the answer is 11.
    let report = search(
        "a",
        &format!(
            "{}[optimize]\nsearch = \"max_concurrency\"\nmin = 1\nmax = 64\n{BUDGET}",
            tpot_model(21.0)
        ),
    );
    let answer = report["optimal_value"].as_f64().unwrap();
    assert!(
        (10.0..=11.0).contains(&answer),
        "expected 11 (within 5%), got {answer}"
    );
    assert_eq!(report["ending"], "validated");
    // Every pass's margin is its TPOT room, (11.4 - c) / 11.4, not the success rate's 100%
    // above the implied 95% floor (5.3% on every run, which also sat inside the noise band
    // and reran every point three times).
    for s in report["exploration_history"].as_array().unwrap() {
        let c = s["value"].as_f64().unwrap();
        if s["slo_pass"] == true && c <= 4.0 {
            let m = s["margin"].as_f64().unwrap();
            let want = (11.4 - c) / 11.4;
            assert!(
                (m - want).abs() < 0.15,
                "c={c}: margin {m}, TPOT room {want}"
            );
        }
    }
}

#[test]
fn every_search_run_sees_prompts_the_server_has_not_cached() {
    let _cpu = crate::support::heavy();
    // Mode A's model with the simulator's prefix cache on and prompts long enough to
    // fill cache blocks: reused prompts would be served from the cache on every rerun.
    let plan = format!(
        "{}[optimize]\nsearch = \"max_concurrency\"\nmin = 1\nmax = 64\n{BUDGET}",
        tpot_model(21.0)
            .replace(
                "max_num_seqs = 21",
                "max_num_seqs = 21, enable_prefix_caching = true"
            )
            .replace("input_len = 8", "input_len = 64")
    );
    let dir = std::env::temp_dir().join(format!("benchplan-opt-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plan.toml");
    std::fs::write(&path, plan).unwrap();
    let out = benchplan(&[
        "optimize",
        path.to_str().unwrap(),
        "--results-dir",
        dir.join("r").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut runs = 0;
    let mut stack = vec![dir.join("r/optimize")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".json") || name == "optimization_report.json" {
                continue;
            }
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            runs += 1;
            // A rerun of cached prompts would be served 48 of its 64 tokens a request from
            // the cache; what remains is two prompts of one run that happen to start at
            // the same token (vLLM's random prompts are runs of consecutive ids).
            let cached = v["benchplan"]["cached_tokens"].as_u64().unwrap();
            let input = v["total_input_tokens"].as_u64().unwrap();
            assert!(
                cached * 10 < input,
                "{name}: {cached} of {input} input tokens came from the prefix cache"
            );
            let ids: Vec<&str> = v["benchplan"]["deviations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["id"].as_str().unwrap())
                .collect();
            assert!(ids.contains(&"prefix_cache_reset"), "{name}: {ids:?}");
        }
    }
    assert!(runs >= 5, "{runs} runs archived");
    let report = std::fs::read_dir(dir.join("r/optimize"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let cell = std::fs::read_dir(&report)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    let r: Value = serde_json::from_str(
        &std::fs::read_to_string(cell.join("optimization_report.json")).unwrap(),
    )
    .unwrap();
    let answer = r["optimal_value"].as_f64().unwrap();
    assert!(
        (10.0..=11.0).contains(&answer),
        "expected 11 (within 5%), got {answer}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn mode_b_request_rate_below_saturation() {
    let _cpu = crate::support::heavy();
    // Two slots, each request 4 + 4 x 4 = 20 ms: capacity 2 / 0.020 s = 100 req/s. Below it
    // TTFT stays near 4 ms; above it the queue grows for the whole run. The SLO is on p90
    // for the reason given at mode C (p99 of a short run is one machine stall).
    let report = search(
        "b",
        &format!(
            "[services.s]\nsim = {{ preset = \"ground-truth\", itl = \"4ms\", prefill_overhead = \"4ms\", max_num_seqs = 2 }}\n\
             [defaults]\ndataset = {{ name = \"random\", input_len = 8, output_len = 5 }}\nburstiness = 1000.0\n[slo]\np90_ttft = \"<= 40ms\"\n\
             [optimize]\nsearch = \"request_rate\"\nmin = 10\nmax = 400\n{}",
            BUDGET
                .replace("multiplier = 3", "multiplier = 1")
                .replace("multiplier = 4", "multiplier = 1.5")
                .replace("multiplier = 6", "multiplier = 2")
        ),
    );
    let answer = report["optimal_value"].as_f64().unwrap();
    assert!(
        (90.0..=105.0).contains(&answer),
        "expected about 100 req/s, got {answer}"
    );
}

#[test]
fn mode_d_smallest_concurrency_that_sustains_a_rate() {
    let _cpu = crate::support::heavy();
    // At 100 req/s with 15 ms per request, Little's law needs 100 x 0.015 = 1.5 in flight:
    // one slot carries 66 req/s, two carry 133. The answer is 2.
    let report = search(
        "d",
        &format!(
            "[services.s]\nsim = {{ preset = \"ground-truth\", itl = \"3ms\", prefill_overhead = \"3ms\", max_num_seqs = 16 }}\n\
             [defaults]\ndataset = {{ name = \"random\", input_len = 8, output_len = 5 }}\nburstiness = 1000.0\n[slo]\nsuccess_rate = \">= 99%\"\n\
             [optimize]\nsearch = \"max_concurrency\"\nrequest_rate = 100\nmin = 1\nmax = 64\n{}",
            BUDGET
                .replace("multiplier = 3", "multiplier = 0.1")
                .replace("multiplier = 4", "multiplier = 0.1")
                .replace("multiplier = 6", "multiplier = 0.1")
        ),
    );
    assert_eq!(report["optimal_value"].as_f64(), Some(2.0), "{report}");
}

#[test]
fn a_search_that_cannot_meet_its_slo_at_the_minimum_exits_3() {
    let dir = std::env::temp_dir().join(format!("benchplan-opt-min-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plan.toml");
    std::fs::write(
        &path,
        "[services.s]\nsim = { preset = \"ground-truth\" }\n[defaults]\ndataset = { name = \"random\", input_len = 8, output_len = 4 }\n\
         [slo]\np99_ttft = \"<= 5ms\"\n[optimize]\nsearch = \"max_concurrency\"\nwarmup_prompts = 10\n",
    )
    .unwrap();
    let out = benchplan(&[
        "optimize",
        path.to_str().unwrap(),
        "--results-dir",
        dir.join("r").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(crate::support::stdout(&out).contains("cannot meet the SLOs even at the minimum load"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn mode_c_rate_under_a_fixed_concurrency_and_mode_e_two_stages() {
    let _cpu = crate::support::heavy();
    // C: two slots of 20 ms (100 req/s) behind a client cap of 4. Above 100 req/s the
    // server queue holds up to two requests, so TTFT jumps from ~4 ms to ~24 ms for most
    // requests. The SLO is on p90: a p99 over a short run is decided by one stall of a
    // shared machine (seen in CI: a run at ~90 req/s failed on it, answer 82.9). On a busy
    // 2-core runner the simulator's own sleeps overshoot, so the knee it serves moves down
    // to ~87 req/s (seen in CI); a search that failed would land near 10 or 400.
    let sim = "[services.s]\nsim = { preset = \"ground-truth\", itl = \"4ms\", prefill_overhead = \"4ms\", max_num_seqs = 2 }\n\
               [defaults]\ndataset = { name = \"random\", input_len = 8, output_len = 5 }\nburstiness = 1000.0\n[slo]\np90_ttft = \"<= 15ms\"\n";
    let budget = BUDGET
        .replace("multiplier = 3", "multiplier = 1")
        .replace("multiplier = 4", "multiplier = 1.5")
        .replace("multiplier = 6", "multiplier = 2");
    let report = search(
        "c",
        &format!(
            "{sim}[optimize]\nsearch = \"request_rate\"\nmax_concurrency = 4\nmin = 10\nmax = 400\n{budget}"
        ),
    );
    let answer = report["optimal_value"].as_f64().unwrap();
    assert!(
        (80.0..=105.0).contains(&answer),
        "expected about 100 req/s, got {answer}"
    );
    // E: concurrency first, then the rate at that concurrency, then a look around.
    let small = "warmup_prompts = 5\nprobe = { multiplier = 1, floor = 10 }\nbisect = { multiplier = 1, floor = 10 }\nvalidation = { multiplier = 1, floor = 10 }\n";
    let report = search(
        "e",
        &format!("{sim}[optimize]\nsearch = \"both\"\nmin = 2\nmax = 8\n{small}"),
    );
    assert!(report["concurrency_stage1"].as_f64().is_some(), "{report}");
    assert_eq!(
        report["neighbourhood"].as_array().unwrap().len(),
        3,
        "{report}"
    );
}

/// The answer of the one search cell under an `optimize/<run>` folder.
fn answer_in(run: &std::path::Path) -> f64 {
    let cell = std::fs::read_dir(run)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .expect("a search cell folder");
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(cell.join("optimization_report.json")).unwrap(),
    )
    .unwrap();
    report["optimal_value"].as_f64().expect("an answer")
}

#[test]
fn a_lower_answer_than_the_baseline_search_exits_4() {
    let _cpu = crate::support::heavy();
    let dir = std::env::temp_dir().join(format!("benchplan-opt-base-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let results = dir.join("r");
    let plan = |factor: f64, baseline: &str| {
        format!(
            "{}[optimize]\nsearch = \"max_concurrency\"\nmin = 1\nmax = 64\n{baseline}{BUDGET}",
            tpot_model(factor)
        )
    };
    let run = |text: String| {
        let path = dir.join("plan.toml");
        std::fs::write(&path, text).unwrap();
        benchplan(&[
            "optimize",
            path.to_str().unwrap(),
            "--results-dir",
            results.to_str().unwrap(),
        ])
    };
    let out = run(plan(21.0, ""));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let latest = results.join("optimize/latest");
    // The baseline is whatever the first search measured: 11 by the model (10 is within
    // the 5% the searches allow).
    let first = answer_in(&latest);
    assert!((10.0..=11.0).contains(&first), "first answer {first}");
    std::thread::sleep(std::time::Duration::from_millis(1100)); // a new folder name
    // A steeper slowdown under load: mean TPOT = 2c - 1 ms, so the answer falls to 6.
    let out = run(plan(
        41.0,
        &format!("baseline = \"{}\"\n", latest.display()),
    ));
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let second = answer_in(&results.join("optimize/latest"));
    assert!((5.0..=6.0).contains(&second), "second answer {second}");
    assert!(
        crate::support::stdout(&out).contains(&format!("Baseline answer {first:.1}")),
        "{}",
        crate::support::stdout(&out)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn run_runs_the_matrix_then_the_searches() {
    let _cpu = crate::support::heavy();
    let dir = std::env::temp_dir().join(format!("benchplan-opt-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plan.toml");
    std::fs::write(
        &path,
        format!(
            "{}[optimize]\nsearch = \"max_concurrency\"\nmin = 1\nmax = 64\n{BUDGET}",
            tpot_model(21.0).replace("[slo]", "num_prompts = 5\n[slo]")
        ),
    )
    .unwrap();
    // The matrix case sends its 5 prompts at once (5 in flight: TPOT 5 ms, within the SLO).
    let out = benchplan(&[
        "run",
        path.to_str().unwrap(),
        "--results-dir",
        dir.join("r").to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        dir.join("r/batch/latest/report.md").is_file(),
        "the matrix ran"
    );
    assert!(
        dir.join("r/optimize/latest/report.md").is_file(),
        "then the search"
    );
    let text = crate::support::stdout(&out);
    assert!(
        text.contains("# Benchmark report") && text.contains("# SLO search"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
