//! One reqwest client per run, with rustls on the ring provider (no C toolchain needed).

use std::time::Duration;

/// An error with its causes: reqwest's `error sending request` alone says nothing.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(c) = source {
        s.push_str(": ");
        s.push_str(&c.to_string());
        source = c.source();
    }
    s
}

/// Installs rustls' ring provider once per process (reqwest is built without a default one).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A client for benchmark traffic: no proxy surprises, no pool idle timeouts mid-run,
/// keep-alive on, Nagle off. `max_connections` caps the pool per host (None: unbounded).
pub fn build_client(
    insecure: bool,
    max_connections: Option<usize>,
) -> reqwest::Result<reqwest::Client> {
    install_crypto_provider();
    let mut b = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(300))
        .connect_timeout(Duration::from_secs(30))
        .danger_accept_invalid_certs(insecure);
    if let Some(n) = max_connections {
        b = b.pool_max_idle_per_host(n);
    }
    b.build()
}
