//! The console result of `benchplan bench`: vLLM's "Serving Benchmark Result" block,
//! then benchplan's failures by kind and, for multi-turn cases, the per-turn table.

use crate::metrics::summary::Summary;
use crate::metrics::turns::MultiTurnSummary;
use crate::plan::CaseParams;
use crate::slo::percentile_label;

/// vLLM's "Serving Benchmark Result" block, line for line as `benchmark()` prints it
/// (`{:<40} {:<10}`; TTFT, TPOT, ITL and token totals only with a tokenizer).
pub fn vllm_block(s: &Summary, p: &CaseParams) -> String {
    use std::fmt::Write;
    let mut out = format!("{:=^50}\n", " Serving Benchmark Result ");
    let o = &mut out;
    let line = |o: &mut String, k: &str, v: String| {
        let _ = writeln!(o, "{k:<40} {v:<10}");
    };
    let tok = s.has_tokenizer;
    line(o, "Successful requests:", s.completed.to_string());
    line(o, "Failed requests:", s.failed.to_string());
    if let Some(c) = p.max_concurrency {
        line(o, "Maximum request concurrency:", c.to_string());
    }
    if p.request_rate.is_finite() {
        line(
            o,
            "Request rate configured (RPS):",
            format!("{:.2}", p.request_rate.0),
        );
    }
    line(o, "Benchmark duration (s):", format!("{:.2}", s.duration));
    line(o, "Total input tokens:", s.total_input_tokens.to_string());
    if !s.pooling && tok {
        line(
            o,
            "Total generated tokens:",
            s.total_output_tokens.to_string(),
        );
    }
    line(
        o,
        "Request throughput (req/s):",
        format!("{:.2}", s.request_throughput),
    );
    if s.pooling {
        line(
            o,
            "Input throughput (inputs/s):",
            format!("{:.2}", s.input_sequence_throughput),
        );
    }
    if let (Some(g), false) = (s.request_goodput, s.pooling) {
        line(o, "Request goodput (req/s):", format!("{g:.2}"));
    }
    if !s.pooling {
        if tok {
            line(
                o,
                "Output token throughput (tok/s):",
                format!("{:.2}", s.output_throughput),
            );
            line(
                o,
                "Peak output token throughput (tok/s):",
                format!("{:.2}", s.max_output_tokens_per_s),
            );
        }
        line(
            o,
            "Peak concurrent requests:",
            format!("{:.2}", s.max_concurrent_requests as f64),
        );
        if s.rtfx > 0.0 {
            line(
                o,
                "RTFx (Inverse Real-Time Factor):",
                format!("{:.2}", s.rtfx),
            );
        }
    }
    if tok {
        line(
            o,
            "Total token throughput (tok/s):",
            format!("{:.2}", s.total_token_throughput),
        );
    }
    for st in &s.stats {
        let (title, short) = match st.metric.name() {
            "ttft" => ("Time to First Token", "TTFT"),
            "tpot" => ("Time per Output Token (excl. 1st token)", "TPOT"),
            "itl" => ("Inter-token Latency", "ITL"),
            "e2el" => ("End-to-end Latency", "E2EL"),
            "client_queue_time" => ("Client-side Queueing", "Client Queue Time"),
            _ => (
                "Queue-inclusive End-to-end Latency",
                "E2EL incl. Client Queue",
            ),
        };
        let _ = writeln!(o, "{:-^50}", title);
        line(o, &format!("Mean {short} (ms):"), format!("{:.2}", st.mean));
        line(
            o,
            &format!("Median {short} (ms):"),
            format!("{:.2}", st.median),
        );
        for (q, v) in &st.percentiles {
            line(
                o,
                &format!("P{} {short} (ms):", percentile_label(*q)),
                format!("{v:.2}"),
            );
        }
    }
    let _ = writeln!(o, "{}", "=".repeat(50));
    out
}

/// vLLM's result block, then benchplan's: failures by kind, where output counts came
/// from, streams cut without `[DONE]`, and the multi-turn tables.
pub fn print_summary(s: &Summary, multi_turn: Option<&MultiTurnSummary>, p: &CaseParams) {
    print!("{}", vllm_block(s, p));
    let line = |k: &str, v: String| println!("{k:<40} {v}");
    if !s.errors_by_kind.is_empty() {
        println!("{:-^50}", "Failures by kind");
        for (k, n) in &s.errors_by_kind {
            line(
                &format!("{k}:"),
                format!(
                    "{n}  (first: {})",
                    s.first_errors.get(k).map_or("", |m| m.as_str())
                ),
            );
        }
    }
    if let Some(src) = s.token_source {
        line("Output tokens counted from:", src.as_str().to_string());
    }
    if s.streams_without_done > 0 {
        line(
            "Streams ended without [DONE]:",
            format!(
                "{}  (counted as vLLM counts them; the server closed them early)",
                s.streams_without_done
            ),
        );
    }
    if let Some(mt) = multi_turn {
        print_turns(mt);
    }
    println!("{}", "=".repeat(50));
}

/// The multi-turn block: conversation outcomes, then one line per turn index.
fn print_turns(mt: &crate::metrics::turns::MultiTurnSummary) {
    let line = |k: &str, v: String| println!("{k:<40}{v}");
    println!("{:-^50}", "Conversations");
    line(
        "Conversations completed:",
        format!(
            "{} of {}",
            mt.conversations_completed, mt.conversations_total
        ),
    );
    line(
        "Conversations ended by a failure:",
        mt.conversations_failed.to_string(),
    );
    if mt.conversations_incomplete > 0 {
        line(
            "Conversations incomplete:",
            mt.conversations_incomplete.to_string(),
        );
    }
    line(
        "Successful turns:",
        format!("{} of {}", mt.turns_successful, mt.turns_planned),
    );
    line(
        "Mean conversation duration (ms):",
        format!("{:.2}", mt.avg_conversation_duration_ms),
    );
    println!("{:-^50}", "Per turn");
    println!(
        "{:>4} {:>5} {:>5} {:>9} {:>9} {:>10} {:>10}",
        "turn", "ok", "fail", "input", "cached", "TTFT ms", "E2EL ms"
    );
    for t in &mt.per_turn {
        let mean = |m: crate::plan::Metric| t.summary.stat(m).map_or(0.0, |x| x.mean);
        println!(
            "{:>4} {:>5} {:>5} {:>9.1} {:>9.1} {:>10.2} {:>10.2}",
            t.turn_index + 1,
            t.summary.completed,
            t.summary.failed,
            t.input_tokens.mean,
            t.mean_cached_tokens,
            mean(crate::plan::Metric::Ttft),
            mean(crate::plan::Metric::E2el)
        );
    }
}
