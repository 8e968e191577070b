//! The request-id header a request carries: vLLM's `x-request-id: {prefix}{n}` by
//! default; a UUID, no header, or another header name where the request shape says so
//! (llama-cpp-python's server answers 400 to an `x-request-id` that is not a UUID).

use std::borrow::Cow;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::plan::shape::{RequestIdForm, RequestShape};

/// How a target words its request ids.
#[derive(Debug, Clone, Default)]
pub struct RequestIds {
    pub form: Option<RequestIdForm>,
    /// A header other than `x-request-id`.
    pub header: Option<HeaderName>,
}

/// What a request sends: the `x-request-id` value (the clients' fast path, borrowed
/// as given in vLLM's wording: no copy per request), or the id under another name among
/// the extra headers.
pub struct Worded<'a> {
    pub x_request_id: Option<Cow<'a, str>>,
    pub extra: Option<HeaderMap>,
}

impl RequestIds {
    /// The ids of a request shape; an invalid header name is refused.
    pub fn of(shape: &RequestShape) -> Result<RequestIds, String> {
        let header = match shape.request_id_header.as_deref() {
            None => None,
            Some(h) if h.eq_ignore_ascii_case("x-request-id") => None,
            Some(h) => Some(HeaderName::from_bytes(h.as_bytes()).map_err(|_| {
                format!("request_shape.request_id_header: `{h}` is not a valid header name")
            })?),
        };
        Ok(RequestIds {
            form: shape.request_id,
            header,
        })
    }

    /// The headers that carry `id` (the run's `{prefix}{n}`) in this wording.
    pub fn word<'a>(&self, id: Option<&'a str>, extra: Option<HeaderMap>) -> Worded<'a> {
        let value = match (id, self.form) {
            (None, _) | (_, Some(RequestIdForm::None)) => None,
            (Some(id), Some(RequestIdForm::Uuid)) => Some(Cow::Owned(uuid_for(id))),
            (Some(id), _) => Some(Cow::Borrowed(id)),
        };
        match (&self.header, value) {
            (Some(name), Some(v)) => {
                let mut extra = extra.unwrap_or_default();
                if let Ok(v) = HeaderValue::from_str(&v) {
                    extra.insert(name.clone(), v);
                }
                Worded {
                    x_request_id: None,
                    extra: Some(extra),
                }
            }
            (_, value) => Worded {
                x_request_id: value,
                extra,
            },
        }
    }
}

/// A version-4 style UUID drawn from `id` and this process: distinct for the distinct
/// ids of a run, and different in every run.
pub fn uuid_for(id: &str) -> String {
    use std::sync::OnceLock;
    static SALT: OnceLock<u64> = OnceLock::new();
    let salt = *SALT.get_or_init(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        t ^ u64::from(std::process::id()).rotate_left(32)
    });
    let mut h = crate::hash::FnvWriter(salt);
    h.update(id.as_bytes());
    let hi = h.0;
    h.update(b"\x01");
    let lo = crate::hash::fnv1a64(&h.0.to_le_bytes()) ^ hi.rotate_left(17);
    let mut b = ((u128::from(hi) << 64) | u128::from(lo)).to_be_bytes();
    b[6] = (b[6] & 0x0f) | 0x40; // version 4
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
    let mut out = String::with_capacity(36);
    for (i, x) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        use std::fmt::Write;
        let _ = write!(out, "{x:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_well_formed_and_distinct() {
        let a = uuid_for("benchplan-1-0");
        let b = uuid_for("benchplan-1-1");
        assert_ne!(a, b);
        assert_eq!(a, uuid_for("benchplan-1-0"));
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"));
    }

    #[test]
    fn wording_follows_the_shape() {
        let ids = |form, header: Option<&str>| {
            RequestIds::of(&RequestShape {
                request_id: form,
                request_id_header: header.map(str::to_string),
                ..RequestShape::default()
            })
            .unwrap()
        };
        let w = ids(None, None).word(Some("p-1"), None);
        assert_eq!(w.x_request_id.as_deref(), Some("p-1"));
        assert!(w.extra.is_none());
        let w = ids(Some(RequestIdForm::None), None).word(Some("p-1"), None);
        assert!(w.x_request_id.is_none() && w.extra.is_none());
        let w = ids(Some(RequestIdForm::Uuid), Some("X-Correlation-Id")).word(Some("p-1"), None);
        assert!(w.x_request_id.is_none());
        assert_eq!(
            w.extra.unwrap()["x-correlation-id"].to_str().unwrap(),
            uuid_for("p-1")
        );
        assert!(
            RequestIds::of(&RequestShape {
                request_id_header: Some("bad header".into()),
                ..RequestShape::default()
            })
            .is_err()
        );
    }
}
