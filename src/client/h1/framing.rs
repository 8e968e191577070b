//! How an HTTP/1.1 response body ends and how its bytes are decoded, apart from any
//! socket: the framing its head declares (`Content-Length`, `Transfer-Encoding:
//! chunked`, or the close), the chunked decoder that works in place, and a whole
//! answer parsed from its wire bytes.

use super::error::H1Error;

/// How the body's end is known, and the chunked decoder's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// `Content-Length`: bytes still to come.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked(ChunkState),
    /// Neither: the body ends when the server closes the connection.
    UntilClose,
    /// The body is complete.
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ChunkState {
    /// Reading a size line: hex digits so far, then (after `;`) extensions up to the LF.
    Size { size: u64, digits: u32, ext: bool },
    /// Data bytes still to come in this chunk.
    Data(u64),
    /// The CRLF after a chunk's data; `cr` once its CR was seen.
    DataEnd { cr: bool },
    /// Trailer lines after the last chunk, up to an empty line; `len` of the current one.
    Trailer { len: u32 },
}

pub(super) const SIZE_START: ChunkState = ChunkState::Size {
    size: 0,
    digits: 0,
    ext: false,
};

/// The body framing and whether the connection may serve another request afterwards.
pub(super) fn framing_of(
    status: u16,
    http11: bool,
    headers: &[httparse::Header<'_>],
) -> Result<(Framing, bool), String> {
    let mut keep_alive = http11;
    let mut chunked = false;
    let mut length = None;
    for h in headers {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = String::from_utf8_lossy(h.value)
                .split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("chunked"));
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value).unwrap_or("").trim();
            length = Some(
                v.parse::<u64>()
                    .map_err(|_| format!("invalid content-length {v:?}"))?,
            );
        } else if h.name.eq_ignore_ascii_case("connection") {
            let v = String::from_utf8_lossy(h.value).to_ascii_lowercase();
            if v.contains("close") {
                keep_alive = false;
            } else if v.contains("keep-alive") {
                keep_alive = true;
            }
        }
    }
    Ok(if status == 204 || status == 304 {
        (Framing::Done, keep_alive)
    } else if chunked {
        (Framing::Chunked(SIZE_START), keep_alive)
    } else if let Some(n) = length {
        (Framing::Length(n), keep_alive)
    } else {
        (Framing::UntilClose, false)
    })
}

/// Decodes as much of `input` as the framing allows, appending body bytes to `out`.
/// Returns the bytes consumed and the new state.
pub(super) fn decode_into(
    framing: Framing,
    input: &[u8],
    out: &mut Vec<u8>,
) -> Result<(usize, Framing), H1Error> {
    match framing {
        Framing::Done => Ok((0, Framing::Done)),
        Framing::UntilClose => {
            out.extend_from_slice(input);
            Ok((input.len(), framing))
        }
        Framing::Length(left) => {
            let take = (left as usize).min(input.len());
            out.extend_from_slice(&input[..take]);
            let left = left - take as u64;
            let next = if left == 0 {
                Framing::Done
            } else {
                Framing::Length(left)
            };
            Ok((take, next))
        }
        Framing::Chunked(state) => {
            let (used, next) = decode_chunked(state, input, out)?;
            Ok((used, next.map_or(Framing::Done, Framing::Chunked)))
        }
    }
}

/// The chunked-transfer decoder (RFC 9112 §7.1). None once the last chunk and its
/// trailers are read.
pub(super) fn decode_chunked(
    mut state: ChunkState,
    input: &[u8],
    out: &mut Vec<u8>,
) -> Result<(usize, Option<ChunkState>), H1Error> {
    let bad = |what: &str| H1Error::Broken(format!("invalid chunked encoding: {what}"));
    let mut i = 0;
    while i < input.len() {
        match state {
            ChunkState::Size { size, digits, ext } => {
                let b = input[i];
                i += 1;
                if b == b'\n' {
                    if digits == 0 {
                        return Err(bad("a chunk size line without digits"));
                    }
                    state = if size == 0 {
                        ChunkState::Trailer { len: 0 }
                    } else {
                        ChunkState::Data(size)
                    };
                } else if ext || b == b'\r' {
                    // Extensions (and the CR before the LF) are skipped.
                } else if b == b';' || b == b' ' || b == b'\t' {
                    state = ChunkState::Size {
                        size,
                        digits,
                        ext: true,
                    };
                } else {
                    let d = (b as char)
                        .to_digit(16)
                        .ok_or_else(|| bad("a non-hex chunk size"))?;
                    if digits >= 15 {
                        return Err(bad("a chunk size too large"));
                    }
                    state = ChunkState::Size {
                        size: size * 16 + u64::from(d),
                        digits: digits + 1,
                        ext,
                    };
                }
            }
            ChunkState::Data(left) => {
                let take = (left as usize).min(input.len() - i);
                out.extend_from_slice(&input[i..i + take]);
                i += take;
                state = if take as u64 == left {
                    ChunkState::DataEnd { cr: false }
                } else {
                    ChunkState::Data(left - take as u64)
                };
            }
            ChunkState::DataEnd { cr } => {
                let b = input[i];
                i += 1;
                state = match (b, cr) {
                    (b'\r', false) => ChunkState::DataEnd { cr: true },
                    (b'\n', _) => SIZE_START,
                    _ => return Err(bad("no CRLF after a chunk's data")),
                };
            }
            ChunkState::Trailer { len } => {
                let b = input[i];
                i += 1;
                if b == b'\n' {
                    if len == 0 {
                        return Ok((i, None));
                    }
                    state = ChunkState::Trailer { len: 0 };
                } else if b != b'\r' {
                    state = ChunkState::Trailer { len: len + 1 };
                }
            }
        }
    }
    Ok((i, Some(state)))
}

/// Parses a whole response (head, then the body as its framing says) from `wire`
/// split into reads at `splits` (offsets, any order): the status and the body, or why
/// it is not one. The property tests and fuzz targets drive the real parser and chunked
/// decoder through this; it asserts the decoder's invariants as it goes.
pub fn parse_response(wire: &[u8], splits: &[usize]) -> Result<(u16, Vec<u8>), String> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut head = httparse::Response::new(&mut headers);
    let used = match head.parse(wire) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err("incomplete head".into()),
        Err(e) => return Err(format!("not HTTP/1.x: {e}")),
    };
    let status = head.code.unwrap_or(0);
    let (mut framing, _) = framing_of(status, head.version == Some(1), head.headers)?;
    let body = &wire[used..];
    let mut cuts: Vec<usize> = splits.iter().map(|s| s % (body.len() + 1)).collect();
    cuts.push(body.len());
    cuts.sort_unstable();
    let (mut out, mut pending, mut from) = (Vec::new(), Vec::new(), 0);
    for cut in cuts {
        pending.extend_from_slice(&body[from..cut]);
        from = cut;
        let before = out.len();
        let (n, next) = decode_into(framing, &pending, &mut out).map_err(|e| e.to_string())?;
        assert!(
            n <= pending.len(),
            "the decoder consumed more than it was given"
        );
        assert!(
            out.len() - before <= n,
            "the decoder made bytes from nothing"
        );
        pending.drain(..n);
        framing = next;
    }
    match framing {
        Framing::Done | Framing::UntilClose => Ok((status, out)),
        _ => Err("the body ended early".into()),
    }
}
