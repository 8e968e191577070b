//! numpy's statistics, exactly: `np.percentile` (linear, Hyndman–Fan type 7),
//! `np.median`, `np.mean` and `np.std` (population, ddof = 0). An empty list gives 0,
//! as vLLM's `np.x(values or 0)` does.

/// Linear-interpolated percentile of unsorted values; `p` in [0, 100].
pub fn percentile(values: &[f64], p: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    percentile_sorted(&v, p)
}

/// The same on values already sorted ascending.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let rank = p / 100.0 * (n - 1) as f64;
            let lo = rank.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            let frac = rank - lo as f64;
            // numpy's `_lerp`: a + (b - a) * t, switching ends for t >= 0.5 for accuracy.
            let (a, b) = (sorted[lo], sorted[hi]);
            if frac >= 0.5 {
                b - (b - a) * (1.0 - frac)
            } else {
                a + (b - a) * frac
            }
        }
    }
}

pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// Population standard deviation.
pub fn std(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let m = mean(values);
    (values.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / values.len() as f64).sqrt()
}

/// Sample standard deviation (n − 1); 0 for fewer than two values.
pub fn std_sample(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let n = values.len() as f64;
    std(values) * (n / (n - 1.0)).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_numpy_on_hand_checked_values() {
        // np.percentile([1, 2, 3, 4], [0, 25, 50, 90, 99, 100]) = [1, 1.75, 2.5, 3.7, 3.97, 4]
        let v = [4.0, 1.0, 3.0, 2.0];
        for (p, want) in [
            (0.0, 1.0),
            (25.0, 1.75),
            (50.0, 2.5),
            (90.0, 3.7),
            (99.0, 3.97),
            (100.0, 4.0),
        ] {
            assert!(
                (percentile(&v, p) - want).abs() < 1e-12,
                "p{p}: {}",
                percentile(&v, p)
            );
        }
        // np.percentile([10, 20, 30, 40, 50, 60, 70, 80, 90, 100], 99.9) = 99.91
        let v: Vec<f64> = (1..=10).map(|i| i as f64 * 10.0).collect();
        assert!((percentile(&v, 99.9) - 99.91).abs() < 1e-9);
        // np.std([2, 4, 4, 4, 5, 5, 7, 9]) = 2.0 (population); np.mean = 5.0
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!((mean(&v), std(&v)), (5.0, 2.0));
        assert_eq!(
            (percentile(&[], 99.0), mean(&[]), std(&[])),
            (0.0, 0.0, 0.0)
        );
        assert_eq!(percentile(&[7.0], 50.0), 7.0);
    }
}
