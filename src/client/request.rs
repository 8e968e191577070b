//! Sends one request and measures it the way vLLM 0.33's request functions do
//! (`endpoint_request_func.py`; pinned by `tests/fixtures/vllm-golden/streams`):
//!
//! - the clock starts before a connection is taken or opened (vLLM's `st`), so a
//!   connect inside a request counts in its TTFT and E2EL;
//! - a chunk's time is when its bytes arrived (plain http: the kernel's receive stamp,
//!   see `rx_time`; HTTPS: when reqwest hands them over);
//! - TTFT at the first token event, one ITL sample per later one, E2EL at the last
//!   (which chunks are token events: [`chunk`]); `usage` is read from chunks that are
//!   not token events; success needs a token event, `[DONE]` is not required;
//! - only HTTP 200 succeeds; a failure keeps its TTFT and ITL samples but reports
//!   latency 0 and no text, as vLLM's outputs do.
//!
//! Where benchplan parses differently on purpose (the SSE spec rather than vLLM's
//! `\n\n` splitting; a mid-stream error event fails the request), `results::deviations`
//! says so in every result. Every buffer is bounded ([`Limits`]) and every wait has a
//! deadline: a misbehaving server ends as a counted error, never a hang.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;

use crate::base_url::BaseUrl;

use super::backend::{RequestInput, build_body};
use super::chunk::Api;
use super::h1;
use super::http::error_chain;
use super::outcome::{Limits, deadline_after, excerpt, fail, timed_out};
use super::stream::{Alarm, End, Reading};
use crate::metrics::sample::Sample;
use crate::plan::backend::BodyForm;
pub use crate::plan::service::CrossOrigin;
use crate::plan::{Backend, CaseParams};
use crate::proxy::{Proxies, Via};

/// The content type of a JSON request body.
const JSON: &str = "application/json";

/// Error bodies are read up to this much for their message; the rest is not needed.
const ERROR_BODY_BYTES: usize = 64 * 1024;
/// Where requests go and how.
#[derive(Debug, Clone)]
pub struct Target {
    /// Full URL: base URL plus endpoint.
    pub url: String,
    /// The server's base URL (for /v1/models and other side requests).
    pub base_url: BaseUrl,
    pub backend: Backend,
    /// Sent as the request's `model`.
    pub model: String,
    /// Authorization and extra headers (never printed).
    pub headers: HeaderMap,
    pub client: reqwest::Client,
    /// Plain-http targets: the native HTTP/1.1 client's endpoint (see `h1`); None sends
    /// through reqwest (HTTPS, or when chosen).
    pub native: Option<Arc<h1::Endpoint>>,
    pub limits: Limits,
    /// The proxy the measured requests go through (the environment's; see `proxy`).
    pub proxy: Option<Via>,
    /// Where 307/308 redirects led.
    pub route: Arc<Route>,
    /// How request ids are sent (`x-request-id: {prefix}{n}` unless the shape says otherwise).
    pub request_ids: super::request_id::RequestIds,
    /// What a redirect to another origin gets (credentials never go there).
    pub cross_origin: CrossOrigin,
}

/// Where a target's redirects led: the URL a redirect named last, and the native
/// endpoint of the first plain-http URL one named (later ones go through reqwest).
#[derive(Debug, Default)]
pub struct Route {
    proxies: Proxies,
    redirect: OnceLock<(String, h1::Endpoint)>,
    final_url: Mutex<Option<String>>,
    /// The other origin a redirect led to, which got no credentials.
    withheld_at: Mutex<Option<String>>,
}

impl Route {
    /// The URL the latest followed redirect led to, if any was followed (without its
    /// userinfo: this is what is shown and recorded).
    pub fn final_url(&self) -> Option<String> {
        self.final_url
            .lock()
            .expect("route lock")
            .as_deref()
            .map(crate::redact::url)
    }

    /// The other origin a redirect led to, where the requests went without their
    /// credentials; None when every redirect stayed on the target's origin.
    pub fn withheld_at(&self) -> Option<String> {
        self.withheld_at.lock().expect("route lock").clone()
    }
}

/// The headers of `h` that may go to another origin: every header but
/// `Authorization`, `Proxy-Authorization`, `Cookie` and those redaction treats as
/// secret (`redact::is_secret_key`), as browsers, aiohttp and reqwest drop them.
pub fn without_credentials(h: &HeaderMap) -> HeaderMap {
    use reqwest::header::{AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION};
    let mut out = h.clone();
    let names: Vec<_> = h
        .keys()
        .filter(|n| {
            **n == AUTHORIZATION
                || **n == PROXY_AUTHORIZATION
                || **n == COOKIE
                || crate::redact::is_secret_key(n.as_str())
        })
        .cloned()
        .collect();
    for n in names {
        out.remove(n);
    }
    out
}

/// Redirects followed per request at most (aiohttp's default `max_redirects`).
const MAX_REDIRECTS: usize = 10;

impl Target {
    /// A target for `url`; plain-http URLs get the native client (`native`), which a
    /// caller may clear to send through reqwest instead.
    pub fn new(
        url: String,
        base_url: BaseUrl,
        backend: Backend,
        model: String,
        headers: HeaderMap,
        client: reqwest::Client,
        limits: Limits,
    ) -> Target {
        Target {
            native: h1::Endpoint::for_url(&url).map(Arc::new),
            url,
            base_url,
            backend,
            model,
            headers,
            client,
            limits,
            proxy: None,
            route: Arc::default(),
            request_ids: Default::default(),
            cross_origin: CrossOrigin::default(),
        }
    }

    /// This target treating redirects to another origin as `rule` says.
    pub fn redirecting(mut self, rule: Option<CrossOrigin>) -> Target {
        self.cross_origin = rule.unwrap_or_default();
        self
    }

    /// This target sending request ids as `shape` says (the planner has checked its
    /// header name; one that does not parse keeps `x-request-id`).
    pub fn worded(mut self, shape: &crate::plan::shape::RequestShape) -> Target {
        self.request_ids = super::request_id::RequestIds::of(shape).unwrap_or_else(|_| {
            super::request_id::RequestIds {
                form: shape.request_id,
                header: None,
            }
        });
        self
    }

    /// This target with `proxies` applied to the native client's requests (reqwest's
    /// client was built with the same ones) and to the URLs redirects lead to.
    pub fn through(mut self, proxies: &Proxies) -> Target {
        self.proxy = proxies.for_url(&self.url);
        if self.native.is_some() {
            self.native = h1::Endpoint::for_url_via(&self.url, self.proxy.as_ref()).map(Arc::new);
        }
        self.route = Arc::new(Route {
            proxies: proxies.clone(),
            ..Route::default()
        });
        self
    }
}

/// What one request measured (the sample the metrics see) and when it went out.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub sample: Sample,
    /// When the request started: after any client-side queueing, before a connection
    /// was taken or opened (vLLM's `start_time`).
    pub sent: Option<Instant>,
    /// How long opening a connection took inside the request, when it had to (native
    /// client only; reqwest does not say).
    pub connect: Option<Duration>,
    /// When writing the request finished (native client only): `written - sent` is the
    /// client's own share of the request's way to the server.
    pub written: Option<Instant>,
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

/// Builds the body of `input` for the target's backend and sends it; the sample also
/// says how many inputs the request carried (vLLM's `num_input_sequences`).
pub async fn send_input(
    target: &Target,
    params: &CaseParams,
    input: &RequestInput,
    request_id: Option<&str>,
    extra: Option<HeaderMap>,
) -> Outcome {
    let body = build_body(target.backend, &target.model, input, params);
    let mut o = send_sized(target, body, request_id, extra, input.output_len).await;
    o.sample.input_sequences = input.input_sequences();
    o.sample.input_audio_duration = input.audio_duration();
    o
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
    send_sized(target, body, request_id, extra, 0).await
}

/// Token events a stream's buffers are sized for up front; past it they grow as usual
/// (a large `max_tokens` with short answers must not reserve memory it never uses).
const RESERVED_TOKENS: u64 = 1024;

/// [`send_with`] for an answer of about `expected_tokens`: the ITL samples and the
/// text are sized for it once instead of growing while the stream is read.
async fn send_sized(
    target: &Target,
    body: Vec<u8>,
    request_id: Option<&str>,
    extra: Option<HeaderMap>,
    expected_tokens: u64,
) -> Outcome {
    let expect = expected_tokens.min(RESERVED_TOKENS) as usize;
    let mut out = Outcome {
        sample: Sample {
            input_sequences: 1,
            itl: Vec::with_capacity(expect.saturating_sub(1)),
            // Four bytes a token is about what English text takes.
            text: String::with_capacity(expect * 4),
            ..Sample::default()
        },
        ..Outcome::default()
    };
    // Worded before the clock starts, as vLLM builds its headers.
    let worded = target.request_ids.word(request_id, extra);
    send_inner(
        target,
        body,
        worded.x_request_id.as_deref(),
        worded.extra,
        &mut out,
    )
    .await;
    if !out.sample.success {
        // vLLM's failed outputs keep no text (TTFT and ITL as measured).
        out.sample.text.clear();
        // A server may echo a key in its error ("Incorrect API key provided: sk-…").
        if let Some(e) = &mut out.sample.error {
            e.message = scrub_secrets(&e.message, &target.headers);
        }
    }
    out
}

/// `text` without the values of the sensitive headers (and a bearer token on its own).
fn scrub_secrets(text: &str, headers: &HeaderMap) -> String {
    let secrets: Vec<String> = headers
        .values()
        .filter(|v| v.is_sensitive())
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| {
            let token = v.strip_prefix("Bearer ").map(str::to_string);
            std::iter::once(v.to_string()).chain(token)
        })
        .collect();
    crate::redact::scrub(text, &secrets)
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

    /// A response header's value, as text.
    fn header(&self, name: reqwest::header::HeaderName) -> Option<String> {
        match self {
            Body::Reqwest(r, _) => r
                .headers()
                .get(name)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
            Body::Native(r) => match name {
                reqwest::header::CONTENT_TYPE => r.content_type.clone(),
                reqwest::header::CONTENT_ENCODING => r.content_encoding.clone(),
                reqwest::header::LOCATION => r.location.clone(),
                _ => None,
            },
        }
    }

    fn location(&self) -> Option<String> {
        self.header(reqwest::header::LOCATION)
    }

    fn content_encoding(&self) -> Option<String> {
        self.header(reqwest::header::CONTENT_ENCODING)
    }

    fn content_type(&self) -> Option<String> {
        self.header(reqwest::header::CONTENT_TYPE)
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
                Err(e) => Err(error_chain(&e)),
            },
            Body::Native(r) => r.read_some().await.map_err(|e| e.to_string()),
        }
    }

    /// The whole body, up to `max` bytes; `Ok(Err(read))` when it is larger.
    async fn all(mut self, max: usize) -> Result<Result<Vec<u8>, usize>, String> {
        let mut all = Vec::new();
        while let Some((b, _)) = self.next().await? {
            if all.len() + b.len() > max {
                return Ok(Err(all.len() + b.len()));
            }
            all.extend_from_slice(b);
        }
        Ok(Ok(all))
    }

    /// The start of the body (at most `max` bytes), for an error message.
    async fn head_of_body(mut self, max: usize) -> Vec<u8> {
        let mut all = Vec::new();
        while let Ok(Some((b, _))) = self.next().await {
            all.extend_from_slice(&b[..b.len().min(max - all.len())]);
            if all.len() >= max {
                break;
            }
        }
        all
    }
}

impl Route {
    /// The native endpoint for a URL a redirect named: the first plain-http one gets
    /// a pool of its own; any other goes through reqwest (None).
    fn native_for(&self, url: &str) -> Option<&h1::Endpoint> {
        h1::parse_http_url(url)?;
        let (u, ep) = self.redirect.get_or_init(|| {
            let via = self.proxies.for_url(url);
            let ep = h1::Endpoint::for_url_via(url, via.as_ref()).expect("a plain-http URL");
            (url.to_string(), ep)
        });
        (u == url).then_some(ep)
    }
}

/// Sends the request and reads the response head, following 307 and 308 redirects
/// with the same method and body as aiohttp does (at most [`MAX_REDIRECTS`]; a
/// 301/302/303 is returned as it is: see `send_inner`). The failure's kind and message.
async fn open<'a>(
    target: &'a Target,
    body: Vec<u8>,
    request_id: Option<&str>,
    extra: Option<HeaderMap>,
    times: &mut h1::SendTimes,
) -> Result<Body<'a>, (&'static str, String)> {
    let content_type = match target.backend.spec().body {
        BodyForm::Multipart => super::multipart::CONTENT_TYPE,
        BodyForm::Json => JSON,
    };
    let mut extra = extra.unwrap_or_default();
    if content_type != JSON {
        extra.insert(
            reqwest::header::CONTENT_TYPE,
            reqwest::header::HeaderValue::from_static(content_type),
        );
    }
    let body = bytes::Bytes::from(body);
    let mut url = std::borrow::Cow::Borrowed(target.url.as_str());
    let mut native = target.native.as_deref();
    let mut headers = std::borrow::Cow::Borrowed(&target.headers);
    for hop in 0..=MAX_REDIRECTS {
        let resp = send_once(
            target, native, &url, &body, request_id, &headers, &extra, times,
        )
        .await?;
        let status = resp.status();
        let location = match resp.location() {
            Some(l) if status == 307 || status == 308 => l,
            _ => return Ok(resp),
        };
        // What a message may say of it: a hostile Location may carry credentials too.
        let shown_location = crate::redact::text(&location).into_owned();
        if hop == MAX_REDIRECTS {
            return Err((
                "too_many_redirects",
                format!("more than {MAX_REDIRECTS} redirects (the last to {shown_location})"),
            ));
        }
        let next = reqwest::Url::parse(&url)
            .and_then(|u| u.join(&location))
            .map_err(|e| {
                (
                    "request",
                    format!("HTTP {status} to {shown_location:?}, which is not a URL ({e})"),
                )
            })?;
        drop(resp);
        // The origin the credentials belong to: the target's (parsed only here, never
        // on a request that is not redirected). Once a redirect leaves it, they stay
        // off for the rest of the way (as the Fetch standard and reqwest do).
        let origin = reqwest::Url::parse(&target.url).ok().map(|u| u.origin());
        if origin.as_ref() != Some(&next.origin()) {
            let shown = crate::redact::url(next.as_str());
            if target.cross_origin == CrossOrigin::Refuse {
                return Err((
                    "cross_origin_redirect",
                    format!(
                        "HTTP {status} to another origin, {shown}: not followed (cross_origin_redirects = \"refuse\"); set base_url to go there directly"
                    ),
                ));
            }
            if matches!(headers, std::borrow::Cow::Borrowed(_)) {
                headers = std::borrow::Cow::Owned(without_credentials(&target.headers));
                extra = without_credentials(&extra);
                let at = next.origin().ascii_serialization();
                target
                    .route
                    .withheld_at
                    .lock()
                    .expect("route lock")
                    .get_or_insert(at);
            }
        }
        let next = next.to_string();
        *target.route.final_url.lock().expect("route lock") = Some(next.clone());
        native = target.route.native_for(&next);
        url = std::borrow::Cow::Owned(next);
    }
    unreachable!("the loop returns")
}

/// One send of the request to `url`: through the native client when `native` (the
/// endpoint of `url`) is given, else through reqwest.
#[allow(clippy::too_many_arguments)]
async fn send_once<'a>(
    target: &'a Target,
    native: Option<&'a h1::Endpoint>,
    url: &str,
    body: &bytes::Bytes,
    request_id: Option<&str>,
    headers: &HeaderMap,
    extra: &HeaderMap,
    times: &mut h1::SendTimes,
) -> Result<Body<'a>, (&'static str, String)> {
    if let Some(native) = native {
        return native
            .pool
            .post(&native.path, &[headers, extra], request_id, body, times)
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
        .post(url)
        .headers(headers.clone())
        .header(reqwest::header::CONTENT_TYPE, JSON)
        .body(body.clone());
    if !extra.is_empty() {
        req = req.headers(extra.clone());
    }
    if let Some(id) = request_id {
        req = req.header("x-request-id", id);
    }
    match req.send().await {
        Ok(r) => Ok(Body::Reqwest(r, bytes::Bytes::new())),
        Err(e) => Err((classify(&e), super::http::describe(&e))),
    }
}

/// Sends the request and reads its answer. The request timeout (`limits.total`) is
/// one deadline from the start: the sending and the head, an error body and a pooling
/// answer each wait under it; a stream folds it into its one idle timer, so reading
/// a chunk polls one timer, not two.
async fn send_inner(
    target: &Target,
    body: Vec<u8>,
    request_id: Option<&str>,
    extra: Option<HeaderMap>,
    out: &mut Outcome,
) {
    // vLLM's clock starts here, before a connection is taken or opened.
    let mut times = h1::SendTimes {
        sent: Instant::now(),
        connect: None,
        written: None,
    };
    let sent = times.sent;
    out.sent = Some(sent);
    let total = target.limits.total;
    let deadline = deadline_after(sent, total);
    if target.backend.is_pooling() {
        // vLLM counts a pooling request's input from its usage only: 0 without one.
        out.sample.usage_prompt = Some(0);
    }
    // The head must come within the idle limit too: a server that never answers (or
    // trickles its head) is idle, not a 6-hour wait. A pooling answer's head comes with
    // its whole body, so only the request timeout bounds it.
    let head_deadline = if target.backend.is_pooling() {
        deadline
    } else {
        deadline_after(sent, target.limits.idle).min(deadline)
    };
    let opened = tokio::time::timeout_at(
        head_deadline.into(),
        open(target, body, request_id, extra, &mut times),
    )
    .await;
    out.connect = times.connect;
    out.written = times.written;
    let resp = match opened {
        Ok(Ok(r)) => r,
        Ok(Err((kind, msg))) => return fail(&mut out.sample, kind, msg),
        Err(_) if head_deadline < deadline => {
            return fail(
                &mut out.sample,
                "idle_timeout",
                format!(
                    "no response head within {:.1} s (stream_idle_timeout)",
                    target.limits.idle.as_secs_f64()
                ),
            );
        }
        Err(_) => return timed_out(&mut out.sample, total),
    };
    let status = resp.status();
    let encoding = resp.content_encoding();
    if status != 200 {
        // vLLM keeps only the reason phrase; the body's message says more. The body is
        // read only as far as a message needs.
        let location = resp.location();
        let Ok(head) =
            tokio::time::timeout_at(deadline.into(), resp.head_of_body(ERROR_BODY_BYTES)).await
        else {
            return timed_out(&mut out.sample, total);
        };
        let head = match super::encoding::decode_all(encoding.as_deref(), head) {
            Ok(plain) => plain,
            Err(e) => e.into_bytes(),
        };
        let text = String::from_utf8_lossy(&head).into_owned();
        let msg = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| {
                v.pointer("/error/message")
                    .or_else(|| v.pointer("/message"))
                    .and_then(|m| m.as_str())
                    .map(str::to_string)
            })
            .unwrap_or(text);
        let hint = match (status, &location) {
            (401 | 403, _) => " (check that the service's API key variable, api_key_env or OPENAI_API_KEY, holds the right key)".to_string(),
            (301..=303, Some(l)) => format!(
                " (a redirect to {}: a POST is not sent on as a GET, so set base_url to where it points)",
                crate::redact::text(l)
            ),
            _ => String::new(),
        };
        return fail(
            &mut out.sample,
            &format!("http_{status}"),
            format!("HTTP {status}{hint}: {msg}"),
        );
    }
    if target.backend.is_pooling() {
        let read = read_pooling(resp, sent, encoding, target.limits, &mut out.sample);
        if tokio::time::timeout_at(deadline.into(), read)
            .await
            .is_err()
        {
            timed_out(&mut out.sample, total);
        }
        return;
    }
    let api = target.backend.spec().stream.unwrap_or(Api::Completions);
    let mut reading = Reading::new(
        api,
        sent,
        target.limits,
        resp.content_type(),
        std::mem::take(&mut out.sample),
    );
    if !reading.decoding(encoding.as_deref()) {
        out.sample = reading.finish(End::Failed);
        return;
    }
    read_stream(resp, reading, deadline, &mut out.sample).await;
    if !target.backend.spec().reads_prompt_usage {
        // vLLM's audio request reads only completion_tokens from usage: the input
        // counted is the dataset's prompt_len, whatever the server says the audio took.
        out.sample.usage_prompt = None;
    }
}

/// A pooling answer (vLLM's `_run_pooling_request`): TTFT = latency = the whole body
/// read; input tokens from `usage.prompt_tokens` (0 without); a body that is not a
/// JSON object fails the request.
async fn read_pooling(
    resp: Body<'_>,
    sent: Instant,
    encoding: Option<String>,
    limits: Limits,
    out: &mut Sample,
) {
    let bytes = match resp.all(limits.max_body_bytes).await {
        Ok(Ok(b)) => match super::encoding::decode_all(encoding.as_deref(), b) {
            Ok(b) => b,
            Err(e) => return fail(out, "invalid_response", e),
        },
        Ok(Err(n)) => {
            return fail(
                out,
                "oversized_response",
                format!(
                    "the answer is larger than max_body_bytes ({} bytes; {n} read)",
                    limits.max_body_bytes
                ),
            );
        }
        Err(e) => return fail(out, "stream_broken", e),
    };
    let t = sent.elapsed().as_secs_f64();
    out.ttft = t;
    out.latency = t;
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(v) if v.is_object() => {
            out.usage_prompt = Some(
                v.pointer("/usage/prompt_tokens")
                    .and_then(|x| x.as_u64())
                    .unwrap_or(0),
            );
            out.success = true;
        }
        Ok(_) => fail(
            out,
            "invalid_response",
            format!("the answer is JSON but not an object: {}", excerpt(&bytes)),
        ),
        Err(e) => fail(
            out,
            "invalid_response",
            format!("the answer is not JSON ({e}): {}", excerpt(&bytes)),
        ),
    }
}

/// Reads a streamed answer under the request's deadline: on Linux the native client's
/// streams go to the stream reader thread (`reader`), everything else is read here.
async fn read_stream(resp: Body<'_>, reading: Reading, deadline: Instant, out: &mut Sample) {
    #[cfg(target_os = "linux")]
    let resp = match resp {
        Body::Native(r) => {
            *out = super::reader::read(r, reading, deadline).await;
            return;
        }
        other => other,
    };
    *out = read_here(resp, reading, deadline).await;
}

/// Reads a stream on this task: each read waits with one timer for both the idle limit
/// and the request's deadline, moved only when it fires (a timer set and cancelled
/// around every read cost more than the read's parsing; see benches/client_overhead.rs).
async fn read_here(mut resp: Body<'_>, mut reading: Reading, deadline: Instant) -> Sample {
    let alarm = tokio::time::sleep_until(reading.alarm_at(deadline).into());
    tokio::pin!(alarm);
    loop {
        let next = tokio::select! {
            biased;
            n = resp.next() => n,
            _ = &mut alarm => match reading.alarm(Instant::now(), deadline) {
                Alarm::Rearm(at) => {
                    alarm.as_mut().reset(at.into());
                    continue;
                }
                Alarm::End(end) => return reading.finish(end),
            }
        };
        // A chunk's time is when its bytes arrived (the kernel's stamp on the native path).
        match next {
            Ok(Some((bytes, now))) => {
                reading.bytes(bytes, now);
                if reading.failed() {
                    return reading.finish(End::Failed);
                }
            }
            Ok(None) => return reading.finish(End::Ended),
            Err(e) => return reading.finish(End::Broken(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::time::Duration;

    use super::{BaseUrl, Target, send};
    use crate::client::outcome::Limits;
    use crate::plan::Backend;

    #[tokio::test]
    async fn a_body_longer_than_a_turn_is_read_to_its_end_over_several_turns() {
        // 20,000 token events already queued: more than a turn's reads, and no new
        // segment will arrive to raise another edge, so only the backlog reads the rest.
        let events: String = (0..20_000)
            .map(|i| format!("data: {{\"choices\":[{{\"index\":0,\"text\":\"t{i} \"}}]}}\n\n"))
            .collect();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut head = [0u8; 4096];
            let _ = s.read(&mut head);
            let body = format!("{:x}\r\n{events}\r\n0\r\n\r\n", events.len());
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
            let _ = s.write_all(body.as_bytes());
            std::thread::sleep(Duration::from_secs(10)); // keep it open: no hang-up edge
        });
        let t = Target::new(
            format!("http://{addr}/v1/completions"),
            BaseUrl::parse(&format!("http://{addr}")).unwrap(),
            Backend::Openai,
            "m".into(),
            Default::default(),
            crate::client::http::build_client(false, None).unwrap(),
            Limits {
                idle: Duration::from_secs(3),
                total: Duration::from_secs(8),
                ..Limits::default()
            },
        );
        let o = send(&t, b"{}".to_vec(), None).await.sample;
        assert!(o.success, "{:?}", o.error);
        assert_eq!(o.chunks, 20_000);
        assert!(o.text.starts_with("t0 t1 ") && o.text.ends_with("t19999 "));
    }
}
