//! A service's base URL, parsed once: an `http://` or `https://` URL with a host,
//! kept as written without its trailing slashes (so `http://h:8000/` and
//! `http://h:8000` are one service, and a result records what the plan said). Every
//! side URL (`/v1/models`, `/health`, `/metrics`, an endpoint) is [`BaseUrl::join`]ed
//! onto it, never built with `format!`.

use std::fmt;

/// Why a string is not a base URL.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BaseUrlError {
    #[error("`{0}` is not an http:// or https:// URL")]
    Scheme(String),
    #[error("`{0}` is not a URL: {1}")]
    Parse(String, String),
}

/// An `http(s)://host[:port][/prefix]` URL without trailing slashes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BaseUrl(String);

impl BaseUrl {
    pub fn parse(text: &str) -> Result<BaseUrl, BaseUrlError> {
        // An error names the text without its credentials.
        let shown = || crate::redact::url(text);
        if !(text.starts_with("http://") || text.starts_with("https://")) {
            return Err(BaseUrlError::Scheme(shown()));
        }
        let trimmed = text.trim_end_matches('/');
        let url = reqwest::Url::parse(trimmed)
            .map_err(|e| BaseUrlError::Parse(shown(), e.to_string()))?;
        if url.host_str().is_none_or(str::is_empty) {
            return Err(BaseUrlError::Parse(shown(), "no host".into()));
        }
        Ok(BaseUrl(trimmed.to_string()))
    }

    /// The URL as written, without trailing slashes: what requests go to, credentials
    /// and all. Never shown or recorded: that is [`BaseUrl::shown`] (and `Display`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The URL as it may be shown or recorded: userinfo replaced (see `redact`).
    pub fn shown(&self) -> String {
        crate::redact::url(&self.0)
    }

    /// `path` under this URL: `join("/v1/models")` and `join("v1/models")` are both
    /// `{base}/v1/models`.
    pub fn join(&self, path: &str) -> String {
        if path.is_empty() {
            return self.0.clone();
        }
        let path = path.strip_prefix('/').unwrap_or(path);
        format!("{}/{path}", self.0)
    }

    /// `host:port[/prefix]` of a plain `http://` URL (what the native tokenize client
    /// connects to); None for https.
    pub fn plain_http_addr(&self) -> Option<&str> {
        self.0.strip_prefix("http://")
    }

    pub fn is_https(&self) -> bool {
        self.0.starts_with("https://")
    }

    /// Whether the host is this machine: its loopback (`localhost`, 127.0.0.0/8,
    /// `::1`) or an address of one of its interfaces (a name is resolved; an address
    /// is this host's when a socket can be bound to it). Nothing but this host's own
    /// stack is then between the client and the server.
    pub fn is_this_host(&self) -> bool {
        let Ok(url) = reqwest::Url::parse(&self.0) else {
            return false;
        };
        let host = url.host_str().unwrap_or_default();
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if host.eq_ignore_ascii_case("localhost") {
            return true;
        }
        let ips: Vec<std::net::IpAddr> = match bare.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => std::net::ToSocketAddrs::to_socket_addrs(&(bare, 0))
                .map(|a| a.map(|s| s.ip()).collect())
                .unwrap_or_default(),
        };
        !ips.is_empty()
            && ips
                .iter()
                .all(|ip| ip.is_loopback() || std::net::UdpSocket::bind((*ip, 0)).is_ok())
    }
}

#[cfg(test)]
mod this_host_tests {
    use super::BaseUrl;

    #[test]
    fn this_host_is_its_loopback_and_its_own_addresses() {
        for (url, want) in [
            ("http://127.0.0.1:8000", true),
            ("http://127.3.2.1", true),
            ("http://LOCALHOST:1/v1", true),
            ("http://[::1]:8000", true),
            // TEST-NET-1: never this host's.
            ("http://192.0.2.1", false),
        ] {
            assert_eq!(BaseUrl::parse(url).unwrap().is_this_host(), want, "{url}");
        }
        // This host's own address on a routed interface, where it has one.
        let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        if s.connect("192.0.2.1:9").is_ok() {
            let me = s.local_addr().unwrap().ip();
            if !me.is_unspecified() {
                let url = format!("http://{me}:8000");
                assert!(BaseUrl::parse(&url).unwrap().is_this_host(), "{url}");
            }
        }
    }
}

/// Shown without its credentials.
impl fmt::Display for BaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown())
    }
}

/// Recorded without its credentials.
impl serde::Serialize for BaseUrl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.shown())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_once_and_joins_side_urls() {
        let b = BaseUrl::parse("http://127.0.0.1:8000/").unwrap();
        assert_eq!(b.as_str(), "http://127.0.0.1:8000");
        assert_eq!(b.join("/v1/models"), "http://127.0.0.1:8000/v1/models");
        assert_eq!(b.join("metrics"), "http://127.0.0.1:8000/metrics");
        assert_eq!(b.join(""), "http://127.0.0.1:8000");
        assert_eq!(b.plain_http_addr(), Some("127.0.0.1:8000"));
        // A prefix (a gateway's route) is kept.
        let g = BaseUrl::parse("https://gw.example/team-a//").unwrap();
        assert_eq!(g.join("/health"), "https://gw.example/team-a/health");
        assert!(g.is_https() && g.plain_http_addr().is_none());
        // Credentials go with the requests, never into what is shown or recorded.
        let c = BaseUrl::parse("http://user:pw@gw:8000/").unwrap();
        assert_eq!(c.join("/v1/models"), "http://user:pw@gw:8000/v1/models");
        assert_eq!(c.to_string(), "http://<redacted>@gw:8000");
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            "\"http://<redacted>@gw:8000\""
        );
    }

    #[test]
    fn refuses_what_is_not_an_http_url() {
        for bad in ["127.0.0.1:8000", "ftp://h", "localhost", ""] {
            assert_eq!(
                BaseUrl::parse(bad),
                Err(BaseUrlError::Scheme(bad.to_string()))
            );
        }
        assert!(matches!(
            BaseUrl::parse("http://"),
            Err(BaseUrlError::Parse(..))
        ));
        assert!(matches!(
            BaseUrl::parse("http://[::1"),
            Err(BaseUrlError::Parse(..))
        ));
    }
}
