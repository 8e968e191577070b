//! The first hour's texts, walked as a new user meets them: the help of `bench`, `run`
//! and `validate`, and their answers to the mistakes a new user makes. Each answer is
//! in the words the user typed (flags for `bench`, plan keys for a plan), says the
//! unit it meant, echoes how an accepted value was read, and prints a warning once.

use crate::support::{benchplan, stderr, stdout, tempdir};

/// Words that belong to plans, never in what `bench` (which has no plan) says.
const PLAN_WORDS: [&str; 4] = ["defaults.", "missing field", "plan's folder", "add name ="];

#[test]
fn bench_run_and_validate_answer_in_the_users_words() {
    // The help of each command.
    for cmd in ["bench", "run", "validate"] {
        let out = benchplan(&[cmd, "--help"]);
        assert_eq!(out.status.code(), Some(0), "{cmd} --help");
        let help = stdout(&out);
        assert!(help.contains("Usage: benchplan"), "{cmd}: {help}");
        if cmd == "bench" {
            assert!(
                help.contains("--dataset-name") && PLAN_WORDS.iter().all(|w| !help.contains(w)),
                "{help}"
            );
        } else {
            assert!(help.contains("<PLAN>"), "{cmd}: {help}");
        }
    }

    // `bench`'s refusals: flags and flag values.
    let bench = |extra: &[&str]| {
        let mut args = vec!["bench", "--sim", "tiny"];
        args.extend_from_slice(extra);
        let out = benchplan(&args);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stderr(&out));
        let err = stderr(&out);
        for w in PLAN_WORDS {
            assert!(!err.contains(w), "{extra:?} says `{w}`: {err}");
        }
        err
    };
    let err = bench(&["--dataset-name", "hf", "--dataset-path", "x/y"]);
    assert!(err.contains("--dataset-name hf"), "{err}");
    let err = bench(&["--dataset-name", "no-such"]);
    assert!(err.contains("--dataset-name"), "{err}");
    let err = bench(&["--dataset-name", "sharegpt", "--dataset-path", "nope.json"]);
    assert!(
        err.contains("--dataset-path")
            && err.contains("working directory")
            && !err.contains("plan"),
        "{err}"
    );
    let err = bench(&["--request-rate", "fast"]);
    assert!(err.contains("--request-rate"), "{err}");

    // A plan's durations and SLOs: a misspelt unit gets the one it meant, from `run`
    // and `validate` alike, before anything is sent.
    let dir = tempdir("texts");
    let plan = dir.join("p.toml");
    let p = plan.to_str().unwrap();
    let results = dir.join("results");
    std::fs::write(
        &plan,
        "[execution]\ncooldown = \"2 secs\"\n[slo]\np99_ttft = \"<= 800 msec\"\n",
    )
    .unwrap();
    for cmd in [
        vec!["validate", p],
        vec!["run", p, "--results-dir", results.to_str().unwrap()],
    ] {
        let out = benchplan(&cmd);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}");
        let err = stderr(&out);
        assert!(
            err.contains("execution.cooldown")
                && err.contains("did you mean `2s`?")
                && err.contains("slo.p99_ttft")
                && err.contains("did you mean `800ms`?")
                && err.contains("p.toml:2"),
            "{cmd:?}: {err}"
        );
        assert!(!err.contains("SLO keys are"), "{err}");
    }
    assert!(!results.exists(), "a bad plan wrote results");

    // Accepted in another form: every duration echoed as it was read.
    std::fs::write(
        &plan,
        "[defaults]\nnum_prompts = 4\n[execution]\ncooldown = \"1500 ms\"\n\
         [matrix]\nrequest_timeout = [\"30 s\", \"1m\"]\n[slo]\np99_ttft = \"<= 800 ms\"\n",
    )
    .unwrap();
    let out = benchplan(&["validate", p]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let said = stdout(&out);
    for line in [
        "execution.cooldown: \"1500 ms\" read as 1500ms",
        "matrix.request_timeout[0]: \"30 s\" read as 30s",
        "slo.p99_ttft: \"<= 800 ms\" read as <= 800ms",
    ] {
        assert!(said.contains(line), "missing `{line}` in:\n{said}");
    }
    // Written in its canonical form: nothing to echo.
    assert!(!said.contains("\"1m\""), "{said}");

    // The plan `init` writes validates with no warning, under every command that
    // plans it.
    let starter = dir.join("starter.toml");
    let out = benchplan(&["init", starter.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = starter.to_str().unwrap();
    for cmd in [
        vec!["validate", s],
        vec!["cases", s],
        vec!["run", s, "--dry-run"],
    ] {
        let out = benchplan(&cmd);
        assert_eq!(out.status.code(), Some(0), "{cmd:?}: {}", stderr(&out));
        assert!(
            !stderr(&out).contains("warning"),
            "{cmd:?}: {}",
            stderr(&out)
        );
    }

    // A warning, printed once per command.
    std::fs::write(
        &plan,
        "[services.prod]\nbase_url = \"http://127.0.0.1:9\"\ntokenizer = \"server\"\n\
         [matrix]\nmax_concurrency = [1, 2]\n",
    )
    .unwrap();
    for cmd in [vec!["validate", p], vec!["cases", p]] {
        let out = benchplan(&cmd);
        assert_eq!(out.status.code(), Some(0), "{cmd:?}: {}", stderr(&out));
        let err = stderr(&out);
        let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning")).collect();
        assert!(!warnings.is_empty(), "{cmd:?}: no warning in {err}");
        for w in &warnings {
            assert_eq!(
                warnings.iter().filter(|o| o == &w).count(),
                1,
                "{cmd:?} printed `{w}` twice:\n{err}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
