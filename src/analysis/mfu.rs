//! The work a rank's kernels did per step and family: FLOPs from the operators that launched
//! them ([`LaunchFlops`]), beside the time they ran, for achieved TFLOP/s and MFU.
//!
//! An operator's FLOPs (and bytes) go to the kernels it launched that do the arithmetic (families
//! `gemm_*` and `attention_*`), split evenly; an operator none of whose kernels does (a
//! split-K GEMM's zeroing memset alone, where the trace lost the GEMM) is counted apart, its
//! FLOPs not given to another family. A kernel belongs to the step range its launch lies in
//! (its own start without a launch). Kernels of those families with no counted operator
//! around them are counted apart too: their FLOPs are unknown, never estimated from time.

use super::kernels::{Operation, each_operation};
use crate::classify::families::FamilyCache;
use crate::classify::flops::{LaunchFlops, Work};
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
    /// The bytes those operators move at least, where their inputs' types give them.
    pub bytes: f64,
    /// Of its kernels with FLOPs, those whose operator's bytes are unknown.
    pub without_bytes: u64,
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
    let mut tally = WorkTally::new(steps);
    let whole = (i64::MIN, i64::MAX);
    each_operation(
        activity,
        (process, whole),
        (comm, rules),
        families,
        |op, family| {
            let launch = activity.launch(process, op.correlation).map(|t| t.0);
            tally.add(&op, family, (launch, launched.of(op.correlation)));
        },
    );
    tally.finish()
}

/// A rank's work ([`rank_work`]'s), gathered one operation at a time.
pub struct WorkTally<'s> {
    steps: &'s [(i64, i64)],
    work: Vec<BTreeMap<String, FamilyWork>>,
    /// Per counted operator: its work and its arithmetic kernels' (step, family).
    shares: Shares<(usize, String)>,
}

impl<'s> WorkTally<'s> {
    /// Nothing yet, over step ranges `steps` (in order).
    pub fn new(steps: &'s [(i64, i64)]) -> WorkTally<'s> {
        WorkTally {
            steps,
            work: vec![BTreeMap::new(); steps.len()],
            shares: Shares::default(),
        }
    }

    /// Operation `op` of `family`, launched at `launch` (None without a recorded launch: its
    /// start counts) by the counted operator `operator` (its index and work), if any.
    pub fn add(
        &mut self,
        op: &Operation,
        family: &str,
        (launch, operator): (Option<i64>, Option<(u32, Work)>),
    ) {
        let Some(k) = step_of(self.steps, launch.unwrap_or(op.span.0)) else {
            return;
        };
        let entry = self.work[k].entry(family.to_string()).or_default();
        entry.kernels += 1;
        entry.time_ns += op.span.1 - op.span.0;
        match operator {
            Some(operator) => {
                (self.shares).add(operator, (k, family.to_string()), arithmetic(family));
            }
            None if arithmetic(family) => {
                entry.uncounted.0 += 1;
                entry.uncounted.1 += op.span.1 - op.span.0;
            }
            None => {}
        }
    }

    /// The work: each counted operator's FLOPs and bytes shared among its arithmetic kernels.
    pub fn finish(self) -> RankWork {
        let mut work = self.work;
        let without_arithmetic = self.shares.share(|(k, family), share| {
            let entry = work[k].get_mut(&family).expect("counted above");
            entry.flops += share.flops;
            match share.bytes {
                Some(bytes) => entry.bytes += bytes,
                None => entry.without_bytes += 1,
            }
        });
        RankWork {
            steps: work,
            without_arithmetic,
        }
    }
}

/// Counted operators' work, shared among the arithmetic kernels each launched: the same
/// attribution for `mfu`'s tables and the traces' achieved-TFLOP/s counters.
#[derive(Debug)]
pub struct Shares<K> {
    /// Per operator (its index): its work and how many arithmetic kernels it launched.
    operators: FxHashMap<u32, (Work, u32)>,
    /// The arithmetic kernels, with their operator.
    kernels: Vec<(u32, K)>,
}

impl<K> Default for Shares<K> {
    fn default() -> Self {
        Shares {
            operators: FxHashMap::default(),
            kernels: Vec::new(),
        }
    }
}

impl<K> Shares<K> {
    /// A kernel the operator (index, work) launched; it gets a share when it does arithmetic.
    pub fn add(&mut self, (operator, work): (u32, Work), kernel: K, arithmetic: bool) {
        let entry = self.operators.entry(operator).or_insert((work, 0));
        if arithmetic {
            entry.1 += 1;
            self.kernels.push((operator, kernel));
        }
    }

    /// Each arithmetic kernel with its share of its operator's work (split evenly); returns
    /// the operators none of whose kernels does arithmetic: how many, and their FLOPs.
    pub fn share(self, mut each: impl FnMut(K, Work)) -> (u64, f64) {
        for (operator, kernel) in self.kernels {
            let (done, n) = self.operators[&operator];
            let n = f64::from(n);
            let share = Work {
                flops: done.flops / n,
                bytes: done.bytes.map(|b| b / n),
            };
            each(kernel, share);
        }
        let idle = self.operators.values().filter(|(_, n)| *n == 0);
        idle.fold((0, 0.0), |(count, flops), (done, _)| {
            (count + 1, flops + done.flops)
        })
    }
}

/// The index of the step range holding `t`, when one does.
fn step_of(steps: &[(i64, i64)], t: i64) -> Option<usize> {
    let k = steps.partition_point(|s| s.0 <= t).checked_sub(1)?;
    (t <= steps[k].1).then_some(k)
}
