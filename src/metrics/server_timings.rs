//! The server's own clock beside the client's (`benchplan.server_timings`): a server
//! that reports per-request timings (vLLM's `metrics` object with `include_metrics`,
//! vllm#46768: `time_to_first_token_ms`, `queue_time_ms`, `generation_time_ms`;
//! llama-server's `timings`: `prompt_ms`, its prompt processing, which is its time to
//! the first token, and `predicted_ms`, its decode) splits the TTFT a client sees into
//! the engine's own (queue and prefill) and the **gap**: client TTFT − server TTFT,
//! everything between the engine and the client (frontend, network, proxies, the
//! client itself). On a quiet loopback the gap is the client's own cost; a proxy adds
//! its delay to the gap and nothing to the server's TTFT.
//!
//! Written flat (`mean_server_ttft_ms`, `p99_ttft_gap_ms`, …). Server text: a timing
//! that is negative, not finite, or larger than the client's own E2EL for the request
//! is not believed, and counted as `rejected`.

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::ms::{Ms, put};
use super::record::RequestRecord;

/// A case's server timings, over the successful requests that carried them.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerTimings {
    /// The plan asked for them (`server_timings = true`): a case whose responses
    /// carried none says the server did not honour the ask.
    pub asked: bool,
    /// Requests whose server TTFT was read, and values that were not believed.
    pub requests: u64,
    pub rejected: u64,
    pub server_ttft: Option<Ms>,
    pub server_queue: Option<Ms>,
    /// Server TTFT − queue: the engine's prefill (vLLM; llama-server's TTFT is it).
    pub server_prefill: Option<Ms>,
    pub server_generation: Option<Ms>,
    /// Client TTFT − server TTFT per request.
    pub ttft_gap: Option<Ms>,
}

impl Serialize for ServerTimings {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("asked", &self.asked)?;
        m.serialize_entry("requests", &self.requests)?;
        m.serialize_entry("rejected", &self.rejected)?;
        for (name, ms) in [
            ("server_ttft", &self.server_ttft),
            ("server_queue", &self.server_queue),
            ("server_prefill", &self.server_prefill),
            ("server_generation", &self.server_generation),
            ("ttft_gap", &self.ttft_gap),
        ] {
            put(&mut m, name, ms)?;
        }
        m.end()
    }
}

impl ServerTimings {
    /// A case none of whose responses carried server timings.
    pub fn none() -> ServerTimings {
        ServerTimings {
            asked: false,
            requests: 0,
            rejected: 0,
            server_ttft: None,
            server_queue: None,
            server_prefill: None,
            server_generation: None,
            ttft_gap: None,
        }
    }

    /// What the console and the report warn about: an ask the server ignored, values
    /// not believed.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.asked && self.requests == 0 && self.rejected == 0 {
            w.push("server_timings = true asked for the server's per-request timings (include_metrics) and no response carried them: this server does not honour it (vLLM sends them with --enable-per-request-metrics; llama-server always sends `timings`)".into());
        }
        if self.rejected > 0 {
            w.push(format!(
                "{} server timing value(s) could not be true (negative, not a number, or longer than the request itself): not used",
                self.rejected
            ));
        }
        w
    }

    /// The gap's warning for a target on this host (loopback or its own address): what this client or
    /// the path adds to TTFT when it is large against it (over 5 ms and a fifth of
    /// the client's mean TTFT).
    pub fn gap_warning(&self, client_ttft_ms: f64) -> Option<String> {
        let gap = self.ttft_gap?.mean;
        (gap > 5.0 && gap > client_ttft_ms / 5.0).then(|| {
            format!(
                "the target is on this host, yet this client or its path adds {gap:.1} ms to the server's own TTFT ({:.1} of {client_ttft_ms:.1} ms): something between the engine and the client (a proxy, a busy machine, the server's frontend) is in every TTFT",
                client_ttft_ms - gap
            )
        })
    }

    /// Of the successful requests `ok`; None when none carried a server timing.
    pub fn of(ok: &[&RequestRecord]) -> Option<ServerTimings> {
        let with: Vec<&RequestRecord> = ok
            .iter()
            .copied()
            .filter(|r| {
                let s = &r.sample;
                s.server_ttft.is_some()
                    || s.server_queue_time.is_some()
                    || s.server_prefill.is_some()
                    || s.server_generation.is_some()
            })
            .collect();
        if with.is_empty() {
            return None;
        }
        let mut rejected = 0u64;
        // A value, if it is believable for request `r`; a count of one that is not.
        let mut sane = |v: Option<f64>, r: &RequestRecord| match v {
            Some(x) if x.is_finite() && x >= 0.0 && x <= r.sample.latency => Some(x),
            Some(_) => {
                rejected += 1;
                None
            }
            None => None,
        };
        let (mut ttft, mut queue, mut prefill, mut generation, mut gap) =
            (vec![], vec![], vec![], vec![], vec![]);
        for r in &with {
            let s = &r.sample;
            // vLLM's own TTFT, else llama-server's prompt time (no queue in it).
            let t = sane(s.server_ttft.or(s.server_prefill), r);
            let q = sane(s.server_queue_time, r);
            if let Some(t) = t {
                ttft.push(t);
                gap.push(s.ttft - t);
                match (s.server_ttft, q) {
                    (Some(_), Some(q)) => prefill.push((t - q).max(0.0)),
                    (None, _) => prefill.push(t),
                    _ => {}
                }
            }
            queue.extend(q);
            generation.extend(sane(s.server_generation, r));
        }
        // The gap keeps its sign in the statistics: a server clock ahead of the
        // client's (a negative gap) is worth seeing, not hiding.
        Some(ServerTimings {
            asked: false,
            requests: ttft.len() as u64,
            rejected,
            server_ttft: Ms::of(&ttft),
            server_queue: Ms::of(&queue),
            server_prefill: Ms::of(&prefill),
            server_generation: Ms::of(&generation),
            ttft_gap: Ms::of(&gap),
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
                server_generation: server_ttft.map(|_| 0.1),
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
        assert!(close(t.ttft_gap.unwrap().mean, 4.0), "{t:?}");
        assert!(close(t.server_ttft.unwrap().median, 52.5));
        assert!(close(t.server_queue.unwrap().mean, 2.0));
        // Prefill: 49 and 52 ms (TTFT less queue).
        assert!(close(t.server_prefill.unwrap().mean, 50.5));
        assert_eq!(t.server_generation.unwrap().n, 4);
        let v = serde_json::to_value(&t).unwrap();
        assert!(close(v["mean_ttft_gap_ms"].as_f64().unwrap(), 4.0), "{v:#}");
        assert_eq!(v["rejected"], 3);
        assert_eq!(ServerTimings::of(&refs[4..]), None);
    }
}
