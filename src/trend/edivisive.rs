//! Change points of one series, as Apache Otava computes them (`otava/analysis.py`,
//! after Fleming et al., "Hunter", ICPE 2023): E-divisive means over sliding windows
//! find candidate ("weak") change points, each kept while a two-sided Student's t-test
//! of the segments either side passes a relaxed threshold; a merge step then drops the
//! weakest (highest p-value, else smallest relative change) until every change point
//! left meets `max_pvalue` and exceeds `min_magnitude`.
//!
//! Kept as Otava has it, so the same series gives the same change points and p-values:
//! the first pass uses 10× `max_pvalue` (below 0.05; 2× below 0.5), windows of
//! `window` points step by half a window, the t-test takes the segments' population
//! standard deviations as scipy's `ttest_ind_from_stats` does in Otava, and after a
//! removal the merge recomputes the change point now at the removed one's place and
//! the one after it (Otava's `recompute(i)` and `recompute(i + 1)`). One difference: a
//! t statistic of 0/0 (two constant, equal segments) reads p = 1, where scipy's NaN
//! leaves Otava's order of comparisons to decide.

use crate::metrics::significance::student_t_sf;

/// Otava's settings (its defaults: a window of 50, `max_pvalue` 0.001, no minimum
/// magnitude).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Settings {
    pub window: usize,
    pub max_pvalue: f64,
    pub min_magnitude: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            window: 50,
            max_pvalue: 0.001,
            min_magnitude: 0.0,
        }
    }
}

/// The two segments either side of a change point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    pub mean_before: f64,
    pub mean_after: f64,
    pub std_before: f64,
    pub std_after: f64,
    pub pvalue: f64,
}

impl Stats {
    /// `after / before - 1` (0 when the mean before is 0).
    pub fn forward_change(&self) -> f64 {
        if self.mean_before == 0.0 {
            0.0
        } else {
            self.mean_after / self.mean_before - 1.0
        }
    }

    fn backward_change(&self) -> f64 {
        if self.mean_after == 0.0 {
            0.0
        } else {
            self.mean_before / self.mean_after - 1.0
        }
    }

    /// The larger of the relative changes either way (Otava's `change_magnitude`).
    pub fn magnitude(&self) -> f64 {
        self.forward_change()
            .abs()
            .max(self.backward_change().abs())
    }
}

/// A change point: the index of the first point after the change.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangePoint {
    pub index: usize,
    pub qhat: f64,
    pub stats: Stats,
}

/// The change points of `series` (indices into it, ascending).
pub fn change_points(series: &[f64], s: &Settings) -> Vec<ChangePoint> {
    let p = s.max_pvalue;
    let first_pass = if p < 0.05 {
        p * 10.0
    } else if p < 0.5 {
        p * 2.0
    } else {
        p
    };
    let weak = split(series, s.window.max(2), first_pass);
    merge(weak, series, p, s.min_magnitude)
}

/// Two-sided Student's t-test of two segments, as Otava calls scipy: population
/// standard deviations (`np.std`), pooled variance, `n1 + n2 - 2` degrees of freedom.
pub fn ttest(left: &[f64], right: &[f64]) -> Stats {
    let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
    let std = |x: &[f64], m: f64| {
        if x.len() < 2 {
            0.0
        } else {
            (x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / x.len() as f64).sqrt()
        }
    };
    let (m1, m2) = (mean(left), mean(right));
    let (s1, s2) = (std(left, m1), std(right, m2));
    let (n1, n2) = (left.len() as f64, right.len() as f64);
    let pvalue = if n1 + n2 > 2.0 {
        let df = n1 + n2 - 2.0;
        let pooled = ((n1 - 1.0) * s1 * s1 + (n2 - 1.0) * s2 * s2) / df;
        let t = (m1 - m2) / (pooled * (1.0 / n1 + 1.0 / n2)).sqrt();
        if t.is_nan() {
            1.0
        } else {
            (2.0 * student_t_sf(t.abs(), df)).min(1.0)
        }
    } else {
        1.0
    };
    Stats {
        mean_before: m1,
        mean_after: m2,
        std_before: s1,
        std_after: s2,
        pvalue,
    }
}

/// Column prefix sums of the distance matrix: `at(j, t)` = Σ_{i<t} |x_i − x_j|, so any
/// sum of distances from a run of points to one point is two lookups.
struct Prefix {
    n: usize,
    sums: Vec<f64>,
}

impl Prefix {
    fn of(x: &[f64]) -> Prefix {
        let n = x.len();
        let mut sums = vec![0.0; n * (n + 1)];
        for j in 0..n {
            let row = &mut sums[j * (n + 1)..(j + 1) * (n + 1)];
            for i in 0..n {
                row[i + 1] = row[i] + (x[i] - x[j]).abs();
            }
        }
        Prefix { n, sums }
    }

    /// Σ_{i in a..b} |x_i − x_j|.
    fn run_to(&self, j: usize, a: usize, b: usize) -> f64 {
        let row = j * (self.n + 1);
        self.sums[row + b] - self.sums[row + a]
    }
}

/// E-divisive's best split of `x[start..end]`: the `tau` (start < tau < kappa <= end)
/// maximising Q(x[start..tau], x[tau..kappa]) over every `kappa`, and that Q. O(len²)
/// with the prefix sums.
fn best_split(p: &Prefix, start: usize, end: usize) -> Option<(usize, f64)> {
    if end - start < 2 {
        return None;
    }
    let mut best: Option<(usize, f64)> = None;
    // The within-left sum Σ_{start<=i<k<tau} d(i, k), kept as tau grows.
    let mut within_left = 0.0;
    for tau in start + 1..end {
        within_left += p.run_to(tau - 1, start, tau - 1);
        let n = (tau - start) as f64;
        // Otava's Q matrix holds 0 where kappa <= tau (rows from tau = start + 2 on),
        // before the row's real values: when every real Q is negative its argmax is
        // such a cell, tau = start + 2 with Q = 0. Kept, so the candidates match.
        if tau >= start + 2 && best.is_none_or(|(_, b)| 0.0 > b) {
            best = Some((tau, 0.0));
        }
        // Grow kappa: the between sum (left to right) and the within-right sum.
        let mut between = 0.0;
        let mut within_right = 0.0;
        for kappa in tau + 1..=end {
            let j = kappa - 1;
            between += p.run_to(j, start, tau);
            within_right += p.run_to(j, tau, j);
            let m = (kappa - tau) as f64;
            let mut q = 2.0 / (m + n) * between;
            if n > 1.0 {
                q -= 2.0 * m / ((m + n) * (n - 1.0)) * within_left;
            }
            if m > 1.0 {
                q -= 2.0 * n / ((m + n) * (m - 1.0)) * within_right;
            }
            // numpy's argmax takes the first maximum in row-major order (tau, then kappa).
            if best.is_none_or(|(_, b)| q > b) {
                best = Some((tau, q));
            }
        }
    }
    best
}

/// The segments between change points `cps` (sorted) of a series of length `len`.
fn intervals(cps: &[usize], len: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::with_capacity(cps.len() + 1);
    let mut from = 0;
    for &c in cps {
        if c != from {
            out.push((from, c));
        }
        from = c;
    }
    if from != len {
        out.push((from, len));
    }
    out
}

/// The t-test of a change point at `index` given the segments: the two adjacent ones
/// when it ends one (Otava's merge step), else the one it splits.
fn stats_at(x: &[f64], index: usize, segs: &[(usize, usize)]) -> Stats {
    for (i, &(a, b)) in segs.iter().enumerate() {
        if b == index && i + 1 < segs.len() {
            let (c, e) = segs[i + 1];
            return ttest(&x[a..b], &x[c..e]);
        }
        if a < index && index < b {
            return ttest(&x[a..index], &x[index..b]);
        }
    }
    ttest(&x[..index], &x[index..])
}

/// E-divisive with the t-test on one window (Otava's `ChangePointDetector`): split the
/// segment with the best candidate while the split is significant.
fn detect(x: &[f64], max_pvalue: f64) -> Vec<ChangePoint> {
    let prefix = Prefix::of(x);
    let mut cps: Vec<ChangePoint> = Vec::new();
    loop {
        let idx: Vec<usize> = cps.iter().map(|c| c.index).collect();
        let segs = intervals(&idx, x.len());
        let candidate = segs
            .iter()
            .filter(|(a, b)| b - a > 1)
            .filter_map(|&(a, b)| best_split(&prefix, a, b))
            // Python's max keeps the first of equal maxima.
            .fold(None::<(usize, f64)>, |acc, c| match acc {
                Some(a) if a.1 >= c.1 => Some(a),
                _ => Some(c),
            });
        let Some((index, qhat)) = candidate else {
            break;
        };
        let stats = stats_at(x, index, &segs);
        if stats.pvalue <= max_pvalue {
            cps.push(ChangePoint { index, qhat, stats });
            cps.sort_by_key(|c| c.index);
        } else {
            break;
        }
    }
    cps
}

/// Otava's split step: windows of `window` points, each step half a window or past the
/// last change point found; the union of what each window finds, with stats recomputed
/// on the whole series.
fn split(x: &[f64], window: usize, max_pvalue: f64) -> Vec<ChangePoint> {
    let step = window / 2;
    let mut start = 0;
    let mut found: Vec<ChangePoint> = Vec::new();
    while start < x.len() {
        let end = (start + window).min(x.len());
        let mut new = detect(&x[start..end], max_pvalue);
        for c in &mut new {
            c.index += start;
        }
        let last = new.last().map_or(0, |c| c.index);
        start = last.max(start + step);
        for c in new {
            if !found.iter().any(|f| f.index == c.index) {
                found.push(c);
            }
        }
    }
    found.sort_by_key(|c| c.index);
    let idx: Vec<usize> = found.iter().map(|c| c.index).collect();
    let segs = intervals(&idx, x.len());
    for c in &mut found {
        c.stats = stats_at(x, c.index, &segs);
    }
    found
}

/// Otava's merge step: drop the weakest change point (highest p-value; when all are
/// significant, the smallest change) until the weakest is significant and larger than
/// `min_magnitude`.
fn merge(
    mut cps: Vec<ChangePoint>,
    x: &[f64],
    max_pvalue: f64,
    min_magnitude: f64,
) -> Vec<ChangePoint> {
    while !cps.is_empty() {
        // Python's max/min keep the first of equal values.
        let mut weakest = 0;
        for (i, c) in cps.iter().enumerate() {
            if c.stats.pvalue > cps[weakest].stats.pvalue {
                weakest = i;
            }
        }
        if cps[weakest].stats.pvalue < max_pvalue {
            weakest = 0;
            for (i, c) in cps.iter().enumerate() {
                if c.stats.magnitude() < cps[weakest].stats.magnitude() {
                    weakest = i;
                }
            }
            if cps[weakest].stats.magnitude() > min_magnitude {
                return cps;
            }
        }
        cps.remove(weakest);
        let idx: Vec<usize> = cps.iter().map(|c| c.index).collect();
        let segs = intervals(&idx, x.len());
        for i in [weakest, weakest + 1] {
            if i < cps.len() {
                cps[i].stats = stats_at(x, cps[i].index, &segs);
            }
        }
    }
    cps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_t_test_is_scipys_on_population_deviations() {
        // scipy.stats.ttest_ind_from_stats(2.0, np.std([1,2,3]), 3, 5.0, np.std([4,5,6]), 3)
        // (as Otava calls it, population deviations): statistic -4.5,
        // pvalue 0.010822550462608247.
        let s = ttest(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]);
        assert!((s.std_before - (2.0f64 / 3.0).sqrt()).abs() < 1e-12);
        let scipy = 0.010822550462608247;
        assert!((s.pvalue - scipy).abs() < 1e-12 * scipy, "{}", s.pvalue);
        // One point either side: no test.
        assert_eq!(ttest(&[1.0], &[9.0]).pvalue, 1.0);
        // Two equal constant segments: not a change.
        assert_eq!(ttest(&[3.0, 3.0], &[3.0, 3.0]).pvalue, 1.0);
    }

    #[test]
    fn q_hat_is_the_energy_distance_statistic() {
        // X = [0, 0], Y = [1, 1]: Q = 2/4 * 4 - 0 - 0 = 2, at tau = 2.
        let (tau, q) = best_split(&Prefix::of(&[0.0, 0.0, 1.0, 1.0]), 0, 4).unwrap();
        assert_eq!(tau, 2);
        assert!((q - 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_clear_step_is_found_at_its_index_and_a_flat_series_has_none() {
        let mut x: Vec<f64> = (0..40).map(|i| 100.0 + (i % 3) as f64).collect();
        x.extend((0..40).map(|i| 130.0 + (i % 3) as f64));
        let cps = change_points(&x, &Settings::default());
        assert_eq!(cps.iter().map(|c| c.index).collect::<Vec<_>>(), vec![40]);
        let c = cps[0];
        assert!((c.stats.forward_change() - 0.3).abs() < 0.01);
        assert!(c.stats.pvalue < 1e-10);
        let flat: Vec<f64> = (0..80).map(|i| 100.0 + (i % 3) as f64).collect();
        assert!(change_points(&flat, &Settings::default()).is_empty());
    }
}

/// Change points and p-values Apache Otava 0.8.0 computed (`compute_change_points`) on
/// two fixed series, with its defaults and with a window of 30 at 0.01.
#[cfg(test)]
mod otava_golden {
    use super::*;

    fn a() -> Vec<f64> {
        let mut v: Vec<f64> = (0..40)
            .map(|i| 100.0 + ((i * 37) % 11) as f64 * 0.5)
            .collect();
        v.extend((0..30).map(|i| 110.0 + ((i * 53) % 13) as f64 * 0.5));
        v
    }

    fn b() -> Vec<f64> {
        let mut v: Vec<f64> = (0..25)
            .map(|i| 50.0 + ((i * 29) % 7) as f64 * 0.4)
            .collect();
        v.extend((0..25).map(|i| 56.0 + ((i * 31) % 9) as f64 * 0.4));
        v.extend((0..25).map(|i| 53.0 + ((i * 17) % 5) as f64 * 0.4));
        v
    }

    fn check(series: &[f64], window: usize, max_pvalue: f64, want: &[(usize, f64, f64, f64)]) {
        let got = change_points(
            series,
            &Settings {
                window,
                max_pvalue,
                min_magnitude: 0.0,
            },
        );
        let idx: Vec<usize> = got.iter().map(|c| c.index).collect();
        let want_idx: Vec<usize> = want.iter().map(|w| w.0).collect();
        assert_eq!(idx, want_idx, "window {window} p {max_pvalue}");
        for (c, &(_, p, m1, m2)) in got.iter().zip(want) {
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1e-300);
            assert!(
                close(c.stats.pvalue, p),
                "{} vs Otava's {p}",
                c.stats.pvalue
            );
            assert!(close(c.stats.mean_before, m1) && close(c.stats.mean_after, m2));
        }
    }

    #[test]
    fn the_change_points_and_p_values_are_otavas() {
        check(
            &a(),
            50,
            0.001,
            &[(40, 4.376267041155773e-15, 102.425, 111.0)],
        );
        check(
            &a(),
            30,
            0.01,
            &[
                (40, 7.932606877059491e-11, 102.425, 110.5),
                (43, 0.0061413224614648805, 110.5, 112.25),
                (47, 0.0061413224614648805, 112.25, 114.0),
                (53, 9.322644759982011e-05, 114.75, 110.5),
                (56, 0.0061413224614648805, 110.5, 112.25),
                (60, 0.0061413224614648805, 112.25, 114.0),
                (66, 3.696606901588291e-05, 114.75, 110.75),
            ],
        );
        check(
            &b(),
            50,
            0.001,
            &[
                (
                    25,
                    3.580840714518468e-29,
                    51.104000000000006,
                    57.632000000000005,
                ),
                (50, 4.871806111945883e-21, 57.632000000000005, 53.8),
            ],
        );
        check(
            &b(),
            30,
            0.01,
            &[
                (3, 0.0061413224614646844, 50.4, 51.800000000000004),
                (25, 5.011105002321488e-27, 51.2, 57.632000000000005),
                (50, 4.871806111945883e-21, 57.632000000000005, 53.8),
            ],
        );
    }
}

#[cfg(test)]
mod planted_tests {
    use super::*;
    use crate::trend::planted;

    /// Over 40 seeds: how often each planted series' changes are all found within one
    /// run of where they were planted, and how often something else is found too.
    #[test]
    fn planted_changes_are_found_within_one_run() {
        let seeds = 1..=40u64;
        let n = seeds.clone().count();
        let mut hit: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
        for seed in seeds {
            for p in planted::series(seed) {
                let found: Vec<usize> = change_points(&p.values, &Settings::default())
                    .iter()
                    .map(|c| c.index)
                    .collect();
                let near = |want: usize| found.iter().any(|&f| f.abs_diff(want) <= 1);
                let all = p.changes.iter().all(|&w| near(w));
                let extra = found
                    .iter()
                    .any(|&f| !p.changes.iter().any(|&w| f.abs_diff(w) <= 1));
                let e = hit.entry(p.name).or_default();
                e.0 += usize::from(all);
                e.1 += usize::from(extra);
            }
        }
        eprintln!("of {n} seeds (found within one run, something else found): {hit:#?}");
        // Clear steps: found at the step in every seed (a further point in a few).
        for name in ["step-20pct", "two-steps"] {
            assert_eq!(hit[name].0, n, "{name}");
            assert!(hit[name].1 <= n / 8, "{name}: {hit:?}");
        }
        // 5% in 2% noise: at the step in 9 seeds of 10.
        assert!(hit["step-5pct-noise-2pct"].0 * 10 >= n * 9, "{hit:?}");
        // Outliers: no change point; a stationary series: one in a few seeds.
        assert_eq!(hit["isolated-outliers"].1, 0, "{hit:?}");
        assert!(hit["stationary-100"].1 * 10 <= n, "{hit:?}");
    }

    #[test]
    fn a_drift_is_seen_as_changes_inside_it() {
        for seed in 1..=20 {
            let p = planted::series(seed)
                .into_iter()
                .find(|p| p.name.starts_with("drift"))
                .unwrap();
            let found = change_points(&p.values, &Settings::default());
            assert!(!found.is_empty(), "seed {seed}");
            assert!(
                found
                    .iter()
                    .all(|c| c.index >= 28 && c.stats.forward_change() > 0.0),
                "seed {seed}: {found:?}"
            );
        }
    }

    /// On stationary series the share of points taken for change points stays at or
    /// below the default `max_pvalue`, and a nightly gate fails on at most 1 series in
    /// 100 (the share of series with some change point is larger: the t-test is of the
    /// best split, as in Otava).
    #[test]
    fn stationary_series_have_false_change_points_at_or_below_the_significance() {
        for n in [30usize, 100] {
            for p in [0.001, 0.01, 0.05] {
                let s = Settings {
                    max_pvalue: p,
                    ..Settings::default()
                };
                let seeds = 1000u64;
                let (mut points, mut series, mut alarms) = (0usize, 0usize, 0usize);
                for seed in 0..seeds {
                    let cps = change_points(&planted::stationary(seed * 7919 + n as u64, n), &s);
                    points += cps.len();
                    series += usize::from(!cps.is_empty());
                    // What a nightly gate would fail on: the newest change, in the last
                    // ten runs, upwards (a latency).
                    alarms += usize::from(
                        cps.last()
                            .is_some_and(|c| c.index + 10 >= n && c.stats.forward_change() > 0.0),
                    );
                }
                let tested = seeds as f64 * (n - 1) as f64;
                let rate = points as f64 / tested;
                eprintln!(
                    "n {n} max_pvalue {p}: {rate:.5} of points taken for change points; {series} of {seeds} series with one; {alarms} would fail a gate"
                );
                // At Otava's default significance, not significantly above it (two
                // standard errors of the estimate); looser ones print their figures
                // (Otava's method, which this is, takes ~1.1% of points at 0.01).
                let se = (p * (1.0 - p) / tested).sqrt();
                if p == Settings::default().max_pvalue {
                    assert!(rate <= p + 2.0 * se, "n {n} p {p}: {rate}");
                    assert!(
                        alarms * 100 <= seeds as usize,
                        "n {n}: {alarms} false alarms"
                    );
                }
            }
        }
    }
}
