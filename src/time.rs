//! Formatting times for people: durations in a unit, seconds, UTC dates. A leaf: the readers,
//! the exporters, the report and the generator all print times through it.

/// The unit durations are shown in, in tables for people (JSON and CSV always hold integer
/// ns: scripts depend on them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeUnit {
    /// A unit per value that fits it: `820 ns`, `12.30 µs`, `1.432 ms`, `2.501 s`.
    #[default]
    Auto,
    /// Integer nanoseconds, as in JSON.
    Ns,
    /// Microseconds, three decimals.
    Us,
    /// Milliseconds, three decimals.
    Ms,
    /// Seconds, three decimals.
    S,
}

impl TimeUnit {
    /// A duration column's name for people: `comm_ns` is `comm` with units in the cells
    /// (`Auto`), `comm_us` in µs, and stays `comm_ns` in ns.
    pub fn column(self, name: &str) -> String {
        let stem = name.strip_suffix("_ns").unwrap_or(name);
        match self {
            TimeUnit::Auto => stem.to_string(),
            TimeUnit::Ns => format!("{stem}_ns"),
            TimeUnit::Us => format!("{stem}_us"),
            TimeUnit::Ms => format!("{stem}_ms"),
            TimeUnit::S => format!("{stem}_s"),
        }
    }

    /// `ns` as this unit says.
    pub fn format(self, ns: i64) -> String {
        let scaled = |div: f64| format!("{:.3}", ns as f64 / div);
        match self {
            TimeUnit::Auto => human_duration(ns),
            TimeUnit::Ns => ns.to_string(),
            TimeUnit::Us => scaled(1e3),
            TimeUnit::Ms => scaled(1e6),
            TimeUnit::S => scaled(1e9),
        }
    }
}

/// A duration with the unit that fits it and four significant digits (three below 10):
/// `0`, `820 ns`, `12.30 µs`, `1.432 ms`, `171.7 ms`, `-2.501 s`.
pub fn human_duration(ns: i64) -> String {
    let abs = ns.unsigned_abs();
    if abs < 1_000 {
        return ns.to_string() + if ns == 0 { "" } else { " ns" };
    }
    // A value that would round up to 1000 of a unit is shown in the next one.
    let (div, unit) = if abs < 999_950 {
        (1e3, "µs")
    } else if abs < 999_950_000 {
        (1e6, "ms")
    } else {
        (1e9, "s")
    };
    let value = ns as f64 / div;
    let decimals = match value.abs() {
        v if v < 10.0 => 3,
        v if v < 100.0 => 2,
        _ => 1,
    };
    format!("{value:.decimals$} {unit}")
}

/// An integer with thousands separators: `1,432,111`.
pub fn with_separators(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

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
    fn durations_take_the_unit_that_fits() {
        let cases = [
            (0, "0"),
            (820, "820 ns"),
            (-999, "-999 ns"),
            (12_300, "12.30 µs"),
            (1_432_111, "1.432 ms"),
            (17_172_652, "17.17 ms"),
            (171_726_520, "171.7 ms"),
            (999_999_999, "1.000 s"),
            (999_949, "999.9 µs"),
            (-2_501_000_000, "-2.501 s"),
        ];
        for (ns, text) in cases {
            assert_eq!(human_duration(ns), text, "{ns}");
        }
        assert_eq!(TimeUnit::Us.format(1_432_111), "1432.111");
        assert_eq!(TimeUnit::Ns.column("comm_ns"), "comm_ns");
        assert_eq!(TimeUnit::Auto.column("comm_ns"), "comm");
        assert_eq!(TimeUnit::Ms.column("idle_ns"), "idle_ms");
    }

    #[test]
    fn counts_get_thousands_separators() {
        assert_eq!(with_separators(0), "0");
        assert_eq!(with_separators(999), "999");
        assert_eq!(with_separators(1_000), "1,000");
        assert_eq!(with_separators(-1_432_111), "-1,432,111");
    }

    #[test]
    fn seconds_keep_every_nanosecond_and_the_sign() {
        assert_eq!(format_seconds(2_567_417_696), "2.567417696 s");
        assert_eq!(format_seconds(-1_500), "-0.000001500 s");
    }
}
