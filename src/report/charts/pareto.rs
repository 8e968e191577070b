//! The sweep's throughput–latency curve: output tokens/s against TTFT (and TPOT) P50
//! and P99, one line per service and workload, each point labelled by the swept value
//! (concurrency or request rate). It tells in one look where the knee is.

use crate::results::read::CaseFile;
use plotters::prelude::*;
use serde_json::{Map, Value};

use super::chart::Chart;
use super::style::{
    Entry, FONT, Marker, PLOT_WIDTH, SIZE, color, draw_slos, err, legend, log_range, log_worthy,
    mesh, near_data, range, slo_lines,
};
use crate::plan::params::Metric;
use crate::report::view::{CaseView, axis_label};
use crate::slo::{Measured, Stat};

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
    metric: Metric,
) -> Vec<Line> {
    let mut groups: Vec<(String, Vec<(f64, &CaseView)>)> = Vec::new();
    for c in cases
        .iter()
        .filter(|c| c.status == "ok" && c.out_tok_s.is_some())
    {
        let mut name = c.service.clone();
        for (k, v) in &c.axes {
            name.push(' ');
            name.push_str(&axis_label(k, v));
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
                    let r = result(&c.id).map(CaseFile::new);
                    let get = |stat: Stat| r.and_then(|r| r.latency(stat, metric));
                    (
                        c.out_tok_s.unwrap_or(0.0),
                        get(Stat::Median),
                        get(Stat::Percentile(99.0)),
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
    for (m, label) in [(Metric::Ttft, "TTFT"), (Metric::Tpot, "TPOT")] {
        let ls = lines(cases, result, m);
        if !ls.iter().any(|l| l.points.len() >= 2) {
            continue;
        }
        let metric = m.name();
        let slos = slo_lines(cases.iter().flat_map(|c| &c.verdicts), metric);
        match svg(&ls, label, &slos) {
            Ok(svg) => out.push(Chart::new(
                "pareto",
                format!("Output throughput vs {label} (P50 solid with circles, P99 dashed with triangles)"),
                &format!("throughput_vs_{metric}"),
                svg,
            )),
            Err(e) => eprintln!("warning: cannot draw the throughput–{label} chart: {e}"),
        }
    }
    out
}

/// The chart: the latency axis logarithmic when the lines span more than 10× (a 70 ms
/// service beside a 5 s one), P50 solid with circles and P99 dashed with triangles,
/// each point labelled with its swept value, each latency SLO on this metric a grey
/// line, the legend beside the plot.
fn svg(lines: &[Line], label: &str, slos: &[(String, f64)]) -> Result<String, String> {
    let xs = range(
        lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)),
        true,
    );
    let data_max = lines
        .iter()
        .flat_map(|l| l.points.iter().flat_map(|p| [p.1, p.2]).flatten())
        .fold(0.0f64, f64::max);
    let (slos, far) = near_data(slos, data_max);
    let slos = &slos;
    let ys_vals: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().flat_map(|p| [p.1, p.2]).flatten())
        .chain(slos.iter().map(|s| s.1))
        .collect();
    let (lo, hi) = ys_vals.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        (lo.min(*v), hi.max(*v))
    });
    let log = log_worthy(lo, hi);
    let mut entries = Vec::new();
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, side) = root.split_horizontally(PLOT_WIDTH);
        let caption = format!(
            "Output throughput vs {label}{}",
            if log { " (log scale)" } else { "" }
        );
        macro_rules! body {
            ($chart:ident) => {{
                mesh(
                    &mut $chart,
                    "output tokens/s",
                    &format!("{label} (ms)"),
                    log,
                )?;
                draw_slos(
                    &mut $chart,
                    slos,
                    |ms| [(xs.start, ms), (xs.end, ms)],
                    |ms| (xs.start + (xs.end - xs.start) * 0.01, ms),
                )?;
                for (i, l) in lines.iter().enumerate() {
                    let c = color(i);
                    for p99 in [false, true] {
                        let pts: Vec<(f64, f64, &str)> = l
                            .points
                            .iter()
                            .filter_map(|p| {
                                let y = if p99 { p.2 } else { p.1 };
                                y.filter(|y| !log || *y > 0.0)
                                    .map(|y| (p.0, y, p.3.as_str()))
                            })
                            .collect();
                        if pts.is_empty() {
                            continue;
                        }
                        let xy: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1)).collect();
                        let style = c.stroke_width(2);
                        if p99 {
                            $chart
                                .draw_series(DashedLineSeries::new(xy.clone(), 6, 4, style))
                                .map_err(err)?;
                            $chart
                                .draw_series(
                                    xy.iter().map(|p| TriangleMarker::new(*p, 5, c.filled())),
                                )
                                .map_err(err)?;
                        } else {
                            $chart
                                .draw_series(LineSeries::new(xy.clone(), style))
                                .map_err(err)?;
                            $chart
                                .draw_series(xy.iter().map(|p| Circle::new(*p, 4, c.filled())))
                                .map_err(err)?;
                            $chart
                                .draw_series(pts.iter().map(|p| {
                                    Text::new(p.2.to_string(), (p.0, p.1), (FONT, 11).into_font())
                                }))
                                .map_err(err)?;
                        }
                        entries.push(Entry {
                            name: format!("{} {}", l.name, if p99 { "P99" } else { "P50" }),
                            color: c,
                            dashed: p99,
                            marker: if p99 {
                                Marker::Triangle
                            } else {
                                Marker::Circle
                            },
                        });
                    }
                }
            }};
        }
        let builder = |area| {
            let mut b = ChartBuilder::on(area);
            b.caption(&caption, (FONT, 18))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(64);
            b
        };
        if log {
            let ys = log_range(ys_vals.iter().copied());
            let mut chart = builder(&plot)
                .build_cartesian_2d(xs.clone(), ys.log_scale())
                .map_err(err)?;
            body!(chart);
        } else {
            let ys = range(ys_vals.iter().copied(), true);
            let mut chart = builder(&plot)
                .build_cartesian_2d(xs.clone(), ys)
                .map_err(err)?;
            body!(chart);
        }
        entries.extend(far);
        legend(&side, &entries)?;
        root.present().map_err(err)?;
    }
    Ok(text)
}
