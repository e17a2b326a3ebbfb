//! A run's dependency graph across ranks, from what the trace proves, and its replay with
//! changed durations.
//!
//! Every GPU operation (kernel, copy, set, graph launch) of every rank is a node. What let it
//! start, each edge with its evidence:
//! - **stream order**: the operation before it on its stream (the trace's order);
//! - **launch**: the CPU call that launched it (its correlation id); the CPU calls of a rank
//!   follow each other, whatever their thread (the trace does not show one thread handing work
//!   to another, as the main thread hands the backward pass to autograd's), and a host wait (`cudaStreamSynchronize`, `cudaDeviceSynchronize`,
//!   `cudaEventSynchronize`) returns once the GPU operation it waited for ended: the operation
//!   of its rank that ended last before the call returned;
//! - **another stream**: a `cudaStreamWaitEvent` makes the first operation launched after it
//!   on the waiting stream wait for the work already launched on the rank's other streams: of
//!   the last operation launched on each other stream before the wait, the one that ended last
//!   before it started. The waiting stream is the one CUPTI's synchronization record of the
//!   call names (nsys's `CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`, torch.profiler's `cuda_sync`
//!   events; joined by correlation id), so launches on other streams may come between the
//!   wait and the operation; a record naming a stream that ran no GPU work makes nothing wait,
//!   and a call without a record counts for every stream. A rank whose trace holds no stream
//!   waits falls back to timing: an operation of another stream that ended at most
//!   [`CROSS_STREAM_NS`] before it started, after its own stream's and its launch's
//!   constraints;
//! - **a collective's members**: no member's transfer starts before the last member arrived
//!   ([`collectives::match_instances`]); a point-to-point receive's before its matched send.
//!
//! The constraint that ended last is the one that set the start (the *binding* one); the time
//! between it and the start is kept as that edge's lag. [`Graph::replay`] recomputes every
//! start and end with changed durations: an operation starts at the latest of its constraints
//! (each plus its lag: the measured one for the binding edge, none or the launch call's
//! duration for the others), a transfer keeps its duration once all members arrived, CPU gaps
//! between a rank's calls scale as asked. Unchanged, the replay gives back the measured times
//! exactly.

use super::collectives::{self, P2P_OP};
use super::kernels::{Operation, each_operation, roles};
use crate::classify::families::FamilyCache;
use crate::classify::families::MEMCPY_PEER;
use crate::classify::layout;
use crate::classify::{Activity, Rank, RankStreams, RoleRules, streams};
use crate::hash::FxHashMap;
use crate::model::{ApiCall, ProcessId, StreamId, StringId, SyncEvent, ThreadId, Timeline};
use indexmap::IndexSet;

/// No index.
pub const NONE: u32 = u32::MAX;

/// Without recorded stream waits, an operation of another stream that ended at most this long
/// before an operation started (and after its other constraints) is taken for what it waited
/// for, ns.
pub const CROSS_STREAM_NS: i64 = 10_000;

/// The whole capture, as a classification window.
const WHOLE: (i64, i64) = (i64::MIN, i64::MAX);

/// What set an operation's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// The operation before it on its stream.
    Stream,
    /// Its launch: the CPU was late.
    Launch,
    /// An operation of another stream (a stream wait).
    Cross,
    /// Nothing the trace shows (the first operation).
    Nothing,
}

/// One GPU operation.
#[derive(Debug, Clone, Copy)]
pub struct Node {
    /// Its rank (index into the ranks given).
    pub rank: u32,
    /// Its stream.
    pub stream: StreamId,
    /// Start and end, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// Whether it is a communication kernel.
    pub comm: bool,
    /// Its family, or a communication kernel's role (index into [`Graph::labels`]).
    pub label: u32,
    /// Its launch (index into [`Graph::cpu`]), or [`NONE`].
    pub launch: u32,
    /// The operation before it on its stream, or [`NONE`].
    pub prev: u32,
    /// The operation of another stream it waited for, or [`NONE`].
    pub cross: u32,
    /// The collective or transfer it is a member of (index into [`Graph::exchanges`]), or
    /// [`NONE`].
    pub exchange: u32,
    /// What set its start.
    pub binding: Binding,
}

/// A CPU call that matters to the GPU: a launch, or a host wait.
#[derive(Debug, Clone, Copy)]
pub struct CpuCall {
    /// Its rank.
    pub rank: u32,
    /// Its thread.
    pub thread: ThreadId,
    /// Start and end, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// The API function.
    pub name: StringId,
    /// For a host wait, the operation it waited for (else [`NONE`]).
    pub waited: u32,
}

impl CpuCall {
    /// Rank `rank`'s API call `call`; a host wait for operation `waited` (else [`NONE`]).
    fn of(rank: u32, call: &ApiCall, waited: u32) -> CpuCall {
        CpuCall {
            rank,
            thread: call.thread,
            start: call.start.0,
            end: call.end.0.max(call.start.0),
            name: call.name,
            waited,
        }
    }

    /// When its thread went on: a launch's start (the next call's gap counts from it), a host
    /// wait's end.
    fn moment(&self) -> i64 {
        match self.waited {
            NONE => self.start,
            _ => self.end,
        }
    }
}

/// A collective instance or a point-to-point transfer on the graph.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// Member operations.
    pub members: Vec<u32>,
    /// The member that arrived last.
    pub last: u32,
    /// A transfer's sender (its receive waits for it; the sender waits for nobody), or
    /// [`NONE`] for a collective.
    pub sender: u32,
}

/// What the graph rests on: counts of each kind of edge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evidence {
    /// Operations with their launch.
    pub launches: u64,
    /// Host waits.
    pub host_waits: u64,
    /// Stream waits from `cudaStreamWaitEvent` calls.
    pub stream_waits: u64,
    /// Of those, the ones whose waiting stream a synchronization record names.
    pub waits_on_stream: u64,
    /// Stream waits inferred from timing (a rank without `cudaStreamWaitEvent` calls).
    pub timed_waits: u64,
    /// Collective instances matched across ranks.
    pub collectives: u64,
    /// Point-to-point transfers matched sender to receiver.
    pub transfers: u64,
}

/// The dependency graph of a run.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// Operations, by (rank, stream, start, end).
    pub nodes: Vec<Node>,
    /// Launches and host waits, by (rank, start).
    pub cpu: Vec<CpuCall>,
    /// Collectives and transfers.
    pub exchanges: Vec<Exchange>,
    /// Family and role names.
    pub labels: Vec<String>,
    /// What it rests on.
    pub evidence: Evidence,
}

impl Graph {
    /// The graph of `ranks`' operations over the whole capture, communication classified with
    /// `rules`, families from `families`.
    pub fn build(
        activity: &Activity,
        ranks: &[Rank],
        rules: &RoleRules,
        families: &mut FamilyCache,
    ) -> Graph {
        let classified: Vec<RankStreams> = ranks
            .iter()
            .map(|r| streams::classify(activity, r.process, WHOLE, rules))
            .collect();
        let mut operations = Operations::default();
        for (r, (rank, comm)) in ranks.iter().zip(&classified).enumerate() {
            let at = (rank.process, WHOLE);
            each_operation(activity, at, (comm, rules), families, |op, family| {
                operations.add(r as u32, &op, family);
            });
        }
        let timeline = activity.timeline;
        let mut linking = operations.link(ranks.len());
        for sync in &timeline.syncs {
            linking.sync(sync);
        }
        for (r, rank) in ranks.iter().enumerate() {
            for call in activity.api_calls(rank.process) {
                linking.call((r as u32, rank.process), call, timeline);
            }
        }
        linking.finish(activity, (ranks, &classified), rules)
    }

    /// Stream order, the nodes sorted.
    fn link_streams(&mut self) {
        for i in 1..self.nodes.len() {
            let before = self.nodes[i - 1];
            let node = &mut self.nodes[i];
            if (before.rank, before.stream) == (node.rank, node.stream) {
                node.prev = i as u32 - 1;
            }
        }
    }

    /// Collectives matched across ranks, and point-to-point transfers sender to receiver.
    fn add_exchanges(
        &mut self,
        activity: &Activity,
        (ranks, classified): (&[Rank], &[RankStreams]),
        rules: &RoleRules,
    ) {
        let processes: Vec<_> = ranks.iter().map(|r| r.process).collect();
        let mut matched = collectives::match_classified(activity, &processes, rules, classified);
        let transfers: Vec<_> = classified
            .iter()
            .map(|streams| layout::transfers(streams, rules))
            .collect();
        collectives::add_transfers(&mut matched, &transfers);
        let index: FxHashMap<(u32, StreamId, i64), u32> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.comm)
            .map(|(i, n)| ((n.rank, n.stream, n.start), i as u32))
            .collect();
        for instance in &matched.instances {
            let members: Option<Vec<u32>> = instance
                .arrivals
                .iter()
                .map(|a| index.get(&(a.rank as u32, a.stream, a.start)).copied())
                .collect();
            let Some(members) = members else { continue };
            let (_, last) = instance.first_last();
            let position = instance.arrivals.iter().position(|a| *a == last);
            let transfer = matched.communicators[instance.communicator].op == P2P_OP;
            let id = self.exchanges.len() as u32;
            for &m in &members {
                self.nodes[m as usize].exchange = id;
            }
            match transfer {
                true => self.evidence.transfers += 1,
                false => self.evidence.collectives += 1,
            }
            self.exchanges.push(Exchange {
                last: members[position.unwrap_or(0)],
                sender: if transfer { members[0] } else { NONE },
                members,
            });
        }
    }

    /// Each operation's stream wait (from the rank's `cudaStreamWaitEvent` calls `waits`, else
    /// from timing) and binding constraint.
    fn bind(&mut self, waits: &[Vec<Wait>], ends: &ByEnd) {
        let streams = self.stream_ranges();
        for i in 0..self.nodes.len() {
            let node = self.nodes[i];
            let stream = match node.prev {
                NONE => None,
                p => Some(self.nodes[p as usize].end.min(node.start)),
            };
            let launch = match node.launch {
                NONE => None,
                l => Some(self.cpu[l as usize].start.min(node.start)),
            };
            let floor = stream.max(launch).unwrap_or(i64::MIN);
            let rank_waits = &waits[node.rank as usize];
            let cross = match rank_waits.is_empty() {
                true => ends.waited_for(&self.nodes, &node, floor),
                false => self.stream_wait(&node, rank_waits, &streams),
            };
            let cross = cross.filter(|&c| self.nodes[c as usize].end > floor);
            let binding = match (cross, stream, launch) {
                (Some(_), ..) => Binding::Cross,
                (None, Some(s), Some(l)) if l > s => Binding::Launch,
                (None, Some(_), _) => Binding::Stream,
                (None, None, Some(_)) => Binding::Launch,
                (None, None, None) => Binding::Nothing,
            };
            if cross.is_some() {
                match rank_waits.is_empty() {
                    true => self.evidence.timed_waits += 1,
                    false => self.evidence.stream_waits += 1,
                }
            }
            let node = &mut self.nodes[i];
            node.cross = cross.unwrap_or(NONE);
            node.binding = binding;
        }
    }

    /// What `node` waited for on another stream: when its rank called `cudaStreamWaitEvent`
    /// for its stream (or for an unknown one) after the stream's previous launch and before
    /// this launch, the work launched on the rank's other streams before that wait, each
    /// stream's last operation; of those, the one that ended last before `node` started.
    fn stream_wait(
        &self,
        node: &Node,
        waits: &[Wait],
        streams: &[(u32, StreamId, u32, u32)],
    ) -> Option<u32> {
        let call = self.cpu.get(node.launch as usize)?;
        let launched = |n: &Node| match n.launch {
            NONE => n.start,
            l => self.cpu[l as usize].start,
        };
        let after_on_stream = match node.prev {
            NONE => i64::MIN,
            p => launched(&self.nodes[p as usize]),
        };
        let at = waits.partition_point(|w| w.at < call.start);
        let wait = waits[..at]
            .iter()
            .rev()
            .take_while(|w| w.at > after_on_stream)
            .find(|w| w.stream.is_none_or(|s| s == Some(node.stream)))?
            .at;
        // The rank's streams (the ranges are in (rank, stream) order).
        let first = streams.partition_point(|s| s.0 < node.rank);
        let last = streams.partition_point(|s| s.0 <= node.rank);
        streams[first..last]
            .iter()
            .filter(|&&(_, stream, ..)| stream != node.stream)
            .filter_map(|&(_, _, from, to)| {
                // A stream runs its operations in launch order: the last launched before the
                // wait is found by bisection.
                let on_stream = &self.nodes[from as usize..to as usize];
                let before = on_stream.partition_point(|n| launched(n) < wait) as u32;
                (before > 0).then(|| from + before - 1)
            })
            .filter(|&i| self.nodes[i as usize].end <= node.start)
            .max_by_key(|&i| (self.nodes[i as usize].end, i))
    }

    /// Each stream's nodes: (rank, stream, first, end) index ranges.
    fn stream_ranges(&self) -> Vec<(u32, StreamId, u32, u32)> {
        let mut ranges: Vec<(u32, StreamId, u32, u32)> = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            match ranges.last_mut() {
                Some(last) if (last.0, last.1) == (n.rank, n.stream) => last.3 = i as u32 + 1,
                _ => ranges.push((n.rank, n.stream, i as u32, i as u32 + 1)),
            }
        }
        ranges
    }

    /// The nodes of each rank ordered by end.
    fn by_end(&self) -> ByEnd {
        let mut order: Vec<u32> = (0..self.nodes.len() as u32).collect();
        order.sort_unstable_by_key(|&i| {
            let n = &self.nodes[i as usize];
            (n.rank, n.end, i)
        });
        ByEnd(order)
    }

    /// Whether the graph has no operation.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every operation's end after changing durations: `scale(i)` multiplies operation i's
    /// duration (a collective's or transfer's: its time once all members arrived),
    /// `cpu_scale(j)` the CPU time between call j and its rank's previous call. See the
    /// module's model.
    pub fn replay(&self, scale: impl Fn(u32) -> f64, cpu_scale: impl Fn(usize) -> f64) -> Vec<i64> {
        Replay::new(self).run(&Scales { scale, cpu_scale })
    }
}

/// A graph's operations, gathered in any order ([`Operations::add`]); [`Operations::link`]
/// orders them for the calls.
#[derive(Default)]
pub struct Operations {
    /// Each operation with its launch's correlation id (what links it to its launch), and
    /// whether a role may name it (a kernel, a copy between GPUs).
    nodes: Vec<(Node, u32, bool)>,
    labels: IndexSet<String>,
}

impl Operations {
    /// Room for `n` operations.
    pub fn with_capacity(n: usize) -> Operations {
        Operations {
            nodes: Vec::with_capacity(n),
            labels: IndexSet::new(),
        }
    }

    /// Operation `op` of rank `rank` (index into the ranks given), of family (or
    /// communication role) `family`.
    pub fn add(&mut self, rank: u32, op: &Operation, family: &str) {
        let label = self.label(family);
        let node = Node {
            rank,
            stream: op.stream,
            start: op.span.0,
            end: op.span.1.max(op.span.0),
            comm: op.comm,
            label,
            launch: NONE,
            prev: NONE,
            cross: NONE,
            exchange: NONE,
            binding: Binding::Nothing,
        };
        let named_by_role = op.kernel.is_some() || family == MEMCPY_PEER;
        self.nodes.push((node, op.correlation, named_by_role));
    }

    /// The index of label `name`.
    fn label(&mut self, name: &str) -> u32 {
        match self.labels.get_index_of(name) {
            Some(label) => label as u32,
            None => self.labels.insert_full(name.to_string()).0 as u32,
        }
    }

    /// Names the communication of operations added as if no stream carried any: each kernel
    /// and copy between GPUs that rank r's classification `classified[r]` (over the whole
    /// capture) holds is communication, named by its role, as [`each_operation`] names it.
    pub fn name_communication(&mut self, classified: &[RankStreams], rules: &RoleRules) {
        let roles: Vec<_> = classified.iter().map(|c| roles(c, rules)).collect();
        for i in 0..self.nodes.len() {
            let (node, _, named_by_role) = self.nodes[i];
            let role = roles[node.rank as usize].get(&(node.stream, node.start));
            if let Some(role) = role.filter(|_| named_by_role) {
                let label = self.label(role);
                let node = &mut self.nodes[i].0;
                (node.comm, node.label) = (true, label);
            }
        }
    }

    /// The graph of these operations, of `ranks` ranks, ready for their calls: labels in name
    /// order and nodes in (rank, stream, start, end) order, whatever order they came in.
    pub fn link(self, ranks: usize) -> Linking {
        let Operations { mut nodes, labels } = self;
        // The labels some operation has, in name order.
        let mut used = vec![false; labels.len()];
        for (node, ..) in &nodes {
            used[node.label as usize] = true;
        }
        let mut order: Vec<usize> = (0..labels.len()).filter(|&l| used[l]).collect();
        order.sort_unstable_by(|&a, &b| labels[a].cmp(&labels[b]));
        let mut renamed = vec![0u32; labels.len()];
        for (new, &old) in order.iter().enumerate() {
            renamed[old] = new as u32;
        }
        for (node, ..) in &mut nodes {
            node.label = renamed[node.label as usize];
        }
        nodes.sort_unstable_by_key(|&(n, correlation, _)| {
            (
                n.rank,
                n.stream,
                n.start,
                n.end,
                correlation,
                n.label,
                n.comm,
            )
        });
        let unlaunched = Unlaunched::new(&nodes, ranks);
        // In place: the correlation ids are in the chains now.
        let mut nodes: Vec<Node> = nodes.into_iter().map(|(node, ..)| node).collect();
        nodes.shrink_to_fit();
        let mut graph = Graph {
            nodes,
            labels: order.iter().map(|&i| labels[i].clone()).collect(),
            ..Graph::default()
        };
        graph.link_streams();
        let operations = graph.nodes.len();
        Linking {
            ends: graph.by_end(),
            unlaunched,
            graph,
            waiting: FxHashMap::default(),
            kinds: FxHashMap::default(),
            // A launch per operation, and a few host waits.
            calls: Vec::with_capacity(operations + operations / 64),
            waits: vec![Vec::new(); ranks],
        }
    }
}

/// A graph whose operations are in place, taking its ranks' synchronization records
/// ([`Linking::sync`]) and then their API calls ([`Linking::call`], each rank's in start
/// order), before [`Linking::finish`] adds collectives and binds every start.
pub struct Linking {
    graph: Graph,
    ends: ByEnd,
    unlaunched: Unlaunched,
    /// The stream each stream wait made wait, by (process, correlation id): None for a
    /// stream that ran no GPU work.
    waiting: FxHashMap<(ProcessId, u32), Option<StreamId>>,
    /// Whether each API function is a stream wait, and whether a host wait.
    kinds: FxHashMap<StringId, (bool, bool)>,
    /// Launches (with their operation) and host waits (with [`NONE`]).
    calls: Vec<(CpuCall, u32)>,
    /// Each rank's `cudaStreamWaitEvent` calls.
    waits: Vec<Vec<Wait>>,
}

impl Linking {
    /// A synchronization record (of any process: those of a stream wait are kept).
    pub fn sync(&mut self, sync: &SyncEvent) {
        if sync.sync_type == STREAM_WAIT_EVENT {
            let key = (sync.process, sync.correlation);
            self.waiting.insert(key, sync.stream);
        }
    }

    /// An API call of rank `r` (index into the ranks given), whose process is `process`: the
    /// launch of the operations of its correlation id when it is the first call of it, a stream
    /// wait, a host wait (returning once the rank's operation that ended last before it
    /// returned had ended).
    pub fn call(&mut self, (r, process): (u32, ProcessId), call: &ApiCall, timeline: &Timeline) {
        let mut launched = self.unlaunched.claim(r, call.correlation);
        while let Some(node) = launched {
            self.calls.push((CpuCall::of(r, call, NONE), node));
            launched = self.unlaunched.next(node);
        }
        let (wait, sync) = *self.kinds.entry(call.name).or_insert_with(|| {
            let name = timeline.text(call.name);
            (
                name.contains("StreamWaitEvent"),
                name.contains("Synchronize"),
            )
        });
        if wait {
            let stream = self.waiting.get(&(process, call.correlation)).copied();
            self.graph.evidence.waits_on_stream += u64::from(stream.is_some());
            self.waits[r as usize].push(Wait {
                at: call.start.0,
                stream,
            });
        }
        if sync && let Some(waited) = self.ends.last_ending(&self.graph.nodes, r, call.end.0) {
            self.calls.push((CpuCall::of(r, call, waited), NONE));
        }
    }

    /// The graph: calls in (rank, start) order, collectives and transfers matched over
    /// `ranks`' streams `classified` with `rules` (on `activity`, whose communication kernels
    /// they are), and every start bound.
    pub fn finish(
        self,
        activity: &Activity,
        (ranks, classified): (&[Rank], &[RankStreams]),
        rules: &RoleRules,
    ) -> Graph {
        let Linking {
            mut graph,
            ends,
            mut calls,
            mut waits,
            unlaunched,
            ..
        } = self;
        drop(unlaunched);
        calls.sort_unstable_by_key(|(c, node)| {
            (c.rank, c.start, *node, c.end, c.thread, c.name, c.waited)
        });
        for (j, (_, node)) in calls.iter().enumerate() {
            match *node {
                NONE => graph.evidence.host_waits += 1,
                node => {
                    graph.nodes[node as usize].launch = j as u32;
                    graph.evidence.launches += 1;
                }
            }
        }
        // In place: the calls' vector becomes the graph's.
        graph.cpu = calls.into_iter().map(|(call, _)| call).collect();
        graph.cpu.shrink_to_fit();
        for list in &mut waits {
            list.sort_unstable_by_key(|w| (w.at, w.stream));
        }
        graph.add_exchanges(activity, (ranks, classified), rules);
        graph.bind(&waits, &ends);
        graph
    }
}

/// The operations not linked to a launch yet, by (rank, correlation id): the first call of an
/// id launches every operation of it. Per rank a vector indexed by the id (ids are counters,
/// up to the rank's largest), those past [`Unlaunched::DENSE`] in a map; the operations of one
/// id in a chain.
struct Unlaunched {
    dense: Vec<Vec<u32>>,
    sparse: FxHashMap<(u32, u32), u32>,
    /// Each node's next node of the same rank and id, or [`NONE`].
    next: Vec<u32>,
}

impl Unlaunched {
    /// Ids below this are kept in the vectors.
    const DENSE: u32 = 1 << 24;
    /// An id whose first call came.
    const CLAIMED: u32 = NONE - 1;

    /// The chains of `nodes`, each with its launch's correlation id.
    fn new(nodes: &[(Node, u32, bool)], ranks: usize) -> Unlaunched {
        let mut dense: Vec<Vec<u32>> = vec![Vec::new(); ranks];
        for &(n, id, _) in nodes.iter().filter(|&&(_, id, _)| id < Self::DENSE) {
            let slots = &mut dense[n.rank as usize];
            if id as usize >= slots.len() {
                slots.resize(id as usize + 1, NONE);
            }
        }
        let mut unlaunched = Unlaunched {
            dense,
            sparse: FxHashMap::default(),
            next: vec![NONE; nodes.len()],
        };
        for (i, &(n, id, _)) in nodes.iter().enumerate().rev() {
            let head = match id < Self::DENSE {
                true => &mut unlaunched.dense[n.rank as usize][id as usize],
                false => (unlaunched.sparse.entry((n.rank, id))).or_insert(NONE),
            };
            unlaunched.next[i] = std::mem::replace(head, i as u32);
        }
        unlaunched
    }

    /// The first operation of (rank, id) when this is the first call of the id, else None.
    fn claim(&mut self, rank: u32, id: u32) -> Option<u32> {
        let slot = match id < Self::DENSE {
            true => self.dense[rank as usize].get_mut(id as usize)?,
            false => self.sparse.get_mut(&(rank, id))?,
        };
        match *slot {
            NONE | Self::CLAIMED => None,
            head => {
                *slot = Self::CLAIMED;
                Some(head)
            }
        }
    }

    /// The operation after `node` of its rank and id.
    fn next(&self, node: u32) -> Option<u32> {
        Some(self.next[node as usize]).filter(|&n| n != NONE)
    }
}

/// `CUpti_ActivitySynchronizationType`'s stream wait (`cudaStreamWaitEvent`).
const STREAM_WAIT_EVENT: u8 = 2;

/// A `cudaStreamWaitEvent` call: when it was made, and the stream it made wait when a
/// synchronization record names it (`Some(None)`: a stream that ran no GPU work).
#[derive(Debug, Clone, Copy)]
struct Wait {
    at: i64,
    stream: Option<Option<StreamId>>,
}

/// Node indices ordered by (rank, end).
struct ByEnd(Vec<u32>);

impl ByEnd {
    /// Where rank `rank`'s nodes ending at or before `t` stop.
    fn upto(&self, nodes: &[Node], rank: u32, t: i64) -> usize {
        self.0.partition_point(|&i| {
            let n = &nodes[i as usize];
            (n.rank, n.end) <= (rank, t)
        })
    }

    /// The operation of `rank` that ended last at or before `t`.
    fn last_ending(&self, nodes: &[Node], rank: u32, t: i64) -> Option<u32> {
        let at = self.upto(nodes, rank, t);
        let i = *self.0.get(at.checked_sub(1)?)?;
        (nodes[i as usize].rank == rank).then_some(i)
    }

    /// The operation of another stream of `node`'s rank that ended last at most
    /// [`CROSS_STREAM_NS`] before `node` started and after `floor`.
    fn waited_for(&self, nodes: &[Node], node: &Node, floor: i64) -> Option<u32> {
        let at = self.upto(nodes, node.rank, node.start);
        let earliest = floor.max(node.start - CROSS_STREAM_NS);
        self.0[..at]
            .iter()
            .rev()
            .map(|&i| (i, &nodes[i as usize]))
            .take_while(|(_, n)| n.rank == node.rank && n.end > earliest)
            .find(|(_, n)| n.stream != node.stream)
            .map(|(i, _)| i)
    }
}

/// A replay's factors: on each operation's duration, and on the CPU time before each call.
struct Scales<S, C> {
    scale: S,
    cpu_scale: C,
}

/// A replay's points: each node's start (2i) and end (2i + 1), each CPU call (2n + j), each
/// exchange's last arrival (2n + c + x); evaluated in an order where every point's
/// constraints come first.
struct Replay<'g> {
    graph: &'g Graph,
    /// Successors of each point, as offsets into `successors`.
    offsets: Vec<u32>,
    successors: Vec<u32>,
    /// Constraints not yet evaluated, per point.
    waiting: Vec<u32>,
}

impl<'g> Replay<'g> {
    /// The points' successors, in two walks over the edges: one counting each point's, one
    /// placing them.
    fn new(graph: &'g Graph) -> Replay<'g> {
        let points = 2 * graph.nodes.len() + graph.cpu.len() + graph.exchanges.len();
        let mut offsets = vec![0u32; points + 1];
        let mut waiting = vec![0u32; points];
        each_edge(graph, |from, to| {
            offsets[from as usize + 1] += 1;
            waiting[to as usize] += 1;
        });
        for p in 0..points {
            offsets[p + 1] += offsets[p];
        }
        // Each point's successors placed from its offset on, which then ends at the next
        // point's: shifted back one place after.
        let mut successors = vec![0u32; offsets[points] as usize];
        each_edge(graph, |from, to| {
            let at = &mut offsets[from as usize];
            successors[*at as usize] = to;
            *at += 1;
        });
        offsets.copy_within(0..points, 1);
        offsets[0] = 0;
        Replay {
            graph,
            offsets,
            successors,
            waiting,
        }
    }

    /// Every point evaluated; each node's end, in place of the values.
    fn run(mut self, scales: &Scales<impl Fn(u32) -> f64, impl Fn(usize) -> f64>) -> Vec<i64> {
        let points = self.waiting.len();
        // A point evaluated before its constraints (in a cycle) reads their measured times.
        let mut value: Vec<i64> = (0..points as u32).map(|p| self.measured(p)).collect();
        let mut done = vec![false; points];
        let mut ready: Vec<u32> = (0..points as u32)
            .filter(|&p| self.waiting[p as usize] == 0)
            .collect();
        let mut evaluated = 0;
        let mut left: Option<Vec<u32>> = None;
        loop {
            while let Some(p) = ready.pop() {
                value[p as usize] = self.evaluate(p, &value, scales);
                done[p as usize] = true;
                evaluated += 1;
                let (from, to) = (self.offsets[p as usize], self.offsets[p as usize + 1]);
                for &s in &self.successors[from as usize..to as usize] {
                    // A point of a cycle may have gone first (below).
                    if done[s as usize] {
                        continue;
                    }
                    self.waiting[s as usize] -= 1;
                    if self.waiting[s as usize] == 0 {
                        ready.push(s);
                    }
                }
            }
            if evaluated == points {
                break;
            }
            // Constraints in a cycle (clocks of two nodes that disagree, or a host wait that
            // waited for work another thread launched after it began): the earliest point left
            // goes first, on what is known. The points by measured time are sorted once.
            let order = left.get_or_insert_with(|| {
                let mut order: Vec<u32> =
                    (0..points as u32).filter(|&p| !done[p as usize]).collect();
                order.sort_unstable_by_key(|&p| (self.measured(p), p));
                order.reverse();
                order
            });
            while order.last().is_some_and(|&p| done[p as usize]) {
                order.pop();
            }
            let next = order.pop().expect("points left");
            self.waiting[next as usize] = 0;
            ready.push(next);
        }
        let n = self.graph.nodes.len();
        for i in 0..n {
            value[i] = value[2 * i + 1];
        }
        value.truncate(n);
        value.shrink_to_fit();
        value
    }

    /// A point's measured time.
    fn measured(&self, p: u32) -> i64 {
        let n = self.graph.nodes.len() as u32;
        let cpu = self.graph.cpu.len() as u32;
        match p {
            p if p < 2 * n && p.is_multiple_of(2) => self.graph.nodes[p as usize / 2].start,
            p if p < 2 * n => self.graph.nodes[p as usize / 2].end,
            p if p < 2 * n + cpu => self.graph.cpu[(p - 2 * n) as usize].moment(),
            p => {
                let x = &self.graph.exchanges[(p - 2 * n - cpu) as usize];
                self.graph.nodes[x.last as usize].start
            }
        }
    }

    fn evaluate(
        &self,
        p: u32,
        value: &[i64],
        scales: &Scales<impl Fn(u32) -> f64, impl Fn(usize) -> f64>,
    ) -> i64 {
        let g = self.graph;
        let n = g.nodes.len() as u32;
        let cpu = g.cpu.len() as u32;
        let scaled = |ns: i64, factor: f64| match ns > 0 {
            true => (ns as f64 * factor).round() as i64,
            false => ns,
        };
        if p < 2 * n && p.is_multiple_of(2) {
            return self.start(p / 2, value);
        }
        if p < 2 * n {
            let i = p / 2;
            let node = &g.nodes[i as usize];
            let start = value[2 * i as usize];
            let factor = (scales.scale)(i);
            // A collective's member, or a transfer's receiver, ends its transfer's time after
            // the last arrival; anything else (a sender too) its own time after its start.
            let end = match g.exchanges.get(node.exchange as usize) {
                Some(x) if x.sender != i => {
                    let last = 2 * n + cpu + node.exchange;
                    let arrived = g.nodes[x.last as usize].start;
                    value[last as usize] + scaled(node.end - arrived, factor)
                }
                _ => start + scaled(node.end - node.start, factor),
            };
            return end.max(start);
        }
        if p < 2 * n + cpu {
            let j = (p - 2 * n) as usize;
            let call = &g.cpu[j];
            let entry = match j.checked_sub(1).map(|b| &g.cpu[b]) {
                Some(before) if same_rank(before, call) => {
                    value[p as usize - 1]
                        + scaled(call.start - before.moment(), (scales.cpu_scale)(j))
                }
                _ => call.start,
            };
            return match call.waited {
                NONE => entry,
                w => {
                    let waited = g.nodes[w as usize];
                    entry.max(value[2 * w as usize + 1] + (call.end - waited.end).max(0))
                }
            };
        }
        let x = &g.exchanges[(p - 2 * n - cpu) as usize];
        x.members
            .iter()
            .map(|&m| value[2 * m as usize])
            .max()
            .unwrap_or(i64::MIN)
    }

    /// An operation's start: the latest of its constraints, each plus its lag.
    fn start(&self, i: u32, value: &[i64]) -> i64 {
        let g = self.graph;
        let node = &g.nodes[i as usize];
        let n = g.nodes.len();
        let s = node.start;
        let mut start = i64::MIN;
        let mut term = |binding: Binding, at: i64, now: i64, lag: i64| {
            let lag = match node.binding == binding {
                true => s - at,
                false => lag.min(s - at),
            };
            start = start.max(now + lag);
        };
        if node.prev != NONE {
            let p = node.prev as usize;
            term(Binding::Stream, g.nodes[p].end, value[2 * p + 1], 0);
        }
        if node.cross != NONE {
            let c = node.cross as usize;
            term(Binding::Cross, g.nodes[c].end, value[2 * c + 1], 0);
        }
        if node.launch != NONE {
            let call = &g.cpu[node.launch as usize];
            let now = value[2 * n + node.launch as usize];
            term(Binding::Launch, call.start, now, call.end - call.start);
        }
        match start {
            i64::MIN => s,
            start => start,
        }
    }
}

/// Every constraint of `graph`'s replay, (from, to) between [`Replay`]'s points: a node's start
/// after its stream's previous end, its cross-stream wait's end and its launch; its end after
/// its start and its exchange's last arrival; a call after its rank's previous call and, for a
/// host wait, the end it waited for; an exchange's last arrival after each member's start.
fn each_edge(graph: &Graph, mut edge: impl FnMut(u32, u32)) {
    let n = graph.nodes.len() as u32;
    let cpu = graph.cpu.len() as u32;
    for (i, node) in graph.nodes.iter().enumerate() {
        let (start, end) = (2 * i as u32, 2 * i as u32 + 1);
        for p in [node.prev, node.cross] {
            if p != NONE {
                edge(2 * p + 1, start);
            }
        }
        if node.launch != NONE {
            edge(2 * n + node.launch, start);
        }
        edge(start, end);
        if node.exchange != NONE {
            edge(2 * n + cpu + node.exchange, end);
        }
    }
    for (j, call) in graph.cpu.iter().enumerate() {
        let j = j as u32;
        if j > 0 && same_rank(&graph.cpu[j as usize - 1], call) {
            edge(2 * n + j - 1, 2 * n + j);
        }
        if call.waited != NONE {
            edge(2 * call.waited + 1, 2 * n + j);
        }
    }
    for (x, exchange) in graph.exchanges.iter().enumerate() {
        for &m in &exchange.members {
            edge(2 * m, 2 * n + cpu + x as u32);
        }
    }
}

fn same_rank(a: &CpuCall, b: &CpuCall) -> bool {
    a.rank == b.rank
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host wait that returned once an operation ended which another thread launched after
    /// the wait began: the operation's end, the wait, the launch and the operation's start
    /// constrain each other in a cycle.
    fn cycle() -> Graph {
        let call = |start, end, waited| CpuCall {
            rank: 0,
            thread: ThreadId(0),
            start,
            end,
            name: StringId::EMPTY,
            waited,
        };
        let node = Node {
            rank: 0,
            stream: StreamId(0),
            start: 20,
            end: 90,
            comm: false,
            label: 0,
            launch: 1,
            prev: NONE,
            cross: NONE,
            exchange: NONE,
            binding: Binding::Launch,
        };
        Graph {
            nodes: vec![node],
            cpu: vec![call(0, 100, 0), call(10, 15, NONE)],
            labels: vec!["gemm".into()],
            ..Graph::default()
        }
    }

    #[test]
    fn a_cycle_of_constraints_replays_unchanged_as_measured() {
        let graph = cycle();
        assert_eq!(graph.replay(|_| 1.0, |_| 1.0), vec![90]);
        // Twice as fast: the launch came where it did (its constraint, the wait, read as
        // measured), and the operation, starting at 20, takes 35 ns.
        assert_eq!(graph.replay(|_| 0.5, |_| 1.0), vec![55]);
    }
}
