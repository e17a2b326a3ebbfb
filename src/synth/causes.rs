//! What set each GPU operation's start as the simulator ran it, and each step's critical path
//! over those causes: the truth `critical-path` is tested against.
//!
//! The simulator knows what set every start: the launch that came late, the operation before
//! it on its stream, the other stream a `cudaStreamWaitEvent` made it wait for, the members of
//! its collective, the send its receive waited for; and what each host wait waited for. The
//! analysis infers the same from timestamps and correlation ids ([`Graph::build`]). The truth
//! is the analysis's definition of a path ([`walk`], which names each nanosecond) applied to
//! the simulator's own graph, so a test that compares the two checks the inference.

use super::sim::Schedule;
use crate::analysis::critical_path::{Category, Name, StepPath, Steps, walk};
use crate::analysis::graph::{self, Binding, Caller, CpuCall, Exchange, Graph, Link, NONE, Node};
use crate::model::{StreamId, StringId, ThreadId};
use indexmap::IndexSet;

/// An operation of a run: (rank, index into the rank's [`Schedule::ops`]).
pub type OpRef = (usize, usize);

/// What set an operation's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetBy {
    /// Its launch: the stream was free before the GPU could start it.
    Launch,
    /// The operation before it on its stream.
    Stream,
    /// An operation of another stream (index into the rank's operations) its stream waited for.
    Cross(usize),
}

/// One GPU operation as the simulator ran it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ran {
    /// Start and end, ns.
    pub span: (i64, i64),
    /// Its family, or a communication kernel's role.
    pub label: &'static str,
    /// Whether it is a communication kernel.
    pub comm: bool,
    /// Its launch (index into the rank's [`Schedule::calls`]).
    pub launch: usize,
    /// The simulator's number of its stream.
    pub stream: u32,
    /// What set its start.
    pub set_by: SetBy,
}

/// A CPU call of a rank that matters to the GPU: a launch, or a host wait and the operation
/// (index into the rank's operations) that ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostCall {
    /// Start and end, ns.
    pub span: (i64, i64),
    /// For a host wait, the operation it waited for.
    pub waited: Option<usize>,
}

/// The members of one collective, or a transfer's send and receive (`sender`: the send).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Members {
    /// Member operations.
    pub ops: Vec<OpRef>,
    /// A transfer's send.
    pub sender: Option<OpRef>,
}

/// One stream of a rank while the simulator runs: when it frees, and which operation freed it.
#[derive(Debug, Clone, Copy)]
pub struct Lane {
    /// The simulator's stream number.
    pub id: u32,
    /// When it is free, ns.
    pub free: i64,
    /// Its last operation.
    last: Option<usize>,
    /// The operation of another stream it was made to wait for since then, when that set `free`.
    waited: Option<usize>,
}

impl Lane {
    /// Stream `id`, free from the start.
    pub fn new(id: u32) -> Lane {
        Lane {
            id,
            free: 0,
            last: None,
            waited: None,
        }
    }

    /// When an operation the GPU could start at `ready` starts on it, and what set that.
    pub fn start(&self, ready: i64) -> (i64, SetBy) {
        match (self.waited, self.last) {
            (Some(op), _) if self.free >= ready => (self.free, SetBy::Cross(op)),
            (None, Some(_)) if self.free >= ready => (self.free, SetBy::Stream),
            _ => (ready, SetBy::Launch),
        }
    }

    /// Operation `op` runs on it until `end`.
    pub fn occupy(&mut self, op: usize, end: i64) {
        (self.free, self.last, self.waited) = (end, Some(op), None);
    }

    /// It waits for the work launched on `other` so far (`cudaStreamWaitEvent`).
    pub fn wait_for(&mut self, other: &Lane) {
        if other.free > self.free {
            self.free = other.free;
            self.waited = other.setter();
        }
    }

    /// The operation whose end is its `free`.
    pub fn setter(&self) -> Option<usize> {
        self.waited.or(self.last)
    }
}

/// The dependency graph of the simulated run: the operations and calls of every rank's
/// schedule with what truly set each start. Nodes are in the graph's order, (rank, stream,
/// start, end), so that the one before a node on its stream is the node before it; each launch
/// entry launches one operation, as [`Graph::build`] makes them.
fn graph(schedules: &[Schedule]) -> Graph {
    let (order, nodes_of) = graph_order(schedules);
    let node = |(r, i): OpRef| nodes_of[r][i];
    let mut labels: IndexSet<&str> = IndexSet::new();
    let mut graph = Graph::default();
    let mut crosses = Vec::new();
    for &(r, i) in &order {
        let ran = &schedules[r].ops[i];
        let binding = match ran.set_by {
            SetBy::Launch => Binding::Launch,
            SetBy::Stream => Binding::Stream,
            SetBy::Cross(op) => {
                crosses.push((graph.nodes.len() as u32, node((r, op))));
                Binding::Cross
            }
        };
        let lane = graph::Lane {
            rank: r as u32,
            stream: StreamId(ran.stream),
            first: graph.nodes.len() as u32,
        };
        let last = graph.lanes.last().map(|l| (l.rank, l.stream));
        if last != Some((lane.rank, lane.stream)) {
            graph.lanes.push(lane);
        }
        graph.nodes.push(Node {
            start: ran.span.0,
            end: ran.span.1,
            comm: ran.comm,
            label: labels.insert_full(ran.label).0 as u16,
            launch: NONE,
            binding,
        });
    }
    graph.set_crosses(crosses);
    for (r, schedule) in schedules.iter().enumerate() {
        // One caller per rank: rank r's is caller r.
        graph.callers.push(Caller {
            rank: r as u32,
            thread: ThreadId(0),
            name: StringId::EMPTY,
        });
        add_calls(&mut graph, (r, schedule), &node);
    }
    for members in schedules.iter().flat_map(|s| &s.exchanges) {
        // The last to arrive, as `collectives` names it: the latest start, the lowest rank.
        let last = members
            .ops
            .iter()
            .max_by_key(|&&(r, i)| (schedules[r].ops[i].span.0, std::cmp::Reverse(r)))
            .map_or(NONE, |&m| node(m));
        graph.add_exchange(Exchange {
            members: members.ops.iter().map(|&m| node(m)).collect(),
            last,
            sender: members.sender.map_or(NONE, node),
        });
    }
    graph.order_memberships();
    graph.labels = labels.into_iter().map(str::to_string).collect();
    graph
}

/// Every operation in the graph's order (each rank's by stream, start and end), and each
/// rank's operations' nodes.
fn graph_order(schedules: &[Schedule]) -> (Vec<OpRef>, Vec<Vec<u32>>) {
    let mut order: Vec<OpRef> = Vec::new();
    let mut nodes_of: Vec<Vec<u32>> = Vec::with_capacity(schedules.len());
    for (r, schedule) in schedules.iter().enumerate() {
        let mut ops: Vec<usize> = (0..schedule.ops.len()).collect();
        ops.sort_by_key(|&i| (schedule.ops[i].stream, schedule.ops[i].span, i));
        let mut node_of = vec![0; ops.len()];
        for &i in &ops {
            node_of[i] = order.len() as u32;
            order.push((r, i));
        }
        nodes_of.push(node_of);
    }
    (order, nodes_of)
}

/// Rank `r`'s calls: a host wait for its operation, a launch entry per launched operation (a
/// launch of none: one for nothing), each operation's launch set; `node` gives operations'
/// nodes.
fn add_calls(graph: &mut Graph, (r, schedule): (usize, &Schedule), node: &impl Fn(OpRef) -> u32) {
    let mut launched: Vec<Vec<u32>> = vec![Vec::new(); schedule.calls.len()];
    for (i, ran) in schedule.ops.iter().enumerate() {
        launched[ran.launch].push(node((r, i)));
    }
    for (call, ops) in schedule.calls.iter().zip(&mut launched) {
        ops.sort_unstable();
        let entry = |link| CpuCall::new(r as u32, call.span, link);
        if let Some(waited) = call.waited {
            graph.cpu.push(entry(Link::Wait(node((r, waited)))));
        } else if ops.is_empty() {
            graph.cpu.push(entry(Link::Launch(NONE)));
        }
        for &op in ops.iter() {
            graph.nodes[op as usize].launch = graph.cpu.len() as u32;
            graph.cpu.push(entry(Link::Launch(op)));
        }
    }
}

/// One part of a step's true critical path: its rank, category and name, and its time.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PathPart {
    /// Step index.
    pub step: usize,
    /// The step's time, ns.
    pub step_ns: i64,
    /// Its rank.
    pub rank: u32,
    /// `compute`, `comm`, `launch`, `host_sync` or `idle`.
    pub category: &'static str,
    /// The family, role or idle kind; empty for CPU calls (the analysis names them by NVTX).
    pub name: String,
    /// Its time on the path, ns.
    pub ns: i64,
}

/// Every step's critical path over the simulator's graph, by (step, rank, category, name).
pub fn critical_paths(schedules: &[Schedule]) -> Vec<PathPart> {
    let graph = graph(schedules);
    let ranges: Vec<Vec<(i64, i64)>> = schedules.iter().map(|s| s.steps.clone()).collect();
    let steps = Steps::new(&graph, &ranges);
    (0..steps.bounds.len())
        .flat_map(|k| parts(&graph, &walk(&graph, &steps, k)))
        .collect()
}

/// A path's parts.
fn parts(graph: &Graph, path: &StepPath) -> Vec<PathPart> {
    let text = |name: Name| match name {
        Name::Label(l) => graph.labels[l as usize].clone(),
        Name::Text(text) => text.to_string(),
        Name::Call(_) => String::new(),
    };
    let mut parts: Vec<PathPart> = Vec::new();
    for ((rank, category, name), ns) in path.parts() {
        let (category, name) = (Category::name(category), text(name));
        match parts.last_mut() {
            Some(p) if (p.rank, p.category, &p.name) == (rank, category, &name) => p.ns += ns,
            _ => parts.push(PathPart {
                step: path.step,
                step_ns: path.step_ns(),
                rank,
                category,
                name,
                ns,
            }),
        }
    }
    parts
}
