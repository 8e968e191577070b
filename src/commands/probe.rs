//! `benchplan probe URL`: what is this service, and is it ready? Health, models,
//! which OpenAI endpoints answer, whether streams report usage, one smoke request.
//! `run` uses [`check_model`] before any case.

use std::time::Duration;

/// `println!` for what a server said: every line with its control characters shown
/// as escapes (a model id or an error body cannot clear the screen or hide text), and
/// no URL's credentials.
macro_rules! say {
    ($($t:tt)*) => {
        println!(
            "{}",
            format!($($t)*)
                .split('\n')
                .map(|l| crate::escape::console(&crate::redact::text(l)))
                .collect::<Vec<_>>()
                .join("\n")
        )
    };
}

use serde_json::Value;

use crate::client::backend::{RequestInput, build_body};
use crate::client::outcome::Limits;
use crate::client::request::{Target, send};
use crate::exit::Exit;
use crate::plan::{Backend, CaseParams, Service};
use crate::service::checks::{metrics_line, status, tokenizer_line};
use crate::service::target::discover_model;

/// How `probe` reaches a service.
#[derive(Debug, Clone, Default)]
pub struct ProbeArgs {
    pub url: String,
    pub backend: Option<Backend>,
    pub model: Option<String>,
    pub insecure: bool,
    /// `KEY=VALUE` headers sent with every request.
    pub headers: Vec<String>,
    /// The variable holding the API key (default OPENAI_API_KEY).
    pub api_key_env: Option<String>,
}

pub fn run(args: ProbeArgs) -> Exit {
    let ProbeArgs {
        url,
        backend,
        model,
        insecure,
        headers: header_args,
        api_key_env,
    } = args;
    let mut svc = Service {
        api_key_env,
        ..Service::default()
    };
    for kv in &header_args {
        match kv.split_once('=') {
            Some((k, v)) => {
                svc.headers
                    .insert(k.trim().to_string(), v.trim().to_string());
            }
            None => {
                eprintln!(
                    "error: --header `{}` is not KEY=VALUE",
                    crate::redact::REDACTED
                );
                return Exit::BadPlan;
            }
        }
    }
    let headers = match crate::service::target::headers(&svc) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadPlan;
        }
    };
    let base = match crate::base_url::BaseUrl::parse(&url) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadPlan;
        }
    };
    crate::load::runtime(false).block_on(async move {
        let client = match crate::client::http::build_client(insecure, None) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                return Exit::Runtime;
            }
        };
        say!("probe {base}");
        say!(
            "{:<12}/health {}, /health/ready {}",
            "health:",
            status(&client, &base.join("/health"), &headers).await,
            status(&client, &base.join("/health/ready"), &headers).await
        );
        models_lines(&client, &base, &headers).await;
        version_line(&client, &base, &headers).await;
        say!(
            "{:<12}{}",
            "metrics:",
            metrics_line(&client, &base, &headers).await
        );
        let (model, root) = match model {
            Some(m) => (m.clone(), m),
            None => match discover_model(&client, &base, &headers).await {
                Ok(found) => found,
                Err(_) => {
                    say!("{:<12}no model known: give --model", "smoke:");
                    return Exit::Runtime;
                }
            },
        };
        say!(
            "{:<12}{}",
            "tokenizer:",
            tokenizer_line(&client, &base, &headers, &model, &root).await
        );
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
            any_ok |= smoke(&client, &base, &headers, b, &model).await;
        }
        if any_ok { Exit::Ok } else { Exit::Runtime }
    })
}

/// The models `/v1/models` lists, or why it listed none (a 401/403 says where the key
/// comes from).
async fn models_lines(
    client: &reqwest::Client,
    base: &crate::base_url::BaseUrl,
    headers: &reqwest::header::HeaderMap,
) {
    let models: Value = match client
        .get(base.join("/v1/models"))
        .headers(headers.clone())
        .timeout(Duration::from_secs(10))
        .send()
        .await
    {
        Ok(r) if r.status().is_success() => {
            serde_json::from_slice(&r.bytes().await.unwrap_or_default()).unwrap_or_default()
        }
        Ok(r) => {
            let code = r.status().as_u16();
            let hint = if code == 401 || code == 403 {
                " (check that the key's variable, --api-key-env or OPENAI_API_KEY, holds the right key, or pass --header)"
            } else {
                ""
            };
            say!("{:<12}/v1/models answered HTTP {code}{hint}", "models:");
            Value::Null
        }
        Err(e) => {
            say!(
                "{:<12}/v1/models unreachable: {}",
                "models:",
                crate::client::http::describe(&e)
            );
            Value::Null
        }
    };
    match models["data"].as_array() {
        Some(list) if !list.is_empty() => {
            for m in list {
                say!(
                    "{:<12}{} (root {}, max_model_len {})",
                    "model:",
                    crate::escape::console(m["id"].as_str().unwrap_or("?")),
                    crate::escape::console(m["root"].as_str().unwrap_or("-")),
                    m["max_model_len"]
                        .as_u64()
                        .map_or("-".to_string(), |n| n.to_string())
                );
            }
        }
        _ => say!("{:<12}/v1/models did not answer with a list", "models:"),
    }
}

/// The server's `/version`, when it answers one.
async fn version_line(
    client: &reqwest::Client,
    base: &crate::base_url::BaseUrl,
    headers: &reqwest::header::HeaderMap,
) {
    if let Ok(r) = client
        .get(base.join("/version"))
        .headers(headers.clone())
        .timeout(Duration::from_secs(10))
        .send()
        .await
    {
        if r.status().is_success() {
            say!(
                "{:<12}{}",
                "version:",
                crate::escape::console(r.text().await.unwrap_or_default().trim())
            );
        }
    }
}

/// One smoke request to backend `b`'s endpoint, worded as a run's requests; on a
/// failure, the request shape it takes instead if one is found. Whether it answered.
async fn smoke(
    client: &reqwest::Client,
    base: &crate::base_url::BaseUrl,
    headers: &reqwest::header::HeaderMap,
    b: Backend,
    model: &str,
) -> bool {
    let mut any_ok = false;
    let target = Target::new(
        base.join(b.default_endpoint()),
        base.clone(),
        b,
        model.to_string(),
        headers.clone(),
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
    let input = RequestInput::hello(b, 8);
    // Worded as a run's requests (a request id included).
    let o = send(
        &target,
        build_body(b, model, &input, &params),
        Some(crate::service::preflight::SMOKE_ID),
    )
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
    say!("{:<12}{} {}", "endpoint:", b.default_endpoint(), line);
    if !o.success {
        use crate::service::preflight::{Fit, fit};
        match fit(&target, &params, &input).await {
            Fit::Found(f) => {
                any_ok = true;
                say!(
                    "{:<12}it takes request_shape {{ {} }} (a run finds and uses it; set it on the service to choose)",
                    "",
                    f.shape.describe().join(", ")
                );
            }
            Fit::Refused(e) => say!("{:<12}{}", "", crate::escape::console(&e)),
            Fit::Ok | Fit::Failed(_) => {}
        }
    }
    any_ok
}
