//! `compare --fail-if`: checks of run B against run A for a CI job, such as "fail when the step
//! got 5 % slower" (`step_time>+5%`) or "when exposed communication grew by 2 points of the
//! step" (`bubble>+2pp`). A check names a metric of [`super::run_metrics`] (or an alias), a
//! direction and a limit on its change: relative (`%`), in percentage points (`pp`, for a
//! `_pct` metric), or in the metric's own unit (ns, a count).

use crate::classify::families::in_group;
use std::collections::BTreeMap;

/// Short names for the metrics a gate checks most: the metric a change in % or in its own unit
/// reads, and the one a change in points (`pp`) reads, where there is a share.
const ALIASES: [(&str, &str, Option<&str>); 6] = [
    ("step_time", "step_ns", None),
    (
        "exposed_comm",
        "exposed_comm_ns all",
        Some("exposed_comm_pct all"),
    ),
    ("bubble", "bubble_pct", Some("bubble_pct")),
    ("idle", "idle_ns per step", None),
    ("kernel_time", "kernel_ns per step", None),
    ("mfu", "mfu_pct", Some("mfu_pct")),
];

/// How a check measures a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Relative to run A, percent.
    Percent,
    /// Percentage points (B − A of a `_pct` metric).
    Points,
    /// The metric's own unit (B − A).
    Absolute,
}

/// One parsed check.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// As given.
    pub text: String,
    /// The metric, as [`super::run_metrics`] names it.
    pub metric: String,
    /// Fails when the change exceeds the limit (`>`), or falls below it (`<`).
    pub above: bool,
    /// The limit.
    pub limit: f64,
    /// Its unit.
    pub unit: Unit,
}

/// A check evaluated.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Verdict {
    /// The check as given.
    pub check: String,
    /// The metric.
    pub metric: String,
    /// Run A's and run B's values.
    pub a: f64,
    /// Run B's value.
    pub b: f64,
    /// The change, in `unit`.
    pub change: f64,
    /// The limit, in `unit`.
    pub limit: f64,
    /// The unit of `change` and `limit`.
    pub unit: Unit,
    /// Whether the check failed.
    pub failed: bool,
}

impl Check {
    /// Parses `METRIC>LIMIT` or `METRIC<LIMIT`: METRIC an alias (`step_time`, `exposed_comm`,
    /// `bubble`, `idle`, `kernel_time`, `mfu`), `family:NAME` (its time per step, or its share of the
    /// step with `pp`; NAME a family or a group such as `gemm`), or a metric as `compare`
    /// prints it; LIMIT a signed number followed by `%`, `pp` or nothing.
    pub fn parse(text: &str) -> Result<Check, String> {
        let at = text
            .find(['>', '<'])
            .ok_or_else(|| format!("--fail-if {text:?}: no `>` or `<` (e.g. step_time>+5%)"))?;
        let (name, rest) = (text[..at].trim(), &text[at + 1..]);
        let above = text.as_bytes()[at] == b'>';
        let rest = rest.trim();
        let (number, unit) = if let Some(n) = rest.strip_suffix('%') {
            (n, Unit::Percent)
        } else if let Some(n) = rest.strip_suffix("pp") {
            (n, Unit::Points)
        } else {
            (rest, Unit::Absolute)
        };
        let limit: f64 = number.trim().parse().map_err(|_| {
            format!("--fail-if {text:?}: {number:?} is not a number (e.g. +5%, -2pp, 1000000)")
        })?;
        let points = unit == Unit::Points;
        let metric = match (
            name.strip_prefix("family:"),
            ALIASES.iter().find(|a| a.0 == name),
        ) {
            (Some(family), _) if points => format!("family {family} share_of_step_pct"),
            (Some(family), _) => format!("family {family} ns per step"),
            (None, Some((_, _, Some(share)))) if points => share.to_string(),
            (None, Some((_, metric, _))) => metric.to_string(),
            (None, None) => name.to_string(),
        };
        if points && !is_share(&metric) {
            return Err(format!(
                "--fail-if {text:?}: `pp` is for a share (bubble, exposed_comm, family:NAME, a \
                 `_pct` metric); {metric} changes in % or in its own unit"
            ));
        }
        Ok(Check {
            text: text.to_string(),
            metric,
            above,
            limit,
            unit,
        })
    }

    /// The check on runs A and B's metrics; an error names a metric one run lacks, with the
    /// metrics both have.
    pub fn evaluate(
        &self,
        a: &BTreeMap<String, f64>,
        b: &BTreeMap<String, f64>,
    ) -> Result<Verdict, String> {
        let (Some(x), Some(y)) = (value(a, &self.metric), value(b, &self.metric)) else {
            let both: Vec<&str> = a
                .keys()
                .filter(|k| b.contains_key(*k))
                .map(String::as_str)
                .collect();
            return Err(format!(
                "--fail-if {:?}: the runs do not both have {:?}; they have: {}",
                self.text,
                self.metric,
                both.join(", ")
            ));
        };
        let change = match self.unit {
            Unit::Percent if x == 0.0 => match y == 0.0 {
                true => 0.0,
                false => f64::INFINITY.copysign(y),
            },
            Unit::Percent => 100.0 * (y - x) / x.abs(),
            Unit::Points | Unit::Absolute => y - x,
        };
        let failed = match self.above {
            true => change > self.limit,
            false => change < self.limit,
        };
        Ok(Verdict {
            check: self.text.clone(),
            metric: self.metric.clone(),
            a: x,
            b: y,
            change,
            limit: self.limit,
            unit: self.unit,
            failed,
        })
    }
}

/// Whether a metric of [`super::run_metrics`] is a share in percent (`bubble_pct`,
/// `exposed_comm_pct all`), whose changes are percentage points.
pub fn is_share(metric: &str) -> bool {
    metric.split(' ').any(|word| word.ends_with("_pct"))
}

/// A metric's value in one run. A family metric also names a group of families: `family gemm
/// ns per step` sums `gemm_bf16_fp16`, `gemm_fp32_tf32`, ... (the families `gemm_*`), so a gate
/// holds when a run's GEMMs change precision. A share summed so stays a share of the step.
fn value(metrics: &BTreeMap<String, f64>, metric: &str) -> Option<f64> {
    if let Some(&v) = metrics.get(metric) {
        return Some(v);
    }
    let (family, measure) = metric.strip_prefix("family ")?.split_once(' ')?;
    let members: Vec<f64> = metrics
        .iter()
        .filter(|(k, _)| {
            k.strip_prefix("family ")
                .and_then(|rest| rest.split_once(' '))
                .is_some_and(|(f, m)| m == measure && in_group(family, f))
        })
        .map(|(_, &v)| v)
        .collect();
    (!members.is_empty()).then(|| members.iter().sum())
}

impl Verdict {
    /// One line for people: `FAIL step_time>+5%: step_ns +6.2% (limit +5%)`.
    pub fn line(&self) -> String {
        let unit = match self.unit {
            Unit::Percent => "%",
            Unit::Points => "pp",
            Unit::Absolute => "",
        };
        format!(
            "{} {}: {} {:+.1}{unit} (limit {:+}{unit})",
            if self.failed { "FAIL" } else { "pass" },
            self.check,
            self.metric,
            self.change,
            self.limit
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(a: f64, b: f64, metric: &str) -> [BTreeMap<String, f64>; 2] {
        [a, b].map(|v| BTreeMap::from([(metric.to_string(), v)]))
    }

    #[test]
    fn checks_parse_and_judge_changes_in_their_unit() {
        let check = Check::parse("step_time>+5%").unwrap();
        assert_eq!((check.metric.as_str(), check.limit), ("step_ns", 5.0));
        let [a, b] = runs(100.0, 106.0, "step_ns");
        let verdict = check.evaluate(&a, &b).unwrap();
        assert!(verdict.failed);
        assert!((verdict.change - 6.0).abs() < 1e-9);
        assert!(
            !Check::parse("step_time>+50%")
                .unwrap()
                .evaluate(&a, &b)
                .unwrap()
                .failed
        );
        // Points of a percentage, and a fall below a limit.
        let [a, b] = runs(10.0, 12.5, "bubble_pct");
        assert!(
            Check::parse("bubble>+2pp")
                .unwrap()
                .evaluate(&a, &b)
                .unwrap()
                .failed
        );
        assert!(
            !Check::parse("bubble<-1pp")
                .unwrap()
                .evaluate(&a, &b)
                .unwrap()
                .failed
        );
        let family = Check::parse("family:gemm_bf16_fp16>+10%").unwrap();
        assert_eq!(family.metric, "family gemm_bf16_fp16 ns per step");
        let exposed = Check::parse("exposed_comm>+2pp").unwrap();
        assert_eq!(exposed.metric, "exposed_comm_pct all");
    }

    #[test]
    fn a_family_group_sums_its_members_so_a_precision_change_is_still_gated() {
        let metric = |name: &str, v: f64| (name.to_string(), v);
        let a = BTreeMap::from([
            metric("family gemm_fp32_tf32 ns per step", 80.0),
            metric("family gemm_bf16_fp16 ns per step", 20.0),
            metric("family gemm_bf16_fp16 share_of_step_pct", 9.0),
            metric("family gemmology ns per step", 1000.0),
        ]);
        let b = BTreeMap::from([metric("family gemm_bf16_fp16 ns per step", 112.0)]);
        let verdict = Check::parse("family:gemm>+10%")
            .unwrap()
            .evaluate(&a, &b)
            .unwrap();
        assert_eq!((verdict.a, verdict.b), (100.0, 112.0));
        assert!(verdict.failed);
        assert!(
            Check::parse("family:attention>+10%")
                .unwrap()
                .evaluate(&a, &b)
                .is_err()
        );
    }

    #[test]
    fn bad_checks_say_what_is_wrong() {
        assert!(
            Check::parse("step_time+5%")
                .unwrap_err()
                .contains("no `>` or `<`")
        );
        assert!(
            Check::parse("step_time>fast")
                .unwrap_err()
                .contains("not a number")
        );
        assert!(
            Check::parse("step_time>+2pp")
                .unwrap_err()
                .contains("`pp` is for")
        );
        let [a, b] = runs(1.0, 2.0, "step_ns");
        let missing = Check::parse("nothing>1").unwrap().evaluate(&a, &b);
        assert!(missing.unwrap_err().contains("they have: step_ns"));
    }
}
