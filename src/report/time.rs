//! Formatting times for people.

/// Nanoseconds as seconds with all nine decimals, e.g. `-0.000001500 s`.
pub fn format_seconds(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let abs = ns.unsigned_abs();
    format!("{sign}{}.{:09} s", abs / 1_000_000_000, abs % 1_000_000_000)
}

/// UTC epoch nanoseconds as ISO 8601 with nanoseconds, e.g. `2024-09-19T13:06:17.708342731Z`.
pub fn utc_iso(epoch_ns: i64) -> String {
    let secs = epoch_ns.div_euclid(1_000_000_000);
    let nanos = epoch_ns.rem_euclid(1_000_000_000);
    let (days, second_of_day) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_matches_the_export_text() {
        // fs24 ault42 pid 337169: utcEpochNs 1726751177708342731, utcTime 2024-09-19T13:06:17.
        assert_eq!(
            utc_iso(1_726_751_177_708_342_731),
            "2024-09-19T13:06:17.708342731Z"
        );
        assert_eq!(utc_iso(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            utc_iso(951_782_400_000_000_000),
            "2000-02-29T00:00:00.000000000Z"
        );
    }

    #[test]
    fn seconds_keep_every_nanosecond_and_the_sign() {
        assert_eq!(format_seconds(2_567_417_696), "2.567417696 s");
        assert_eq!(format_seconds(-1_500), "-0.000001500 s");
    }
}
