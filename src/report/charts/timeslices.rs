//! Each case over time from its timeslices (`benchplan.timeslices`, `report.timeslice`):
//! requests in flight, started and finished per slice above, TTFT P50 and P99 and TPOT
//! P50 of the requests sent in each slice below. Drawn for cases with two or more slices.

use serde_json::{Map, Value};

use super::chart::{Chart, file_part};
use super::server::{Panel, svg};
use crate::report::view::CaseView;
use crate::results::read::CaseFile;

pub fn draw<'a>(
    cases: &[CaseView],
    result: &dyn Fn(&str) -> Option<&'a Map<String, Value>>,
) -> Vec<Chart> {
    let mut out = Vec::new();
    for c in cases {
        let Some(r) = result(&c.id) else { continue };
        let slices = CaseFile::new(r).timeslices();
        if slices.len() < 2 {
            continue;
        }
        let num = |s: &Map<String, Value>, k: &str| s.get(k).and_then(Value::as_f64);
        // A slice's counts at its end; its latencies at its middle.
        let at_end = |k: &str| -> Vec<(f64, f64)> {
            slices
                .iter()
                .filter_map(|s| Some((num(s, "end_s")?, num(s, k)?)))
                .collect()
        };
        let at_mid = |k: &str| -> Vec<(f64, f64)> {
            slices
                .iter()
                .filter(|s| num(s, "completed").is_some_and(|n| n > 0.0))
                .filter_map(|s| Some(((num(s, "start_s")? + num(s, "end_s")?) / 2.0, num(s, k)?)))
                .collect()
        };
        let t: Vec<f64> = std::iter::once(0.0)
            .chain(slices.iter().filter_map(|s| num(s, "end_s")))
            .collect();
        let counts = [
            ("in flight", at_end("in_flight")),
            ("started", at_end("started")),
            ("finished", at_end("finished")),
        ];
        let bottom = Panel {
            desc: "ms",
            lines: vec![
                ("TTFT P50", at_mid("median_ttft_ms")),
                ("TTFT P99", at_mid("p99_ttft_ms")),
                ("TPOT P50", at_mid("median_tpot_ms")),
            ],
            max: None,
        };
        let title = format!("Timeslices of {}", c.id);
        match svg(&title, &t, &counts, &bottom) {
            Ok(s) => {
                let mut ch = Chart::new(
                    "timeslices",
                    title,
                    &format!("timeslices_{}", file_part(&c.id)),
                    s,
                );
                ch.view.case = Some(c.id.clone());
                ch.view.service = Some(c.service.clone());
                out.push(ch);
            }
            Err(e) => eprintln!("warning: cannot draw the timeslices of {}: {e}", c.id),
        }
    }
    out
}
