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
use crate::classify::layout;
use crate::classify::{Activity, Rank, RankStreams, RoleRules};
use crate::hash::FxHashMap;
use crate::model::{StreamId, StringId, ThreadId};
use replay::{Replay, Scales};
use std::ops::Range;

pub use build::{Linking, Operations};

mod build;
mod replay;

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

/// One GPU operation: 24 bytes, the graph's size is mostly theirs. Its rank and stream are
/// its lane's ([`Graph::lane`]: nodes are in (rank, stream) order); what it waited for on
/// another stream and the exchange it is a member of are rare, and kept beside the nodes
/// ([`Graph::cross`], [`Graph::exchange`]); the operation before it on its stream is the node
/// before it ([`Graph::prev`]).
#[derive(Debug, Clone, Copy)]
pub struct Node {
    /// Start, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// Whether it is a communication kernel.
    pub comm: bool,
    /// Its family, or a communication kernel's role (index into [`Graph::labels`]).
    pub label: u16,
    /// Its launch (index into [`Graph::cpu`]; each launch launches one node), or [`NONE`].
    pub launch: u32,
    /// What set its start.
    pub binding: Binding,
}

/// A stream of a rank: the nodes from `first` to the next lane's first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lane {
    /// Its rank (index into the ranks given).
    pub rank: u32,
    /// Its stream.
    pub stream: StreamId,
    /// Its first node.
    pub first: u32,
}

/// A CPU call that matters to the GPU: a launch of one operation, or a host wait for one.
/// 24 bytes, a graph holds one per launch: who made it is kept once per caller.
#[derive(Debug, Clone, Copy)]
pub struct CpuCall {
    /// Start, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// Who made it (index into [`Graph::callers`]).
    pub caller: u32,
    /// The operation it launched, or ([`CpuCall::WAIT`] set) the one it waited for; [`NONE`]
    /// for a launch of nothing the graph holds.
    link: u32,
}

/// What a CPU call is to the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// A launch of this operation ([`NONE`]: of nothing the graph holds).
    Launch(u32),
    /// A host wait that returned once this operation ended.
    Wait(u32),
}

impl CpuCall {
    /// A host wait's link, beside the operation's index (below `WAIT - 1`: a graph of 2^31
    /// operations would take 64 GiB).
    const WAIT: u32 = 1 << 31;

    /// A call by caller `caller` (index into [`Graph::callers`]) over `(start, end)` (an end
    /// before the start is the start).
    pub fn new(caller: u32, (start, end): (i64, i64), link: Link) -> CpuCall {
        CpuCall {
            start,
            end: end.max(start),
            caller,
            link: match link {
                Link::Launch(node) => node,
                Link::Wait(node) => node | CpuCall::WAIT,
            },
        }
    }

    /// The operation it launched, for a launch.
    pub fn launched(&self) -> Option<u32> {
        (self.link & CpuCall::WAIT == 0).then_some(self.link)
    }

    /// The operation it waited for, for a host wait.
    pub fn waited(&self) -> Option<u32> {
        (self.link != NONE && self.link & CpuCall::WAIT != 0).then_some(self.link & !CpuCall::WAIT)
    }

    /// When its thread went on: a launch's start (the next call's gap counts from it), a host
    /// wait's end.
    fn moment(&self) -> i64 {
        match self.waited() {
            None => self.start,
            Some(_) => self.end,
        }
    }
}

/// Who made CPU calls: a rank's thread calling one API function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Caller {
    /// Its rank.
    pub rank: u32,
    /// Its thread.
    pub thread: ThreadId,
    /// The API function.
    pub name: StringId,
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
    /// Each stream's nodes, by first node (and so by (rank, stream)).
    pub lanes: Vec<Lane>,
    /// Launches and host waits, by (rank, start).
    pub cpu: Vec<CpuCall>,
    /// Who made the calls.
    pub callers: Vec<Caller>,
    /// Collectives and transfers.
    pub exchanges: Vec<Exchange>,
    /// Family and role names.
    pub labels: Vec<String>,
    /// What it rests on.
    pub evidence: Evidence,
    /// The operation of another stream each operation bound by one waited for: (operation,
    /// waited for), by operation.
    crosses: Vec<(u32, u32)>,
    /// The exchange each member is a member of: (operation, exchange), by operation.
    memberships: Vec<(u32, u32)>,
}

impl Graph {
    /// Who made `call`.
    pub fn caller(&self, call: &CpuCall) -> Caller {
        self.callers[call.caller as usize]
    }

    /// The lane of operation `i` (index into [`Graph::lanes`]).
    pub fn lane_of(&self, i: u32) -> usize {
        self.lanes.partition_point(|l| l.first <= i) - 1
    }

    /// The lane of operation `i`: its rank and stream.
    pub fn lane(&self, i: u32) -> Lane {
        self.lanes[self.lane_of(i)]
    }

    /// The nodes of lane `k`.
    pub fn lane_nodes(&self, k: usize) -> Range<u32> {
        let end = self
            .lanes
            .get(k + 1)
            .map_or(self.nodes.len() as u32, |l| l.first);
        self.lanes[k].first..end
    }

    /// The nodes of rank `rank`.
    pub fn rank_nodes(&self, rank: u32) -> Range<u32> {
        let at = |rank| {
            let k = self.lanes.partition_point(|l| l.rank < rank);
            self.lanes
                .get(k)
                .map_or(self.nodes.len() as u32, |l| l.first)
        };
        at(rank)..at(rank + 1)
    }

    /// Each node's rank, in node order.
    pub fn node_ranks(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.lanes.len()).flat_map(|k| {
            let nodes = self.lane_nodes(k);
            std::iter::repeat_n(self.lanes[k].rank, nodes.len())
        })
    }

    /// The operation before operation `i` on its stream (nodes are in (rank, stream, start,
    /// end) order: the node before it, unless `i` is its lane's first).
    pub fn prev(&self, i: u32) -> Option<u32> {
        let before = i.checked_sub(1)?;
        let first = self.lanes.binary_search_by_key(&i, |l| l.first).is_ok();
        (!first).then_some(before)
    }

    /// The operation of another stream operation `i` waited for, when that set its start.
    pub fn cross(&self, i: u32) -> Option<u32> {
        if self.nodes[i as usize].binding != Binding::Cross {
            return None;
        }
        lookup(&self.crosses, i)
    }

    /// The collective or transfer operation `i` is a member of (index into
    /// [`Graph::exchanges`]; members are communication operations).
    pub fn exchange(&self, i: u32) -> Option<u32> {
        if !self.nodes[i as usize].comm {
            return None;
        }
        lookup(&self.memberships, i)
    }

    /// Sets what each operation bound by another stream waited for: `crosses` holds
    /// (operation, waited for) pairs, each operation's binding says [`Binding::Cross`].
    pub(crate) fn set_crosses(&mut self, mut crosses: Vec<(u32, u32)>) {
        crosses.sort_unstable();
        crosses.shrink_to_fit();
        self.crosses = crosses;
    }

    /// Adds a collective or transfer whose members are communication operations.
    pub(crate) fn add_exchange(&mut self, exchange: Exchange) {
        let id = self.exchanges.len() as u32;
        debug_assert!(
            exchange
                .members
                .iter()
                .all(|&m| self.nodes[m as usize].comm)
        );
        (self.memberships).extend(exchange.members.iter().map(|&m| (m, id)));
        self.exchanges.push(exchange);
    }

    /// Orders the exchanges' memberships once all are added; an operation matched into two
    /// belongs to the later.
    pub(crate) fn order_memberships(&mut self) {
        self.memberships.sort_unstable();
        self.memberships.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                earlier.1 = later.1;
            }
            same
        });
        self.memberships.shrink_to_fit();
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
        let mut index: FxHashMap<(u32, StreamId, i64), u32> = FxHashMap::default();
        for (k, &Lane { rank, stream, .. }) in self.lanes.iter().enumerate() {
            for i in self.lane_nodes(k) {
                let node = &self.nodes[i as usize];
                if node.comm {
                    index.insert((rank, stream, node.start), i);
                }
            }
        }
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
            match transfer {
                true => self.evidence.transfers += 1,
                false => self.evidence.collectives += 1,
            }
            self.add_exchange(Exchange {
                last: members[position.unwrap_or(0)],
                sender: if transfer { members[0] } else { NONE },
                members,
            });
        }
        self.order_memberships();
    }

    /// Each operation's stream wait (from the rank's `cudaStreamWaitEvent` calls `waits`, else
    /// from timing) and binding constraint; the two halves of the nodes on two cores.
    fn bind(&mut self, waits: &[Vec<Wait>], ends: &ByEnd) {
        let graph = &*self;
        let (low, high) = crate::second_core::halves(self.nodes.len(), |range| {
            let mut bindings = Vec::with_capacity(range.len());
            let mut crosses = Vec::new();
            let mut lane = graph.lanes.len();
            for i in range.start as u32..range.end as u32 {
                if lane == graph.lanes.len() || graph.lane_nodes(lane).end == i {
                    lane = graph.lane_of(i);
                }
                let (binding, cross) = graph.binding((i, lane), waits, ends);
                bindings.push(binding);
                crosses.extend(cross.map(|c| (i, c)));
            }
            (bindings, crosses)
        });
        let bindings = low.0.into_iter().chain(high.0);
        for (node, binding) in self.nodes.iter_mut().zip(bindings) {
            node.binding = binding;
        }
        let mut crosses = low.1;
        crosses.extend(high.1);
        for &(i, _) in &crosses {
            match waits[self.lane(i).rank as usize].is_empty() {
                true => self.evidence.timed_waits += 1,
                false => self.evidence.stream_waits += 1,
            }
        }
        self.set_crosses(crosses);
    }

    /// What set operation `i` (of lane `lane`)'s start, and the operation of another stream
    /// it waited for (from its rank's stream waits `waits`, else from timing with `ends`).
    fn binding(
        &self,
        (i, lane): (u32, usize),
        waits: &[Vec<Wait>],
        ends: &ByEnd,
    ) -> (Binding, Option<u32>) {
        let node = self.nodes[i as usize];
        let prev = (i > self.lanes[lane].first).then(|| i - 1);
        let stream = prev.map(|p| self.nodes[p as usize].end.min(node.start));
        let launch = match node.launch {
            NONE => None,
            l => Some(self.cpu[l as usize].start.min(node.start)),
        };
        let floor = stream.max(launch).unwrap_or(i64::MIN);
        let rank_waits = &waits[self.lanes[lane].rank as usize];
        let cross = match rank_waits.is_empty() {
            true => ends.waited_for(self, (i, lane), floor),
            false => self.stream_wait((i, lane, prev), rank_waits),
        };
        let cross = cross.filter(|&c| self.nodes[c as usize].end > floor);
        let binding = match (cross, stream, launch) {
            (Some(_), ..) => Binding::Cross,
            (None, Some(s), Some(l)) if l > s => Binding::Launch,
            (None, Some(_), _) => Binding::Stream,
            (None, None, Some(_)) => Binding::Launch,
            (None, None, None) => Binding::Nothing,
        };
        (binding, cross)
    }

    /// What operation `i` (of lane `lane`, after `prev` on its stream) waited for on another
    /// stream: when its rank called `cudaStreamWaitEvent` for its stream (or for an unknown
    /// one) after the stream's previous launch and before this launch, the work launched on
    /// the rank's other streams before that wait, each stream's last operation; of those, the
    /// one that ended last before operation `i` started.
    fn stream_wait(
        &self,
        (i, lane, prev): (u32, usize, Option<u32>),
        waits: &[Wait],
    ) -> Option<u32> {
        let node = &self.nodes[i as usize];
        let Lane { rank, stream, .. } = self.lanes[lane];
        let call = self.cpu.get(node.launch as usize)?;
        let launched = |n: &Node| match n.launch {
            NONE => n.start,
            l => self.cpu[l as usize].start,
        };
        let after_on_stream = prev.map_or(i64::MIN, |p| launched(&self.nodes[p as usize]));
        let at = waits.partition_point(|w| w.at < call.start);
        let wait = waits[..at]
            .iter()
            .rev()
            .take_while(|w| w.at > after_on_stream)
            .find(|w| w.stream.is_none_or(|s| s == Some(stream)))?
            .at;
        // The rank's other streams (the lanes are in (rank, stream) order).
        let first = self.lanes.partition_point(|l| l.rank < rank);
        let last = self.lanes.partition_point(|l| l.rank <= rank);
        (first..last)
            .filter(|&k| k != lane)
            .filter_map(|k| {
                // A stream runs its operations in launch order: the last launched before the
                // wait is found by bisection.
                let Range {
                    start: from,
                    end: to,
                } = self.lane_nodes(k);
                let on_stream = &self.nodes[from as usize..to as usize];
                let before = on_stream.partition_point(|n| launched(n) < wait) as u32;
                (before > 0).then(|| from + before - 1)
            })
            .filter(|&i| self.nodes[i as usize].end <= node.start)
            .max_by_key(|&i| (self.nodes[i as usize].end, i))
    }

    /// The nodes of each rank ordered by end.
    fn by_end(&self) -> ByEnd {
        let mut order: Vec<u32> = (0..self.nodes.len() as u32).collect();
        let mut k = 0;
        while k < self.lanes.len() {
            // A rank's nodes are one range, and take the same range of the order.
            let nodes = self.rank_nodes(self.lanes[k].rank);
            // Stable, ties in index order: each stream's nodes are a run already in end order
            // (mostly), which the merge sort finds and merges.
            let of_rank = &mut order[nodes.start as usize..nodes.end as usize];
            of_rank.sort_by_key(|&i| self.nodes[i as usize].end);
            k = self.lanes.partition_point(|l| l.first < nodes.end);
        }
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

/// The value paired with `key` in `pairs` (sorted by key).
fn lookup(pairs: &[(u32, u32)], key: u32) -> Option<u32> {
    let at = pairs.partition_point(|&(k, _)| k < key);
    pairs.get(at).filter(|&&(k, _)| k == key).map(|&(_, v)| v)
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

/// Node indices ordered by (rank, end): each rank's take its nodes' range.
struct ByEnd(Vec<u32>);

impl ByEnd {
    /// Where rank `rank`'s nodes ending at or before `t` stop, in `graph`.
    fn upto(&self, graph: &Graph, rank: u32, t: i64) -> usize {
        let nodes = graph.rank_nodes(rank);
        let of_rank = &self.0[nodes.start as usize..nodes.end as usize];
        nodes.start as usize + of_rank.partition_point(|&i| graph.nodes[i as usize].end <= t)
    }

    /// The operation of `rank` that ended last at or before `t`, in `graph`.
    fn last_ending(&self, graph: &Graph, rank: u32, t: i64) -> Option<u32> {
        let at = self.upto(graph, rank, t);
        (at > graph.rank_nodes(rank).start as usize).then(|| self.0[at - 1])
    }

    /// The operation of another stream of operation `i`'s rank (`i` of lane `lane`) that
    /// ended last at most [`CROSS_STREAM_NS`] before `i` started and after `floor`.
    fn waited_for(&self, graph: &Graph, (i, lane): (u32, usize), floor: i64) -> Option<u32> {
        let node = &graph.nodes[i as usize];
        let rank = graph.lanes[lane].rank;
        let (from, at) = (
            graph.rank_nodes(rank).start,
            self.upto(graph, rank, node.start),
        );
        let own = graph.lane_nodes(lane);
        let earliest = floor.max(node.start - CROSS_STREAM_NS);
        self.0[from as usize..at]
            .iter()
            .rev()
            .take_while(|&&j| graph.nodes[j as usize].end > earliest)
            .find(|&j| !own.contains(j))
            .copied()
    }
}

// A graph holds a node per GPU operation and a call per launch: their sizes are its size.
const _: () = assert!(std::mem::size_of::<Node>() == 24);
const _: () = assert!(std::mem::size_of::<CpuCall>() == 24);

#[cfg(test)]
mod tests {
    use super::*;

    fn node((start, end): (i64, i64), comm: bool) -> Node {
        Node {
            start,
            end,
            comm,
            label: 0,
            launch: NONE,
            binding: Binding::Nothing,
        }
    }

    /// Lanes of (rank, stream, first node).
    fn lanes(lanes: &[(u32, u32, u32)]) -> Vec<Lane> {
        let lane = |&(rank, stream, first)| Lane {
            rank,
            stream: StreamId(stream),
            first,
        };
        lanes.iter().map(lane).collect()
    }

    #[test]
    fn a_call_links_the_operation_it_launched_or_waited_for() {
        let call = |link| CpuCall::new(0, (10, 5), link);
        let launch = call(Link::Launch(7));
        assert_eq!((launch.launched(), launch.waited()), (Some(7), None));
        assert_eq!((launch.end, launch.moment()), (10, 10));
        let wait = call(Link::Wait(7));
        assert_eq!((wait.launched(), wait.waited()), (None, Some(7)));
        let nothing = call(Link::Launch(NONE));
        assert_eq!((nothing.launched(), nothing.waited()), (None, None));
        let last = call(Link::Wait(CpuCall::WAIT - 2));
        assert_eq!(
            (last.launched(), last.waited()),
            (None, Some(CpuCall::WAIT - 2))
        );
    }

    #[test]
    fn the_operation_before_on_a_stream_is_the_node_before_on_it() {
        let graph = Graph {
            nodes: vec![
                node((0, 5), false),
                node((5, 9), false),
                node((1, 3), false),
                node((4, 6), false),
                node((7, 8), false),
            ],
            lanes: lanes(&[(0, 1, 0), (0, 2, 2), (2, 2, 3)]),
            ..Graph::default()
        };
        let prevs: Vec<_> = (0..5).map(|i| graph.prev(i)).collect();
        assert_eq!(prevs, vec![None, Some(0), None, None, Some(3)]);
        let lanes: Vec<_> = (0..5).map(|i| graph.lane_of(i)).collect();
        assert_eq!(lanes, vec![0, 0, 1, 2, 2]);
        assert_eq!(graph.node_ranks().collect::<Vec<_>>(), vec![0, 0, 0, 2, 2]);
        // Rank 1 has no operation: its range is empty, where rank 2's begins.
        let ranks: Vec<_> = (0..4).map(|r| graph.rank_nodes(r)).collect();
        assert_eq!(ranks, vec![0..3, 3..3, 3..5, 5..5]);
        assert_eq!((graph.lane_nodes(1), graph.lane_nodes(2)), (2..3, 3..5));
    }

    #[test]
    fn each_rank_is_ordered_by_end_in_its_own_range() {
        let graph = Graph {
            nodes: vec![
                node((0, 9), false),
                node((1, 4), false),
                node((2, 6), false),
                node((0, 3), false),
            ],
            lanes: lanes(&[(0, 1, 0), (0, 2, 1), (1, 1, 3)]),
            ..Graph::default()
        };
        let ends = graph.by_end();
        assert_eq!(ends.0, vec![1, 2, 0, 3]);
        assert_eq!(ends.last_ending(&graph, 0, 5), Some(1));
        assert_eq!(ends.last_ending(&graph, 0, 3), None);
        assert_eq!(ends.last_ending(&graph, 1, 3), Some(3));
        // Operation 2 (rank 0, stream 2) starting at 2 after operation 1 there: of rank 0's
        // other streams, nothing ended by then; operation 0 would have, at 9, for a start at
        // 10 (within CROSS_STREAM_NS).
        assert_eq!(ends.waited_for(&graph, (2, 1), i64::MIN), None);
        let late = Graph {
            nodes: vec![node((0, 9), false), node((10, 12), false)],
            lanes: lanes(&[(0, 1, 0), (0, 2, 1)]),
            ..Graph::default()
        };
        let ends = late.by_end();
        assert_eq!(ends.waited_for(&late, (1, 1), i64::MIN), Some(0));
        assert_eq!(ends.waited_for(&late, (1, 1), 9), None);
    }

    #[test]
    fn an_operation_matched_into_two_exchanges_belongs_to_the_later() {
        let mut graph = Graph {
            nodes: vec![
                node((0, 5), true),
                node((5, 9), false),
                node((0, 5), true),
                node((5, 9), true),
            ],
            lanes: lanes(&[(0, 0, 0), (1, 1, 2)]),
            ..Graph::default()
        };
        let exchange = |members: Vec<u32>| Exchange {
            last: members[0],
            sender: NONE,
            members,
        };
        graph.add_exchange(exchange(vec![3, 0]));
        graph.add_exchange(exchange(vec![2, 0]));
        graph.order_memberships();
        let of: Vec<_> = (0..4).map(|i| graph.exchange(i)).collect();
        assert_eq!(of, vec![Some(1), None, Some(1), Some(0)]);
        graph.nodes[1].binding = Binding::Cross;
        graph.set_crosses(vec![(1, 2)]);
        assert_eq!((graph.cross(0), graph.cross(1)), (None, Some(2)));
    }
}
