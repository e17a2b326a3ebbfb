//! The role of every CUDA stream of a rank inside a window (DESIGN.md, Stream roles), and the
//! NCCL kernels with their purpose and stage: what `streams` and `overlap` print and what the
//! exporters label tracks with.
//!
//! Roles belong to kernels first. Each NCCL kernel takes the role of the strongest evidence
//! around its launch ([`Evidence`]): a `--roles` rule, then a framework's NVTX name, then
//! PyTorch's collective name (each the innermost matching range on any thread of the process),
//! then NCCL's own NVTX calls on the launching thread (collective, point-to-point `p2p`, or
//! `nccl:AllToAll` for one group with transfers to several peers), then the kernel name.
//!
//! A copy between two GPUs (memcpy kind peer-to-peer: `cudaMemcpyPeerAsync`, a CUDA IPC
//! pointer) moves data between GPUs as a transfer kernel does: it is communication, `p2p`
//! unless a range around its launch names its purpose (a pipeline rule's `pp_p2p`).
//!
//! A stream running any non-NCCL kernel is `compute`; one running only copies and sets is
//! `copy`; one running only NCCL kernels and peer copies (and maybe other copies) gets the role
//! they agree on, else `mixed`. An NCCL kernel on a compute stream runs in-stream: a
//! point-to-point one keeps its role (it spins until its peers arrive: pipeline wait when it is
//! pipeline traffic), any other collective there is `barrier` communication.

use super::activity::Activity;
use super::comm::comm_kind;
use super::enclosing::{Candidate, innermost};
use super::nccl_calls::{NcclCalls, NcclEvidence, Pattern};
use super::rules::{Matches, P2P, Purpose, RoleRules, Stage, Tier};
use crate::hash::FxHashMap;
use crate::intervals::{Gathered, IntervalSet};
use crate::model::{ApiCall, Kernel, Memcpy, ProcessId, StreamId, StringId};
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
    /// Communication operations: NCCL (and other transfer) kernels, peer copies.
    pub n_comm: u64,
    /// Other kernels.
    pub n_comp: u64,
    /// Memory copies (other than peer copies) and sets.
    pub n_copy: u64,
    /// Summed duration of communication operations, ns.
    pub comm_ns: i64,
    /// Summed duration of other kernels, ns.
    pub comp_ns: i64,
    /// Time the stream had any operation running (union), ns.
    pub busy_ns: i64,
}

/// Why an NCCL kernel has its role: the strongest evidence found, in the order a `--roles` rule,
/// a framework's NVTX range, PyTorch's collective range, NCCL's own NVTX calls, the kernel name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    /// A rule of this tier matched this range around the launch.
    Rule {
        /// User rule, framework or PyTorch name.
        tier: Tier,
        /// The range's text.
        range: StringId,
    },
    /// The NCCL API call the launch sat in, and what its group shows.
    Nccl(NcclEvidence),
    /// The kernel's launch is not in the export (it was launched before the capture): the role
    /// every other kernel of its name on its stream has, from stronger evidence.
    Stream,
    /// Only the kernel name (`ncclDevKernel_AllReduce...`).
    KernelName,
    /// A copy between GPUs, by its kind alone.
    CopyKind,
}

impl Evidence {
    /// `rule`, `framework`, `torch`, `nccl_nvtx` or `kernel_name`.
    pub fn kind(&self) -> &'static str {
        match self {
            Evidence::Rule { tier, .. } => tier.name(),
            Evidence::Nccl(_) => "nccl_nvtx",
            Evidence::Stream => "stream",
            Evidence::KernelName => "kernel_name",
            Evidence::CopyKind => "copy_kind",
        }
    }

    /// The evidence in words: the range text, or the NCCL call with its sends and receives.
    pub fn describe(&self, timeline: &crate::model::Timeline) -> String {
        match self {
            Evidence::Rule { range, .. } => timeline.text(*range).to_string(),
            Evidence::Nccl(n) => {
                let call = timeline.text(n.range);
                match n.pattern {
                    Pattern::Collective(_) => call.to_string(),
                    Pattern::PointToPoint { sends, recvs } | Pattern::AllToAll { sends, recvs } => {
                        format!("{call} ({sends} send, {recvs} recv)")
                    }
                }
            }
            Evidence::Stream => "launched before the capture; as its stream's other kernels".into(),
            Evidence::KernelName => "kernel name".to_string(),
            Evidence::CopyKind => "peer-to-peer copy".to_string(),
        }
    }
}

/// One communication operation inside the window: a kernel, or a copy between GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommKernel {
    /// Start, clipped to the window.
    pub start: i64,
    /// End, clipped to the window.
    pub end: i64,
    /// Its stream.
    pub stream: StreamId,
    /// Its short name ([`StringId::EMPTY`] for a peer copy).
    pub name: StringId,
    /// Its launch's correlation id.
    pub correlation: u32,
    /// The collective it is one member's part of, from the evidence that names a collective
    /// rather than a purpose: NCCL's call (`ncclAllReduce`; a group of sends and receives to
    /// several peers is `nccl:AllToAll`), else PyTorch's collective range (`nccl:all_to_all`),
    /// else the kernel name. None for a point-to-point transfer (and a peer copy).
    pub op: Option<Purpose>,
    /// Its own role (the stream's role is what its kernels agree on).
    pub purpose: Purpose,
    /// Why.
    pub evidence: Evidence,
    /// The stage range its launch sits in, when any.
    pub stage: Option<Stage>,
    /// Whether it is a point-to-point kernel (`SendRecv`: it spins until its peers arrive) or a
    /// peer copy.
    pub point_to_point: bool,
    /// What NCCL's NVTX calls around its launch show (a send, a receive, ...), else the
    /// direction of PyTorch's point-to-point range around it ([`Pattern::of_torch_range`]),
    /// whatever decided its role.
    pub call: Option<Pattern>,
    /// Whether it ran on a compute stream, blocking the compute queued behind it.
    pub in_stream: bool,
}

/// The role name of barrier communication.
pub const BARRIER: &str = "barrier";

/// Kernel roles that are pipeline communication: `pp_p2p`, and point-to-point traffic no
/// evidence gives another purpose (`p2p`: one peer per NCCL group; `nccl:SendRecv`: a `SendRecv`
/// kernel with no NVTX at all).
pub const PIPELINE_ROLES: &[&str] = &["pp_p2p", P2P, "nccl:SendRecv"];

impl CommKernel {
    /// The role the outputs file it under: `barrier`, or its own.
    pub fn role_name<'r>(&self, rules: &'r RoleRules) -> &'r str {
        if self.is_barrier() {
            BARRIER
        } else {
            rules.label(self.purpose)
        }
    }

    /// Whether it is pipeline communication (on whatever stream it ran).
    pub fn is_pipeline(&self, rules: &RoleRules) -> bool {
        !self.is_barrier() && PIPELINE_ROLES.contains(&rules.label(self.purpose))
    }

    /// Barrier communication: a collective other than point-to-point on a compute stream
    /// (PithTrain's synchronous all-reduces), reported apart and never counted as exposed.
    pub fn is_barrier(&self) -> bool {
        self.in_stream && !self.point_to_point
    }
}

/// A rank's streams inside one window.
#[derive(Debug, Clone, Default)]
pub struct RankStreams {
    /// Streams with work in the window, by (device, stream id).
    pub streams: Vec<StreamUse>,
    /// Communication kernels in the window, by start.
    pub comm: Vec<CommKernel>,
    /// Union of the other kernels in the window: the compute that can hide communication.
    pub compute: IntervalSet,
}

impl RankStreams {
    /// The communication kernel of `stream` whose (clipped) start is `start`.
    pub fn comm_at(&self, stream: StreamId, start: i64) -> Option<&CommKernel> {
        let from = self.comm.partition_point(|k| k.start < start);
        self.comm[from..]
            .iter()
            .take_while(|k| k.start == start)
            .find(|k| k.stream == stream)
    }

    /// The communication operation a memory copy starting at `start` (clipped) is, when it
    /// copies between GPUs.
    pub fn peer_copy_at(&self, m: &Memcpy, start: i64) -> Option<&CommKernel> {
        m.is_peer().then(|| self.comm_at(m.stream, start)).flatten()
    }

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
    let mut usage = Usage::new(true);
    for k in activity.kernels(process) {
        if let Some((s, e)) = clip((k.start.0, k.end.0), window) {
            usage.kernel(k, activity.is_comm_kernel(k), (s, e));
        }
    }
    for g in activity.graph_launches(process) {
        if let Some(span) = clip((g.start.0, g.end.0), window) {
            usage.graph(g.stream, span);
        }
    }
    for m in activity.memcpys(process) {
        if let Some(span) = clip((m.start.0, m.end.0), window) {
            usage.memcpy(m, span);
        }
    }
    for m in activity.memsets(process) {
        if let Some(span) = clip((m.start.0, m.end.0), window) {
            usage.copy(m.stream, span);
        }
    }
    usage.classify(activity, process, rules)
}

/// What a process's streams ran inside a window, gathered operation by operation (clipped to
/// the window), then classified ([`Usage::classify`]): from a whole timeline ([`classify`]) or
/// from a conversion's stream of events.
#[derive(Debug, Default)]
pub struct Usage {
    /// Each stream's counts, and with `intervals` its operations' intervals.
    per_stream: PerStream,
    /// The communication operations, clipped.
    comm: Vec<(Transfer, i64, i64)>,
    /// The other kernels and graph launches, when `intervals`.
    compute: Gathered,
    /// Whether to keep the intervals that give busy time and the compute set.
    intervals: bool,
}

impl Usage {
    /// Nothing yet; with `intervals`, busy time and the compute set are kept too (a conversion
    /// needs neither: it draws the counters as the kernels come).
    pub fn new(intervals: bool) -> Usage {
        Usage {
            intervals,
            ..Usage::default()
        }
    }

    /// A kernel, clipped to `span`; `comm` when it moves data between GPUs.
    pub fn kernel(&mut self, k: &Kernel, comm: bool, (s, e): (i64, i64)) {
        if comm {
            return self.transfer(Transfer::Kernel(*k), (s, e));
        }
        let (usage, busy) = entry(&mut self.per_stream, k.stream);
        usage.n_comp += 1;
        usage.comp_ns += e - s;
        if self.intervals {
            busy.add((s, e));
            self.compute.add((s, e));
        }
    }

    /// A CUDA graph launch, clipped to `span`: a graph traced as a whole hides its nodes; it is
    /// counted as compute (graphs of communication kernels cannot be told apart here).
    pub fn graph(&mut self, stream: StreamId, (s, e): (i64, i64)) {
        let (usage, busy) = entry(&mut self.per_stream, stream);
        usage.n_comp += 1;
        usage.comp_ns += e - s;
        if self.intervals {
            busy.add((s, e));
            self.compute.add((s, e));
        }
    }

    /// A copy between GPUs ([`Memcpy::is_peer`]: its stream, start and launch's correlation
    /// id), clipped to `span`: communication.
    pub fn peer_copy(
        &mut self,
        (stream, start, correlation): (StreamId, i64, u32),
        span: (i64, i64),
    ) {
        let copy = Transfer::PeerCopy {
            stream,
            start,
            correlation,
        };
        self.transfer(copy, span);
    }

    /// A communication operation, clipped to `(s, e)`.
    fn transfer(&mut self, t: Transfer, (s, e): (i64, i64)) {
        let (usage, busy) = entry(&mut self.per_stream, t.stream());
        usage.n_comm += 1;
        usage.comm_ns += e - s;
        if self.intervals {
            busy.add((s, e));
        }
        self.comm.push((t, s, e));
    }

    /// A memory copy, clipped to `span`: communication when it is between GPUs.
    pub fn memcpy(&mut self, m: &Memcpy, span: (i64, i64)) {
        match m.is_peer() {
            true => self.peer_copy((m.stream, m.start.0, m.correlation), span),
            false => self.copy(m.stream, span),
        }
    }

    /// A memory copy (other than between GPUs) or set, clipped to `span`.
    pub fn copy(&mut self, stream: StreamId, span: (i64, i64)) {
        let (usage, busy) = entry(&mut self.per_stream, stream);
        usage.n_copy += 1;
        if self.intervals {
            busy.add(span);
        }
    }

    /// The streams' roles and the communication kernels' roles, evidence and stages.
    pub fn classify(
        self,
        activity: &Activity,
        process: ProcessId,
        rules: &RoleRules,
    ) -> RankStreams {
        let timeline = activity.timeline;
        let comm = label_kernels(activity, process, &self.comm, rules);
        let mut streams = self
            .per_stream
            .into_values()
            .map(|(mut usage, busy)| {
                usage.busy_ns = busy.finish().measure();
                usage.role = role(&usage, &comm);
                usage
            })
            .collect::<Vec<_>>();
        let compute_streams: Vec<StreamId> = streams
            .iter()
            .filter(|s| s.role == Role::Compute)
            .map(|s| s.stream)
            .collect();
        let comm = comm
            .into_iter()
            .map(|k| CommKernel {
                in_stream: compute_streams.contains(&k.stream),
                ..k
            })
            .collect();
        streams.sort_by_key(|s| {
            let stream = timeline.stream(s.stream);
            (timeline.gpu(stream.gpu).device, stream.stream, s.stream)
        });
        RankStreams {
            streams,
            comm,
            compute: self.compute.finish(),
        }
    }
}

/// A communication operation as gathered, before its role is known.
#[derive(Debug, Clone, Copy)]
enum Transfer {
    /// A kernel that moves data between GPUs.
    Kernel(Kernel),
    /// A copy between GPUs: its stream, start and launch's correlation id.
    PeerCopy {
        stream: StreamId,
        start: i64,
        correlation: u32,
    },
}

impl Transfer {
    fn stream(&self) -> StreamId {
        match self {
            Transfer::Kernel(k) => k.stream,
            Transfer::PeerCopy { stream, .. } => *stream,
        }
    }

    /// Its start (unclipped), ns.
    fn start(&self) -> i64 {
        match self {
            Transfer::Kernel(k) => k.start.0,
            Transfer::PeerCopy { start, .. } => *start,
        }
    }

    fn correlation(&self) -> u32 {
        match self {
            Transfer::Kernel(k) => k.correlation,
            Transfer::PeerCopy { correlation, .. } => *correlation,
        }
    }

    /// A kernel's short name; a copy has none.
    fn short_name(&self) -> StringId {
        match self {
            Transfer::Kernel(k) => k.short_name,
            Transfer::PeerCopy { .. } => StringId::EMPTY,
        }
    }
}

/// Each stream's use being accumulated, with its busy intervals.
type PerStream = BTreeMap<StreamId, (StreamUse, Gathered)>;

/// The accumulating use of a stream.
fn entry(per_stream: &mut PerStream, stream: StreamId) -> &mut (StreamUse, Gathered) {
    per_stream
        .entry(stream)
        .or_insert_with(|| (StreamUse::new(stream), Gathered::default()))
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

/// The stream's role from its counts and its communication kernels' purposes.
fn role(usage: &StreamUse, comm: &[CommKernel]) -> Role {
    if usage.n_comp > 0 {
        return Role::Compute;
    }
    let mut purposes = comm
        .iter()
        .filter(|k| k.stream == usage.stream)
        .map(|k| k.purpose);
    match purposes.next() {
        None => Role::Copy,
        Some(first) if purposes.all(|p| p == first) => Role::Comm(first),
        Some(_) => Role::Mixed,
    }
}

/// Each communication kernel's role, evidence and stage, from the ranges enclosing its launch.
fn label_kernels(
    activity: &Activity,
    process: ProcessId,
    kernels: &[(Transfer, i64, i64)],
    rules: &RoleRules,
) -> Vec<CommKernel> {
    let timeline = activity.timeline;
    let calls: Vec<Option<&ApiCall>> = kernels
        .iter()
        .map(|(t, ..)| activity.launch_call(process, t.correlation()))
        .collect();
    // What each distinct kernel's names say: its role by name, and whether it is a transfer.
    let mut by_name: FxHashMap<(StringId, StringId), (Purpose, bool)> = FxHashMap::default();
    let mut named = |t: &Transfer| match t {
        Transfer::Kernel(k) => *by_name.entry((k.short_name, k.name)).or_insert_with(|| {
            let (short, name) = (timeline.text(k.short_name), timeline.text(k.name));
            let p2p = comm_kind(short, name).is_some_and(|c| c.point_to_point);
            (rules.by_name(short, name), p2p)
        }),
        Transfer::PeerCopy { .. } => (rules.named(P2P), true),
    };
    let names: Vec<(Purpose, bool)> = kernels.iter().map(|(t, ..)| named(t)).collect();
    let launches: Vec<(i64, bool)> = kernels
        .iter()
        .zip(&calls)
        .zip(&names)
        .map(|(((t, ..), call), &(_, p2p))| (call.map_or(t.start(), |c| c.start.0), p2p))
        .collect();
    let (by_tier, by_stage) = range_evidence(activity, process, &launches, rules);
    let nccl_calls = NcclCalls::new(activity, process);
    let mut labelled: Vec<CommKernel> = kernels
        .iter()
        .enumerate()
        .map(|(i, &(ref t, start, end))| {
            let copy = matches!(t, Transfer::PeerCopy { .. });
            let call = calls[i]
                .and_then(|c| nccl_calls.around(c))
                .filter(|_| !copy);
            let (named, point_to_point) = names[i];
            let by_rule = by_tier.iter().find_map(|hits| hits[i]);
            let by_name = match copy {
                true => (named, Evidence::CopyKind),
                false => (named, Evidence::KernelName),
            };
            let (purpose, evidence) = by_rule
                .or_else(|| {
                    let found = call?;
                    Some((pattern_role(found.pattern, rules), Evidence::Nccl(found)))
                })
                .unwrap_or(by_name);
            let torch_hit = by_tier[Tier::Torch as usize][i];
            let torch = torch_hit.map(|(p, _)| p);
            let torch_direction = || match torch_hit?.1 {
                Evidence::Rule { range, .. } => {
                    Pattern::of_torch_range(activity.timeline.text(range))
                }
                _ => None,
            };
            CommKernel {
                start,
                end,
                stream: t.stream(),
                name: t.short_name(),
                correlation: t.correlation(),
                op: collective_op(
                    (call.map(|c| c.pattern), torch),
                    (named, point_to_point),
                    rules,
                )
                .filter(|_| !copy),
                purpose,
                evidence,
                stage: by_stage[i],
                point_to_point: launches[i].1,
                call: call.map(|c| c.pattern).or_else(torch_direction),
                in_stream: false,
            }
        })
        .collect();
    // Launched before the capture, and named by nothing else: as its stream's other kernels.
    let consensus = stream_consensus(&labelled, kernels);
    for i in 0..kernels.len() {
        let key = (labelled[i].stream, kernels[i].0.short_name());
        let unlaunched = calls[i].is_none() && labelled[i].evidence == Evidence::KernelName;
        if let (true, Some(&Some(role))) = (unlaunched, consensus.get(&key)) {
            labelled[i].purpose = role;
            labelled[i].evidence = Evidence::Stream;
        }
    }
    labelled
}

/// The collective a kernel is part of ([`CommKernel::op`]), from NCCL's call pattern around its
/// launch, PyTorch's collective range, or its name (`named`: the role its name gives;
/// `point_to_point`: its name says a transfer).
fn collective_op(
    (call, torch): (Option<Pattern>, Option<Purpose>),
    (named, point_to_point): (Purpose, bool),
    rules: &RoleRules,
) -> Option<Purpose> {
    let op = match (call, torch) {
        (Some(pattern), _) => pattern_role(pattern, rules),
        (None, Some(op)) => op,
        (None, None) if point_to_point => return None,
        (None, None) => named,
    };
    (op != rules.named(P2P)).then_some(op)
}

/// For each launch (time, whether its kernel is point-to-point), per rule tier (strongest
/// first): the role and evidence of the innermost matching range around it; and the PithTrain
/// stage range it sits in.
fn range_evidence(
    activity: &Activity,
    process: ProcessId,
    launches: &[(i64, bool)],
    rules: &RoleRules,
) -> ([Vec<Option<RuleHit>>; 3], Vec<Option<Stage>>) {
    let timeline = activity.timeline;
    let mut matches: FxHashMap<StringId, Matches> = FxHashMap::default();
    let mut stages: FxHashMap<StringId, Option<Stage>> = FxHashMap::default();
    // Per tier, per kind of kernel (other, point-to-point): the ranges a rule names.
    let mut rule_ranges: [[RuleRanges; 2]; 3] = Default::default();
    let mut stage_ranges = Vec::new();
    for e in activity.nvtx(process).filter(|e| e.kind.is_range()) {
        let text = timeline.text(e.text);
        let candidate = Candidate {
            start: e.start.0,
            end: e.end.map_or(i64::MAX, |t| t.0),
        };
        let m = *matches.entry(e.text).or_insert_with(|| rules.matches(text));
        for tier in Tier::ALL.into_iter().filter(|_| !m.is_empty()) {
            for kind in [false, true] {
                if let Some(p) = m.get(tier, kind) {
                    rule_ranges[tier as usize][usize::from(kind)].push((candidate, (p, e.text)));
                }
            }
        }
        if let Some(s) = *stages.entry(e.text).or_insert_with(|| Stage::last_in(text)) {
            stage_ranges.push((candidate, s));
        }
    }
    let mut by_tier: [Vec<Option<RuleHit>>; 3] = Default::default();
    for tier in Tier::ALL {
        by_tier[tier as usize] = vec![None; launches.len()];
    }
    for kind in [false, true] {
        let (indices, times): (Vec<usize>, Vec<i64>) = (0..launches.len())
            .filter(|&i| launches[i].1 == kind)
            .map(|i| (i, launches[i].0))
            .unzip();
        for tier in Tier::ALL {
            let found = lookup(&rule_ranges[tier as usize][usize::from(kind)], &times);
            for (&i, hit) in indices.iter().zip(found) {
                by_tier[tier as usize][i] =
                    hit.map(|(purpose, range)| (purpose, Evidence::Rule { tier, range }));
            }
        }
    }
    let times: Vec<i64> = launches.iter().map(|l| l.0).collect();
    (by_tier, lookup(&stage_ranges, &times))
}

/// Per (stream, kernel name), the role its kernels have from evidence stronger than the name:
/// `Some` when they agree, `None` when they do not.
fn stream_consensus(
    labelled: &[CommKernel],
    kernels: &[(Transfer, i64, i64)],
) -> FxHashMap<(StreamId, StringId), Option<Purpose>> {
    let mut consensus: FxHashMap<(StreamId, StringId), Option<Purpose>> = FxHashMap::default();
    for (l, (t, ..)) in labelled.iter().zip(kernels) {
        if !matches!(l.evidence, Evidence::KernelName | Evidence::Stream) {
            consensus
                .entry((l.stream, t.short_name()))
                .and_modify(|role| *role = role.filter(|&r| r == l.purpose))
                .or_insert(Some(l.purpose));
        }
    }
    consensus
}

/// A role a rule gave, with the evidence.
type RuleHit = (Purpose, Evidence);

/// Ranges a rule names, with the role and the range's text.
type RuleRanges = Vec<(Candidate, (Purpose, StringId))>;

/// The role an NCCL call pattern supports: its collective, `nccl:AllToAll`, or `p2p`.
fn pattern_role(pattern: Pattern, rules: &RoleRules) -> Purpose {
    match pattern {
        Pattern::Collective(c) => rules.named(&format!("nccl:{c}")),
        Pattern::AllToAll { .. } => rules.named("nccl:AllToAll"),
        Pattern::PointToPoint { .. } => rules.named(P2P),
    }
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
