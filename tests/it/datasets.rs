//! Datasets from files: loading, filtering, errors with line numbers, trace replay.

use benchplan::client::backend::Prompt;
use benchplan::load::case::execute;
use benchplan::load::options::RunOptions;
use benchplan::plan::dataset::{BurstgptDataset, CustomDataset, SharegptDataset};
use benchplan::plan::sim::{Preset, SimSpec};
use benchplan::plan::{Backend, CaseParams, Dataset, Service};
use benchplan::service::target::resolve;
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
    let mut lags = Vec::new();
    for (rec, w) in r.run.records.iter().zip(want) {
        assert!(
            (rec.scheduled - w).abs() < 1e-9,
            "scheduled {} vs trace {w}",
            rec.scheduled
        );
        // Never early, and in its own slot (the next trace entry is ≥ 50 ms later).
        let lag = rec.dispatched - w;
        assert!(
            (-1e-4..0.05).contains(&lag),
            "sent at {:.4} s, the trace says {w} s",
            rec.dispatched
        );
        lags.push(lag);
    }
    // On time: the median of five, since one send the OS delays on a busy machine
    // (7.5 ms seen with two CPU hogs running) must not decide it.
    lags.sort_by(f64::total_cmp);
    assert!(
        lags[2] < 0.005,
        "median send lag {:.4} s: {lags:?}",
        lags[2]
    );
}

#[test]
fn random_prompts_have_exact_lengths_with_a_real_bpe_tokenizer() {
    let _cpu = crate::support::heavy();
    use benchplan::plan::dataset::RandomDataset;
    let tok = TokenModel::load(&repo().join("tests/fixtures/tokenizer")).unwrap();
    assert_eq!(
        tok.num_special_tokens(),
        1,
        "the fixture tokenizer adds <s>"
    );
    for (len, n) in [(2u64, 1000usize), (64, 1000), (1024, 300), (8192, 40)] {
        let d = RandomDataset {
            input_len: len,
            output_len: 4,
            ..RandomDataset::default()
        };
        let reqs = benchplan::dataset::random::random(&d, n, 7, &tok, Backend::Openai).unwrap();
        let mut off = 0;
        for r in &reqs {
            let Prompt::Text(t) = &r.prompt else { panic!() };
            // Exact: the prompt re-encodes to input_len minus the special token the tokenizer adds.
            let got = tok.count(t) as u64;
            assert_eq!(got, r.prompt_len);
            if got != len - 1 {
                off += 1;
            }
        }
        assert_eq!(off, 0, "{off} of {n} prompts at length {len} are not exact");
    }
    // Length 1 leaves no room after the special token: a clear error, not an empty prompt.
    let d = RandomDataset {
        input_len: 1,
        output_len: 4,
        ..RandomDataset::default()
    };
    let e = benchplan::dataset::random::random(&d, 10, 7, &tok, Backend::Openai).unwrap_err();
    assert!(e.contains("leaves no room"), "{e}");
    // With the built-in tokenizer (no special tokens), length 1 is one token.
    let reqs =
        benchplan::dataset::random::random(&d, 1000, 7, &TokenModel::Builtin, Backend::Openai)
            .unwrap();
    assert!(reqs.iter().all(|r| r.prompt_len == 1));
}

/// The real Qwen2.5 tokenizer from ../shared, when present (never needed by CI).
#[test]
#[ignore = "needs ../shared/data/tokenizers/qwen2.5; run with --ignored"]
fn random_prompts_are_exact_with_qwen() {
    use benchplan::plan::dataset::RandomDataset;
    let dir = repo().join("../shared/data/tokenizers/qwen2.5");
    let tok = TokenModel::load(&dir).unwrap();
    for (len, n) in [(1u64, 1000usize), (128, 1000), (1024, 1000), (8192, 100)] {
        let d = RandomDataset {
            input_len: len,
            output_len: 4,
            ..RandomDataset::default()
        };
        let reqs = benchplan::dataset::random::random(&d, n, 3, &tok, Backend::Openai).unwrap();
        let exact = reqs
            .iter()
            .filter(|r| match &r.prompt {
                Prompt::Text(t) => tok.count(t) as u64 == len,
                _ => false,
            })
            .count();
        assert_eq!(exact, n, "length {len}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dataset_kind_drives_a_case_and_the_server_agrees_on_lengths() {
    use benchplan::plan::dataset::{PrefixRepetitionDataset, RandomDataset, RandomRerankDataset};
    // The simulator runs apart from the service definition: the client sees an external
    // server whose tokenizer is "server" (its /tokenize and /detokenize).
    let sim = benchplan::sim::Simulator::start(benchplan::sim::SimConfig::preset(Preset::Fast))
        .await
        .unwrap();
    let svc = Service {
        base_url: Some(sim.base_url.clone()),
        tokenizer: Some("server".into()),
        ..Service::default()
    };
    let resolved = resolve(&svc, false, None).await.unwrap();
    let kinds: Vec<(Backend, Dataset)> = vec![
        (
            Backend::Openai,
            Dataset::Random(RandomDataset {
                input_len: 50,
                output_len: 5,
                range_ratio: 0.5,
                ..Default::default()
            }),
        ),
        (
            Backend::OpenaiChat,
            Dataset::Random(RandomDataset {
                input_len: 30,
                output_len: 5,
                prefix_len: 10,
                ..Default::default()
            }),
        ),
        (
            Backend::OpenaiEmbeddings,
            Dataset::Random(RandomDataset {
                input_len: 20,
                batch_size: 3,
                ..Default::default()
            }),
        ),
        (
            Backend::VllmRerank,
            Dataset::RandomRerank(RandomRerankDataset {
                input_len: 12,
                batch_size: 2,
                ..Default::default()
            }),
        ),
        (
            Backend::Openai,
            Dataset::PrefixRepetition(PrefixRepetitionDataset {
                prefix_len: 16,
                suffix_len: 8,
                num_prefixes: 2,
                output_len: 4,
            }),
        ),
        (
            Backend::Openai,
            Dataset::Sharegpt(SharegptDataset {
                path: Some("../../../plans/data/sharegpt_sample.json".into()),
                ..Default::default()
            }),
        ),
        (
            Backend::OpenaiChat,
            Dataset::Custom(CustomDataset {
                path: Some("custom.jsonl".into()),
                ..Default::default()
            }),
        ),
        (
            Backend::Openai,
            Dataset::Burstgpt(BurstgptDataset {
                path: Some("burstgpt.csv".into()),
                ..Default::default()
            }),
        ),
    ];
    for (backend, dataset) in kinds {
        let name = dataset.name();
        let p = CaseParams {
            backend: Some(backend),
            dataset,
            num_prompts: 6,
            percentile_metrics: None,
            ..CaseParams::default()
        };
        let mut p = p;
        if !backend.is_pooling() {
            p.ignore_eos = Some(true);
        }
        let opts = RunOptions {
            data_dir: fixtures(),
            ..RunOptions::default()
        };
        let r = execute(&resolved, &svc, &p, &opts)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            r.summary.completed, 6,
            "{name}: {:?}",
            r.summary.first_errors
        );
        let sent: u64 = r.inputs.iter().map(|i| i.prompt_len).sum();
        // total_input_tokens comes from the server's usage: it counted what the client built.
        assert_eq!(r.summary.total_input_tokens, sent, "{name} via {backend:?}");
        if !backend.is_pooling() {
            let asked: u64 = r.inputs.iter().map(|i| i.output_len).sum();
            assert_eq!(r.summary.total_output_tokens, asked, "{name}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_mm_sends_images_as_chat_content_parts() {
    use benchplan::plan::dataset::{MmBucket, RandomMmDataset};
    let svc = Service {
        sim: Some(SimSpec {
            preset: Some(Preset::Fast),
            ..Default::default()
        }),
        ..Service::default()
    };
    let resolved = resolve(&svc, false, None).await.unwrap();
    let d = RandomMmDataset {
        input_len: 20,
        output_len: 3,
        base_items_per_request: 2,
        num_mm_items_range_ratio: 0.5,
        buckets: vec![MmBucket {
            height: 16,
            width: 24,
            frames: 1,
            probability: 1.0,
        }],
        ..Default::default()
    };
    let p = CaseParams {
        backend: Some(Backend::OpenaiChat),
        dataset: Dataset::RandomMm(d),
        num_prompts: 8,
        ignore_eos: Some(true),
        ..CaseParams::default()
    };
    let r = execute(&resolved, &svc, &p, &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(r.summary.completed, 8, "{:?}", r.summary.first_errors);
    let mut images = 0u64;
    for i in r.inputs.iter() {
        let Prompt::Messages(m) = &i.prompt else {
            panic!("chat parts")
        };
        let parts = m[0]["content"].as_array().unwrap();
        assert_eq!(parts[0]["type"], "text");
        let k = parts.len() as u64 - 1;
        assert!((1..=3).contains(&k), "1 to 3 images per request: {k}");
        assert!(
            parts[1]["image_url"]["url"]
                .as_str()
                .unwrap()
                .starts_with("data:image/png;base64,iVBOR")
        );
        images += k;
    }
    // The simulator counts 64 tokens per image on top of the text.
    let text: u64 = r.inputs.iter().map(|i| i.prompt_len).sum();
    assert_eq!(r.summary.total_input_tokens, text + 64 * images);
    assert_eq!(text, 8 * 20);
}

#[test]
fn custom_prompts_get_the_chat_template_on_completions() {
    let tok = TokenModel::load(&repo().join("tests/fixtures/tokenizer")).unwrap();
    let d = CustomDataset {
        path: Some("custom.jsonl".into()),
        disable_shuffle: true,
        ..Default::default()
    };
    let with = benchplan::dataset::files::custom(&d, 1, 0, &tok, &fixtures(), false).unwrap();
    let Prompt::Text(t) = &with[0].prompt else {
        panic!()
    };
    assert_eq!(
        t,
        "<s>user: Explain continuous batching in two sentences please\nassistant:"
    );
    assert_eq!(with[0].prompt_len, tok.count(t) as u64);
    let chat = benchplan::dataset::files::custom(&d, 1, 0, &tok, &fixtures(), true).unwrap();
    let raw = CustomDataset {
        skip_chat_template: true,
        ..d.clone()
    };
    let skipped = benchplan::dataset::files::custom(&raw, 1, 0, &tok, &fixtures(), false).unwrap();
    for r in [chat, skipped] {
        let Prompt::Text(t) = &r[0].prompt else {
            panic!()
        };
        assert_eq!(t, "Explain continuous batching in two sentences please");
    }
}

/// A stand-in for the Hugging Face hub: serves the fixture tokenizer files under
/// /{org}/{name}/resolve/main/, and counts requests.
fn fake_hub() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            let file = path.rsplit('/').next().unwrap_or("");
            let body = std::fs::read(repo().join("tests/fixtures/tokenizer").join(file))
                .ok()
                .filter(|_| path.contains("/resolve/main/"));
            let mut s = stream;
            let _ = match body {
                Some(b) => {
                    let _ = write!(
                        s,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        b.len()
                    );
                    s.write_all(&b)
                }
                None => write!(
                    s,
                    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                ),
            };
        }
    });
    (url, hits)
}

#[test]
fn hub_ids_download_once_into_the_cache_and_respect_offline_mode() {
    let home = std::env::temp_dir().join(format!("benchplan-hf-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    let (hub, hits) = fake_hub();
    let sim = crate::support::SimProcess::start(&["--preset", "fast"]);
    let url = sim.url.clone();
    let bench = |offline: bool| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_benchplan"));
        c.args([
            "bench",
            "--base-url",
            &url,
            "--tokenizer",
            "acme/tiny-model",
            "--num-prompts",
            "4",
            "--random-input-len",
            "16",
            "--random-output-len",
            "2",
            "--disable-tqdm",
        ])
        .env("HF_HOME", &home)
        .env("HF_ENDPOINT", &hub)
        .env_remove("HF_HUB_OFFLINE");
        if offline {
            c.env("HF_HUB_OFFLINE", "1");
        }
        c.output().unwrap()
    };
    let out = bench(true);
    assert_eq!(
        out.status.code(),
        Some(2),
        "offline and not cached: a clear error before any traffic"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("HF_HUB_OFFLINE is set"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = bench(false);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cached = home.join("hub/models--acme--tiny-model/snapshots/main");
    assert!(
        cached.join("tokenizer.json").is_file() && cached.join("tokenizer_config.json").is_file()
    );
    let before = hits.load(std::sync::atomic::Ordering::Relaxed);
    let out = bench(true);
    assert_eq!(
        out.status.code(),
        Some(0),
        "cached: works offline: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        hits.load(std::sync::atomic::Ordering::Relaxed),
        before,
        "no download the second time"
    );
    drop(sim);
    std::fs::remove_dir_all(&home).ok();
}
