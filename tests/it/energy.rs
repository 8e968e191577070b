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
    // With a second of idle measured before the case: 200 W.
    let text = plan(&service).replace(
        "interval = \"100ms\"",
        "interval = \"100ms\", idle = \"1s\"",
    );
    let run = run_plan(&dir, "r", &text, &[], 0);
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
    let idle = e["idle_watts"].as_f64().unwrap();
    assert!((idle - 200.0).abs() / 200.0 < 0.01, "idle {idle} W: {e:#}");
    let above = e["joules_above_idle"].as_f64().unwrap();
    assert!((above - (watts - idle) * window_s).abs() < 1e-6, "{e:#}");
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

/// A DCGM exporter written here, serving the page dcgm-exporter serves (the shape of
/// its README's sample, as in `energy::dcgm`'s test): counters rising at fixed watts
/// from its start, GPU 0 at 300 W, GPU 1 at 100 W (a MIG GPU whose two instances repeat
/// its counter), and GPU 0 of another host at 250 W. With `reset_at`, GPU 0's counter
/// starts again from 0 at that page (an exporter restart), its power gauge going on.
fn exporter(reset_at: Option<usize>) -> String {
    use crate::support::{read_request, scripted};
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let started = std::time::Instant::now();
    let pages = std::sync::Arc::new(AtomicUsize::new(0));
    let reset_t = std::sync::Arc::new(std::sync::Mutex::new(None::<f64>));
    scripted(move |_, s, _| {
        while read_request(s).is_some() {
            let n = pages.fetch_add(1, Ordering::SeqCst) + 1;
            let t = started.elapsed().as_secs_f64();
            let since = {
                let mut r = reset_t.lock().unwrap();
                if reset_at == Some(n) {
                    *r = Some(t);
                }
                r.unwrap_or(0.0)
            };
            let line = |name: &str, gpu: &str, uuid: &str, host: &str, mig: &str, v: f64| {
                format!(
                    "{name}{{gpu=\"{gpu}\",UUID=\"{uuid}\",device=\"nvidia{gpu}\",modelName=\"NVIDIA H100 80GB HBM3\",{mig}Hostname=\"{host}\",DCGM_FI_DRIVER_VERSION=\"550.90.07\"}} {v}\n"
                )
            };
            let (u0, u1, u2) = (
                "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",
                "GPU-8f6a3c1e-2b7d-4e59-a1c0-3d9e7f215b44",
                "GPU-1d2c3b4a-0000-4000-8000-00000000b000",
            );
            let (mig1, mig2) = (
                "GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"1\",",
                "GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"2\",",
            );
            let (p, e) = (
                "DCGM_FI_DEV_POWER_USAGE",
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            );
            let mut body = String::from(
                "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n",
            );
            body += &line(p, "0", u0, "node-a", "", 300.0);
            body += &line(p, "1", u1, "node-a", mig1, 100.0);
            body += &line(p, "1", u1, "node-a", mig2, 100.0);
            body += &line(p, "0", u2, "node-b", "", 250.0);
            body += "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).\n# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n";
            body += &line(e, "0", u0, "node-a", "", (300e3 * (t - since)).floor());
            let g1 = (5e10 + 100e3 * t).floor();
            body += &line(e, "1", u1, "node-a", mig1, g1);
            body += &line(e, "1", u1, "node-a", mig2, g1);
            body += &line(e, "0", u2, "node-b", "", (250e3 * t).floor());
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    })
    .0
}

fn exporter_plan(url: &str) -> String {
    format!(
        r#"
[services.s]
sim = {{ preset = "ground-truth" }}
energy = {{ dcgm = "{url}/metrics", interval = "100ms", gpus = ["node-a"] }}
[defaults]
dataset = {{ name = "random", input_len = 16, output_len = 32 }}
ignore_eos = true
num_prompts = 40
max_concurrency = 4
"#
    )
}

/// Two GPUs of host node-a, one MIG: 300 + 100 W, the MIG instances counted once and
/// node-b left out; then the same with GPU 0's counter restarting mid-case, which is
/// said and integrated from its power gauge instead.
#[test]
fn a_dcgm_exporters_gpus_are_counted_once_and_a_reset_is_said() {
    let dir = tempdir("energy-exporter");
    for (tag, reset) in [("steady", None), ("reset", Some(12))] {
        let url = exporter(reset);
        let run = run_plan(&dir, tag, &exporter_plan(&url), &[], 0);
        let r = read_json(&crate::server_timings::first_result(&run));
        let e = &r["benchplan"]["energy"];
        let gpus = e["gpus"].as_array().unwrap();
        assert_eq!(gpus.len(), 2, "{tag}: {e:#}");
        let watts = e["mean_watts"].as_f64().unwrap();
        assert!(
            (watts - 400.0).abs() / 400.0 < 0.01,
            "{tag}: {watts} W: {e:#}"
        );
        let g0 = &gpus[0];
        assert_eq!(g0["hostname"], "node-a");
        match reset {
            None => assert_eq!(g0["method"], "counter", "{g0}"),
            Some(_) => {
                assert_eq!(
                    (&g0["method"], &g0["counter_reset"]),
                    (&"power".into(), &true.into()),
                    "{e:#}"
                );
                let warnings = r["benchplan"]["warnings"].to_string();
                assert!(warnings.contains("went down"), "{warnings}");
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Prometheus itself (Debian's `prometheus`, which `.ci/run` installs), scraping the
/// simulator's DCGM series every 250 ms: benchplan asks it for the raw samples after
/// the case (`energy = { prometheus = … }`), as it would on Kubernetes. The steady
/// window's 400 W come back within the samples' resolution (3%).
#[test]
fn a_prometheus_server_holding_the_series_is_asked_after_the_case() {
    use std::process::{Command, Stdio};
    let Some(prom) = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
    else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the Prometheus test: .ci/run installs Debian's prometheus"
        );
        eprintln!("SKIPPED the Prometheus energy test: no prometheus (apt-get install prometheus)");
        return;
    };
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
    let dir = tempdir("energy-prometheus");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target = sim.url.trim_start_matches("http://");
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 250ms\n  scrape_timeout: 200ms\nscrape_configs:\n  - job_name: dcgm\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let mut child = Command::new(prom)
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
        .spawn()
        .expect("prometheus starts");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    // Until it has scraped the simulator's counter at least twice.
    let url = format!("http://127.0.0.1:{port}");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let q = crate::support::http_get(&format!(
            "{url}/api/v1/query?query=count_over_time(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION%5B10s%5D)"
        ));
        if q.contains("\"value\"") && !q.contains("\"1\"]") {
            break;
        }
        if let Ok(Some(s)) = child.try_wait() {
            panic!(
                "prometheus exited ({s}): {}",
                std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
            );
        }
        assert!(
            std::time::Instant::now() < until,
            "prometheus never scraped: {q}"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    let _prom = Kill(child);
    let plan = format!(
        r#"
[services.s]
base_url = "{}"
tokenizer = "server"
energy = {{ prometheus = "{url}", wait = "10s" }}
[defaults]
dataset = {{ name = "random", input_len = 16, output_len = 32 }}
ignore_eos = true
num_prompts = 96
max_concurrency = 4
"#,
        sim.url
    );
    let run = run_plan(&dir, "r", &plan, &[], 0);
    let r = read_json(&crate::server_timings::first_result(&run));
    let e = &r["benchplan"]["energy"];
    assert_eq!(e["window"], "steady", "{e:#}");
    assert_eq!(e["gpus"].as_array().unwrap().len(), 2, "{e:#}");
    let watts = e["mean_watts"].as_f64().unwrap();
    assert!(
        (watts - 400.0).abs() / 400.0 < 0.03,
        "mean {watts} W: {e:#}"
    );
    assert!(e["gpus"][0]["samples"].as_u64().unwrap() >= 8, "{e:#}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `energy` names one source: both, or neither, is refused before any traffic.
#[test]
fn an_energy_setting_names_one_source() {
    use crate::support::{benchplan, stderr};
    let dir = tempdir("energy-plan");
    for (tag, energy) in [
        (
            "both",
            r#"{ dcgm = "/metrics", prometheus = "http://127.0.0.1:9" }"#,
        ),
        ("neither", r#"{ interval = "1s" }"#),
    ] {
        let p = dir.join(format!("{tag}.toml"));
        std::fs::write(
            &p,
            format!("[services.s]\nsim = {{ preset = \"fast\" }}\nenergy = {energy}\n"),
        )
        .unwrap();
        let out = benchplan(&["validate", p.to_str().unwrap()]);
        let err = stderr(&out);
        assert_ne!(out.status.code(), Some(0), "{tag}: {err}");
        assert!(
            err.contains("services.s.energy") && err.contains("set one of"),
            "{tag}: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A command that prints watts, one line per GPU (what `nvidia-smi
/// --query-gpu=power.draw --format=csv,noheader,nounits` prints): its samples are
/// integrated (150 + 250 W, constant, exactly 400 W); a command that fails is said and
/// the run goes on.
#[test]
fn a_command_that_prints_watts_is_sampled_and_integrated() {
    let dir = tempdir("energy-command");
    let plan = |cmd: &str| {
        format!(
            "[services.s]\nsim = {{ preset = \"fast\" }}\nenergy = {{ command = \"{cmd}\", interval = \"50ms\" }}\n\
             [defaults]\ndataset = {{ name = \"random\", input_len = 16, output_len = 32 }}\nignore_eos = true\nnum_prompts = 24\nmax_concurrency = 2\n"
        )
    };
    let run = run_plan(&dir, "ok", &plan("printf '150.00\\\\n250.00\\\\n'"), &[], 0);
    let r = read_json(&crate::server_timings::first_result(&run));
    let e = &r["benchplan"]["energy"];
    assert_eq!(e["source"], "command", "{e:#}");
    assert_eq!(e["gpus"].as_array().unwrap().len(), 2, "{e:#}");
    assert!(
        (e["mean_watts"].as_f64().unwrap() - 400.0).abs() < 1e-6,
        "{e:#}"
    );
    assert_eq!(e["gpus"][0]["method"], "power");
    let run = run_plan(&dir, "bad", &plan("exit 3"), &[], 0);
    let r = read_json(&crate::server_timings::first_result(&run));
    assert!(r["benchplan"]["energy"]["joules"].is_null());
    let warnings = r["benchplan"]["warnings"].to_string();
    assert!(
        warnings.contains("printed no watts") && warnings.contains("exited with"),
        "{warnings}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// NVML where there is no NVIDIA driver (this machine, CI): each case says so and the
/// run goes on.
#[test]
fn nvml_without_a_driver_is_said_and_the_run_goes_on() {
    if std::path::Path::new("/dev/nvidiactl").exists() {
        eprintln!("SKIPPED: this machine has an NVIDIA driver");
        return;
    }
    let dir = tempdir("energy-nvml");
    let plan = "[services.s]\nsim = { preset = \"fast\" }\nenergy = { nvml = true }\n\
                [defaults]\ndataset = { name = \"random\", input_len = 16, output_len = 8 }\nnum_prompts = 4\n";
    let run = run_plan(&dir, "r", plan, &[], 0);
    let r = read_json(&crate::server_timings::first_result(&run));
    assert_eq!(r["completed"], 4);
    let e = &r["benchplan"]["energy"];
    assert_eq!(e["source"], "nvml", "{e:#}");
    assert!(e["joules"].is_null());
    let warnings = r["benchplan"]["warnings"].to_string();
    assert!(
        warnings.contains("libnvidia-ml.so.1 cannot be loaded"),
        "{warnings}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
