//! A small seeded random generator and the distributions benchplan needs.
//!
//! Our own (xoshiro256++ seeded by SplitMix64, Box–Muller normals, Marsaglia–Tsang
//! gammas) so that a seed gives the same schedule and the same simulator behaviour on
//! every machine and every version of every dependency.

/// xoshiro256++.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
    spare_normal: Option<f64>,
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let s = [
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
        ];
        Rng {
            s,
            spare_normal: None,
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in [lo, hi] (inclusive).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = hi - lo + 1;
        // Multiply-shift: unbiased enough for spans far below 2^64.
        lo + ((u128::from(self.next_u64()) * u128::from(span)) >> 64) as u64
    }

    /// True with probability p.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.f64() < p
    }

    /// Standard normal (Box–Muller, caching the second value).
    pub fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare_normal.take() {
            return z;
        }
        let u1 = 1.0 - self.f64(); // (0, 1]
        let u2 = self.f64();
        let r = (-2.0 * u1.ln()).sqrt();
        let (s, c) = (2.0 * std::f64::consts::PI * u2).sin_cos();
        self.spare_normal = Some(r * s);
        r * c
    }

    /// Gamma(shape k, scale θ) by Marsaglia–Tsang (with the k < 1 boost).
    pub fn gamma(&mut self, shape: f64, scale: f64) -> f64 {
        if shape < 1.0 {
            let u = 1.0 - self.f64();
            return self.gamma(shape + 1.0, scale) * u.powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = 1.0 + c * x;
            if v <= 0.0 {
                continue;
            }
            let v = v * v * v;
            let u = 1.0 - self.f64();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v * scale;
            }
        }
    }

    /// Exponential with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f64()).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_var(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let m = xs.iter().sum::<f64>() / n;
        (m, xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n)
    }

    #[test]
    fn same_seed_same_stream() {
        let a: Vec<u64> = (0..5)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..5)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(Rng::new(8).next_u64(), a[0]);
    }

    #[test]
    fn distributions_have_their_moments() {
        let mut r = Rng::new(1);
        let n = 200_000;
        let u: Vec<f64> = (0..n).map(|_| r.f64()).collect();
        let (m, v) = mean_var(&u);
        assert!(
            (m - 0.5).abs() < 0.005 && (v - 1.0 / 12.0).abs() < 0.002,
            "{m} {v}"
        );
        let z: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let (m, v) = mean_var(&z);
        assert!(m.abs() < 0.01 && (v - 1.0).abs() < 0.02, "{m} {v}");
        // Gamma(k, θ): mean kθ, variance kθ².
        for (k, theta) in [(0.5, 2.0), (1.0, 0.1), (4.0, 0.25)] {
            let g: Vec<f64> = (0..n).map(|_| r.gamma(k, theta)).collect();
            let (m, v) = mean_var(&g);
            assert!((m / (k * theta) - 1.0).abs() < 0.02, "k={k}: mean {m}");
            assert!(
                (v / (k * theta * theta) - 1.0).abs() < 0.05,
                "k={k}: var {v}"
            );
        }
        let lo_hi: Vec<u64> = (0..10_000).map(|_| r.range(3, 5)).collect();
        assert!(lo_hi.iter().all(|x| (3..=5).contains(x)));
        assert!(lo_hi.contains(&3) && lo_hi.contains(&5));
    }
}
