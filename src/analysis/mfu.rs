//! The work a rank's kernels did per step and family: FLOPs from the operators that launched
//! them ([`LaunchFlops`]), beside the time they ran, for achieved TFLOP/s and MFU.
//!
//! An operator's FLOPs go to the kernels it launched that do the arithmetic (families
//! `gemm_*` and `attention_*`), split evenly; an operator none of whose kernels does (a
//! split-K GEMM's zeroing memset alone, where the trace lost the GEMM) is counted apart, its
//! FLOPs not given to another family. A kernel belongs to the step range its launch lies in
//! (its own start without a launch). Kernels of those families with no counted operator
//! around them are counted apart too: their FLOPs are unknown, never estimated from time.

use super::kernels::each_operation;
use crate::classify::families::FamilyCache;
use crate::classify::flops::LaunchFlops;
use crate::classify::{Activity, RankStreams, RoleRules};
use crate::hash::FxHashMap;
use crate::model::ProcessId;
use std::collections::BTreeMap;

/// One family's work in one step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FamilyWork {
    /// Its kernels (every GPU operation of the family launched in the step).
    pub kernels: u64,
    /// Its FLOPs, from the operators that launched them.
    pub flops: f64,
    /// The summed duration of its kernels, ns.
    pub time_ns: i64,
    /// Of its kernels, those that do arithmetic but no counted operator launched: their
    /// number and time, ns.
    pub uncounted: (u64, i64),
}

/// Whether a family does the arithmetic FLOPs are counted for.
pub fn arithmetic(family: &str) -> bool {
    family.starts_with("gemm") || family.starts_with("attention")
}

/// A rank's work per step, and what could not be counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankWork {
    /// Per step, per family: its work.
    pub steps: Vec<BTreeMap<String, FamilyWork>>,
    /// Counted operators none of whose kernels does arithmetic: how many, and their FLOPs.
    pub without_arithmetic: (u64, f64),
}

/// The work of `process`'s kernels per step of `steps` (its step ranges, in order).
pub fn rank_work(
    activity: &Activity,
    (process, steps): (ProcessId, &[(i64, i64)]),
    (comm, rules): (&RankStreams, &RoleRules),
    families: &mut FamilyCache,
) -> RankWork {
    let launched = LaunchFlops::new(activity, process);
    let mut work: Vec<BTreeMap<String, FamilyWork>> = vec![BTreeMap::new(); steps.len()];
    // Per counted operator: its FLOPs and its kernels' (step, family) in the step's table.
    let mut operators: FxHashMap<u32, (f64, Vec<(usize, String)>)> = FxHashMap::default();
    let whole = (i64::MIN, i64::MAX);
    each_operation(
        activity,
        (process, whole),
        (comm, rules),
        families,
        |op, family| {
            let at = activity
                .launch(process, op.correlation)
                .map_or(op.span.0, |t| t.0);
            let Some(k) = step_of(steps, at) else { return };
            let entry = work[k].entry(family.to_string()).or_default();
            entry.kernels += 1;
            entry.time_ns += op.span.1 - op.span.0;
            match launched.of(op.correlation) {
                Some((operator, flops)) => {
                    let kernels = &mut operators.entry(operator).or_insert((flops, Vec::new())).1;
                    kernels.push((k, family.to_string()));
                }
                None if arithmetic(family) => {
                    entry.uncounted.0 += 1;
                    entry.uncounted.1 += op.span.1 - op.span.0;
                }
                None => {}
            }
        },
    );
    let mut without_arithmetic = (0, 0.0);
    for (flops, kernels) in operators.into_values() {
        let doing: Vec<&(usize, String)> = kernels.iter().filter(|k| arithmetic(&k.1)).collect();
        if doing.is_empty() {
            without_arithmetic.0 += 1;
            without_arithmetic.1 += flops;
            continue;
        }
        let each = flops / doing.len() as f64;
        for (k, family) in doing {
            work[*k].get_mut(family).expect("counted above").flops += each;
        }
    }
    RankWork {
        steps: work,
        without_arithmetic,
    }
}

/// The index of the step range holding `t`, when one does.
fn step_of(steps: &[(i64, i64)], t: i64) -> Option<usize> {
    let k = steps.partition_point(|s| s.0 <= t).checked_sub(1)?;
    (t <= steps[k].1).then_some(k)
}
