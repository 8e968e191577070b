//! One reqwest client per run, with rustls on the ring provider (no C toolchain needed).

use std::time::Duration;

/// An error with its causes: reqwest's `error sending request` alone says nothing.
/// A URL it names loses its userinfo (reqwest's errors name the whole URL).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(c) = source {
        s.push_str(": ");
        s.push_str(&c.to_string());
        source = c.source();
    }
    crate::redact::text(&s).into_owned()
}

/// An error's whole chain, with a hint when it is a certificate problem (see
/// [`certificate_hint`]): what `run`, `probe` and `bench` print for a failed request.
pub fn describe(e: &dyn std::error::Error) -> String {
    let chain = error_chain(e);
    match certificate_hint(&chain) {
        Some(h) => format!("{chain} ({h})"),
        None => chain,
    }
}

/// Installs rustls' ring provider once per process (reqwest is built without a default one).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// How a client reaches servers: certificate checks and proxies.
#[derive(Debug, Clone, Default)]
pub struct ClientOptions {
    /// Accept any certificate (a self-signed test server).
    pub insecure: bool,
    /// A PEM file of extra trusted roots (a private CA), on top of the system's.
    pub ca_cert: Option<std::path::PathBuf>,
    pub proxies: crate::proxy::Proxies,
}

/// A client for benchmark traffic with the environment's proxies (see `proxy`):
/// `build_client_with` for the other options.
pub fn build_client(
    insecure: bool,
    max_connections: Option<usize>,
) -> reqwest::Result<reqwest::Client> {
    let opts = ClientOptions {
        insecure,
        proxies: crate::proxy::Proxies::from_env(),
        ..ClientOptions::default()
    };
    build_client_with(&opts, max_connections).map_err(|e| match e {
        ClientError::Build(e) => e,
        ClientError::CaCert(m) => unreachable!("no ca_cert was given: {m}"),
    })
}

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot build the HTTP client: {0}")]
    Build(reqwest::Error),
    #[error("{0}")]
    CaCert(String),
}

/// A client for benchmark traffic: no pool idle timeouts mid-run, keep-alive on,
/// Nagle off, no redirect followed by reqwest (`request` follows 307/308 itself, for
/// both clients alike) and no body decoded by it (`request` decodes gzip and deflate).
/// `max_connections` caps the pool per host (None: unbounded).
pub fn build_client_with(
    opts: &ClientOptions,
    max_connections: Option<usize>,
) -> Result<reqwest::Client, ClientError> {
    install_crypto_provider();
    let mut b = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(300))
        .connect_timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .danger_accept_invalid_certs(opts.insecure);
    if let Some(path) = &opts.ca_cert {
        let pem = std::fs::read(path).map_err(|e| {
            ClientError::CaCert(format!("cannot read ca_cert {}: {e}", path.display()))
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
            ClientError::CaCert(format!(
                "ca_cert {} is not a PEM certificate file: {e}",
                path.display()
            ))
        })?;
        if certs.is_empty() {
            return Err(ClientError::CaCert(format!(
                "ca_cert {} holds no PEM certificate",
                path.display()
            )));
        }
        b = b.tls_certs_merge(certs);
    }
    b = opts.proxies.apply(b);
    if let Some(n) = max_connections {
        b = b.pool_max_idle_per_host(n);
    }
    b.build().map_err(ClientError::Build)
}

/// Whether an error chain is a certificate problem, and if so a hint on what to set.
pub fn certificate_hint(chain: &str) -> Option<&'static str> {
    let c = chain.to_ascii_lowercase();
    (c.contains("certificate") || c.contains("unknownissuer") || c.contains("invalid peer"))
        .then_some(
            "the server's certificate was not accepted: name its CA with ca_cert = \"path/ca.pem\" on the service (or SSL_CERT_FILE=path/ca.pem), or turn verification off with insecure = true (bench: --insecure)",
        )
}
