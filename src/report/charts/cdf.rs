//! TTFT and ITL distributions: the cumulative share of requests (tokens, for ITL)
//! at or below each latency, from the HDR histograms each result keeps
//! (`benchplan.histograms_us`), one line per case, one chart per service and metric.

use crate::results::read::CaseFile;
use plotters::prelude::*;
use serde_json::{Map, Value};

use super::chart::{Chart, file_part, services_of};
use super::style::{
    Entry, FONT, Marker, PLOT_WIDTH, SIZE, color, draw_slos, err, legend, log_range, log_worthy,
    mesh, near_data, range, slo_lines,
};
use crate::report::view::{CaseView, axis_label};

/// Points of a CDF: (latency ms, percent at or below), 201 quantiles.
pub fn points(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    (0..=200)
        .map(|i| {
            let q = i as f64 / 200.0;
            (h.value_at_quantile(q) as f64 / 1e3, q * 100.0)
        })
        .collect()
}

pub fn draw<'a>(
    cases: &[CaseView],
    result: &dyn Fn(&str) -> Option<&'a Map<String, Value>>,
) -> Vec<Chart> {
    let services = services_of(cases);
    let mut out = Vec::new();
    for svc in services {
        let mine: Vec<&CaseView> = cases.iter().filter(|c| c.service == svc).collect();
        for (metric, label) in [("ttft", "TTFT"), ("itl", "ITL")] {
            let lines: Vec<(String, Vec<(f64, f64)>)> = mine
                .iter()
                .filter_map(|c| {
                    let h = CaseFile::new(result(&c.id)?).histogram(metric)?;
                    let pts = points(&h);
                    (!pts.is_empty()).then(|| (name(c), pts))
                })
                .collect();
            if lines.is_empty() {
                continue;
            }
            let slos = slo_lines(mine.iter().flat_map(|c| &c.verdicts), metric);
            let title = format!("{label} distribution, service {svc}");
            match svg(&lines, &title, label, &slos) {
                Ok(s) => {
                    let mut ch =
                        Chart::new("cdf", title, &format!("{metric}_cdf_{}", file_part(svc)), s);
                    ch.view.service = Some(svc.to_string());
                    out.push(ch);
                }
                Err(e) => eprintln!("warning: cannot draw the {label} distribution of {svc}: {e}"),
            }
        }
    }
    out
}

/// A case's legend name: its load and matrix values (`c=2 in=512`), or its id when it
/// has none.
fn name(c: &CaseView) -> String {
    let mut parts = Vec::new();
    if let Some(n) = c.concurrency {
        parts.push(format!("c={n}"));
    }
    if c.rate != "inf" && !c.rate.is_empty() {
        parts.push(format!("r={}", c.rate));
    }
    parts.extend(c.axes.iter().map(|(k, v)| axis_label(k, v)));
    if parts.is_empty() {
        c.id.clone()
    } else {
        parts.join(" ")
    }
}

/// The chart: the latency axis logarithmic when the cases span more than 10×, each
/// latency SLO on this metric a grey line at its threshold, the legend beside the plot.
fn svg(
    lines: &[(String, Vec<(f64, f64)>)],
    title: &str,
    label: &str,
    slos: &[(String, f64)],
) -> Result<String, String> {
    let data_max = lines
        .iter()
        .flat_map(|l| l.1.iter().map(|p| p.0))
        .fold(0.0f64, f64::max);
    let (slos, far) = near_data(slos, data_max);
    let slos = &slos;
    let vals: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.1.iter().map(|p| p.0))
        .chain(slos.iter().map(|s| s.1))
        .collect();
    let (lo, hi) = vals
        .iter()
        .filter(|v| **v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(*v), hi.max(*v))
        });
    let log = log_worthy(lo, hi);
    let mut entries: Vec<Entry> = lines
        .iter()
        .enumerate()
        .map(|(i, (n, _))| Entry {
            name: n.clone(),
            color: color(i),
            dashed: false,
            marker: Marker::None,
        })
        .collect();
    entries.extend(far);
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, side) = root.split_horizontally(PLOT_WIDTH);
        let caption = if log {
            format!("{title} (log scale)")
        } else {
            title.to_string()
        };
        macro_rules! body {
            ($chart:ident, $x0:expr) => {{
                mesh(&mut $chart, &format!("{label} (ms)"), "% at or below", log)?;
                draw_slos(
                    &mut $chart,
                    slos,
                    |ms| [(ms, 0.0), (ms, 100.0)],
                    |ms| (ms, 8.0),
                )?;
                for (i, (_, pts)) in lines.iter().enumerate() {
                    let pts = pts.iter().copied().filter(|p| p.0 >= $x0);
                    $chart
                        .draw_series(LineSeries::new(pts, color(i).stroke_width(2)))
                        .map_err(err)?;
                }
            }};
        }
        let builder = |area| {
            let mut b = ChartBuilder::on(area);
            b.caption(&caption, (FONT, 18))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(56);
            b
        };
        if log {
            let xs = log_range(vals.iter().copied());
            let x0 = xs.start;
            let mut chart = builder(&plot)
                .build_cartesian_2d(xs.log_scale(), 0.0..100.0)
                .map_err(err)?;
            body!(chart, x0);
        } else {
            let xs = range(vals.iter().copied(), true);
            let mut chart = builder(&plot)
                .build_cartesian_2d(xs, 0.0..100.0)
                .map_err(err)?;
            body!(chart, f64::NEG_INFINITY);
        }
        legend(&side, &entries)?;
        root.present().map_err(err)?;
    }
    Ok(text)
}
