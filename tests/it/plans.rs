//! The example plans and the committed schema.

use crate::support::{benchplan, repo, stdout};

#[test]
fn every_example_plan_validates() {
    let mut n = 0;
    for entry in std::fs::read_dir(repo().join("plans")).unwrap() {
        let path = entry.unwrap().path();
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !matches!(ext, "toml" | "yaml" | "yml") {
            continue;
        }
        let rel = path
            .strip_prefix(repo())
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        match crate::support::validate_file(&path) {
            Ok(planned) => assert!(!planned.cases.is_empty(), "{rel}: no case"),
            Err(e) => panic!("{rel} failed:\n{e}"),
        }
        n += 1;
    }
    assert!(n >= 5, "expected at least five example plans, found {n}");
}

#[test]
fn committed_schema_matches_the_types() {
    let generated = benchplan::plan::schema::plan_schema_json();
    let path = repo().join("schemas/plan.schema.json");
    if std::env::var_os("BENCHPLAN_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "schemas/plan.schema.json drifted from the types; regenerate with `BENCHPLAN_BLESS=1 cargo test committed_schema`"
    );
    let out = benchplan(&["schema"]);
    assert!(out.status.success());
    assert_eq!(
        stdout(&out),
        committed,
        "`benchplan schema` must print the committed file byte for byte"
    );
}

#[test]
fn every_schema_field_has_a_description() {
    let schema: serde_json::Value =
        serde_json::from_str(&benchplan::plan::schema::plan_schema_json()).unwrap();
    let mut missing = Vec::new();
    fn walk(v: &serde_json::Value, path: &str, missing: &mut Vec<String>) {
        if let Some(props) = v.get("properties").and_then(|p| p.as_object()) {
            for (k, p) in props {
                // The tag of a tagged enum is described by the enum itself.
                if p.get("description").is_none() && k != "name" {
                    missing.push(format!("{path}.{k}"));
                }
            }
        }
        match v {
            serde_json::Value::Object(m) => m
                .iter()
                .for_each(|(k, c)| walk(c, &format!("{path}/{k}"), missing)),
            serde_json::Value::Array(a) => a.iter().for_each(|c| walk(c, path, missing)),
            _ => {}
        }
    }
    walk(&schema, "", &mut missing);
    assert!(
        missing.is_empty(),
        "fields without a doc comment: {missing:?}"
    );
}

/// Per shipped plan, what shrinks it for the suite: fewer prompts (and conversations),
/// no cooldown, and only its simulator services (`compare.yaml` also names an external
/// server that no test may call). The SLOs stay as shipped, so a plan whose own gates
/// fail on its simulator fails here. The shipped sizes were run whole by hand: see the
/// README's plan table for their running times.
fn shrunk(plan: &str) -> Vec<&'static str> {
    let mut s = vec![
        "--set",
        "defaults.num_prompts=8",
        "--set",
        "execution.cooldown=\"0s\"",
    ];
    match plan {
        "compare.yaml" => s.extend(["--set", "matrix.service=[\"h100-sim\"]"]),
        "slo-search.toml" => s.extend([
            "--set",
            "matrix.\"dataset.input_len\"=[512]",
            "--set",
            "defaults.dataset.output_len=16",
            "--set",
            "optimize.max=32",
            "--set",
            "optimize.warmup_prompts=4",
            "--set",
            "optimize.probe={\"multiplier\":1,\"floor\":8}",
            "--set",
            "optimize.bisect={\"multiplier\":1,\"floor\":8}",
            "--set",
            "optimize.validation={\"multiplier\":2,\"floor\":16}",
        ]),
        "length-sweep.toml" => s.extend(["--set", "matrix.max_concurrency=[16]"]),
        "multi-turn.toml" => s.extend(["--set", "matrix.multi_turn_concurrency=[2]"]),
        _ => {}
    }
    s
}

#[test]
fn every_shipped_plan_runs_on_its_simulators_and_exits_0() {
    let _cpu = crate::support::heavy();
    let out_root = std::env::temp_dir().join(format!("benchplan-shipped-{}", std::process::id()));
    let mut names: Vec<String> = std::fs::read_dir(repo().join("plans"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            (name.ends_with(".toml") || name.ends_with(".yaml")).then_some(name)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 6, "{names:?}");
    for name in &names {
        let plan = format!("plans/{name}");
        let results = out_root.join(name);
        // A plan whose point is its search is run as its header says, with `optimize`.
        let mut args = if name == "slo-search.toml" {
            vec!["optimize", plan.as_str(), "--results-dir"]
        } else {
            vec!["run", plan.as_str(), "--quiet", "--results-dir"]
        };
        args.push(results.to_str().unwrap());
        args.extend(shrunk(name));
        let out = benchplan(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{plan} must pass its own gates on its simulators:\n{}\n{}",
            stdout(&out),
            String::from_utf8_lossy(&out.stderr)
        );
        let verdict = String::from_utf8_lossy(&out.stderr);
        assert!(
            verdict.contains(" 0 SLO failure(s), 0 regression(s): exit 0")
                || (name == "slo-search.toml" && verdict.contains(": validated with more prompts")),
            "{plan}: {verdict}"
        );
    }
    let _ = std::fs::remove_dir_all(&out_root);
}
