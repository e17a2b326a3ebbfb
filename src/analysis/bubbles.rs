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
use crate::intervals::Stretches;
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
    let graphs = activity
        .graph_launches(process)
        .map(|g| (g.start.0, g.end.0));
    let mut tally = BubbleTally::new(activity, process, steps, (streams, rules), graphs);
    for k in activity.kernels(process) {
        tally.kernel(activity.timeline, k);
    }
    tally.finish()
}

/// A rank's bubbles, measured as its kernels go by in start order, in memory that does not
/// grow with them. Busy is the union of its compute kernels, its CUDA graph launches and its
/// communication that is not the pipeline's; the graph launches and the communication (few,
/// and known first) are held as one set, and each stretch of kernels (those that overlap or
/// touch, merged) is counted into every step it meets as soon as the next kernel starts after
/// it, for the part of it that set does not cover.
#[derive(Debug)]
pub struct BubbleTally {
    /// Each step, in the order given.
    steps: Vec<Tallied>,
    /// The steps by start.
    by_start: Vec<usize>,
    /// Of `by_start`, the first step that may still meet a kernel.
    first: usize,
    /// Graph launches and non-pipeline communication.
    others: IntervalSet,
    /// Pipeline communication.
    transfers: IntervalSet,
    /// The kernels, joined into stretches.
    kernels: Stretches,
}

/// A step's bounds and, when its NVTX ranges show them, its warm-up, steady and cool-down
/// bounds ([`phases`]).
type StepPhases = ((i64, i64), Option<[(i64, i64); 3]>);

/// A step and what the kernels outside [`BubbleTally::others`] covered of it.
#[derive(Debug)]
struct Tallied {
    bounds: (i64, i64),
    phases: Option<[(i64, i64); 3]>,
    /// Of the step, covered by those kernels.
    busy: i64,
    /// Of the step's pipeline communication, covered by those kernels.
    transfers_busy: i64,
    /// Of each phase, covered by those kernels.
    phases_busy: [i64; 3],
}

impl BubbleTally {
    /// The tally of `process` over `steps`, its communication as `streams` classified it,
    /// `graphs` its CUDA graph launches, (start, end) ns.
    pub fn new(
        activity: &Activity,
        process: ProcessId,
        steps: &[(i64, i64)],
        (streams, rules): (&RankStreams, &RoleRules),
        graphs: impl IntoIterator<Item = (i64, i64)>,
    ) -> BubbleTally {
        let mut others: Vec<(i64, i64)> = graphs.into_iter().collect();
        let mut transfers = Vec::new();
        for k in &streams.comm {
            match k.is_pipeline(rules) {
                true => transfers.push((k.start, k.end)),
                false => others.push((k.start, k.end)),
            }
        }
        let steps = steps.iter().map(|&b| (b, phases(activity, process, b)));
        let others = IntervalSet::from_intervals(others);
        BubbleTally::over(steps, others, IntervalSet::from_intervals(transfers))
    }

    /// The tally over `steps` (each with its phases, if any), busy with `others` besides the
    /// kernels, `transfers` the pipeline communication.
    fn over(
        steps: impl IntoIterator<Item = StepPhases>,
        others: IntervalSet,
        transfers: IntervalSet,
    ) -> BubbleTally {
        let steps: Vec<Tallied> = (steps.into_iter())
            .map(|(bounds, phases)| Tallied {
                bounds,
                phases,
                busy: 0,
                transfers_busy: 0,
                phases_busy: [0; 3],
            })
            .collect();
        let mut by_start: Vec<usize> = (0..steps.len()).collect();
        by_start.sort_by_key(|&i| steps[i].bounds);
        BubbleTally {
            steps,
            by_start,
            first: 0,
            others,
            transfers,
            kernels: Stretches::default(),
        }
    }

    /// A kernel of the process, in start order (communication kernels are left out).
    pub fn kernel(&mut self, timeline: &Timeline, k: &Kernel) {
        if !is_comm_kernel(timeline, k) {
            self.compute((k.start.0, k.end.0));
        }
    }

    /// A compute operation `[start, end)`, in start order.
    fn compute(&mut self, span: (i64, i64)) {
        if let Some(stretch) = self.kernels.add(span) {
            self.count(stretch);
        }
    }

    /// Counts a stretch of kernels into the steps it meets, but for what `others` covers.
    fn count(&mut self, (start, end): (i64, i64)) {
        let by_start = &self.by_start;
        while (by_start.get(self.first)).is_some_and(|&i| self.steps[i].bounds.1 <= start) {
            self.first += 1;
        }
        for piece in self.others.gaps_within(start, end) {
            for &i in &by_start[self.first..] {
                let step = &mut self.steps[i];
                if step.bounds.0 >= piece.1 {
                    break;
                }
                let (s, e) = (piece.0.max(step.bounds.0), piece.1.min(step.bounds.1));
                if s >= e {
                    continue;
                }
                step.busy += e - s;
                step.transfers_busy += self.transfers.covered(s, e);
                for (phase, busy) in (step.phases.iter().flatten()).zip(&mut step.phases_busy) {
                    *busy += (piece.1.min(phase.1) - piece.0.max(phase.0)).max(0);
                }
            }
        }
    }

    /// Each step's bubble, in the order the steps were given.
    pub fn finish(mut self) -> Vec<StepBubble> {
        if let Some(stretch) = self.kernels.finish() {
            self.count(stretch);
        }
        let (others, transfers) = (&self.others, &self.transfers);
        let transfers_others = transfers.intersection(others);
        (self.steps.iter())
            .map(|step| {
                let (start, end) = step.bounds;
                let busy_ns = others.covered(start, end) + step.busy;
                let in_flight = transfers.covered(start, end);
                let covered = step.transfers_busy + transfers_others.covered(start, end);
                let pp_wait_ns = in_flight - covered;
                let bubble_ns = (end - start) - busy_ns;
                let phases = step.phases.map(|bounds| {
                    let mut busy = step.phases_busy.iter();
                    bounds.map(|(s, e)| (e - s) - others.covered(s, e) - busy.next().unwrap_or(&0))
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

#[cfg(test)]
mod tests {
    use super::*;

    type Spans = Vec<(i64, i64)>;

    /// The bubbles as sets give them: busy the union of everything, each measure an
    /// intersection (what the tally must equal without holding the kernels).
    fn by_sets(
        steps: &[StepPhases],
        [kernels, others, transfers]: [&Spans; 3],
    ) -> Vec<(i64, i64, Option<[i64; 3]>)> {
        let busy = IntervalSet::from_intervals(kernels.iter().chain(others).copied());
        let transfers = IntervalSet::from_intervals(transfers.iter().copied());
        let covered = |set: &IntervalSet, (s, e): (i64, i64)| {
            set.intersection(&IntervalSet::from_intervals([(s, e)]))
                .measure()
        };
        (steps.iter())
            .map(|&(step, phases)| {
                let in_flight = transfers.intersection(&IntervalSet::from_intervals([step]));
                let pp_wait = in_flight.difference(&busy).measure();
                let phases = phases.map(|p| p.map(|(s, e)| (e - s) - covered(&busy, (s, e))));
                (covered(&busy, step), pp_wait, phases)
            })
            .collect()
    }

    #[test]
    fn the_tally_equals_the_sets_on_overlapping_kernels_steps_and_communication() {
        let mut x = 7u64;
        let mut next = move |n: i64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as i64
        };
        for _ in 0..200 {
            let mut kernels: Vec<(i64, i64)> = (0..next(40))
                .map(|_| {
                    let s = next(1000);
                    (s, s + next(60) - 5)
                })
                .collect();
            kernels.sort_unstable();
            let spans = |n, next: &mut dyn FnMut(i64) -> i64| -> Vec<(i64, i64)> {
                (0..n)
                    .map(|_| {
                        let s = next(1000);
                        (s, s + next(80))
                    })
                    .collect()
            };
            let others = spans(next(8), &mut next);
            let transfers = spans(next(8), &mut next);
            let steps: Vec<_> = (0..next(5))
                .map(|_| {
                    let s = next(900);
                    let e = s + next(400);
                    let (b, f) = (s + next(e - s + 1), e - next(e - s + 1));
                    let phases = (b <= f && next(3) > 0).then_some([(s, b), (b, f), (f, e)]);
                    ((s, e), phases)
                })
                .collect();
            let mut tally = BubbleTally::over(
                steps.iter().copied(),
                IntervalSet::from_intervals(others.iter().copied()),
                IntervalSet::from_intervals(transfers.iter().copied()),
            );
            for &k in &kernels {
                tally.compute(k);
            }
            let tallied: Vec<_> = (tally.finish().into_iter())
                .map(|b| (b.busy_ns, b.pp_wait_ns, b.phases))
                .collect();
            let expected = by_sets(&steps, [&kernels, &others, &transfers]);
            assert_eq!(
                tallied, expected,
                "{steps:?} {kernels:?} {others:?} {transfers:?}"
            );
        }
    }
}
