//! One look for every chart: size, fonts, palette, and the plotters error type folded
//! into a string (a chart that cannot be drawn is skipped with a warning, never fatal).

use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use plotters::style::RGBColor;

pub const SIZE: (u32, u32) = (760, 440);
pub const FONT: &str = "sans-serif";

/// Colour-blind-safe (Okabe–Ito).
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

/// SLO lines and their labels.
pub const SLO_GREY: RGBColor = RGBColor(120, 120, 120);

/// An SLO line's label: `SLO p99_ttft 500 ms`.
pub fn slo_text(key: &str, ms: f64) -> String {
    format!("SLO {key} {} ms", tick(ms))
}

pub const PASS: RGBColor = RGBColor(0, 158, 115);
pub const FAIL: RGBColor = RGBColor(213, 94, 0);

pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// A plotters error as text.
pub fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// An axis range with a margin, never empty.
pub fn range(vals: impl Iterator<Item = f64>, from_zero: bool) -> std::ops::Range<f64> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return 0.0..1.0;
    }
    if from_zero {
        lo = lo.min(0.0);
    }
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.05).max(1e-3);
    (if from_zero { lo } else { lo - pad })..(hi + pad)
}

/// The plot's share of the chart's width; the legend sits to its right, never over data.
pub const PLOT_WIDTH: u32 = 540;

/// Whether values spanning `lo..hi` need a log axis (more than 10×): one line would
/// otherwise be flat at zero beside another (a 70 ms service beside a 5 s one).
pub fn log_worthy(lo: f64, hi: f64) -> bool {
    lo > 0.0 && hi / lo > 10.0
}

/// Bounds for a log axis around `vals` (positive values only), on whole decades' 1-2-5
/// steps so the ticks read round numbers.
pub fn log_range(vals: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for v in vals.filter(|v| v.is_finite() && *v > 0.0) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return 1.0..10.0;
    }
    (lo / 1.3)..(hi * 1.3)
}

/// A tick label: whole numbers without decimals (`2`, not `2.0`), others with the
/// decimals their size needs.
pub fn tick(v: f64) -> String {
    let a = v.abs();
    if (v - v.round()).abs() < 1e-9 * a.max(1.0) || a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// How a legend entry is drawn: its colour, a dashed or solid line, a marker.
pub struct Entry {
    pub name: String,
    pub color: RGBColor,
    pub dashed: bool,
    pub marker: Marker,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    None,
    Circle,
    Triangle,
}

/// Draws `entries` as a legend in `area` (the chart's right-hand strip), one a line.
pub fn legend<DB: plotters::prelude::DrawingBackend>(
    area: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    entries: &[Entry],
) -> Result<(), String> {
    use plotters::prelude::*;
    let (mut y, x) = (48i32, 8i32);
    for e in entries {
        let style = e.color.stroke_width(2);
        if e.dashed {
            for k in 0..3 {
                area.draw(&PathElement::new(
                    vec![(x + k * 9, y), (x + k * 9 + 5, y)],
                    style,
                ))
                .map_err(err)?;
            }
        } else {
            area.draw(&PathElement::new(vec![(x, y), (x + 24, y)], style))
                .map_err(err)?;
        }
        match e.marker {
            Marker::Circle => area
                .draw(&Circle::new((x + 12, y), 4, e.color.filled()))
                .map_err(err)?,
            Marker::Triangle => area
                .draw(&TriangleMarker::new((x + 12, y), 5, e.color.filled()))
                .map_err(err)?,
            Marker::None => {}
        }
        let name: String = e.name.chars().take(30).collect();
        area.draw(&Text::new(name, (x + 32, y - 7), (FONT, 12).into_font()))
            .map_err(err)?;
        y += 20;
        if y > SIZE.1 as i32 - 20 {
            area.draw(&Text::new("…", (x + 32, y - 7), (FONT, 12).into_font()))
                .map_err(err)?;
            break;
        }
    }
    Ok(())
}

/// The SLO lines a chart draws: those within reach of its data (at most 3× its largest
/// value); the others would squash the data into a corner, so the legend names them
/// instead (returned second, as legend entries).
pub fn near_data(slos: &[(String, f64)], data_max: f64) -> (Vec<(String, f64)>, Vec<Entry>) {
    let (mut near, mut far) = (Vec::new(), Vec::new());
    for (k, ms) in slos {
        if *ms <= data_max * 3.0 {
            near.push((k.clone(), *ms));
        } else {
            far.push(Entry {
                name: format!("{} (above)", slo_text(k, *ms)),
                color: SLO_GREY,
                dashed: true,
                marker: Marker::None,
            });
        }
    }
    (near, far)
}

/// SLO lines for a chart of `metric` (`ttft`, `tpot`, `itl`, `e2el`): each latency SLO
/// the given verdicts judged on it, as (its key, its threshold in ms), once each.
pub fn slo_lines<'a>(
    verdicts: impl Iterator<Item = &'a crate::slo::Verdict>,
    metric: &str,
) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for v in verdicts {
        let Ok(slo) = crate::slo::Slo::from_verdict(v) else {
            continue;
        };
        if let crate::slo::SloMetric::Latency { metric: m, .. } = slo.metric {
            if m.name() == metric && !out.iter().any(|(k, _)| *k == slo.key) {
                out.push((slo.key.clone(), slo.threshold));
            }
        }
    }
    out
}

/// The grid and axis titles of a latency chart: ticks as people write numbers, and no
/// minor lines on a log axis (they would grey out a decade).
pub fn mesh<DB, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    x_desc: &str,
    y_desc: &str,
    log: bool,
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .label_style((FONT, 12))
        .light_line_style(if log { TRANSPARENT } else { BLACK.mix(0.1) })
        .draw()
        .map_err(err)
}

/// Each SLO (key, threshold in ms) as a dashed grey line from `line(ms)` and its words
/// at `label_at(ms)`: upright on a latency x axis, across on a latency y axis.
pub fn draw_slos<DB, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    slos: &[(String, f64)],
    line: impl Fn(f64) -> [(f64, f64); 2],
    label_at: impl Fn(f64) -> (f64, f64),
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (key, ms) in slos {
        chart
            .draw_series(DashedLineSeries::new(
                line(*ms),
                3,
                3,
                SLO_GREY.stroke_width(1),
            ))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                slo_text(key, *ms),
                label_at(*ms),
                (FONT, 11).into_font().color(&SLO_GREY),
            )))
            .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_read_as_people_write_them() {
        assert_eq!(tick(2.0), "2");
        assert_eq!(tick(4.0), "4");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(1234.567), "1235");
        assert_eq!(tick(12.34), "12.3");
        assert_eq!(tick(0.125), "0.125");
        assert!(log_worthy(70.0, 5000.0) && !log_worthy(70.0, 700.0) && !log_worthy(0.0, 5.0));
    }
}
