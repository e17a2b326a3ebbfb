//! The replay of a graph with changed durations ([`Graph::replay`]): every operation's start
//! and end, and every call, evaluated in an order where each one's constraints come first.

use super::{Binding, CpuCall, Graph, NONE};

/// A replay's factors: on each operation's duration, and on the CPU time before each call.
pub(super) struct Scales<S, C> {
    pub(super) scale: S,
    pub(super) cpu_scale: C,
}

/// A replay's points: each node's start (2i) and end (2i + 1), each CPU call (2n + j), each
/// exchange's last arrival (2n + c + x); evaluated in an order where every point's
/// constraints come first.
pub(super) struct Replay<'g> {
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
    pub(super) fn new(graph: &'g Graph) -> Replay<'g> {
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
    pub(super) fn run(
        mut self,
        scales: &Scales<impl Fn(u32) -> f64, impl Fn(usize) -> f64>,
    ) -> Vec<i64> {
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
    use crate::analysis::graph::Node;
    use crate::model::{StreamId, StringId, ThreadId};

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
