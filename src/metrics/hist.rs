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
}
