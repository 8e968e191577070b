//! A latency's statistics in milliseconds over a case's requests, and how benchplan's
//! own blocks write them: flat, in vLLM's key style (`mean_ttfo_ms`, `p99_ttfo_ms`),
//! so a block's keys are the same names summary.csv and a reader use.

use serde::ser::SerializeMap;

use super::stats::{mean, percentile_sorted};

/// The statistics every flat latency carries, in the order they are written.
pub const STATS: [&str; 4] = ["mean", "median", "p90", "p99"];

/// A latency's mean, median, P90 and P99 in milliseconds (numpy's definitions).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ms {
    pub mean: f64,
    pub median: f64,
    pub p90: f64,
    pub p99: f64,
    /// The requests (or gaps) it is over.
    pub n: u64,
}

impl Ms {
    /// Of values in seconds; None when there are none.
    pub fn of(secs: &[f64]) -> Option<Ms> {
        Ms::of_values(secs.iter().map(|s| s * 1e3).collect())
    }

    /// Of values already in the unit they are reported in (a ratio, a length).
    pub fn of_values(mut ms: Vec<f64>) -> Option<Ms> {
        if ms.is_empty() {
            return None;
        }
        ms.sort_by(f64::total_cmp);
        Some(Ms {
            mean: mean(&ms),
            median: percentile_sorted(&ms, 50.0),
            p90: percentile_sorted(&ms, 90.0),
            p99: percentile_sorted(&ms, 99.0),
            n: ms.len() as u64,
        })
    }

    fn values(&self) -> [f64; 4] {
        [self.mean, self.median, self.p90, self.p99]
    }
}

/// Writes `name`'s statistics into `map` as `{stat}_{name}_ms` (nothing when absent:
/// a reader tells "not measured" from a number).
pub fn put<M: SerializeMap>(map: &mut M, name: &str, ms: &Option<Ms>) -> Result<(), M::Error> {
    put_as(map, name, "_ms", ms)
}

/// The same for a figure in another unit (`{stat}_{name}{suffix}`), whose values
/// [`Ms::of_values`] took as they are.
pub fn put_as<M: SerializeMap>(
    map: &mut M,
    name: &str,
    suffix: &str,
    ms: &Option<Ms>,
) -> Result<(), M::Error> {
    if let Some(m) = ms {
        for (stat, v) in STATS.iter().zip(m.values()) {
            map.serialize_entry(&format!("{stat}_{name}{suffix}"), &v)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct One(Option<Ms>);
    impl serde::Serialize for One {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut m = s.serialize_map(None)?;
            put(&mut m, "ttfo", &self.0)?;
            m.end()
        }
    }

    #[test]
    fn a_latency_is_written_flat_in_vllm_key_style() {
        let one = One(Ms::of(&[0.010, 0.020, 0.030]));
        let v = serde_json::to_value(&one).unwrap();
        assert_eq!(v["mean_ttfo_ms"], 20.0);
        assert_eq!(v["median_ttfo_ms"], 20.0);
        assert!((v["p99_ttfo_ms"].as_f64().unwrap() - 29.8).abs() < 1e-9);
        assert_eq!(v.as_object().unwrap().len(), 4);
        assert_eq!(
            serde_json::to_value(One(None)).unwrap(),
            serde_json::json!({})
        );
    }
}
