//! The step functions that draw the overlap analysis in a trace: compute kernels in flight,
//! communication in flight per kernel role, exposed communication (1 while non-barrier
//! communication runs with no compute), and waiting in collectives (1 while the rank waits for a
//! collective's last member). They are built from the part's [`RankStreams`], the very sets
//! `overlap` measures, and from the collectives `collectives` matches, so a counter integrated
//! over a window is the table's number.
//!
//! [`RankStreams`]: crate::classify::RankStreams

use super::{Part, Scope};
use crate::analysis::IntervalSet;
use crate::classify::rules::is_nccl;
use crate::classify::streams::clip;
use std::collections::BTreeMap;

/// `(time, value)` at every change, merged-clock ns.
pub type Steps = Vec<(i64, i64)>;

/// A part's counters.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// Non-NCCL kernels running.
    pub compute: Steps,
    /// NCCL kernels running, per kernel role (`barrier` for collectives on compute streams).
    pub by_role: Vec<(String, Steps)>,
    /// Non-barrier NCCL kernels running.
    pub comm: Steps,
    /// 1 while non-barrier communication runs with no compute, else 0.
    pub exposed: Steps,
    /// 1 while the rank waits in a collective for its last member, else 0.
    pub waiting: Steps,
}

impl Counters {
    /// The counters of a part; None when it ran no kernel in its window.
    pub fn new(scope: &Scope, part: &Part) -> Option<Counters> {
        let activity = scope.activity;
        let timeline = activity.timeline;
        let compute: Vec<(i64, i64)> = activity
            .kernels(part.process)
            .filter(|k| !is_nccl(timeline.text(k.short_name)))
            .map(|k| (k.start.0, k.end.0))
            .chain(
                activity
                    .graph_launches(part.process)
                    .map(|g| (g.start.0, g.end.0)),
            )
            .filter_map(|span| clip(span, part.window))
            .collect();
        let nccl = &part.streams.nccl;
        if compute.is_empty() && nccl.is_empty() {
            return None;
        }
        let mut by_role: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
        for k in nccl {
            let role = k.role_name(scope.rules).to_string();
            by_role.entry(role).or_default().push((k.start, k.end));
        }
        let comm: Vec<(i64, i64)> = nccl
            .iter()
            .filter(|k| !k.is_barrier())
            .map(|k| (k.start, k.end))
            .collect();
        let exposed = on_off(
            &IntervalSet::from_intervals(comm.iter().copied()).difference(&part.streams.compute),
        );
        let waits = scope.collectives.waits.get(&part.process);
        let waiting = on_off(&IntervalSet::from_intervals(
            waits.into_iter().flatten().copied(),
        ));
        Some(Counters {
            compute: in_flight(&compute),
            by_role: by_role
                .into_iter()
                .map(|(role, spans)| (role, in_flight(&spans)))
                .collect(),
            comm: in_flight(&comm),
            exposed,
            waiting,
        })
    }
}

/// 1 inside the set's intervals, 0 after each: `(time, value)` at each change.
fn on_off(set: &IntervalSet) -> Steps {
    set.spans()
        .iter()
        .flat_map(|&(s, e)| [(s, 1), (e, 0)])
        .collect()
}

/// How many intervals are open over time: `(time, value)` at each change.
pub fn in_flight(spans: &[(i64, i64)]) -> Steps {
    let mut edges: Vec<(i64, i64)> = spans.iter().flat_map(|&(s, e)| [(s, 1), (e, -1)]).collect();
    edges.sort_unstable();
    let mut steps: Steps = Vec::new();
    let mut value = 0;
    for (t, delta) in edges {
        value += delta;
        match steps.last_mut() {
            Some(last) if last.0 == t => last.1 = value,
            _ => steps.push((t, value)),
        }
    }
    steps.dedup_by(|b, a| a.1 == b.1);
    steps
}

#[cfg(test)]
mod tests {
    use super::in_flight;

    #[test]
    fn in_flight_counts_overlaps_and_merges_equal_times() {
        // [0,10) and [5,15) overlap; [15,20) starts as the second ends; [20,20) is empty.
        let steps = in_flight(&[(0, 10), (5, 15), (15, 20), (20, 20)]);
        assert_eq!(steps, [(0, 1), (5, 2), (10, 1), (20, 0)]);
    }
}
