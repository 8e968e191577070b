//! Synthetic series with planted shifts, seeded: what the change-point tests run on
//! (`scripts/otava-compare.py` plants the same kinds of series for Otava and benchplan).

use crate::rng::Rng;

/// A named series and the indices of its planted changes.
pub struct Planted {
    pub name: &'static str,
    pub values: Vec<f64>,
    pub changes: Vec<usize>,
}

/// `n` points around `mean` with noise of `sigma` (a fraction of the mean).
fn noise(rng: &mut Rng, n: usize, mean: f64, sigma: f64) -> Vec<f64> {
    (0..n)
        .map(|_| mean * (1.0 + sigma * rng.normal()))
        .collect()
}

/// The planted series of the tests, from one seed.
pub fn series(seed: u64) -> Vec<Planted> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let mut v = noise(&mut rng, 30, 100.0, 0.02);
    v.extend(noise(&mut rng, 30, 105.0, 0.02));
    out.push(Planted {
        name: "step-5pct-noise-2pct",
        values: v,
        changes: vec![30],
    });
    let mut v = noise(&mut rng, 25, 50.0, 0.02);
    v.extend(noise(&mut rng, 25, 60.0, 0.02));
    out.push(Planted {
        name: "step-20pct",
        values: v,
        changes: vec![25],
    });
    let mut v = noise(&mut rng, 20, 100.0, 0.02);
    v.extend(noise(&mut rng, 20, 115.0, 0.02));
    v.extend(noise(&mut rng, 20, 95.0, 0.02));
    out.push(Planted {
        name: "two-steps",
        values: v,
        changes: vec![20, 40],
    });
    let mut v = noise(&mut rng, 30, 100.0, 0.01);
    v.extend((1..=20).map(|i| 100.0 * (1.0 + 0.01 * i as f64) * (1.0 + 0.01 * rng.normal())));
    out.push(Planted {
        name: "drift-1pct-a-run",
        values: v,
        changes: vec![30],
    });
    let mut v = noise(&mut rng, 60, 100.0, 0.02);
    for i in [12, 33, 47] {
        v[i] *= 1.6;
    }
    out.push(Planted {
        name: "isolated-outliers",
        values: v,
        changes: vec![],
    });
    out.push(Planted {
        name: "stationary-100",
        values: noise(&mut rng, 100, 100.0, 0.02),
        changes: vec![],
    });
    out
}

/// A stationary series of `n` points (noise of 2%).
pub fn stationary(seed: u64, n: usize) -> Vec<f64> {
    noise(&mut Rng::new(seed), n, 100.0, 0.02)
}
