//! Device memory allocated per GPU over time (`--cuda-memory-usage=true`): the running sum of
//! the allocations and releases the capture recorded. Memory allocated before the capture
//! started is not known, so the sum starts at 0 at the first recorded event.

use crate::classify::Activity;
use crate::model::{GpuId, ProcessId};
use std::collections::BTreeMap;

/// Bytes allocated on one GPU: `(time, bytes)` after every change inside the window, the first
/// at the window's start when earlier events left memory allocated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocated {
    /// The GPU.
    pub gpu: GpuId,
    /// The steps.
    pub steps: Vec<(i64, i64)>,
}

/// The allocated bytes of each GPU of `process` over `(from, to)`, by GPU.
pub fn allocated(
    activity: &Activity,
    process: ProcessId,
    (from, to): (i64, i64),
) -> Vec<Allocated> {
    let mut totals: BTreeMap<GpuId, (i64, Vec<(i64, i64)>)> = BTreeMap::new();
    for m in activity.memory(process).take_while(|m| m.time.0 <= to) {
        let (total, steps) = totals.entry(m.gpu).or_default();
        *total += m.bytes;
        let time = m.time.0.max(from);
        match steps.last_mut() {
            Some(last) if last.0 == time => last.1 = *total,
            _ => steps.push((time, *total)),
        }
    }
    totals
        .into_iter()
        .map(|(gpu, (_, steps))| Allocated { gpu, steps })
        .collect()
}
