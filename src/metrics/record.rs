//! What the load generator keeps of each measured request.

use super::sample::Sample;

/// One measured request. Times are seconds since the start of the measured run.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    pub index: usize,
    /// When the schedule said to send it.
    pub scheduled: f64,
    /// When the dispatcher released it (vLLM's arrival time).
    pub dispatched: f64,
    /// When it went out, after waiting for a concurrency slot (vLLM's start_time).
    pub start: f64,
    /// When the client had written the whole request, if it reports that (seconds
    /// since the start of the run): `written - start` is the client's own share of
    /// the request's way to the server.
    pub written: Option<f64>,
    /// Seconds spent opening a connection inside the request, when it had to (a
    /// connect inside a measured request counts in its TTFT and E2EL, as in vLLM).
    pub connect: Option<f64>,
    /// Prompt tokens as the dataset counted them.
    pub prompt_len: u64,
    pub expected_output_len: u64,
    /// What the request measured.
    pub sample: Sample,
    /// Which conversation and turn this request was, in a multi-turn case.
    pub turn: Option<TurnRef>,
}

/// A request's place in a multi-turn case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnRef {
    pub conversation: u32,
    /// 0 for the first turn.
    pub turn: u32,
}

impl RequestRecord {
    /// Time spent behind the concurrency cap and the event loop (vLLM's client_queue_time).
    pub fn client_queue_time(&self) -> f64 {
        (self.start - self.dispatched).max(0.0)
    }

    /// How late the dispatcher released it compared with the schedule.
    pub fn schedule_lag(&self) -> f64 {
        (self.dispatched - self.scheduled).max(0.0)
    }
}

#[cfg(test)]
impl RequestRecord {
    /// A successful streamed request for a test: sent (and scheduled) at `start`, its
    /// first token `ttft` later, then one token event per gap of `itl`; `usage` output
    /// tokens when the server said; 10 prompt tokens, as many asked as it streamed.
    pub(crate) fn streamed(
        index: usize,
        start: f64,
        ttft: f64,
        itl: &[f64],
        usage: Option<u64>,
    ) -> RequestRecord {
        RequestRecord {
            index,
            scheduled: start,
            dispatched: start,
            start,
            written: None,
            connect: None,
            prompt_len: 10,
            expected_output_len: itl.len() as u64 + 1,
            sample: Sample {
                success: true,
                ttft,
                latency: ttft + itl.iter().sum::<f64>(),
                itl: itl.to_vec(),
                chunks: itl.len() as u32 + 1,
                done: true,
                usage_completion: usage,
                ..Sample::default()
            },
            turn: None,
        }
    }
}
