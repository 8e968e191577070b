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
        let out = benchplan(&["validate", &rel]);
        assert!(
            out.status.success(),
            "{rel} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout(&out).contains(" case"), "{rel}: {}", stdout(&out));
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
