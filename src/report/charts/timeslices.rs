//! Each case over time from its timeslices (`benchplan.timeslices`, `report.timeslice`):
//! requests in flight, started and finished per slice above, TTFT P50 and P99 and TPOT
//! P50 of the requests sent in each slice below, each a step over its slice. Drawn for
//! cases with two or more slices.

use serde_json::{Map, Value};

use super::chart::{Chart, file_part};
use super::server::{Panel, Series, Step, held, svg};
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
        // A slice's figure over its slice, marked at its middle; the number in flight
        // is read at each slice's end and held to the next.
        let over = |k: &str, measured_only: bool| -> Series {
            slices
                .iter()
                .filter(|s| !measured_only || num(s, "completed").is_some_and(|n| n > 0.0))
                .filter_map(|s| {
                    let (from, to) = (num(s, "start_s")?, num(s, "end_s")?);
                    Some(Step {
                        from,
                        to,
                        at: (from + to) / 2.0,
                        v: num(s, k)?,
                    })
                })
                .collect()
        };
        let in_flight: Vec<(f64, f64)> = slices
            .iter()
            .filter_map(|s| Some((num(s, "end_s")?, num(s, "in_flight")?)))
            .collect();
        let t: Vec<f64> = std::iter::once(0.0)
            .chain(slices.iter().filter_map(|s| num(s, "end_s")))
            .collect();
        let counts = [
            ("in flight", held(&in_flight)),
            ("started", over("started", false)),
            ("finished", over("finished", false)),
        ];
        let bottom = Panel {
            desc: "ms",
            lines: vec![
                ("TTFT P50", over("median_ttft_ms", true)),
                ("TTFT P99", over("p99_ttft_ms", true)),
                ("TPOT P50", over("median_tpot_ms", true)),
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
