//! `benchplan bench` as a drop-in for `vllm bench serve` and vllm-bench: every vLLM
//! 0.33 flag works or is refused with advice (the flag list is data), vllm-bench's
//! sweeps and `--compare`, LoRA adapters per request, and the commands around them
//! (`init`, `completions`, `man`).

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{SimProcess, benchplan, read_json, repo, stderr, stdout, tempdir};

/// vLLM 0.33's `vllm bench serve` flags, from the committed list.
fn vllm_flags() -> Vec<String> {
    let text =
        std::fs::read_to_string(repo().join("tests/fixtures/vllm-0.33-bench-serve-flags.txt"))
            .unwrap();
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("--"))
        .map(|l| l.trim_start_matches("--").to_string())
        .collect()
}

/// The long flags `benchplan bench` carries out (the derive's, without the refused ones).
fn bench_flags() -> BTreeSet<String> {
    use clap::CommandFactory;
    let cmd = benchplan::cli::Cli::command();
    let bench = cmd.find_subcommand("bench").expect("a bench command");
    bench
        .get_arguments()
        .filter_map(|a| a.get_long())
        .map(str::to_string)
        .collect()
}

#[test]
fn every_vllm_flag_works_or_is_refused_with_what_to_use_instead() {
    use benchplan::commands::bench::refused::REFUSED;
    let works = bench_flags();
    let refused: BTreeSet<&str> = REFUSED.iter().map(|(f, _)| *f).collect();
    let vllm = vllm_flags();
    assert!(vllm.len() > 100, "the list holds vLLM's flags");
    // Each flag exactly once: carried out, or refused.
    let unhandled: Vec<&String> = vllm
        .iter()
        .filter(|f| !works.contains(*f) && !refused.contains(f.as_str()))
        .collect();
    assert!(
        unhandled.is_empty(),
        "vLLM flags benchplan bench neither carries out nor refuses: {unhandled:?}"
    );
    let both: Vec<&&str> = refused.iter().filter(|f| works.contains(**f)).collect();
    assert!(both.is_empty(), "refused and carried out: {both:?}");
    // No refusal for a flag vLLM does not have (a stale entry).
    let stale: Vec<&&str> = refused
        .iter()
        .filter(|f| !vllm.iter().any(|v| v == **f))
        .collect();
    assert!(
        stale.is_empty(),
        "refused flags vLLM does not have: {stale:?}"
    );
    // Each refusal is a usage error that names the flag and says what to do, whether
    // the flag comes alone, with values, or before other flags.
    for (flag, why) in REFUSED {
        let (alone, with_value) = (format!("--{flag}"), format!("--{flag}=1"));
        for line in [
            vec!["benchplan", "bench", &alone],
            vec!["benchplan", "bench", &alone, "x", "--num-prompts", "3"],
            vec!["benchplan", "bench", "--num-prompts", "3", &with_value],
        ] {
            let e = benchplan::cli::Cli::parse_from_args(line.clone())
                .err()
                .unwrap_or_else(|| panic!("{line:?} was accepted"));
            let text = e.to_string();
            assert!(
                text.contains(&format!("--{flag} is not supported: {why}")),
                "{line:?}: {text}"
            );
            assert!(e.use_stderr(), "a refusal is an error");
        }
        assert!(
            why.len() > 40,
            "--{flag}: the refusal says what to use instead"
        );
    }
}

#[test]
fn a_refused_flag_exits_2_before_anything_is_sent_and_a_kept_one_still_parses() {
    let out = benchplan(&["bench", "--sim", "fast", "--use-beam-search"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("--use-beam-search is not supported") && err.contains("--extra-body"),
        "{err}"
    );
    assert!(!err.contains("Serving Benchmark Result"), "{err}");
    // A flag that works with vLLM's meaning parses as before.
    benchplan::cli::Cli::parse_from_args([
        "benchplan",
        "bench",
        "--tokenizer-mode",
        "hf",
        "--trust-remote-code",
        "--lora-modules",
        "a",
        "b",
        "--lora-assignment",
        "round-robin",
    ])
    .expect("vLLM flags benchplan carries out parse");
    let out = benchplan(&["bench", "--sim", "fast", "--tokenizer-mode", "mistral"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--tokenizer-mode mistral is not supported"));
}

fn results_in(dir: &Path) -> Vec<(String, Value)> {
    let mut v: Vec<(String, Value)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_name().unwrap() != "sweep_summary.json"
        })
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                read_json(&p),
            )
        })
        .collect();
    v.sort_by_key(|(_, r)| r["max_concurrency"].as_u64());
    v
}

#[test]
fn a_vllm_bench_sweep_saves_one_result_per_point_and_a_summary() {
    let dir = tempdir("vllm-cli-sweep");
    let d = dir.display().to_string();
    // The seed's vllm-bench command line, against the simulator.
    let out = benchplan(&[
        "bench",
        "--sim",
        "fast",
        "--random-input-len",
        "8",
        "--random-output-len",
        "4",
        "--sweep-max-concurrency",
        "1,2,4",
        "--sweep-num-prompts-factor",
        "5",
        "--sweep-summary-percentiles",
        "90,99",
        "--save-result",
        "--result-dir",
        &d,
        "--disable-tqdm",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("Sweep Summary"), "{text}");
    assert!(
        text.contains("P99 TTFT(ms)") && text.contains("P90 TPOT(ms)"),
        "{text}"
    );
    assert!(text.contains("Best throughput:"), "{text}");

    let results = results_in(&dir);
    let concurrency: Vec<u64> = results
        .iter()
        .map(|(_, r)| r["max_concurrency"].as_u64().unwrap())
        .collect();
    assert_eq!(concurrency, [1, 2, 4]);
    for (name, r) in &results {
        let c = r["max_concurrency"].as_u64().unwrap();
        assert!(name.contains(&format!("-concurrency{c}-")), "{name}");
        // --sweep-num-prompts-factor: c × 5 requests, all answered by the simulator.
        assert_eq!(r["num_prompts"].as_u64(), Some(c * 5), "{name}");
        assert_eq!(r["completed"].as_u64(), Some(c * 5), "{name}");
        for k in [
            "p90_ttft_ms",
            "p99_ttft_ms",
            "p99_tpot_ms",
            "median_ttft_ms",
        ] {
            assert!(r[k].is_number(), "{name} lacks {k}");
        }
    }

    let summary = read_json(&dir.join("sweep_summary.json"));
    assert_eq!(summary["parameter"], "max_concurrency");
    let points = summary["points"].as_array().unwrap();
    assert_eq!(points.len(), 3);
    for (p, (name, r)) in points.iter().zip(&results) {
        assert_eq!(p["max_concurrency"], r["max_concurrency"]);
        assert_eq!(p["result_file"].as_str(), Some(name.as_str()));
        // The summary's numbers are the results' own.
        for k in ["request_throughput", "p99_ttft_ms", "p90_tpot_ms"] {
            assert_eq!(p[k], r[k], "{name} {k}");
        }
    }
    let best = results
        .iter()
        .max_by(|a, b| {
            let t = |r: &Value| r["request_throughput"].as_f64().unwrap();
            t(&a.1).total_cmp(&t(&b.1))
        })
        .unwrap();
    assert_eq!(
        summary["best"]["max_concurrency"],
        best.1["max_concurrency"].to_string()
    );
    let csv = std::fs::read_to_string(dir.join("sweep_summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(
        csv.starts_with("max_concurrency,request_throughput,"),
        "{csv}"
    );
    // The folder reads as a run of results: `benchplan report` takes it.
    let report = benchplan(&["report", &d, "--format", "csv"]);
    assert_eq!(report.status.code(), Some(0), "{}", stderr(&report));
}

#[test]
fn a_rate_sweep_and_bad_sweep_lists() {
    let dir = tempdir("vllm-cli-rate");
    let d = dir.display().to_string();
    let out = benchplan(&[
        "bench",
        "--sim",
        "fast",
        "--num-prompts",
        "6",
        "--random-input-len",
        "8",
        "--random-output-len",
        "2",
        "--sweep-request-rate",
        "200,inf",
        "--save-result",
        "--result-dir",
        &d,
        "--disable-tqdm",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = read_json(&dir.join("sweep_summary.json"));
    let rates: Vec<String> = summary["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["request_rate"].to_string())
        .collect();
    assert_eq!(rates, ["200", "\"inf\""]);
    for bad in [
        &["--sweep-max-concurrency", "1,x"][..],
        &["--sweep-request-rate", "0"],
        &[
            "--sweep-max-concurrency",
            "1",
            "--result-filename",
            "a.json",
        ],
        &[
            "--sweep-max-concurrency",
            "1",
            "--sweep-summary-percentiles",
            "101",
        ],
    ] {
        let mut args = vec!["bench", "--sim", "fast"];
        args.extend_from_slice(bad);
        let out = benchplan(&args);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", stderr(&out));
        assert!(
            stderr(&out).starts_with("error: "),
            "{bad:?}: {}",
            stderr(&out)
        );
    }
}

/// One saved `bench` result against a simulator with this ITL.
fn result_with_itl(dir: &Path, itl: &str) -> PathBuf {
    let d = dir.display().to_string();
    let out = benchplan(&[
        "bench",
        "--sim",
        "fast",
        "--sim-set",
        &format!("itl={itl}"),
        "--num-prompts",
        "8",
        "--max-concurrency",
        "4",
        "--random-input-len",
        "8",
        "--random-output-len",
        "6",
        "--save-result",
        "--result-dir",
        &d,
        "--disable-tqdm",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap()
}

#[test]
fn the_vllm_bench_compare_form_has_compares_output_and_exit_codes() {
    let base = result_with_itl(&tempdir("vllm-cli-cmp-base"), "1ms");
    let cand = result_with_itl(&tempdir("vllm-cli-cmp-cand"), "8ms");
    let (b, c) = (base.to_str().unwrap(), cand.to_str().unwrap());
    let ours = benchplan(&["compare", b, c, "--measure", "whole"]);
    let theirs = benchplan(&["bench", "--compare", b, c]);
    // A TPOT of 8 ms against 1 ms is a regression: exit 4, the same table.
    assert_eq!(ours.status.code(), Some(4), "{}", stderr(&ours));
    assert_eq!(theirs.status.code(), Some(4), "{}", stderr(&theirs));
    assert_eq!(stdout(&ours), stdout(&theirs));
    assert!(stdout(&theirs).contains("tpot"), "{}", stdout(&theirs));
    let same = benchplan(&["bench", "--compare", b, b]);
    assert_eq!(same.status.code(), Some(0), "{}", stdout(&same));
    // An --append-result file compares by its last line, as vllm-bench reads it.
    let lines = tempdir("vllm-cli-cmp-lines").join("runs.jsonl");
    let text = format!(
        "{}\n{}\n",
        std::fs::read_to_string(&cand).unwrap().trim(),
        std::fs::read_to_string(&base).unwrap().trim()
    );
    std::fs::write(&lines, text).unwrap();
    let last = benchplan(&["bench", "--compare", b, lines.to_str().unwrap()]);
    assert_eq!(last.status.code(), Some(0), "{}", stdout(&last));
    let missing = benchplan(&["bench", "--compare", b, "/nonexistent/x.json"]);
    assert_eq!(missing.status.code(), Some(1));
}

fn sim_metrics(url: &str) -> String {
    let addr = url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

fn lora_count(metrics: &str, lora: &str) -> u64 {
    metrics
        .lines()
        .find(|l| {
            l.starts_with("benchplan_sim:lora_requests_total")
                && l.contains(&format!("lora=\"{lora}\""))
        })
        .and_then(|l| l.rsplit(' ').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// `benchplan bench` against `url` with small random requests and `args`; its exit
/// and the one result it saved.
fn bench_lora(url: &str, args: &[&str]) -> (std::process::Output, Option<Value>) {
    let dir = tempdir("vllm-cli-lora");
    let (d, tok) = (
        dir.display().to_string(),
        repo()
            .join("tests/fixtures/tokenizer")
            .display()
            .to_string(),
    );
    let mut all = vec![
        "bench",
        "--base-url",
        url,
        "--tokenizer",
        &tok,
        "--random-input-len",
        "8",
        "--random-output-len",
        "2",
        "--no-smoke",
        "--save-result",
        "--result-dir",
        &d,
        "--disable-tqdm",
    ];
    all.extend_from_slice(args);
    let out = benchplan(&all);
    let result = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .map(|e| read_json(&e.unwrap().path()));
    (out, result)
}

fn per_request(r: &Value) -> Vec<String> {
    r["benchplan"]["lora"]["per_request"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn lora_modules_pick_an_adapter_per_request_as_vllm_and_record_it() {
    let sim = SimProcess::start(&[
        "--preset",
        "fast",
        "--set",
        r#"lora_modules=["sql-lora","chat-lora"]"#,
    ]);
    let (out, r) = bench_lora(
        &sim.url,
        &[
            "--lora-modules",
            "sql-lora",
            "chat-lora",
            "--lora-assignment",
            "round-robin",
            "--num-prompts",
            "9",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = r.expect("a result");
    assert_eq!(r["completed"], 9, "the server knew every adapter named");
    // Round-robin: request i takes adapter i mod 2.
    let expect: Vec<&str> = (0..9).map(|i| ["sql-lora", "chat-lora"][i % 2]).collect();
    assert_eq!(per_request(&r), expect);
    let lora = &r["benchplan"]["lora"];
    assert_eq!(lora["adapters"]["sql-lora"]["completed"], 5);
    assert_eq!(lora["adapters"]["chat-lora"]["completed"], 4);
    assert_eq!(lora["assignment"], "round-robin");
    // The server's own count of what each adapter was sent.
    let m = sim_metrics(&sim.url);
    assert_eq!(
        (lora_count(&m, "sql-lora"), lora_count(&m, "chat-lora")),
        (5, 4),
        "{m}"
    );

    // Random assignment: seeded, so the same seed names the same adapters; both used.
    let picks = |seed: &str| -> Vec<String> {
        let args = [
            "--lora-modules",
            "sql-lora",
            "chat-lora",
            "--num-prompts",
            "40",
            "--seed",
            seed,
        ];
        let (out, r) = bench_lora(&sim.url, &args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        per_request(&r.expect("a result"))
    };
    let a = picks("3");
    assert_eq!(a, picks("3"));
    let sql = a.iter().filter(|m| *m == "sql-lora").count();
    assert!(
        (8..=32).contains(&sql),
        "40 fair draws give both adapters: {sql}"
    );
    // An adapter the server does not serve is a counted failure, not a crash.
    let (out, _) = bench_lora(
        &sim.url,
        &["--lora-modules", "missing-lora", "--num-prompts", "3"],
    );
    crate::support::exits_saying(&out, 1, "no request succeeded");
}

#[test]
fn init_writes_a_plan_that_validates_as_written() {
    let dir = tempdir("vllm-cli-init");
    let plan = dir.join("benchplan.toml");
    let p = plan.to_str().unwrap();
    let out = benchplan(&["init", p]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = benchplan(&["validate", p]);
    assert_eq!(v.status.code(), Some(0), "{}", stderr(&v));
    assert!(stdout(&v).contains("3 cases, 1 service"), "{}", stdout(&v));
    // Commented: every section says what it is for.
    let text = std::fs::read_to_string(&plan).unwrap();
    assert!(
        text.lines().filter(|l| l.starts_with('#')).count() >= 8,
        "{text}"
    );
    // An existing file is kept unless --force.
    let again = benchplan(&["init", p]);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("--force"));
    assert_eq!(benchplan(&["init", p, "--force"]).status.code(), Some(0));

    // Against a server: its first model, asked at /v1/models.
    let sim = SimProcess::start(&["--preset", "fast", "--set", "model=org/served-7b"]);
    let server_plan = dir.join("server.toml");
    let s = server_plan.to_str().unwrap();
    let out = benchplan(&["init", s, "--base-url", &sim.url]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(&server_plan).unwrap();
    assert!(text.contains("model = \"org/served-7b\""), "{text}");
    assert!(
        text.contains(&format!("base_url = \"{}\"", sim.url)),
        "{text}"
    );
    let v = benchplan(&["validate", s]);
    assert_eq!(v.status.code(), Some(0), "{}", stderr(&v));
    assert!(
        !text.contains("{this file}") && text.contains(&format!("benchplan validate {s}")),
        "{text}"
    );
    // A model id that is no tokenizer (llama-cpp-python names a .gguf path): the
    // server's own tokenize endpoint, and the service's keys on the service.
    let gguf = SimProcess::start(&["--preset", "fast", "--set", "model=models/smollm2/q4.gguf"]);
    let gguf_plan = dir.join("gguf.toml");
    let g = gguf_plan.to_str().unwrap();
    let out = benchplan(&["init", g, "--base-url", &gguf.url]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(&gguf_plan).unwrap();
    let plan: toml::Value = toml::from_str(&text).unwrap();
    assert_eq!(
        plan["services"]["server"]["tokenizer"].as_str(),
        Some("server"),
        "{text}"
    );
    assert_eq!(
        plan["services"]["server"]["backend"].as_str(),
        Some("openai-chat"),
        "{text}"
    );
    assert!(plan["defaults"].get("backend").is_none(), "{text}");
    let v = benchplan(&["validate", g]);
    assert_eq!(v.status.code(), Some(0), "{}", stderr(&v));
    // A server that does not answer: a clear error, no file.
    let gone = dir.join("gone.toml");
    let out = benchplan(&[
        "init",
        gone.to_str().unwrap(),
        "--base-url",
        "http://127.0.0.1:9",
    ]);
    crate::support::exits_saying(&out, 1, "cannot reach");
    assert!(!gone.exists());
}

#[test]
fn completions_and_man_pages_come_from_the_command_line_itself() {
    for shell in ["bash", "zsh", "fish"] {
        let out = benchplan(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        for flag in ["sweep-max-concurrency", "lora-modules", "max-concurrency"] {
            assert!(script.contains(flag), "{shell} completes --{flag}");
        }
        assert!(
            !script.contains("use-beam-search"),
            "{shell} offers a refused flag"
        );
    }
    let out = benchplan(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));

    let page = stdout(&benchplan(&["man"]));
    assert!(
        page.starts_with(".ie") || page.contains(".TH benchplan"),
        "{page}"
    );
    let dir = tempdir("vllm-cli-man");
    let out = benchplan(&["man", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let bench = std::fs::read_to_string(dir.join("benchplan-bench.1")).unwrap();
    assert!(bench.contains("benchplan\\-bench") && bench.contains("sweep\\-max\\-concurrency"));
    assert!(dir.join("benchplan-run.1").exists() && dir.join("benchplan.1").exists());
}

#[test]
fn bench_errors_name_the_flags_a_user_typed_not_plan_keys() {
    let out = benchplan(&[
        "bench",
        "--base-url",
        "http://127.0.0.1:9",
        "--model",
        "foo",
        "--num-prompts",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("`--model`") && err.contains("pass --tokenizer"),
        "{err}"
    );
    assert!(
        !err.contains("services.target") && !err.contains("the service's"),
        "{err}"
    );
    let out = benchplan(&[
        "bench",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "foo",
        "--tokenizer",
        "tests/fixtures/tokenizer",
        "--random-input-len",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("`--base-url`") && err.contains("pass --base-url \"http://127.0.0.1:9\""),
        "{err}"
    );
    assert!(
        err.contains("`--random-input-len`") && !err.contains("(case target-"),
        "{err}"
    );
    assert!(
        !err.contains("defaults.") && !err.contains("base_url ="),
        "{err}"
    );
}

/// `bench` answers in the words the user typed: flags and their values, never plan
/// keys, and no plan folder where there is no plan.
#[test]
fn bench_refusals_name_flags_not_plan_keys() {
    let hf = benchplan(&[
        "bench",
        "--sim",
        "tiny",
        "--dataset-name",
        "hf",
        "--dataset-path",
        "likaixin/InstructCoder",
    ]);
    assert_eq!(hf.status.code(), Some(2));
    let err = stderr(&hf);
    assert!(
        err.contains("--dataset-name hf: benchplan reads no Hugging Face datasets")
            && !err.contains("defaults.")
            && !err.contains("missing field"),
        "{err}"
    );
    let missing = benchplan(&[
        "bench",
        "--sim",
        "tiny",
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        "no-such-file.json",
    ]);
    assert_eq!(missing.status.code(), Some(2));
    let err = stderr(&missing);
    assert!(
        err.contains("`--dataset-path`: dataset file")
            && err.contains("a relative --dataset-path is read from the working directory")
            && !err.contains("plan"),
        "{err}"
    );
}
