//! The deployment examples under `examples/`: every YAML parses, every Kubernetes object
//! is checked against the Kubernetes API types (k8s-openapi), and every benchplan
//! command line in them is one the CLI accepts.

use clap::Parser;
use serde_json::Value;

use crate::support::repo;

/// Every YAML document of every `.yaml`/`.yml` file below `examples/<dir>`.
fn documents(dir: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(repo().join("examples").join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v: Value = serde::Deserialize::deserialize(doc)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            out.push((f.display().to_string(), v));
        }
    }
    out
}

/// Drops nulls and empty objects, which a typed round trip may add or leave out.
fn normal(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| (k.clone(), normal(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normal).collect()),
        other => other.clone(),
    }
}

/// Deserialises into the API type and back: a misspelt or misplaced field, which the
/// type does not know, goes missing in the round trip and fails the comparison.
fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(file: &str, v: &Value) {
    let t: T = serde_json::from_value(v.clone())
        .unwrap_or_else(|e| panic!("{file}: not a valid {}: {e}", std::any::type_name::<T>()));
    let back = serde_json::to_value(&t).unwrap();
    assert_eq!(
        normal(&back),
        normal(v),
        "{file}: fields the API type does not have"
    );
}

fn accepts(file: &str, args: &[String]) {
    let mut argv = vec!["benchplan".to_string()];
    argv.extend(args.iter().cloned());
    if let Err(e) = benchplan::cli::Cli::try_parse_from(&argv) {
        // `benchplan --version` is a command line: clap answers it with the version.
        if e.kind() == clap::error::ErrorKind::DisplayVersion {
            return;
        }
        panic!(
            "{file}: `{}` is not a benchplan command line: {e}",
            argv.join(" ")
        );
    }
}

#[test]
fn kubernetes_examples_are_valid_api_objects_with_valid_command_lines() {
    use k8s_openapi::api::batch::v1::{CronJob, Job};
    use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim};
    let docs = documents("k8s");
    let mut commands = 0;
    let mut jobs = Vec::new();
    for (file, v) in &docs {
        match v["kind"].as_str() {
            Some("Job") => {
                typed::<Job>(file, v);
                jobs.push(serde_json::from_value::<Job>(v.clone()).unwrap());
            }
            Some("CronJob") => {
                typed::<CronJob>(file, v);
                let cron = serde_json::from_value::<CronJob>(v.clone()).unwrap();
                let spec = cron.spec.unwrap();
                assert_eq!(spec.concurrency_policy.as_deref(), Some("Forbid"), "{file}");
                jobs.push(Job {
                    metadata: Default::default(),
                    spec: spec.job_template.spec,
                    status: None,
                });
            }
            Some("ConfigMap") => typed::<ConfigMap>(file, v),
            Some("PersistentVolumeClaim") => typed::<PersistentVolumeClaim>(file, v),
            other => panic!("{file}: unexpected kind {other:?}"),
        }
    }
    for job in &jobs {
        let spec = job.spec.as_ref().unwrap();
        for c in &spec.template.spec.as_ref().unwrap().containers {
            if c.command.as_deref() == Some(&["benchplan".to_string()][..]) {
                accepts("k8s", c.args.as_deref().unwrap_or_default());
                commands += 1;
            }
        }
    }
    // The shards run as an Indexed Job whose completions match --shard-count.
    let shards = jobs
        .iter()
        .find(|j| j.spec.as_ref().unwrap().completion_mode.as_deref() == Some("Indexed"))
        .expect("an Indexed Job");
    let spec = shards.spec.as_ref().unwrap();
    let args = spec.template.spec.as_ref().unwrap().containers[0]
        .args
        .clone()
        .unwrap();
    let at = args.iter().position(|a| a == "--shard-count").unwrap();
    assert_eq!(args[at + 1], spec.completions.unwrap().to_string());
    assert!(args.contains(&"--shard-from-env".to_string()));
    assert_eq!(
        commands, 3,
        "a shard Job, a merge Job and the nightly CronJob"
    );
    // The CronJob keeps its history on a claim and appends each run to it.
    let nightly = docs
        .iter()
        .find(|(_, v)| v["kind"] == "CronJob")
        .map(|(_, v)| v.to_string())
        .unwrap();
    assert!(
        nightly.contains("report.history=/history/nightly.jsonl")
            && nightly.contains("benchplan-history"),
        "{nightly}"
    );
}

#[test]
fn github_actions_example_has_valid_command_lines() {
    let docs = documents("github-actions");
    let mut commands = 0;
    for (file, wf) in &docs {
        for (_, job) in wf["jobs"].as_object().unwrap() {
            for step in job["steps"].as_array().unwrap() {
                let Some(run) = step["run"].as_str() else {
                    continue;
                };
                for line in run
                    .lines()
                    .filter(|l| l.trim_start().starts_with("benchplan "))
                {
                    // The matrix value a runner would substitute.
                    let line = line.replace("${{ matrix.shard }}", "1");
                    let args: Vec<String> = line
                        .split_whitespace()
                        .skip(1)
                        .map(str::to_string)
                        .collect();
                    accepts(file, &args);
                    commands += 1;
                }
            }
        }
        if file.ends_with("benchplan-sharded.yml") {
            assert_eq!(
                wf["jobs"]["shard"]["strategy"]["fail-fast"],
                Value::Bool(false),
                "{file}: one shard's failure must not cancel the others"
            );
        }
    }
    assert_eq!(
        commands, 7,
        "a shard run and a merge; the release's --version, init and run; the nightly's run and trend"
    );
}

#[test]
fn the_release_workflow_builds_wheels_for_every_platform_and_publishes_them() {
    let docs = documents("github-actions");
    let (file, wf) = docs
        .iter()
        .find(|(f, _)| f.ends_with("release-wheels.yml"))
        .expect("the release workflow");
    let wheels = &wf["jobs"]["wheels"];
    let targets: Vec<&str> = wheels["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["target"].as_str())
        .collect();
    for t in [
        "x86_64-unknown-linux-gnu",
        "aarch64-unknown-linux-gnu",
        "x86_64-unknown-linux-musl",
        "x86_64-apple-darwin",
        "aarch64-apple-darwin",
    ] {
        assert!(targets.contains(&t), "{file}: no {t} wheel in {targets:?}");
    }
    // glibc Linux wheels install on glibc 2.17+ (manylinux2014, linked with zig as
    // scripts/wheel.sh does), never on the runner's own glibc only.
    for t in wheels["strategy"]["matrix"]["include"].as_array().unwrap() {
        if t["target"].as_str().unwrap().ends_with("linux-gnu") {
            assert_eq!(t["manylinux"], "2014", "{file}: {t}");
            assert!(t["args"].as_str().unwrap().contains("--zig"), "{file}: {t}");
        }
    }
    // The wheels are release assets (what `pip install ./benchplan-*.whl` reads
    // before a PyPI release exists).
    let assets = wf["jobs"]["release-assets"].to_string();
    assert!(assets.contains("gh release"), "{file}: {assets}");
    let uses = |job: &Value, action: &str| {
        job["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["uses"].as_str().is_some_and(|u| u.starts_with(action)))
    };
    assert!(uses(wheels, "PyO3/maturin-action@"), "{file}");
    let publish = &wf["jobs"]["publish"];
    assert!(uses(publish, "pypa/gh-action-pypi-publish@"), "{file}");
    assert_eq!(
        publish["permissions"]["id-token"], "write",
        "{file}: trusted publishing"
    );
    let needs: Vec<&str> = publish["needs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        needs.contains(&"wheels") && needs.contains(&"sdist"),
        "{file}"
    );
    // pyproject.toml builds the binary into the wheel.
    let py: toml::Value =
        toml::from_str(&std::fs::read_to_string(repo().join("pyproject.toml")).unwrap()).unwrap();
    assert_eq!(py["tool"]["maturin"]["bindings"].as_str(), Some("bin"));
    assert_eq!(
        py["build-system"]["build-backend"].as_str(),
        Some("maturin")
    );
}
