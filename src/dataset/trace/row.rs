//! A trace's rows: what one request of it is, and a trace read from its file.

use crate::plan::trace::TraceFormat;

/// One request of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Its line in the file (1-based).
    pub line: usize,
    /// Its send time in seconds (the file's unit applied), when the trace has one.
    pub t: Option<f64>,
    pub input: u64,
    pub output: u64,
    /// Its blocks' keys, in prompt order (a session's ids scoped to the session).
    pub ids: Vec<u64>,
    /// Its session (conversation), when the trace has one.
    pub session: Option<String>,
    /// The pause before it after its session's previous answer, seconds.
    pub think: Option<f64>,
}

impl Row {
    /// The length of block `k` of this row: `block` tokens, the last one the rest.
    pub fn block_len(&self, k: usize, block: u64) -> u64 {
        if k + 1 < self.ids.len() {
            block
        } else {
            self.input
                .saturating_sub(block * (self.ids.len() as u64).saturating_sub(1))
        }
    }
}

/// A trace read from its file.
#[derive(Debug, Clone)]
pub struct Trace {
    pub format: TraceFormat,
    pub block: u64,
    pub rows: Vec<Row>,
    /// Rows whose ids were fitted to their length (`fit_inconsistent`).
    pub fitted: usize,
}
