//! An external service's tokenizer is found (or its absence said, with the options)
//! by `validate`, `run --dry-run` and `probe`, before any case sends traffic.

use std::process::{Command, Output};

use crate::support::{SimProcess, repo};

/// Runs benchplan on `plan` (written to a temporary folder) with an empty Hugging Face
/// cache, so nothing on this machine can make a tokenizer appear.
fn with_plan(plan: &str, args: &[&str], offline: bool) -> (Output, String) {
    let dir = scratch(&format!(
        "{:x}",
        benchplan::hash::fnv1a64(format!("{plan}{args:?}{offline}").as_bytes())
    ));
    let file = dir.join("p.toml");
    std::fs::write(&file, plan).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_benchplan"));
    cmd.args(args)
        .arg(&file)
        .current_dir(repo())
        .env("HF_HOME", dir.join("hf"));
    if offline {
        cmd.env("HF_HUB_OFFLINE", "1");
    } else {
        cmd.env_remove("HF_HUB_OFFLINE");
    }
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, err)
}

/// A fresh folder of this test process.
fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("benchplan-tok-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn external(extra: &str) -> String {
    // Port 9 (discard): nothing answers, and none of these commands may try.
    format!(
        "[services.prod]\nbase_url = \"http://127.0.0.1:9\"\n{extra}\n[defaults]\nnum_prompts = 4\ndataset = {{ name = \"random\", input_len = 16, output_len = 4 }}\n"
    )
}

#[test]
fn a_model_name_that_is_no_tokenizer_fails_validate_and_dry_run_with_the_options() {
    let plan = external("model = \"llama-served\"");
    for args in [&["validate"][..], &["run", "--dry-run"][..]] {
        let (out, err) = with_plan(&plan, args, false);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("p.toml:3:") && err.contains("services.prod.model"),
            "{args:?} names the file, line and key: {err}"
        );
        assert!(
            err.contains("model `llama-served` is neither a tokenizer.json")
                && err.contains("\"server\"")
                && err.contains("Hugging Face id"),
            "{args:?} says the options: {err}"
        );
        assert!(out.stdout.is_empty(), "nothing ran: {args:?}");
    }
}

#[test]
fn a_missing_tokenizer_path_is_an_error_at_its_key() {
    let (out, err) = with_plan(
        &external("tokenizer = \"no/such/tokenizer.json\""),
        &["validate"],
        false,
    );
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("services.prod.tokenizer") && err.contains("no/such/tokenizer.json"),
        "{err}"
    );
}

#[test]
fn a_hub_id_missing_from_the_cache_warns_online_and_fails_offline() {
    let plan = external("model = \"Org/Some-Model-7B\"");
    let (out, err) = with_plan(&plan, &["validate"], false);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("warning")
            && err.contains("not in the local Hugging Face cache")
            && err.contains("huggingface-cli download Org/Some-Model-7B"),
        "{err}"
    );
    // A dry run cannot count with it, and says so instead of counting wrongly in silence.
    let (out, err) = with_plan(&plan, &["run", "--dry-run"], false);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("note: prod: `Org/Some-Model-7B` is downloaded"),
        "{err}"
    );
    let (out, err) = with_plan(&plan, &["validate"], true);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("HF_HUB_OFFLINE is set"), "{err}");
}

#[test]
fn no_model_and_no_tokenizer_is_a_warning_that_names_the_risk() {
    let (out, err) = with_plan(&external(""), &["validate"], false);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("neither `tokenizer` nor `model` is set") && err.contains("/v1/models"),
        "{err}"
    );
}

#[test]
fn a_local_tokenizer_passes_and_the_dry_run_counts_with_it() {
    let plan = external("tokenizer = \"tests/fixtures/tokenizer\"");
    let (out, err) = with_plan(&plan, &["validate"], false);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("tokenizer"), "no tokenizer warning: {err}");
    let (out, err) = with_plan(&plan, &["run", "--dry-run"], false);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    // Four prompts of the plan's tokenizer: it adds one special token, which vLLM's random
    // dataset takes off input_len (the built-in word tokenizer adds none and gives 16).
    assert!(
        text.lines()
            .any(|l| l.starts_with("prod-") && l.contains(" 15/15.0/15/15/15 ")),
        "{text}"
    );
    assert!(!err.contains("note:"), "{err}");
}

#[test]
fn probe_says_where_the_tokenizer_would_come_from() {
    let sim = SimProcess::start(&["--preset", "fast"]);
    let out = Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args(["probe", &sim.url, "--backend", "openai"])
        .env("HF_HOME", scratch("probe").join("hf"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.starts_with("tokenizer:"))
        .unwrap_or_else(|| panic!("a tokenizer line: {text}"));
    assert!(
        line.contains("a run needs `tokenizer` set")
            && line
                .contains("tokenizes at /tokenize (vLLM's form), so tokenizer = \"server\" works"),
        "{line}"
    );
}
