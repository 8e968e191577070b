//! An SLO search's history: each probed value against its SLO margin (above the line
//! it met every SLO, below it failed one), coloured pass or fail, in probing order.

use plotters::prelude::*;

use super::chart::{Chart, file_part};
use super::style::{Entry, FAIL, FONT, Marker, PASS, PLOT_WIDTH, SIZE, err, legend, range};

/// One probe of a search, as the chart draws it (the report layer does not read the
/// optimizer's own types).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probe {
    /// The probed concurrency or rate.
    pub value: f64,
    /// The SLO margin (a fraction; below 0 an SLO failed).
    pub margin: f64,
    pub pass: bool,
}

/// The chart of one search (`case` names it), when it probed anything.
pub fn draw(case: &str, knob: &str, history: &[Probe], answer: Option<f64>) -> Option<Chart> {
    if history.is_empty() {
        return None;
    }
    let title = format!("SLO search {case}");
    match svg(&title, knob, history, answer) {
        Ok(s) => {
            let mut ch = Chart::new("search", title, &format!("search_{}", file_part(case)), s);
            ch.view.case = Some(case.to_string());
            Some(ch)
        }
        Err(e) => {
            eprintln!("warning: cannot draw the search chart of {case}: {e}");
            None
        }
    }
}

fn svg(title: &str, knob: &str, history: &[Probe], answer: Option<f64>) -> Result<String, String> {
    let xs = range(history.iter().map(|s| s.value), true);
    let ys = range(history.iter().map(|s| s.margin * 100.0).chain([0.0]), false);
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root.titled(title, (FONT, 18)).map_err(err)?;
        // The legend in a strip right of the plot, where no probe can be.
        let (plot, side) = root.split_horizontally(PLOT_WIDTH);
        let mut entries = vec![Entry {
            name: "SLO (margin 0)".into(),
            color: BLACK,
            dashed: false,
            marker: Marker::None,
        }];
        let mut chart = ChartBuilder::on(&plot)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(xs.clone(), ys.clone())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(knob)
            .y_desc("SLO margin (%)")
            .x_label_formatter(&|v| super::style::tick(*v))
            .y_label_formatter(&|v| super::style::tick(*v))
            .label_style((FONT, 12))
            .draw()
            .map_err(err)?;
        // The SLO line: margin 0.
        chart
            .draw_series(LineSeries::new(
                vec![(xs.start, 0.0), (xs.end, 0.0)],
                BLACK.stroke_width(1),
            ))
            .map_err(err)?;
        if let Some(a) = answer {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(a, ys.start), (a, ys.end)],
                    5,
                    4,
                    PASS.stroke_width(1),
                ))
                .map_err(err)?;
            entries.push(Entry {
                name: format!("answer {a}"),
                color: PASS,
                dashed: true,
                marker: Marker::None,
            });
        }
        chart
            .draw_series(history.iter().map(|s| {
                let c = if s.pass { PASS } else { FAIL };
                Circle::new((s.value, s.margin * 100.0), 5, c.filled())
            }))
            .map_err(err)?;
        chart
            .draw_series(history.iter().enumerate().map(|(i, s)| {
                Text::new(
                    format!("{}", i + 1),
                    (s.value, s.margin * 100.0),
                    (FONT, 11).into_font(),
                )
            }))
            .map_err(err)?;
        for (name, color) in [("met every SLO", PASS), ("failed one", FAIL)] {
            entries.push(Entry {
                name: name.into(),
                color,
                dashed: false,
                marker: Marker::Circle,
            });
        }
        legend(&side, &entries)?;
        root.present().map_err(err)?;
    }
    Ok(text)
}
