//! Where a reasoning model's time goes, per case (`benchplan.reasoning`). vLLM's keys
//! (`mean_ttft_ms`, `mean_tpot_ms`, …) stay what vLLM's client computes, which on a
//! reasoning server depends on the field the reasoning comes in (`reasoning` is a
//! token event for it, `reasoning_content` is not). Beside them, from the same
//! streams, written flat as `{mean,median,p90,p99}_{name}_ms`:
//!
//! - **`ttft_any`**: the start to the first output on any channel, reasoning
//!   included: what a server's own TTFT means.
//! - **`ttfo`**: the start to the first answer (content or tool call) event: what a
//!   user waits for.
//! - **`reasoning`**: TTFO − TTFT (any), the time spent thinking.
//! - **`tpot_answer`**: (last answer event − first answer event) / (answer tokens − 1),
//!   the answer tokens being the output tokens less the reasoning ones: the decode
//!   pace of the answer alone.
//! - **`tpot_all`**: (last output − first output, any channel) / (output tokens − 1):
//!   the decode pace over every token, reasoning included.
//! - **`itl_answer`** and **`itl_all`**: the gaps between consecutive answer events,
//!   and between consecutive outputs on any channel.
//! - **reasoning tokens**: the server's `completion_tokens_details.reasoning_tokens`
//!   when it sends them, else the reasoning events counted (which one, said).
//!
//! Statistics are numpy's over the successful requests that have the figure. Absent
//! from a case in which no request reasoned.

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::ms::{Ms, put};
use super::record::RequestRecord;

/// A case's reasoning figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Reasoning {
    /// Successful requests, and those that reasoned (by events or by usage).
    pub requests: u64,
    pub requests_with_reasoning: u64,
    pub ttft_any: Option<Ms>,
    pub ttfo: Option<Ms>,
    pub reasoning: Option<Ms>,
    pub tpot_answer: Option<Ms>,
    pub tpot_all: Option<Ms>,
    pub itl_answer: Option<Ms>,
    pub itl_all: Option<Ms>,
    /// Summed over the successful requests.
    pub reasoning_tokens: u64,
    pub answer_tokens: u64,
    /// `usage` (every request's count from the server), `events` (counted from the
    /// reasoning events: a server that sends no count) or `mixed`.
    pub reasoning_tokens_source: &'static str,
    /// Requests that reasoned and never answered (an answer cut at `max_tokens`).
    pub requests_without_answer: u64,
}

impl Serialize for Reasoning {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("requests", &self.requests)?;
        m.serialize_entry("requests_with_reasoning", &self.requests_with_reasoning)?;
        m.serialize_entry("requests_without_answer", &self.requests_without_answer)?;
        m.serialize_entry("reasoning_tokens", &self.reasoning_tokens)?;
        m.serialize_entry("answer_tokens", &self.answer_tokens)?;
        m.serialize_entry("reasoning_tokens_source", self.reasoning_tokens_source)?;
        for (name, ms) in [
            ("ttft_any", &self.ttft_any),
            ("ttfo", &self.ttfo),
            ("reasoning", &self.reasoning),
            ("tpot_answer", &self.tpot_answer),
            ("tpot_all", &self.tpot_all),
            ("itl_answer", &self.itl_answer),
            ("itl_all", &self.itl_all),
        ] {
            put(&mut m, name, ms)?;
        }
        m.end()
    }
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
        let (mut any, mut ttfo, mut thinking) = (vec![], vec![], vec![]);
        let (mut tpot, mut tpot_all, mut itl_answer, mut itl_all) =
            (vec![], vec![], vec![], vec![]);
        let (mut by_usage, mut by_events) = (0u64, 0u64);
        let mut out = Reasoning {
            requests: ok.len() as u64,
            requests_with_reasoning: 0,
            ttft_any: None,
            ttfo: None,
            reasoning: None,
            tpot_answer: None,
            tpot_all: None,
            itl_answer: None,
            itl_all: None,
            reasoning_tokens: 0,
            answer_tokens: 0,
            reasoning_tokens_source: "usage",
            requests_without_answer: 0,
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
            if let (Some(last), true) = (s.last_any, output > 1) {
                tpot_all.push((last - first).max(0.0) / (output - 1) as f64);
            }
            // A request without reasoning events keeps no gaps of its own: its
            // token events' gaps are both.
            if s.reasoning_events == 0 {
                itl_answer.extend_from_slice(&s.itl);
                itl_all.extend_from_slice(&s.itl);
            } else {
                itl_answer.extend_from_slice(&s.answer_itl);
                itl_all.extend_from_slice(&s.output_itl);
            }
            match s.first_answer {
                Some(a) => {
                    ttfo.push(a);
                    thinking.push((a - first).max(0.0));
                    if let (Some(last), true) = (s.last_answer, answer > 1) {
                        tpot.push((last - a) / (answer - 1) as f64);
                    }
                }
                None if reasoned(r) => out.requests_without_answer += 1,
                None => {}
            }
        }
        out.reasoning_tokens_source = match (by_usage, by_events) {
            (_, 0) => "usage",
            (0, _) => "events",
            _ => "mixed",
        };
        out.ttft_any = Ms::of(&any);
        out.ttfo = Ms::of(&ttfo);
        out.reasoning = Ms::of(&thinking);
        out.tpot_answer = Ms::of(&tpot);
        out.tpot_all = Ms::of(&tpot_all);
        out.itl_answer = Ms::of(&itl_answer);
        out.itl_all = Ms::of(&itl_all);
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
            last_any: Some(0.195),
            output_itl: vec![0.005; 31],
            answer_itl: vec![0.005; 11],
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
        assert!(close(r.ttft_any.unwrap().mean, 40.0));
        assert!(close(r.ttfo.unwrap().p99, 140.0));
        assert!(close(r.reasoning.unwrap().median, 100.0));
        // 55 ms over the 11 gaps of 12 answer tokens.
        assert!(close(r.tpot_answer.unwrap().mean, 5.0));
        // Every token: 155 ms over the 31 gaps of 32; the gaps themselves 5 ms apart.
        assert!(close(r.tpot_all.unwrap().mean, 5.0));
        assert_eq!(r.itl_all.unwrap().n, 62);
        assert_eq!(r.itl_answer.unwrap().n, 22);
        assert!(close(r.itl_answer.unwrap().p99, 5.0));
        // Written flat, under vLLM-style names.
        let v = serde_json::to_value(&r).unwrap();
        assert!(
            close(v["mean_reasoning_ms"].as_f64().unwrap(), 100.0),
            "{v:#}"
        );
        assert!(close(v["p99_ttft_any_ms"].as_f64().unwrap(), 40.0));
        assert_eq!(v["reasoning_tokens_source"], "mixed");
        assert!(v.get("ttfo_ms").is_none());
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
