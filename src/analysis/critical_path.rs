//! The critical path of each step across ranks: the chain of operations and waits, on any
//! rank, that set the step's end, each nanosecond of the step attributed to what it was.
//!
//! A step `k` runs from the end of step `k - 1` (for the first step, the earliest rank's step
//! range start) to its end: the end of the last GPU operation launched inside any rank's
//! `k`-th step range ([`Steps`]). The path starts at that operation and walks back on the
//! [`Graph`]: an operation's own time is compute (by family) or communication (by role, from
//! its collective's last arrival on); a collective's time before its last arrival is not on
//! the path, which goes on from the member that arrived last, on its rank; before an
//! operation's start, the constraint that set it: the operation before it on its stream, the
//! other stream it waited for, its launch (the GPU waited for the CPU: `launch`, named by the
//! NVTX range around the call; a host wait before it: `host_sync`, then the operation waited
//! for). The time between a constraint and the start it set is idle: named for the constraint
//! when it is a latency (up to [`LATENCY_NS`]), `unexplained` when longer. Waiting for a peer
//! never appears on the path: the path follows the peer.

use super::IntervalSet;
use super::graph::{Binding, Graph, NONE};
use crate::classify::enclosing::{Candidate, innermost};
use crate::classify::{Activity, Rank, window};
use crate::model::{ProcessId, StringId, ThreadId};
use regex::Regex;
use std::collections::BTreeMap;

/// Gaps up to this long between a constraint and the start it set are named for the
/// constraint; longer ones are `unexplained`, ns.
pub const LATENCY_NS: i64 = 20_000;

/// What a stretch of the path was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// A compute kernel, copy or set running (named by family).
    Compute,
    /// A communication kernel's transfer (named by role).
    Comm,
    /// The GPU waiting for its launching thread (named by the NVTX range around the launch).
    Launch,
    /// The launching thread waiting in a host synchronization (named by the call).
    HostSync,
    /// Nothing the trace explains running (named by the latency or `unexplained`).
    Idle,
}

impl Category {
    /// Its name in the outputs.
    pub fn name(self) -> &'static str {
        match self {
            Category::Compute => "compute",
            Category::Comm => "comm",
            Category::Launch => "launch",
            Category::HostSync => "host_sync",
            Category::Idle => "idle",
        }
    }
}

/// What a stretch is named for, resolved to text by [`Names`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Name {
    /// A family or role ([`Graph::labels`]).
    Label(u32),
    /// A CPU call ([`Graph::cpu`]): a launch (named by its NVTX range) or a host wait.
    Call(u32),
    /// A fixed name.
    Text(&'static str),
}

/// One stretch of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stretch {
    /// The rank (index into the ranks of the graph).
    pub rank: u32,
    /// What it was.
    pub category: Category,
    /// What it is named for.
    pub name: Name,
    /// Start and end, ns.
    pub from: i64,
    /// End, ns.
    pub to: i64,
}

/// One step's critical path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepPath {
    /// The step's index, from 0.
    pub step: usize,
    /// Its start and end, ns.
    pub bounds: (i64, i64),
    /// The path's stretches, latest first.
    pub stretches: Vec<Stretch>,
    /// Where it crosses ranks: (the operation it leaves, the one on another rank it goes on
    /// from), latest first.
    pub crossings: Vec<(u32, u32)>,
}

impl StepPath {
    /// The step's time, ns.
    pub fn step_ns(&self) -> i64 {
        self.bounds.1 - self.bounds.0
    }

    /// The summed stretches, ns (the step's time when the walk accounted for all of it).
    pub fn path_ns(&self) -> i64 {
        self.stretches.iter().map(|s| s.to - s.from).sum()
    }

    /// The ranks on the path, in the order the path meets them from the step's end.
    pub fn ranks(&self) -> Vec<u32> {
        let mut ranks: Vec<u32> = Vec::new();
        for s in &self.stretches {
            if !ranks.contains(&s.rank) {
                ranks.push(s.rank);
            }
        }
        ranks
    }

    /// Time per (rank, category, name), ns.
    pub fn parts(&self) -> BTreeMap<(u32, Category, Name), i64> {
        let mut parts = BTreeMap::new();
        for s in &self.stretches {
            *parts.entry((s.rank, s.category, s.name)).or_default() += s.to - s.from;
        }
        parts
    }

    /// What the tables show of it, without a stretch per operation.
    pub fn summary(&self) -> PathSummary {
        PathSummary {
            step: self.step,
            step_ns: self.step_ns(),
            path_ns: self.path_ns(),
            parts: self.parts(),
            ranks: self.ranks(),
            crossings: self.crossings.clone(),
        }
    }
}

/// One step's critical path summed per rank, category and name ([`StepPath::summary`]): what
/// a run's every step keeps, where its stretches would hold one entry per operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathSummary {
    /// The step's index, from 0.
    pub step: usize,
    /// The step's time, ns.
    pub step_ns: i64,
    /// The summed stretches, ns.
    pub path_ns: i64,
    /// Time per (rank, category, name), ns.
    pub parts: BTreeMap<(u32, Category, Name), i64>,
    /// The ranks on the path, in the order the path meets them from the step's end.
    pub ranks: Vec<u32>,
    /// Where it crosses ranks ([`StepPath::crossings`]).
    pub crossings: Vec<(u32, u32)>,
}

impl PathSummary {
    /// Its parts, longest first (ties in (rank, category, name) order).
    pub fn longest_parts(&self) -> Vec<((u32, Category, Name), i64)> {
        let mut parts: Vec<_> = self.parts.iter().map(|(&key, &ns)| (key, ns)).collect();
        parts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        parts
    }
}

/// A run's steps on its graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steps {
    /// Each step's start and end, ns.
    pub bounds: Vec<(i64, i64)>,
    /// Each step's last operation (the one ending it), or [`NONE`] for a step without any.
    pub last: Vec<u32>,
    /// Each operation's step (or [`NONE`]) in runs of operations of one step: each run's
    /// first operation and step, in operation order (a stream's operations are in time order:
    /// a run per stream and step).
    runs: Vec<(u32, u32)>,
}

impl Steps {
    /// The steps of `graph` whose ranks ran step ranges `ranges` (each rank's, in order; as
    /// many steps as every rank has). An operation belongs to the step range its launch (else
    /// its start) lies in.
    pub fn new(graph: &Graph, ranges: &[Vec<(i64, i64)>]) -> Steps {
        let count = ranges.iter().map(Vec::len).min().unwrap_or(0);
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for (i, (n, rank)) in graph.nodes.iter().zip(graph.node_ranks()).enumerate() {
            let at = match n.launch {
                NONE => n.start,
                l => graph.cpu[l as usize].start,
            };
            let k = step_at(&ranges[rank as usize][..count], at).map_or(NONE, |k| k as u32);
            if runs.last().is_none_or(|run| run.1 != k) {
                runs.push((i as u32, k));
            }
        }
        runs.shrink_to_fit();
        let first = ranges.iter().filter_map(|r| r.first()).map(|r| r.0).min();
        let mut steps = Steps {
            bounds: Vec::with_capacity(count),
            last: vec![NONE; count],
            runs,
        };
        let ends = steps.ends(|i| graph.nodes[i].end, graph.nodes.len(), ranges);
        for (k, &(end, last)) in ends.iter().enumerate() {
            let start = match k {
                0 => first.unwrap_or(end),
                k => steps.bounds[k - 1].1,
            };
            steps.bounds.push((start, end.max(start)));
            steps.last[k] = last;
        }
        steps
    }

    /// Each step's end with the `n` operations ending at `end_of(i)` (the graph's, or a
    /// replay's), and the operation that ends it; a step without operations ends with its
    /// ranges.
    fn ends(
        &self,
        end_of: impl Fn(usize) -> i64,
        n: usize,
        ranges: &[Vec<(i64, i64)>],
    ) -> Vec<(i64, u32)> {
        let count = self.last.len();
        let mut ends: Vec<(i64, u32)> = (0..count)
            .map(|k| (ranges.iter().map(|r| r[k].1).max().unwrap_or(0), NONE))
            .collect();
        let mut seen = vec![false; count];
        for (operations, k) in self.run_ranges(n) {
            if k == NONE {
                continue;
            }
            let (end, last) = &mut ends[k as usize];
            for i in operations {
                let ends_at = end_of(i);
                if !seen[k as usize] || ends_at > *end {
                    (*end, *last) = (ends_at, i as u32);
                    seen[k as usize] = true;
                }
            }
        }
        ends
    }

    /// Each step's time with operations ending at `ends` (a replay's): from the previous
    /// step's end (the first step from its measured start).
    pub fn durations(&self, ends: &[i64], ranges: &[Vec<(i64, i64)>]) -> Vec<i64> {
        let mut start = self.bounds.first().map_or(0, |b| b.0);
        self.ends(|i| ends[i], ends.len(), ranges)
            .into_iter()
            .map(|(end, _)| {
                let end = end.max(start);
                let ns = end - start;
                start = end;
                ns
            })
            .collect()
    }

    /// The step of operation `node`, when it has one.
    pub fn of(&self, node: u32) -> Option<usize> {
        let run = self.runs.partition_point(|&(first, _)| first <= node);
        let k = self.runs[run.checked_sub(1)?].1;
        (k != NONE).then_some(k as usize)
    }

    /// Whether each of the `n` operations has a step: [`Steps::of`] for all at once.
    pub fn inside(&self, n: usize) -> Vec<bool> {
        let mut inside = vec![false; n];
        for (operations, k) in self.run_ranges(n) {
            inside[operations].fill(k != NONE);
        }
        inside
    }

    /// Each run's operations (of `n`) and step.
    fn run_ranges(&self, n: usize) -> impl Iterator<Item = (std::ops::Range<usize>, u32)> + '_ {
        self.runs.iter().enumerate().map(move |(r, &(first, k))| {
            let to = self.runs.get(r + 1).map_or(n, |next| next.0 as usize);
            (first as usize..to, k)
        })
    }

    /// The step whose range of rank `rank` (of `ranges`, those the steps were made of) holds
    /// time `t`, when one does.
    pub fn at(&self, ranges: &[Vec<(i64, i64)>], rank: u32, t: i64) -> Option<usize> {
        step_at(&ranges[rank as usize][..self.last.len()], t)
    }
}

/// The range of `own` (sorted, disjoint) that holds `t`.
fn step_at(own: &[(i64, i64)], t: i64) -> Option<usize> {
    let k = own.partition_point(|r| r.0 <= t).checked_sub(1)?;
    (t <= own[k].1).then_some(k)
}

/// Each rank's step ranges inside its window (`(process, window)`, in rank order): the NVTX
/// ranges `anchor` matches, else the default step ranges ([`window::steps`]); the window itself
/// when it holds none.
pub fn step_ranges(
    activity: &Activity,
    windows: &[(ProcessId, (i64, i64))],
    anchor: Option<&Regex>,
) -> Vec<Vec<(i64, i64)>> {
    windows
        .iter()
        .map(|&(process, bounds)| {
            let steps = window::steps(activity, process, bounds, anchor);
            match steps.is_empty() {
                true => vec![bounds],
                false => steps,
            }
        })
        .collect()
}

/// Per rank, merged intervals in order.
pub type Spans = Vec<Vec<(i64, i64)>>;

/// The time each rank is on a critical path, over every step of `steps`: per rank (index
/// into the graph's ranks), the merged intervals, in order; and every crossing of ranks.
pub fn on_path(graph: &Graph, steps: &Steps, ranks: usize) -> (Spans, Vec<(u32, u32)>) {
    let mut on: Spans = vec![Vec::new(); ranks];
    let mut crossings = Vec::new();
    for k in 0..steps.bounds.len() {
        let path = walk(graph, steps, k);
        for s in path.stretches {
            on[s.rank as usize].push((s.from, s.to));
        }
        crossings.extend(path.crossings);
    }
    let merged = on
        .into_iter()
        .map(|spans| IntervalSet::from_intervals(spans).spans().to_vec())
        .collect();
    (merged, crossings)
}

/// The critical path of step `k` of `steps` on `graph`.
pub fn walk(graph: &Graph, steps: &Steps, k: usize) -> StepPath {
    let (t0, end) = steps.bounds[k];
    let mut path = StepPath {
        step: k,
        bounds: (t0, end),
        stretches: Vec::new(),
        crossings: Vec::new(),
    };
    let mut add = |rank: u32, category: Category, name: Name, from: i64, to: i64| {
        let from = from.max(t0);
        if to > from {
            path.stretches.push(Stretch {
                rank,
                category,
                name,
                from,
                to,
            });
        }
    };
    let nodes = &graph.nodes;
    let mut crossings = Vec::new();
    let Some(mut i) = Some(steps.last[k]).filter(|&l| l != NONE) else {
        add(0, Category::Idle, Name::Text("no operation"), t0, end);
        return path;
    };
    let mut cursor = end;
    // Every turn moves the cursor back or to an earlier operation; a bound guards against
    // constraints that run in a circle (clocks of two nodes that disagree).
    for _ in 0..4 * nodes.len() + 8 {
        let node = nodes[i as usize];
        let rank = graph.lane(i).rank;
        let label = Name::Label(u32::from(node.label));
        let category = match node.comm {
            true => Category::Comm,
            false => Category::Compute,
        };
        // The operation's own time up to the cursor; a collective's from its last arrival.
        match graph.exchange(i).map(|x| &graph.exchanges[x as usize]) {
            Some(x) if x.sender != i && x.last != i => {
                let arrived = nodes[x.last as usize].start;
                if (node.start..cursor).contains(&arrived) {
                    add(rank, category, label, arrived, cursor);
                    if graph.lane(x.last).rank != rank {
                        crossings.push((i, x.last));
                    }
                    (i, cursor) = (x.last, arrived);
                    continue;
                }
                add(rank, category, label, node.start, cursor);
            }
            _ => add(rank, category, label, node.start, cursor),
        }
        cursor = node.start;
        if cursor <= t0 {
            break;
        }
        // What set its start.
        let idle = |latency: &'static str, gap: i64| match gap <= LATENCY_NS {
            true => Name::Text(latency),
            false => Name::Text("unexplained"),
        };
        let prev = graph.prev(i);
        match (node.binding, prev, graph.cross(i)) {
            (Binding::Stream, Some(prev), _) => {
                let before = nodes[prev as usize].end.min(cursor);
                let name = idle("queue", cursor - before);
                add(rank, Category::Idle, name, before, cursor);
                (i, cursor) = (prev, before);
            }
            (Binding::Cross, _, Some(cross)) => {
                let before = nodes[cross as usize].end.min(cursor);
                let name = idle("stream wait", cursor - before);
                add(rank, Category::Idle, name, before, cursor);
                (i, cursor) = (cross, before);
            }
            (Binding::Launch, ..) => {
                let call = graph.cpu[node.launch as usize];
                let floor = prev.map_or(t0, |p| nodes[p as usize].end.min(cursor));
                let issued = call.end.clamp(floor, cursor);
                let name = idle("launch latency", cursor - issued);
                add(rank, Category::Idle, name, issued, cursor);
                let launch = Name::Call(node.launch);
                match host_wait(graph, node.launch, floor) {
                    Some((w, waited)) => {
                        let woke = graph.cpu[w as usize].end.min(issued);
                        add(rank, Category::Launch, launch, woke, issued);
                        let until = nodes[waited as usize].end.min(woke);
                        add(rank, Category::HostSync, Name::Call(w), until, woke);
                        (i, cursor) = (waited, until);
                    }
                    None => {
                        add(rank, Category::Launch, launch, floor, issued);
                        let Some(prev) = prev else { break };
                        (i, cursor) = (prev, floor);
                    }
                }
            }
            _ => {
                let name = Name::Text("before the first operation");
                add(rank, Category::Idle, name, t0, cursor);
                break;
            }
        }
        if cursor <= t0 {
            break;
        }
    }
    path.crossings = crossings;
    // What a circle of constraints left, if anything.
    let covered = path.path_ns();
    let rank = path.stretches.last().map_or(0, |s| s.rank);
    let left = (end - t0) - covered;
    if left > 0 {
        let from = path.stretches.last().map_or(end, |s| s.from);
        path.stretches.push(Stretch {
            rank,
            category: Category::Idle,
            name: Name::Text("unresolved"),
            from: from - left,
            to: from,
        });
    }
    path
}

/// The host wait its rank returned from last before launch `launch` (index into
/// [`Graph::cpu`]) and after `floor`, if any, with the operation it waited for.
fn host_wait(graph: &Graph, launch: u32, floor: i64) -> Option<(u32, u32)> {
    let rank = graph.caller(&graph.cpu[launch as usize]).rank;
    (0..launch)
        .rev()
        .map(|j| (j, graph.cpu[j as usize]))
        .take_while(|(_, c)| graph.caller(c).rank == rank && c.end > floor)
        .find_map(|(j, c)| Some((j, c.waited()?)))
}

/// Names of paths' stretches: families and roles, the NVTX range around a launch (the
/// innermost on its thread; else the launch's API function), a host wait's function.
pub struct Names<'a> {
    graph: &'a Graph,
    activity: &'a Activity<'a>,
    /// The NVTX range text around each launch on the paths, when one encloses it.
    launches: BTreeMap<u32, String>,
}

impl<'a> Names<'a> {
    /// Names for the parts of `paths` on `graph`, of `ranks` in `activity`: every launch's
    /// range is found in one sweep per thread.
    pub fn new(
        graph: &'a Graph,
        activity: &'a Activity<'a>,
        ranks: &[Rank],
        paths: &[PathSummary],
    ) -> Names<'a> {
        let timeline = activity.timeline;
        let mut by_thread: BTreeMap<(u32, ThreadId), Vec<u32>> = BTreeMap::new();
        for &(_, category, name) in paths.iter().flat_map(|p| p.parts.keys()) {
            if let (Category::Launch, Name::Call(j)) = (category, name) {
                let caller = graph.caller(&graph.cpu[j as usize]);
                by_thread
                    .entry((caller.rank, caller.thread))
                    .or_default()
                    .push(j);
            }
        }
        let mut launches = BTreeMap::new();
        for ((rank, thread), calls) in by_thread {
            let process = ranks[rank as usize].process;
            let mut ranges: Vec<(Candidate, StringId)> = activity
                .nvtx(process)
                .filter(|e| e.kind.is_range() && e.thread == thread)
                .map(|e| {
                    let end = e.end.map_or(i64::MAX, |t| t.0);
                    (
                        Candidate {
                            start: e.start.0,
                            end,
                        },
                        e.text,
                    )
                })
                .collect();
            ranges.sort_by_key(|(c, _)| (c.start, c.end));
            let candidates: Vec<Candidate> = ranges.iter().map(|(c, _)| *c).collect();
            let times: Vec<i64> = calls.iter().map(|&j| graph.cpu[j as usize].start).collect();
            for (j, found) in calls.iter().zip(innermost(&candidates, &times)) {
                if let Some(r) = found {
                    launches.insert(*j, timeline.text(ranges[r].1).to_string());
                }
            }
        }
        Names {
            graph,
            activity,
            launches,
        }
    }

    /// The text of every name on `paths`.
    pub fn texts(&self, paths: &[PathSummary]) -> BTreeMap<Name, String> {
        let names = paths.iter().flat_map(|p| p.parts.keys().map(|k| k.2));
        names.map(|name| (name, self.text(name))).collect()
    }

    /// The text of `name`.
    pub fn text(&self, name: Name) -> String {
        match name {
            Name::Label(l) => self.graph.labels[l as usize].clone(),
            Name::Text(text) => text.to_string(),
            Name::Call(j) => match self.launches.get(&j) {
                Some(range) => range.clone(),
                None => {
                    let caller = self.graph.caller(&self.graph.cpu[j as usize]);
                    let api = self.activity.timeline.text(caller.name);
                    crate::model::split_api_version(api).0.to_string()
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::graph::{Binding, Lane, Node};
    use crate::model::StreamId;

    #[test]
    fn each_operation_is_in_the_step_its_start_lies_in() {
        let node = |start, end| Node {
            start,
            end,
            comm: false,
            label: 0,
            launch: NONE,
            binding: Binding::Nothing,
        };
        let lane = |rank, first| Lane {
            rank,
            stream: StreamId(1),
            first,
        };
        // Rank 0: two operations in step 0, one between the steps, one in step 1; rank 1: one
        // in each step.
        let mut graph = Graph::default();
        graph.nodes = vec![
            node(0, 10),
            node(20, 30),
            node(30, 33),
            node(40, 50),
            node(5, 15),
            node(45, 60),
        ];
        graph.lanes = vec![lane(0, 0), lane(1, 4)];
        let ranges = vec![vec![(0, 25), (35, 55)], vec![(0, 25), (35, 65)]];
        let steps = Steps::new(&graph, &ranges);
        let of: Vec<_> = (0..6).map(|i| steps.of(i)).collect();
        assert_eq!(of, vec![Some(0), Some(0), None, Some(1), Some(0), Some(1)]);
        let inside = steps.inside(6);
        assert_eq!(inside, of.iter().map(Option::is_some).collect::<Vec<_>>());
        // Each step ends with its operation that ended last; the next starts there.
        assert_eq!(steps.last, vec![1, 5]);
        assert_eq!(steps.bounds, vec![(0, 30), (30, 60)]);
    }
}
