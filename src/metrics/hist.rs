//! HDR histograms (microseconds, 3 significant digits) kept beside the exact values so
//! results from several shards or runs can be merged later without losing the tail.

use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};

/// A histogram of latencies given in seconds, recorded in microseconds.
pub fn from_seconds(values: impl IntoIterator<Item = f64>) -> Histogram<u64> {
    // 1 µs to 1 hour at 3 significant digits: a fixed size, so every histogram merges with every other.
    let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds");
    for v in values {
        h.saturating_record((v * 1e6).round().max(0.0) as u64);
    }
    h
}

/// V2 + deflate, base64: the format HdrHistogram's tools read.
pub fn encode(h: &Histogram<u64>) -> String {
    let mut buf = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut buf)
        .expect("serialising to memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

pub fn decode(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| e.to_string())?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("{e:?}"))
}

/// The value of rank `k` (0-based, ascending) among the recorded values: the middle of
/// its bucket, so within half a bucket (0.05 %) of the exact value.
fn value_at_rank(h: &Histogram<u64>, k: u64) -> u64 {
    let mut seen = 0;
    for v in h.iter_recorded() {
        seen += v.count_at_value();
        if seen > k {
            return h.median_equivalent(v.value_iterated_to());
        }
    }
    h.median_equivalent(h.max())
}

/// Percentile `p` (0–100) as numpy's default (linear) method takes it, which is how vLLM
/// computes every latency percentile: between the two order statistics around
/// `p/100 · (n−1)`. In the histogram's unit (µs); None when it is empty.
pub fn percentile_linear(h: &Histogram<u64>, p: f64) -> Option<f64> {
    let n = h.len();
    if n == 0 {
        return None;
    }
    let idx = (p / 100.0).clamp(0.0, 1.0) * (n - 1) as f64;
    let (lo, hi) = (idx.floor() as u64, idx.ceil() as u64);
    let (a, b) = (value_at_rank(h, lo) as f64, value_at_rank(h, hi) as f64);
    Some(a + (b - a) * (idx - lo as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_merges() {
        let a = from_seconds([0.010, 0.020, 0.030]);
        let b = decode(&encode(&a)).unwrap();
        assert_eq!(b.len(), 3);
        let median = b.value_at_quantile(0.5) as f64;
        assert!((median - 20_000.0).abs() <= 20.0, "median {median}");
        let mut m = b.clone();
        m.add(from_seconds([1.0])).unwrap();
        assert_eq!(m.len(), 4);
        assert!((m.max() as f64 - 1e6).abs() / 1e6 < 1e-3);
    }

    #[test]
    fn linear_percentiles_match_numpy_to_hdr_precision() {
        // numpy.percentile([10, 20, 30, 40] ms, 90) = 37 ms; median 25 ms; p0/p100 the ends.
        let h = from_seconds([0.040, 0.010, 0.030, 0.020]);
        let close = |p: f64, want_us: f64| {
            let got = percentile_linear(&h, p).unwrap();
            assert!(
                (got - want_us).abs() <= want_us * 5e-4 + 1.0,
                "p{p}: {got} vs {want_us}"
            );
        };
        close(90.0, 37_000.0);
        close(50.0, 25_000.0);
        close(0.0, 10_000.0);
        close(100.0, 40_000.0);
        // Small values are exact: 1..=100 µs, p99 = 99.01 µs.
        let h = from_seconds((1..=100).map(|u| u as f64 * 1e-6));
        assert!((percentile_linear(&h, 99.0).unwrap() - 99.01).abs() < 1e-9);
        assert_eq!(percentile_linear(&from_seconds([]), 50.0), None);
    }
}
