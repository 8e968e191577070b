//! Table-driven tests of the case checks: each row one resolved case (the defaults
//! with one change), the key path its diagnostic must name and words of its message.
//! Whole plans, with files and lines, are `tests/it/bad_plans.rs`'s.

use serde_json::{Value, json};

use super::check_case;
use crate::plan::backend::Backend;
use crate::plan::params::{CaseParams, ClientEngine};
use crate::plan::{Dataset, PlanSource};
use crate::planner::case::Case;

fn dataset(v: Value) -> Dataset {
    serde_json::from_value(v).expect("a dataset")
}

/// The diagnostics of one case of service `s`, every parameter from `defaults`.
fn diagnose(p: CaseParams) -> Vec<(String, String)> {
    let case = Case {
        id: "c".into(),
        service: "s".into(),
        params: p,
        assignments: Vec::new(),
        repeats: None,
    };
    let source = PlanSource::from_value("t.toml", json!({}));
    let mut out = Vec::new();
    check_case(&case, &source, &[], &mut out);
    out.into_iter().map(|d| (d.path, d.message)).collect()
}

type Change = fn(&mut CaseParams);

/// (what it shows, the change, the key path, words of the message).
const ROWS: &[(&str, Change, &str, &str)] = &[
    (
        "an endpoint of another backend",
        |p| {
            p.backend = Some(Backend::OpenaiChat);
            p.endpoint = Some("/v1/completions".into());
        },
        "services.s.endpoint",
        "does not fit backend `openai-chat`",
    ),
    (
        "images on the completions API",
        |p| p.dataset = dataset(json!({"name": "random-mm"})),
        "defaults.dataset",
        "sends images, which need the chat API, but the backend is `openai`",
    ),
    (
        "a conversation on the completions API",
        |p| p.dataset = dataset(json!({"name": "multi_turn"})),
        "defaults.dataset",
        "sends a conversation history",
    ),
    (
        "audio clips on the chat API",
        |p| {
            p.backend = Some(Backend::OpenaiChat);
            p.dataset = dataset(json!({"name": "random-audio"}));
        },
        "defaults.dataset",
        "uploads audio clips, which need the audio API",
    ),
    (
        "the audio API with text prompts",
        |p| p.backend = Some(Backend::OpenaiAudio),
        "services.s.backend",
        "backend `openai-audio` uploads audio clips, and dataset `random` has none",
    ),
    (
        "rerank queries on the embeddings API",
        |p| {
            p.backend = Some(Backend::OpenaiEmbeddings);
            p.dataset = dataset(json!({"name": "random-rerank"}));
        },
        "defaults.dataset",
        "builds rerank queries",
    ),
    (
        "the rerank API with text prompts",
        |p| p.backend = Some(Backend::VllmRerank),
        "services.s.backend",
        "backend `vllm-rerank` needs the `random-rerank` dataset, not `random`",
    ),
    (
        "min_p on the Responses API",
        |p| {
            p.backend = Some(Backend::OpenaiResponses);
            p.min_p = Some(0.1);
        },
        "defaults.min_p",
        "the Responses API has no min_p",
    ),
    (
        "a sampling parameter on a pooling backend",
        |p| {
            p.backend = Some(Backend::OpenaiEmbeddings);
            p.temperature = Some(0.5);
        },
        "defaults.temperature",
        "openai-embeddings",
    ),
    (
        "vLLM's client with a dataset it lacks",
        |p| {
            p.backend = Some(Backend::OpenaiChat);
            p.client = Some(ClientEngine::Vllm);
            p.dataset = dataset(json!({"name": "random-mm"}));
        },
        "defaults.client",
        "client = \"vllm\": dataset `random-mm` is not mapped",
    ),
    (
        "no concurrency",
        |p| p.max_concurrency = Some(0),
        "defaults.max_concurrency",
        "",
    ),
    (
        "no prompts",
        |p| p.num_prompts = 0,
        "defaults.num_prompts",
        "",
    ),
    (
        "more prompts than a case holds",
        |p| p.num_prompts = super::MAX_PROMPTS + 1,
        "defaults.num_prompts",
        "more than one case can hold",
    ),
];

#[test]
fn each_bad_case_is_named_at_its_key_with_its_reason() {
    for (what, change, path, says) in ROWS {
        let mut p = CaseParams::default();
        change(&mut p);
        let found = diagnose(p);
        assert!(
            found
                .iter()
                .any(|(at, message)| at == path && message.contains(says)),
            "{what}: wanted `{path}`: …{says}…, got {found:#?}"
        );
    }
}

#[test]
fn a_good_case_has_nothing_to_say_and_two_faults_are_both_named() {
    assert_eq!(diagnose(CaseParams::default()), vec![]);
    let chat = CaseParams {
        backend: Some(Backend::OpenaiChat),
        dataset: dataset(json!({"name": "random-mm"})),
        ..CaseParams::default()
    };
    assert_eq!(diagnose(chat), vec![]);
    // Images on the audio API: the dataset needs chat, and the backend needs clips.
    let both = CaseParams {
        backend: Some(Backend::OpenaiAudio),
        dataset: dataset(json!({"name": "random-mm"})),
        ..CaseParams::default()
    };
    let found = diagnose(both);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].1.contains("need the chat API") && found[1].1.contains("has none"));
}
