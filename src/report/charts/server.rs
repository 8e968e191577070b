//! The server's own view of each case over time, from its scraped `/metrics`
//! (`benchplan.server_metrics.series`): requests running and waiting above, KV-cache
//! use below. Drawn for cases with two or more scrapes. Each scrape is a point, held
//! as a step until the next (a gauge read at one instant, never a line drawn between
//! two readings as if it were measured in between); a case shorter than a few scrape
//! intervals says so in its title. Every legend stands in a strip right of the plot,
//! where no data is.

use crate::results::read::CaseFile;
use plotters::prelude::*;
use serde_json::{Map, Value};

use super::chart::{Chart, file_part};
use super::style::{Entry, FONT, Marker, PLOT_WIDTH, SIZE, color, err, legend, range};
use crate::report::view::CaseView;

/// A value over `from..to`, marked at `at`: a scrape held until the next one, or a
/// timeslice's figure over its slice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    pub from: f64,
    pub to: f64,
    pub at: f64,
    pub v: f64,
}

pub type Series = Vec<Step>;

/// Scrapes as steps: each value held until the next scrape (the last one only a point).
pub fn held(samples: &[(f64, f64)]) -> Series {
    samples
        .iter()
        .enumerate()
        .map(|(i, &(t, v))| Step {
            from: t,
            to: samples.get(i + 1).map_or(t, |n| n.0),
            at: t,
            v,
        })
        .collect()
}

/// Under this many scrapes, the chart says the case was short for its scrape interval.
const FEW_SCRAPES: usize = 5;

pub fn draw<'a>(
    cases: &[CaseView],
    result: &dyn Fn(&str) -> Option<&'a Map<String, Value>>,
) -> Vec<Chart> {
    let mut out = Vec::new();
    for c in cases {
        let Some(r) = result(&c.id) else { continue };
        let file = CaseFile::new(r);
        let Some(sm) = file.server_series() else {
            continue;
        };
        let t = sm.t;
        if t.len() < 2 {
            continue;
        }
        let counts = [
            ("running", held(&sm.running)),
            ("waiting", held(&sm.waiting)),
        ];
        let kv = held(&sm.kv_cache_usage_pct);
        if counts.iter().all(|(_, s)| s.is_empty()) && kv.is_empty() {
            continue;
        }
        let mut title = format!("Server during {}", c.id);
        if t.len() < FEW_SCRAPES {
            let every = (t[t.len() - 1] - t[0]) / (t.len() - 1) as f64;
            let secs = file.duration();
            title = format!(
                "{title}: {} scrapes, one every {}s{}",
                t.len(),
                super::style::tick(every),
                secs.map_or(String::new(), |d| format!(
                    " over a {}s case (too short to show more)",
                    super::style::tick(d)
                ))
            );
        }
        let bottom = Panel {
            desc: "KV cache %",
            lines: vec![("KV cache", kv)],
            max: Some(100.0),
        };
        match svg(&title, &t, &counts, &bottom) {
            Ok(s) => {
                let mut ch = Chart::new(
                    "server",
                    title.clone(),
                    &format!("server_{}", file_part(&c.id)),
                    s,
                );
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

/// Counts of requests over time above, `bottom` below, on one time axis from `t`;
/// each panel's legend in the strip to its right.
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
        let root = root.titled(title, (FONT, 16)).map_err(err)?;
        let (top, bottom) = root.split_vertically(SIZE.1 * 55 / 100);
        let (top, top_side) = top.split_horizontally(PLOT_WIDTH);
        let (bottom, bottom_side) = bottom.split_horizontally(PLOT_WIDTH);
        let values = |lines: &[(&str, Series)]| -> Vec<f64> {
            lines
                .iter()
                .flat_map(|(_, s)| s.iter().map(|p| p.v))
                .collect()
        };
        let ys = range(values(counts).into_iter(), true);
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
        let mut entries = Vec::new();
        for (i, (name, s)) in counts.iter().enumerate() {
            if s.is_empty() {
                continue;
            }
            steps(&mut chart, s, color(i))?;
            entries.push(entry(name, color(i)));
        }
        legend(&top_side, &entries)?;
        let ys = match bottom_panel.max {
            Some(m) => 0.0..m,
            None => range(values(&bottom_panel.lines).into_iter(), true),
        };
        let mut chart = ChartBuilder::on(&bottom)
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(xs, ys)
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
        let mut entries = Vec::new();
        for (i, (name, s)) in bottom_panel.lines.iter().enumerate() {
            if s.is_empty() {
                continue;
            }
            steps(&mut chart, s, color(i + 2))?;
            entries.push(entry(name, color(i + 2)));
        }
        legend(&bottom_side, &entries)?;
        root.present().map_err(err)?;
    }
    Ok(text)
}

fn entry(name: &str, color: RGBColor) -> Entry {
    Entry {
        name: name.to_string(),
        color,
        dashed: false,
        marker: Marker::Circle,
    }
}

/// Draws `s` as horizontal steps (joined where one step ends where the next begins)
/// with a point at each measurement.
fn steps<DB: DrawingBackend>(
    chart: &mut ChartContext<
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    s: &Series,
    c: RGBColor,
) -> Result<(), String> {
    let mut path: Vec<(f64, f64)> = Vec::new();
    let mut paths = Vec::new();
    for (i, p) in s.iter().enumerate() {
        let joined = i > 0 && (s[i - 1].to - p.from).abs() < 1e-9;
        if !joined && !path.is_empty() {
            paths.push(std::mem::take(&mut path));
        }
        path.push((p.from, p.v));
        path.push((p.to, p.v));
    }
    paths.push(path);
    for p in paths {
        chart
            .draw_series(LineSeries::new(p, c.stroke_width(2)))
            .map_err(err)?;
    }
    chart
        .draw_series(s.iter().map(|p| Circle::new((p.at, p.v), 3, c.filled())))
        .map_err(err)?;
    Ok(())
}
