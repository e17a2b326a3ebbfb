//! One clock for many reports (DESIGN.md, Clock).
//!
//! One report keeps its own timestamps. Several reports go onto ns since the earliest session start
//! among them (`ref`): a session-relative report maps `t -> t + (utcEpochNs - ref)`, a
//! ts-normalized one (already UTC epoch ns) maps `t -> t - ref`, never both. A report without a
//! session start gets offset 0 (its reader has already warned).

use super::ExportMeta;

/// What a report's raw timestamps count from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeBase {
    /// ns since the report's session start (the default export).
    SessionRelative,
    /// UTC epoch ns (`nsys export --ts-normalize=true`).
    UtcEpoch,
}

/// How one report's times were mapped onto the merged clock: `merged = raw + offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ClockMapping {
    /// What the raw times count from.
    pub base: TimeBase,
    /// Added to every raw time, ns (the session offset, plus `correction` once aligned).
    #[serde(rename = "offset_ns")]
    pub offset: i64,
    /// Of `offset`, the correction `--align collectives` estimated for the report's host, ns.
    #[serde(rename = "collective_correction_ns")]
    pub correction: i64,
}

/// The mapping of every report, in input order.
pub fn plan(metas: &[&ExportMeta]) -> Vec<ClockMapping> {
    let base = |m: &ExportMeta| {
        if m.time_normalized {
            TimeBase::UtcEpoch
        } else {
            TimeBase::SessionRelative
        }
    };
    let reference = metas.iter().filter_map(|m| m.session_start_utc_ns).min();
    metas
        .iter()
        .map(|m| {
            let offset = match (metas.len(), reference, m.session_start_utc_ns) {
                (1, _, _) | (_, None, _) | (_, _, None) => 0,
                (_, Some(reference), Some(start)) => match base(m) {
                    TimeBase::UtcEpoch => -reference,
                    TimeBase::SessionRelative => start - reference,
                },
            };
            ClockMapping {
                base: base(m),
                offset,
                correction: 0,
            }
        })
        .collect()
}

/// The mapping of a report read on its own clock: its own timestamps, unchanged.
pub fn own_clock(meta: &ExportMeta) -> ClockMapping {
    plan(&[meta])[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(start: Option<i64>, normalized: bool) -> ExportMeta {
        ExportMeta {
            session_start_utc_ns: start,
            time_normalized: normalized,
            ..ExportMeta::default()
        }
    }

    #[test]
    fn one_report_keeps_its_own_times() {
        let m = meta(Some(1_700_000_000_000_000_000), true);
        assert_eq!(plan(&[&m])[0].offset, 0);
    }

    #[test]
    fn session_relative_reports_shift_by_their_session_delta() {
        let a = meta(Some(1_000_500), false);
        let b = meta(Some(1_000_000), false);
        let offsets: Vec<_> = plan(&[&a, &b]).iter().map(|c| c.offset).collect();
        assert_eq!(offsets, vec![500, 0]);
    }

    #[test]
    fn normalized_reports_subtract_the_reference_only() {
        let a = meta(Some(1_000_500), true);
        let b = meta(Some(1_000_000), true);
        let offsets: Vec<_> = plan(&[&a, &b]).iter().map(|c| c.offset).collect();
        assert_eq!(offsets, vec![-1_000_000, -1_000_000]);
    }

    #[test]
    fn a_report_without_session_start_gets_zero() {
        let a = meta(None, false);
        let b = meta(Some(42), false);
        let offsets: Vec<_> = plan(&[&a, &b]).iter().map(|c| c.offset).collect();
        assert_eq!(offsets, vec![0, 0]);
    }
}
