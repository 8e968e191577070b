//! The second engine (`client = "vllm"`): for teams that must publish vLLM's own
//! numbers, a case runs the real `vllm bench serve` with the case's parameters as
//! flags, and its result JSON becomes the case's result, so the tree, the report, the
//! SLO verdicts and the optimize searches read vLLM's numbers. The case is measured
//! by vLLM's client, not benchplan's: the result says so (`benchplan.engine`) and
//! lists no deviation of benchplan's client.
//!
//! Secrets stay out of the command line: the API key reaches vLLM as the
//! `OPENAI_API_KEY` it reads, and headers that carry secrets are redacted in the
//! command the result records.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value, json};

use super::options::RunOptions;
use super::result::CaseResult;
use super::run::{Accounting, CaseRun};
use crate::plan::{CaseParams, Dataset, Service};
use crate::service::target::Resolved;

/// The program to run: the service's `vllm_path` (relative to the plan's folder),
/// `$BENCHPLAN_VLLM`, else `vllm` found on PATH.
fn program(service: &Service, data_dir: &Path) -> Result<PathBuf, String> {
    if let Some(p) = &service.vllm_path {
        let p = if p.is_relative() && p.components().count() > 1 {
            data_dir.join(p)
        } else {
            p.clone()
        };
        return if p.components().count() > 1 && !p.exists() {
            Err(format!(
                "vllm_path {} does not exist; point it at the `vllm` program (pip install vllm puts one in the environment's bin/)",
                p.display()
            ))
        } else {
            Ok(p)
        };
    }
    if let Some(p) = std::env::var_os("BENCHPLAN_VLLM") {
        return Ok(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("vllm"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "client = \"vllm\" runs `vllm bench serve`, but no `vllm` is on PATH; install vLLM (pip install vllm), or set the service's vllm_path (or BENCHPLAN_VLLM) to the program, or use client = \"native\"".to_string()
        })
}

/// `vllm bench serve`'s flags for a case (its names and units), the result written to
/// `out` as `file`. Header values are given separately so they can be redacted.
pub fn flags(
    params: &CaseParams,
    resolved: &Resolved,
    service: &Service,
    data_dir: &Path,
    out: &Path,
    file: &str,
) -> Result<Vec<String>, String> {
    let mut a: Vec<String> = vec!["bench".into(), "serve".into()];
    let mut flag = |k: &str, v: String| {
        a.push(format!("--{k}"));
        a.push(v);
    };
    flag("backend", params.backend().name().into());
    flag("base-url", resolved.base_url.as_str().to_string());
    flag(
        "endpoint",
        params
            .endpoint
            .clone()
            .unwrap_or_else(|| params.backend().default_endpoint().into()),
    );
    flag("model", resolved.model_root.clone());
    flag(
        "served-model-name",
        service
            .served_model_name
            .clone()
            .unwrap_or_else(|| resolved.model.clone()),
    );
    if let Some(t) = &service.tokenizer {
        flag("tokenizer", t.clone());
    }
    flag("num-prompts", params.num_prompts.to_string());
    flag(
        "request-rate",
        if params.request_rate.is_finite() {
            params.request_rate.0.to_string()
        } else {
            "inf".into()
        },
    );
    flag("burstiness", params.burstiness.0.to_string());
    if let Some(c) = params.max_concurrency {
        flag("max-concurrency", c.to_string());
    }
    if let Some(s) = params.ramp_up_strategy {
        flag(
            "ramp-up-strategy",
            serde_json::to_value(s)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        );
        for (k, v) in [
            ("ramp-up-start-rps", params.ramp_up_start_rps),
            ("ramp-up-end-rps", params.ramp_up_end_rps),
        ] {
            if let Some(v) = v {
                // vLLM takes whole requests per second here.
                flag(k, (v.round() as i64).to_string());
            }
        }
    }
    flag("num-warmups", params.num_warmups.to_string());
    flag("seed", params.seed.to_string());
    let ready = params.ready_check_timeout.as_secs_f64();
    if ready > 0.0 {
        flag("ready-check-timeout-sec", (ready.ceil() as u64).to_string());
    }
    for (k, v) in [
        ("temperature", params.temperature),
        ("top-p", params.top_p),
        ("min-p", params.min_p),
        ("frequency-penalty", params.frequency_penalty),
        ("presence-penalty", params.presence_penalty),
        ("repetition-penalty", params.repetition_penalty),
    ] {
        if let Some(v) = v {
            flag(k, v.to_string());
        }
    }
    if let Some(k) = params.top_k {
        flag("top-k", k.to_string());
    }
    if let Some(l) = params.logprobs {
        flag("logprobs", l.to_string());
    }
    let metrics: Vec<&str> = params
        .percentile_metrics
        .iter()
        .flatten()
        .map(|m| m.name())
        .collect();
    if !metrics.is_empty() {
        flag("percentile-metrics", metrics.join(","));
    }
    flag(
        "metric-percentiles",
        params
            .metric_percentiles
            .iter()
            .map(|p| crate::slo::percentile_label(*p))
            .collect::<Vec<_>>()
            .join(","),
    );
    if let Some(e) = &params.extra_body {
        flag(
            "extra-body",
            serde_json::to_string(e).expect("a JSON map serialises"),
        );
    }
    if let Some(p) = &params.request_id_prefix {
        flag("request-id-prefix", p.clone());
    }
    if !params.lora_modules.is_empty() {
        a.push("--lora-modules".into());
        a.extend(params.lora_modules.iter().cloned());
        let how = params.lora_assignment.unwrap_or_default();
        a.push("--lora-assignment".into());
        a.push(
            serde_json::to_value(how)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        );
    }
    let g = params.goodput.clone().unwrap_or_default();
    let slos: Vec<String> = [("ttft", g.ttft), ("tpot", g.tpot), ("e2el", g.e2el)]
        .into_iter()
        .filter_map(|(k, d)| d.map(|d| format!("{k}:{}", d.as_secs_f64() * 1e3)))
        .collect();
    if !slos.is_empty() {
        a.push("--goodput".into());
        a.extend(slos);
    }
    if params.ignore_eos == Some(true) {
        a.push("--ignore-eos".into());
    }
    dataset_flags(&params.dataset, data_dir, &mut a)?;
    a.extend(
        [
            "--save-result",
            "--save-detailed",
            "--disable-tqdm",
            "--result-dir",
        ]
        .map(String::from),
    );
    a.push(out.display().to_string());
    a.push("--result-filename".into());
    a.push(file.into());
    Ok(a)
}

fn dataset_flags(ds: &Dataset, dir: &Path, a: &mut Vec<String>) -> Result<(), String> {
    let mut flag = |k: &str, v: String| {
        a.push(format!("--{k}"));
        a.push(v);
    };
    let path = |p: &Option<PathBuf>| -> Result<String, String> {
        let p = p.as_ref().ok_or("the dataset needs a path")?;
        Ok(if p.is_relative() {
            dir.join(p)
        } else {
            p.clone()
        }
        .display()
        .to_string())
    };
    match ds {
        Dataset::Random(d) => {
            flag("dataset-name", "random".into());
            flag("random-input-len", d.input_len.to_string());
            flag("random-output-len", d.output_len.to_string());
            flag("random-range-ratio", d.range_ratio.to_string());
            flag("random-prefix-len", d.prefix_len.to_string());
            if d.batch_size != 1 {
                flag("random-batch-size", d.batch_size.to_string());
            }
        }
        Dataset::PrefixRepetition(d) => {
            flag("dataset-name", "prefix_repetition".into());
            flag("prefix-repetition-prefix-len", d.prefix_len.to_string());
            flag("prefix-repetition-suffix-len", d.suffix_len.to_string());
            flag("prefix-repetition-num-prefixes", d.num_prefixes.to_string());
            flag("prefix-repetition-output-len", d.output_len.to_string());
        }
        Dataset::Sharegpt(d) => {
            flag("dataset-name", "sharegpt".into());
            flag("dataset-path", path(&d.path)?);
            if let Some(o) = d.output_len {
                flag("sharegpt-output-len", o.to_string());
            }
        }
        Dataset::Custom(d) => {
            flag("dataset-name", "custom".into());
            flag("dataset-path", path(&d.path)?);
            flag("custom-output-len", d.output_len.to_string());
            if d.skip_chat_template {
                a.push("--skip-chat-template".into());
            }
        }
        Dataset::Burstgpt(d) => {
            flag("dataset-name", "burstgpt".into());
            flag("dataset-path", path(&d.path)?);
        }
        other => {
            return Err(format!(
                "client = \"vllm\" cannot run dataset `{}`: benchplan maps random, prefix_repetition, sharegpt, custom and burstgpt onto vllm bench serve's flags",
                other.name()
            ));
        }
    }
    Ok(())
}

/// Runs the case with `vllm bench serve` and reads its result.
pub async fn execute(
    resolved: &Resolved,
    service: &Service,
    params: &CaseParams,
    opts: &RunOptions,
) -> Result<CaseResult, String> {
    let prog = program(service, &opts.data_dir)?;
    let out = tempdir()?;
    let file = "result.json";
    let mut args = flags(params, resolved, service, &opts.data_dir, &out, file)?;
    // Headers other than the key go on the command line (vLLM has no other way);
    // the recorded command hides their values.
    let mut shown = crate::redact::command_args(&args);
    let mut key = None;
    let mut extra = Vec::new();
    for (name, value) in &resolved.headers {
        let v = value.to_str().unwrap_or_default();
        if name == reqwest::header::AUTHORIZATION
            && let Some(token) = v.strip_prefix("Bearer ")
        {
            key = Some(token.to_string());
            continue;
        }
        extra.push((
            format!("{name}={v}"),
            if value.is_sensitive() {
                format!("{name}=<redacted>")
            } else {
                format!("{name}={v}")
            },
        ));
    }
    if !extra.is_empty() {
        args.push("--header".into());
        shown.push("--header".into());
        for (real, redacted) in extra {
            args.push(real);
            shown.push(redacted);
        }
    }
    let mut cmd = tokio::process::Command::new(&prog);
    cmd.args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    match key {
        Some(k) => cmd.env("OPENAI_API_KEY", k),
        None => cmd.env_remove("OPENAI_API_KEY"),
    };
    let started = Instant::now();
    let child = cmd.spawn().map_err(|e| {
        format!(
            "cannot run {} ({e}); install vLLM (pip install vllm) or fix the service's vllm_path",
            prog.display()
        )
    })?;
    let stop = opts.stop.clone();
    let deadline = opts.deadline;
    let waited = tokio::select! {
        o = child.wait_with_output() => o.map_err(|e| format!("vllm bench serve: {e}"))?,
        () = stop.until_draining() => {
            let _ = std::fs::remove_dir_all(&out);
            return Err("interrupted while vllm bench serve ran; it was stopped".into());
        }
        () = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        } => {
            let _ = std::fs::remove_dir_all(&out);
            return Err("vllm bench serve did not finish within the case's timeout; it was stopped".into());
        }
    };
    let elapsed = started.elapsed().as_secs_f64();
    let read = std::fs::read_to_string(out.join(file));
    let _ = std::fs::remove_dir_all(&out);
    if !waited.status.success() {
        let err = String::from_utf8_lossy(&waited.stderr);
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        return Err(format!(
            "vllm bench serve exited with {}: {}",
            waited.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    let text = read.map_err(|e| {
        format!("vllm bench serve exited 0 but wrote no result ({e}); is it vLLM's benchmark?")
    })?;
    let raw: Map<String, Value> = match serde_json::from_str(&text) {
        Ok(Value::Object(m)) => m,
        _ => return Err("vllm bench serve's result is not a JSON object".into()),
    };
    let summary = crate::results::read::CaseFile::new(&raw).summary(params);
    let run = CaseRun {
        records: Vec::new(),
        started,
        prewarmed: 0,
        rps_change_events: Vec::new(),
        duration: summary.duration,
        smoke: None,
        warmups_failed: 0,
        interrupted: false,
        timed_out: false,
        machine: None,
        accounting: Accounting {
            scheduled: summary.completed + summary.failed,
            completed: summary.completed,
            failed: summary.failed,
            ..Accounting::default()
        },
        planned_turns: Vec::new(),
        server_metrics: None,
        energy: None,
        oversaturation: None,
    };
    Ok(CaseResult {
        // vLLM's own client measured it: its records are not benchplan's to cut.
        window: Default::default(),
        summary,
        multi_turn: None,
        run,
        inputs: Arc::new(Vec::new()),
        engine: Some(json!({
            "client": "vllm",
            "program": prog.display().to_string(),
            "command": shown,
            "wall_seconds": elapsed,
        })),
        raw: Some(raw),
        route: Default::default(),
        cost: service.cost.clone(),
        trace: None,
    })
}

fn tempdir() -> Result<PathBuf, String> {
    let d = std::env::temp_dir().join(format!(
        "benchplan-vllm-{}-{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    std::fs::create_dir_all(&d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    Ok(d)
}
