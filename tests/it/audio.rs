//! The audio backend (`openai-audio`: transcriptions and translations) against the
//! simulator's ground truth, as chat is checked; the multipart request it sends
//! against vLLM's; the audio datasets (synthetic clips and local files); and the
//! `bench` command line with vLLM's audio flags.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use benchplan::client::backend::{AudioClip, Prompt, RequestInput};
use benchplan::client::outcome::Limits;
use benchplan::client::request::{Target, send_input};
use benchplan::load::case::execute;
use benchplan::load::options::RunOptions;
use benchplan::plan::dataset::{CustomAudioDataset, RandomAudioDataset};
use benchplan::plan::sim::{Preset, SimParams};
use benchplan::plan::units::Dur;
use benchplan::plan::{Backend, CaseParams, Dataset, Metric};
use benchplan::service::target::resolve;
use benchplan::sim::multipart;

use crate::support::{
    benchplan, prefill_sim, read_json, read_request, scripted, sim_service, stderr, tempdir,
    timing_check,
};

fn clip_params(endpoint: &str, n: u64, seconds: f64, output: u64) -> CaseParams {
    CaseParams {
        backend: Some(Backend::OpenaiAudio),
        endpoint: Some(endpoint.into()),
        num_prompts: n,
        dataset: Dataset::RandomAudio(RandomAudioDataset {
            duration: Dur::from_secs_f64(seconds),
            output_len: output,
            ..RandomAudioDataset::default()
        }),
        ignore_eos: Some(true),
        max_concurrency: Some(1),
        percentile_metrics: Some(vec![Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el]),
        metric_percentiles: vec![50.0, 99.0],
        ..CaseParams::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audio_latencies_tokens_and_rtfx_match_the_ground_truth() {
    timing_check(3, ground_truth_once).await;
}

async fn ground_truth_once() -> Result<(), String> {
    // A 2 s clip is 100 prompt tokens to the simulator (50 a second): prefill 15 ms +
    // 50 µs a token = 20 ms TTFT, then 10 ms a token.
    let svc = prefill_sim(0.015, 50e-6);
    let resolved = resolve(&svc, false, None).await.unwrap();
    let whisper_len = resolved
        .tokens
        .count(benchplan::dataset::audio::WHISPER_PROMPT) as u64;
    for endpoint in ["/v1/audio/transcriptions", "/v1/audio/translations"] {
        let p = clip_params(endpoint, 12, 2.0, 11);
        let r = execute(&resolved, &svc, &p, &RunOptions::default())
            .await
            .unwrap();
        let s = &r.summary;
        assert_eq!((s.completed, s.failed), (12, 0), "{endpoint}");
        assert_eq!(s.total_output_tokens, 132, "{endpoint}");
        // vLLM counts the dataset's prompt (the Whisper decoder prompt), not the audio.
        assert_eq!(s.total_input_tokens, 12 * whisper_len, "{endpoint}");
        for x in &r.run.records {
            let o = &x.sample;
            assert_eq!(o.usage_completion, Some(11), "{endpoint}: usage read");
            assert_eq!(
                o.usage_prompt, None,
                "{endpoint}: vLLM reads no prompt_tokens"
            );
            assert_eq!(o.chunks, 11, "{endpoint}: one token event per token");
            assert_eq!(o.itl.len(), 10, "{endpoint}");
            assert!(o.done && !o.text.is_empty(), "{endpoint}");
            assert_eq!(o.input_audio_duration, 2.0, "{endpoint}");
            let sum: f64 = o.itl.iter().sum();
            assert!((o.ttft + sum - o.latency).abs() < 1e-9, "{endpoint}");
        }
        // RTFx: seconds of audio per second of benchmark.
        assert!(
            (s.rtfx - 24.0 / s.duration).abs() < 1e-9,
            "{endpoint}: rtfx {} for 24 s of audio in {} s",
            s.rtfx,
            s.duration
        );
        let ttft = s.stat(Metric::Ttft).unwrap().median;
        let itl = s.stat(Metric::Itl).unwrap().mean;
        if (ttft - 20.0).abs() >= 3.0 {
            return Err(format!(
                "{endpoint}: median TTFT {ttft:.3} ms, injected 20 ms (100 audio tokens)"
            ));
        }
        if (itl - 10.0).abs() >= 0.3 {
            return Err(format!("{endpoint}: mean ITL {itl:.3} ms, injected 10 ms"));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_longer_clip_is_a_longer_prefill() {
    // 1 s = 50 tokens = 25 ms of prefill; 9 s = 450 tokens = 225 ms: the server read
    // the clip at its length, and TTFT shows it. The prefill is long beside the cost of
    // sending and reading the longer clip (288 KB against 32 KB), which a busy machine
    // stretches by a few ms (with three CPU hogs: 1.5 ms on the 1 s clip, 3.5 on the 9 s).
    timing_check(3, || async {
        let svc = prefill_sim(0.005, 500e-6);
        let resolved = resolve(&svc, false, None).await.unwrap();
        let mut ttft = Vec::new();
        for secs in [1.0, 9.0] {
            let p = clip_params("/v1/audio/transcriptions", 6, secs, 2);
            let r = execute(&resolved, &svc, &p, &RunOptions::default())
                .await
                .unwrap();
            assert_eq!(r.summary.completed, 6);
            ttft.push(r.summary.stat(Metric::Ttft).unwrap().median);
        }
        let gap = ttft[1] - ttft[0];
        if (gap - 200.0).abs() < 10.0 {
            Ok(())
        } else {
            Err(format!(
                "TTFT 1 s {:.2} ms, 9 s {:.2} ms: gap {gap:.2}, expected 200",
                ttft[0], ttft[1]
            ))
        }
    })
    .await;
}

/// The requests a server saw: head and body of each.
type Seen = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A server that keeps each request's head and body and answers with a short
/// transcription stream.
fn recording_server() -> (String, Seen) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    let (base, _) = scripted(move |_, s, _| {
        if let Some(req) = read_request(s) {
            keep.lock().unwrap().push(req);
            let body = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1}}\n\n\
data: {\"choices\":[{\"delta\":{\"content\":\" there\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2}}\n\n\
data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,\"total_tokens\":11}}\n\ndata: [DONE]\n\n";
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}"
            );
            let _ = s.flush();
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    });
    (base, seen)
}

fn clip(seconds: f64) -> Arc<AudioClip> {
    let mut rng = benchplan::rng::Rng::new(7);
    Arc::new(AudioClip::synthetic(seconds, 16_000, &mut rng, "audio.wav"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_is_vllms_multipart_form_on_both_clients() {
    let (base, seen) = recording_server();
    let audio = clip(0.5);
    let input = RequestInput {
        prompt: Prompt::Audio(audio.clone()),
        prompt_len: 4,
        output_len: 7,
        arrival: None,
        model: None,
    };
    let params = CaseParams {
        temperature: Some(0.0),
        extra_body: Some(
            serde_json::from_value(serde_json::json!({"prompt": "names: Ada", "language": null}))
                .unwrap(),
        ),
        ..CaseParams::default()
    };
    for native in [true, false] {
        let mut target = Target::new(
            format!("{base}/v1/audio/transcriptions"),
            benchplan::base_url::BaseUrl::parse(&base).unwrap(),
            Backend::OpenaiAudio,
            "whisper".into(),
            Default::default(),
            benchplan::client::http::build_client(false, None).unwrap(),
            Limits::default(),
        );
        if !native {
            target.native = None;
        }
        let o = send_input(&target, &params, &input, Some("rq-1"), None).await;
        let s = &o.sample;
        assert!(s.success, "{native}: {:?}", s.error);
        // Usage on token chunks is not read (vLLM reads it from the last chunk only).
        assert_eq!(
            (s.chunks, s.usage_completion, s.usage_prompt),
            (2, Some(2), None)
        );
        assert_eq!(s.text, "hi there");
        assert_eq!(s.input_audio_duration, 0.5);
        let (head, body) = seen.lock().unwrap().pop().expect("a request");
        let head = head.to_ascii_lowercase();
        assert!(head.starts_with("post /v1/audio/transcriptions "), "{head}");
        assert!(head.contains("x-request-id: rq-1"), "{head}");
        let ct = head
            .lines()
            .find_map(|l| l.strip_prefix("content-type: "))
            .expect("a content type")
            .trim()
            .to_string();
        let boundary = multipart::boundary(&ct).expect("a multipart boundary");
        let parts = multipart::parse(&body, boundary).unwrap();
        let fields: Vec<(&str, String)> = parts
            .iter()
            .map(|p| {
                (
                    p.name.as_str(),
                    String::from_utf8_lossy(p.data).into_owned(),
                )
            })
            .collect();
        // vLLM's order and Python's str(): the clip, then the fields, then the extras
        // (temperature, and extra_body last, where null removes a field).
        assert_eq!(parts[0].filename.as_deref(), Some("audio.wav"));
        assert_eq!(parts[0].data, &audio.wav[..], "the clip as made");
        let names: Vec<&str> = fields.iter().map(|f| f.0).collect();
        assert_eq!(
            names,
            [
                "file",
                "model",
                "max_completion_tokens",
                "stream",
                "stream_include_usage",
                "stream_continuous_usage_stats",
                "temperature",
                "prompt"
            ],
            "{native}"
        );
        let value = |k: &str| fields.iter().find(|f| f.0 == k).unwrap().1.clone();
        assert_eq!(value("model"), "whisper");
        assert_eq!(value("max_completion_tokens"), "7");
        assert_eq!(value("stream"), "True");
        assert_eq!(value("stream_include_usage"), "True");
        assert_eq!(value("temperature"), "0.0");
        assert_eq!(value("prompt"), "names: Ada");
    }
}

#[test]
fn the_form_without_extras_carries_language_en() {
    let input = RequestInput {
        prompt: Prompt::Audio(clip(0.1)),
        prompt_len: 4,
        output_len: 3,
        arrival: None,
        model: None,
    };
    let body = benchplan::client::backend::build_body(
        Backend::OpenaiAudio,
        "m",
        &input,
        &CaseParams::default(),
    );
    let parts = multipart::parse(&body, benchplan::client::multipart::BOUNDARY).unwrap();
    let language = parts.iter().find(|p| p.name == "language").unwrap();
    assert_eq!(language.data, b"en");
    assert!(
        parts.iter().all(|p| p.name != "ignore_eos"),
        "ignore_eos only when set"
    );
}

fn write_clip(dir: &Path, name: &str, seconds: f64) {
    let mut rng = benchplan::rng::Rng::new(seconds.to_bits());
    let clip = AudioClip::synthetic(seconds, 8_000, &mut rng, name);
    std::fs::write(dir.join(name), &clip.wav).unwrap();
}

fn build(d: CustomAudioDataset, n: u64, dir: &Path) -> Result<Vec<RequestInput>, String> {
    let p = CaseParams {
        backend: Some(Backend::OpenaiAudio),
        num_prompts: n,
        dataset: Dataset::CustomAudio(d),
        ..CaseParams::default()
    };
    benchplan::dataset::build(&p, &benchplan::tokenizer::TokenModel::Builtin, dir)
}

fn durations(inputs: &[RequestInput]) -> Vec<f64> {
    inputs.iter().map(RequestInput::audio_duration).collect()
}

#[test]
fn custom_audio_reads_a_jsonl_or_a_folder_and_keeps_the_clips_within_limits() {
    let dir = tempdir("audio-custom");
    let clips = dir.join("clips");
    std::fs::create_dir_all(&clips).unwrap();
    for (name, s) in [("a.wav", 1.0), ("b.wav", 2.0), ("c.WAV", 3.0)] {
        write_clip(&clips, name, s);
    }
    std::fs::write(clips.join("notes.txt"), "not a clip").unwrap();
    // A folder: every .wav in name order, filtered by duration.
    let folder = CustomAudioDataset {
        path: Some("clips".into()),
        output_len: 16,
        min_duration: Some(Dur::from_secs_f64(1.5)),
        disable_shuffle: true,
        ..CustomAudioDataset::default()
    };
    let got = build(folder.clone(), 2, &dir).unwrap();
    assert_eq!(durations(&got), [2.0, 3.0]);
    match &got[1].prompt {
        Prompt::Audio(a) => assert_eq!(a.filename, "c.WAV"),
        other => panic!("{other:?}"),
    }
    assert!(got.iter().all(|r| r.output_len == 16));
    // More prompts than clips: repeated; fewer: cut.
    assert_eq!(build(folder.clone(), 5, &dir).unwrap().len(), 5);
    let none = CustomAudioDataset {
        max_duration: Some(Dur::from_secs_f64(0.5)),
        min_duration: None,
        ..folder.clone()
    };
    let e = build(none, 2, &dir).unwrap_err();
    assert!(e.contains("all 3 clips fall outside"), "{e}");
    // A JSONL file: clip paths relative to it, its own prompt and output lengths.
    std::fs::write(
        dir.join("set.jsonl"),
        "{\"audio\": \"clips/b.wav\", \"prompt\": \"a b c d e\", \"output_tokens\": 9}\n\n{\"audio\": \"clips/a.wav\", \"output_tokens\": 5}\n",
    )
    .unwrap();
    let jsonl = CustomAudioDataset {
        path: Some("set.jsonl".into()),
        output_len: -1,
        disable_shuffle: true,
        ..CustomAudioDataset::default()
    };
    let got = build(jsonl.clone(), 2, &dir).unwrap();
    assert_eq!(durations(&got), [2.0, 1.0]);
    assert_eq!(got.iter().map(|r| r.output_len).collect::<Vec<_>>(), [9, 5]);
    let tokens = benchplan::tokenizer::TokenModel::Builtin;
    assert_eq!(got[0].prompt_len, tokens.count("a b c d e") as u64);
    assert_eq!(
        got[1].prompt_len,
        tokens.count(benchplan::dataset::audio::WHISPER_PROMPT) as u64
    );
    // Errors name the line and the file.
    std::fs::write(dir.join("bad.jsonl"), "{\"audio\": \"notes.mp3\"}\n").unwrap();
    std::fs::write(dir.join("notes.mp3"), "ID3 not a wav").unwrap();
    let e = build(
        CustomAudioDataset {
            path: Some("bad.jsonl".into()),
            ..jsonl.clone()
        },
        1,
        &dir,
    )
    .unwrap_err();
    assert!(e.contains("bad.jsonl:1") && e.contains("only WAV"), "{e}");
    std::fs::write(dir.join("bad.jsonl"), "{\"prompt\": \"x\"}\n").unwrap();
    let e = build(
        CustomAudioDataset {
            path: Some("bad.jsonl".into()),
            ..jsonl
        },
        1,
        &dir,
    )
    .unwrap_err();
    assert!(e.contains("needs `audio`"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn plans_pair_audio_datasets_with_the_audio_backend() {
    let dir = tempdir("audio-plans");
    let plan = dir.join("p.toml");
    std::fs::write(
        &plan,
        "[services.s]\nsim = { preset = \"fast\" }\nbackend = \"openai-chat\"\n\
         [defaults]\ndataset = { name = \"random-audio\", duration = \"2s\" }\n",
    )
    .unwrap();
    let err = crate::support::validate_file(&plan).unwrap_err();
    assert!(
        err.contains("uploads audio clips, which need the audio API")
            && err.contains("backend = \"openai-audio\""),
        "{err}"
    );
    std::fs::write(
        &plan,
        "[services.s]\nsim = { preset = \"fast\" }\nbackend = \"openai-audio\"\n\
         [defaults]\ndataset = { name = \"random\", input_len = 8 }\n",
    )
    .unwrap();
    let err = crate::support::validate_file(&plan).unwrap_err();
    assert!(err.contains("dataset `random` has none"), "{err}");
    std::fs::write(
        &plan,
        "[services.s]\nsim = { preset = \"fast\" }\nbackend = \"openai-audio\"\nendpoint = \"/v1/audio/translations\"\n\
         [defaults]\nnum_prompts = 3\ndataset = { name = \"random-audio\", duration = \"500ms\", output_len = 4 }\n",
    )
    .unwrap();
    if let Err(e) = crate::support::validate_file(&plan) {
        panic!("{e}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bench_runs_openai_audio_with_vllms_flags() {
    let dir = tempdir("audio-bench");
    let clips = dir.join("clips");
    std::fs::create_dir_all(&clips).unwrap();
    for (name, s) in [("a.wav", 0.5), ("b.wav", 1.0), ("c.wav", 4.0)] {
        write_clip(&clips, name, s);
    }
    let d = dir.display().to_string();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            "--sim",
            "fast",
            "--backend",
            "openai-audio",
            "--num-prompts",
            "6",
            "--output-len",
            "5",
            "--save-result",
            "--result-dir",
            &d,
            "--disable-tqdm",
        ];
        args.extend_from_slice(extra);
        benchplan(&args)
    };
    let out = run(&[
        "--dataset-name",
        "random-audio",
        "--random-audio-duration",
        "1.5",
        "--result-filename",
        "random.json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        crate::support::stdout(&out).contains("RTFx (Inverse Real-Time Factor):"),
        "{}",
        crate::support::stdout(&out)
    );
    let r = read_json(&dir.join("random.json"));
    assert_eq!(r["completed"], 6);
    assert_eq!(r["total_output_tokens"], 30);
    let rtfx = r["rtfx"].as_f64().unwrap();
    let duration = r["duration"].as_f64().unwrap();
    assert!(
        (rtfx * duration - 9.0).abs() < 1e-6,
        "rtfx {rtfx}, duration {duration}"
    );
    let deviations = r["benchplan"]["deviations"].to_string();
    assert!(deviations.contains("\"audio_requests\""), "{deviations}");
    // A dry run shows the clips' lengths.
    let out = run(&["--dataset-name", "random-audio", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = crate::support::stdout(&out);
    assert!(
        text.contains("audio s min/mean/p50/p99/max 10.00/10.00") && text.contains("total 60.0 s"),
        "{text}"
    );
    // vLLM's ASR duration limits, on local clips: only the 1 s clip is in [0.75, 2].
    let out = run(&[
        "--dataset-name",
        "custom_audio",
        "--dataset-path",
        clips.to_str().unwrap(),
        "--asr-min-audio-len-sec",
        "0.75",
        "--asr-max-audio-len-sec",
        "2",
        "--result-filename",
        "custom.json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = read_json(&dir.join("custom.json"));
    assert_eq!(r["completed"], 6);
    let rtfx = r["rtfx"].as_f64().unwrap();
    let duration = r["duration"].as_f64().unwrap();
    assert!(
        (rtfx * duration - 6.0).abs() < 1e-6,
        "six 1 s clips: rtfx {rtfx}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn probe_smokes_the_audio_endpoint_with_a_clip() {
    let sim = crate::support::SimProcess::start(&["--preset", "fast"]);
    let out = benchplan(&["probe", &sim.url, "--backend", "openai-audio"]);
    drop(sim);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = crate::support::stdout(&out);
    assert!(
        text.contains("/v1/audio/transcriptions ok: TTFT") && text.contains("usage in stream: yes"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_smoke_request_uploads_another_clip_and_warms_no_cache_of_a_measured_one() {
    let svc = sim_service(
        Preset::Fast,
        SimParams {
            enable_prefix_caching: Some(true),
            ..SimParams::default()
        },
    );
    // The same 2 s clip again is 100 audio tokens, most of them cached.
    let p = clip_params("/v1/audio/transcriptions", 1, 2.0, 2);
    crate::support::smoke_warms_no_measured_prompt(&svc, &p, 64).await;
}
