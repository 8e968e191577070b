//! The sweep's throughput–latency curve: output tokens/s against TTFT (and TPOT) P50
//! and P99, one line per service and workload, each point labelled by the swept value
//! (concurrency or request rate). It tells in one look where the knee is.

use plotters::prelude::*;
use serde_json::{Map, Value};

use super::style::{FONT, SIZE, color, err, range};
use super::{CaseView, Chart};

/// One line: a service (and workload), its points in swept order.
struct Line {
    name: String,
    /// (output tok/s, P50 ms, P99 ms, label)
    points: Vec<(f64, Option<f64>, Option<f64>, String)>,
}

fn swept(c: &CaseView) -> (f64, String) {
    match c.concurrency {
        Some(n) => (n as f64, format!("c={n}")),
        None => {
            let v = if c.rate == "inf" {
                f64::INFINITY
            } else {
                c.rate.parse().unwrap_or(f64::NAN)
            };
            (v, format!("r={}", c.rate))
        }
    }
}

fn lines<'a>(
    cases: &[CaseView],
    result: &dyn Fn(&str) -> Option<&'a Map<String, Value>>,
    metric: &str,
) -> Vec<Line> {
    let mut groups: Vec<(String, Vec<(f64, &CaseView)>)> = Vec::new();
    for c in cases
        .iter()
        .filter(|c| c.status == "ok" && c.out_tok_s.is_some())
    {
        let mut name = c.service.clone();
        for (k, v) in &c.axes {
            name.push_str(&format!(" {k}={v}"));
        }
        let key = swept(c).0;
        match groups.iter_mut().find(|(n, _)| *n == name) {
            Some(g) => g.1.push((key, c)),
            None => groups.push((name, vec![(key, c)])),
        }
    }
    groups
        .into_iter()
        .map(|(name, mut members)| {
            members.sort_by(|a, b| a.0.total_cmp(&b.0));
            let points = members
                .iter()
                .map(|(_, c)| {
                    let r = result(&c.id);
                    let get = |k: String| r.and_then(|r| r.get(&k)).and_then(Value::as_f64);
                    (
                        c.out_tok_s.unwrap_or(0.0),
                        get(format!("median_{metric}_ms")),
                        get(format!("p99_{metric}_ms")),
                        swept(c).1,
                    )
                })
                .collect();
            Line { name, points }
        })
        .collect()
}

/// The curves, when some service has two or more measured cases.
pub fn draw<'a>(
    cases: &[CaseView],
    result: &dyn Fn(&str) -> Option<&'a Map<String, Value>>,
) -> Vec<Chart> {
    let mut out = Vec::new();
    for (metric, label) in [("ttft", "TTFT"), ("tpot", "TPOT")] {
        let ls = lines(cases, result, metric);
        if !ls.iter().any(|l| l.points.len() >= 2) {
            continue;
        }
        match svg(&ls, label) {
            Ok(svg) => out.push(Chart::new(
                "pareto",
                format!("Output throughput vs {label} (P50 solid, P99 dashed)"),
                &format!("throughput_vs_{metric}"),
                svg,
            )),
            Err(e) => eprintln!("warning: cannot draw the throughput–{label} chart: {e}"),
        }
    }
    out
}

fn svg(lines: &[Line], label: &str) -> Result<String, String> {
    let xs = range(
        lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)),
        true,
    );
    let ys = range(
        lines
            .iter()
            .flat_map(|l| l.points.iter().flat_map(|p| [p.1, p.2]).flatten()),
        true,
    );
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("Output throughput vs {label}"), (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(xs, ys)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("output tokens/s")
            .y_desc(format!("{label} (ms)"))
            .label_style((FONT, 12))
            .draw()
            .map_err(err)?;
        for (i, l) in lines.iter().enumerate() {
            let c = color(i);
            for (p99, pick) in [(false, 1usize), (true, 2)] {
                let pts: Vec<(f64, f64, &str)> = l
                    .points
                    .iter()
                    .filter_map(|p| {
                        let y = if pick == 1 { p.1 } else { p.2 };
                        y.map(|y| (p.0, y, p.3.as_str()))
                    })
                    .collect();
                if pts.is_empty() {
                    continue;
                }
                let xy: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1)).collect();
                let name = format!("{} {}", l.name, if p99 { "P99" } else { "P50" });
                let style = c.stroke_width(2);
                let legend = move |(x, y): (i32, i32)| {
                    PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(2))
                };
                if p99 {
                    chart
                        .draw_series(DashedLineSeries::new(xy.clone(), 6, 4, style))
                        .map_err(err)?
                        .label(name)
                        .legend(legend);
                } else {
                    chart
                        .draw_series(LineSeries::new(xy.clone(), style))
                        .map_err(err)?
                        .label(name)
                        .legend(legend);
                }
                // One marker per case: the data points (legend entries are lines).
                chart
                    .draw_series(xy.iter().map(|p| Circle::new(*p, 4, c.filled())))
                    .map_err(err)?;
                if !p99 {
                    chart
                        .draw_series(pts.iter().map(|p| {
                            Text::new(p.2.to_string(), (p.0, p.1), (FONT, 11).into_font())
                        }))
                        .map_err(err)?;
                }
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 12))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(text)
}
