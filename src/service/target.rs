//! Resolving a service into something requests can be sent to: an embedded simulator
//! started on demand or an external URL, its model (asked of /v1/models when not
//! given), its tokenizer, and the request headers (API keys from the environment).

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::base_url::BaseUrl;
use crate::client::http::{ClientOptions, build_client_with};
use crate::client::outcome::Limits;
use crate::client::request::Target;
use crate::plan::shape::RequestShape;
use crate::plan::{CaseParams, Service};
use crate::sim::{SimConfig, SimHandle, Simulator};
use crate::tokenizer::TokenModel;

/// A service ready for traffic. Holds the simulator (if any) alive.
pub struct Resolved {
    pub base_url: BaseUrl,
    /// The model as /v1/models names it (sent unless served_model_name is given).
    pub model: String,
    /// The model's `root` (a path or hub id), for the tokenizer.
    pub model_root: String,
    pub tokens: TokenModel,
    /// Where the tokenizer came from: a path, `builtin`.
    pub tokenizer_id: String,
    pub client: reqwest::Client,
    pub headers: HeaderMap,
    /// The proxies requests go through (see `proxy`).
    pub proxies: crate::proxy::Proxies,
    pub sim: Option<SimHandle>,
    /// The service's `/metrics`, when it serves one and scraping is on (set by whoever
    /// checked it: `run` checks once per service).
    pub metrics: Option<std::sync::Arc<crate::servermetrics::Source>>,
    /// Where its GPUs' energy is read, when the plan says (set by whoever checked it:
    /// `run` once per service).
    pub energy: Option<std::sync::Arc<crate::energy::source::Source>>,
    /// The request wording the service accepted when it refused vLLM's (set by whoever
    /// checked it: `run` once per service; see `preflight`).
    pub found: Option<Found>,
}

/// Starts the simulator of a `sim` service, or connects to `base_url`, and resolves model and tokenizer.
pub async fn resolve(
    service: &Service,
    insecure: bool,
    max_connections: Option<usize>,
) -> Result<Resolved, String> {
    let (base_url, sim) = match (&service.sim, &service.base_url) {
        (Some(spec), _) => {
            let config = SimConfig::from_spec(spec);
            let h = Simulator::start(config)
                .await
                .map_err(|e| format!("cannot start the simulator: {e}"))?;
            let url = BaseUrl::parse(&h.base_url).map_err(|e| e.to_string())?;
            (url, Some(h))
        }
        (None, Some(url)) => (BaseUrl::parse(url).map_err(|e| e.to_string())?, None),
        (None, None) => return Err("the service has neither base_url nor sim".into()),
    };
    let options = ClientOptions {
        insecure: insecure || service.insecure == Some(true),
        ca_cert: service.ca_cert.clone(),
        proxies: service.proxies(),
    };
    let client = build_client_with(&options, max_connections).map_err(|e| e.to_string())?;
    let headers = headers(service)?;
    let (model, model_root) = match &service.model {
        Some(m) => (m.clone(), m.clone()),
        None => discover_model(&client, &base_url, &headers).await?,
    };
    let (tokens, tokenizer_id) = match resolve_tokenizer(service, Some(&base_url), &model_root) {
        Ok(t) => t,
        Err(e) => {
            // A hub id missing from the cache is fetched once, then loaded from there.
            let id = service
                .tokenizer
                .clone()
                .unwrap_or_else(|| model_root.clone());
            if service.client == Some(crate::plan::params::ClientEngine::Vllm) {
                // vLLM's client loads its own tokenizer; benchplan counts nothing here.
                (TokenModel::Builtin, id)
            } else if !crate::planner::tokenizer::is_hub_id(&id) || service.is_sim() {
                return Err(e);
            } else {
                let file = crate::tokenizer::hf_download_tokenizer(&id, &client)
                    .await
                    .map_err(|d| format!("{e} ({d})"))?;
                (TokenModel::load(&file)?, id)
            }
        }
    };
    Ok(Resolved {
        base_url,
        model,
        model_root,
        tokens,
        tokenizer_id,
        client,
        headers,
        proxies: options.proxies,
        sim,
        metrics: None,
        energy: None,
        found: None,
    })
}

/// Why a server at `base_url` cannot be reached, when a TCP connection to its host and
/// port does not open within 10 s (the address and the OS's words); None when it
/// opens. Asked only after a side request failed, so a server that works never sees
/// this connection. Blocking.
pub fn unreachable(base_url: &BaseUrl) -> Option<String> {
    use std::net::ToSocketAddrs;
    let url = reqwest::Url::parse(base_url.as_str()).ok()?;
    let (host, port) = (url.host_str()?, url.port_or_known_default()?);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addr = format!("{host}:{port}");
    let why = match (host, port).to_socket_addrs() {
        Err(e) => e.to_string(),
        Ok(mut addrs) => match addrs.next() {
            None => "the name has no address".to_string(),
            Some(a) => match std::net::TcpStream::connect_timeout(&a, Duration::from_secs(10)) {
                Ok(_) => return None,
                Err(e) => e.to_string(),
            },
        },
    };
    Some(format!(
        "cannot connect to {base_url} ({addr}): {why}; is the server running and listening there?"
    ))
}

/// The tokenizer of a service: the plan's (a path, a Hugging Face id in the local cache,
/// or "server"), else the model's `root` when it is a local folder, else — for the
/// simulator only — the built-in word tokenizer. Anything else is a clear error.
pub fn resolve_tokenizer(
    service: &Service,
    base_url: Option<&BaseUrl>,
    model_root: &str,
) -> Result<(TokenModel, String), String> {
    let from_id = |id: &str| -> Option<Result<(TokenModel, String), String>> {
        crate::tokenizer::find_local(id).map(|f| TokenModel::load(&f).map(|t| (t, id.to_string())))
    };
    match service.tokenizer.as_deref() {
        Some("server") => {
            let shown = base_url.map_or(String::new(), BaseUrl::shown);
            let addr = base_url
                .and_then(BaseUrl::plain_http_addr)
                .ok_or_else(|| format!("tokenizer = \"server\" needs a plain http:// base_url, not {shown}; give a tokenizer path instead"))?;
            let via = service.proxies().for_url(base_url.map_or("", BaseUrl::as_str));
            // Before any traffic: a server without a working tokenize endpoint is a clear
            // error here, not an empty vocabulary later.
            if let Some(t) = server_tokenizer(addr, via.clone()) {
                return Ok((t, "server".to_string()));
            }
            // A server that is down is named as such, not blamed on its tokenizer.
            if let Some(down) = base_url.filter(|_| via.is_none()).and_then(unreachable) {
                return Err(down);
            }
            Err(format!(
                "tokenizer = \"server\": {shown} tokenizes at none of /tokenize (vLLM's or llama.cpp's form) and /extras/tokenize (llama-cpp-python's): no answer, an error, or no tokens; this server needs a tokenizer given by path or Hugging Face id (plan: `tokenizer`, bench: --tokenizer)"
            ))
        }
        Some(id) => from_id(id).unwrap_or_else(|| {
            Err(format!(
                "tokenizer `{id}` is neither a local tokenizer.json or model folder nor a Hugging Face id in the local cache ($HF_HOME/hub); download it there first, or use tokenizer = \"server\""
            ))
        }),
        None if service.is_sim() => match &service.sim.as_ref().and_then(|s| s.params.tokenizer.clone()) {
            Some(p) => TokenModel::load(p).map(|t| (t, p.display().to_string())),
            None => Ok((TokenModel::Builtin, "builtin".to_string())),
        },
        None => from_id(model_root).unwrap_or_else(|| {
            Err(format!(
                "no tokenizer for model `{model_root}`: it is not a local folder nor in the Hugging Face cache; set the service's `tokenizer` (or --tokenizer) to a tokenizer.json, a model folder, a Hugging Face id downloaded to the local cache, or \"server\" to use the target's /tokenize"
            ))
        }),
    }
}

/// The server's own tokenizer at `addr` (`host:port`): the first of the known tokenize
/// endpoints (`TokenizeApi::ALL`) that tokenizes and detokenizes. Blocking.
pub fn server_tokenizer(addr: &str, via: Option<crate::proxy::Via>) -> Option<TokenModel> {
    let addr = addr.trim_end_matches('/').to_string();
    crate::tokenizer::TokenizeApi::ALL
        .into_iter()
        .find_map(|api| {
            let t = TokenModel::Server(crate::tokenizer::ServerAddr {
                addr: addr.clone(),
                via: via.clone(),
                api,
                special_prefix: Default::default(),
            });
            let ids = t.encode("hello world");
            (!ids.is_empty() && !t.decode(&ids).is_empty()).then_some(t)
        })
}

/// `Authorization: Bearer` from the service's key variable (default OPENAI_API_KEY), then
/// its headers; every value marked sensitive (never printed, scrubbed from errors).
pub fn headers(service: &Service) -> Result<HeaderMap, String> {
    let mut h = HeaderMap::new();
    let var = service.api_key_env.as_deref().unwrap_or("OPENAI_API_KEY");
    if let Ok(key) = std::env::var(var) {
        if !key.is_empty() {
            let mut v = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| format!("${var} holds characters a header cannot carry"))?;
            v.set_sensitive(true);
            h.insert(AUTHORIZATION, v);
            crate::redact::register([key]);
        }
    }
    for (k, v) in &service.headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("`{k}` is not a valid header name"))?;
        let mut value = HeaderValue::from_str(v)
            .map_err(|_| format!("the value of header `{k}` is not valid"))?;
        value.set_sensitive(true);
        h.insert(name, value);
        if crate::redact::is_secret_key(k) {
            crate::redact::register([v.clone()]);
        }
    }
    Ok(h)
}

/// The first model of /v1/models: (id, root).
pub async fn discover_model(
    client: &reqwest::Client,
    base_url: &BaseUrl,
    headers: &HeaderMap,
) -> Result<(String, String), String> {
    let url = base_url.join("/v1/models");
    let resp = client
        .get(&url)
        .headers(headers.clone())
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .map_err(|e| {
            format!(
                "cannot reach {url}: {}; check the address (naming the model, `model` in a plan or --model, skips this lookup)",
                crate::client::http::describe(&e)
            )
        })?;
    if !resp.status().is_success() {
        return Err(format!(
            "{url} answered HTTP {}; name the model (`model` in a plan or --model)",
            resp.status().as_u16()
        ));
    }
    let v: Value = resp.json_value().await?;
    let first = v
        .pointer("/data/0")
        .ok_or_else(|| format!("{url} lists no model; name one (`model` in a plan or --model)"))?;
    let id = first
        .get("id")
        .and_then(Value::as_str)
        .ok_or("the first model has no id")?
        .to_string();
    let root = first
        .get("root")
        .and_then(Value::as_str)
        .unwrap_or(&id)
        .to_string();
    Ok((id, root))
}

trait JsonValue {
    async fn json_value(self) -> Result<Value, String>;
}

impl JsonValue for reqwest::Response {
    async fn json_value(self) -> Result<Value, String> {
        let bytes = self.bytes().await.map_err(|e| e.to_string())?;
        serde_json::from_slice(&bytes).map_err(|e| format!("the answer is not JSON: {e}"))
    }
}

/// The request target for a case on a resolved service.
pub fn target(r: &Resolved, service: &Service, params: &CaseParams) -> Arc<Target> {
    let endpoint = params
        .endpoint
        .clone()
        .unwrap_or_else(|| params.backend().default_endpoint().to_string());
    Arc::new(
        Target::new(
            r.base_url.join(&endpoint),
            r.base_url.clone(),
            params.backend(),
            service
                .served_model_name
                .clone()
                .unwrap_or_else(|| r.model.clone()),
            r.headers.clone(),
            r.client.clone(),
            Limits::of(params),
        )
        .through(&r.proxies)
        .worded(&params.request_shape)
        .redirecting(service.cross_origin_redirects),
    )
}

/// The wording a refused server accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The fields found (the ones the plan left unset).
    pub shape: RequestShape,
    /// How the server refused the case's own wording.
    pub refused: String,
}

impl Found {
    /// The console's note about it.
    pub fn note(&self, service: &str) -> String {
        format!(
            "service `{service}` refused vLLM's request ({}); it answers with request_shape {{ {} }}, which its cases send (set `request_shape` on the service to choose)",
            self.refused,
            self.shape.describe().join(", ")
        )
    }
}
