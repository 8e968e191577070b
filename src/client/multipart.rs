//! `multipart/form-data` bodies (RFC 7578), as aiohttp's `FormData` writes the
//! `openai-audio` request: the file part first, then one text part per field.
//!
//! The boundary is fixed, so a request's content type is known without its body; a
//! clip that contains it is refused when its dataset is read ([`contains_boundary`]).

/// The boundary between parts.
pub const BOUNDARY: &str = "benchplan-form-8c1e4b7f0d2a9635";

/// The content type of every form this module writes.
pub const CONTENT_TYPE: &str = "multipart/form-data; boundary=benchplan-form-8c1e4b7f0d2a9635";

/// Whether `data` holds the boundary (and so cannot be a part of a form).
pub fn contains_boundary(data: &[u8]) -> bool {
    memchr::memmem::find(data, BOUNDARY.as_bytes()).is_some()
}

/// A form being written.
pub struct Form {
    buf: Vec<u8>,
}

impl Form {
    /// An empty form with room for `capacity` bytes of parts.
    pub fn with_capacity(capacity: usize) -> Form {
        Form {
            buf: Vec::with_capacity(capacity + 512),
        }
    }

    fn head(&mut self, name: &str, filename: Option<&str>) {
        self.buf.extend_from_slice(b"--");
        self.buf.extend_from_slice(BOUNDARY.as_bytes());
        self.buf
            .extend_from_slice(b"\r\ncontent-disposition: form-data; name=\"");
        self.buf.extend_from_slice(quoted(name).as_bytes());
        self.buf.push(b'"');
        if let Some(f) = filename {
            self.buf.extend_from_slice(b"; filename=\"");
            self.buf.extend_from_slice(quoted(f).as_bytes());
            self.buf.push(b'"');
        }
        self.buf.extend_from_slice(b"\r\n");
    }

    /// A file part.
    pub fn file(&mut self, name: &str, filename: &str, content_type: &str, data: &[u8]) {
        self.head(name, Some(filename));
        self.buf.extend_from_slice(b"content-type: ");
        self.buf.extend_from_slice(content_type.as_bytes());
        self.buf.extend_from_slice(b"\r\n\r\n");
        self.buf.extend_from_slice(data);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// A text field.
    pub fn text(&mut self, name: &str, value: &str) {
        self.head(name, None);
        self.buf.extend_from_slice(b"\r\n");
        self.buf.extend_from_slice(value.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// The body, closed by the final boundary.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.extend_from_slice(b"--");
        self.buf.extend_from_slice(BOUNDARY.as_bytes());
        self.buf.extend_from_slice(b"--\r\n");
        self.buf
    }
}

/// A name as a quoted-string value: quotes and line breaks percent-encoded, as
/// browsers and aiohttp do.
fn quoted(s: &str) -> String {
    s.replace('"', "%22")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_is_parts_between_boundaries() {
        let mut f = Form::with_capacity(3);
        f.file("file", "a \"b\".wav", "audio/wav", b"RIF");
        f.text("model", "m");
        let body = String::from_utf8(f.finish()).unwrap();
        let b = BOUNDARY;
        assert_eq!(
            body,
            format!(
                "--{b}\r\ncontent-disposition: form-data; name=\"file\"; filename=\"a %22b%22.wav\"\r\ncontent-type: audio/wav\r\n\r\nRIF\r\n\
                 --{b}\r\ncontent-disposition: form-data; name=\"model\"\r\n\r\nm\r\n--{b}--\r\n"
            )
        );
        assert!(CONTENT_TYPE.ends_with(BOUNDARY));
        assert!(contains_boundary(body.as_bytes()) && !contains_boundary(b"RIFF"));
    }
}
