//! The server's own view of each case over time, from its scraped `/metrics`
//! (`benchplan.server_metrics.series`): requests running and waiting above, KV-cache
//! use below. Drawn for cases with two or more scrapes.

use crate::results::read::CaseFile;
use plotters::prelude::*;
use serde_json::{Map, Value};

use super::chart::{Chart, file_part};
use super::style::{FONT, SIZE, color, err, range};
use crate::report::view::CaseView;

type Series = Vec<(f64, f64)>;

pub fn draw<'a>(
    cases: &[CaseView],
    result: &dyn Fn(&str) -> Option<&'a Map<String, Value>>,
) -> Vec<Chart> {
    let mut out = Vec::new();
    for c in cases {
        let Some(sm) = result(&c.id).and_then(|r| CaseFile::new(r).server_series()) else {
            continue;
        };
        let t = sm.t;
        if t.len() < 2 {
            continue;
        }
        let counts = [("running", sm.running), ("waiting", sm.waiting)];
        let kv = sm.kv_cache_usage_pct;
        if counts.iter().all(|(_, s)| s.is_empty()) && kv.is_empty() {
            continue;
        }
        let title = format!("Server during {}", c.id);
        let bottom = Panel {
            desc: "KV cache %",
            lines: vec![("KV cache", kv)],
            max: Some(100.0),
        };
        match svg(&title, &t, &counts, &bottom) {
            Ok(s) => {
                let mut ch =
                    Chart::new("server", title, &format!("server_{}", file_part(&c.id)), s);
                ch.view.case = Some(c.id.clone());
                ch.view.service = Some(c.service.clone());
                out.push(ch);
            }
            Err(e) => eprintln!("warning: cannot draw the server chart of {}: {e}", c.id),
        }
    }
    out
}

/// The lower panel of a two-panel chart over time: its axis, its lines, and its top
/// (None: from the data).
pub struct Panel<'a> {
    pub desc: &'a str,
    pub lines: Vec<(&'a str, Series)>,
    pub max: Option<f64>,
}

/// Counts of requests over time above, `bottom` below, on one time axis from `t`.
pub fn svg(
    title: &str,
    t: &[f64],
    counts: &[(&str, Series)],
    bottom_panel: &Panel,
) -> Result<String, String> {
    let xs = range(t.iter().copied(), true);
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root.titled(title, (FONT, 18)).map_err(err)?;
        let (top, bottom) = root.split_vertically(SIZE.1 * 55 / 100);
        let ys = range(counts.iter().flat_map(|(_, s)| s.iter().map(|p| p.1)), true);
        let mut chart = ChartBuilder::on(&top)
            .margin(10)
            .x_label_area_size(28)
            .y_label_area_size(56)
            .build_cartesian_2d(xs.clone(), ys)
            .map_err(err)?;
        chart
            .configure_mesh()
            .y_desc("requests")
            .x_label_formatter(&|v| super::style::tick(*v))
            .y_label_formatter(&|v| super::style::tick(*v))
            .label_style((FONT, 12))
            .draw()
            .map_err(err)?;
        for (i, (name, s)) in counts.iter().enumerate() {
            if s.is_empty() {
                continue;
            }
            let c = color(i);
            chart
                .draw_series(LineSeries::new(s.iter().copied(), c.stroke_width(2)))
                .map_err(err)?
                .label(*name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, 12))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        let mut chart = ChartBuilder::on(&bottom)
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(
                xs,
                match bottom_panel.max {
                    Some(m) => 0.0..m,
                    None => range(
                        bottom_panel
                            .lines
                            .iter()
                            .flat_map(|(_, s)| s.iter().map(|p| p.1)),
                        true,
                    ),
                },
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("seconds from the first request")
            .y_desc(bottom_panel.desc)
            .x_label_formatter(&|v| super::style::tick(*v))
            .y_label_formatter(&|v| super::style::tick(*v))
            .label_style((FONT, 12))
            .draw()
            .map_err(err)?;
        for (i, (name, s)) in bottom_panel.lines.iter().enumerate() {
            if s.is_empty() {
                continue;
            }
            let c = color(i + 2);
            chart
                .draw_series(LineSeries::new(s.iter().copied(), c.stroke_width(2)))
                .map_err(err)?
                .label(*name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(2))
                });
        }
        if bottom_panel.lines.len() > 1 {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .label_font((FONT, 12))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(text)
}
