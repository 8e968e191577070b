//! TTFT and ITL distributions: the cumulative share of requests (tokens, for ITL)
//! at or below each latency, from the HDR histograms each result keeps
//! (`benchplan.histograms_us`), one line per case, one chart per service and metric.

use plotters::prelude::*;
use serde_json::{Map, Value};

use super::style::{FONT, SIZE, color, err, range};
use super::{CaseView, Chart, file_part};
use crate::metrics::hist;

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
    let mut services: Vec<&str> = Vec::new();
    for c in cases {
        if !services.contains(&c.service.as_str()) {
            services.push(&c.service);
        }
    }
    let mut out = Vec::new();
    for svc in services {
        for (metric, label) in [("ttft", "TTFT"), ("itl", "ITL")] {
            let lines: Vec<(String, Vec<(f64, f64)>)> = cases
                .iter()
                .filter(|c| c.service == svc)
                .filter_map(|c| {
                    let text = result(&c.id)?
                        .get("benchplan")?
                        .get("histograms_us")?
                        .get(metric)?
                        .as_str()?;
                    let pts = points(&hist::decode(text).ok()?);
                    (!pts.is_empty()).then(|| (c.id.clone(), pts))
                })
                .collect();
            if lines.is_empty() {
                continue;
            }
            let title = format!("{label} distribution, service {svc}");
            match svg(&lines, &title, label) {
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

fn svg(lines: &[(String, Vec<(f64, f64)>)], title: &str, label: &str) -> Result<String, String> {
    let xs = range(lines.iter().flat_map(|l| l.1.iter().map(|p| p.0)), true);
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(xs, 0.0..100.0)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(format!("{label} (ms)"))
            .y_desc("% at or below")
            .label_style((FONT, 12))
            .draw()
            .map_err(err)?;
        for (i, (name, pts)) in lines.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FONT, 12))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(text)
}
