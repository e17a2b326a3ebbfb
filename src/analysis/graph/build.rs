//! Building a graph from whatever reads the events: its operations in any order
//! ([`Operations`]), then the synchronization records and each rank's calls ([`Linking`]).

use super::{
    Binding, Caller, CpuCall, Graph, Lane, Link, NONE, Node, STREAM_WAIT_EVENT, WHOLE, Wait,
};
use crate::analysis::kernels::{Operation, each_operation, roles};
use crate::classify::families::{FamilyCache, MEMCPY_PEER};
use crate::classify::{Activity, Rank, RankStreams, RoleRules, streams};
use crate::hash::{FxBuildHasher, FxHashMap};
use crate::model::{ApiCall, ProcessId, StreamId, StringId, SyncEvent, ThreadId, Timeline};
use indexmap::IndexSet;

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
        let mut linking = operations.link(activity, (ranks, &classified), rules);
        for sync in &timeline.syncs {
            linking.sync(sync);
        }
        for (r, rank) in ranks.iter().enumerate() {
            for call in activity.api_calls(rank.process) {
                linking.call((r as u32, rank.process), call, timeline);
            }
        }
        linking.finish()
    }
}

/// A graph's operations, gathered in any order ([`Operations::add`]); [`Operations::link`]
/// orders them for the calls.
#[derive(Default)]
pub struct Operations {
    /// Each operation with its lane (index into `lanes`) and its launch's correlation id
    /// (what links it to its launch).
    nodes: Vec<(Node, u32, u32)>,
    /// Whether a role may name each operation (a kernel, a copy between GPUs).
    named_by_role: Vec<bool>,
    /// Each (rank, stream), in the order met.
    lanes: IndexSet<(u32, StreamId), FxBuildHasher>,
    labels: IndexSet<String, FxBuildHasher>,
}

impl Operations {
    /// Room for `n` operations.
    pub fn with_capacity(n: usize) -> Operations {
        Operations {
            nodes: Vec::with_capacity(n),
            named_by_role: Vec::with_capacity(n),
            ..Operations::default()
        }
    }

    /// Operation `op` of rank `rank` (index into the ranks given), of family (or
    /// communication role) `family`.
    pub fn add(&mut self, rank: u32, op: &Operation, family: &str) {
        let label = self.label(family);
        let node = Node {
            start: op.span.0,
            end: op.span.1.max(op.span.0),
            comm: op.comm,
            label,
            launch: NONE,
            binding: Binding::Nothing,
        };
        let lane = self.lanes.insert_full((rank, op.stream)).0 as u32;
        self.nodes.push((node, lane, op.correlation));
        (self.named_by_role).push(op.kernel.is_some() || family == MEMCPY_PEER);
    }

    /// The index of label `name`. Labels are families (from the rules) and roles (from the
    /// role table): past the 65,535th, they would share the last.
    fn label(&mut self, name: &str) -> u16 {
        let index = match self.labels.get_index_of(name) {
            Some(label) => label,
            None => self.labels.insert_full(name.to_string()).0,
        };
        u16::try_from(index).unwrap_or(u16::MAX)
    }

    /// Names the communication of operations added as if no stream carried any: each kernel
    /// and copy between GPUs that rank r's classification `classified[r]` (over the whole
    /// capture) holds is communication, named by its role, as [`each_operation`] names it.
    pub fn name_communication(&mut self, classified: &[RankStreams], rules: &RoleRules) {
        let roles: Vec<_> = classified.iter().map(|c| roles(c, rules)).collect();
        for i in 0..self.nodes.len() {
            let (node, lane, _) = self.nodes[i];
            let (rank, stream) = self.lanes[lane as usize];
            let role = roles[rank as usize].get(&(stream, node.start));
            if let Some(role) = role.filter(|_| self.named_by_role[i]) {
                let label = self.label(role);
                let node = &mut self.nodes[i].0;
                (node.comm, node.label) = (true, label);
            }
        }
    }

    /// The graph of these operations of `ranks`, ready for their calls: labels in name order,
    /// nodes in (rank, stream, start, end) order whatever order they came in, and the
    /// collectives and transfers matched over the ranks' streams `classified` with `rules` (on
    /// `activity`, whose communication kernels they are): the calls need none of these.
    pub fn link(
        self,
        activity: &Activity,
        (ranks, classified): (&[Rank], &[RankStreams]),
        rules: &RoleRules,
    ) -> Linking {
        let Operations {
            mut nodes,
            lanes,
            labels,
            ..
        } = self;
        // The labels some operation has, in name order; the lanes in (rank, stream) order.
        let mut used = vec![false; labels.len()];
        for (node, ..) in &nodes {
            used[node.label as usize] = true;
        }
        let mut label_order: Vec<usize> = (0..labels.len()).filter(|&l| used[l]).collect();
        label_order.sort_unstable_by(|&a, &b| labels[a].cmp(&labels[b]));
        let mut lane_order: Vec<usize> = (0..lanes.len()).collect();
        lane_order.sort_unstable_by_key(|&k| lanes[k]);
        let label_of = renumbering(&label_order, labels.len());
        let lane_of = renumbering(&lane_order, lanes.len());
        for (node, lane, _) in &mut nodes {
            node.label = label_of[node.label as usize] as u16;
            *lane = lane_of[*lane as usize];
        }
        crate::second_core::sort_by_key(&mut nodes, |&(n, lane, correlation)| {
            (lane, n.start, n.end, correlation, n.label, n.comm)
        });
        let keys: Vec<(u32, StreamId)> = lane_order.iter().map(|&k| lanes[k]).collect();
        let unlaunched = Unlaunched::new(&nodes, &keys, ranks.len());
        let lanes = lanes_of(&nodes, &keys);
        // In place: the correlation ids are in the chains now.
        let mut nodes: Vec<Node> = nodes.into_iter().map(|(node, ..)| node).collect();
        nodes.shrink_to_fit();
        let mut graph = Graph {
            nodes,
            lanes,
            labels: label_order.iter().map(|&i| labels[i].clone()).collect(),
            ..Graph::default()
        };
        graph.add_exchanges(activity, (ranks, classified), rules);
        let operations = graph.nodes.len();
        Linking {
            unlaunched,
            graph,
            waiting: FxHashMap::default(),
            kinds: FxHashMap::default(),
            // A launch per operation, and a few host waits.
            calls: Vec::with_capacity(operations + operations / 64),
            callers: Callers::default(),
            host_waits: Vec::new(),
            waits: vec![Vec::new(); ranks.len()],
        }
    }
}

/// Each old index's new one when the old ones in `order` take their places in it (of `len`;
/// one not in `order`: 0).
fn renumbering(order: &[usize], len: usize) -> Vec<u32> {
    let mut new = vec![0; len];
    for (i, &old) in order.iter().enumerate() {
        new[old] = i as u32;
    }
    new
}

/// The lanes of `nodes`, in order with each one's lane (index into `keys`, each lane's rank and
/// stream).
fn lanes_of(nodes: &[(Node, u32, u32)], keys: &[(u32, StreamId)]) -> Vec<Lane> {
    let mut lanes = Vec::with_capacity(keys.len());
    for (i, &(_, lane, _)) in nodes.iter().enumerate() {
        if lanes.len() == lane as usize {
            let (rank, stream) = keys[lane as usize];
            let first = i as u32;
            lanes.push(Lane {
                rank,
                stream,
                first,
            });
        }
    }
    lanes
}

/// A graph whose operations are in place, taking its ranks' synchronization records
/// ([`Linking::sync`]) and then their API calls ([`Linking::call`], each rank's in start
/// order), before [`Linking::finish`] binds every start.
pub struct Linking {
    graph: Graph,
    unlaunched: Unlaunched,
    /// The stream each stream wait made wait, by (process, correlation id): None for a
    /// stream that ran no GPU work.
    waiting: FxHashMap<(ProcessId, u32), Option<StreamId>>,
    /// Whether each API function is a stream wait, and whether a host wait.
    kinds: FxHashMap<StringId, (bool, bool)>,
    /// Launches and host waits.
    calls: Vec<CpuCall>,
    callers: Callers,
    /// The host waits among the calls, (call, rank), linked to nothing yet: what each waited
    /// for is found once the launches are in (the nodes by end take room the chains give
    /// back).
    host_waits: Vec<(u32, u32)>,
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
    /// returned had ended, found in [`Linking::finish`]).
    pub fn call(&mut self, (r, process): (u32, ProcessId), call: &ApiCall, timeline: &Timeline) {
        let mut launched = self.unlaunched.claim(r, call.correlation);
        let span = (call.start.0, call.end.0);
        while let Some(node) = launched {
            let caller = self.callers.index(r, call.thread, call.name);
            self.calls
                .push(CpuCall::new(caller, span, Link::Launch(node)));
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
        if sync {
            let caller = self.callers.index(r, call.thread, call.name);
            self.host_waits.push((self.calls.len() as u32, r));
            self.calls
                .push(CpuCall::new(caller, span, Link::Launch(NONE)));
        }
    }

    /// The graph: calls in (rank, start) order, and every start bound.
    pub fn finish(self) -> Graph {
        let Linking {
            mut graph,
            mut calls,
            callers,
            host_waits,
            mut waits,
            unlaunched,
            ..
        } = self;
        drop(unlaunched);
        let ends = graph.by_end();
        for (j, r) in host_waits {
            let call = &mut calls[j as usize];
            if let Some(waited) = ends.last_ending(&graph, r, call.end) {
                *call = CpuCall::new(call.caller, (call.start, call.end), Link::Wait(waited));
            }
        }
        // A wait for nothing (its rank's first operation ended after it) is no call of the
        // graph's; the calls stay in the order they came, which the sort finds.
        calls.retain(|c| c.launched().is_some() || c.waited().is_some());
        graph.callers = callers.all.into_iter().collect();
        calls.sort_unstable_by_key(|c| {
            let launched = c.launched().unwrap_or(NONE);
            let waited = c.waited().unwrap_or(NONE);
            let Caller { rank, thread, name } = graph.callers[c.caller as usize];
            (rank, c.start, launched, c.end, thread, name, waited)
        });
        for (j, call) in calls.iter().enumerate() {
            match call.launched() {
                None => graph.evidence.host_waits += 1,
                Some(node) => {
                    graph.nodes[node as usize].launch = j as u32;
                    graph.evidence.launches += 1;
                }
            }
        }
        calls.shrink_to_fit();
        graph.cpu = calls;
        for list in &mut waits {
            list.sort_unstable_by_key(|w| (w.at, w.stream));
        }
        graph.bind(&waits, &ends);
        graph
    }
}

/// Who made the calls, each once.
#[derive(Default)]
struct Callers {
    all: IndexSet<Caller, FxBuildHasher>,
    /// The last one asked for: a rank's thread calls one function many times in a row.
    last: Option<(Caller, u32)>,
}

impl Callers {
    /// The index of rank `rank`'s `thread` calling API function `name`.
    fn index(&mut self, rank: u32, thread: ThreadId, name: StringId) -> u32 {
        let caller = Caller { rank, thread, name };
        match self.last {
            Some((last, index)) if last == caller => index,
            _ => {
                let index = self.all.insert_full(caller).0 as u32;
                self.last = Some((caller, index));
                index
            }
        }
    }
}

/// The operations not linked to a launch yet, by (rank, correlation id): the first call of an
/// id launches every operation of it. Per rank a vector indexed by the id (ids are counters,
/// up to the rank's largest), those past [`Unlaunched::DENSE`] in a map; the operations of one
/// id in a chain.
struct Unlaunched {
    dense: Vec<Vec<u32>>,
    sparse: FxHashMap<(u32, u32), u32>,
    /// The next node of the same rank and id, for the nodes that have one (most ids launch one
    /// operation).
    next: FxHashMap<u32, u32>,
}

impl Unlaunched {
    /// Ids below this are kept in the vectors.
    const DENSE: u32 = 1 << 24;
    /// An id whose first call came.
    const CLAIMED: u32 = NONE - 1;

    /// The chains of `nodes`, each with its lane (index into `lanes`, (rank, stream)) and its
    /// launch's correlation id, of `ranks` ranks.
    fn new(nodes: &[(Node, u32, u32)], lanes: &[(u32, StreamId)], ranks: usize) -> Unlaunched {
        let mut dense: Vec<Vec<u32>> = vec![Vec::new(); ranks];
        for &(_, lane, id) in nodes.iter().filter(|&&(.., id)| id < Self::DENSE) {
            let slots = &mut dense[lanes[lane as usize].0 as usize];
            if id as usize >= slots.len() {
                slots.resize(id as usize + 1, NONE);
            }
        }
        let mut unlaunched = Unlaunched {
            dense,
            sparse: FxHashMap::default(),
            next: FxHashMap::default(),
        };
        for (i, &(_, lane, id)) in nodes.iter().enumerate().rev() {
            let rank = lanes[lane as usize].0;
            let head = match id < Self::DENSE {
                true => &mut unlaunched.dense[rank as usize][id as usize],
                false => (unlaunched.sparse.entry((rank, id))).or_insert(NONE),
            };
            let next = std::mem::replace(head, i as u32);
            if next != NONE {
                unlaunched.next.insert(i as u32, next);
            }
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
        self.next.get(&node).copied()
    }
}
