//! Sends one request and measures it the way vLLM's request functions do (reference
//! §2.1): `sent` just before the request goes out; a chunk's time when its bytes
//! arrive (plain http: the kernel's receive stamp, see `rx_time`; HTTPS: when reqwest
//! hands them over); TTFT at the first SSE message with non-empty `choices`; one ITL
//! sample per later such message; E2EL at the last token-bearing message. Failures
//! become data.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;

use super::chunk;
use super::h1;
use super::sse::SseParser;
use crate::metrics::sample::{RequestError, Sample};
use crate::plan::Backend;

/// Where requests go and how.
#[derive(Debug, Clone)]
pub struct Target {
    /// Full URL: base URL plus endpoint.
    pub url: String,
    /// The server's base URL (for /v1/models and other side requests).
    pub base_url: String,
    pub backend: Backend,
    /// Sent as the request's `model`.
    pub model: String,
    /// Authorization and extra headers (never printed).
    pub headers: HeaderMap,
    pub client: reqwest::Client,
    /// Plain-http targets: the native HTTP/1.1 client's endpoint (see `h1`); None sends
    /// through reqwest (HTTPS, or when chosen).
    pub native: Option<Arc<h1::Endpoint>>,
    pub timeout: Option<Duration>,
}

impl Target {
    /// A target for `url`; plain-http URLs get the native client (`native`), which a
    /// caller may clear to send through reqwest instead.
    pub fn new(
        url: String,
        base_url: String,
        backend: Backend,
        model: String,
        headers: HeaderMap,
        client: reqwest::Client,
        timeout: Option<Duration>,
    ) -> Target {
        Target {
            native: h1::Endpoint::for_url(&url).map(Arc::new),
            url,
            base_url,
            backend,
            model,
            headers,
            client,
            timeout,
        }
    }
}

/// What one request measured (the sample the metrics see) and when it went out.sample.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub sample: Sample,
    /// When the request went out (after any client-side queueing).
    pub sent: Option<Instant>,
    /// When writing the request finished (native client only): `written - sent` is the
    /// client's own share of the request's way to the server.
    pub written: Option<Instant>,
}

fn fail(o: &mut Sample, kind: &str, message: impl Into<String>) {
    o.success = false;
    if o.error.is_none() {
        let mut message: String = message.into();
        message.truncate(500);
        o.error = Some(RequestError {
            kind: kind.to_string(),
            message,
        });
    }
}

fn classify(e: &reqwest::Error) -> &'static str {
    // A server that closes the connection before answering is a connection failure.
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.downcast_ref::<hyper::Error>()
            .is_some_and(|h| h.is_incomplete_message() || h.is_closed())
        {
            return "connection";
        }
        source = s.source();
    }
    if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connection"
    } else if e.is_body() || e.is_decode() {
        "stream_broken"
    } else {
        "request"
    }
}

/// Sends one request. `x-request-id` is set when given.
pub async fn send(target: &Target, body: Vec<u8>, request_id: Option<&str>) -> Outcome {
    send_with(target, body, request_id, None).await
}

/// Sends one request with extra headers (a conversation's session id) on top of the target's.
pub async fn send_with(
    target: &Target,
    body: Vec<u8>,
    request_id: Option<&str>,
    extra: Option<HeaderMap>,
) -> Outcome {
    let mut out = Outcome::default();
    let fut = send_inner(target, body, request_id, extra, &mut out);
    match target.timeout {
        Some(t) => {
            if tokio::time::timeout(t, fut).await.is_err() {
                out.sample.success = false;
                fail(
                    &mut out.sample,
                    "timeout",
                    format!("no complete answer within {:.1} s", t.as_secs_f64()),
                );
            }
        }
        None => fut.await,
    }
    out
}

/// A response being read: through reqwest or the native client.
enum Body<'a> {
    Reqwest(reqwest::Response, bytes::Bytes),
    Native(h1::Response<'a>),
}

impl Body<'_> {
    fn status(&self) -> u16 {
        match self {
            Body::Reqwest(r, _) => r.status().as_u16(),
            Body::Native(r) => r.status,
        }
    }

    /// The next bytes of the body and when they arrived; None at its end.
    async fn next(&mut self) -> Result<Option<(&[u8], Instant)>, String> {
        match self {
            Body::Reqwest(r, held) => match r.chunk().await {
                Ok(Some(b)) => {
                    *held = b;
                    Ok(Some((held, Instant::now())))
                }
                Ok(None) => Ok(None),
                Err(e) => Err(e.to_string()),
            },
            Body::Native(r) => r.read_some().await.map_err(|e| e.to_string()),
        }
    }

    async fn all(mut self) -> Result<Vec<u8>, String> {
        let mut all = Vec::new();
        while let Some((b, _)) = self.next().await? {
            all.extend_from_slice(b);
        }
        Ok(all)
    }
}

/// Sends the request and reads the response head; the failure's kind and message.
async fn open<'a>(
    target: &'a Target,
    body: Vec<u8>,
    request_id: Option<&str>,
    extra: Option<HeaderMap>,
    times: &mut h1::SendTimes,
) -> Result<Body<'a>, (&'static str, String)> {
    if let Some(native) = &target.native {
        let extra = extra.unwrap_or_default();
        return native
            .pool
            .post(
                &native.path,
                &[&target.headers, &extra],
                request_id,
                &body,
                times,
            )
            .await
            .map(Body::Native)
            .map_err(|e| {
                let kind = match e {
                    h1::H1Error::Connection(_) => "connection",
                    h1::H1Error::Broken(_) => "stream_broken",
                    h1::H1Error::Protocol(_) => "request",
                };
                (kind, e.to_string())
            });
    }
    let mut req = target
        .client
        .post(&target.url)
        .headers(target.headers.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(extra) = extra {
        req = req.headers(extra);
    }
    if let Some(id) = request_id {
        req = req.header("x-request-id", id);
    }
    times.sent = Instant::now();
    match req.send().await {
        Ok(r) => Ok(Body::Reqwest(r, bytes::Bytes::new())),
        Err(e) => Err((classify(&e), e.to_string())),
    }
}

async fn send_inner(
    target: &Target,
    body: Vec<u8>,
    request_id: Option<&str>,
    extra: Option<HeaderMap>,
    out: &mut Outcome,
) {
    let mut times = h1::SendTimes {
        sent: Instant::now(),
        written: None,
    };
    out.sent = Some(times.sent); // kept if a timeout cuts the attempt short
    let opened = open(target, body, request_id, extra, &mut times).await;
    let sent = times.sent;
    out.sent = Some(sent);
    out.written = times.written;
    let mut resp = match opened {
        Ok(r) => r,
        Err((kind, msg)) => return fail(&mut out.sample, kind, msg),
    };
    let status = resp.status();
    if !(200..300).contains(&status) {
        let text = resp
            .all()
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let msg = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| {
                v.pointer("/error/message")
                    .and_then(|m| m.as_str())
                    .map(str::to_string)
            })
            .unwrap_or(text);
        return fail(
            &mut out.sample,
            &format!("http_{status}"),
            format!("HTTP {status}: {msg}"),
        );
    }
    if target.backend.is_pooling() {
        return match resp.all().await {
            Ok(bytes) => {
                let t = sent.elapsed().as_secs_f64();
                out.sample.ttft = t;
                out.sample.latency = t;
                let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
                out.sample.usage_prompt = v
                    .pointer("/usage/prompt_tokens")
                    .or_else(|| v.pointer("/usage/total_tokens"))
                    .and_then(|x| x.as_u64());
                out.sample.success = true;
            }
            Err(e) => fail(&mut out.sample, "stream_broken", e),
        };
    }

    let mut parser = SseParser::new();
    let mut last = sent;
    let mut first = true;
    let mut failure: Option<(&'static str, String)> = None;
    loop {
        // A chunk's time is when its bytes arrived (the kernel's stamp on the native path).
        let (bytes, now) = match resp.next().await {
            Ok(Some(b)) => b,
            Ok(None) => break,
            Err(e) => {
                failure = Some((
                    "stream_broken",
                    format!("the stream broke after {} chunks: {e}", out.sample.chunks),
                ));
                break;
            }
        };
        parser.feed(bytes, &mut |ev| {
            if failure.is_some() {
                return;
            }
            if ev.data == b"[DONE]" {
                out.sample.done = true;
                return;
            }
            if ev.event == Some(b"error") {
                failure = Some((
                    "stream_error",
                    String::from_utf8_lossy(ev.data).into_owned(),
                ));
                return;
            }
            let c = match chunk::parse(ev.data) {
                Ok(c) => c,
                Err(e) => {
                    failure = Some((
                        "invalid_chunk",
                        format!(
                            "unparsable chunk ({e}): {}",
                            String::from_utf8_lossy(&ev.data[..ev.data.len().min(200)])
                        ),
                    ));
                    return;
                }
            };
            if c.choices.present {
                if first {
                    out.sample.ttft = (now - sent).as_secs_f64();
                    first = false;
                } else {
                    out.sample.itl.push((now - last).as_secs_f64());
                }
                last = now;
                out.sample.chunks += 1;
                if let Some(t) = c.choices.first.as_ref().and_then(|ch| ch.text()) {
                    out.sample.text.push_str(t);
                }
            } else if let Some(u) = c.usage {
                out.sample.usage_completion = u.completion_tokens.or(out.sample.usage_completion);
                out.sample.usage_prompt = u.prompt_tokens.or(out.sample.usage_prompt);
                out.sample.cached_tokens = u
                    .prompt_tokens_details
                    .and_then(|d| d.cached_tokens)
                    .or(out.sample.cached_tokens);
            } else if c.error.is_some() {
                failure = Some((
                    "stream_error",
                    String::from_utf8_lossy(&ev.data[..ev.data.len().min(300)]).into_owned(),
                ));
            }
        });
        if failure.is_some() {
            break;
        }
    }
    if failure.is_none() {
        parser.finish(&mut |ev| {
            if ev.data == b"[DONE]" {
                out.sample.done = true;
            }
        });
    }
    out.sample.latency = (last - sent).as_secs_f64();
    match failure {
        Some((kind, msg)) => fail(&mut out.sample, kind, msg),
        None if first => fail(
            &mut out.sample,
            "no_tokens",
            "the stream ended without a chunk carrying choices",
        ),
        None => out.sample.success = true,
    }
}
