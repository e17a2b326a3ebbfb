//! Last step of the data flow for pictures: writing the classified timeline in other tools'
//! formats. Exporters read the ranks, windows and stream roles computed by
//! [`crate::classify`]; they never derive their own.
//!
//! A conversion streams (issue 17), so that its memory does not grow with the events:
//! 1. [`capture`]: each report is read into a light timeline (what classification reads) and its
//!    events, sorted under a memory budget;
//! 2. [`Plan`], from the light timelines only: which processes are exported (ranks first, in rank
//!    order), over which window each, the rebase that puts the earliest exported time at 0
//!    (Perfetto drops negative times; DESIGN.md, Clock), the collectives and MPI messages drawn,
//!    and each process's CPU threads (those whose calls and ranges meet its window);
//! 3. [`prepare`]: one pass over the events ([`stream`]) finds what each process draws: its
//!    threads, its streams with their roles and lanes, which launches have both ends exported;
//! 4. [`perfetto`] and [`paraver`] then write in one more pass each, as the events come.

pub mod collectives;
pub mod conversion;
pub mod counters;
pub mod critical_path;
pub mod encoded;
pub mod fit;
pub mod mpi;
pub mod paraver;
pub mod perfetto;
pub mod prepare;
pub mod split;
pub mod stream;
pub mod syncs;

use crate::analysis::graph::Graph;
use crate::classify::payloads::NcclPayloads;
use crate::classify::streams::clip;
use crate::classify::{Activity, Rank, RoleRules, WindowSpec};
use crate::input::capture;
use crate::model::{ProcessId, ThreadId, Timeline};

/// One exported process.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The process.
    pub process: ProcessId,
    /// Its rank, when it is one.
    pub rank: Option<Rank>,
    /// The interval exported (events clipped to it), merged-clock ns.
    pub window: (i64, i64),
    /// Whether its events are drawn; without, only its counters are (a rank `--max-size` left
    /// out of the slices, still there as a summary).
    pub slices: bool,
}

/// A process and the bounds of its window, merged-clock ns.
pub type ProcessWindow = (ProcessId, (i64, i64));

/// What an export covers, decided before any event is read.
#[derive(Clone)]
pub struct Plan<'a, 't> {
    /// The light timeline, indexed.
    pub activity: &'a Activity<'t>,
    /// The role rules streams are classified with.
    pub rules: &'a RoleRules,
    /// Exported processes: ranks in rank order, then other processes with events.
    pub exported: Vec<Exported>,
    /// Subtracted from every exported time: the earliest exported time.
    pub offset: i64,
    /// The collectives matched across the exported processes, as drawn.
    pub collectives: collectives::Drawn,
    /// When each exported rank is on a step's critical path, and flows where the path crosses
    /// ranks (none unless asked: [`Plan::with_critical_path`]).
    pub critical_path: critical_path::Drawn,
    /// The MPI messages between exported calls.
    pub messages: mpi::Drawn,
    /// The NCCL payload fields of the exported processes' NCCL kernels.
    pub payloads: NcclPayloads,
    /// Each exported process's CPU threads whose span meets its window, by (tid, thread): the
    /// threads a Paraver task lists, known before any event is read (a communication record
    /// names its receiver's thread).
    pub cpu_threads: Vec<Vec<(u32, ThreadId)>>,
    /// The index into `exported` of each process, by process id.
    index: Vec<Option<u32>>,
    /// Whether collective flows are drawn.
    collective_flows: bool,
}

impl<'a, 't> Plan<'a, 't> {
    /// The given ranks over their windows under `spec` (the whole capture for
    /// [`WindowSpec::Whole`]; the bounds `given` for a process, where a rank's window was
    /// projected onto the GPU), plus, when `others`, every other process with events. A process
    /// is exported when it drew something inside its window (its span meets the window); the
    /// rebase offset is the earliest such time.
    pub fn new(
        activity: &'a Activity<'t>,
        rules: &'a RoleRules,
        ranks: &[Rank],
        (spec, given): (&WindowSpec, &[ProcessWindow]),
        others: bool,
    ) -> Plan<'a, 't> {
        let timeline = activity.timeline;
        let mut processes: Vec<(ProcessId, Option<Rank>)> =
            ranks.iter().map(|r| (r.process, Some(*r))).collect();
        if others {
            let ranked: Vec<ProcessId> = ranks.iter().map(|r| r.process).collect();
            processes.extend(
                (0..timeline.processes.len() as u32)
                    .map(ProcessId)
                    .filter(|p| !ranked.contains(p))
                    .map(|p| (p, None)),
            );
        }
        let mut offset = None::<i64>;
        let mut exported = Vec::new();
        for (process, rank) in processes {
            let window = match (spec, given.iter().find(|g| g.0 == process)) {
                (_, Some(&(_, bounds))) => bounds,
                // A trace of the whole capture draws every event, those before its start too.
                (WindowSpec::Whole, None) => {
                    let (start, end) = crate::classify::window::span(activity, process);
                    (start.0, end.0)
                }
                (spec, None) => {
                    let window = crate::classify::window::find(activity, process, spec);
                    (window.start.0, window.end.0)
                }
            };
            let Some(span) = span(activity, process) else {
                continue;
            };
            let Some((first, _)) = clip(span, window) else {
                continue;
            };
            offset = Some(offset.map_or(first, |o| o.min(first)));
            exported.push(Exported {
                process,
                rank,
                window,
                slices: true,
            });
        }
        let context = (activity, rules);
        Plan::assemble(context, exported, offset.unwrap_or(0), false)
    }

    /// The plan of these exported processes, rebased by `offset`.
    fn assemble(
        (activity, rules): (&'a Activity<'t>, &'a RoleRules),
        exported: Vec<Exported>,
        offset: i64,
        collective_flows: bool,
    ) -> Plan<'a, 't> {
        let timeline = activity.timeline;
        let mut index = vec![None; timeline.processes.len()];
        for (i, e) in exported.iter().enumerate() {
            index[e.process.index()] = Some(i as u32);
        }
        let context = (activity, rules);
        Plan {
            collectives: collectives::Drawn::new(context, &exported, collective_flows),
            critical_path: critical_path::Drawn::default(),
            messages: {
                // A message is drawn between processes whose calls are.
                let sliced: Vec<Option<u32>> = (index.iter())
                    .map(|i| i.filter(|&i| exported[i as usize].slices))
                    .collect();
                mpi::Drawn::new(timeline, &exported, &sliced)
            },
            payloads: {
                let processes: Vec<ProcessId> = exported.iter().map(|e| e.process).collect();
                NcclPayloads::new(activity, &processes)
            },
            cpu_threads: cpu_threads(timeline, &exported, &index),
            activity,
            rules,
            exported,
            offset,
            index,
            collective_flows,
        }
    }

    /// Draws a flow from each collective's last arrival to every other member's kernel.
    pub fn with_collective_flows(mut self) -> Self {
        let context = (self.activity, self.rules);
        self.collectives = collectives::Drawn::new(context, &self.exported, true);
        self.collective_flows = true;
        self
    }

    /// The same plan on the same clock (its offset kept, so that the traces of several
    /// selections line up) with only some processes: `keep` says of each exported process
    /// whether it is drawn whole (`Some(true)`), by its counters only (`Some(false)`), or left
    /// out (`None`).
    pub fn select(&self, keep: impl Fn(&Exported) -> Option<bool>) -> Plan<'a, 't> {
        let exported = self
            .exported
            .iter()
            .filter_map(|e| {
                keep(e).map(|slices| Exported {
                    slices,
                    ..e.clone()
                })
            })
            .collect();
        let context = (self.activity, self.rules);
        let mut plan = Plan::assemble(context, exported, self.offset, self.collective_flows);
        plan.critical_path = self.critical_path.clone();
        plan
    }

    /// The ranks whose critical path [`Plan::with_critical_path`] draws, in the order its
    /// graph has them.
    pub fn path_ranks(&self) -> Vec<Rank> {
        critical_path::ranks(&self.exported)
    }

    /// Draws when each rank is on a step's critical path, walked on `graph`: the dependency
    /// graph of [`Plan::path_ranks`] (with every kernel, which the plan's light timeline
    /// lacks).
    pub fn with_critical_path(mut self, graph: &Graph) -> Self {
        self.critical_path = critical_path::drawn(self.activity, graph, &self.exported);
        self
    }

    /// A merged-clock time as exported (ns since the earliest exported time).
    pub fn rebase(&self, t: i64) -> u64 {
        (t - self.offset).max(0) as u64
    }

    /// Whether an event that lasts (`duration` > 0) is cut to no time at all by the window or
    /// by the trace's start (nothing of it is drawn).
    pub fn cuts_to_nothing(&self, item: &stream::Item, duration: i64) -> bool {
        duration > 0 && self.rebase(item.end) == self.rebase(item.start)
    }

    /// The position of a process in [`Plan::exported`], when it is exported.
    pub fn position(&self, process: ProcessId) -> Option<usize> {
        self.index[process.index()].map(|i| i as usize)
    }
}

/// Each exported process's threads whose span meets its window, by (tid, thread).
fn cpu_threads(
    timeline: &Timeline,
    exported: &[Exported],
    index: &[Option<u32>],
) -> Vec<Vec<(u32, ThreadId)>> {
    let mut threads = vec![Vec::new(); exported.len()];
    for (i, t) in timeline.threads.iter().enumerate() {
        let Some(position) = index[t.process.index()] else {
            continue;
        };
        let position = position as usize;
        let meets = t
            .span
            .is_some_and(|(s, e)| clip((s.0, e.0), exported[position].window).is_some());
        if meets {
            threads[position].push((t.tid, ThreadId(i as u32)));
        }
    }
    for list in &mut threads {
        list.sort_unstable();
    }
    threads
}

/// The traces a conversion writes.
#[derive(Debug, Clone, Default)]
pub struct Targets {
    /// The Perfetto trace's path.
    pub perfetto: Option<std::path::PathBuf>,
    /// The Paraver trace's base path (`.prv`, `.pcf`, `.row` beside it).
    pub paraver: Option<std::path::PathBuf>,
    /// Gzip the Perfetto trace and the `.prv`.
    pub gzip: bool,
    /// Memory the Paraver writer may hold for records waiting for their place, bytes.
    pub memory: usize,
    /// Parts prepared and encoded at once.
    pub threads: usize,
}

impl Targets {
    /// Every file the conversion writes.
    pub fn outputs(&self) -> Vec<std::path::PathBuf> {
        let paraver = self
            .paraver
            .iter()
            .flat_map(|b| paraver::files(b, self.gzip));
        self.perfetto.iter().cloned().chain(paraver).collect()
    }
}

/// What a conversion wrote.
#[derive(Debug)]
pub struct Written {
    /// The Perfetto trace, when asked.
    pub perfetto: Option<perfetto::Summary>,
    /// The Paraver trace, when asked.
    pub paraver: Option<paraver::Summary>,
}

/// Writes the traces of `plan` from the joined captures `parts`: one pass prepares every
/// exported process, then both formats are written at once. Where one stream of events covers
/// a format's trace (always for Paraver; for Perfetto with one part or one exported process),
/// that stream runs once, on a thread of its own, and each such writer reads its groups.
pub fn write(plan: &Plan, parts: &[capture::Joined], targets: &Targets) -> anyhow::Result<Written> {
    anyhow::ensure!(
        !plan.exported.is_empty(),
        "nothing to export: no process has events to draw in the window (a \
         Paraver trace needs at least one task)"
    );
    crate::output::check(&targets.outputs())?;
    let staged = crate::output::Staged::default();
    let prepared = prepare::prepare_all(plan, parts, targets.threads)?;
    let all: Vec<&capture::Joined> = parts.iter().collect();
    let (perfetto_reads, paraver_reads) = sharing(plan, parts, targets);
    let readers = usize::from(perfetto_reads) + usize::from(paraver_reads);
    let (run_stream, mut shares) = match readers {
        0 => (None, Vec::new()),
        n => {
            let (run, shares) = stream::share(stream::Stream::new(plan, &all), n);
            (Some(run), shares)
        }
    };
    let perfetto_share = if perfetto_reads { shares.pop() } else { None };
    let paraver_share = shares.pop();
    let perfetto = || -> anyhow::Result<Option<perfetto::Summary>> {
        let Some(path) = &targets.perfetto else {
            return Ok(None);
        };
        let options = (perfetto::Options { gzip: targets.gzip }, targets.threads);
        let share = perfetto_share;
        let written = perfetto::write(plan, parts, &prepared, path, options, share, &staged)?;
        Ok(Some(written))
    };
    let paraver = || -> anyhow::Result<Option<paraver::Summary>> {
        let Some(base) = &targets.paraver else {
            return Ok(None);
        };
        let options = paraver::Options {
            gzip: targets.gzip,
            memory: targets.memory,
        };
        let share = paraver_share;
        let written = paraver::write(plan, parts, &prepared, base, options, share, &staged)?;
        Ok(Some(written))
    };
    let (perfetto, paraver) = std::thread::scope(|scope| {
        // Named for profilers and debuggers; failing to start one panics, as `scope.spawn`.
        let named = |name: &str| std::thread::Builder::new().name(name.to_string());
        if let Some(run) = run_stream {
            let started = named("events").spawn_scoped(scope, run);
            started.expect("the system starts a thread");
        }
        let paraver = named("paraver").spawn_scoped(scope, paraver);
        let paraver = paraver.expect("the system starts a thread");
        let perfetto = perfetto();
        let paraver = paraver
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the Paraver writer panicked")));
        (perfetto, paraver)
    });
    let written = Written {
        perfetto: perfetto?,
        paraver: paraver?,
    };
    staged.commit()?;
    Ok(written)
}

/// Whether one stream of events covers the Perfetto trace (one part, or one exported process);
/// otherwise each part is streamed apart.
fn one_stream(plan: &Plan, parts: &[capture::Joined]) -> bool {
    parts.len() == 1 || plan.exported.len() == 1
}

/// Which writers read the one stream [`write()`] runs for them: (Perfetto, Paraver).
fn sharing(plan: &Plan, parts: &[capture::Joined], targets: &Targets) -> (bool, bool) {
    let perfetto = targets.perfetto.is_some() && one_stream(plan, parts);
    (perfetto, targets.paraver.is_some())
}

/// Passes over every event [`write()`] makes (for a progress share): one to prepare, one for
/// the stream the writers share, and one more when Perfetto streams each part apart.
pub fn passes(plan: &Plan, parts: &[capture::Joined], targets: &Targets) -> u64 {
    let (perfetto, paraver) = sharing(plan, parts, targets);
    let apart = targets.perfetto.is_some() && !perfetto;
    1 + u64::from(perfetto || paraver) + u64::from(apart)
}

/// First start and last end of everything a process draws: its own span and its GPUs' metric
/// samples.
fn span(activity: &Activity, process: ProcessId) -> Option<(i64, i64)> {
    let timeline = activity.timeline;
    let own = timeline.process(process).span.map(|(s, e)| (s.0, e.0));
    activity
        .metric_series(process)
        .into_iter()
        .map(|(_, s)| {
            let (start, end) = timeline.metric_series(s).span;
            (start.0, end.0)
        })
        .chain(own)
        .reduce(|(a, b), (s, e)| (a.min(s), b.max(e)))
}
