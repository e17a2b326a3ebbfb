//! The step functions that draw the overlap analysis in a trace, computed as the kernels come:
//! compute kernels in flight, communication in flight per kernel role, exposed communication (1
//! while non-barrier communication runs with no compute), waiting in collectives (1 while
//! the rank waits for a collective's last member), and on the critical path (1 while a step's
//! path runs on the rank, as `critical-path` walks it), and the FLOP rate of the kernels in flight
//! (each kernel's FLOPs, as `mfu` shares its operator's, over its time). They are built from the process's classified
//! NCCL kernels ([`RankStreams`]), the very sets `overlap` measures, and from the collectives
//! `collectives` matches, so a counter integrated over a window is the table's number.
//!
//! A value is taken after every change at one time, and written only when it differs from the
//! last one written.
//!
//! [`RankStreams`]: crate::classify::RankStreams

use super::Plan;
use super::prepare::Prepared;
use super::stream::{Event, Item};
use crate::analysis::overlap::BARRIER;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A counter's value as written.
#[derive(Debug, Clone, Copy, Default)]
struct Level {
    value: i64,
    /// The last value written; none before the first change.
    written: Option<i64>,
    /// Whether it ever changed (a counter is written from its first change on).
    moved: bool,
}

impl Level {
    fn add(&mut self, delta: i64) {
        self.value += delta;
        self.moved = true;
    }

    /// The value to write at this time, when it changed.
    fn change(&mut self) -> Option<i64> {
        (self.moved && self.written != Some(self.value)).then(|| {
            self.written = Some(self.value);
            self.value
        })
    }

    /// Like [`Level::change`] for an on/off counter, which starts at 0 unwritten.
    fn toggled(&mut self, on: bool) -> Option<i64> {
        let value = i64::from(on);
        (self.written.unwrap_or(0) != value).then(|| {
            self.written = Some(value);
            value
        })
    }
}

/// Which counters a kernel moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Moves {
    /// A non-NCCL kernel or a graph launch.
    Compute,
    /// An NCCL kernel of this role (index into the roles); `comm` unless a barrier.
    Comm { role: usize, comm: bool },
}

/// A process's counters.
#[derive(Debug)]
pub struct Counters {
    compute: Level,
    /// Role names, by name, and their levels.
    roles: Vec<(String, Level)>,
    comm: Level,
    exposed: Level,
    waiting: Level,
    /// Whether it waited in a collective at all (the waiting counter is drawn).
    waits_at_all: bool,
    on_path: Level,
    /// Whether it is on a critical path at all (the counter is drawn).
    on_path_at_all: bool,
    /// The FLOP rate of its kernels in flight, MFLOP/s (each kernel's FLOPs over its time).
    achieved: Level,
    /// Whether any of its kernels has FLOPs (the counter is drawn).
    achieves_at_all: bool,
    /// Pending changes: (time, +1 or -1, what).
    pending: BinaryHeap<Reverse<(i64, i64, Change)>>,
    /// Whether a change was applied since the values were last taken (none can differ
    /// from what was written otherwise).
    applied: bool,
    /// The position of the barrier role in `roles`, if any.
    barrier: Option<usize>,
    /// The values taken last, kept for their per-role vector.
    changes: Changes,
}

/// A change due later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Change {
    Kernel(Moves),
    Wait,
    OnPath,
    /// A kernel's FLOP rate (the pending delta), MFLOP/s.
    Achieved,
}

/// The values that changed at one time (`None` for those that did not).
#[derive(Debug, Clone, Default)]
pub struct Changes {
    /// Compute kernels in flight.
    pub compute: Option<i64>,
    /// NCCL kernels in flight, per role (in [`Counters::roles`] order).
    pub roles: Vec<Option<i64>>,
    /// Non-barrier NCCL kernels in flight.
    pub comm: Option<i64>,
    /// Barrier kernels in flight.
    pub barrier: Option<i64>,
    /// Exposed communication (1 or 0).
    pub exposed: Option<i64>,
    /// Waiting in a collective (1 or 0); never set when the process waited in none.
    pub waiting: Option<i64>,
    /// On a step's critical path (1 or 0); never set when the process never is.
    pub on_path: Option<i64>,
    /// The FLOP rate of the kernels in flight, MFLOP/s; never set when no kernel has FLOPs.
    pub achieved: Option<i64>,
}

impl Counters {
    /// The counters of an exported process; None when it ran no kernel in its window.
    pub fn new(plan: &Plan, exported: usize, prepared: &Prepared) -> Option<Counters> {
        if !prepared.counters {
            return None;
        }
        let mut roles: Vec<String> = prepared
            .streams
            .comm
            .iter()
            .map(|k| k.role_name(plan.rules).to_string())
            .collect();
        roles.sort();
        roles.dedup();
        let process = plan.exported[exported].process;
        let waits = plan.collectives.waits.get(&process);
        let on_path = plan.critical_path.on_path.get(&process);
        let barrier = roles.iter().position(|r| r == BARRIER);
        let changes = Changes {
            roles: vec![None; roles.len()],
            ..Changes::default()
        };
        let mut pending = BinaryHeap::new();
        for (spans, change) in [(waits, Change::Wait), (on_path, Change::OnPath)] {
            for &(s, e) in spans.into_iter().flatten() {
                pending.push(Reverse((s, 1, change)));
                pending.push(Reverse((e, -1, change)));
            }
        }
        Some(Counters {
            compute: Level::default(),
            roles: roles.into_iter().map(|r| (r, Level::default())).collect(),
            comm: Level::default(),
            exposed: Level::default(),
            waiting: Level::default(),
            waits_at_all: waits.is_some_and(|w| !w.is_empty()),
            on_path: Level::default(),
            on_path_at_all: on_path.is_some_and(|p| !p.is_empty()),
            achieved: Level::default(),
            achieves_at_all: !prepared.flops.is_empty(),
            pending,
            applied: false,
            barrier,
            changes,
        })
    }

    /// The roles of its NCCL kernels, sorted.
    pub fn roles(&self) -> impl Iterator<Item = &str> {
        self.roles.iter().map(|(r, _)| r.as_str())
    }

    /// Whether it waited in a collective inside its window (the waiting counter is drawn).
    pub fn waits(&self) -> bool {
        self.waits_at_all
    }

    /// Whether it is on a critical path inside its window (the on-path counter is drawn).
    pub fn on_path(&self) -> bool {
        self.on_path_at_all
    }

    /// Whether any of its kernels has FLOPs (the achieved-TFLOP/s counter is drawn).
    pub fn achieves(&self) -> bool {
        self.achieves_at_all
    }

    /// A kernel, graph launch or peer copy starts (clipped times); its end is due later.
    pub fn add(&mut self, plan: &Plan, prepared: &Prepared, item: &Item) {
        if let Event::Kernel(k) = item.event
            && let Some(&flops) = prepared.flops.get(&k.correlation)
        {
            // Over the kernel's own time, not its clipped one: FLOPs per ns are GFLOP/s.
            let rate = (1e3 * flops / (k.end.0 - k.start.0).max(1) as f64).round() as i64;
            self.apply(Change::Achieved, rate);
            self.pending
                .push(Reverse((item.end, -rate, Change::Achieved)));
        }
        // Communication: a transfer kernel or a copy between GPUs, by its stream.
        let transfer = match item.event {
            Event::Kernel(k) if plan.activity.is_comm_kernel(&k) => Some(k.stream),
            Event::Memcpy(m) if m.is_peer() => Some(m.stream),
            Event::Kernel(_) | Event::Graph(_) => None,
            _ => return,
        };
        let moves = match transfer {
            Some(stream) => {
                let Some(n) = prepared.streams.comm_at(stream, item.start) else {
                    return;
                };
                let role = n.role_name(plan.rules);
                let role = self.roles.iter().position(|(r, _)| r == role).unwrap_or(0);
                Moves::Comm {
                    role,
                    comm: !n.is_barrier(),
                }
            }
            None => Moves::Compute,
        };
        self.apply(Change::Kernel(moves), 1);
        self.pending
            .push(Reverse((item.end, -1, Change::Kernel(moves))));
    }

    /// When the next change is due, if any.
    pub fn due(&self) -> Option<i64> {
        self.pending.peek().map(|Reverse((t, ..))| *t)
    }

    /// Applies every change due by `t`; then the values that changed at `t`, when any did.
    pub fn at(&mut self, t: i64) -> Option<&Changes> {
        while let Some(&Reverse((time, delta, change))) = self.pending.peek()
            && time <= t
        {
            self.pending.pop();
            self.apply(change, delta);
        }
        if !std::mem::take(&mut self.applied) {
            return None;
        }
        let changes = &mut self.changes;
        for ((_, level), change) in self.roles.iter_mut().zip(&mut changes.roles) {
            *change = level.change();
        }
        changes.barrier = self.barrier.and_then(|i| changes.roles[i]);
        let exposed = self.comm.value > 0 && self.compute.value == 0;
        let waiting = self.waiting.value > 0;
        let on_path = self.on_path.value > 0;
        changes.compute = self.compute.change();
        changes.comm = self.comm.change();
        changes.exposed = self.exposed.toggled(exposed);
        changes.waiting = (self.waits_at_all)
            .then(|| self.waiting.toggled(waiting))
            .flatten();
        changes.on_path = (self.on_path_at_all)
            .then(|| self.on_path.toggled(on_path))
            .flatten();
        changes.achieved = self.achieved.change();
        let any = [
            changes.compute,
            changes.comm,
            changes.exposed,
            changes.waiting,
            changes.on_path,
            changes.achieved,
        ]
        .iter()
        .chain(&changes.roles)
        .any(Option::is_some);
        any.then_some(&*changes)
    }

    fn apply(&mut self, change: Change, delta: i64) {
        self.applied = true;
        match change {
            Change::Kernel(Moves::Compute) => self.compute.add(delta),
            Change::Kernel(Moves::Comm { role, comm }) => {
                self.roles[role].1.add(delta);
                if comm {
                    self.comm.add(delta);
                }
            }
            Change::Wait => self.waiting.add(delta),
            Change::OnPath => self.on_path.add(delta),
            Change::Achieved => self.achieved.add(delta),
        }
    }
}
