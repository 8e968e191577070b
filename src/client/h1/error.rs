//! How a native request fails, in the terms the error kinds use: shared by the client
//! and its body framing.

/// Why a native request failed, in the terms the error kinds use.
#[derive(Debug)]
pub enum H1Error {
    /// No connection (refused, unreachable, connect timeout), or the server closed it
    /// before answering.
    Connection(String),
    /// The connection broke or closed in the middle of the body.
    Broken(String),
    /// The server's answer is not HTTP/1.x.
    Protocol(String),
}

impl std::fmt::Display for H1Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            H1Error::Connection(m) | H1Error::Broken(m) | H1Error::Protocol(m) => f.write_str(m),
        }
    }
}
