//! The server's own clock beside the client's (`benchplan.server_timings`): a server
//! that reports per-request timings (vLLM's `metrics` object with `include_metrics`,
//! vllm#46768: `time_to_first_token_ms`, `queue_time_ms`; llama-server's `timings`:
//! `prompt_ms`, its prompt processing, which is its time to the first token) splits the
//! TTFT a client sees
//! into the engine's own (queue and prefill) and the **gap**: client TTFT − server TTFT,
//! everything between the engine and the client (frontend, network, proxies, the
//! client itself). On a quiet loopback the gap is the client's own cost; a proxy adds
//! its delay to the gap and nothing to the server's TTFT.
//!
//! Server text: a timing that is negative, not finite, or larger than the client's own
//! E2EL for the request is not believed, and counted as `rejected`.

use serde::Serialize;

use super::reasoning::Ms;
use super::record::RequestRecord;

/// A case's server timings, over the successful requests that carried them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerTimings {
    /// Requests whose server TTFT was read, and those whose value was not believed.
    pub requests: u64,
    pub rejected: u64,
    pub server_ttft_ms: Option<Ms>,
    pub server_queue_ms: Option<Ms>,
    /// Client TTFT − server TTFT per request.
    pub gap_ms: Option<Ms>,
}

impl ServerTimings {
    /// Of the successful requests `ok`; None when none carried a server TTFT.
    pub fn of(ok: &[&RequestRecord]) -> Option<ServerTimings> {
        let with: Vec<&RequestRecord> = ok
            .iter()
            .copied()
            .filter(|r| {
                let s = &r.sample;
                s.server_ttft.is_some()
                    || s.server_queue_time.is_some()
                    || s.server_prefill.is_some()
            })
            .collect();
        if with.is_empty() {
            return None;
        }
        let sane = |v: f64, r: &RequestRecord| v.is_finite() && v >= 0.0 && v <= r.sample.latency;
        let (mut ttft, mut queue, mut gap) = (vec![], vec![], vec![]);
        let mut rejected = 0u64;
        for r in &with {
            let s = &r.sample;
            // vLLM's own TTFT, else llama-server's prompt time (no queue in it).
            match s.server_ttft.or(s.server_prefill) {
                Some(t) if sane(t, r) => {
                    ttft.push(t);
                    gap.push(s.ttft - t);
                }
                Some(_) => rejected += 1,
                None => {}
            }
            match s.server_queue_time {
                Some(q) if sane(q, r) => queue.push(q),
                Some(_) => rejected += 1,
                None => {}
            }
        }
        // The gap keeps its sign in the statistics: a server clock ahead of the
        // client's (a negative gap) is worth seeing, not hiding.
        Some(ServerTimings {
            requests: ttft.len() as u64,
            rejected,
            server_ttft_ms: Ms::of(&ttft),
            server_queue_ms: Ms::of(&queue),
            gap_ms: Ms::of(&gap),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::sample::Sample;

    fn record(
        ttft: f64,
        latency: f64,
        server_ttft: Option<f64>,
        queue: Option<f64>,
    ) -> RequestRecord {
        RequestRecord {
            sample: Sample {
                success: true,
                ttft,
                latency,
                server_ttft,
                server_queue_time: queue,
                ..Sample::default()
            },
            ..RequestRecord::streamed(0, 0.0, 0.0, &[], None)
        }
    }

    /// By hand: client TTFTs 52 and 61 ms over server TTFTs 50 and 55 ms: gaps 2 and
    /// 6 ms; hostile values (negative, NaN, past the request's E2EL) are counted, not used.
    #[test]
    fn the_gap_is_client_minus_server_and_hostile_values_are_rejected() {
        let ok = [
            record(0.052, 0.2, Some(0.050), Some(0.001)),
            record(0.061, 0.2, Some(0.055), Some(0.003)),
            record(0.070, 0.2, Some(-1.0), Some(f64::NAN)),
            record(0.070, 0.2, Some(1e9), None),
            record(0.070, 0.2, None, None),
        ];
        let refs: Vec<&RequestRecord> = ok.iter().collect();
        let t = ServerTimings::of(&refs).unwrap();
        assert_eq!((t.requests, t.rejected), (2, 3));
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(t.gap_ms.unwrap().mean, 4.0), "{t:?}");
        assert!(close(t.server_ttft_ms.unwrap().median, 52.5));
        assert!(close(t.server_queue_ms.unwrap().mean, 2.0));
        assert_eq!(ServerTimings::of(&refs[4..]), None);
    }
}
