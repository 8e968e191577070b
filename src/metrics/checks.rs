//! What the numbers alone do not say: how token events were delivered, and whether
//! the server's token counts agree with what it streamed. vLLM's client believes
//! whatever `usage` says and times whatever arrives; these checks do not change a
//! metric, they say when one reflects the path or the server's word rather than the
//! engine.
//!
//! - **Delivery**: a read of the body that carried several token events gives ITL
//!   gaps of zero, and the gap before it holds the wait (a buffering proxy, a
//!   coalescing server). `events_per_read` and the share of ITL samples under 0.5 ms
//!   say so; [`Delivery::batched`] turns them into a warning.
//! - **Token accounting**: each token event carries at least one token, so a `usage`
//!   under the events (less one) is false; one above `max_tokens` is false; one above
//!   the events is believed only when the text, counted with the case's tokenizer,
//!   agrees (several tokens an event, as speculative decoding sends them).
//! - **Short outputs**: with `ignore_eos` a request must return the `max_tokens` it
//!   asked for; the case's output ratio feeds the `min_output_ratio` floor.

use serde::Serialize;

use super::record::RequestRecord;
use crate::tokenizer::TokenModel;

/// An ITL gap shorter than this is "zero": two events in one read.
pub const NEAR_ZERO_ITL_S: f64 = 0.0005;

/// How token events arrived, over a case's successful streams.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Delivery {
    /// Token events per read that carried any (1.0: each arrived on its own).
    pub events_per_read: f64,
    /// Share of ITL samples under 0.5 ms, in percent.
    pub near_zero_itl_percent: f64,
    pub itl_samples: u64,
    /// Whether events arrived batched enough that the ITL distribution describes the
    /// path (a buffering proxy, a coalescing server) rather than the engine.
    pub batched: bool,
}

/// The share of near-zero ITL gaps from which a case's delivery counts as batched.
const BATCHED_NEAR_ZERO_PERCENT: f64 = 10.0;

impl Delivery {
    pub fn of(ok: &[&RequestRecord]) -> Delivery {
        let (mut events, mut reads, mut itls, mut zero) = (0u64, 0u64, 0u64, 0u64);
        for r in ok {
            events += u64::from(r.sample.chunks);
            reads += u64::from(r.sample.token_reads);
            itls += r.sample.itl.len() as u64;
            zero += r
                .sample
                .itl
                .iter()
                .filter(|g| **g < NEAR_ZERO_ITL_S)
                .count() as u64;
        }
        let events_per_read = if reads > 0 {
            events as f64 / reads as f64
        } else {
            0.0
        };
        let near_zero_itl_percent = if itls > 0 {
            zero as f64 / itls as f64 * 100.0
        } else {
            0.0
        };
        Delivery {
            events_per_read,
            near_zero_itl_percent,
            itl_samples: itls,
            batched: itls > 0
                && near_zero_itl_percent >= BATCHED_NEAR_ZERO_PERCENT
                && events_per_read > 1.05,
        }
    }

    /// The console's and report's warning, when delivery was batched.
    pub fn warning(&self) -> Option<String> {
        self.batched.then(|| {
            format!(
                "token events arrived batched ({:.2} events per read, {:.0}% of ITL samples under 0.5 ms): the ITL distribution reflects the path (a buffering proxy such as nginx with proxy_buffering on, or a server that coalesces events), not the engine",
                self.events_per_read, self.near_zero_itl_percent
            )
        })
    }
}

/// Whether the server's token counts agree with what it streamed, over a case's
/// successful requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TokenAccounting {
    /// Requests whose `usage.completion_tokens` disagrees with their token events
    /// by more than one token (see the module docs), or exceeds `max_tokens`.
    pub usage_mismatch: u64,
    /// Of those, the ones whose usage exceeds the request's `max_tokens`.
    pub usage_over_max_tokens: u64,
    /// The largest `usage - events` among the mismatches (negative: usage below).
    pub largest_difference: i64,
    /// Successful requests sent with `ignore_eos`.
    pub ignore_eos_requests: u64,
    /// Of those, the ones that returned fewer tokens than they asked for.
    pub short_outputs: u64,
    /// Output tokens those requests asked for and returned.
    pub requested_tokens: u64,
    pub returned_tokens: u64,
    /// Returned / requested over them, in percent; None without `ignore_eos`.
    pub output_ratio: Option<f64>,
    /// A token total reached u64::MAX and stopped there.
    pub saturated: bool,
    /// Requests whose usage could not be true ([`usage_impossible`]: above their
    /// `max_tokens`, or below the token events they streamed): their token events were
    /// counted instead, in every sum and in the output floor.
    pub corrected: u64,
    /// The indexes of the first 100 of them (the request's place in the case).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub corrected_requests: Vec<u64>,
}

/// Whether a request's `usage.completion_tokens` is provably wrong: more tokens than
/// its `max_tokens` (`asked`, 0 when unknown) allowed, or fewer than the non-empty
/// token events it streamed (each carries at least one token).
pub fn usage_impossible(usage: u64, events: u64, asked: u64) -> bool {
    (asked > 0 && usage > asked) || usage < events
}

impl TokenAccounting {
    /// Checks each successful request; `output_lens[i]` is the output counted for
    /// `ok[i]` (usage, else the tokenizer).
    pub fn of(
        ok: &[&RequestRecord],
        output_lens: &[u64],
        ignore_eos: bool,
        tokens: Option<&TokenModel>,
    ) -> TokenAccounting {
        let mut a = TokenAccounting::default();
        for (r, &output) in ok.iter().zip(output_lens) {
            let o = &r.sample;
            let asked = r.expected_output_len;
            if let Some(usage) = o.usage_completion {
                let events = u64::from(o.chunks);
                if usage > 0 && usage_impossible(usage, events, asked) {
                    a.corrected += 1;
                    if a.corrected_requests.len() < 100 {
                        a.corrected_requests.push(r.index as u64);
                    }
                }
                let over_max = asked > 0 && usage > asked;
                let under_events = usage + 1 < events;
                let over_events = usage > events + 1 && !text_agrees(&o.text, usage, tokens);
                if over_max || under_events || over_events {
                    a.usage_mismatch += 1;
                    a.usage_over_max_tokens += u64::from(over_max);
                    let d = i64::try_from(usage)
                        .unwrap_or(i64::MAX)
                        .saturating_sub(i64::from(o.chunks));
                    if d.unsigned_abs() > a.largest_difference.unsigned_abs() {
                        a.largest_difference = d;
                    }
                }
            }
            if ignore_eos && asked > 0 {
                a.ignore_eos_requests += 1;
                a.short_outputs += u64::from(output < asked);
                a.requested_tokens = a.requested_tokens.saturating_add(asked);
                a.returned_tokens = a.returned_tokens.saturating_add(output);
            }
        }
        if a.requested_tokens > 0 {
            a.output_ratio = Some(a.returned_tokens as f64 / a.requested_tokens as f64 * 100.0);
        }
        a
    }

    /// The console's and report's warnings.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.usage_mismatch > 0 {
            let over = if self.usage_over_max_tokens > 0 {
                format!(
                    ", {} of them above the max_tokens they asked for",
                    self.usage_over_max_tokens
                )
            } else {
                String::new()
            };
            let rest = if self.corrected == self.usage_mismatch {
                "; none was believed: their streamed token events were counted instead".to_string()
            } else if self.corrected > 0 {
                format!(
                    "; {} could not be true (above max_tokens or below the events streamed) and were replaced by the events counted, the rest's token counts and TPOT rest on the server's word",
                    self.corrected
                )
            } else {
                ": output token counts and TPOT rest on the server's word".to_string()
            };
            w.push(format!(
                "{} request(s) got a usage.completion_tokens that disagrees with the token events they streamed (largest difference {:+}{over}){rest}",
                self.usage_mismatch, self.largest_difference
            ));
        }
        if self.short_outputs > 0 {
            w.push(format!(
                "{} of {} request(s) sent with ignore_eos returned fewer tokens than they asked for ({} of {} tokens, {:.1}%): the server cut outputs short",
                self.short_outputs,
                self.ignore_eos_requests,
                self.returned_tokens,
                self.requested_tokens,
                self.output_ratio.unwrap_or(0.0)
            ));
        }
        if self.saturated {
            w.push("a token total reached the largest countable number (18446744073709551615) and stopped there: the server's usage is not believable".into());
        }
        w
    }
}

/// Whether `text`, counted with the case's tokenizer, agrees with `usage` (within 10%
/// or two tokens). A tokenizer on the server is not asked (one call per request).
fn text_agrees(text: &str, usage: u64, tokens: Option<&TokenModel>) -> bool {
    match tokens {
        None | Some(TokenModel::Server(_)) => false,
        Some(t) => {
            let n = t.count(text) as u64;
            n.abs_diff(usage) <= (usage / 10).max(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::sample::Sample;

    fn rec(
        chunks: u32,
        reads: u32,
        itl: Vec<f64>,
        usage: Option<u64>,
        asked: u64,
    ) -> RequestRecord {
        RequestRecord {
            index: 0,
            scheduled: 0.0,
            dispatched: 0.0,
            start: 0.0,
            written: None,
            connect: None,
            prompt_len: 4,
            expected_output_len: asked,
            sample: Sample {
                success: true,
                chunks,
                token_reads: reads,
                itl,
                usage_completion: usage,
                text: " a".repeat(chunks as usize),
                ..Sample::default()
            },
            turn: None,
        }
    }

    #[test]
    fn events_in_pairs_are_batched_and_one_per_read_is_not() {
        // Ten events in five reads: every second gap is zero.
        let pairs = rec(
            10,
            5,
            [0.0, 0.02].repeat(4).into_iter().chain([0.0]).collect(),
            None,
            10,
        );
        let d = Delivery::of(&[&pairs]);
        assert_eq!(d.events_per_read, 2.0);
        assert!((d.near_zero_itl_percent - 5.0 / 9.0 * 100.0).abs() < 1e-9);
        assert!(d.batched && d.warning().unwrap().contains("2.00 events per read"));
        let single = rec(10, 10, vec![0.01; 9], None, 10);
        let d = Delivery::of(&[&single]);
        assert_eq!((d.events_per_read, d.batched), (1.0, false));
        assert!(d.warning().is_none());
    }

    #[test]
    fn usage_is_checked_against_events_max_tokens_and_text() {
        let builtin = TokenModel::Builtin;
        // Agrees: usage = events.
        let fine = rec(10, 10, vec![0.01; 9], Some(10), 10);
        // Lies up: 1000 tokens claimed for 10 events and max_tokens 10.
        let high = rec(10, 10, vec![0.01; 9], Some(1000), 10);
        // Lies down: 3 tokens claimed for 10 events.
        let low = rec(10, 10, vec![0.01; 9], Some(3), 10);
        let a = TokenAccounting::of(&[&fine, &high, &low], &[10, 1000, 3], true, Some(&builtin));
        assert_eq!((a.usage_mismatch, a.usage_over_max_tokens), (2, 1));
        assert_eq!(a.largest_difference, 990);
        // The low one returned 3 of 10 asked: short.
        assert_eq!((a.short_outputs, a.ignore_eos_requests), (1, 3));
        assert_eq!((a.requested_tokens, a.returned_tokens), (30, 1013));
        assert_eq!(a.warnings().len(), 2);
        // Several tokens an event with a text that agrees: believed.
        let mut multi = rec(5, 5, vec![0.01; 4], Some(10), 10);
        multi.sample.text = " a".repeat(10);
        let a = TokenAccounting::of(&[&multi], &[10], false, Some(&builtin));
        assert_eq!(a.usage_mismatch, 0);
        assert_eq!(a.output_ratio, None, "no ignore_eos, no ratio");
        // Without a tokenizer to check the text, it is counted.
        let a = TokenAccounting::of(&[&multi], &[10], false, None);
        assert_eq!(a.usage_mismatch, 1);
    }

    #[test]
    fn a_truncating_server_has_a_low_output_ratio() {
        let cut: Vec<RequestRecord> = (0..4).map(|_| rec(2, 2, vec![0.01], Some(2), 32)).collect();
        let refs: Vec<&RequestRecord> = cut.iter().collect();
        let a = TokenAccounting::of(&refs, &[2, 2, 2, 2], true, None);
        assert_eq!(a.short_outputs, 4);
        assert_eq!(a.output_ratio, Some(6.25));
        assert_eq!(a.usage_mismatch, 0);
    }
}
