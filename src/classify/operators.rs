//! The operator that launched each kernel: torch.profiler records every ATen operator as a
//! range on its thread (the Kineto reader keeps its `record_shapes` inputs as the range's
//! payload), and a kernel's launch call runs inside the operators that issued it. What an
//! operator says of its launches (a GEMM's precision, its FLOPs) is read here once per process:
//! the innermost range around the launch whose name and payload say something.

use super::activity::Activity;
use crate::hash::FxHashMap;
use crate::model::{ApiCall, ProcessId, StringId, ThreadId};

/// Per launch (correlation id) of one process: the operator that speaks for it (an index, the
/// same for every launch of one operator) and what it says.
#[derive(Debug)]
pub struct LaunchOperators<T> {
    /// Per thread: the ranges that say something, (start, end, operator, what it says), in
    /// start order, and the sweep over them.
    ranges: FxHashMap<ThreadId, (Vec<Range<T>>, Sweep)>,
    by_correlation: FxHashMap<u32, (u32, T)>,
}

/// An operator range that says something: (start, end, operator, what it says).
type Range<T> = (i64, i64, u32, T);

/// Where the calls of one thread have reached among its ranges: calls come in start order, so
/// each range is opened and closed once (a thread's ranges nest).
#[derive(Debug, Default)]
struct Sweep {
    /// The next range not yet opened.
    next: usize,
    /// The ranges opened and not yet known to be closed, outermost first.
    open: Vec<usize>,
    /// The last call's start.
    last: i64,
}

impl Sweep {
    /// The innermost range of `ranges` holding `t`, `t` at or after the last call's start.
    fn innermost<R>(&mut self, ranges: &[Range<R>], t: i64) -> Option<usize> {
        while let Some(r) = ranges.get(self.next)
            && r.0 <= t
        {
            self.open.push(self.next);
            self.next += 1;
        }
        while let Some(&top) = self.open.last()
            && ranges[top].1 < t
        {
            self.open.pop();
        }
        self.last = t;
        self.open.last().copied()
    }
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
        let mut ranges: FxHashMap<ThreadId, (Vec<Range<T>>, Sweep)> = FxHashMap::default();
        // What each (text, payload) with a payload says, read once (torch.profiler's operators
        // repeat; PyTorch's NVTX texts with shapes are unique per call and are not kept).
        let mut read: FxHashMap<(StringId, StringId), Option<T>> = FxHashMap::default();
        for (index, n) in activity.nvtx(process).enumerate() {
            let Some(end) = n.end else {
                continue;
            };
            let mut say = || says(timeline.text(n.text), timeline.text(n.payload));
            let said = match n.payload == StringId::EMPTY {
                true => say(),
                false => *read.entry((n.text, n.payload)).or_insert_with(say),
            };
            if let Some(said) = said {
                let range = (n.start.0, end.0, index as u32, said);
                let on_thread = ranges.entry(n.thread).or_default();
                on_thread.0.push(range);
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
    /// Calls of a thread in start order cost a sweep over its ranges; one out of order costs a
    /// search.
    pub fn call(&mut self, call: &ApiCall) {
        let Some((ranges, sweep)) = self.ranges.get_mut(&call.thread) else {
            return;
        };
        let t = call.start.0;
        let found = match t >= sweep.last {
            true => sweep.innermost(ranges, t),
            false => innermost(ranges, t),
        };
        if let Some(&(_, _, op, said)) = found.map(|i| &ranges[i]) {
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
fn innermost<R>(ranges: &[Range<R>], t: i64) -> Option<usize> {
    let opened = ranges.partition_point(|r| r.0 <= t);
    (0..opened).rev().find(|&i| t <= ranges[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_innermost_range_holding_the_launch_decides() {
        // aten::linear (fp32) around aten::addmm (bf16) around the launch at 50.
        let ranges = [(0, 100, 0, "gemm_fp32_tf32"), (40, 60, 1, "gemm_bf16_fp16")];
        assert_eq!(innermost(&ranges, 50), Some(1));
        assert_eq!(innermost(&ranges, 70), Some(0));
        assert_eq!(innermost(&ranges, 101), None);
    }

    #[test]
    fn a_sweep_finds_what_a_search_finds() {
        // Nested and sibling ranges, probed at every time in order.
        let ranges = [
            (0, 100, 0, ()),
            (10, 20, 1, ()),
            (12, 15, 2, ()),
            (20, 30, 3, ()),
            (40, 40, 4, ()),
            (150, 160, 5, ()),
        ];
        let mut sweep = Sweep::default();
        for t in -5..170 {
            assert_eq!(sweep.innermost(&ranges, t), innermost(&ranges, t), "{t}");
        }
    }
}
