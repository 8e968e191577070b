//! `Content-Encoding` of answers, decoded as vLLM's client (aiohttp) decodes them:
//! `gzip`, `x-gzip` and `deflate` (zlib-wrapped, or raw as some servers send it);
//! `identity` is none. Any other encoding (`br`, `zstd`, …) is refused by name: its
//! bytes would reach the SSE parser as garbage. benchplan asks for no encoding (no
//! `Accept-Encoding`), so only a proxy or server that compresses unasked sends one.

use std::io::Write;

use flate2::write::{DeflateDecoder, GzDecoder, ZlibDecoder};

/// Runs `$step` on whichever decoder `$self` holds, then moves what it decoded to
/// `$out` (the three flate2 writers share no trait for `try_finish` and `get_mut`).
macro_rules! each {
    ($self:expr, $d:ident => $step:expr, $out:expr) => {{
        let bad = |e: std::io::Error| format!("the compressed body does not decode: {e}");
        let plain = match $self {
            Decoder::Gzip($d) => {
                $step.map_err(bad)?;
                $d.get_mut()
            }
            Decoder::Zlib($d) => {
                $step.map_err(bad)?;
                $d.get_mut()
            }
            Decoder::Raw($d) => {
                $step.map_err(bad)?;
                $d.get_mut()
            }
            Decoder::Deflate => unreachable!("chosen by the first bytes"),
        };
        $out.append(plain);
        Ok(())
    }};
}

/// A body decoder fed as bytes arrive.
pub enum Decoder {
    Gzip(GzDecoder<Vec<u8>>),
    Zlib(ZlibDecoder<Vec<u8>>),
    Raw(DeflateDecoder<Vec<u8>>),
    /// `deflate`, before its first byte says whether a zlib header wraps it.
    Deflate,
}

/// The decoder for a `Content-Encoding` value: None for no encoding, an error naming
/// an encoding benchplan cannot decode.
pub fn decoder(encoding: Option<&str>) -> Result<Option<Decoder>, String> {
    let Some(e) = encoding.map(|e| e.trim().to_ascii_lowercase()) else {
        return Ok(None);
    };
    match e.as_str() {
        "" | "identity" => Ok(None),
        "gzip" | "x-gzip" => Ok(Some(Decoder::Gzip(GzDecoder::new(Vec::new())))),
        "deflate" => Ok(Some(Decoder::Deflate)),
        other => Err(format!(
            "the server sent the body with Content-Encoding: {}, which benchplan does not decode (gzip and deflate are decoded; turn the compression off on the server or proxy)",
            other.chars().take(40).collect::<String>().escape_debug()
        )),
    }
}

impl Decoder {
    /// Decodes `input`, appending the plain bytes to `out`.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        if input.is_empty() {
            return Ok(());
        }
        if let Decoder::Deflate = self {
            // A zlib stream starts with CMF 0x78 (deflate, 32 KiB window); else raw.
            *self = if input[0] == 0x78 {
                Decoder::Zlib(ZlibDecoder::new(Vec::new()))
            } else {
                Decoder::Raw(DeflateDecoder::new(Vec::new()))
            };
        }
        // A write decoder keeps output back until flushed: each read's bytes are
        // decoded and handed on at once (an event must not wait for the next read).
        each!(self, d => d.write_all(input).and_then(|()| d.flush()), out)
    }

    /// The end of the body: an error when the compressed stream is cut short.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), String> {
        if let Decoder::Deflate = self {
            return Ok(()); // nothing arrived
        }
        each!(self, d => d.try_finish(), out)
    }
}

/// `body` decoded whole as `encoding` says.
pub fn decode_all(encoding: Option<&str>, body: Vec<u8>) -> Result<Vec<u8>, String> {
    match decoder(encoding)? {
        None => Ok(body),
        Some(mut d) => {
            let mut out = Vec::with_capacity(body.len() * 4);
            d.feed(&body, &mut out)?;
            d.finish(&mut out)?;
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};

    fn pieces(mut d: Decoder, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for part in bytes.chunks(3) {
            d.feed(part, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn gzip_and_both_deflates_decode_in_pieces() {
        let text = b"data: {\"choices\":[{\"text\":\"hi\"}]}\n\n".repeat(20);
        let mut g = GzEncoder::new(Vec::new(), Compression::default());
        g.write_all(&text).unwrap();
        let gz = g.finish().unwrap();
        assert_eq!(pieces(decoder(Some("gzip")).unwrap().unwrap(), &gz), text);
        let mut z = ZlibEncoder::new(Vec::new(), Compression::default());
        z.write_all(&text).unwrap();
        let zl = z.finish().unwrap();
        assert_eq!(
            pieces(decoder(Some("Deflate")).unwrap().unwrap(), &zl),
            text
        );
        let mut r = DeflateEncoder::new(Vec::new(), Compression::default());
        r.write_all(&text).unwrap();
        let raw = r.finish().unwrap();
        assert_eq!(
            pieces(decoder(Some("deflate")).unwrap().unwrap(), &raw),
            text
        );
        assert_eq!(decode_all(Some("gzip"), gz).unwrap(), text);
    }

    #[test]
    fn identity_is_none_and_others_are_refused_by_name() {
        assert!(decoder(None).unwrap().is_none());
        assert!(decoder(Some("identity")).unwrap().is_none());
        let e = decoder(Some("br")).err().unwrap();
        assert!(e.contains("Content-Encoding: br"), "{e}");
        assert!(decode_all(Some("gzip"), b"not gzip".to_vec()).is_err());
    }
}
