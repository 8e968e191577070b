//! The HTTP client side: building the connection pool, request bodies per backend,
//! and the SSE framing of streamed answers.

pub mod backend;
pub mod chunk;
mod chunk_scan;
pub mod h1;
pub mod http;
pub mod multipart;
#[cfg(target_os = "linux")]
mod reader;
pub mod request;
pub mod responses;
pub mod rx_time;
pub mod sse;
mod stream;
