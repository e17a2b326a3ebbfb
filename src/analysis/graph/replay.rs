//! The replay of a graph with changed durations ([`Graph::replay`]): every operation's start
//! and end, and every call, evaluated in an order where each one's constraints come first.

use super::{Binding, CpuCall, Graph, NONE};
use crate::bits::Bits;

/// A replay's factors: on each operation's duration, and on the CPU time before each call.
pub(super) struct Scales<S, C> {
    pub(super) scale: S,
    pub(super) cpu_scale: C,
}

/// A replay's points: each node's start (2i) and end (2i + 1), each CPU call (2n + j), each
/// exchange's last arrival (2n + c + x); evaluated in an order where every point's
/// constraints come first. Most constraints follow from the graph's order (a node's end after
/// its start, a stream's next start after its end, a rank's next call after its call, a
/// launched start after its launch, an exchange's members' ends after its last arrival); the
/// others are listed.
pub(super) struct Replay<'g> {
    graph: &'g Graph,
    /// The constraints the order does not give, (from, to) sorted: a stream wait's, a host
    /// wait's, an exchange's last arrival after each member's start.
    listed: Vec<(u32, u32)>,
    /// The points with a listed constraint after them.
    listing: Bits,
    /// The nodes first on their lane (no operation before them on their stream):
    /// [`Graph::prev`] in a bit.
    firsts: Bits,
}

impl<'g> Replay<'g> {
    /// The constraints of `graph`'s points that its order does not give, listed.
    pub(super) fn new(graph: &'g Graph) -> Replay<'g> {
        let n = graph.nodes.len() as u32;
        let cpu = graph.cpu.len() as u32;
        let mut listed = Vec::new();
        for i in 0..n {
            if let Some(cross) = graph.cross(i) {
                listed.push((2 * cross + 1, 2 * i));
            }
        }
        for (j, call) in graph.cpu.iter().enumerate() {
            if let Some(waited) = call.waited() {
                listed.push((2 * waited + 1, 2 * n + j as u32));
            }
        }
        for (x, exchange) in graph.exchanges.iter().enumerate() {
            for &m in &exchange.members {
                listed.push((2 * m, 2 * n + cpu + x as u32));
            }
        }
        listed.sort_unstable();
        let mut listing = Bits::default();
        for &(from, _) in &listed {
            listing.insert(from);
        }
        let mut firsts = Bits::default();
        for lane in &graph.lanes {
            firsts.insert(lane.first);
        }
        Replay {
            graph,
            listed,
            listing,
            firsts,
        }
    }

    /// The operation before operation `i` on its stream ([`Graph::prev`]).
    fn prev(&self, i: u32) -> Option<u32> {
        (!self.firsts.contains(i)).then(|| i - 1)
    }

    /// Hands `each` every point that waits for point `p`.
    fn successors(&self, p: u32, mut each: impl FnMut(u32)) {
        let g = self.graph;
        let n = g.nodes.len() as u32;
        let cpu = g.cpu.len() as u32;
        if p < 2 * n && p.is_multiple_of(2) {
            each(p + 1);
        } else if p < 2 * n {
            let next = p.div_ceil(2);
            if next < n && self.prev(next) == Some(p / 2) {
                each(2 * next);
            }
        } else if p < 2 * n + cpu {
            let j = (p - 2 * n) as usize;
            if g.cpu
                .get(j + 1)
                .is_some_and(|next| same_rank(g, &g.cpu[j], next))
            {
                each(p + 1);
            }
            if let Some(launched) = g.cpu[j].launched() {
                each(2 * launched);
            }
        } else {
            let x = p - 2 * n - cpu;
            for &m in &g.exchanges[x as usize].members {
                if g.exchange(m) == Some(x) {
                    each(2 * m + 1);
                }
            }
        }
        if !self.listing.contains(p) {
            return;
        }
        let from = self.listed.partition_point(|&(f, _)| f < p);
        for &(_, to) in self.listed[from..].iter().take_while(|&&(f, _)| f == p) {
            each(to);
        }
    }

    /// Every point evaluated; each node's end, in place of the values.
    pub(super) fn run(
        self,
        scales: &Scales<impl Fn(u32) -> f64, impl Fn(usize) -> f64>,
    ) -> Vec<i64> {
        let g = self.graph;
        let (n, cpu) = (g.nodes.len() as u32, g.cpu.len() as u32);
        let points = 2 * g.nodes.len() + g.cpu.len() + g.exchanges.len();
        let mut waiting = Counts::new(points, g.exchanges.len());
        for p in 0..points as u32 {
            self.successors(p, |s| waiting.set(s, waiting.get(s) + 1));
        }
        let mut values = Values::new(&self);
        let mut ready: Vec<u32> = (0..points as u32)
            .filter(|&p| waiting.get(p) == 0)
            .collect();
        let mut evaluated = 0;
        let mut left: Option<Vec<u32>> = None;
        loop {
            while let Some(p) = ready.pop() {
                let value = self.evaluate(p, (&values, &waiting), scales);
                values.set(p, value, &waiting);
                waiting.set(p, Counts::DONE);
                evaluated += 1;
                self.successors(p, |s| {
                    // An exchange keeps its members' latest start as they are evaluated.
                    if s >= 2 * n + cpu && p < 2 * n && p.is_multiple_of(2) {
                        values.arrive(s - 2 * n - cpu, value);
                    }
                    // A point of a cycle may have gone first (below).
                    let count = waiting.get(s);
                    if count == Counts::DONE {
                        return;
                    }
                    waiting.set(s, count - 1);
                    if count == 1 {
                        ready.push(s);
                    }
                });
            }
            if evaluated == points {
                break;
            }
            // Constraints in a cycle (clocks of two nodes that disagree, or a host wait that
            // waited for work another thread launched after it began): the earliest point left
            // goes first, on what is known. The points by measured time are sorted once.
            let order = left.get_or_insert_with(|| {
                let mut order: Vec<u32> = (0..points as u32)
                    .filter(|&p| waiting.get(p) != Counts::DONE)
                    .collect();
                order.sort_unstable_by_key(|&p| (self.measured(p), p));
                order.reverse();
                order
            });
            while order
                .last()
                .is_some_and(|&p| waiting.get(p) == Counts::DONE)
            {
                order.pop();
            }
            let next = order.pop().expect("points left");
            waiting.set(next, 0);
            ready.push(next);
        }
        values.ends()
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

    /// Point `p`'s value: from its constraints' values, those not evaluated yet (in a cycle)
    /// as measured.
    fn evaluate(
        &self,
        p: u32,
        (values, waiting): (&Values, &Counts),
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
            return self.start(p / 2, (values, waiting));
        }
        if p < 2 * n {
            let i = p / 2;
            let node = &g.nodes[i as usize];
            let start = values.start(i);
            let factor = (scales.scale)(i);
            // A collective's member, or a transfer's receiver, ends its transfer's time after
            // the last arrival; anything else (a sender too) its own time after its start.
            let exchange = g.exchange(i);
            let end = match exchange.map(|x| (x, &g.exchanges[x as usize])) {
                Some((exchange, x)) if x.sender != i => {
                    let arrived = g.nodes[x.last as usize].start;
                    values.exchange(exchange) + scaled(node.end - arrived, factor)
                }
                _ => start + scaled(node.end - node.start, factor),
            };
            return end.max(start);
        }
        if p < 2 * n + cpu {
            let j = (p - 2 * n) as usize;
            let call = &g.cpu[j];
            let entry = match j.checked_sub(1).map(|b| &g.cpu[b]) {
                Some(before) if same_rank(g, before, call) => {
                    values.call(j - 1) + scaled(call.start - before.moment(), (scales.cpu_scale)(j))
                }
                _ => call.start,
            };
            return match call.waited() {
                None => entry,
                Some(w) => {
                    let waited = g.nodes[w as usize];
                    entry.max(values.end(w, waiting) + (call.end - waited.end).max(0))
                }
            };
        }
        let x = p - 2 * n - cpu;
        values.last_arrival(x, waiting)
    }

    /// An operation's start: the latest of its constraints, each plus its lag.
    fn start(&self, i: u32, (values, waiting): (&Values, &Counts)) -> i64 {
        let g = self.graph;
        let node = &g.nodes[i as usize];
        let s = node.start;
        let mut start = i64::MIN;
        let mut term = |binding: Binding, at: i64, now: i64, lag: i64| {
            let lag = match node.binding == binding {
                true => s - at,
                false => lag.min(s - at),
            };
            start = start.max(now + lag);
        };
        if let Some(p) = self.prev(i) {
            term(
                Binding::Stream,
                g.nodes[p as usize].end,
                values.end(p, waiting),
                0,
            );
        }
        if let Some(c) = g.cross(i) {
            term(
                Binding::Cross,
                g.nodes[c as usize].end,
                values.end(c, waiting),
                0,
            );
        }
        if node.launch != NONE {
            let call = &g.cpu[node.launch as usize];
            let now = values.call(node.launch as usize);
            term(Binding::Launch, call.start, now, call.end - call.start);
        }
        match start {
            i64::MIN => s,
            start => start,
        }
    }
}

/// A replay's values, a point not yet evaluated read as measured: one slot per operation (its
/// start's value until its end is evaluated, then its end's: an end reads its start when it
/// is evaluated, an exchange its members' starts as they are), one per call and one per
/// exchange; and per exchange, the latest start of its members evaluated so far.
struct Values<'g> {
    graph: &'g Graph,
    slots: Vec<i64>,
    arrived: Vec<i64>,
}

impl<'g> Values<'g> {
    /// Every point of `replay` as measured.
    fn new(replay: &Replay<'g>) -> Values<'g> {
        let graph = replay.graph;
        let n = graph.nodes.len() as u32;
        let points = 2 * n + (graph.cpu.len() + graph.exchanges.len()) as u32;
        // The operations' starts, then the calls and exchanges (the points after them).
        let starts = (0..n).map(|i| replay.measured(2 * i));
        let rest = (2 * n..points).map(|p| replay.measured(p));
        Values {
            graph,
            slots: starts.chain(rest).collect(),
            arrived: vec![i64::MIN; graph.exchanges.len()],
        }
    }

    /// Operation `i`'s start, asked while its end is not evaluated.
    fn start(&self, i: u32) -> i64 {
        self.slots[i as usize]
    }

    /// Operation `i`'s end.
    fn end(&self, i: u32, waiting: &Counts) -> i64 {
        match waiting.get(2 * i + 1) == Counts::DONE {
            true => self.slots[i as usize],
            false => self.graph.nodes[i as usize].end,
        }
    }

    /// Call `j`'s value.
    fn call(&self, j: usize) -> i64 {
        self.slots[self.graph.nodes.len() + j]
    }

    /// Exchange `x`'s last arrival.
    fn exchange(&self, x: u32) -> i64 {
        self.slots[self.graph.nodes.len() + self.graph.cpu.len() + x as usize]
    }

    /// Exchange `x`'s last arrival, evaluated: its latest member's start, those not evaluated
    /// as measured.
    fn last_arrival(&self, x: u32, waiting: &Counts) -> i64 {
        let g = self.graph;
        let waited = (g.exchanges[x as usize].members.iter())
            .filter(|&&m| waiting.get(2 * m) != Counts::DONE)
            .map(|&m| g.nodes[m as usize].start);
        waited.fold(self.arrived[x as usize], i64::max)
    }

    /// A member of exchange `x` starts at `start`, evaluated.
    fn arrive(&mut self, x: u32, start: i64) {
        let arrived = &mut self.arrived[x as usize];
        *arrived = (*arrived).max(start);
    }

    /// Point `p` (of the replay's numbering) evaluated to `value`.
    fn set(&mut self, p: u32, value: i64, waiting: &Counts) {
        let n = self.graph.nodes.len() as u32;
        let slot = match p {
            p if p < 2 * n && p.is_multiple_of(2) && waiting.get(p + 1) == Counts::DONE => return,
            p if p < 2 * n => p / 2,
            p => p - n,
        };
        self.slots[slot as usize] = value;
    }

    /// Each operation's end, every point evaluated.
    fn ends(self) -> Vec<i64> {
        let mut slots = self.slots;
        slots.truncate(self.graph.nodes.len());
        slots.shrink_to_fit();
        slots
    }
}

/// Each point's constraints not yet evaluated ([`Counts::DONE`] once it is evaluated): a byte
/// for a node's start or end and for a call, which have three at most (the node or call
/// before it, its launch or the operation a host wait waited for, a stream wait or its
/// exchange), a word for an exchange's last arrival (one per member): the points are in that
/// order.
struct Counts {
    few: Vec<u8>,
    many: Vec<u32>,
}

impl Counts {
    /// A point's count once it is evaluated.
    const DONE: u32 = u32::MAX;

    /// No constraint yet for any of `points` points, the last `exchanges` of them exchanges'.
    fn new(points: usize, exchanges: usize) -> Counts {
        Counts {
            few: vec![0; points - exchanges],
            many: vec![0; exchanges],
        }
    }

    /// Point `p`'s count.
    fn get(&self, p: u32) -> u32 {
        match self.few.get(p as usize) {
            Some(&u8::MAX) => Counts::DONE,
            Some(&count) => u32::from(count),
            None => self.many[p as usize - self.few.len()],
        }
    }

    /// Sets point `p`'s count.
    fn set(&mut self, p: u32, count: u32) {
        let few = self.few.len();
        match self.few.get_mut(p as usize) {
            Some(small) => {
                debug_assert!(count <= 3 || count == Counts::DONE);
                *small = u8::try_from(count).unwrap_or(u8::MAX);
            }
            None => self.many[p as usize - few] = count,
        }
    }
}

/// Whether calls `a` and `b` of `graph` are of one rank.
fn same_rank(graph: &Graph, a: &CpuCall, b: &CpuCall) -> bool {
    graph.caller(a).rank == graph.caller(b).rank
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::graph::{Caller, Lane, Link, Node};
    use crate::model::{StreamId, StringId, ThreadId};

    /// Rank `rank`'s stream (numbered as the rank) from node `first`.
    fn lane(rank: u32, first: u32) -> Lane {
        Lane {
            rank,
            stream: StreamId(rank),
            first,
        }
    }

    /// A host wait that returned once an operation ended which another thread launched after
    /// the wait began: the operation's end, the wait, the launch and the operation's start
    /// constrain each other in a cycle.
    fn cycle() -> Graph {
        let call = |span, link| CpuCall::new(0, span, link);
        let node = Node {
            start: 20,
            end: 90,
            comm: false,
            label: 0,
            launch: 1,
            binding: Binding::Launch,
        };
        Graph {
            nodes: vec![node],
            lanes: vec![lane(0, 0)],
            cpu: vec![
                call((0, 100), Link::Wait(0)),
                call((10, 15), Link::Launch(0)),
            ],
            callers: vec![Caller {
                rank: 0,
                thread: ThreadId(0),
                name: StringId::EMPTY,
            }],
            labels: vec!["gemm".into()],
            ..Graph::default()
        }
    }

    #[test]
    fn a_count_takes_a_byte_but_an_exchange_s_a_word() {
        // Three points of nodes and calls, then two exchanges'.
        let mut counts = Counts::new(5, 2);
        for (p, count) in [
            (0, 3),
            (1, Counts::DONE),
            (2, 0),
            (3, 70_000),
            (4, Counts::DONE),
        ] {
            counts.set(p, count);
        }
        let all: Vec<u32> = (0..5).map(|p| counts.get(p)).collect();
        assert_eq!(all, vec![3, Counts::DONE, 0, 70_000, Counts::DONE]);
        assert_eq!((counts.few.len(), counts.many.len()), (3, 2));
    }

    #[test]
    fn a_cycle_of_constraints_replays_unchanged_as_measured() {
        let graph = cycle();
        assert_eq!(graph.replay(|_| 1.0, |_| 1.0), vec![90]);
        // Twice as fast: the launch came where it did (its constraint, the wait, read as
        // measured), and the operation, starting at 20, takes 35 ns.
        assert_eq!(graph.replay(|_| 0.5, |_| 1.0), vec![55]);
    }

    /// An operation `[start, end)` launched by nothing, bound as `binding`; `comm` when it
    /// moves data between GPUs.
    fn operation((start, end): (i64, i64), comm: bool, binding: Binding) -> Node {
        Node {
            start,
            end,
            comm,
            label: 0,
            launch: NONE,
            binding,
        }
    }

    /// A graph of `nodes` on `lanes` with `exchanges` (each (members, last, sender)), matched
    /// in that order.
    fn exchanging(nodes: Vec<Node>, lanes: Vec<Lane>, exchanges: &[(&[u32], u32, u32)]) -> Graph {
        let mut graph = Graph {
            nodes,
            lanes,
            labels: vec!["gemm".into()],
            ..Graph::default()
        };
        for &(members, last, sender) in exchanges {
            graph.add_exchange(super::super::Exchange {
                members: members.to_vec(),
                last,
                sender,
            });
        }
        graph.order_memberships();
        graph
    }

    /// A collective whose last member (rank 0, after a 50 ns kernel) arrives at 50 and whose
    /// other member (rank 1) is listed first and arrives at 0; both transfer for 50 ns after
    /// the last arrival.
    fn collective() -> Graph {
        let nodes = vec![
            operation((0, 50), false, Binding::Nothing),
            operation((50, 100), true, Binding::Stream),
            operation((0, 100), true, Binding::Nothing),
        ];
        exchanging(nodes, vec![lane(0, 0), lane(1, 2)], &[(&[2, 1], 1, NONE)])
    }

    /// A transfer: rank 0's receiver, listed first, which arrived at 0 and received until 70;
    /// rank 1's sender (10 to 60, after a 10 ns kernel), matched into a later exchange too
    /// (an operation matched into two belongs to the later), so that the replay reaches its
    /// end before the transfer's arrival.
    fn transfer() -> Graph {
        let nodes = vec![
            operation((0, 70), true, Binding::Nothing),
            operation((0, 10), false, Binding::Nothing),
            operation((10, 60), true, Binding::Stream),
        ];
        let exchanges: &[(&[u32], u32, u32)] = &[(&[0, 2], 2, 2), (&[2], 2, NONE)];
        exchanging(nodes, vec![lane(0, 0), lane(1, 1)], exchanges)
    }

    #[test]
    fn a_receiver_waits_for_the_sender_s_replayed_start_not_its_end() {
        let graph = transfer();
        assert_eq!(graph.replay(|_| 1.0, |_| 1.0), vec![70, 10, 60]);
        // The kernel twice as fast: the sender starts at 5 and runs its 50 ns; the receiver
        // receives for 60 ns after that arrival, the sender's start (not its end, replayed
        // first).
        assert_eq!(
            graph.replay(|i| if i == 1 { 0.5 } else { 1.0 }, |_| 1.0),
            vec![65, 5, 55]
        );
    }

    #[test]
    fn a_collective_waits_for_every_member_replayed() {
        let graph = collective();
        assert_eq!(graph.replay(|_| 1.0, |_| 1.0), vec![50, 100, 100]);
        // The kernel twice as fast: the last member arrives at 25, and both end 50 ns later
        // (read before rank 0's member was replayed, its arrival would stay at 50).
        assert_eq!(
            graph.replay(|i| if i == 0 { 0.5 } else { 1.0 }, |_| 1.0),
            vec![25, 75, 75]
        );
    }
}
