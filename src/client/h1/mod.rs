//! A small HTTP/1.1 client for plain-http benchmark traffic: the request's task sends
//! and reads the response head on its own socket; a streamed body is then read by the
//! stream reader thread on Linux (`reader`), elsewhere by the task, decoded in place.
//!
//! Why not reqwest here: hyper runs each connection as its own task and passes every
//! body frame to the request's task through a channel, so a streamed chunk costs two
//! task wake-ups and a channel hop. With paced streams (about one TCP read per token)
//! that hop was more than half of the client's CPU per chunk. Reading the socket
//! directly halves it, and each read carries the kernel's receive time of its bytes
//! (`rx_time`). reqwest still serves HTTPS and every side request.
//!
//! Scope: `POST` with a body, keep-alive connections in a per-target pool, responses
//! framed by `Transfer-Encoding: chunked`, `Content-Length` or connection close.
//! A pooled connection is checked before it is reused (a peek that sees the server's
//! FIN); a dead one is dropped and a new connection opened, inside the measured
//! request as vLLM's client would. Once a request's bytes are written it is never sent
//! again: a POST the server may have read is not retried. Through an HTTP proxy (the
//! environment's, as vLLM's client honours it; see `proxy`) a connection goes to the
//! proxy and requests name the whole URL (absolute form, RFC 9112 §3.2.2).

use std::io;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use reqwest::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HOST, HeaderMap, TRANSFER_ENCODING};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

mod error;
mod framing;
pub use error::H1Error;
pub use framing::parse_response;
use framing::{Framing, decode_into, framing_of};

/// Idle keep-alive connections to one `host:port`.
#[derive(Debug)]
pub struct Pool {
    /// The server's `host:port`, as the `Host` header names it.
    authority: String,
    /// Where connections go: the server, or the proxy in front of it.
    connect_to: String,
    /// Through a proxy: `http://host:port` before each path, and its credentials.
    via: Option<(String, Option<reqwest::header::HeaderValue>)>,
    addrs: Mutex<Option<Vec<SocketAddr>>>,
    idle: Mutex<Vec<Idle>>,
    connect_timeout: Duration,
}

/// An idle connection: in this runtime's reactor, or not yet (one the stream reader
/// handed back joins the reactor only when a request takes it, so a connection that is
/// never taken again costs no registration and no removal).
#[derive(Debug)]
enum Idle {
    Registered(TcpStream),
    Bare(std::net::TcpStream),
}

/// The parts of a plain-http URL a request needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    /// `host:port`, as sent in the `Host` header.
    pub authority: String,
    /// Path and query.
    pub path: String,
}

/// Splits an `http://` URL; None for anything else (HTTPS goes through reqwest).
pub fn parse_http_url(url: &str) -> Option<HttpUrl> {
    let u = reqwest::Url::parse(url).ok()?;
    if u.scheme() != "http" || !u.username().is_empty() || u.password().is_some() {
        return None;
    }
    // IPv6 literals keep their brackets here, as the Host header wants them.
    let host = u.host_str()?;
    let port = u.port_or_known_default()?;
    let mut path = u.path().to_string();
    if let Some(q) = u.query() {
        path.push('?');
        path.push_str(q);
    }
    Some(HttpUrl {
        authority: format!("{host}:{port}"),
        path,
    })
}

/// When a request went out: its start (before a connection is taken or opened, where
/// vLLM's clock starts), how long opening a connection took inside it, if it had to,
/// and when the write returned (on loopback, when the server's socket had the bytes).
#[derive(Debug, Clone, Copy)]
pub struct SendTimes {
    pub sent: Instant,
    pub connect: Option<Duration>,
    pub written: Option<Instant>,
}

/// One plain-http endpoint: its connection pool and request path.
#[derive(Debug)]
pub struct Endpoint {
    pub pool: Pool,
    pub path: String,
}

impl Endpoint {
    /// None unless `url` is plain http.
    pub fn for_url(url: &str) -> Option<Endpoint> {
        Endpoint::for_url_via(url, None)
    }

    /// An endpoint whose connections go through `via` (an HTTP proxy) when given.
    pub fn for_url_via(url: &str, via: Option<&crate::proxy::Via>) -> Option<Endpoint> {
        let u = parse_http_url(url)?;
        let mut pool = Pool::new(u.authority);
        if let Some(v) = via {
            pool.connect_to = v.authority.clone();
            pool.via = Some((format!("http://{}", pool.authority), v.auth.clone()));
        }
        Some(Endpoint { pool, path: u.path })
    }
}

impl Pool {
    pub fn new(authority: String) -> Pool {
        Pool {
            connect_to: authority.clone(),
            via: None,
            authority,
            addrs: Mutex::new(None),
            idle: Mutex::new(Vec::new()),
            connect_timeout: Duration::from_secs(30),
        }
    }

    /// Opens connections until `k` are idle in the pool (best effort), so TCP set-up is
    /// not measured as server latency.
    pub async fn prewarm(&self, k: usize) {
        let have = self.idle.lock().expect("pool lock").len();
        let Ok(addrs) = self.resolve().await else {
            return;
        };
        let mut opening = tokio::task::JoinSet::new();
        for _ in have..k {
            opening.spawn(connect(addrs.clone(), self.connect_timeout));
        }
        while let Some(r) = opening.join_next().await {
            if let Ok(Ok(s)) = r {
                self.put_idle(s);
            }
        }
    }

    async fn resolve(&self) -> Result<Vec<SocketAddr>, H1Error> {
        if let Some(a) = self.addrs.lock().expect("pool lock").clone() {
            return Ok(a);
        }
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(&self.connect_to)
            .await
            .map_err(|e| H1Error::Connection(format!("cannot resolve {}: {e}", self.connect_to)))?
            .collect();
        if addrs.is_empty() {
            return Err(H1Error::Connection(format!(
                "{} resolves to no address",
                self.connect_to
            )));
        }
        *self.addrs.lock().expect("pool lock") = Some(addrs.clone());
        Ok(addrs)
    }

    async fn connect(&self) -> Result<TcpStream, H1Error> {
        connect(self.resolve().await?, self.connect_timeout).await
    }

    /// An idle connection that is still open (the server may have closed some while
    /// they waited; those are dropped).
    fn take_idle(&self) -> Option<TcpStream> {
        loop {
            let idle = self.idle.lock().expect("pool lock").pop()?;
            match idle {
                Idle::Registered(s) if still_open(&s) => return Some(s),
                Idle::Bare(s) if still_open(&s) => {
                    if let Ok(s) = TcpStream::from_std(s) {
                        return Some(s);
                    }
                }
                _ => {} // closed while it waited: dropped
            }
        }
    }

    /// Idle connections in the pool now.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().expect("pool lock").len()
    }

    fn put_idle(&self, s: TcpStream) {
        self.idle
            .lock()
            .expect("pool lock")
            .push(Idle::Registered(s));
    }

    /// Sends `POST path` and reads the response head. The caller has set `times.sent`
    /// (the request's start); `times` gets the connect time when a connection had to be
    /// opened, and the moment the write returned.
    pub async fn post(
        &self,
        path: &str,
        headers: &[&HeaderMap],
        request_id: Option<&str>,
        body: &[u8],
        times: &mut SendTimes,
    ) -> Result<Response<'_>, H1Error> {
        let request = self.encode(path, headers, request_id, body);
        let (stream, reused) = match self.take_idle() {
            Some(s) => (s, true),
            None => {
                let t = Instant::now();
                let s = self.connect().await?;
                times.connect = Some(t.elapsed());
                (s, false)
            }
        };
        match self.exchange(stream, &request, times).await {
            Ok(r) => Ok(r),
            Err(Attempt::Stale) => Err(H1Error::Connection(if reused {
                "the server closed a kept-alive connection without answering (the request is not sent again: the server may have read it)".into()
            } else {
                "the server closed the connection without answering".into()
            })),
            Err(Attempt::Failed(e)) => Err(e),
        }
    }

    fn encode(
        &self,
        path: &str,
        headers: &[&HeaderMap],
        request_id: Option<&str>,
        body: &[u8],
    ) -> Vec<u8> {
        let mut r = Vec::with_capacity(256 + body.len());
        r.extend_from_slice(b"POST ");
        if let Some((origin, _)) = &self.via {
            r.extend_from_slice(origin.as_bytes());
        }
        r.extend_from_slice(path.as_bytes());
        r.extend_from_slice(b" HTTP/1.1\r\nhost: ");
        r.extend_from_slice(self.authority.as_bytes());
        r.extend_from_slice(b"\r\n");
        if let Some((_, Some(auth))) = &self.via {
            r.extend_from_slice(b"proxy-authorization: ");
            r.extend_from_slice(auth.as_bytes());
            r.extend_from_slice(b"\r\n");
        }
        if !headers.iter().any(|m| m.contains_key(CONTENT_TYPE)) {
            r.extend_from_slice(b"content-type: application/json\r\n");
        }
        if !headers.iter().any(|m| m.contains_key(ACCEPT)) {
            r.extend_from_slice(b"accept: */*\r\n");
        }
        for map in headers {
            for (name, value) in map.iter() {
                // The framing headers are this client's to write.
                if name == HOST || name == CONTENT_LENGTH || name == TRANSFER_ENCODING {
                    continue;
                }
                r.extend_from_slice(name.as_str().as_bytes());
                r.extend_from_slice(b": ");
                r.extend_from_slice(value.as_bytes());
                r.extend_from_slice(b"\r\n");
            }
        }
        if let Some(id) = request_id {
            r.extend_from_slice(b"x-request-id: ");
            r.extend_from_slice(id.as_bytes());
            r.extend_from_slice(b"\r\n");
        }
        r.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
        r.extend_from_slice(body);
        r
    }

    async fn exchange(
        &self,
        mut stream: TcpStream,
        request: &[u8],
        times: &mut SendTimes,
    ) -> Result<Response<'_>, Attempt> {
        if let Err(e) = stream.write_all(request).await {
            return Err(if is_stale(&e) {
                Attempt::Stale
            } else {
                Attempt::Failed(H1Error::Connection(format!("cannot send the request: {e}")))
            });
        }
        times.written = Some(Instant::now());
        let mut buf = Vec::with_capacity(HEAD_READ);
        let mut arrived = Instant::now();
        // After an interim answer the next head may already be buffered: parse first.
        let mut need_read = true;
        loop {
            if need_read {
                let read = read_more(&stream, &mut buf).await;
                if let Ok((_, at)) = read {
                    arrived = at;
                }
                match read.map(|(n, _)| n) {
                    Ok(0) if buf.is_empty() => return Err(Attempt::Stale),
                    Ok(0) => {
                        return Err(Attempt::Failed(H1Error::Connection(
                            "the server closed the connection in the middle of the response head"
                                .into(),
                        )));
                    }
                    Ok(_) => {}
                    Err(e) if buf.is_empty() && is_stale(&e) => return Err(Attempt::Stale),
                    Err(e) => {
                        return Err(Attempt::Failed(H1Error::Connection(format!(
                            "reading the response failed: {e}"
                        ))));
                    }
                }
            }
            need_read = true;
            let mut headers = [httparse::EMPTY_HEADER; 128];
            let mut head = httparse::Response::new(&mut headers);
            let used = match head.parse(&buf) {
                Ok(httparse::Status::Complete(n)) => n,
                Ok(httparse::Status::Partial) => {
                    if buf.len() > MAX_HEAD {
                        return Err(Attempt::Failed(H1Error::Protocol(
                            "the response head is larger than 64 KiB".into(),
                        )));
                    }
                    continue;
                }
                Err(e) => {
                    return Err(Attempt::Failed(H1Error::Protocol(format!(
                        "the answer is not HTTP/1.1 ({e})"
                    ))));
                }
            };
            let status = head.code.unwrap_or(0);
            if (100..200).contains(&status) && status != 101 {
                buf.drain(..used); // an interim answer (100 Continue): the real one follows
                need_read = buf.is_empty();
                continue;
            }
            let (framing, keep_alive) = framing_of(status, head.version == Some(1), head.headers)
                .map_err(|m| Attempt::Failed(H1Error::Protocol(m)))?;
            let header = |name: &str| {
                head.headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case(name))
                    .map(|h| String::from_utf8_lossy(h.value).into_owned())
            };
            let (content_type, content_encoding, location) = (
                header("content-type"),
                header("content-encoding"),
                header("location"),
            );
            buf.drain(..used);
            return Ok(Response {
                status,
                content_type,
                content_encoding,
                location,
                pool: self,
                stream: Some(stream),
                wire: Wire {
                    keep_alive,
                    closed: false,
                    arrived,
                    buf,
                    pos: 0,
                    framing,
                    out: Vec::new(),
                },
            });
        }
    }
}

async fn connect(addrs: Vec<SocketAddr>, timeout: Duration) -> Result<TcpStream, H1Error> {
    let mut last = None;
    for a in addrs {
        match tokio::time::timeout(timeout, TcpStream::connect(a)).await {
            Ok(Ok(s)) => {
                // Small request bodies and SSE frames: never wait to coalesce.
                let _ = s.set_nodelay(true);
                super::rx_time::enable(&s);
                return Ok(s);
            }
            Ok(Err(e)) => last = Some(format!("cannot connect to {a}: {e}")),
            Err(_) => {
                last = Some(format!(
                    "cannot connect to {a} within {:.0} s",
                    timeout.as_secs_f64()
                ))
            }
        }
    }
    Err(H1Error::Connection(last.unwrap_or_default()))
}

enum Attempt {
    /// A reused connection turned out closed before any answer: try a new one.
    Stale,
    Failed(H1Error),
}

const READ_SIZE: usize = 16 * 1024;
const MAX_HEAD: usize = 64 * 1024;
/// The first read of an answer, which is its head and what follows it: small enough
/// for the allocator's per-thread cache. A streamed body gives this buffer up at once
/// (the reader thread reads into its own), and at 1,000 streams starting together
/// 16 KiB ones were 16 MB of heap for a few hundred bytes each.
const HEAD_READ: usize = 1000;

/// Whether an idle connection is still open: a non-blocking peek that finds nothing to
/// read. The server's FIN (a read of 0), an error, or stray bytes mean it is not
/// reusable. Checking before the write is what makes a resend unnecessary.
fn still_open<S: super::rx_time::Socket>(stream: &S) -> bool {
    #[cfg(unix)]
    {
        let mut b = [0u8; 1];
        // SAFETY: a valid socket and a one-byte buffer.
        let n = unsafe {
            libc::recv(
                stream.as_raw_fd(),
                b.as_mut_ptr().cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
    }
    #[cfg(not(unix))]
    {
        let _ = stream;
        true
    }
}

fn is_stale(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::UnexpectedEof
    )
}

/// Reads once into the spare capacity of `buf` (keeping at least a read's worth free):
/// the bytes read and when they arrived.
async fn read_more(stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<(usize, Instant)> {
    // An empty buffer with room is read into as it is (the head's first read).
    let spare = buf.capacity() - buf.len();
    if spare == 0 || (spare < READ_SIZE / 4 && !buf.is_empty()) {
        buf.reserve(READ_SIZE);
    }
    super::rx_time::read(stream, buf).await
}

/// A response whose body is read as it arrives.
pub struct Response<'p> {
    pub status: u16,
    pub content_type: Option<String>,
    /// `Content-Encoding`, when the server compressed the body.
    pub content_encoding: Option<String>,
    /// `Location`, for a redirect.
    pub location: Option<String>,
    pool: &'p Pool,
    stream: Option<TcpStream>,
    wire: Wire,
}

impl std::fmt::Debug for Response<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("framing", &self.wire.framing)
            .finish()
    }
}

impl<'p> Response<'p> {
    /// Waits for more body: every body byte that arrived with the next read (plus any
    /// left from the head's read). `Ok(None)` at the end of the body, when a reusable
    /// connection goes back to the pool. With the bytes comes their arrival: the kernel's
    /// receive timestamp where there is one, else the time of the read.
    pub async fn read_some(&mut self) -> Result<Option<(&[u8], Instant)>, H1Error> {
        self.wire.out.clear();
        loop {
            let done = self.wire.decode()?;
            if !self.wire.out.is_empty() {
                return Ok(Some((&self.wire.out, self.wire.arrived)));
            }
            if done {
                if let Some(s) = self.stream.take()
                    && self.wire.reusable()
                {
                    self.pool.put_idle(s);
                }
                return Ok(None);
            }
            let Some(stream) = self.stream.as_mut() else {
                return Ok(None);
            };
            self.wire.make_room();
            let read = super::rx_time::read(stream, &mut self.wire.buf).await;
            if let Err(e) = self.wire.after_read(read) {
                self.stream = None;
                return Err(e);
            }
            if self.wire.closed {
                self.stream = None;
            }
        }
    }

    /// The connection and the body's state, to be read somewhere else (the stream
    /// reader thread), and the pool a reusable connection goes back to. The socket
    /// leaves this runtime's reactor. None when the connection is gone already.
    pub fn detach(self) -> Option<(std::net::TcpStream, Wire, &'p Pool)> {
        let stream = self.stream?.into_std().ok()?;
        Some((stream, self.wire, self.pool))
    }
}

impl Pool {
    /// Takes back a connection whose answer was read to its end elsewhere (see
    /// [`Response::detach`]); it joins this runtime's reactor when a request takes it.
    pub fn put_back(&self, s: std::net::TcpStream) {
        self.idle.lock().expect("pool lock").push(Idle::Bare(s));
    }
}

/// A response body's bytes on their way from the socket: what was received and not yet
/// decoded, the framing's state, and what the latest decoding produced. It does no
/// I/O itself, so a task and the reader thread read bodies alike.
pub struct Wire {
    keep_alive: bool,
    /// The server closed the connection (a read of 0).
    closed: bool,
    /// When the bytes of the latest read arrived (see `rx_time`).
    arrived: Instant,
    /// Received bytes not yet decoded start at `pos`.
    buf: Vec<u8>,
    pos: usize,
    framing: Framing,
    /// Body bytes decoded so far and not yet taken.
    pub(super) out: Vec<u8>,
}

impl Wire {
    /// Decodes what is buffered into `out`; true once the body is complete.
    pub(super) fn decode(&mut self) -> Result<bool, H1Error> {
        let (used, framing) = decode_into(self.framing, &self.buf[self.pos..], &mut self.out)?;
        self.pos += used;
        self.framing = framing;
        Ok(framing == Framing::Done)
    }

    /// Decodes `input`, bytes read into a buffer of the caller's (the reader thread's
    /// one buffer for all streams), into `out`; true once the body is complete. What
    /// this stream holds goes first; bytes left after the body's end are kept (so the
    /// connection is not reused). With nothing of its own left, the stream gives up its
    /// read buffer: at 1,000 streams those were most of the client's memory.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) fn decode_read(&mut self, input: &[u8]) -> Result<bool, H1Error> {
        if self.pos < self.buf.len() {
            self.buf.extend_from_slice(input);
            let done = self.decode()?;
            if self.pos == self.buf.len() {
                self.buf = Vec::new();
                self.pos = 0;
            }
            return Ok(done);
        }
        if self.buf.capacity() > 0 {
            self.buf = Vec::new();
            self.pos = 0;
        }
        let (used, framing) = decode_into(self.framing, input, &mut self.out)?;
        self.framing = framing;
        self.buf.extend_from_slice(&input[used..]);
        Ok(framing == Framing::Done)
    }

    /// When the bytes of the latest read arrived.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) fn arrived(&self) -> Instant {
        self.arrived
    }

    /// Whether the connection can serve another request: the body is complete, nothing
    /// follows it, and both sides keep the connection.
    pub(super) fn reusable(&self) -> bool {
        self.keep_alive
            && !self.closed
            && self.framing == Framing::Done
            && self.pos == self.buf.len()
    }

    /// Makes room in `buf` for the next read (the decoded part is dropped).
    pub(super) fn make_room(&mut self) {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos >= READ_SIZE {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        if self.buf.capacity() - self.buf.len() < READ_SIZE / 4 {
            self.buf.reserve(READ_SIZE);
        }
    }

    /// Takes account of a read into `buf`: the bytes' arrival, or the server's close
    /// (the end of a close-delimited body, else a broken one).
    pub(super) fn after_read(&mut self, read: io::Result<(usize, Instant)>) -> Result<(), H1Error> {
        match read {
            Ok((0, _)) => {
                self.closed = true;
                if self.framing == Framing::UntilClose {
                    self.framing = Framing::Done;
                    return Ok(());
                }
                Err(H1Error::Broken(
                    "the server closed the connection before the end of the body".into(),
                ))
            }
            Ok((_, at)) => {
                self.arrived = at;
                Ok(())
            }
            Err(e) => {
                self.closed = true;
                Err(H1Error::Broken(format!("reading the body failed: {e}")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::framing::{ChunkState, SIZE_START};
    use super::*;

    fn decode_all(
        framing: Framing,
        wire: &[u8],
        split: usize,
    ) -> Result<(Vec<u8>, Framing), String> {
        let mut out = Vec::new();
        let mut state = framing;
        let mut pending: Vec<u8> = Vec::new();
        for part in [&wire[..split], &wire[split..]] {
            pending.extend_from_slice(part);
            let (used, next) = decode_into(state, &pending, &mut out).map_err(|e| e.to_string())?;
            pending.drain(..used);
            state = next;
        }
        Ok((out, state))
    }

    #[test]
    fn chunked_bodies_decode_at_every_split() {
        let wire = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nx-trailer: 1\r\n\r\n";
        for split in 0..=wire.len() {
            let (body, state) = decode_all(Framing::Chunked(SIZE_START), wire, split).unwrap();
            assert_eq!(body, b"hello, world", "split at {split}");
            assert_eq!(state, Framing::Done, "split at {split}");
        }
        // Bare LF line ends are accepted too, and upper-case hex.
        let (body, state) =
            decode_all(Framing::Chunked(SIZE_START), b"A\n0123456789\n0\n\n", 3).unwrap();
        assert_eq!(
            (body.as_slice(), state),
            (&b"0123456789"[..], Framing::Done)
        );
    }

    #[test]
    fn an_unfinished_chunked_body_is_not_done_and_garbage_is_an_error() {
        let (body, state) = decode_all(Framing::Chunked(SIZE_START), b"5\r\nhel", 2).unwrap();
        assert_eq!(body, b"hel");
        assert_eq!(state, Framing::Chunked(ChunkState::Data(2)));
        assert!(decode_all(Framing::Chunked(SIZE_START), b"zz\r\n", 1).is_err());
        assert!(decode_all(Framing::Chunked(SIZE_START), b"2\r\nabX", 1).is_err());
        assert!(decode_all(Framing::Chunked(SIZE_START), b"\r\n", 1).is_err());
    }

    #[test]
    fn length_bodies_stop_at_their_length() {
        let (body, state) = decode_all(Framing::Length(4), b"abcdef", 2).unwrap();
        assert_eq!((body.as_slice(), state), (&b"abcd"[..], Framing::Done));
    }

    #[test]
    fn framing_follows_the_headers() {
        let h = |n: &'static str, v: &'static [u8]| httparse::Header { name: n, value: v };
        assert_eq!(
            framing_of(200, true, &[h("Transfer-Encoding", b"chunked")]).unwrap(),
            (Framing::Chunked(SIZE_START), true)
        );
        assert_eq!(
            framing_of(
                200,
                true,
                &[h("content-length", b"12"), h("Connection", b"close")]
            )
            .unwrap(),
            (Framing::Length(12), false)
        );
        assert_eq!(
            framing_of(200, true, &[]).unwrap(),
            (Framing::UntilClose, false)
        );
        assert_eq!(framing_of(204, false, &[]).unwrap(), (Framing::Done, false));
        assert!(framing_of(200, true, &[h("content-length", b"x")]).is_err());
    }

    #[test]
    fn only_plain_http_urls_are_native() {
        assert_eq!(
            parse_http_url("http://127.0.0.1:8000/v1/completions?a=1"),
            Some(HttpUrl {
                authority: "127.0.0.1:8000".into(),
                path: "/v1/completions?a=1".into()
            })
        );
        assert_eq!(
            parse_http_url("http://localhost/x").unwrap().authority,
            "localhost:80"
        );
        assert_eq!(
            parse_http_url("http://[::1]:9/x").unwrap().authority,
            "[::1]:9"
        );
        assert_eq!(parse_http_url("https://example.com/x"), None);
        assert_eq!(parse_http_url("http://u:p@example.com/x"), None);
    }
}
