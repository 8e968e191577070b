//! Services: the targets a plan benchmarks, an external endpoint or an embedded simulator.

use std::path::PathBuf;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::backend::Backend;
use super::server_metrics::ServerMetricsSpec;
use super::sim::SimSpec;

/// One named target. Give either `base_url` (an external server) or `sim` (the embedded simulator).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Service {
    /// Server address such as `http://127.0.0.1:8000`; the endpoint path is appended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Backend used for this service unless a case sets one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<Backend>,
    /// API path; inferred from the backend when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Model name (also the tokenizer when none is given); discovered from /v1/models when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Name sent in the request's `model` field, when it differs from `model`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_model_name: Option<String>,
    /// A local tokenizer directory or tokenizer.json, a Hugging Face id, or "server".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// Extra HTTP headers on every request.
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub headers: IndexMap<String, String>,
    /// Environment variable holding the API key (sent as a Bearer token); default OPENAI_API_KEY.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The client for this service's cases unless a case sets one: `native` or `vllm`
    /// (runs `vllm bench serve` per case).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<super::params::ClientEngine>,
    /// The `vllm` program for `client = "vllm"`; default: `vllm` on PATH.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vllm_path: Option<std::path::PathBuf>,
    /// Run the embedded simulator for this service instead of calling base_url.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim: Option<SimSpec>,
    /// Scraping the server's Prometheus metrics around each case (overrides `defaults.server_metrics`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<ServerMetricsSpec>,
    /// Where this service's GPU energy is read (a DCGM exporter; see "Energy and cost"
    /// in the README): each case then reports joules and joules per token over its
    /// measured window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy: Option<super::energy::EnergySpec>,
    /// What the service costs per hour (`cost = { per_hour = 98.32, currency = "USD" }`):
    /// each case then reports its cost per million tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<super::energy::CostSpec>,
    /// Accept any TLS certificate (a self-signed server); `bench --insecure`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    /// A PEM file of CA certificates to trust on top of the system's (a private CA);
    /// relative paths resolve against the working directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<PathBuf>,
    /// Honour the environment's HTTP_PROXY, HTTPS_PROXY and NO_PROXY (default true, as
    /// vLLM's client does); false sends every request directly. `--no-proxy` on the
    /// command line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<bool>,
    /// A 307/308 redirect to another origin (scheme, host or port): `follow` sends the
    /// request on without `Authorization`, `Proxy-Authorization`, cookies and every
    /// secret-looking header, as browsers, aiohttp and reqwest do (the default);
    /// `refuse` fails the request as `cross_origin_redirect`, naming the `Location`.
    /// Same-origin redirects are followed with every header either way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_origin_redirects: Option<CrossOrigin>,
    /// How this service's requests are worded (chat content, request-id header,
    /// stream_options, output-length key); wins over `defaults.request_shape`, field by
    /// field, where the matrix sets nothing.
    #[serde(skip_serializing_if = "super::shape::RequestShape::is_unset")]
    pub request_shape: super::shape::RequestShape,
    /// Case parameters for this service's cases, as in `[defaults]` (a key may be a
    /// path such as "dataset.input_len"): they replace the plan's `[defaults]` values,
    /// and the matrix replaces them. A CPU service and an H100 service can share a plan
    /// with their own prompt counts, timeouts and datasets.
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    #[schemars(with = "IndexMap<String, serde_json::Value>")]
    pub defaults: IndexMap<String, serde_json::Value>,
    /// SLOs for this service's cases, written as `[slo]` is: the plan's SLOs with these
    /// added, a key set here replacing the plan's (`p99_ttft = "<= 5s"` for a CPU service).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo: Option<super::slo_spec::SloSpec>,
}

impl Service {
    /// Whether this service is the embedded simulator.
    pub fn is_sim(&self) -> bool {
        self.sim.is_some()
    }

    /// The proxies this service's requests go through: the environment's unless
    /// `proxy = false`; none for the embedded simulator (it runs in this process).
    pub fn proxies(&self) -> crate::proxy::Proxies {
        crate::proxy::Proxies::from_env_if(!self.is_sim() && self.proxy != Some(false))
    }

    /// A local tokenizer path, when `tokenizer` names one.
    pub fn tokenizer_path(&self) -> Option<PathBuf> {
        self.tokenizer
            .as_deref()
            .filter(|t| *t != "server")
            .map(PathBuf::from)
    }
}

/// What a redirect to another origin gets (see [`Service::cross_origin_redirects`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CrossOrigin {
    /// Followed without the credentials.
    #[default]
    Follow,
    /// Not followed: the request fails, naming the `Location`.
    Refuse,
}
