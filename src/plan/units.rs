//! Values with units as plans write them: durations (`500ms`, `1.5s`, `250us`),
//! percentages (`5%` or a fraction), and request rates (a number or `inf`).

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// A duration written with a unit: `250us`, `500ms`, `1.5s`, `2m`, `1h`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Dur(pub Duration);

impl Dur {
    pub fn from_secs_f64(s: f64) -> Dur {
        Dur(Duration::from_secs_f64(s))
    }

    pub fn as_secs_f64(self) -> f64 {
        self.0.as_secs_f64()
    }

    pub fn as_millis_f64(self) -> f64 {
        self.0.as_secs_f64() * 1e3
    }
}

/// Parses `250us`, `500ms`, `1.5s`, `2m`, `1h` (also `µs`); negative values are refused.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| {
            !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E')
        })
        .unwrap_or(t.len());
    // `e` may belong to the number (1e3ms); a bare unit never starts with e.
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| {
        format!("`{text}` is not a duration; write a number with a unit, like 500ms or 1.5s")
    })?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "" => return Err(format!("`{text}` has no unit; write 500ms, 1.5s or 250us")),
        other => {
            let hint = unit_alias(other).map_or(String::new(), |u| {
                format!("; did you mean `{}{u}`?", num.trim())
            });
            return Err(format!(
                "unknown duration unit `{other}` in `{text}`{hint} (units: ns, us, ms, s, m, h, as in 250us, 500ms, 1.5s, 2m)"
            ));
        }
    };
    if value < 0.0 || !value.is_finite() {
        return Err(format!("`{text}` must be a finite, non-negative duration"));
    }
    // A duration past what `Duration` holds (about 585 billion years) is an error, not
    // a panic (found by the `slo` fuzz target: `p1_itl=333…350h`).
    Duration::try_from_secs_f64(value * scale)
        .map_err(|_| format!("`{text}` is too long a duration"))
}

/// The unit a common spelling means (`msec`, `seconds`, `mins`, …), or the nearest
/// one by spelling.
fn unit_alias(unit: &str) -> Option<&'static str> {
    let u = unit.trim().to_ascii_lowercase();
    let named = match u.trim_end_matches('s') {
        "msec" | "millisecond" | "milli" | "millis" => Some("ms"),
        "sec" | "second" | "" => Some("s"),
        "usec" | "microsecond" | "micro" | "μ" => Some("us"),
        "nsec" | "nanosecond" => Some("ns"),
        "minute" | "mn" | "min" => Some("m"),
        "hour" | "hr" => Some("h"),
        _ => None,
    };
    named.or_else(|| {
        // The nearest unit by edit distance, when it is near (of two as near, the one
        // of the same length: `mz` meant `ms`).
        const UNITS: [&str; 6] = ["ns", "us", "ms", "s", "m", "h"];
        UNITS
            .iter()
            .map(|k| {
                let d = crate::diag::edit_distance(&u, k);
                (d, k.len().abs_diff(u.len()), *k)
            })
            .min()
            .filter(|(d, _, _)| *d <= 1)
            .map(|(_, _, k)| k)
    })
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos();
        if ns == 0 {
            write!(f, "0s")
        } else if ns % 1_000_000_000 == 0 {
            write!(f, "{}s", ns / 1_000_000_000)
        } else if ns % 1_000_000 == 0 {
            write!(f, "{}ms", ns / 1_000_000)
        } else if ns % 1_000 == 0 {
            write!(f, "{}us", ns / 1_000)
        } else {
            write!(f, "{ns}ns")
        }
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration with a unit, like \"500ms\" or \"1.5s\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
                parse_duration(v).map(Dur).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
                if v == 0 {
                    Ok(Dur::default())
                } else {
                    Err(E::custom(format!(
                        "`{v}` has no unit; write \"{v}ms\" or \"{v}s\""
                    )))
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
                self.visit_i64(v as i64)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "`{v}` has no unit; write \"{v}ms\" or \"{v}s\""
                )))
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for Dur {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A duration with a unit: \"250us\", \"500ms\", \"1.5s\", \"2m\".",
            "type": "string",
            "pattern": "^[0-9.eE+]+\\s*(ns|us|µs|ms|s|m|min|h)$"
        })
    }
}

/// A proportion, written `5%` or as a fraction `0.05`; stored as the fraction.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Percent(pub f64);

impl Serialize for Percent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{}%", round9(self.0 * 100.0)))
    }
}

fn round9(x: f64) -> f64 {
    (x * 1e9).round() / 1e9
}

/// Parses `5%` (→ 0.05) or a bare fraction `0.05`.
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 0.01),
        None => (t, 1.0),
    };
    num.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v * scale)
        .ok_or_else(|| format!("`{text}` is not a percentage; write \"5%\" or 0.05"))
}

impl<'de> Deserialize<'de> for Percent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Percent;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a percentage like \"5%\" or a fraction like 0.05")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Percent, E> {
                parse_percent(v).map(Percent).map_err(E::custom)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Percent, E> {
                Ok(Percent(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Percent, E> {
                Ok(Percent(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Percent, E> {
                Ok(Percent(v as f64))
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for Percent {
    fn schema_name() -> Cow<'static, str> {
        "Percent".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A percentage (\"5%\") or a fraction (0.05).",
            "anyOf": [
                {"type": "string", "pattern": "^[0-9.eE+-]+\\s*%?$"},
                {"type": "number"}
            ]
        })
    }
}

/// Requests per second; `inf` sends every request at once (vLLM's default).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Rate(pub f64);

impl Default for Rate {
    fn default() -> Self {
        Rate(f64::INFINITY)
    }
}

impl Rate {
    pub fn is_finite(self) -> bool {
        self.0.is_finite()
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_infinite() {
            f.write_str("inf")
        } else {
            write!(f, "{}", self.0)
        }
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // vLLM writes an infinite rate as the string "inf".
        serialize_inf(self.0, s)
    }
}

/// A number that may also be written "inf" (JSON has no infinity), never NaN.
fn number_or_inf<'de, D: Deserializer<'de>>(d: D, what: &'static str) -> Result<f64, D::Error> {
    struct V(&'static str);
    impl de::Visitor<'_> for V {
        type Value = f64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "{} or \"inf\"", self.0)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
            match v.trim().to_ascii_lowercase().as_str() {
                "inf" | "infinity" | "+inf" | "+infinity" => Ok(f64::INFINITY),
                t => match t.parse::<f64>() {
                    Ok(x) if !x.is_nan() => Ok(x),
                    _ => Err(E::custom(format!(
                        "`{v}` is not {}; write a number or \"inf\"",
                        self.0
                    ))),
                },
            }
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
            if v.is_nan() {
                return Err(E::custom(format!("NaN is not {}", self.0)));
            }
            Ok(v)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }
    }
    d.deserialize_any(V(what))
}

/// Writes an infinite value as the string "inf", as vLLM writes an infinite rate.
fn serialize_inf<S: Serializer>(x: f64, s: S) -> Result<S::Ok, S::Error> {
    if x.is_finite() {
        s.serialize_f64(x)
    } else {
        s.serialize_str("inf")
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        number_or_inf(d, "a number of requests per second").map(Rate)
    }
}

/// The gamma shape of arrival gaps (vLLM's `--burstiness`): 1 is Poisson, larger is
/// more regular, "inf" gives constant gaps.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Burstiness(pub f64);

impl Default for Burstiness {
    fn default() -> Self {
        Burstiness(1.0)
    }
}

impl Serialize for Burstiness {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_inf(self.0, s)
    }
}

impl<'de> Deserialize<'de> for Burstiness {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        number_or_inf(d, "a gamma shape").map(Burstiness)
    }
}

impl JsonSchema for Burstiness {
    fn schema_name() -> Cow<'static, str> {
        "Burstiness".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Gamma shape of the arrival gaps: 1 is Poisson, larger is more regular, smaller burstier, \"inf\" constant gaps.",
            "anyOf": [{"type": "number"}, {"const": "inf"}]
        })
    }
}

impl JsonSchema for Rate {
    fn schema_name() -> Cow<'static, str> {
        "Rate".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Requests per second, or \"inf\" to send every request at once.",
            "anyOf": [{"type": "number"}, {"const": "inf"}]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelled_unit_gets_the_form_it_meant() {
        for (written, meant) in [
            ("800 msec", "did you mean `800ms`?"),
            ("1.5 sec", "did you mean `1.5s`?"),
            ("2 mins", "did you mean `2m`?"),
            ("3 hours", "did you mean `3h`?"),
            ("250 usecs", "did you mean `250us`?"),
            ("5mz", "did you mean `5ms`?"),
        ] {
            let e = parse_duration(written).unwrap_err();
            assert!(e.contains(meant), "{written}: {e}");
        }
        // Nothing near: the units, without a guess.
        let e = parse_duration("4 fortnights").unwrap_err();
        assert!(
            !e.contains("did you mean") && e.contains("units: ns, us, ms, s, m, h"),
            "{e}"
        );
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("500").unwrap_err().contains("no unit"));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration(&format!("{}h", "3".repeat(50))).is_err());
        assert_eq!(Dur(Duration::from_millis(1500)).to_string(), "1500ms");
    }

    #[test]
    fn percents_and_rates() {
        assert!((parse_percent("5%").unwrap() - 0.05).abs() < 1e-12);
        assert_eq!(parse_percent("0.2").unwrap(), 0.2);
        let r: Rate = serde_json::from_str("\"inf\"").unwrap();
        assert!(!r.is_finite());
        assert_eq!(serde_json::to_string(&r).unwrap(), "\"inf\"");
        let r: Rate = serde_json::from_str("2.5").unwrap();
        assert_eq!(r.0, 2.5);
    }
}
