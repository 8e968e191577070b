//! Server-sent events framing, per the SSE spec: line-based (LF, CRLF or CR), any
//! number of `data:` lines per event (with or without the space), comments, `event:`
//! names, and events split across reads or packed several to a read.
//!
//! The parser copies only the partial line that straddles two reads; complete
//! events are handed to the caller as a borrowed slice. A line or an event larger
//! than the parser's limit is an error, so a server that never sends a newline cannot
//! grow its buffers without bound.

/// One dispatched event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event:` name, when one was given (for example `error`).
    pub event: Option<&'a [u8]>,
    pub data: &'a [u8],
}

/// A line or event grew past the parser's limit (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge(pub usize);

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "an SSE line or event exceeds {} bytes", self.0)
    }
}

#[derive(Debug)]
pub struct SseParser {
    /// The largest line or event accepted, in bytes.
    limit: usize,
    /// Bytes of an incomplete line carried over to the next read.
    pending: Vec<u8>,
    /// The data lines of the event being assembled.
    data: Vec<u8>,
    has_data: bool,
    event: Vec<u8>,
    /// The last byte seen was a CR, so a leading LF in the next read ends nothing.
    after_cr: bool,
}

impl Default for SseParser {
    fn default() -> Self {
        SseParser::with_limit(usize::MAX)
    }
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// A parser that refuses lines and events longer than `limit` bytes.
    pub fn with_limit(limit: usize) -> SseParser {
        SseParser {
            limit,
            pending: Vec::new(),
            data: Vec::new(),
            has_data: false,
            event: Vec::new(),
            after_cr: false,
        }
    }

    /// Feeds bytes as they arrive; calls `on_event` for every complete event.
    pub fn feed(
        &mut self,
        mut bytes: &[u8],
        on_event: &mut impl FnMut(SseEvent<'_>),
    ) -> Result<(), TooLarge> {
        if self.after_cr {
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
            self.after_cr = false;
        }
        let mut pending = std::mem::take(&mut self.pending);
        let mut start = 0;
        while let Some(i) = memchr::memchr2(b'\n', b'\r', &bytes[start..]) {
            let end = start + i;
            if pending.is_empty()
                && let Some(next) = self.whole_event(bytes, start, end, on_event)
            {
                start = next;
                continue;
            }
            if pending.is_empty() {
                self.line(&bytes[start..end], on_event)?;
            } else {
                if pending.len() + (end - start) > self.limit {
                    return Err(TooLarge(self.limit));
                }
                pending.extend_from_slice(&bytes[start..end]);
                self.line(&pending, on_event)?;
                pending.clear();
            }
            let cr = bytes[end] == b'\r';
            start = end + 1;
            if cr {
                match bytes.get(start) {
                    Some(b'\n') => start += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        if pending.len() + (bytes.len() - start) > self.limit {
            return Err(TooLarge(self.limit));
        }
        pending.extend_from_slice(&bytes[start..]);
        self.pending = pending;
        Ok(())
    }

    /// The common frame, `data: …` and a blank line, read in place: the event is handed
    /// over from `bytes` without being copied into `data` first. `start..end` is the
    /// line; returns where the next line starts, or None when this is not such a frame
    /// (the line-by-line path then reads it, with the same result).
    fn whole_event(
        &mut self,
        bytes: &[u8],
        start: usize,
        end: usize,
        on_event: &mut impl FnMut(SseEvent<'_>),
    ) -> Option<usize> {
        if self.has_data || !self.event.is_empty() {
            return None;
        }
        let line = &bytes[start..end];
        let value = line.strip_prefix(b"data:")?;
        let value = value.strip_prefix(b" ").unwrap_or(value);
        let rest = &bytes[end..];
        let next = if rest.starts_with(b"\n\n") {
            end + 2
        } else if rest.starts_with(b"\r\n\r\n") {
            end + 4
        } else {
            return None;
        };
        if line.len() > self.limit || value.len() + 1 > self.limit {
            return None; // the line-by-line path reports it
        }
        on_event(SseEvent {
            event: None,
            data: value,
        });
        Some(next)
    }

    /// The stream ended: a last line without a newline counts, and an event with data
    /// but no blank line after it is still delivered (vLLM accepts such a final event).
    pub fn finish(&mut self, on_event: &mut impl FnMut(SseEvent<'_>)) -> Result<(), TooLarge> {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.line(&line, on_event)?;
        }
        self.dispatch(on_event);
        Ok(())
    }

    fn line(
        &mut self,
        line: &[u8],
        on_event: &mut impl FnMut(SseEvent<'_>),
    ) -> Result<(), TooLarge> {
        if line.is_empty() {
            self.dispatch(on_event);
            return Ok(());
        }
        if line.len() > self.limit {
            return Err(TooLarge(self.limit));
        }
        if line[0] == b':' {
            return Ok(()); // a comment or keep-alive
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.data.len() + value.len() + 1 > self.limit {
                    return Err(TooLarge(self.limit));
                }
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            _ => {} // id, retry and unknown fields do not matter here
        }
        Ok(())
    }

    fn dispatch(&mut self, on_event: &mut impl FnMut(SseEvent<'_>)) {
        if self.has_data {
            let event = (!self.event.is_empty()).then_some(self.event.as_slice());
            on_event(SseEvent {
                event,
                data: &self.data,
            });
        }
        self.data.clear();
        self.event.clear();
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<(Option<String>, String)> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        let mut push = |e: SseEvent<'_>| {
            out.push((
                e.event.map(|e| String::from_utf8_lossy(e).into_owned()),
                String::from_utf8_lossy(e.data).into_owned(),
            ))
        };
        for c in chunks {
            p.feed(c, &mut push).unwrap();
        }
        p.finish(&mut push).unwrap();
        out
    }

    fn data(chunks: &[&[u8]]) -> Vec<String> {
        all(chunks).into_iter().map(|(_, d)| d).collect()
    }

    const STREAM: &[u8] = b"data: {\"a\":1}\n\n: keep-alive\n\ndata:{\"b\":2}\r\n\r\nevent: error\ndata: {\"error\":\"x\"}\n\ndata: [DONE]\n\n";

    fn expected() -> Vec<(Option<String>, String)> {
        vec![
            (None, "{\"a\":1}".into()),
            (None, "{\"b\":2}".into()),
            (Some("error".into()), "{\"error\":\"x\"}".into()),
            (None, "[DONE]".into()),
        ]
    }

    #[test]
    fn whole_stream_in_one_read() {
        assert_eq!(all(&[STREAM]), expected());
    }

    #[test]
    fn split_at_every_byte_position() {
        for i in 0..=STREAM.len() {
            assert_eq!(
                all(&[&STREAM[..i], &STREAM[i..]]),
                expected(),
                "split at {i}"
            );
        }
        for i in 0..STREAM.len() {
            for j in i..=STREAM.len() {
                assert_eq!(
                    all(&[&STREAM[..i], &STREAM[i..j], &STREAM[j..]]),
                    expected(),
                    "split at {i} and {j}"
                );
            }
        }
    }

    #[test]
    fn byte_by_byte() {
        let bytes: Vec<&[u8]> = STREAM.chunks(1).collect();
        assert_eq!(all(&bytes), expected());
    }

    #[test]
    fn crlf_and_lone_cr_line_endings() {
        assert_eq!(data(&[b"data: x\r\n\r\ndata: y\r\r"]), vec!["x", "y"]);
        assert_eq!(data(&[b"data: x\r", b"\n\r", b"\n"]), vec!["x"]);
    }

    #[test]
    fn multi_line_data_joins_with_newlines() {
        assert_eq!(data(&[b"data: a\ndata: b\ndata\n\n"]), vec!["a\nb\n"]);
    }

    #[test]
    fn a_final_event_without_blank_line_is_delivered() {
        assert_eq!(
            data(&[b"data: {\"a\":1}\n\ndata: [DONE]"]),
            vec!["{\"a\":1}", "[DONE]"]
        );
        assert_eq!(data(&[b"data: x\n"]), vec!["x"]);
        assert!(data(&[b": only a comment\n\n"]).is_empty());
    }

    #[test]
    fn lines_and_events_past_the_limit_are_refused() {
        let mut p = SseParser::with_limit(16);
        let mut n = 0;
        let mut count = |_: SseEvent<'_>| n += 1;
        // An endless line, fed in pieces, fails once it passes the limit.
        assert!(p.feed(b"data: 0123456", &mut count).is_ok());
        assert_eq!(p.feed(b"789abcdef", &mut count), Err(TooLarge(16)));
        // An event of many short data lines is bounded too.
        let mut p = SseParser::with_limit(16);
        assert_eq!(
            p.feed(b"data: 12345\ndata: 12345\ndata: 12345\n", &mut count),
            Err(TooLarge(16))
        );
        // A whole frame in one read is held to the same limit.
        let mut p = SseParser::with_limit(16);
        assert_eq!(
            p.feed(b"data: 0123456789abcdef\n\n", &mut count),
            Err(TooLarge(16))
        );
        // Within the limit, nothing changes.
        let mut p = SseParser::with_limit(16);
        assert!(p.feed(b"data: 0123456789\n\n", &mut count).is_ok());
        assert_eq!(n, 1);
    }
}
