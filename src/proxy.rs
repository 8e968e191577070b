//! The proxy rule, one for every request benchplan sends: measured and side requests
//! (`/v1/models`, `/health`, `/tokenize`, `/metrics`, a tokenizer download), plain
//! and TLS. It is vLLM's client's rule (aiohttp with `trust_env=True`):
//! `HTTP_PROXY` for `http://` URLs, `HTTPS_PROXY` for `https://` ones (either case),
//! `NO_PROXY` exempts hosts (`*`, domains and their subdomains, IP addresses and
//! CIDR ranges). `ALL_PROXY` is not read: aiohttp does not read it either.
//!
//! Matching is hyper-util's (the matcher reqwest uses), so the native client and
//! reqwest decide alike. A service's `proxy = false` (or `--no-proxy`) turns proxies
//! off; the embedded simulator is always reached directly. What a result records of
//! a proxy is [`Via::shown`]: its scheme, host and port, never its credentials.

use hyper_util::client::proxy::matcher::Matcher;
use reqwest::header::HeaderValue;

/// The proxy settings from the environment, or none.
#[derive(Clone, Default)]
pub struct Proxies {
    /// The variables as read (the first of the upper- and lower-case names that is set).
    http: String,
    https: String,
    no: String,
}

impl std::fmt::Debug for Proxies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The variables may hold credentials.
        f.debug_struct("Proxies")
            .field("http", &!self.http.is_empty())
            .field("https", &!self.https.is_empty())
            .finish()
    }
}

/// A proxy a URL is sent through.
#[derive(Clone)]
pub struct Via {
    /// `host:port` of the proxy, to connect to.
    pub authority: String,
    /// The `Proxy-Authorization` value, when the proxy URL carried credentials.
    pub auth: Option<HeaderValue>,
    /// `http://host:port` of the proxy: what results and the console show.
    pub shown: String,
    /// The variable it came from (`HTTP_PROXY`, `HTTPS_PROXY`).
    pub variable: &'static str,
}

impl std::fmt::Debug for Via {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Via").field("shown", &self.shown).finish()
    }
}

fn first_env(names: [&str; 2]) -> String {
    names
        .iter()
        .find_map(|n| std::env::var(n).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_default()
}

impl Proxies {
    /// The environment's proxies (see the module docs).
    pub fn from_env() -> Proxies {
        Proxies {
            http: first_env(["HTTP_PROXY", "http_proxy"]),
            https: first_env(["HTTPS_PROXY", "https_proxy"]),
            no: first_env(["NO_PROXY", "no_proxy"]),
        }
    }

    /// No proxy for any URL.
    pub fn off() -> Proxies {
        Proxies::default()
    }

    /// The environment's proxies, unless `enabled` is false.
    pub fn from_env_if(enabled: bool) -> Proxies {
        if enabled {
            Proxies::from_env()
        } else {
            Proxies::off()
        }
    }

    fn matcher(&self) -> Matcher {
        Matcher::builder()
            .http(self.http.clone())
            .https(self.https.clone())
            .no(self.no.clone())
            .build()
    }

    /// The proxy `url` goes through, if any.
    pub fn for_url(&self, url: &str) -> Option<Via> {
        if self.http.is_empty() && self.https.is_empty() {
            return None;
        }
        let uri: hyper::Uri = url.parse().ok()?;
        let hit = self.matcher().intercept(&uri)?;
        let p = hit.uri();
        let host = p.host()?;
        let port = p.port_u16().unwrap_or(if p.scheme_str() == Some("https") {
            443
        } else {
            80
        });
        let authority = format!("{host}:{port}");
        Some(Via {
            shown: format!("{}://{authority}", p.scheme_str().unwrap_or("http")),
            authority,
            auth: hit.basic_auth().cloned(),
            variable: if uri.scheme_str() == Some("https") {
                "HTTPS_PROXY"
            } else {
                "HTTP_PROXY"
            },
        })
    }

    /// `b` with these proxies and no others (reqwest would read the environment on its
    /// own, `ALL_PROXY` included; this keeps one rule for both clients).
    pub fn apply(&self, b: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        let mut b = b.no_proxy();
        let no = reqwest::NoProxy::from_string(&self.no);
        if !self.http.is_empty() {
            if let Ok(p) = reqwest::Proxy::http(&self.http) {
                b = b.proxy(p.no_proxy(no.clone()));
            }
        }
        if !self.https.is_empty() {
            if let Ok(p) = reqwest::Proxy::https(&self.https) {
                b = b.proxy(p.no_proxy(no));
            }
        }
        b
    }
}

/// `url` without a user name or password, for printing.
pub fn without_credentials(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxies(http: &str, https: &str, no: &str) -> Proxies {
        Proxies {
            http: http.into(),
            https: https.into(),
            no: no.into(),
        }
    }

    #[test]
    fn each_scheme_has_its_variable_and_no_proxy_exempts_hosts() {
        let p = proxies(
            "http://user:secret@127.0.0.1:3128",
            "http://127.0.0.2:3129",
            "internal.example, 10.0.0.0/8",
        );
        let v = p.for_url("http://api.example:8000/v1/completions").unwrap();
        assert_eq!(v.authority, "127.0.0.1:3128");
        assert_eq!(v.shown, "http://127.0.0.1:3128");
        assert_eq!(v.variable, "HTTP_PROXY");
        assert!(!format!("{v:?}").contains("secret"));
        assert!(v.auth.is_some(), "credentials become Proxy-Authorization");
        let v = p.for_url("https://api.example/v1/completions").unwrap();
        assert_eq!(v.authority, "127.0.0.2:3129");
        assert!(p.for_url("http://internal.example/x").is_none());
        assert!(p.for_url("http://a.internal.example/x").is_none());
        assert!(p.for_url("http://10.1.2.3:8000/x").is_none());
        assert!(proxies("", "", "").for_url("http://a/x").is_none());
        assert!(
            proxies("http://127.0.0.1:1", "", "*")
                .for_url("http://a/x")
                .is_none()
        );
        assert_eq!(without_credentials("http://u:pw@h:1/v1"), "http://h:1/v1");
        assert!(
            proxies("", "http://127.0.0.1:1", "")
                .for_url("http://a/x")
                .is_none(),
            "HTTPS_PROXY does not serve http:// URLs"
        );
    }
}
