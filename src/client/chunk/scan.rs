//! The fast path of [`super::parse`]: one pass over the bytes of a common
//! chunk that picks out the few fields that matter, with no parser state machine and
//! no allocation. It answers only when it is sure its answer is the one serde's full
//! parse gives; anything unusual (an escape in any string, a number where a truthy
//! value is read, a non-null `usage`, `error` or `metrics`, a duplicate field, a second
//! choice that is not plain JSON, deep nesting, invalid UTF-8 anywhere) makes it
//! return `None`, and the full parse decides. The differential tests below and the
//! fuzz target hold it to that.
//!
//! Why: serde's derive walks every field through visitor calls; on a 10 ms stream at
//! 1,000 streams that parse was the largest user-space cost per chunk after the
//! runtime itself (see the before/after table in `benches/client_overhead.rs`).

use std::borrow::Cow;

use super::model::{Choice, Chunk, Delta, FirstChoice, Truthy};

/// Nesting deeper than this goes to the full parse (serde_json's own limit is 128).
const MAX_DEPTH: u32 = 64;

/// The bytes that end the plain part of a JSON string: the quote, a backslash, and the
/// control characters JSON does not allow unescaped.
const STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = true;
        c += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

/// The chunk in `data` when it is a plain one (see the module docs); None sends it to
/// the full parse.
pub fn scan(data: &[u8]) -> Option<Chunk<'_>> {
    // Stricter than serde (which checks UTF-8 only in the strings it keeps): any
    // invalid byte goes to the full parse, which then decides.
    if !data.is_ascii() {
        std::str::from_utf8(data).ok()?;
    }
    let mut s = Scan { b: data, i: 0 };
    let c = s.chunk()?;
    s.ws();
    (s.i == s.b.len()).then_some(c)
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// After whitespace: true at `close` (consumed), false at a comma (consumed).
    fn end_or_comma(&mut self, close: u8) -> Option<bool> {
        self.ws();
        let c = self.peek()?;
        self.i += 1;
        match c {
            b',' => Some(false),
            c if c == close => Some(true),
            _ => None,
        }
    }

    /// A string without escapes: its contents. An escape or a control character (which
    /// JSON forbids unescaped) is left to the full parse.
    fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        // Chunk strings are short: a table lookup per byte beats a vectorised search's
        // set-up.
        let len = self.b[start..].iter().position(|&c| STOP[c as usize])?;
        let span = &self.b[start..start + len];
        if self.b[start + len] != b'"' {
            return None; // an escape or a control character
        }
        self.i = start + len + 1;
        // SAFETY: `scan` checked that the whole input is UTF-8, and a span between two
        // ASCII quotes starts and ends on character boundaries.
        Some(unsafe { std::str::from_utf8_unchecked(span) })
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// A number as JSON's grammar has it (`-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?`).
    fn number(&mut self) -> Option<()> {
        let digits = |s: &mut Self| {
            let n = s.b[s.i..].iter().take_while(|c| c.is_ascii_digit()).count();
            s.i += n;
            (n > 0).then_some(())
        };
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => digits(self)?,
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            digits(self)?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            digits(self)?;
        }
        Some(())
    }

    /// Whether the next value is null (consumed) rather than something else (left).
    fn null(&mut self) -> Option<bool> {
        self.ws();
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(true);
        }
        Some(false)
    }

    /// Skips any JSON value, checking it as it goes.
    fn skip(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => self.object(|s, _| s.skip(depth + 1)),
            b'[' => self.array(|s| s.skip(depth + 1)),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        }
    }

    /// The members of an object, each handed to `member` with its key; `member` reads
    /// the value.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            member(self, key)?;
            if self.end_or_comma(b'}')? {
                return Some(());
            }
        }
    }

    /// The items of an array, each read by `item`.
    fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        loop {
            item(self)?;
            if self.end_or_comma(b']')? {
                return Some(());
            }
        }
    }

    /// Python's truthiness of the next value (see [`Truthy`]); numbers are left to the
    /// full parse.
    fn truthy(&mut self) -> Option<Truthy> {
        self.ws();
        Some(Truthy(match self.peek()? {
            b'n' => {
                self.literal(b"null")?;
                false
            }
            b't' => {
                self.literal(b"true")?;
                true
            }
            b'f' => {
                self.literal(b"false")?;
                false
            }
            b'"' => !self.string()?.is_empty(),
            b'{' | b'[' => {
                let start = self.i;
                self.skip(1)?;
                // Empty when nothing but whitespace sits between the brackets.
                self.b[start + 1..self.i - 1]
                    .iter()
                    .any(|c| !matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
            }
            _ => return None,
        }))
    }

    /// A string or null.
    fn text(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.null()? {
            return Some(None);
        }
        self.string().map(|s| Some(Cow::Borrowed(s)))
    }

    fn chunk(&mut self) -> Option<Chunk<'a>> {
        let mut c = Chunk::default();
        let mut seen = [false; 5];
        const KEYS: [&str; 5] = ["choices", "usage", "error", "metrics", "timings"];
        self.object(|s, key| {
            let Some(slot) = slot(&mut seen, &KEYS, key)? else {
                return s.skip(1);
            };
            if slot == 0 {
                c.choices = s.choices()?;
                Some(())
            } else {
                // null is "absent" for all four; anything else is rare enough (once
                // per request at most) to read with the full parse.
                s.null()?.then_some(())
            }
        })?;
        Some(c)
    }

    fn choices(&mut self) -> Option<FirstChoice<'a>> {
        if self.null()? {
            return Some(FirstChoice::default());
        }
        // The first choice is read; the others are only checked.
        let mut first = None;
        self.array(|s| match first {
            None => s.choice().map(|c| first = Some(c)),
            Some(_) => s.skip(2),
        })?;
        Some(FirstChoice {
            present: first.is_some(),
            first,
        })
    }

    fn choice(&mut self) -> Option<Choice<'a>> {
        let mut c = Choice::default();
        let mut seen = [false; 2];
        self.object(|s, key| match slot(&mut seen, &["text", "delta"], key)? {
            Some(0) => {
                c.text = s.text()?;
                Some(())
            }
            Some(_) => {
                if !s.null()? {
                    c.delta = Some(s.delta()?);
                }
                Some(())
            }
            None => s.skip(3),
        })?;
        Some(c)
    }

    fn delta(&mut self) -> Option<Delta<'a>> {
        let mut d = Delta::default();
        let mut seen = [false; 6];
        const KEYS: [&str; 6] = [
            "content",
            "role",
            "reasoning",
            "tool_calls",
            "function_call",
            "reasoning_content",
        ];
        self.object(|s, key| {
            let Some(slot) = slot(&mut seen, &KEYS, key)? else {
                return s.skip(4);
            };
            match slot {
                0 => d.content = s.text()?,
                1 => d.role = s.truthy()?,
                2 => d.reasoning = s.truthy()?,
                3 => d.tool_calls = s.truthy()?,
                4 => d.function_call = s.truthy()?,
                _ => d.reasoning_content = s.truthy()?,
            }
            Some(())
        })?;
        Some(d)
    }
}

/// Which of `keys` `key` is: `Some(Some(i))` the first time it is seen, `Some(None)`
/// for a key not in `keys`, and `None` for a duplicate, which serde's derive rejects,
/// so the full parse must say so.
fn slot(seen: &mut [bool], keys: &[&str], key: &str) -> Option<Option<usize>> {
    match keys.iter().position(|k| *k == key) {
        None => Some(None),
        Some(i) => (!std::mem::replace(&mut seen[i], true)).then_some(Some(i)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::chunk::full_parse;

    /// Chunks real servers send, and the unusual shapes the scan must hand over.
    const CORPUS: &[&str] = &[
        r#"{"id":"cmpl-1","object":"text_completion","created":1733,"model":"m","choices":[{"index":0,"text":" hi","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}"#,
        r#"{"id":"x","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}"#,
        r#"{"choices":[{"delta":{"reasoning":"Let"}}]}"#,
        r#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[ ]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}"#,
        r#"{"choices":[{"delta":{"function_call":{}}}]}"#,
        r#"{"choices":[{"delta":{"function_call":{"name":"f"}}}]}"#,
        r#"{"choices":[{"delta":{"role":null,"content":""}}]}"#,
        r#"{"choices":[{"delta":{"role":"","content":""}}]}"#,
        r#"{"choices":[{"delta":{"role":0,"content":""}}]}"#,
        r#"{"choices":[{"delta":{"content":"a\"b"}}]}"#,
        r#"{"choices":[{"delta":{"content":"line\nnext"}}]}"#,
        r#"{"choices":[{"text":""}]}"#,
        r#"{"choices":[{"text":null}]}"#,
        r#"{"choices":[{"text":5}]}"#,
        r#"{"choices":[{"text":"a"},{"text":"b","x":[1,2,{"y":-0.5e+3}]}]}"#,
        r#"{"choices":[{"text":"a"},"b"]}"#,
        r#"{"choices":["a"]}"#,
        r#"{"choices":null,"usage":null}"#,
        r#"{"choices":[{"text":"a"}],"choices":[{"text":"b"}]}"#,
        r#"{"choices":[{"text":"a","text":"b"}]}"#,
        r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
        r#"{"error":{"message":"boom","code":500}}"#,
        r#"{"error":null,"choices":[{"text":"ok"}]}"#,
        r#"{"metrics":{"queue_time_ms":12.5},"choices":[{"text":"x"}]}"#,
        r#" { "choices" : [ { "text" : "spaced" } ] } "#,
        r#"{"choices":[{"text":"日本語"}]}"#,
        r#"{"ch\u006fices":[{"text":"escaped key"}]}"#,
        r#"{"choices":[{"text":"x"}]} trailing"#,
        r#"{"choices":[{"text":"x"}],}"#,
        r#"{"choices":[{"text":"x"}]"#,
        r#"{"n":01,"choices":[]}"#,
        r#"{"n":1.,"choices":[]}"#,
        r#"{"n":-,"choices":[]}"#,
        r#"{"n":1e5,"m":-0.25E-2,"choices":[{"text":"n"}]}"#,
        r#"{"n":tru,"choices":[]}"#,
        r#"{"n":[1,],"choices":[]}"#,
        r#"[{"text":"a"}]"#,
        r#""just a string""#,
        r#"{}"#,
        r#"{"choices":[{}]}"#,
        r#"{"choices":[{"delta":null}]}"#,
        "{\"choices\":[{\"text\":\"tab\there\"}]}",
    ];

    /// Where the scan answers, the full parse gives the same chunk.
    fn agrees(data: &[u8]) -> bool {
        match scan(data) {
            None => false,
            Some(c) => {
                let full = full_parse(data).unwrap_or_else(|e| {
                    panic!(
                        "the scan read {:?} which the full parse rejects: {e}",
                        String::from_utf8_lossy(data)
                    )
                });
                assert_eq!(c, full, "{:?}", String::from_utf8_lossy(data));
                true
            }
        }
    }

    #[test]
    fn the_scan_answers_only_as_the_full_parse_would() {
        let answered = CORPUS.iter().filter(|c| agrees(c.as_bytes())).count();
        // The common shapes take the fast path; the test would pass vacuously otherwise.
        for common in &CORPUS[..4] {
            assert!(scan(common.as_bytes()).is_some(), "{common}");
        }
        assert!(answered >= 20, "only {answered} answered");
        for unusual in [
            r#"{"choices":[{"delta":{"content":"a\"b"}}]}"#,
            r#"{"x":[1,],"choices":[]}"#,
            r#"{"choices":[{"text":"a"}],"choices":[]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5}}"#,
        ] {
            assert!(scan(unusual.as_bytes()).is_none(), "{unusual}");
        }
    }

    #[test]
    fn mutated_chunks_never_make_the_scan_disagree() {
        // A deterministic xorshift, so a failure reproduces.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        const BYTES: &[u8] = b"{}[]\":,0123456789.-+eEtrufalsn \\\t\n\x01\xff\xc3";
        let mut answered = 0;
        for _ in 0..20_000 {
            let base = CORPUS[(next() % CORPUS.len() as u64) as usize].as_bytes();
            let mut m = base.to_vec();
            for _ in 0..1 + next() % 3 {
                let at = (next() % (m.len() as u64 + 1)) as usize;
                let b = BYTES[(next() % BYTES.len() as u64) as usize];
                match next() % 3 {
                    0 if at < m.len() => m[at] = b,
                    1 if at < m.len() => {
                        m.remove(at);
                    }
                    _ => m.insert(at, b),
                }
            }
            answered += usize::from(agrees(&m));
        }
        assert!(
            answered > 1_000,
            "only {answered} mutants took the fast path"
        );
    }
}
