//! What the traces draw of the critical path ([`crate::analysis::critical_path`]): the time
//! each exported rank is on a step's path, over every step of its window, as `critical-path`
//! walks them (its default step ranges). The graph needs every kernel: the caller builds it
//! over [`ranks`] (from a whole timeline, or in passes over the captures), on the light
//! timeline's process ids.

use super::Exported;
use crate::analysis::critical_path::{Steps, on_path, step_ranges};
use crate::analysis::graph::{Graph, Lane, Node};
use crate::classify::streams::clip;
use crate::classify::{Activity, Rank};
use crate::hash::FxHashMap;
use crate::model::{ProcessId, StreamId};

/// The critical path as drawn.
#[derive(Debug, Clone, Default)]
pub struct Drawn {
    /// Per exported rank: the merged intervals it is on a critical path, clipped to its window.
    pub on_path: FxHashMap<ProcessId, Vec<(i64, i64)>>,
    /// Per kernel (stream, unclipped start) where the path crosses ranks: its flow ids (each
    /// links the kernel the path goes on from, on the rank that arrived last, to the one it
    /// left).
    pub flows: FxHashMap<(StreamId, i64), Vec<u64>>,
    /// Flows drawn (each links two kernels).
    pub flow_count: u64,
}

/// Flow ids of the path's crossings: the top two bits set, apart from launch and collective
/// flows.
const FLOW_BITS: u64 = 3 << 62;

/// The exported ranks, in order: those of the graph [`drawn`] walks.
pub fn ranks(exported: &[Exported]) -> Vec<Rank> {
    exported.iter().filter_map(|e| e.rank).collect()
}

/// The critical path of the exported ranks on `graph` (of [`ranks`]), their steps from
/// `activity`'s NVTX ranges.
pub fn drawn(activity: &Activity, graph: &Graph, exported: &[Exported]) -> Drawn {
    let ranked: Vec<(Rank, (i64, i64))> = exported
        .iter()
        .filter_map(|e| Some((e.rank?, e.window)))
        .collect();
    if graph.is_empty() {
        return Drawn::default();
    }
    let windows: Vec<_> = ranked.iter().map(|(r, w)| (r.process, *w)).collect();
    let steps = Steps::new(graph, &step_ranges(activity, &windows, None));
    let (on, crossings) = on_path(graph, &steps, ranked.len());
    let mut drawn = Drawn {
        on_path: on
            .into_iter()
            .zip(&ranked)
            .map(|(spans, (rank, window))| {
                let clipped = spans.into_iter().filter_map(|s| clip(s, *window));
                (rank.process, clipped.collect())
            })
            .collect(),
        flows: FxHashMap::default(),
        flow_count: 0,
    };
    // A crossing is drawn where both its ends are exported.
    for (n, &(left, from)) in crossings.iter().enumerate() {
        let ends = [from, left].map(|end| (&graph.nodes[end as usize], graph.lane(end)));
        let exported = |(node, lane): &(&Node, Lane)| {
            clip((node.start, node.end), ranked[lane.rank as usize].1)
        };
        if ends.iter().any(|end| exported(end).is_none()) {
            continue;
        }
        let id = FLOW_BITS | n as u64;
        for (node, lane) in ends {
            drawn
                .flows
                .entry((lane.stream, node.start))
                .or_default()
                .push(id);
        }
        drawn.flow_count += 1;
    }
    drawn
}
