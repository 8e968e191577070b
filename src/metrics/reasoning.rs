//! Where a reasoning model's time goes, per case (`benchplan.reasoning`). vLLM's keys
//! (`mean_ttft_ms`, `mean_tpot_ms`, …) stay what vLLM's client computes, which on a
//! reasoning server depends on the field the reasoning comes in (`reasoning` is a
//! token event for it, `reasoning_content` is not). Beside them, from the same
//! streams:
//!
//! - **TTFT (any)**: the start to the first output on any channel, reasoning
//!   included: what a server's own TTFT means.
//! - **TTFO**: the start to the first answer (content or tool call) event: what a
//!   user waits for.
//! - **reasoning time**: TTFO − TTFT (any).
//! - **reasoning tokens**: the server's `completion_tokens_details.reasoning_tokens`
//!   when it sends them, else the reasoning events counted (which one, said).
//! - **TPOT (answer)**: (last answer event − first answer event) / (answer tokens − 1),
//!   the answer tokens being the output tokens less the reasoning ones: the decode
//!   pace of the answer alone, where vLLM's TPOT spreads the whole output over the
//!   time after its first token event.
//!
//! Statistics are numpy's (mean, median, P90, P99 over the successful requests that
//! have the figure). Absent from a case in which no request reasoned.

use serde::Serialize;

use super::record::RequestRecord;
use super::stats::{mean, percentile};

/// A latency's mean, median, P90 and P99 in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Ms {
    pub mean: f64,
    pub median: f64,
    pub p90: f64,
    pub p99: f64,
    /// The requests it is over.
    pub n: u64,
}

impl Ms {
    pub fn of(secs: &[f64]) -> Option<Ms> {
        if secs.is_empty() {
            return None;
        }
        let ms: Vec<f64> = secs.iter().map(|s| s * 1e3).collect();
        Some(Ms {
            mean: mean(&ms),
            median: percentile(&ms, 50.0),
            p90: percentile(&ms, 90.0),
            p99: percentile(&ms, 99.0),
            n: ms.len() as u64,
        })
    }
}

/// A case's reasoning figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reasoning {
    /// Successful requests, and those that reasoned (by events or by usage).
    pub requests: u64,
    pub requests_with_reasoning: u64,
    pub ttft_any_ms: Option<Ms>,
    pub ttfo_ms: Option<Ms>,
    pub reasoning_ms: Option<Ms>,
    pub tpot_answer_ms: Option<Ms>,
    /// Summed over the successful requests.
    pub reasoning_tokens: u64,
    pub answer_tokens: u64,
    /// `usage` (every request's count from the server), `events` (counted from the
    /// reasoning events: a server that sends no count) or `mixed`.
    pub reasoning_tokens_source: &'static str,
    /// Requests that reasoned and never answered (an answer cut at `max_tokens`).
    pub no_answer: u64,
}

impl Reasoning {
    /// Of the successful requests `ok` and their output token counts (as the summary
    /// counted them); None when no request reasoned.
    pub fn of(ok: &[&RequestRecord], outputs: &[u64]) -> Option<Reasoning> {
        let reasoned = |r: &RequestRecord| {
            r.sample.reasoning_events > 0 || r.sample.usage_reasoning.is_some_and(|n| n > 0)
        };
        if !ok.iter().any(|r| reasoned(r)) {
            return None;
        }
        let (mut any, mut ttfo, mut thinking, mut tpot) = (vec![], vec![], vec![], vec![]);
        let (mut by_usage, mut by_events) = (0u64, 0u64);
        let mut out = Reasoning {
            requests: ok.len() as u64,
            requests_with_reasoning: 0,
            ttft_any_ms: None,
            ttfo_ms: None,
            reasoning_ms: None,
            tpot_answer_ms: None,
            reasoning_tokens: 0,
            answer_tokens: 0,
            reasoning_tokens_source: "usage",
            no_answer: 0,
        };
        for (r, &output) in ok.iter().zip(outputs) {
            let s = &r.sample;
            if reasoned(r) {
                out.requests_with_reasoning += 1;
            }
            let first = s.first_any.unwrap_or(s.ttft);
            any.push(first);
            // Server text: a count past the output it is part of is not believed.
            let tokens = match s.usage_reasoning {
                Some(n) if n <= output => {
                    by_usage += 1;
                    n
                }
                _ => {
                    by_events += 1;
                    u64::from(s.reasoning_events).min(output)
                }
            };
            out.reasoning_tokens = out.reasoning_tokens.saturating_add(tokens);
            let answer = output - tokens;
            out.answer_tokens = out.answer_tokens.saturating_add(answer);
            match s.first_answer {
                Some(a) => {
                    ttfo.push(a);
                    thinking.push((a - first).max(0.0));
                    if let (Some(last), true) = (s.last_answer, answer > 1) {
                        tpot.push((last - a) / (answer - 1) as f64);
                    }
                }
                None if reasoned(r) => out.no_answer += 1,
                None => {}
            }
        }
        out.reasoning_tokens_source = match (by_usage, by_events) {
            (_, 0) => "usage",
            (0, _) => "events",
            _ => "mixed",
        };
        out.ttft_any_ms = Ms::of(&any);
        out.ttfo_ms = Ms::of(&ttfo);
        out.reasoning_ms = Ms::of(&thinking);
        out.tpot_answer_ms = Ms::of(&tpot);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::sample::Sample;

    fn record(sample: Sample) -> RequestRecord {
        RequestRecord {
            sample,
            ..RequestRecord::streamed(0, 0.0, 0.0, &[], None)
        }
    }

    /// A hand-worked case: 40 ms to the first reasoning event, 20 reasoning events 5 ms
    /// apart, the answer from 140 ms to 195 ms over 12 tokens.
    #[test]
    fn a_reasoning_request_splits_into_thinking_and_answering() {
        let with_usage = record(Sample {
            success: true,
            ttft: 0.040,
            first_any: Some(0.040),
            first_answer: Some(0.140),
            last_answer: Some(0.195),
            reasoning_events: 20,
            usage_reasoning: Some(20),
            ..Sample::default()
        });
        let by_events = record(Sample {
            usage_reasoning: None,
            ..with_usage.sample.clone()
        });
        let ok = [&with_usage, &by_events];
        let r = Reasoning::of(&ok, &[32, 32]).expect("it reasoned");
        assert_eq!((r.requests, r.requests_with_reasoning), (2, 2));
        assert_eq!((r.reasoning_tokens, r.answer_tokens), (40, 24));
        assert_eq!(r.reasoning_tokens_source, "mixed");
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(r.ttft_any_ms.unwrap().mean, 40.0));
        assert!(close(r.ttfo_ms.unwrap().p99, 140.0));
        assert!(close(r.reasoning_ms.unwrap().median, 100.0));
        // 55 ms over the 11 gaps of 12 answer tokens.
        assert!(close(r.tpot_answer_ms.unwrap().mean, 5.0));
    }

    #[test]
    fn no_reasoning_is_no_block_and_a_count_past_the_output_is_not_believed() {
        let plain = record(Sample {
            success: true,
            ttft: 0.01,
            first_any: Some(0.01),
            first_answer: Some(0.01),
            last_answer: Some(0.05),
            ..Sample::default()
        });
        assert_eq!(Reasoning::of(&[&plain], &[5]), None);
        let lying = record(Sample {
            usage_reasoning: Some(1_000_000),
            reasoning_events: 3,
            ..plain.sample.clone()
        });
        let r = Reasoning::of(&[&lying], &[5]).unwrap();
        assert_eq!(
            (r.reasoning_tokens, r.reasoning_tokens_source),
            (3, "events")
        );
    }
}
