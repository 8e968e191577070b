//! The HTTP client side: building the connection pool, request bodies per backend,
//! and the SSE framing of streamed answers.
//!
//! The rule every part of this client keeps: **a CPU saving never changes what is
//! measured.** No socket option, read pattern or buffering may change how the peer
//! sends or when its bytes are seen. Delayed ACKs (`TCP_QUICKACK` off) once saved
//! a loopback ACK per chunk; behind nginx they met its Nagle on buffered writes and
//! turned a 10 ms ITL into 40 ms stalls followed by batches (`tests/it/proxies.rs`
//! checks the path through a real nginx). The sockets keep the kernel's defaults
//! (plus `TCP_NODELAY` on our own writes, which changes only how we send).

pub mod backend;
pub mod chunk;
pub mod encoding;
pub mod h1;
pub mod http;
pub mod multipart;
pub mod outcome;
#[cfg(target_os = "linux")]
mod reader;
pub mod request;
pub mod request_id;
pub mod responses;
pub mod rx_time;
pub mod sse;
mod stream;
