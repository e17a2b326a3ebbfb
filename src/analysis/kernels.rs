//! Where a rank's GPU time goes: time per kernel family (memcpy and memset included, so the
//! families add up to the total), per step, and the step time minus total kernel time
//! decomposed into its two causes: idle time (nothing running) minus concurrency excess (the
//! summed kernel time beyond the union of kernels, which concurrent streams produce).

use crate::classify::Activity;
use crate::classify::families::{
    CUDA_GRAPH, FamilyCache, GEMM_UNKNOWN, MEMCPY, MEMCPY_PEER, MEMSET, OTHER,
};
use crate::classify::precision::LaunchPrecisions;
use crate::classify::streams::clip;
use crate::classify::{RankStreams, RoleRules};
use crate::hash::FxHashMap;
use crate::intervals::UnionMeasure;
use crate::model::{Kernel, Ns, ProcessId, StreamId, StringId, Timeline};
use std::collections::BTreeMap;

/// Time of one family on one rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyTime {
    /// Family name.
    pub family: String,
    /// Operations.
    pub kernels: u64,
    /// Summed duration inside the window, ns.
    pub time_ns: i64,
}

/// Kernels of one name that no family rule names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unclassified {
    /// The kernels' short name.
    pub name: String,
    /// How many.
    pub kernels: u64,
    /// Summed duration inside the window, ns.
    pub time_ns: i64,
}

/// One rank's breakdown over its window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankKernels {
    /// Families, longest first.
    pub families: Vec<FamilyTime>,
    /// The window's length, ns.
    pub span_ns: i64,
    /// Summed duration of every GPU operation, ns.
    pub kernel_ns: i64,
    /// Time with no GPU operation running, ns.
    pub idle_ns: i64,
    /// `kernel_ns` minus the union of GPU operations, ns.
    pub concurrency_excess_ns: i64,
    /// The kernels of family [`OTHER`] by name, longest first.
    pub unclassified: Vec<Unclassified>,
}

impl RankKernels {
    /// `span - kernel_ns` = `idle - concurrency_excess`.
    pub fn step_minus_kernel_ns(&self) -> i64 {
        self.span_ns - self.kernel_ns
    }
}

/// One GPU operation clipped to a window, as [`each_operation`] gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operation {
    /// Its stream.
    pub stream: StreamId,
    /// Start and end, clipped to the window, ns.
    pub span: (i64, i64),
    /// Its launch's correlation id.
    pub correlation: u32,
    /// Whether it is a communication kernel of the classification given.
    pub comm: bool,
    /// A kernel's short name (None for a copy, a set, a graph launch).
    pub kernel: Option<StringId>,
}

/// Calls `each` with every GPU operation of `process` inside `window` (clipped to it) and its
/// family: kernels, copies, sets and graph launches, kind by kind. `comm` is the process's
/// classification over the same window: an NCCL kernel's family is its role there (`ep_a2a`,
/// `nccl:AllToAll`, ...), so every command names a communication kernel as `overlap` and the
/// traces do. A GEMM whose name does not give its precision takes it from its launching
/// operator's inputs when recorded ([`LaunchPrecisions`]).
pub fn each_operation(
    activity: &Activity,
    (process, window): (ProcessId, (i64, i64)),
    (comm, rules): (&RankStreams, &RoleRules),
    families: &mut FamilyCache,
    mut each: impl FnMut(Operation, &str),
) {
    let precisions = LaunchPrecisions::new(activity, process);
    let namer = Namer::new(window, (comm, rules), precisions);
    for k in activity.kernels(process) {
        namer.kernel(k, families, &mut each);
    }
    for m in activity.memcpys(process) {
        let family = if m.is_peer() { MEMCPY_PEER } else { MEMCPY };
        namer.other(
            (m.stream, (m.start, m.end), m.correlation),
            family,
            &mut each,
        );
    }
    for m in activity.memsets(process) {
        namer.other(
            (m.stream, (m.start, m.end), m.correlation),
            MEMSET,
            &mut each,
        );
    }
    for g in activity.graph_launches(process) {
        namer.other(
            (g.stream, (g.start, g.end), g.correlation),
            CUDA_GRAPH,
            &mut each,
        );
    }
}

/// The role of each communication kernel of `comm` (a process's classification over a
/// window), by (stream, clipped start): what names it.
pub fn roles<'c>(comm: &RankStreams, rules: &'c RoleRules) -> FxHashMap<(StreamId, i64), &'c str> {
    (comm.comm.iter())
        .map(|k| ((k.stream, k.start), rules.label(k.purpose)))
        .collect()
}

/// What names the GPU operations of one process over one window, one at a time, as
/// [`each_operation`] does.
pub struct Namer<'c> {
    window: (i64, i64),
    /// The role of each communication kernel, by (stream, clipped start).
    roles: FxHashMap<(StreamId, i64), &'c str>,
    precisions: LaunchPrecisions,
}

impl<'c> Namer<'c> {
    /// The namer of operations over `window`, with the process's classification over it and
    /// its launches' precisions.
    pub fn new(
        window: (i64, i64),
        (comm, rules): (&RankStreams, &'c RoleRules),
        precisions: LaunchPrecisions,
    ) -> Namer<'c> {
        Namer {
            window,
            roles: roles(comm, rules),
            precisions,
        }
    }

    /// A kernel, handed to `each` with its family when it lies in the window.
    pub fn kernel(
        &self,
        k: &Kernel,
        families: &mut FamilyCache,
        each: &mut impl FnMut(Operation, &str),
    ) {
        let Some((s, _)) = clip((k.start.0, k.end.0), self.window) else {
            return;
        };
        let role = self.roles.get(&(k.stream, s));
        let op = Operation {
            stream: k.stream,
            span: (k.start.0, k.end.0),
            correlation: k.correlation,
            comm: role.is_some(),
            kernel: Some(k.short_name),
        };
        match role {
            Some(role) => self.emit(op, role, each),
            None => match families.kernel(k.short_name, k.name) {
                GEMM_UNKNOWN => {
                    let family = self.precisions.of(k.correlation).unwrap_or(GEMM_UNKNOWN);
                    self.emit(op, family, each)
                }
                family => self.emit(op, family, each),
            },
        }
    }

    /// A copy, set or graph launch (stream, span, correlation id) of `family`; a copy between
    /// GPUs ([`MEMCPY_PEER`]) is communication, named by its role.
    pub fn other(
        &self,
        (stream, span, correlation): (StreamId, (Ns, Ns), u32),
        family: &str,
        each: &mut impl FnMut(Operation, &str),
    ) {
        let span = (span.0.0, span.1.0);
        let role = clip(span, self.window)
            .filter(|_| family == MEMCPY_PEER)
            .and_then(|(s, _)| self.roles.get(&(stream, s)));
        let op = Operation {
            stream,
            span,
            correlation,
            comm: role.is_some(),
            kernel: None,
        };
        self.emit(op, role.map_or(family, |r| r), each);
    }

    /// `op`, clipped, when it lies in the window.
    fn emit(&self, op: Operation, family: &str, each: &mut impl FnMut(Operation, &str)) {
        if let Some(span) = clip(op.span, self.window) {
            each(Operation { span, ..op }, family);
        }
    }
}

/// The breakdown of `process` over `window`, each operation's family as [`each_operation`]
/// gives it.
pub fn rank_kernels(
    activity: &Activity,
    (process, window): (ProcessId, (i64, i64)),
    (comm, rules): (&RankStreams, &RoleRules),
    families: &mut FamilyCache,
) -> RankKernels {
    let mut named = Vec::new();
    each_operation(
        activity,
        (process, window),
        (comm, rules),
        families,
        |op, family| named.push((op, family.to_string())),
    );
    // Kernels, copies, sets and graph launches came one kind after another.
    named.sort_by_key(|(op, _)| op.span.0);
    let mut tally = KernelTally::default();
    for (op, family) in named {
        tally.add(op, &family, activity.timeline);
    }
    tally.finish(window)
}

/// A [`RankKernels`] gathered one named operation at a time, in start order, in memory that
/// grows with the families and the unnamed kernels' names, not with the operations.
#[derive(Debug, Default)]
pub struct KernelTally {
    /// Per family: operations and time.
    times: BTreeMap<String, (u64, i64)>,
    /// The operations' union.
    union: UnionMeasure,
    /// Per kernel name of family [`OTHER`]: kernels and time.
    other: BTreeMap<String, (u64, i64)>,
}

impl KernelTally {
    /// An operation (clipped) of `family`, its start no earlier than the last one's.
    pub fn add(&mut self, op: Operation, family: &str, timeline: &Timeline) {
        let (s, e) = op.span;
        let entry = self.times.entry(family.to_string()).or_default();
        entry.0 += 1;
        entry.1 += e - s;
        self.union.add((s, e));
        if let (OTHER, Some(name)) = (family, op.kernel) {
            let entry = self
                .other
                .entry(timeline.text(name).to_string())
                .or_default();
            entry.0 += 1;
            entry.1 += e - s;
        }
    }

    /// The breakdown over `window`.
    pub fn finish(self, window: (i64, i64)) -> RankKernels {
        let union = self.union.measure();
        let mut families: Vec<FamilyTime> = (self.times.into_iter())
            .map(|(family, (kernels, time_ns))| FamilyTime {
                family,
                kernels,
                time_ns,
            })
            .collect();
        families.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.family.cmp(&b.family)));
        let kernel_ns = families.iter().map(|f| f.time_ns).sum();
        let span_ns = window.1 - window.0;
        let mut unclassified: Vec<Unclassified> = (self.other.into_iter())
            .map(|(name, (kernels, time_ns))| Unclassified {
                name,
                kernels,
                time_ns,
            })
            .collect();
        unclassified.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.name.cmp(&b.name)));
        RankKernels {
            families,
            span_ns,
            kernel_ns,
            idle_ns: span_ns - union,
            concurrency_excess_ns: kernel_ns - union,
            unclassified,
        }
    }
}

/// The time of `process`'s kernels over `window` that no family names, and the time of all its
/// GPU operations there, ns: what [`rank_kernels`] files under [`OTHER`] and its `kernel_ns`,
/// for the commands that list no families.
pub fn unclassified_share(
    activity: &Activity,
    (process, window): (ProcessId, (i64, i64)),
    families: &mut FamilyCache,
) -> (i64, i64) {
    let mut share = UnclassifiedShare::new(window);
    for k in activity.kernels(process) {
        share.kernel(k, families);
    }
    let copies = activity.memcpys(process).map(|m| (m.start.0, m.end.0));
    let sets = activity.memsets(process).map(|m| (m.start.0, m.end.0));
    let graphs = activity
        .graph_launches(process)
        .map(|g| (g.start.0, g.end.0));
    for span in copies.chain(sets).chain(graphs) {
        share.operation(span);
    }
    (share.other, share.all)
}

/// [`unclassified_share`] gathered one GPU operation at a time, in any order.
#[derive(Debug, Clone, Copy)]
pub struct UnclassifiedShare {
    /// The window operations are clipped to.
    window: (i64, i64),
    /// Kernel time no family names, ns.
    pub other: i64,
    /// Time of every GPU operation, ns.
    pub all: i64,
}

impl UnclassifiedShare {
    /// Nothing yet, over `window`.
    pub fn new(window: (i64, i64)) -> UnclassifiedShare {
        UnclassifiedShare {
            window,
            other: 0,
            all: 0,
        }
    }

    /// A kernel, named by `families`.
    pub fn kernel(&mut self, k: &Kernel, families: &mut FamilyCache) {
        let time = self.operation((k.start.0, k.end.0));
        if time > 0 && families.kernel(k.short_name, k.name) == OTHER {
            self.other += time;
        }
    }

    /// A copy, set or graph launch (or a kernel's time alone); returns its time in the window.
    pub fn operation(&mut self, span: (i64, i64)) -> i64 {
        let time = clip(span, self.window).map_or(0, |(s, e)| e - s);
        self.all += time;
        time
    }
}
