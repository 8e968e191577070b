//! One series of the history as an SVG chart that reads at a glance: dated runs on the
//! x axis, labelled y ticks in the metric's unit, each segment's level between change
//! points with the threshold band around it (a move inside the band is no change, so
//! noise reads as small), the change points and the SLO line. Hand-written SVG: the
//! trend report is one self-contained HTML page. Everything from the history is
//! escaped.

use std::fmt::Write as _;

use super::analyze::Series;
use crate::escape;

const W: f64 = 720.0;
const H: f64 = 270.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 96.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 58.0;

/// A segment between change points: runs `a..b` and their mean.
struct Level {
    a: usize,
    b: usize,
    mean: f64,
}

/// One series as an SVG chart.
pub fn chart(se: &Series) -> String {
    let n = se.values.len();
    let unit = crate::metrics::table::of_result_key(&se.metric)
        .map_or("", |d| d.unit.suffix().trim_start());
    let band = se.min_magnitude.max(0.0);
    let levels = levels(se);
    // The y range holds the values, the SLO and every level's band, so noise inside
    // the band never fills the chart's height.
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    let band_edges = levels
        .iter()
        .flat_map(|l| [l.mean * (1.0 - band), l.mean * (1.0 + band)]);
    for v in se.values.iter().copied().chain(se.slo).chain(band_edges) {
        if v.is_finite() {
            lo = lo.min(v);
            hi = hi.max(v);
        }
    }
    if !lo.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    if hi <= lo {
        hi = lo + lo.abs().max(1.0) * 0.1;
    }
    let step = nice_step((hi - lo) / 5.0);
    let (lo, hi) = ((lo / step).floor() * step, (hi / step).ceil() * step);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let x = |i: f64| LEFT + i * plot_w / ((n.max(2) - 1) as f64);
    let y = |v: f64| TOP + (hi - v) / (hi - lo) * plot_h;

    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" role=\"img\" aria-label=\"{} {}\" font-family=\"sans-serif\">\n",
        escape::xml(&se.case),
        escape::xml(&se.metric)
    );
    let _ = writeln!(
        s,
        "<text x=\"{LEFT}\" y=\"16\" font-size=\"13\">{} — {}</text>",
        escape::xml(&se.case),
        escape::xml(&se.metric)
    );
    // Y ticks: round steps, each labelled with its unit, and a faint grid line.
    let decimals = decimals(step);
    let mut v = lo;
    while v <= hi + step * 1e-9 {
        let yv = y(v);
        let _ = writeln!(
            s,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{yv:.1}\" y2=\"{yv:.1}\" stroke=\"#e5e5e5\"/><text class=\"y-tick\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\">{v:.decimals$}{}</text>",
            W - RIGHT,
            LEFT - 6.0,
            yv + 3.0,
            if unit.is_empty() {
                String::new()
            } else {
                format!(" {unit}")
            }
        );
        v += step;
    }
    // X ticks: the runs' dates (UTC), at most seven, the first and the newest always.
    let same_day = se
        .when
        .first()
        .zip(se.when.last())
        .is_some_and(|(a, b)| a.get(..10) == b.get(..10));
    for i in x_ticks(n) {
        let label = se
            .when
            .get(i)
            .map_or(String::new(), |w| date_label(w, same_day));
        let xv = x(i as f64);
        let _ = writeln!(
            s,
            "<line x1=\"{xv:.1}\" x2=\"{xv:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#888\"/><text class=\"x-tick\" x=\"{xv:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{}</text>",
            TOP + plot_h,
            TOP + plot_h + 4.0,
            TOP + plot_h + 16.0,
            escape::xml(&label)
        );
    }
    let axis = if same_day {
        se.when
            .first()
            .and_then(|w| w.get(..10))
            .map_or("run time (UTC)".to_string(), |d| {
                format!("run time (UTC) on {}", escape::xml(d))
            })
    } else {
        "run date (UTC)".to_string()
    };
    let _ = writeln!(
        s,
        "<line x1=\"{LEFT}\" x2=\"{right:.1}\" y1=\"{base:.1}\" y2=\"{base:.1}\" stroke=\"#888\"/><line x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{base:.1}\" stroke=\"#888\"/><text class=\"x-axis\" x=\"{mid:.1}\" y=\"{below:.1}\" font-size=\"11\" text-anchor=\"middle\">{axis}</text>",
        right = W - RIGHT,
        base = TOP + plot_h,
        mid = LEFT + plot_w / 2.0,
        below = TOP + plot_h + 30.0,
    );
    // Each level with its threshold band, labelled with its value.
    for l in &levels {
        let (x1, x2) = if l.b - l.a > 1 {
            (x(l.a as f64), x((l.b - 1) as f64))
        } else {
            (x(l.a as f64) - 4.0, x(l.a as f64) + 4.0)
        };
        let (top, bottom) = (y(l.mean * (1.0 + band)), y(l.mean * (1.0 - band)));
        let _ = writeln!(
            s,
            "<rect class=\"threshold-band\" x=\"{x1:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#228833\" fill-opacity=\"0.12\"><title>±{:.1}%: a move inside the band is no change</title></rect>",
            x2 - x1,
            (bottom - top).max(0.5),
            band * 100.0
        );
        let _ = writeln!(
            s,
            "<line class=\"segment-mean\" x1=\"{x1:.1}\" x2=\"{x2:.1}\" y1=\"{0:.1}\" y2=\"{0:.1}\" stroke=\"#228833\" stroke-width=\"2\"><title>level {1}{2} over runs {3} to {4}</title></line>",
            y(l.mean),
            fmt_value(l.mean),
            if unit.is_empty() {
                String::new()
            } else {
                format!(" {unit}")
            },
            escape::xml(se.runs.get(l.a).map_or("", String::as_str)),
            escape::xml(se.runs.get(l.b - 1).map_or("", String::as_str)),
        );
    }
    if let Some(last) = levels.last() {
        let _ = writeln!(
            s,
            "<text class=\"level\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#228833\">now {}{}</text>",
            W - RIGHT + 4.0,
            y(last.mean) + 3.0,
            fmt_value(last.mean),
            if unit.is_empty() {
                String::new()
            } else {
                format!(" {unit}")
            },
        );
    }
    let points: Vec<String> = se
        .values
        .iter()
        .enumerate()
        .map(|(i, v)| format!("{:.1},{:.1}", x(i as f64), y(*v)))
        .collect();
    let _ = writeln!(
        s,
        "<polyline class=\"series\" fill=\"none\" stroke=\"#4477aa\" stroke-width=\"1.5\" points=\"{}\"/>",
        points.join(" ")
    );
    for (i, v) in se.values.iter().enumerate() {
        let _ = writeln!(
            s,
            "<circle class=\"run\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"#4477aa\"><title>{} ({}): {}{}</title></circle>",
            x(i as f64),
            y(*v),
            escape::xml(se.runs.get(i).map_or("", String::as_str)),
            escape::xml(se.when.get(i).map_or("", String::as_str)),
            fmt_value(*v),
            if unit.is_empty() {
                String::new()
            } else {
                format!(" {unit}")
            },
        );
    }
    for c in &se.changes {
        let colour = if c.regression { "#cc3311" } else { "#009988" };
        let _ = writeln!(
            s,
            "<line class=\"change-point\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{TOP}\" y2=\"{1:.1}\" stroke=\"{colour}\" stroke-dasharray=\"4 3\"><title>run {2}: {3:+.1}%</title></line>",
            x(c.index as f64 - 0.5),
            TOP + plot_h,
            escape::xml(&c.run),
            c.change * 100.0
        );
    }
    if let Some(t) = se.slo {
        let ys = y(t);
        let _ = writeln!(
            s,
            "<line class=\"slo\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{ys:.1}\" y2=\"{ys:.1}\" stroke=\"#ee7733\" stroke-dasharray=\"6 3\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#ee7733\">SLO {}{}</text>",
            W - RIGHT,
            W - RIGHT + 4.0,
            ys + 3.0,
            fmt_value(t),
            if unit.is_empty() {
                String::new()
            } else {
                format!(" {unit}")
            },
        );
    }
    // The key, under the axis title: what each mark means.
    let _ = writeln!(
        s,
        "<text class=\"key\" x=\"{LEFT}\" y=\"{:.1}\" font-size=\"10\" fill=\"#555\">blue: runs · green: level, ±{:.1}% band (a smaller move is no change) · dashed: change point, SLO</text>",
        H - 6.0,
        band * 100.0
    );
    s.push_str("</svg>\n");
    s
}

/// The segments between change points, with their means.
fn levels(se: &Series) -> Vec<Level> {
    let n = se.values.len();
    let mut bounds: Vec<usize> = vec![0];
    bounds.extend(se.changes.iter().map(|c| c.index).filter(|&i| i < n));
    bounds.push(n);
    bounds
        .windows(2)
        .filter(|w| w[1] > w[0])
        .map(|w| Level {
            a: w[0],
            b: w[1],
            mean: se.values[w[0]..w[1]].iter().sum::<f64>() / (w[1] - w[0]) as f64,
        })
        .collect()
}

/// A 1-2-5 step near `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw > 0.0 && raw.is_finite()) {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Decimals that tell ticks `step` apart.
fn decimals(step: f64) -> usize {
    (-step.log10().floor()).max(0.0) as usize
}

/// A value with three significant figures at least (`52.3`, `0.981`, `1240`).
fn fmt_value(v: f64) -> String {
    let d = if v.abs() >= 100.0 {
        1
    } else if v.abs() >= 1.0 {
        2
    } else {
        3
    };
    format!("{v:.d$}")
}

/// Which runs get a date under them: at most seven, evenly spread, the first and the
/// newest included.
fn x_ticks(n: usize) -> Vec<usize> {
    if n <= 7 {
        return (0..n).collect();
    }
    let mut out: Vec<usize> = (0..7).map(|k| k * (n - 1) / 6).collect();
    out.dedup();
    out
}

/// `2026-12-07T03:00:00Z` as `Dec 07`, or `03:00` when every run is of one day.
fn date_label(when: &str, same_day: bool) -> String {
    if same_day {
        return when.get(11..16).unwrap_or(when).to_string();
    }
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = when
        .get(5..7)
        .and_then(|m| m.parse::<usize>().ok())
        .and_then(|m| MONTHS.get(m.wrapping_sub(1)));
    match (month, when.get(8..10)) {
        (Some(m), Some(d)) => format!("{m} {d}"),
        _ => when.get(..10).unwrap_or(when).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_round_and_ticks_keep_the_ends() {
        assert_eq!(nice_step(0.37), 0.5);
        assert_eq!(nice_step(13.0), 20.0);
        assert_eq!(nice_step(100.0), 100.0);
        assert_eq!(decimals(0.5), 1);
        assert_eq!(decimals(20.0), 0);
        assert_eq!(x_ticks(3), vec![0, 1, 2]);
        let t = x_ticks(30);
        assert_eq!((t[0], *t.last().unwrap(), t.len()), (0, 29, 7));
        assert_eq!(date_label("2026-12-07T03:00:00Z", false), "Dec 07");
        assert_eq!(date_label("2026-12-07T03:00:00Z", true), "03:00");
    }

    fn series(values: Vec<f64>, changes: Vec<super::super::analyze::Change>) -> Series {
        let n = values.len();
        Series {
            case: "c".into(),
            metric: "p99_ttft_ms".into(),
            values,
            runs: (0..n).map(|i| format!("run{i}")).collect(),
            when: (0..n)
                .map(|i| format!("2026-11-{:02}T03:00:00Z", i + 1))
                .collect(),
            changes,
            service: "s".into(),
            slo: None,
            min_magnitude: 0.05,
            regressed: false,
            suspect: false,
            recovered: false,
            judged: None,
        }
    }

    fn attr_all(svg: &str, class: &str, attr: &str) -> Vec<f64> {
        svg.lines()
            .filter(|l| l.contains(&format!("class=\"{class}\"")))
            .filter_map(|l| {
                let at = l.find(&format!(" {attr}=\""))? + attr.len() + 3;
                l[at..].split('"').next()?.parse().ok()
            })
            .collect()
    }

    /// ±0.5% of noise on a steady level stays inside its ±5% band: the points spread
    /// over less than a fifth of the band's height, so it cannot look like a swing.
    #[test]
    fn noise_inside_the_band_reads_small_and_every_axis_is_labelled() {
        let values: Vec<f64> = (0..20)
            .map(|i| 100.0 * (1.0 + 0.005 * if i % 2 == 0 { 1.0 } else { -1.0 }))
            .collect();
        let svg = chart(&series(values, vec![]));
        let cy = attr_all(&svg, "run", "cy");
        let spread = cy.iter().cloned().fold(f64::MIN, f64::max)
            - cy.iter().cloned().fold(f64::MAX, f64::min);
        let band = attr_all(&svg, "threshold-band", "height");
        assert_eq!(band.len(), 1, "{svg}");
        assert!(
            spread > 0.0 && spread < band[0] / 5.0,
            "{spread} vs {band:?}"
        );
        // Labelled y ticks in the unit, dated x ticks, the newest run's date last.
        let y_ticks = svg.matches("class=\"y-tick\"").count();
        assert!(y_ticks >= 3, "{svg}");
        assert!(svg.contains(" ms</text>") && svg.contains(">Nov 01</text>"));
        assert!(svg.contains(">Nov 20</text>") && svg.contains("run date (UTC)"));
    }

    /// A step: two levels, each with its band, the change point between them.
    #[test]
    fn a_change_draws_both_levels_with_their_bands() {
        let mut values = vec![100.0; 10];
        values.extend(vec![120.0; 10]);
        let change = super::super::analyze::Change {
            index: 10,
            run: "run10".into(),
            when: "2026-11-11T03:00:00Z".into(),
            commit: None,
            mean_before: 100.0,
            mean_after: 120.0,
            std_before: 0.0,
            change: 0.2,
            pvalue: 1e-9,
            regression: true,
        };
        let svg = chart(&series(values, vec![change]));
        let means = attr_all(&svg, "segment-mean", "y1");
        assert_eq!(means.len(), 2, "{svg}");
        assert!(
            means[1] < means[0],
            "the higher level is drawn higher: {means:?}"
        );
        assert_eq!(svg.matches("class=\"threshold-band\"").count(), 2);
        assert!(svg.contains("class=\"change-point\"") && svg.contains(">now 120.0 ms</text>"));
    }
}
