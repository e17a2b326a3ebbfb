//! The operator that launched each kernel: torch.profiler records every ATen operator as a
//! range on its thread (the Kineto reader keeps its `record_shapes` inputs as the range's
//! payload), and a kernel's launch call runs inside the operators that issued it. What an
//! operator says of its launches (a GEMM's precision, its FLOPs) is read here once per process:
//! the innermost range around the launch whose name and payload say something.

use super::activity::Activity;
use crate::hash::FxHashMap;
use crate::model::{ApiCall, ProcessId, ThreadId};

/// Per launch (correlation id) of one process: the operator that speaks for it (an index, the
/// same for every launch of one operator) and what it says.
#[derive(Debug)]
pub struct LaunchOperators<T> {
    /// Per thread: the ranges that say something, (start, end, operator, what it says), in
    /// start order.
    ranges: FxHashMap<ThreadId, Vec<(i64, i64, u32, T)>>,
    by_correlation: FxHashMap<u32, (u32, T)>,
}

impl<T: Copy> LaunchOperators<T> {
    /// The launches of `process` inside an operator range for which `says(text, payload)`
    /// gives something (its payload empty where the range has none: PyTorch's NVTX under nsys
    /// says it all in its text); the innermost such range decides (ranges nest on a thread).
    pub fn new(
        activity: &Activity,
        process: ProcessId,
        says: impl FnMut(&str, &str) -> Option<T>,
    ) -> LaunchOperators<T> {
        let mut operators = LaunchOperators::ranges(activity, process, says);
        if operators.speaks() {
            for call in activity.api_calls(process) {
                operators.call(call);
            }
        }
        operators
    }

    /// The operator ranges of `process` for which `says(name, payload)` gives something, with
    /// no launch yet: calls are added with [`LaunchOperators::call`] (from a capture's sorted
    /// events, where the timeline holds no calls).
    pub fn ranges(
        activity: &Activity,
        process: ProcessId,
        mut says: impl FnMut(&str, &str) -> Option<T>,
    ) -> LaunchOperators<T> {
        let timeline = activity.timeline;
        let mut ranges: FxHashMap<ThreadId, Vec<(i64, i64, u32, T)>> = FxHashMap::default();
        for (index, n) in activity.nvtx(process).enumerate() {
            let Some(end) = n.end else {
                continue;
            };
            let said = says(timeline.text(n.text), timeline.text(n.payload));
            if let Some(said) = said {
                let range = (n.start.0, end.0, index as u32, said);
                ranges.entry(n.thread).or_default().push(range);
            }
        }
        LaunchOperators {
            ranges,
            by_correlation: FxHashMap::default(),
        }
    }

    /// Whether any range says something (no call needs adding otherwise).
    pub fn speaks(&self) -> bool {
        !self.ranges.is_empty()
    }

    /// A call of the process, in start order: launched by the innermost range around it.
    pub fn call(&mut self, call: &ApiCall) {
        let Some(on_thread) = self.ranges.get(&call.thread) else {
            return;
        };
        if let Some(&(_, _, op, said)) = innermost(on_thread, call.start.0) {
            self.by_correlation.insert(call.correlation, (op, said));
        }
    }

    /// The operator that launched the GPU operation with this correlation id, and what it
    /// says, when one does.
    pub fn of(&self, correlation: u32) -> Option<(u32, T)> {
        self.by_correlation.get(&correlation).copied()
    }
}

/// The innermost range (ranges nest on a thread: the latest start) holding `t`; `ranges` in
/// start order, as the timeline keeps them.
fn innermost<R>(ranges: &[(i64, i64, u32, R)], t: i64) -> Option<&(i64, i64, u32, R)> {
    let opened = ranges.partition_point(|r| r.0 <= t);
    ranges[..opened].iter().rev().find(|r| t <= r.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_innermost_range_holding_the_launch_decides() {
        // aten::linear (fp32) around aten::addmm (bf16) around the launch at 50.
        let ranges = [(0, 100, 0, "gemm_fp32_tf32"), (40, 60, 1, "gemm_bf16_fp16")];
        assert_eq!(innermost(&ranges, 50).map(|r| r.3), Some("gemm_bf16_fp16"));
        assert_eq!(innermost(&ranges, 70).map(|r| r.3), Some("gemm_fp32_tf32"));
        assert_eq!(innermost(&ranges, 101), None);
    }
}
