//! Whether a difference between two runs is larger than their own noise. A regression
//! needs both: beyond its threshold, and significant here (one-sided p below
//! `report.significance`, 0.01 by default). A p99 of 24 requests moves by a fifth
//! between two runs of an unchanged service; a real slowdown moves the whole
//! distribution. The test asks whether the candidate is worse *by more than the
//! threshold*: its samples are scaled back by the threshold before they are ranked
//! against the baseline's, so a drift of a few percent that is real but smaller than
//! the threshold (a busier machine) does not count, however many samples show it.
//!
//! - Latencies: Mann–Whitney U over the per-request samples of both runs, read from
//!   the HDR histograms every result keeps (`benchplan.histograms_us`): the rank-sum
//!   statistic with ties per histogram bucket, the normal approximation with the tie
//!   correction, one-sided toward the worse direction.
//! - Throughput: the same test on E2EL (at a fixed concurrency, throughput falls when
//!   requests take longer); a single run has no other sample of it.
//! - Success rate: a two-proportion z-test on completed and failed counts.
//! - With `execution.repeats` on both sides: Welch's t-test on the run-level values of
//!   the metric itself (each run's p99, throughput, …, kept under
//!   `benchplan.repeats.values`), the candidate's scaled back by the threshold as
//!   above. Runs, not requests, are then the samples: the run-to-run noise a machine
//!   adds (a busy neighbour for one run) is in the test.
//!
//! Results without histograms (plain `vllm bench serve` files) get no p-value: the
//! threshold alone decides, as before.

use hdrhistogram::Histogram;

/// Φ, the standard normal distribution function (Abramowitz and Stegun 7.1.26 for
/// erf: absolute error below 1.5e-7).
pub fn normal_cdf(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    let erf = if x >= 0.0 { erf } else { -erf };
    0.5 * (1.0 + erf)
}

/// One-sided p-value that `cand`'s values, divided by `1 + margin`, are still larger
/// than `base`'s: that the candidate is slower by more than `margin` (a fraction).
pub fn slower_by_more_than(
    base: &Histogram<u64>,
    cand: &Histogram<u64>,
    margin: f64,
) -> Option<f64> {
    if margin <= 0.0 {
        return mann_whitney_greater(base, cand);
    }
    let mut scaled = Histogram::<u64>::new_with_bounds(1, cand.high().max(2), 3).ok()?;
    for v in cand.iter_recorded() {
        let x = (v.value_iterated_to() as f64 / (1.0 + margin))
            .round()
            .max(1.0) as u64;
        scaled.record_n(x, v.count_at_value()).ok()?;
    }
    mann_whitney_greater(base, &scaled)
}

/// One-sided p-value that `cand`'s values are larger than `base`'s (Mann–Whitney U,
/// normal approximation with the tie correction). None with too few samples.
pub fn mann_whitney_greater(base: &Histogram<u64>, cand: &Histogram<u64>) -> Option<f64> {
    let (nb, nc) = (base.len() as f64, cand.len() as f64);
    if nb < 3.0 || nc < 3.0 {
        return None;
    }
    // Both histograms' buckets in value order, each with its counts in both.
    let mut buckets: Vec<(u64, f64, f64)> = Vec::new();
    for v in base.iter_recorded() {
        buckets.push((
            base.highest_equivalent(v.value_iterated_to()),
            v.count_at_value() as f64,
            0.0,
        ));
    }
    for v in cand.iter_recorded() {
        buckets.push((
            cand.highest_equivalent(v.value_iterated_to()),
            0.0,
            v.count_at_value() as f64,
        ));
    }
    buckets.sort_by_key(|b| b.0);
    let mut merged: Vec<(f64, f64)> = Vec::with_capacity(buckets.len());
    let mut last = None;
    for (v, b, c) in buckets {
        if last == Some(v) {
            let m = merged.last_mut().expect("a bucket");
            m.0 += b;
            m.1 += c;
        } else {
            merged.push((b, c));
            last = Some(v);
        }
    }
    // U of the candidate: pairs where its value is larger, ties counting a half.
    let (mut below_base, mut u, mut ties) = (0.0, 0.0, 0.0);
    for (b, c) in &merged {
        u += c * (below_base + 0.5 * b);
        below_base += b;
        let t = b + c;
        ties += t * t * t - t;
    }
    let n = nb + nc;
    let mean = nb * nc / 2.0;
    let var = nb * nc / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if var <= 0.0 {
        return Some(0.5);
    }
    let z = (u - mean) / var.sqrt();
    Some(1.0 - normal_cdf(z))
}

/// One-sided p-value that the candidate's success share is lower than the baseline's
/// by more than `margin` of it (two-proportion z-test, pooled). None without requests
/// on either side.
pub fn proportion_lower(
    base_ok: f64,
    base_n: f64,
    cand_ok: f64,
    cand_n: f64,
    margin: f64,
) -> Option<f64> {
    if base_n < 1.0 || cand_n < 1.0 {
        return None;
    }
    let (pb, pc) = (base_ok / base_n * (1.0 - margin.max(0.0)), cand_ok / cand_n);
    let pooled = (base_ok + cand_ok) / (base_n + cand_n);
    let se = (pooled * (1.0 - pooled) * (1.0 / base_n + 1.0 / cand_n)).sqrt();
    if se == 0.0 {
        return Some(if pc < pb { 0.0 } else { 1.0 });
    }
    Some(normal_cdf((pc - pb) / se))
}

/// One-sided p-value that `cand`'s run-level values, scaled back by the threshold, are
/// still worse than `base`'s (Welch's t-test, Welch–Satterthwaite degrees of freedom):
/// larger when `lower_is_better`, else smaller. None with fewer than two runs a side.
pub fn welch_worse(base: &[f64], cand: &[f64], margin: f64, lower_is_better: bool) -> Option<f64> {
    if base.len() < 2 || cand.len() < 2 {
        return None;
    }
    let m = margin.max(0.0);
    // Worse by more than the margin: slower than base·(1+m), or below base·(1−m).
    let scale = if lower_is_better {
        1.0 / (1.0 + m)
    } else {
        1.0 / (1.0 - m).max(f64::EPSILON)
    };
    let cand: Vec<f64> = cand.iter().map(|x| x * scale).collect();
    let t = welch_t(base, &cand)?;
    let (t, df) = if lower_is_better { t } else { (-t.0, t.1) };
    Some(student_t_sf(t, df))
}

/// Welch's t statistic of `b` over `a` (mean(b) − mean(a) in standard errors) and its
/// degrees of freedom. None when both samples are constant and equal.
pub fn welch_t(a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    let stats = |x: &[f64]| {
        let n = x.len() as f64;
        let mean = x.iter().sum::<f64>() / n;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (n, mean, var)
    };
    let ((na, ma, va), (nb, mb, vb)) = (stats(a), stats(b));
    let (sa, sb) = (va / na, vb / nb);
    let se2 = sa + sb;
    if se2 == 0.0 {
        return (ma != mb).then(|| (f64::INFINITY.copysign(mb - ma), na + nb - 2.0));
    }
    let df = se2 * se2 / (sa * sa / (na - 1.0) + sb * sb / (nb - 1.0));
    Some(((mb - ma) / se2.sqrt(), df))
}

/// P(T > t) for Student's t with `df` degrees of freedom (through the regularized
/// incomplete beta function).
pub fn student_t_sf(t: f64, df: f64) -> f64 {
    if t.is_infinite() {
        return if t > 0.0 { 0.0 } else { 1.0 };
    }
    let x = df / (df + t * t);
    let tail = 0.5 * incomplete_beta(df / 2.0, 0.5, x);
    if t > 0.0 { tail } else { 1.0 - tail }
}

/// The t such that P(T > t) = `upper` for Student's t with `df` degrees of freedom
/// (bisection on [`student_t_sf`], to 1e-9).
pub fn student_t_quantile(upper: f64, df: f64) -> f64 {
    let (mut lo, mut hi) = (0.0_f64, 1e6_f64);
    if !(upper > 0.0 && upper < 0.5) {
        return if upper >= 0.5 { 0.0 } else { f64::INFINITY };
    }
    while hi - lo > 1e-9 * hi.max(1.0) {
        let mid = 0.5 * (lo + hi);
        if student_t_sf(mid, df) > upper {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The regularized incomplete beta function I_x(a, b) (Numerical Recipes' continued
/// fraction, Lentz's method).
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    // The continued fraction converges fast for x < (a+1)/(a+b+2); use symmetry beyond.
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-14 {
            break;
        }
    }
    h
}

/// ln Γ(x) (Lanczos, g = 7, nine coefficients: about 15 significant digits).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_tables() {
        // scipy.stats.t.ppf(0.999, df): 12 → 3.9296, 18 → 3.6105, 1 → 318.31.
        for (df, want) in [(12.0, 3.929_6), (18.0, 3.610_5), (1.0, 318.31)] {
            let t = student_t_quantile(0.001, df);
            assert!((t - want).abs() / want < 1e-4, "df {df}: {t}");
        }
    }

    #[test]
    fn welchs_t_matches_scipy() {
        // scipy.stats.ttest_ind(b, a, equal_var=False, alternative="greater").
        let a = [100.0, 102.0, 98.0, 101.0, 99.0];
        let b = [104.0, 107.0, 103.0, 106.0, 105.0];
        let (t, df) = welch_t(&a, &b).unwrap();
        assert!(
            (t - 5.0).abs() < 1e-9 && (df - 8.0).abs() < 1e-9,
            "{t} {df}"
        );
        let p = welch_worse(&a, &b, 0.0, true).unwrap();
        assert!((p - 0.000_526_412_896_683_27).abs() < 1e-9, "{p}");
        let (a, b) = ([10.0, 12.0, 11.0], [10.5, 12.5, 11.2, 13.0]);
        let (t, df) = welch_t(&a, &b).unwrap();
        assert!((t - 0.981_022_943_175_946_1).abs() < 1e-9, "{t}");
        assert!((df - 4.795_162_699_169_687).abs() < 1e-9, "{df}");
        let p = welch_worse(&a, &b, 0.0, true).unwrap();
        assert!((p - 0.186_724_593_633_445_54).abs() < 1e-8, "{p}");
        // scipy.stats.t.sf
        for (t, df, want) in [
            (2.0, 3.5, 0.063_069_261_287_956_72),
            (0.5, 10.0, 0.313_946_802_871_486_5),
            (-1.0, 4.0, 0.813_049_516_849_970_5),
        ] {
            let got = student_t_sf(t, df);
            assert!((got - want).abs() < 1e-9, "t {t} df {df}: {got} vs {want}");
        }
        // Higher is better: a throughput that fell is worse; one that rose is not.
        let base = [50.0, 51.0, 49.5, 50.5];
        assert!(welch_worse(&base, &[40.0, 41.0, 39.0, 40.5], 0.05, false).unwrap() < 0.001);
        assert!(welch_worse(&base, &[52.0, 51.0, 53.0, 52.5], 0.05, false).unwrap() > 0.9);
        // Within the margin is no regression, however consistent.
        assert!(welch_worse(&base, &[48.6, 48.5, 48.7, 48.6], 0.05, false).unwrap() > 0.5);
        assert!(welch_worse(&[1.0], &[2.0, 3.0], 0.0, true).is_none());
    }

    fn hist(values_us: impl IntoIterator<Item = u64>) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in values_us {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn the_normal_distribution_function_matches_known_values() {
        for (z, p) in [
            (0.0, 0.5),
            (1.0, 0.841_344_7),
            (-1.959_964, 0.025),
            (2.326_348, 0.99),
        ] {
            assert!((normal_cdf(z) - p).abs() < 1e-6, "{z}: {}", normal_cdf(z));
        }
    }

    #[test]
    fn mann_whitney_finds_a_shift_and_not_noise() {
        // The same distribution (interleaved values): no evidence.
        let a = hist((0..200).map(|i| 10_000 + 37 * i));
        let b = hist((0..200).map(|i| 10_018 + 37 * i));
        let p = mann_whitney_greater(&a, &b).unwrap();
        assert!(p > 0.1, "{p}");
        // A 30% shift of every sample: certain.
        let c = hist((0..200).map(|i| 13_000 + 48 * i));
        assert!(mann_whitney_greater(&a, &c).unwrap() < 1e-6);
        // The other way round: the candidate is better, not worse.
        assert!(mann_whitney_greater(&c, &a).unwrap() > 0.999);
        // One outlier moves a p99, not the distribution.
        let mut d: Vec<u64> = (0..24).map(|i| 10_000 + 100 * i).collect();
        let base = hist(d.clone());
        d[23] = 30_000;
        assert!(mann_whitney_greater(&base, &hist(d)).unwrap() > 0.3);
        assert!(mann_whitney_greater(&hist([1, 2]), &hist([3, 4])).is_none());
    }

    #[test]
    fn mann_whitney_matches_scipy_on_a_small_example() {
        // scipy.stats.mannwhitneyu([3,4,5,6,7], [1,2,3,4,5], alternative="greater",
        // method="asymptotic", use_continuity=False), by hand: U = 20.5, mean 12.5,
        // variance 25/12 × (11 − 18/90) = 22.5 (three ties of two), z = 1.68655,
        // p = 1 − Φ(z) = 0.04584.
        let base = hist([1, 2, 3, 4, 5]);
        let cand = hist([3, 4, 5, 6, 7]);
        let p = mann_whitney_greater(&base, &cand).unwrap();
        assert!((p - 0.045_84).abs() < 1e-4, "{p}");
    }

    #[test]
    fn proportions_fall_significantly_or_not() {
        assert!(proportion_lower(100.0, 100.0, 80.0, 100.0, 0.0).unwrap() < 0.001);
        assert!(proportion_lower(100.0, 100.0, 99.0, 100.0, 0.0).unwrap() > 0.1);
        assert_eq!(proportion_lower(10.0, 10.0, 10.0, 10.0, 0.0), Some(1.0));
        // 80% of 100 against 100%, with a 5% margin: still lower than 95%.
        assert!(proportion_lower(100.0, 100.0, 80.0, 100.0, 0.05).unwrap() < 0.01);
    }

    #[test]
    fn a_shift_smaller_than_the_margin_is_not_significant_and_a_larger_one_is() {
        let base = hist((0..2000).map(|i| 10_000 + 5 * i));
        // Every sample 4% slower: certain, but within a 5% margin.
        let drift = hist((0..2000).map(|i| (f64::from(10_000 + 5 * i) * 1.04) as u64));
        assert!(mann_whitney_greater(&base, &drift).unwrap() < 1e-6);
        assert!(slower_by_more_than(&base, &drift, 0.05).unwrap() > 0.5);
        // 30% slower: beyond the margin, certain.
        let slow = hist((0..2000).map(|i| (f64::from(10_000 + 5 * i) * 1.3) as u64));
        assert!(slower_by_more_than(&base, &slow, 0.05).unwrap() < 1e-6);
    }
}
