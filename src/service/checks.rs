//! The checks `probe` makes of a service, each one line for a person: a side
//! endpoint's status, where the tokenizer of its model is, what its `/metrics` offers.

use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use serde_json::Value;

/// A side endpoint's status and how long it took to answer.
pub async fn status(client: &reqwest::Client, url: &str, headers: &HeaderMap) -> String {
    let t = Instant::now();
    match client
        .get(url)
        .headers(headers.clone())
        .timeout(Duration::from_secs(10))
        .send()
        .await
    {
        Ok(r) => format!(
            "HTTP {} ({:.1} ms)",
            r.status().as_u16(),
            t.elapsed().as_secs_f64() * 1e3
        ),
        Err(e) => format!("unreachable ({})", crate::client::http::describe(&e)),
    }
}

/// Where a run would find the tokenizer of `root` (a plan without `tokenizer` uses the
/// model's root), and whether the server's own tokenize endpoint (any form a run tries)
/// is an alternative.
pub async fn tokenizer_line(
    client: &reqwest::Client,
    base: &crate::base_url::BaseUrl,
    headers: &HeaderMap,
    model: &str,
    root: &str,
) -> String {
    let local = if crate::tokenizer::find_local(root).is_some() {
        format!("`{root}` is a local tokenizer or in the local Hugging Face cache")
    } else if crate::planner::tokenizer::is_hub_id(root) {
        format!("`{root}` is a Hugging Face id, not cached here: a run downloads it once")
    } else {
        format!("`{root}` is no tokenizer this machine has: a run needs `tokenizer` set")
    };
    for api in crate::tokenizer::TokenizeApi::ALL {
        let mut body = api.tokenize_body("Say hello.", false);
        body["model"] = Value::String(model.to_string());
        let answer = client
            .post(base.join(api.tokenize_path()))
            .headers(headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        let tokens = match answer {
            Ok(r) if r.status().is_success() => {
                let v: Value = serde_json::from_slice(&r.bytes().await.unwrap_or_default())
                    .unwrap_or_default();
                v["tokens"].as_array().is_some_and(|a| !a.is_empty())
            }
            _ => false,
        };
        if tokens {
            return format!(
                "{local}; the server tokenizes at {} ({} form), so tokenizer = \"server\" works too",
                api.tokenize_path(),
                api.server()
            );
        }
    }
    format!(
        "{local}; the server has no tokenize endpoint benchplan knows (/tokenize, /extras/tokenize), so tokenizer = \"server\" cannot work"
    )
}

/// What `/metrics` offers: which server's names, how many series, and which of the
/// per-case quantities benchplan maps (what a run's `server_metrics` will hold).
pub async fn metrics_line(
    client: &reqwest::Client,
    base: &crate::base_url::BaseUrl,
    headers: &HeaderMap,
) -> String {
    use crate::servermetrics::vocab::{self, COUNTERS, GAUGES, Server};
    let src = crate::servermetrics::Source {
        url: base.join("/metrics"),
        client: client.clone(),
        headers: headers.clone(),
        interval: Duration::from_secs(1),
    };
    match src.fetch().await {
        Ok(page) if page.is_empty() => "/metrics is empty: cases run without server metrics".into(),
        Ok(page) => {
            let server = Server::detect(&page);
            let mut known: Vec<&str> = GAUGES
                .iter()
                .filter(|g| vocab::gauge(&page, g).is_some())
                .map(|g| g.name)
                .collect();
            known.extend(
                COUNTERS
                    .iter()
                    .filter(|(_, names)| vocab::total(&page, names).is_some())
                    .map(|(n, _)| *n),
            );
            format!(
                "/metrics: {} series, {} names{}",
                page.len(),
                server.as_str(),
                if known.is_empty() {
                    " (raw series kept)".to_string()
                } else {
                    format!("; per case: {}", known.join(", "))
                }
            )
        }
        Err(e) => format!("none ({e}): cases run without server metrics"),
    }
}
