//! Datasets from files: loading, filtering, errors with line numbers, trace replay.

use benchplan::client::backend::Prompt;
use benchplan::load::case::execute;
use benchplan::load::run::RunOptions;
use benchplan::load::target::resolve;
use benchplan::plan::dataset::{BurstgptDataset, CustomDataset, SharegptDataset};
use benchplan::plan::sim::{Preset, SimSpec};
use benchplan::plan::{Backend, CaseParams, Dataset, Service};
use benchplan::tokenizer::TokenModel;

use crate::support::repo;

fn fixtures() -> std::path::PathBuf {
    repo().join("tests/fixtures/data")
}

fn build(d: Dataset, n: u64) -> Result<Vec<benchplan::client::backend::RequestInput>, String> {
    let p = CaseParams {
        dataset: d,
        num_prompts: n,
        ..CaseParams::default()
    };
    benchplan::dataset::build(&p, &TokenModel::Builtin, &fixtures())
}

#[test]
fn sharegpt_takes_the_first_pair_and_oversamples() {
    let d = SharegptDataset {
        path: Some("../../../plans/data/sharegpt_sample.json".into()),
        ..Default::default()
    };
    let reqs = build(Dataset::Sharegpt(d.clone()), 5).unwrap();
    assert_eq!(reqs.len(), 5, "two conversations repeated to five requests");
    for r in &reqs {
        let Prompt::Text(t) = &r.prompt else { panic!() };
        assert!(t.ends_with('?') || t.ends_with('.'));
        assert_eq!(r.prompt_len, TokenModel::Builtin.count(t) as u64);
        assert!(
            r.output_len >= 20,
            "natural output length from the recorded reply"
        );
    }
    let fixed = build(
        Dataset::Sharegpt(SharegptDataset {
            output_len: Some(7),
            no_oversample: true,
            ..d
        }),
        5,
    )
    .unwrap();
    assert_eq!(fixed.len(), 2);
    assert!(fixed.iter().all(|r| r.output_len == 7));
}

#[test]
fn custom_jsonl_rows_and_their_errors() {
    let d = CustomDataset {
        path: Some("custom.jsonl".into()),
        output_len: -1,
        ..Default::default()
    };
    let reqs = build(Dataset::Custom(d.clone()), 5).unwrap();
    let mut outs: Vec<u64> = reqs.iter().map(|r| r.output_len).collect();
    outs.sort();
    assert_eq!(outs, vec![6, 8, 10, 12, 16]);
    let e = build(
        Dataset::Custom(CustomDataset {
            path: Some("custom_bad.jsonl".into()),
            ..Default::default()
        }),
        5,
    )
    .unwrap_err();
    assert!(e.contains("custom_bad.jsonl:3: not a JSON object"), "{e}");
    let e = build(
        Dataset::Custom(CustomDataset {
            path: Some("missing.jsonl".into()),
            ..Default::default()
        }),
        5,
    )
    .unwrap_err();
    assert!(e.contains("cannot read dataset file"), "{e}");
}

#[test]
fn burstgpt_keeps_gpt4_rows_with_a_response() {
    let d = BurstgptDataset {
        path: Some("burstgpt.csv".into()),
        replay_timestamps: true,
        time_scale: 0.5,
    };
    let reqs = build(Dataset::Burstgpt(d), 10).unwrap();
    let shape: Vec<(u64, u64, Option<f64>)> = reqs
        .iter()
        .map(|r| (r.prompt_len, r.output_len, r.arrival))
        .collect();
    assert_eq!(
        shape,
        vec![(64, 16, Some(0.0)), (48, 24, Some(1.5)), (16, 8, Some(3.5))]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_replay_sends_at_the_scaled_times() {
    let svc = Service {
        sim: Some(SimSpec {
            preset: Some(Preset::Fast),
            ..Default::default()
        }),
        ..Service::default()
    };
    let resolved = resolve(&svc, false, None).await.unwrap();
    let d = CustomDataset {
        path: Some("custom.jsonl".into()),
        replay_timestamps: true,
        time_scale: 0.5,
        ..Default::default()
    };
    let p = CaseParams {
        backend: Some(Backend::Openai),
        dataset: Dataset::Custom(d),
        num_prompts: 5,
        ..CaseParams::default()
    };
    let opts = RunOptions {
        data_dir: fixtures(),
        ..RunOptions::default()
    };
    let r = execute(&resolved, &svc, &p, &opts).await.unwrap();
    assert_eq!(r.summary.completed, 5);
    let want = [0.0, 0.1, 0.25, 0.3, 0.5];
    for (rec, w) in r.run.records.iter().zip(want) {
        assert!(
            (rec.scheduled - w).abs() < 1e-9,
            "scheduled {} vs trace {w}",
            rec.scheduled
        );
        assert!(
            (rec.dispatched - w).abs() < 0.005,
            "sent at {:.4} s, the trace says {w} s",
            rec.dispatched
        );
    }
}
