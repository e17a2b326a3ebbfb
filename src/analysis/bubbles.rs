//! Pipeline bubbles: per rank and step, the time the GPU was not busy (busy = compute kernels
//! and non-pipeline communication), split into the pipeline wait (only pipeline point-to-point
//! in flight) and idle (no kernel at all; copies and sets are not counted as work), beside the ideal 1F1B bubble `(pp-1)/(m+pp-1)`.
//!
//! Pipeline communication is every NCCL kernel whose own role is `pp_p2p`, or point-to-point
//! traffic no evidence gives another purpose (`p2p`: one peer per NCCL group; `nccl:SendRecv`:
//! a `SendRecv` kernel with no NVTX at all), on whatever stream it ran: a transfer on the compute
//! stream spins until its peer arrives, and that is pipeline wait too. `--roles` can say
//! otherwise.

use super::IntervalSet;
use crate::classify::comm::is_comm_kernel;
use crate::classify::{Activity, RankStreams, RoleRules};
use crate::intervals::Gathered;
use crate::model::{Kernel, ProcessId, Timeline};

/// One step of one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepBubble {
    /// Step start, ns.
    pub start: i64,
    /// Step span, ns.
    pub step_ns: i64,
    /// Compute and non-pipeline communication running, ns.
    pub busy_ns: i64,
    /// `step_ns - busy_ns`.
    pub bubble_ns: i64,
    /// Of the bubble: only pipeline communication in flight, ns.
    pub pp_wait_ns: i64,
    /// Of the bubble: no kernel running, ns.
    pub idle_ns: i64,
    /// The bubble in the warm-up, steady and cool-down phases, when the step's `forward…` and
    /// `backward…` NVTX ranges show them: warm-up until the first backward starts, cool-down
    /// after the last forward ends.
    pub phases: Option<[i64; 3]>,
}

impl StepBubble {
    /// Bubble share of the step, %.
    pub fn bubble_pct(&self) -> f64 {
        super::overlap::percent(self.bubble_ns, self.step_ns)
    }
}

/// The ideal 1F1B bubble, %: `100 (pp-1) / (m+pp-1)`.
pub fn ideal_pct(pp: u32, micro_batches: u32) -> Option<f64> {
    (pp >= 1 && micro_batches >= 1)
        .then(|| 100.0 * f64::from(pp - 1) / f64::from(micro_batches + pp - 1))
}

/// The bubbles of `process` in each step, with its kernels classified over a window that holds
/// every step.
pub fn rank_bubbles(
    activity: &Activity,
    process: ProcessId,
    steps: &[(i64, i64)],
    streams: &RankStreams,
    rules: &RoleRules,
) -> Vec<StepBubble> {
    let computing = computing(activity, process);
    step_bubbles(activity, process, steps, (streams, rules), computing)
}

/// The compute operations of `process` ([`Computing`]).
pub fn computing(activity: &Activity, process: ProcessId) -> Computing {
    let mut computing = Computing::default();
    for k in activity.kernels(process) {
        computing.kernel(activity.timeline, k);
    }
    for g in activity.graph_launches(process) {
        computing.graph((g.start.0, g.end.0));
    }
    computing
}

/// The compute kernels and graph launches of a process (every one, unclipped), gathered one at
/// a time in any order: what [`rank_bubbles`] counts as busy besides communication.
#[derive(Debug, Default)]
pub struct Computing(Gathered);

impl Computing {
    /// A kernel (communication kernels are left out).
    pub fn kernel(&mut self, timeline: &Timeline, k: &Kernel) {
        if !is_comm_kernel(timeline, k) {
            self.0.add((k.start.0, k.end.0));
        }
    }

    /// A CUDA graph launch, (start, end) ns.
    pub fn graph(&mut self, span: (i64, i64)) {
        self.0.add(span);
    }
}

/// [`rank_bubbles`] of a process whose compute operations `computing` gathered.
pub fn step_bubbles(
    activity: &Activity,
    process: ProcessId,
    steps: &[(i64, i64)],
    (streams, rules): (&RankStreams, &RoleRules),
    computing: Computing,
) -> Vec<StepBubble> {
    let mut busy = computing.0;
    let mut transfers = Vec::new();
    for k in &streams.comm {
        match k.is_pipeline(rules) {
            true => transfers.push((k.start, k.end)),
            false => busy.add((k.start, k.end)),
        }
    }
    let busy = busy.finish();
    let transfers = IntervalSet::from_intervals(transfers);
    steps
        .iter()
        .map(|&(start, end)| {
            let step = IntervalSet::from_intervals([(start, end)]);
            let busy_ns = busy.intersection(&step).measure();
            let pp_wait_ns = transfers.intersection(&step).difference(&busy).measure();
            let bubble_ns = (end - start) - busy_ns;
            let phases = phases(activity, process, (start, end)).map(|bounds| {
                bounds.map(|(s, e)| {
                    let phase = IntervalSet::from_intervals([(s, e)]);
                    (e - s) - busy.intersection(&phase).measure()
                })
            });
            StepBubble {
                start,
                step_ns: end - start,
                busy_ns,
                bubble_ns,
                pp_wait_ns,
                idle_ns: bubble_ns - pp_wait_ns,
                phases,
            }
        })
        .collect()
}

/// Warm-up, steady and cool-down bounds of a step from its `forward…`/`backward…` ranges.
fn phases(
    activity: &Activity,
    process: ProcessId,
    (start, end): (i64, i64),
) -> Option<[(i64, i64); 3]> {
    let timeline = activity.timeline;
    let mut first_backward = None;
    let mut last_forward = None;
    let inside = activity.nvtx_starting_in(process, (start, end));
    for e in inside.filter(|e| e.kind.is_range()) {
        let Some(e_end) = e.end else { continue };
        if !within((e.start.0, e_end.0), (start, end)) {
            continue;
        }
        let text = timeline.text(e.text).to_ascii_lowercase();
        if text.starts_with("backward") {
            first_backward = Some(first_backward.map_or(e.start.0, |b: i64| b.min(e.start.0)));
        } else if text.starts_with("forward") {
            last_forward = Some(last_forward.map_or(e_end.0, |f: i64| f.max(e_end.0)));
        }
    }
    let (b, f) = (first_backward?, last_forward?);
    (start <= b && b <= f && f <= end).then_some([(start, b), (b, f), (f, end)])
}

/// Whether a range lies wholly inside a step.
fn within((s, e): (i64, i64), (start, end): (i64, i64)) -> bool {
    start <= s && e <= end
}

/// How many micro-batches a rank runs per step: its `forward…` NVTX ranges inside the step,
/// not nested in another such range (None when it has none).
pub fn micro_batches(activity: &Activity, process: ProcessId, step: (i64, i64)) -> Option<u32> {
    let timeline = activity.timeline;
    let mut last_end = i64::MIN;
    let mut count = 0;
    let inside = activity.nvtx_starting_in(process, step);
    for e in inside.filter(|e| e.kind.is_range()) {
        let (Some(end), text) = (e.end, timeline.text(e.text)) else {
            continue;
        };
        if within((e.start.0, end.0), step)
            && text.to_ascii_lowercase().starts_with("forward")
            && e.start.0 >= last_end
        {
            count += 1;
            last_end = end.0;
        }
    }
    (count > 0).then_some(count)
}
