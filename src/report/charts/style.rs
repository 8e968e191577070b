//! One look for every chart: size, fonts, palette, and the plotters error type folded
//! into a string (a chart that cannot be drawn is skipped with a warning, never fatal).

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
