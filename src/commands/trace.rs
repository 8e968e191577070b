//! `benchplan trace stats FILE`: what a trace will do to a cache, before it is
//! replayed (rows, span, rate over time, lengths, sessions, unbounded-cache reuse).

use std::fmt::Write as _;
use std::path::Path;

use crate::dataset::trace::{Stats, detect, parse, stats as of_trace};
use crate::exit::Exit;
use crate::plan::trace::{TraceDataset, TraceFormat};

/// Prints the statistics of the trace `file` as markdown or JSON.
pub fn stats(
    file: &Path,
    format: Option<&str>,
    block_size: Option<u64>,
    fit_inconsistent: bool,
    out: &str,
) -> Exit {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", file.display());
            return Exit::BadPlan;
        }
    };
    let trace_format = match format {
        Some(f) => serde_json::from_value(serde_json::json!(f)).unwrap_or_default(),
        None => {
            let f = detect(&text);
            eprintln!(
                "trace format: {} (detected; --trace-format to say it)",
                f.as_str()
            );
            f
        }
    };
    let d = TraceDataset {
        format: trace_format,
        block_size,
        fit_inconsistent,
        ..TraceDataset::default()
    };
    for f in d.filled() {
        eprintln!("{} filled {f}", trace_format.as_str());
    }
    let trace = match parse(&text, &file.display().to_string(), &d) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadPlan;
        }
    };
    let s = of_trace(&trace);
    if out == "json" {
        println!(
            "{}",
            serde_json::to_string_pretty(&s).expect("stats serialise")
        );
    } else {
        print!("{}", markdown(&s, trace_format));
    }
    Exit::Ok
}

/// The statistics as markdown.
pub fn markdown(s: &Stats, format: TraceFormat) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# Trace ({}, {}-token blocks)\n",
        format.as_str(),
        s.block_size
    );
    let _ = writeln!(o, "| | |\n|---|---|");
    let _ = writeln!(o, "| rows | {} |", s.rows);
    let _ = writeln!(o, "| span | {:.1} s |", s.span_s);
    let _ = writeln!(o, "| request rate | {:.2} req/s |", s.rate_per_s);
    let _ = writeln!(
        o,
        "| sessions | {} ({:.1} turns each) |",
        s.sessions, s.turns_per_session_mean
    );
    let _ = writeln!(
        o,
        "| prompt tokens an unbounded prefix cache would serve | {:.1}% |",
        s.reuse * 100.0
    );
    let _ = writeln!(o, "| distinct blocks | {} |", s.distinct_blocks);
    let _ = writeln!(o, "| rows fitted to their length | {} |", s.fitted);
    let _ = writeln!(
        o,
        "\n| length | mean | min | P50 | P90 | P99 | max |\n|---|---|---|---|---|---|---|"
    );
    for (name, p) in [("input", &s.input_len), ("output", &s.output_len)] {
        let _ = writeln!(
            o,
            "| {name} | {:.0} | {} | {} | {} | {} | {} |",
            p.mean, p.min, p.p50, p.p90, p.p99, p.max
        );
    }
    if s.rate_by_minute.len() > 1 {
        let _ = writeln!(o, "\nRequests per second, minute by minute:");
        let rates: Vec<String> = s.rate_by_minute.iter().map(|r| format!("{r:.2}")).collect();
        let _ = writeln!(o, "{}", rates.join(", "));
    }
    o
}
