//! Last step of the data flow for pictures: writing the classified timeline in other tools'
//! formats. Exporters read the ranks, windows and stream roles computed by
//! [`crate::classify`]; they never derive their own.
//!
//! [`Scope`] says what to export: which processes (ranks first, in rank order), over which
//! window each, and the rebase that puts the earliest exported event at time 0 (Perfetto drops
//! negative times; DESIGN.md, Clock).

pub mod collectives;
pub mod counters;
pub mod items;
pub mod paraver;
pub mod perfetto;

use crate::classify::streams::clip;
use crate::classify::{Activity, Rank, RankStreams, RoleRules, WindowSpec};
use crate::model::ProcessId;

/// One exported process.
#[derive(Debug, Clone)]
pub struct Part {
    /// The process.
    pub process: ProcessId,
    /// Its rank, when it is one.
    pub rank: Option<Rank>,
    /// The interval exported (events clipped to it), merged-clock ns.
    pub window: (i64, i64),
    /// Its streams' roles and NCCL kernels over that window.
    pub streams: RankStreams,
}

/// What an export covers.
pub struct Scope<'a, 't> {
    /// The timeline, indexed.
    pub activity: &'a Activity<'t>,
    /// The role rules the streams were classified with.
    pub rules: &'a RoleRules,
    /// Exported processes: ranks in rank order, then other processes with events.
    pub parts: Vec<Part>,
    /// Subtracted from every exported time (the earliest exported event's start).
    pub offset: i64,
    /// The collectives matched across the exported processes, as drawn.
    pub collectives: collectives::Drawn,
}

impl<'a, 't> Scope<'a, 't> {
    /// The given ranks over their windows under `spec` (the whole capture for
    /// [`WindowSpec::Whole`]), plus, when `others`, every other process with events.
    pub fn new(
        activity: &'a Activity<'t>,
        rules: &'a RoleRules,
        ranks: &[Rank],
        spec: &WindowSpec,
        others: bool,
    ) -> Scope<'a, 't> {
        let timeline = activity.timeline;
        let mut processes: Vec<(ProcessId, Option<Rank>)> =
            ranks.iter().map(|r| (r.process, Some(*r))).collect();
        if others {
            let ranked: Vec<ProcessId> = ranks.iter().map(|r| r.process).collect();
            processes.extend(
                (0..timeline.processes.len() as u32)
                    .map(ProcessId)
                    .filter(|p| !ranked.contains(p))
                    .map(|p| (p, None)),
            );
        }
        let parts: Vec<(i64, Part)> = processes
            .into_iter()
            .map(|(process, rank)| {
                let window = crate::classify::window::find(activity, process, spec);
                let window = (window.start.0, window.end.0);
                Part {
                    process,
                    rank,
                    window,
                    streams: crate::classify::streams::classify(activity, process, window, rules),
                }
            })
            .filter_map(|part| Some((first_start(activity, &part)?, part)))
            .collect();
        let offset = parts.iter().map(|(first, _)| *first).min().unwrap_or(0);
        let parts: Vec<Part> = parts.into_iter().map(|(_, part)| part).collect();
        Scope {
            collectives: collectives::Drawn::new(timeline, &parts, false),
            activity,
            rules,
            parts,
            offset,
        }
    }

    /// Draws a flow from each collective's last arrival to every other member's kernel.
    pub fn with_collective_flows(mut self) -> Self {
        let timeline = self.activity.timeline;
        self.collectives = collectives::Drawn::new(timeline, &self.parts, true);
        self
    }

    /// A merged-clock time as exported (ns since the earliest exported event).
    pub fn rebase(&self, t: i64) -> u64 {
        (t - self.offset).max(0) as u64
    }
}

/// The earliest clipped start of anything the part exports (None when it exports nothing).
fn first_start(activity: &Activity, part: &Part) -> Option<i64> {
    let p = part.process;
    let w = part.window;
    [
        first_clipped(activity.kernels(p).map(|k| (k.start.0, k.end.0)), w),
        first_clipped(activity.memcpys(p).map(|m| (m.start.0, m.end.0)), w),
        first_clipped(activity.memsets(p).map(|m| (m.start.0, m.end.0)), w),
        first_clipped(activity.graph_launches(p).map(|g| (g.start.0, g.end.0)), w),
        first_clipped(activity.api_calls(p).map(|a| (a.start.0, a.end.0)), w),
        first_clipped(activity.os_calls(p).map(|o| (o.start.0, o.end.0)), w),
        activity
            .metric_series(p)
            .into_iter()
            .filter_map(|(_, s)| Some(activity.metric_samples_in(s, w).first()?.time.0))
            .min(),
        first_clipped(activity.memory(p).map(|m| (m.time.0, m.time.0)), w),
        first_clipped(
            activity
                .nvtx(p)
                .filter(|e| e.kind != crate::model::NvtxKind::Metadata)
                .map(|e| (e.start.0, e.end.map_or(w.1, |t| t.0))),
            w,
        ),
    ]
    .into_iter()
    .flatten()
    .min()
}

/// The clipped start of the first span (sorted by start) inside the window.
fn first_clipped(mut spans: impl Iterator<Item = (i64, i64)>, window: (i64, i64)) -> Option<i64> {
    spans.find_map(|span| clip(span, window)).map(|(s, _)| s)
}
