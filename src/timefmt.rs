//! Wall-clock formatting without a date library: UTC civil time from the Unix epoch.

use std::time::{SystemTime, UNIX_EPOCH};

/// (year, month, day, hour, minute, second) in UTC.
pub fn civil(t: SystemTime) -> (i64, u32, u32, u32, u32, u32) {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = if m <= 2 { y + 1 } else { y };
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
    )
}

/// `20260301-142530`, vLLM's `date` key and file-name stamp.
pub fn stamp_dash(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(t);
    format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
}

/// `20260301_142530`, the results tree's folder stamp.
pub fn stamp_underscore(t: SystemTime) -> String {
    stamp_dash(t).replace('-', "_")
}

/// `2026-03-01T14:25:30Z`.
pub fn iso(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(t);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// `2026-03-01T14:25:30.123456`: Python's `datetime.isoformat()` (microseconds shown
/// unless zero), in UTC.
pub fn iso_micros(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(t);
    let us = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_micros());
    let base = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}");
    if us == 0 {
        base
    } else {
        format!("{base}.{us:06}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn known_dates() {
        let t = UNIX_EPOCH + Duration::from_secs(1_772_375_130); // 2026-03-01 14:25:30 UTC
        assert_eq!(stamp_dash(t), "20260301-142530");
        assert_eq!(iso(t), "2026-03-01T14:25:30Z");
        assert_eq!(iso_micros(t), "2026-03-01T14:25:30");
        assert_eq!(
            iso_micros(t + Duration::from_micros(1234)),
            "2026-03-01T14:25:30.001234"
        );
        assert_eq!(stamp_dash(UNIX_EPOCH), "19700101-000000");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(civil(leap).0, 2000);
        assert_eq!((civil(leap).1, civil(leap).2), (2, 29));
    }
}
