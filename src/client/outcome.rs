//! How one request may end, shared by the ways of sending and reading it: the limits
//! it runs under ([`Limits`]), and the helpers that write a failure into its sample
//! (a kind and a printable, bounded message), a timeout, an excerpt of a body.

use std::time::{Duration, Instant};

use crate::metrics::sample::{RequestError, Sample};
use crate::plan::CaseParams;

/// How much a response may hold and how long it may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest SSE line or event (bytes); past it the request fails as
    /// `oversized_response`.
    pub max_event_bytes: usize,
    /// The largest non-streamed body (a pooling answer), in bytes.
    pub max_body_bytes: usize,
    /// A stream that delivers no byte for this long fails as `idle_timeout`.
    pub idle: Duration,
    /// A request that has no complete answer after this long fails as `timeout`.
    pub total: Duration,
}

/// Error messages keep this many characters.
const MESSAGE_CHARS: usize = 500;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_event_bytes: 16 << 20,
            max_body_bytes: 256 << 20,
            idle: Duration::from_secs(300),
            // vLLM's aiohttp session: ClientTimeout(total=6 h).
            total: Duration::from_secs(6 * 3600),
        }
    }
}

impl Limits {
    /// The case's limits: its settings where given, the defaults elsewhere.
    pub fn of(p: &CaseParams) -> Limits {
        let d = Limits::default();
        Limits {
            max_event_bytes: p.max_event_bytes.map_or(d.max_event_bytes, |b| b as usize),
            max_body_bytes: p.max_body_bytes.map_or(d.max_body_bytes, |b| b as usize),
            idle: p.stream_idle_timeout.map_or(d.idle, |t| t.0),
            total: p.request_timeout.map_or(d.total, |t| t.0),
        }
    }
}

/// `s` cut to at most `n` characters, at a character boundary.
pub fn truncate_chars(s: &mut String, n: usize) {
    if let Some((i, _)) = s.char_indices().nth(n) {
        s.truncate(i);
    }
}

pub(crate) fn fail(o: &mut Sample, kind: &str, message: impl Into<String>) {
    o.success = false;
    if o.error.is_none() {
        // A server's words: no control character reaches a result, a report or the
        // terminal (ESC, OSC-8 and NUL are kept visible as escapes).
        let mut message = crate::escape::console(&message.into());
        truncate_chars(&mut message, MESSAGE_CHARS);
        o.error = Some(RequestError {
            kind: kind.to_string(),
            message,
        });
    }
}

/// A short, printable excerpt of body bytes.
pub(crate) fn excerpt(b: &[u8]) -> String {
    let mut s = String::from_utf8_lossy(b).into_owned();
    truncate_chars(&mut s, 200);
    s
}

/// Fails `o` for having no complete answer by the request timeout.
pub(crate) fn timed_out(o: &mut Sample, total: Duration) {
    fail(
        o,
        "timeout",
        format!(
            "no complete answer within the request timeout of {:.1} s",
            total.as_secs_f64()
        ),
    );
}

/// `start + d`, or a time past any run when that does not fit an `Instant`.
pub(crate) fn deadline_after(start: Instant, d: Duration) -> Instant {
    start
        .checked_add(d)
        .unwrap_or_else(|| start + Duration::from_secs(10 * 365 * 86_400))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_cut_at_character_boundaries() {
        let mut s = "错误".repeat(400);
        truncate_chars(&mut s, 500);
        assert_eq!(s.chars().count(), 500);
        let mut short = "ok".to_string();
        truncate_chars(&mut short, 500);
        assert_eq!(short, "ok");
        let mut o = Sample::default();
        fail(&mut o, "http_500", "服务器内部错误".repeat(100));
        assert_eq!(o.error.unwrap().message.chars().count(), 500);
    }
}
