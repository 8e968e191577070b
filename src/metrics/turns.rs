//! Multi-turn metrics (the Rust vllm-bench's `per_turn_metrics`): conversation
//! outcomes, and the full case summary computed over each turn index on its own, so
//! a turn's TTFT, TPOT, ITL and E2EL mean exactly what they mean for the case.

use super::record::RequestRecord;
use super::stats::{mean, percentile_sorted};
use super::summary::{Summary, summarize};
use crate::plan::CaseParams;
use crate::tokenizer::TokenModel;

/// Input-token statistics of one turn index (successful turns; server counts when given).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TokenStats {
    pub mean: f64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// One turn index across all conversations.
#[derive(Debug, Clone, Default)]
pub struct TurnMetrics {
    /// 0 for the first turn.
    pub turn_index: usize,
    /// The case summary over this turn's requests only.
    pub summary: Summary,
    pub input_tokens: TokenStats,
    /// Mean prompt tokens the server reported as served from its prefix cache.
    pub mean_cached_tokens: f64,
}

/// What the conversations of a case did.
#[derive(Debug, Clone, Default)]
pub struct MultiTurnSummary {
    pub conversations_total: u64,
    /// Every planned turn succeeded.
    pub conversations_completed: u64,
    /// Ended by a failed turn.
    pub conversations_failed: u64,
    /// Neither: stopped early (Ctrl-C) or never started.
    pub conversations_incomplete: u64,
    pub turns_planned: u64,
    pub turns_successful: u64,
    /// Successful turns per conversation.
    pub avg_turns_completed: f64,
    /// First send to last answer, over the conversations that started (think time included).
    pub avg_conversation_duration_ms: f64,
    pub per_turn: Vec<TurnMetrics>,
}

/// Computes conversation outcomes and per-turn metrics. `planned` holds each
/// conversation's planned turn count; records without a turn are ignored.
pub fn summarize_turns(
    records: &[RequestRecord],
    planned: &[u32],
    duration: f64,
    params: &CaseParams,
    tokens: Option<&TokenModel>,
) -> MultiTurnSummary {
    let mut by_conv: Vec<Vec<&RequestRecord>> = vec![Vec::new(); planned.len()];
    let mut max_turn = 0;
    for r in records {
        if let Some(t) = r.turn
            && let Some(list) = by_conv.get_mut(t.conversation as usize)
        {
            list.push(r);
            max_turn = max_turn.max(t.turn as usize + 1);
        }
    }
    let mut s = MultiTurnSummary {
        conversations_total: planned.len() as u64,
        turns_planned: planned.iter().map(|&p| u64::from(p)).sum(),
        ..MultiTurnSummary::default()
    };
    let mut durations = Vec::new();
    for (recs, &want) in by_conv.iter().zip(planned) {
        let ok = recs.iter().filter(|r| r.sample.success).count();
        s.turns_successful += ok as u64;
        if recs.iter().any(|r| !r.sample.success) {
            s.conversations_failed += 1;
        } else if ok == want as usize {
            s.conversations_completed += 1;
        } else {
            s.conversations_incomplete += 1;
        }
        if !recs.is_empty() {
            let first = recs.iter().map(|r| r.start).fold(f64::INFINITY, f64::min);
            let last = recs
                .iter()
                .map(|r| r.start + r.sample.latency)
                .fold(f64::NEG_INFINITY, f64::max);
            durations.push((last - first) * 1e3);
        }
    }
    s.avg_turns_completed = if planned.is_empty() {
        0.0
    } else {
        s.turns_successful as f64 / planned.len() as f64
    };
    s.avg_conversation_duration_ms = mean(&durations);
    for k in 0..max_turn {
        let subset: Vec<RequestRecord> = records
            .iter()
            .filter(|r| r.turn.is_some_and(|t| t.turn as usize == k))
            .cloned()
            .collect();
        let summary = summarize(&subset, duration, params, tokens);
        let ok: Vec<&RequestRecord> = subset.iter().filter(|r| r.sample.success).collect();
        let mut inputs: Vec<f64> = ok
            .iter()
            .map(|r| r.sample.usage_prompt.unwrap_or(r.prompt_len) as f64)
            .collect();
        inputs.sort_by(f64::total_cmp);
        let cached: Vec<f64> = ok
            .iter()
            .map(|r| r.sample.cached_tokens.unwrap_or(0) as f64)
            .collect();
        s.per_turn.push(TurnMetrics {
            turn_index: k,
            summary,
            input_tokens: TokenStats {
                mean: mean(&inputs),
                median: percentile_sorted(&inputs, 50.0),
                min: inputs.first().copied().unwrap_or(0.0),
                max: inputs.last().copied().unwrap_or(0.0),
            },
            mean_cached_tokens: mean(&cached),
        });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::record::TurnRef;
    use crate::metrics::sample::{RequestError, Sample};
    use crate::plan::Metric;

    fn rec(conv: u32, turn: u32, start: f64, ttft: f64, prompt: u64, ok: bool) -> RequestRecord {
        RequestRecord {
            index: (conv * 10 + turn) as usize,
            scheduled: start,
            dispatched: start,
            start,
            written: None,
            connect: None,
            prompt_len: prompt,
            expected_output_len: 3,
            sample: Sample {
                success: ok,
                ttft,
                latency: ttft + 0.02,
                itl: vec![0.01, 0.01],
                chunks: 3,
                done: true,
                usage_completion: Some(3),
                usage_prompt: Some(prompt),
                cached_tokens: Some(prompt / 2),
                error: (!ok).then(|| RequestError {
                    kind: "http_500".into(),
                    message: "boom".into(),
                }),
                ..Sample::default()
            },
            turn: Some(TurnRef {
                conversation: conv,
                turn,
            }),
        }
    }

    #[test]
    fn conversations_and_turns_by_hand() {
        // Conversation 0: three good turns. 1: second turn fails. 2: one of two turns
        // (stopped early).
        let records = vec![
            rec(0, 0, 0.0, 0.100, 10, true),
            rec(0, 1, 1.0, 0.050, 30, true),
            rec(0, 2, 2.0, 0.060, 50, true),
            rec(1, 0, 0.0, 0.200, 20, true),
            rec(1, 1, 1.5, 0.0, 40, false),
            rec(2, 0, 0.5, 0.300, 12, true),
        ];
        let params = CaseParams {
            metric_percentiles: vec![50.0],
            ..CaseParams::default()
        };
        let tokens = crate::tokenizer::TokenModel::Builtin;
        let s = summarize_turns(&records, &[3, 3, 2], 10.0, &params, Some(&tokens));
        assert_eq!(
            (
                s.conversations_total,
                s.conversations_completed,
                s.conversations_failed,
                s.conversations_incomplete
            ),
            (3, 1, 1, 1)
        );
        assert_eq!((s.turns_planned, s.turns_successful), (8, 5));
        assert!((s.avg_turns_completed - 5.0 / 3.0).abs() < 1e-12);
        // Durations: conv 0 from 0 to 2.08, conv 1 from 0 to 1.52 (the failure's
        // latency counts), conv 2 from 0.5 to 0.82.
        let want = (2080.0 + 1520.0 + 320.0) / 3.0;
        assert!((s.avg_conversation_duration_ms - want).abs() < 1e-9);
        assert_eq!(s.per_turn.len(), 3);
        let t0 = &s.per_turn[0];
        assert_eq!((t0.summary.completed, t0.summary.failed), (3, 0));
        let ttft = t0.summary.stat(Metric::Ttft).unwrap();
        assert!((ttft.mean - 200.0).abs() < 1e-9 && (ttft.median - 200.0).abs() < 1e-9);
        assert_eq!(
            t0.input_tokens,
            TokenStats {
                mean: 14.0,
                median: 12.0,
                min: 10.0,
                max: 20.0
            }
        );
        assert!((t0.mean_cached_tokens - 7.0).abs() < 1e-12); // (5 + 10 + 6) / 3
        let t1 = &s.per_turn[1];
        assert_eq!((t1.summary.completed, t1.summary.failed), (1, 1));
        assert_eq!(t1.summary.errors_by_kind["http_500"], 1);
        assert_eq!(t1.input_tokens.mean, 30.0);
        assert_eq!(s.per_turn[2].summary.completed, 1);
    }
}
