//! Reading `multipart/form-data` request bodies (RFC 7578): the simulator's audio
//! endpoints take the clip and their options this way, as OpenAI's and vLLM's do.

use memchr::memmem;

/// One part of a form.
#[derive(Debug, PartialEq)]
pub struct Part<'a> {
    pub name: String,
    pub filename: Option<String>,
    pub data: &'a [u8],
}

/// The `boundary` parameter of a multipart content type.
pub fn boundary(content_type: &str) -> Option<&str> {
    let (kind, params) = content_type.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params.split(';').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"'))
            .filter(|b| !b.is_empty())
    })
}

/// The value of `key="…"` in a content-disposition header.
fn disposition_param(header: &str, key: &str) -> Option<String> {
    header.split(';').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k.trim().eq_ignore_ascii_case(key)).then(|| v.trim().trim_matches('"').to_string())
    })
}

/// The parts of `body`, split at `boundary`.
pub fn parse<'a>(body: &'a [u8], boundary: &str) -> Result<Vec<Part<'a>>, String> {
    let delim = format!("--{boundary}");
    let next_delim = format!("\r\n--{boundary}");
    let mut at = memmem::find(body, delim.as_bytes())
        .ok_or("the form has no part (its boundary never appears)")?
        + delim.len();
    let mut parts = Vec::new();
    loop {
        let rest = &body[at..];
        if rest.starts_with(b"--") {
            return Ok(parts);
        }
        let rest = rest
            .strip_prefix(b"\r\n")
            .ok_or("a form boundary is not followed by a line break")?;
        let head_end = memmem::find(rest, b"\r\n\r\n")
            .ok_or("a form part has no blank line after its headers")?;
        let head = std::str::from_utf8(&rest[..head_end])
            .map_err(|_| "a form part's headers are not UTF-8")?;
        let disposition = head
            .split("\r\n")
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-disposition")
                    .then_some(v)
            })
            .ok_or("a form part has no content-disposition")?;
        let name = disposition_param(disposition, "name").ok_or("a form part has no name")?;
        let filename = disposition_param(disposition, "filename");
        let data_start = head_end + 4;
        let len = memmem::find(&rest[data_start..], next_delim.as_bytes())
            .ok_or_else(|| format!("the form part `{name}` is not closed by a boundary"))?;
        parts.push(Part {
            name,
            filename,
            data: &rest[data_start..data_start + len],
        });
        // Past this part's data and the "\r\n--boundary" after it.
        at = body.len() - rest.len() + data_start + len + next_delim.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_and_their_names_come_back() {
        let body = b"preamble\r\n--xy\r\ncontent-disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\ncontent-type: audio/wav\r\n\r\nRIFF\r\n--x\r\n\r\n--xy\r\nContent-Disposition: form-data; name=model\r\n\r\nm\r\n--xy--\r\n";
        let parts = parse(body, "xy").unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (parts[0].name.as_str(), parts[0].filename.as_deref()),
            ("file", Some("a.wav"))
        );
        assert_eq!(parts[0].data, b"RIFF\r\n--x\r\n");
        assert_eq!(
            (parts[1].name.as_str(), parts[1].data),
            ("model", &b"m"[..])
        );
        assert_eq!(
            boundary("multipart/form-data; charset=utf-8; boundary=\"xy\""),
            Some("xy")
        );
        assert_eq!(boundary("application/json"), None);
        assert!(
            parse(
                b"--xy\r\ncontent-disposition: form-data; name=\"a\"\r\n\r\nno end",
                "xy"
            )
            .is_err()
        );
        assert!(parse(b"nothing", "xy").is_err());
    }
}
