//! The HTTP client side: building the connection pool, request bodies per backend,
//! and the SSE framing of streamed answers.

pub mod http;
