//! Ground truth for client accuracy: when the simulator actually sent each streamed
//! chunk, measured from the moment the request reached it.
//!
//! The configured latencies say when a chunk is due; on a loaded machine the simulator
//! itself can be late. A client's measurement error is its TTFT and ITL minus what the
//! simulator really did, so `benchplan sim --record-timings` keeps, per streamed request,
//! the time of every message with choices (the same messages a client times), and
//! serves them at `GET /sim/timings`.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

/// What the simulator did for one streamed request.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TimingRecord {
    /// The request's `x-request-id`, when it had one.
    pub request_id: Option<String>,
    /// The arrival on the host's monotonic clock (ns), comparable with a client's own
    /// clock on the same host.
    pub arrived_monotonic_ns: u64,
    /// Microseconds from the request's arrival (its head parsed) to each message with
    /// choices, as handed to the connection for writing.
    pub chunks_us: Vec<u64>,
}

/// Finished requests' records.
#[derive(Debug, Default)]
pub struct Timings {
    records: Mutex<Vec<TimingRecord>>,
}

impl Timings {
    /// Every record so far, as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        let records = self.records.lock().expect("timings lock");
        serde_json::json!({ "requests": *records })
    }
}

/// One request's record while it streams; handed to the shared list when dropped (the
/// stream ended, was cut, or the client went away).
#[derive(Debug)]
pub struct Trace {
    sink: Arc<Timings>,
    arrived: Instant,
    record: TimingRecord,
}

impl Trace {
    pub fn new(sink: Arc<Timings>, arrived: Instant, request_id: Option<String>) -> Trace {
        Trace {
            sink,
            arrived,
            record: TimingRecord {
                arrived_monotonic_ns: crate::clock::monotonic_ns(arrived),
                request_id,
                chunks_us: Vec::new(),
            },
        }
    }

    /// A message with choices is being sent now.
    pub fn chunk(&mut self) {
        self.record
            .chunks_us
            .push(self.arrived.elapsed().as_micros() as u64);
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        let record = std::mem::take(&mut self.record);
        if let Ok(mut records) = self.sink.records.lock() {
            records.push(record);
        }
    }
}
