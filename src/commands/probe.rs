//! `benchplan probe URL`: what is this service, and is it ready? Health, models,
//! which OpenAI endpoints answer, whether streams report usage, one smoke request.
//! `run` uses [`check_model`] before any case.

use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::client::backend::{Prompt, RequestInput, build_body};
use crate::client::request::{Limits, Target, send};
use crate::exit::Exit;
use crate::load::target::{Resolved, discover_model};
use crate::plan::{Backend, CaseParams, Service};

/// For an external service whose plan names the model: the server must list it.
pub async fn check_model(r: &Resolved, svc: &Service) -> Result<(), String> {
    let (Some(model), None) = (&svc.model, &svc.sim) else {
        return Ok(());
    };
    let url = format!("{}/v1/models", r.base_url);
    let resp = r
        .client
        .get(&url)
        .headers(r.headers.clone())
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .map_err(|e| format!("cannot reach {url}: {e}"))?;
    if !resp.status().is_success() {
        // Some servers have no /v1/models; the smoke request of each case still checks the model.
        return Ok(());
    }
    let v: Value =
        serde_json::from_slice(&resp.bytes().await.map_err(|e| e.to_string())?).unwrap_or_default();
    let ids: Vec<&str> = v["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["id"].as_str())
        .collect();
    if ids.is_empty() || ids.contains(&model.as_str()) {
        Ok(())
    } else {
        Err(format!(
            "the plan says model `{model}`, but {url} serves {}; fix `model` in the plan or point base_url at the right server",
            ids.join(", ")
        ))
    }
}

/// One small request with a case's backend, before any case runs.
pub async fn smoke(r: &Resolved, svc: &Service, params: &CaseParams) -> Result<(), String> {
    let target = crate::load::target::target(r, svc, params);
    let input = RequestInput {
        prompt: Prompt::Text("Say hello.".into()),
        prompt_len: 3,
        output_len: 4,
        arrival: None,
    };
    let o = send(
        &target,
        build_body(target.backend, &target.model, &input, params),
        None,
    )
    .await;
    match o.sample.error {
        None if o.sample.success => Ok(()),
        Some(e) => Err(format!("{}: {}", e.kind, e.message)),
        None => Err("no answer".into()),
    }
}

async fn status(client: &reqwest::Client, url: &str) -> String {
    let t = Instant::now();
    match client
        .get(url)
        .timeout(Duration::from_secs(10))
        .send()
        .await
    {
        Ok(r) => format!(
            "HTTP {} ({:.1} ms)",
            r.status().as_u16(),
            t.elapsed().as_secs_f64() * 1e3
        ),
        Err(e) => format!("unreachable ({e})"),
    }
}

pub fn run(url: &str, backend: Option<Backend>, model: Option<String>, insecure: bool) -> Exit {
    let base = url.trim_end_matches('/').to_string();
    crate::load::runtime(false).block_on(async move {
        let client = match crate::client::http::build_client(insecure, None) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                return Exit::Runtime;
            }
        };
        println!("probe {base}");
        println!(
            "{:<12}/health {}, /health/ready {}",
            "health:",
            status(&client, &format!("{base}/health")).await,
            status(&client, &format!("{base}/health/ready")).await
        );
        let models: Value = match client
            .get(format!("{base}/v1/models"))
            .timeout(Duration::from_secs(10))
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => {
                serde_json::from_slice(&r.bytes().await.unwrap_or_default()).unwrap_or_default()
            }
            _ => Value::Null,
        };
        match models["data"].as_array() {
            Some(list) if !list.is_empty() => {
                for m in list {
                    println!(
                        "{:<12}{} (root {}, max_model_len {})",
                        "model:",
                        m["id"].as_str().unwrap_or("?"),
                        m["root"].as_str().unwrap_or("-"),
                        m["max_model_len"]
                            .as_u64()
                            .map_or("-".to_string(), |n| n.to_string())
                    );
                }
            }
            _ => println!("{:<12}/v1/models did not answer with a list", "models:"),
        }
        if let Ok(r) = client
            .get(format!("{base}/version"))
            .timeout(Duration::from_secs(10))
            .send()
            .await
        {
            if r.status().is_success() {
                println!(
                    "{:<12}{}",
                    "version:",
                    r.text().await.unwrap_or_default().trim()
                );
            }
        }
        let model = match model {
            Some(m) => m,
            None => match discover_model(&client, &base, &HeaderMap::new()).await {
                Ok((id, _)) => id,
                Err(_) => {
                    println!("{:<12}no model known: give --model", "smoke:");
                    return Exit::Runtime;
                }
            },
        };
        let mut any_ok = false;
        let wanted: Vec<Backend> = backend.map_or_else(
            || {
                vec![
                    Backend::Openai,
                    Backend::OpenaiChat,
                    Backend::OpenaiEmbeddings,
                ]
            },
            |b| vec![b],
        );
        for b in wanted {
            let target = Target::new(
                format!("{base}{}", b.default_endpoint()),
                base.clone(),
                b,
                model.clone(),
                HeaderMap::new(),
                client.clone(),
                Limits {
                    total: Duration::from_secs(60),
                    idle: Duration::from_secs(60),
                    ..Limits::default()
                },
            );
            let params = CaseParams {
                backend: Some(b),
                ..CaseParams::default()
            };
            let input = RequestInput {
                prompt: Prompt::Text("Say hello.".into()),
                prompt_len: 3,
                output_len: 8,
                arrival: None,
            };
            let o = send(&target, build_body(b, &model, &input, &params), None)
                .await
                .sample;
            let line = if o.success {
                any_ok = true;
                if b.is_pooling() {
                    format!("ok in {:.1} ms", o.latency * 1e3)
                } else {
                    format!(
                        "ok: TTFT {:.1} ms, E2EL {:.1} ms, {} chunks; usage in stream: {}",
                        o.ttft * 1e3,
                        o.latency * 1e3,
                        o.chunks,
                        if o.usage_completion.is_some() {
                            "yes"
                        } else {
                            "no (output tokens will be counted with a tokenizer)"
                        }
                    )
                }
            } else {
                o.error
                    .map_or_else(|| "failed".into(), |e| format!("{}: {}", e.kind, e.message))
            };
            println!("{:<12}{} {}", "endpoint:", b.default_endpoint(), line);
        }
        if any_ok { Exit::Ok } else { Exit::Runtime }
    })
}
