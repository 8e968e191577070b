//! Where the time goes, per case: one horizontal bar per case with server timings,
//! stacked from the request's start: the engine's queue, its prefill, everything
//! outside the engine (client TTFT − server TTFT) and the decode (client E2EL − TTFT),
//! means in milliseconds (`benchplan.server_timings`, see `metrics::server_timings`).

use plotters::prelude::*;

use super::chart::Chart;
use super::style::{Entry, FONT, Marker, PLOT_WIDTH, SIZE, color, err, legend, tick};
use crate::report::view::CaseView;

/// The parts of a bar, in order, with their legend names.
const PARTS: [&str; 4] = ["queue", "prefill", "outside the engine", "decode"];

pub fn draw(cases: &[CaseView]) -> Vec<Chart> {
    let bars: Vec<(String, [f64; 4])> = cases
        .iter()
        .filter_map(|c| {
            let t = c.time_split.as_ref()?;
            // A negative gap (a server clock ahead) draws as nothing, not backwards.
            let parts = [t.queue, t.prefill, t.outside, t.decode.unwrap_or(0.0)]
                .map(|v| if v.is_finite() { v.max(0.0) } else { 0.0 });
            Some((c.label.clone(), parts))
        })
        .collect();
    if bars.is_empty() {
        return Vec::new();
    }
    let title = "Where the time goes (mean ms)".to_string();
    match svg(&title, &bars) {
        Ok(s) => vec![Chart::new("time_split", title, "time_split", s)],
        Err(e) => {
            eprintln!("warning: cannot draw where the time goes: {e}");
            Vec::new()
        }
    }
}

fn svg(title: &str, bars: &[(String, [f64; 4])]) -> Result<String, String> {
    let max = bars
        .iter()
        .map(|(_, p)| p.iter().sum::<f64>())
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.05;
    let n = bars.len();
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, side) = root.split_horizontally(PLOT_WIDTH);
        let mut chart = ChartBuilder::on(&plot)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(110)
            .build_cartesian_2d(0.0..max, 0.0..n as f64)
            .map_err(err)?;
        let names: Vec<String> = bars
            .iter()
            .map(|(l, _)| l.chars().take(16).collect())
            .collect();
        chart
            .configure_mesh()
            .x_desc("ms")
            .x_label_formatter(&|v| tick(*v))
            .y_labels(n.min(20) * 2 + 1)
            .y_label_formatter(&|v| {
                // A bar's name at its middle, nothing between.
                let i = v.floor() as usize;
                if (v - i as f64 - 0.5).abs() < 1e-6 {
                    names.get(n - 1 - i).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .disable_y_mesh()
            .label_style((FONT, 12))
            .draw()
            .map_err(err)?;
        for (row, (_, parts)) in bars.iter().enumerate() {
            // The first case at the top.
            let y = (n - 1 - row) as f64;
            let mut from = 0.0;
            for (k, v) in parts.iter().enumerate() {
                let to = from + v;
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(from, y + 0.2), (to, y + 0.8)],
                        color(k).filled(),
                    )))
                    .map_err(err)?;
                from = to;
            }
        }
        let entries: Vec<Entry> = PARTS
            .iter()
            .enumerate()
            .map(|(k, name)| Entry {
                name: name.to_string(),
                color: color(k),
                dashed: false,
                marker: Marker::None,
            })
            .collect();
        legend(&side, &entries)?;
        root.present().map_err(err)?;
    }
    Ok(text)
}
