//! The role of every CUDA stream of a rank inside a window (DESIGN.md, Stream roles), and the
//! NCCL kernels with their purpose and stage: what `streams` and `overlap` print and what the
//! exporters label tracks with.
//!
//! A stream running any non-NCCL kernel is `compute`; one running only copies and sets is
//! `copy`; one running only NCCL kernels (and maybe copies) gets the purpose its kernels agree
//! on, else `mixed`. A kernel's purpose comes from the innermost range enclosing its launch time
//! (any thread of the process) among those a rule matches, else its collective
//! (`nccl:AllReduce`). NCCL kernels on compute streams are `barrier` communication.

use super::activity::Activity;
use super::enclosing::{Candidate, innermost};
use super::rules::{Purpose, RoleRules, Stage, is_nccl};
use crate::analysis::IntervalSet;
use crate::hash::FxHashMap;
use crate::model::{Kernel, ProcessId, StreamId, StringId};
use std::collections::BTreeMap;

/// What a stream does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Runs at least one non-NCCL kernel.
    Compute,
    /// Runs only memory copies and sets.
    Copy,
    /// Runs only NCCL kernels, all for this purpose.
    Comm(Purpose),
    /// Runs only NCCL kernels, for several purposes.
    Mixed,
}

impl Role {
    /// The role's name (`compute`, `copy`, `ep_a2a`, `nccl:AllReduce`, `mixed`).
    pub fn name<'r>(&self, rules: &'r RoleRules) -> &'r str {
        match self {
            Role::Compute => "compute",
            Role::Copy => "copy",
            Role::Comm(purpose) => rules.label(*purpose),
            Role::Mixed => "mixed",
        }
    }

    /// Whether the stream carries communication only.
    pub fn is_comm(&self) -> bool {
        matches!(self, Role::Comm(_) | Role::Mixed)
    }
}

/// One stream's use inside the window (times clipped to it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamUse {
    /// The stream.
    pub stream: StreamId,
    /// Its role.
    pub role: Role,
    /// NCCL kernels.
    pub n_comm: u64,
    /// Other kernels.
    pub n_comp: u64,
    /// Memory copies and sets.
    pub n_copy: u64,
    /// Summed duration of NCCL kernels, ns.
    pub comm_ns: i64,
    /// Summed duration of other kernels, ns.
    pub comp_ns: i64,
    /// Time the stream had any operation running (union), ns.
    pub busy_ns: i64,
}

/// One NCCL kernel inside the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NcclKernel {
    /// Start, clipped to the window.
    pub start: i64,
    /// End, clipped to the window.
    pub end: i64,
    /// Its stream.
    pub stream: StreamId,
    /// Its own purpose (the stream's role is what the kernels agree on).
    pub purpose: Purpose,
    /// The stage range its launch sits in, when any.
    pub stage: Option<Stage>,
    /// Whether it ran on a compute stream (barrier communication).
    pub barrier: bool,
}

/// A rank's streams inside one window.
#[derive(Debug, Clone, Default)]
pub struct RankStreams {
    /// Streams with work in the window, by (device, stream id).
    pub streams: Vec<StreamUse>,
    /// NCCL kernels in the window, by start.
    pub nccl: Vec<NcclKernel>,
    /// Union of the non-NCCL kernels in the window: the compute that can hide communication.
    pub compute: IntervalSet,
}

impl RankStreams {
    /// The role of a stream (None when it did nothing in the window).
    pub fn role(&self, stream: StreamId) -> Option<Role> {
        self.streams
            .iter()
            .find(|s| s.stream == stream)
            .map(|s| s.role)
    }
}

/// `[start, end)` clipped to the window, when the operation lies (even partly) inside it.
pub fn clip((start, end): (i64, i64), (ws, we): (i64, i64)) -> Option<(i64, i64)> {
    let inside = if start == end {
        ws <= start && start < we
    } else {
        start < we && end > ws
    };
    inside.then(|| (start.max(ws), end.min(we)))
}

/// Classifies the streams of `process` over `window` (`[start, end)`, ns).
pub fn classify(
    activity: &Activity,
    process: ProcessId,
    window: (i64, i64),
    rules: &RoleRules,
) -> RankStreams {
    let timeline = activity.timeline;
    let mut per_stream = PerStream::new();
    let mut nccl_kernels: Vec<(&Kernel, i64, i64)> = Vec::new();
    let mut compute = Vec::new();
    for k in activity.kernels(process) {
        let Some((s, e)) = clip((k.start.0, k.end.0), window) else {
            continue;
        };
        let (usage, busy) = entry(&mut per_stream, k.stream);
        busy.push((s, e));
        if is_nccl(timeline.text(k.short_name)) {
            usage.n_comm += 1;
            usage.comm_ns += e - s;
            nccl_kernels.push((k, s, e));
        } else {
            usage.n_comp += 1;
            usage.comp_ns += e - s;
            compute.push((s, e));
        }
    }
    let copies = activity
        .memcpys(process)
        .map(|m| (m.stream, m.start.0, m.end.0))
        .chain(
            activity
                .memsets(process)
                .map(|m| (m.stream, m.start.0, m.end.0)),
        );
    for (stream, start, end) in copies {
        if let Some(clipped) = clip((start, end), window) {
            let (usage, busy) = entry(&mut per_stream, stream);
            usage.n_copy += 1;
            busy.push(clipped);
        }
    }
    let nccl = label_kernels(activity, process, &nccl_kernels, rules);
    let mut streams = per_stream
        .into_values()
        .map(|(mut usage, busy)| {
            usage.busy_ns = IntervalSet::from_intervals(busy).measure();
            usage.role = role(&usage, &nccl);
            usage
        })
        .collect::<Vec<_>>();
    let compute_streams: Vec<StreamId> = streams
        .iter()
        .filter(|s| s.role == Role::Compute)
        .map(|s| s.stream)
        .collect();
    let nccl = nccl
        .into_iter()
        .map(|k| NcclKernel {
            barrier: compute_streams.contains(&k.stream),
            ..k
        })
        .collect();
    streams.sort_by_key(|s| {
        let stream = timeline.stream(s.stream);
        (timeline.gpu(stream.gpu).device, stream.stream, s.stream)
    });
    RankStreams {
        streams,
        nccl,
        compute: IntervalSet::from_intervals(compute),
    }
}

/// Each stream's use being accumulated, with its busy intervals.
type PerStream = BTreeMap<StreamId, (StreamUse, Vec<(i64, i64)>)>;

/// The accumulating use of a stream.
fn entry(per_stream: &mut PerStream, stream: StreamId) -> &mut (StreamUse, Vec<(i64, i64)>) {
    per_stream
        .entry(stream)
        .or_insert_with(|| (StreamUse::new(stream), Vec::new()))
}

impl StreamUse {
    fn new(stream: StreamId) -> StreamUse {
        StreamUse {
            stream,
            role: Role::Copy,
            n_comm: 0,
            n_comp: 0,
            n_copy: 0,
            comm_ns: 0,
            comp_ns: 0,
            busy_ns: 0,
        }
    }
}

/// The stream's role from its counts and its NCCL kernels' purposes.
fn role(usage: &StreamUse, nccl: &[NcclKernel]) -> Role {
    if usage.n_comp > 0 {
        return Role::Compute;
    }
    let mut purposes = nccl
        .iter()
        .filter(|k| k.stream == usage.stream)
        .map(|k| k.purpose);
    match purposes.next() {
        None => Role::Copy,
        Some(first) if purposes.all(|p| p == first) => Role::Comm(first),
        Some(_) => Role::Mixed,
    }
}

/// Each NCCL kernel's purpose and stage, from the ranges enclosing its launch.
fn label_kernels(
    activity: &Activity,
    process: ProcessId,
    kernels: &[(&Kernel, i64, i64)],
    rules: &RoleRules,
) -> Vec<NcclKernel> {
    let timeline = activity.timeline;
    let launches: Vec<i64> = kernels
        .iter()
        .map(|(k, ..)| activity.launch(process, k.correlation).unwrap_or(k.start).0)
        .collect();
    let mut purposes: FxHashMap<StringId, Option<Purpose>> = FxHashMap::default();
    let mut stages: FxHashMap<StringId, Option<Stage>> = FxHashMap::default();
    let mut purpose_ranges = Vec::new();
    let mut stage_ranges = Vec::new();
    for e in activity.nvtx(process).filter(|e| e.kind.is_range()) {
        let text = timeline.text(e.text);
        let candidate = Candidate {
            start: e.start.0,
            end: e.end.map_or(i64::MAX, |t| t.0),
        };
        if let Some(p) = *purposes
            .entry(e.text)
            .or_insert_with(|| rules.purpose_of(text))
        {
            purpose_ranges.push((candidate, p));
        }
        if let Some(s) = *stages.entry(e.text).or_insert_with(|| Stage::last_in(text)) {
            stage_ranges.push((candidate, s));
        }
    }
    let by_purpose = lookup(&purpose_ranges, &launches);
    let by_stage = lookup(&stage_ranges, &launches);
    kernels
        .iter()
        .zip(by_purpose.into_iter().zip(by_stage))
        .map(|(&(k, start, end), (purpose, stage))| NcclKernel {
            start,
            end,
            stream: k.stream,
            purpose: purpose.unwrap_or_else(|| rules.collective(timeline.text(k.short_name))),
            stage,
            barrier: false,
        })
        .collect()
}

/// The value of the innermost range enclosing each time.
fn lookup<T: Copy>(ranges: &[(Candidate, T)], times: &[i64]) -> Vec<Option<T>> {
    let candidates: Vec<Candidate> = ranges.iter().map(|(c, _)| *c).collect();
    innermost(&candidates, times)
        .into_iter()
        .map(|i| i.map(|i| ranges[i].1))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clipping_keeps_the_part_inside_and_zero_length_ops_inside() {
        assert_eq!(clip((0, 10), (5, 20)), Some((5, 10)));
        assert_eq!(clip((0, 5), (5, 20)), None);
        assert_eq!(clip((20, 30), (5, 20)), None);
        assert_eq!(clip((7, 7), (5, 20)), Some((7, 7)));
        assert_eq!(clip((20, 20), (5, 20)), None);
    }
}
