//! Production traces replayed with their prefix structure (`dataset = { name = "trace",
//! … }`): Mooncake, Bailian, agentic sessions and length-only traces.
//!
//! Each hash id of a row stands for one block of `block_size` tokens (the row's last
//! block holds the rest of its `input_length`). A block's tokens are derived from the
//! plan's seed, the id and the block's length with a stable hash (FNV-1a, then
//! SplitMix64), so two runs, two shards and two machines send byte-identical prompts
//! for the same row; vLLM's `timed_trace` uses Python's per-process salted `hash()`,
//! which does not. The tokens are whole-word tokens of the case's tokenizer, each one
//! token however it is joined (`TokenModel::word_table`), so a prompt re-tokenizes to
//! exactly `input_length` tokens and rows that share leading ids share exactly that
//! many blocks of text as a prefix.
//!
//! A row is consistent when `ceil(input_length / block_size) == len(hash_ids)`; an
//! inconsistent row is refused with its line and both numbers, or, with
//! `fit_inconsistent`, fitted (ids dropped, or unshared ids added) and counted.

mod formats;
mod prompts;
mod read;
mod reuse;
mod row;

pub use formats::datetime_seconds;
pub use prompts::{build, digest, prompt, sessions};
pub use read::{parse, read, window};
pub use reuse::{Percentiles, Reuse, Stats, detect, expected_per_row, expected_reuse, stats};
pub use row::{Row, Trace};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::trace::{TraceDataset, TraceFormat};
    use crate::tokenizer::TokenModel;

    /// FNV-1a of the committed Mooncake slice's 40 prompts (seed 0, built-in tokenizer).
    const PINNED_SLICE_DIGEST: u64 = 0xab34_cef4_bc18_1cf2;

    fn mooncake(text: &str) -> Trace {
        parse(text, "t.jsonl", &TraceDataset::default()).unwrap()
    }

    #[test]
    fn shared_leading_ids_are_shared_text_prefixes_of_exact_length() {
        let t = mooncake(
            "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 5, \"hash_ids\": [1, 2, 3]}\n\
             {\"timestamp\": 500, \"input_length\": 1030, \"output_length\": 5, \"hash_ids\": [1, 2, 4]}\n",
        );
        let tokens = TokenModel::Builtin;
        let words = tokens.word_table().unwrap();
        let (a, b) = (
            prompt(&t.rows[0], 512, 7, &words),
            prompt(&t.rows[1], 512, 7, &words),
        );
        assert_eq!(tokens.count(&a), 1100);
        assert_eq!(tokens.count(&b), 1030);
        // Two shared blocks: exactly 1024 tokens of common text, then they differ.
        let common = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
        assert_eq!(tokens.count(&a[..common]), 1024);
        // The same everywhere: the same seed gives the same text, another seed not.
        assert_eq!(a, prompt(&t.rows[0], 512, 7, &words));
        assert_ne!(a, prompt(&t.rows[0], 512, 8, &words));
    }

    /// The first `k` blocks of `row`, as text.
    fn head(row: &Row, k: usize, words: &[String]) -> String {
        let mut r = row.clone();
        r.ids.truncate(k);
        r.input = 512 * k as u64;
        prompt(&r, 512, 0, words)
    }

    #[test]
    fn every_prompt_of_the_committed_slice_is_exact_shared_and_the_same_everywhere() {
        let t = mooncake(include_str!(
            "../../../tests/fixtures/traces/mooncake-conversation-4181-4220.jsonl"
        ));
        let tokens = TokenModel::Builtin;
        let words = tokens.word_table().unwrap();
        let prompts: Vec<String> = t.rows.iter().map(|r| prompt(r, 512, 0, &words)).collect();
        let mut digest = crate::hash::FnvWriter::default();
        for (r, p) in t.rows.iter().zip(&prompts) {
            assert_eq!(tokens.count(p) as u64, r.input, "line {}", r.line);
            digest.update(p.as_bytes());
        }
        // Rows that share leading blocks share exactly that text, then differ.
        let mut pairs = 0;
        for i in 0..t.rows.len() {
            for j in i + 1..t.rows.len() {
                let (a, b) = (&t.rows[i], &t.rows[j]);
                let k = (0..a.ids.len().min(b.ids.len()))
                    .take_while(|&k| {
                        a.ids[k] == b.ids[k] && a.block_len(k, 512) == b.block_len(k, 512)
                    })
                    .count();
                if k == 0 || k == a.ids.len() || k == b.ids.len() {
                    continue;
                }
                let shared = head(a, k, &words);
                assert!(prompts[i].starts_with(&shared) && prompts[j].starts_with(&shared));
                assert_ne!(head(a, k + 1, &words), head(b, k + 1, &words));
                pairs += 1;
            }
        }
        assert!(pairs > 100, "{pairs}");
        // A stable hash: any machine, any run, any process builds these bytes (a
        // process-salted hash, as vLLM's timed_trace uses, would not).
        assert_eq!(digest.0, PINNED_SLICE_DIGEST, "{:#x}", digest.0);
    }

    #[test]
    fn an_inconsistent_row_is_refused_with_its_line_or_fitted_and_counted() {
        let text = "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]}\n\
                    {\"timestamp\": 1, \"input_length\": 1600, \"output_length\": 5, \"hash_ids\": [1, 2]}\n";
        let e = parse(text, "t.jsonl", &TraceDataset::default()).unwrap_err();
        assert!(
            e.contains("t.jsonl:2: input_length 1600 needs 4 blocks of 512 tokens, but the row has 2 hash ids"),
            "{e}"
        );
        let d = TraceDataset {
            fit_inconsistent: true,
            ..TraceDataset::default()
        };
        let t = parse(text, "t.jsonl", &d).unwrap();
        assert_eq!((t.fitted, t.rows[1].ids.len()), (1, 4));
    }

    #[test]
    fn a_window_replays_a_slice_by_trace_time_or_by_rows() {
        let t = mooncake(include_str!(
            "../../../tests/fixtures/traces/mooncake-conversation-4181-4220.jsonl"
        ));
        let lines = |d: &TraceDataset, n: usize| -> Vec<usize> {
            window(&t, d, n).iter().map(|r| r.line).collect()
        };
        let all = TraceDataset::default();
        assert_eq!(lines(&all, 100).len(), 40);
        assert_eq!(lines(&all, 5), [1, 2, 3, 4, 5]);
        let rows = TraceDataset {
            window: Some(crate::plan::trace::TraceWindow {
                rows: Some([10, 12]),
                ..Default::default()
            }),
            ..TraceDataset::default()
        };
        assert_eq!(lines(&rows, 100), [10, 11, 12]);
        // From 3 s of trace time for 3 s: the rows stamped in [3 s, 6 s) after the first.
        let secs = TraceDataset {
            window: Some(crate::plan::trace::TraceWindow {
                start: Some(crate::plan::units::Dur::from_secs_f64(3.0)),
                duration: Some(crate::plan::units::Dur::from_secs_f64(3.0)),
                rows: None,
            }),
            ..TraceDataset::default()
        };
        let t0 = t.rows[0].t.unwrap();
        for l in lines(&secs, 100) {
            let rel = t.rows[l - 1].t.unwrap() - t0;
            assert!((3.0..6.0).contains(&rel), "line {l} at {rel}");
        }
        assert!(!lines(&secs, 100).is_empty());
    }

    #[test]
    fn rows_go_at_their_scaled_trace_times_or_in_order_at_the_cases_pace() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let d = TraceDataset {
            path: Some("tests/fixtures/traces/mooncake-conversation-4181-4220.jsonl".into()),
            time_scale: 0.5,
            ..TraceDataset::default()
        };
        let inputs = build(&d, 40, 0, &TokenModel::Builtin, dir).unwrap();
        let t = read(&d, dir).unwrap();
        let t0 = t.rows[0].t.unwrap();
        for (i, r) in inputs.iter().zip(&t.rows) {
            assert_eq!(i.arrival, Some((r.t.unwrap() - t0) * 0.5));
            assert_eq!((i.prompt_len, i.output_len), (r.input, r.output.max(1)));
        }
        // Without timestamps: no arrival of their own, the rows in trace order.
        let order = TraceDataset {
            timestamps: false,
            ..d
        };
        let again = build(&order, 40, 0, &TokenModel::Builtin, dir).unwrap();
        assert!(again.iter().all(|i| i.arrival.is_none()));
        let lens: Vec<u64> = again.iter().map(|i| i.prompt_len).collect();
        let rows: Vec<u64> = t.rows.iter().map(|r| r.input).collect();
        assert_eq!(lens, rows);
    }

    #[test]
    fn reuse_counts_leading_blocks_seen_before_and_an_lru_forgets() {
        let t = mooncake(
            "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": [1, 2]}\n\
             {\"timestamp\": 1, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": [3, 4]}\n\
             {\"timestamp\": 2, \"input_length\": 1536, \"output_length\": 1, \"hash_ids\": [1, 2, 5]}\n\
             {\"timestamp\": 3, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": [6, 2]}\n",
        );
        let rows: Vec<&Row> = t.rows.iter().collect();
        // Row 3 reuses 1024 of its 1536; row 4's block 2 follows an unseen 6: a miss.
        let r = expected_reuse(&rows, 512, None);
        assert_eq!((r.tokens, r.reused), (4608, 1024));
        // Two blocks of room: by row 3, blocks 1 and 2 were pushed out by 3 and 4.
        assert_eq!(expected_reuse(&rows, 512, Some(2)).reused, 0);
    }

    #[test]
    fn bailian_sessions_follow_parents_and_lengths_read_azure_times() {
        let d = TraceDataset {
            format: TraceFormat::Bailian,
            ..TraceDataset::default()
        };
        let t = parse(
            "{\"chat_id\": 10, \"parent_chat_id\": -1, \"timestamp\": 1.5, \"input_length\": 20, \"output_length\": 3, \"type\": \"text\", \"turn\": 1, \"hash_ids\": [1, 2]}\n\
             {\"chat_id\": 11, \"parent_chat_id\": 10, \"timestamp\": 4.0, \"input_length\": 40, \"output_length\": 3, \"type\": \"text\", \"turn\": 2, \"hash_ids\": [1, 2, 3]}\n",
            "b.jsonl",
            &d,
        )
        .unwrap();
        assert_eq!(t.block, 16);
        assert_eq!(t.rows[1].session.as_deref(), Some("10"));
        assert_eq!(t.rows[1].t, Some(4.0));
        let d = TraceDataset {
            format: TraceFormat::Lengths,
            ..TraceDataset::default()
        };
        let t = parse(
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.5000000,374,44\n2023-11-16 18:15:50.0000000,396,109\n",
            "azure.csv",
            &d,
        )
        .unwrap();
        assert_eq!(t.rows[1].t.unwrap() - t.rows[0].t.unwrap(), 3.5);
        assert_eq!(datetime_seconds("1970-01-02 00:00:01"), Some(86_401.0));
        assert_eq!(detect("TIMESTAMP,ContextTokens\n"), TraceFormat::Lengths);
    }
}
