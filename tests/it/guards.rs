//! What benchplan refuses or hides so a run cannot hurt: secrets in plans, command
//! lines and the environment never reach a file or the console; names cannot write
//! outside the results folder; absurd plans are refused in bounded time; a case that
//! mostly failed is a failed verdict; resource limits are checked before traffic.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{benchplan, repo, stderr, stdout};

/// Every file under `dir`, recursively (following no links).
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd {
        let p = e.unwrap().path();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if meta.is_dir() {
            files(&p, out);
        } else if meta.is_file() {
            out.push(p);
        }
    }
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_benchplan"))
}

#[test]
fn no_secret_reaches_a_file_or_the_console() {
    let dir = crate::support::tempdir("secrets");
    let secrets = [
        "sk-env-secret-4242",
        "hdr-secret-5678",
        "set-secret-9012",
        "bench-secret-3456",
        "sk-openai-7890",
        "right-key-0000",
        "wrong-key-1111",
    ];
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        "name = \"secrets\"\n\
         [services.a]\napi_key_env = \"BP_TEST_KEY\"\nsim = { preset = \"fast\", api_key = \"sk-env-secret-4242\" }\n\
         [services.b]\nheaders = { Authorization = \"Bearer hdr-secret-5678\" }\nsim = { preset = \"fast\", api_key = \"hdr-secret-5678\" }\n\
         [services.c]\napi_key_env = \"BP_WRONG_KEY\"\nsim = { preset = \"fast\", api_key = \"right-key-0000\" }\n\
         [defaults]\nnum_prompts = 3\ndataset = { name = \"random\", input_len = 8, output_len = 2 }\n",
    )
    .unwrap();
    let junit = dir.join("junit.xml");
    let summary = dir.join("step_summary.md");
    let run = bin()
        .args(["run", plan.to_str().unwrap(), "--results-dir"])
        .arg(dir.join("r"))
        .args([
            "--set",
            "services.b.headers.X-Api-Key=set-secret-9012",
            "--junit",
        ])
        .arg(&junit)
        .env("BP_TEST_KEY", "sk-env-secret-4242")
        .env("BP_WRONG_KEY", "wrong-key-1111")
        .env("OPENAI_API_KEY", "sk-openai-7890")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    // Service c's key is wrong: its case fails (every request a 401), the others pass.
    assert_ne!(run.status.code(), Some(0));
    let bench = bin()
        .args([
            "bench",
            "--sim",
            "fast",
            "--sim-set",
            "api_key=bench-secret-3456",
            "--header",
            "Authorization=Bearer bench-secret-3456",
            "--num-prompts",
            "3",
            "--random-input-len",
            "8",
            "--random-output-len",
            "2",
            "--save-result",
            "--save-detailed",
            "--result-dir",
        ])
        .arg(dir.join("bench"))
        .env("OPENAI_API_KEY", "sk-openai-7890")
        .output()
        .unwrap();
    assert_eq!(bench.status.code(), Some(0), "{}", stderr(&bench));
    let mut all = Vec::new();
    files(&dir, &mut all);
    all.retain(|p| p != &plan);
    assert!(all.len() > 8, "{all:?}");
    let mut texts: Vec<(String, String)> = all
        .iter()
        .map(|p| {
            (
                p.display().to_string(),
                String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned(),
            )
        })
        .collect();
    for (what, out) in [("run", &run), ("bench", &bench)] {
        texts.push((format!("{what} stdout"), stdout(out)));
        texts.push((format!("{what} stderr"), stderr(out)));
    }
    for (name, text) in &texts {
        for s in secrets {
            assert!(!text.contains(s), "{s} appears in {name}");
        }
    }
    // The copies are there, redacted rather than dropped.
    let batch = crate::support::batch_dir(&dir.join("r"));
    let copy = std::fs::read_to_string(batch.join("plan.toml")).unwrap();
    assert!(
        copy.contains("Authorization") && copy.contains("<redacted>"),
        "{copy}"
    );
    let manifest = std::fs::read_to_string(batch.join("manifest.json")).unwrap();
    assert!(manifest.contains("X-Api-Key=<redacted>"), "{manifest}");
    // The 401s are counted, with a message that names the variable, not the key.
    let c = std::fs::read_dir(&batch)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("c-"));
    let failure = match c {
        Some(p) => std::fs::read_to_string(p).unwrap(),
        None => manifest.clone(),
    };
    assert!(failure.contains("401"), "{failure}");
    assert!(failure.contains("api_key_env"), "{failure}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn names_cannot_write_outside_the_results_folder() {
    let dir = crate::support::tempdir("paths");
    for name in ["\"../up\"", "\"/abs\"", "\"a\\u0000b\"", "\"..\""] {
        let plan = dir.join("p.toml");
        std::fs::write(
            &plan,
            format!("[services.{name}]\nsim = {{ preset = \"fast\" }}\n"),
        )
        .unwrap();
        let err = crate::support::validate_file(&plan)
            .map(|_| ())
            .unwrap_err();
        assert!(err.contains("is not a plain name"), "{name}: {err}");
    }
    let d = dir.display().to_string();
    for (flag, value) in [
        ("--result-filename", "../escape.json"),
        ("--result-filename", "/tmp/escape.json"),
        ("--label", "../../escape"),
        ("--label", "a/b"),
    ] {
        let out = benchplan(&[
            "bench",
            "--sim",
            "fast",
            "--num-prompts",
            "1",
            "--save-result",
            "--result-dir",
            &d,
            flag,
            value,
        ]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{flag} {value}: {}",
            stderr(&out)
        );
        assert!(!Path::new("/tmp/escape.json").exists() || flag != "--result-filename");
    }
    assert!(!dir.parent().unwrap().join("escape.json").exists());
    std::fs::remove_dir_all(&dir).ok();
}

/// Runs `validate` on a plan text; exit code, stderr and how long it took.
fn validate(dir: &Path, file: &str, text: &[u8]) -> (Option<i32>, String, Duration) {
    let plan = dir.join(file);
    std::fs::write(&plan, text).unwrap();
    let t = Instant::now();
    let out = benchplan(&["validate", plan.to_str().unwrap()]);
    (out.status.code(), stderr(&out), t.elapsed())
}

#[test]
fn absurd_plans_are_refused_in_bounded_time() {
    let dir = crate::support::tempdir("absurd");
    let axis = format!(
        "[{}]",
        (1..=1000)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    let huge_matrix =
        format!("[matrix]\nmax_concurrency = {axis}\nnum_prompts = {axis}\nseed = {axis}\n");
    let laughs = {
        let mut y = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for (i, c) in ('b'..='i').enumerate() {
            let prev = (b'a' + i as u8) as char;
            y.push_str(&format!("{c}: &{c} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"));
        }
        y.push_str("defaults:\n  metadata:\n    bomb: *i\n");
        y
    };
    let deep = format!(
        "[defaults]\nmetadata = {{ x = {}{} }}\n",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let big = {
        let mut s = String::from("name = \"big\"\ndescription = \"");
        s.push_str(&"x".repeat(100 << 20));
        s.push_str("\"\n");
        s
    };
    let cases: Vec<(&str, &str, Vec<u8>, &str)> = vec![
        (
            "10^9 cases",
            "m.toml",
            huge_matrix.into_bytes(),
            "1000000000 cases",
        ),
        (
            "num_prompts 1e10",
            "n.toml",
            b"[defaults]\nnum_prompts = 10000000000\n".to_vec(),
            "num_prompts",
        ),
        ("billion laughs", "l.yaml", laughs.into_bytes(), "YAML"),
        (
            "10,000-deep arrays",
            "d.toml",
            deep.into_bytes(),
            "levels deep",
        ),
        ("100 MB plan", "b.toml", big.into_bytes(), "at most"),
        (
            "request_rate nan",
            "r.toml",
            b"[defaults]\nrequest_rate = nan\n".to_vec(),
            "request_rate",
        ),
        (
            "not UTF-8",
            "u.toml",
            b"name = \"ok\"\n\n# caf\xe9\n".to_vec(),
            "not UTF-8",
        ),
    ];
    for (name, file, text, says) in cases {
        let (code, err, took) = validate(&dir, file, &text);
        assert_eq!(code, Some(2), "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
        assert!(took < Duration::from_secs(20), "{name}: {took:?}");
        if name == "not UTF-8" {
            assert!(
                err.contains("u.toml:3:"),
                "{name}: the line of the bad byte: {err}"
            );
        }
    }
    // `inf` is a valid burstiness (constant gaps), as in vLLM.
    let (code, err, _) = validate(
        &dir,
        "i.toml",
        b"[defaults]\nburstiness = inf\nrequest_rate = 10\n",
    );
    assert_eq!(code, Some(0), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_case_that_mostly_failed_is_a_failed_verdict_and_runs_again_on_resume() {
    let dir = crate::support::tempdir("floor");
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        // Seed 3: the simulator's first draws (the smoke request's) pass, the rest fail
        // at 83%; the draws are seeded, so the count is the same on every run.
        "[services.flaky]\nsim = { preset = \"fast\", failure_rate = 0.83, failure_types = [\"server_error\"], seed = 3 }\n\
         [services.fine]\nsim = { preset = \"fast\" }\n\
         [defaults]\nnum_prompts = 60\ndataset = { name = \"random\", input_len = 8, output_len = 2 }\n",
    )
    .unwrap();
    let out = bin()
        .args(["run", plan.to_str().unwrap(), "--quiet", "--results-dir"])
        .arg(dir.join("r"))
        .output()
        .unwrap();
    // No SLOs in the plan, but the success-rate floor (95%) fails the flaky case.
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let batch = crate::support::batch_dir(&dir.join("r"));
    let report = std::fs::read_to_string(batch.join("report.md")).unwrap();
    let recommended = report
        .split("## Recommendation")
        .nth(1)
        .unwrap_or_default()
        .split("\n## ")
        .next()
        .unwrap_or_default()
        .to_string();
    // One recommendation per service: the fine one's case, none for the flaky one.
    assert!(recommended.contains("| fine | **fine-"), "{recommended}");
    assert!(
        recommended
            .lines()
            .any(|l| l.starts_with("| flaky | none |")),
        "{recommended}"
    );
    assert!(!recommended.contains("**flaky-"), "{recommended}");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(batch.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["cases"][0]["slo_pass"], false);
    assert_eq!(manifest["cases"][1]["slo_pass"], true);
    // --resume keeps the fine case and runs the flaky one again.
    let again = bin()
        .args(["run", plan.to_str().unwrap(), "--quiet", "--resume"])
        .arg(&batch)
        .output()
        .unwrap();
    assert!(
        stderr(&again).contains("1 of 2 cases already finished"),
        "{}",
        stderr(&again)
    );
    // A floor of 10% (in [slo]) lets the flaky case pass.
    std::fs::write(
        &plan,
        std::fs::read_to_string(&plan).unwrap() + "[slo]\nmin_success_rate = \"10%\"\n",
    )
    .unwrap();
    let lenient = bin()
        .args(["run", plan.to_str().unwrap(), "--quiet", "--results-dir"])
        .arg(dir.join("r2"))
        .output()
        .unwrap();
    assert_eq!(lenient.status.code(), Some(0), "{}", stderr(&lenient));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn two_runs_started_together_write_two_folders() {
    let dir = crate::support::tempdir("twins");
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        "[services.s]\nsim = { preset = \"fast\" }\n[defaults]\nnum_prompts = 3\ndataset = { name = \"random\", input_len = 8, output_len = 2 }\n",
    )
    .unwrap();
    let spawn = || {
        bin()
            .args(["run", plan.to_str().unwrap(), "--quiet", "--results-dir"])
            .arg(dir.join("r"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    for c in [a, b] {
        let out = c.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let runs: Vec<PathBuf> = std::fs::read_dir(dir.join("r/batch"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && !p.ends_with("latest"))
        .collect();
    assert_eq!(runs.len(), 2, "{runs:?}");
    for r in runs {
        let m: Value =
            serde_json::from_str(&std::fs::read_to_string(r.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(m["cases"][0]["status"], "ok");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn concurrency_beyond_the_open_file_limit_is_refused_before_traffic() {
    let tok = repo()
        .join("tests/fixtures/tokenizer")
        .display()
        .to_string();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 256 && ulimit -Hn 256 && exec '{}' bench --sim fast --max-concurrency 1000 --num-prompts 1000 --tokenizer '{tok}' --random-input-len 4 --random-output-len 2",
            env!("CARGO_BIN_EXE_benchplan")
        ))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("open files") && err.contains("256") && err.contains("max_concurrency"),
        "{err}"
    );
}

/// The CPU ticks (user + system) a process has used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[test]
fn the_simulator_out_of_file_descriptors_backs_off_instead_of_spinning() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 40 && exec '{}' sim --port 0 --preset fast",
            env!("CARGO_BIN_EXE_benchplan")
        ))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .trim_start_matches("http://")
        .to_string();
    // More connections than the simulator has descriptors: accept() fails with EMFILE.
    let held: Vec<std::net::TcpStream> = (0..60)
        .filter_map(|_| std::net::TcpStream::connect(&url).ok())
        .collect();
    assert!(held.len() >= 40);
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_ticks(child.id());
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_ticks(child.id()) - before;
    // A spinning accept loop burns a whole core (about 100 ticks a second).
    assert!(used < 30, "the simulator used {used} ticks in a second");
    // Once connections close it serves again.
    drop(held);
    std::thread::sleep(Duration::from_millis(200));
    let ok = health_ok(&url);
    let _ = child.kill();
    let _ = child.wait();
    assert!(ok, "the simulator answers again after the flood");
}

/// GET /health over a plain socket, retried for two seconds.
fn health_ok(addr: &str) -> bool {
    {
        use std::io::{Read, Write};
        for _ in 0..20 {
            if let Ok(mut s) = std::net::TcpStream::connect(addr) {
                let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                if s.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
                    .is_ok()
                {
                    let mut buf = Vec::new();
                    let _ = s.read_to_end(&mut buf);
                    if buf.starts_with(b"HTTP/1.1 200") {
                        return true;
                    }
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        false
    }
}
