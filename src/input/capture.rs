//! Reports read for a streaming conversion (issue 17): what classification needs stays in memory,
//! every event to draw is sorted under a memory budget.
//!
//! A [`Capture`] is one report read on its own clock with ids of its own: a *light* timeline
//! (entities, NVTX events, the NCCL kernels and the API calls that launched them: everything the
//! ranks, windows, stream roles and collectives are found from) and its [`Events`], each kind
//! sorted by a [`Sorter`] that spills runs to temporary files when the [`Budget`] is spent.
//! [`Captures::join`] puts captures on one clock and one set of ids: the light timelines become
//! one (as [`Timeline::load`] merges reports), and each capture keeps the [`Translation`] and
//! time shift that carry its events onto the merged ones when they are read.

use crate::hash::{FxHashMap, FxHashSet};
use crate::model::records::{Fits, Limits};
use crate::model::{
    AccEvent, AccTable, ApiCall, GraphLaunch, Kernel, Memcpy, MemoryEvent, Memset, MetricSample,
    MpiCall, MpiTable, NvtxEvent, OsCall, ProcessId, ReportId, SampleEvent, StringId, SyncEvent,
    ThreadRun, Timeline, Warning,
};
use crate::nsys::{Chunking, Moved, Report, Result, Translation};
use crate::spill::{Budget, Record, Sorted, Sorter};
use std::collections::BTreeSet;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// One report read for a streaming conversion.
pub struct Capture {
    /// The file it was read from: the export, or the part file that holds it.
    pub source: PathBuf,
    /// The report alone: entities, NVTX events, NCCL kernels and their launching calls.
    pub light: Timeline,
    /// Every event, sorted.
    pub events: Events,
}

/// Every event of one report, each kind sorted (by start, then every field).
#[derive(Debug, Default)]
pub struct Events {
    /// Kernels.
    pub kernels: Sorted<Kernel>,
    /// Memory copies.
    pub memcpys: Sorted<Memcpy>,
    /// Memory sets.
    pub memsets: Sorted<Memset>,
    /// CUDA graph launches.
    pub graph_launches: Sorted<GraphLaunch>,
    /// CUDA API calls.
    pub api_calls: Sorted<ApiCall>,
    /// Synchronizations.
    pub syncs: Sorted<SyncEvent>,
    /// OS runtime calls.
    pub os_calls: Sorted<OsCall>,
    /// MPI calls.
    pub mpi_calls: Sorted<MpiCall>,
    /// OpenACC events.
    pub acc_events: Sorted<AccEvent>,
    /// GPU metric samples.
    pub metrics: Sorted<MetricSample>,
    /// Device-memory events.
    pub memory: Sorted<MemoryEvent>,
    /// CPU samples.
    pub samples: Sorted<SampleEvent>,
    /// When threads ran on a core.
    pub thread_runs: Sorted<ThreadRun>,
    /// The names they use.
    pub names: Names,
}

/// The names the events of one report use, in its own string ids: what value tables list,
/// drawn up before any event is written.
#[derive(Debug, Default, Clone)]
pub struct Names {
    /// Per string id: a bit per kind of name it is (`Names::API`, ...).
    strings: Vec<u16>,
    /// Memory copy kinds (`ENUM_CUDA_MEMCPY_OPER`).
    pub copy_kinds: BTreeSet<u8>,
    /// Whether there is a memory set.
    pub memset: bool,
    /// Executable graph ids launched.
    pub graph_execs: BTreeSet<u32>,
}

impl Names {
    /// A CUDA API call's name.
    pub const API: u16 = 1;
    /// A kernel's short name.
    pub const KERNEL: u16 = 2;
    /// An OS runtime call's name.
    pub const OS: u16 = 4;
    /// An MPI call's name.
    pub const MPI: u16 = 8;

    /// Every kind of name, in bit order: the four above, then an OpenACC event's source and
    /// function per table ([`Names::acc`]).
    pub const KINDS: [u16; 10] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512];

    /// The kind of an OpenACC event's source (`function` false) or function, in `table`.
    pub fn acc(table: AccTable, function: bool) -> u16 {
        16 << (table as u16 + if function { 3 } else { 0 })
    }

    pub(crate) fn add(&mut self, id: StringId, kind: u16) {
        if id.index() >= self.strings.len() {
            self.strings.resize(id.index() + 1, 0);
        }
        self.strings[id.index()] |= kind;
    }

    /// The string ids used as `kind`.
    pub fn used(&self, kind: u16) -> impl Iterator<Item = StringId> + '_ {
        (0..self.strings.len())
            .filter(move |&i| self.strings[i] & kind != 0)
            .map(|i| StringId(i as u32))
    }
}

impl Events {
    /// How many events, and how many runs went to disk.
    pub fn size(&self) -> (u64, usize) {
        let all = [
            (self.kernels.len(), self.kernels.runs()),
            (self.memcpys.len(), self.memcpys.runs()),
            (self.memsets.len(), self.memsets.runs()),
            (self.graph_launches.len(), self.graph_launches.runs()),
            (self.api_calls.len(), self.api_calls.runs()),
            (self.syncs.len(), self.syncs.runs()),
            (self.os_calls.len(), self.os_calls.runs()),
            (self.mpi_calls.len(), self.mpi_calls.runs()),
            (self.acc_events.len(), self.acc_events.runs()),
            (self.metrics.len(), self.metrics.runs()),
            (self.memory.len(), self.memory.runs()),
            (self.samples.len(), self.samples.runs()),
            (self.thread_runs.len(), self.thread_runs.runs()),
        ];
        all.iter().fold((0, 0), |(n, r), &(a, b)| (n + a, r + b))
    }
}

/// Which kernels the light timeline keeps, by (short name, full name): those classification
/// reads (`classify::comm::is_comm`, the communication kernels), which the caller knows. It
/// keeps every copy between GPUs too, and the launches of both.
pub type LightKernels = fn(&str, &str) -> bool;

impl Capture {
    /// Reads `report` on its own clock, sorting its events under `budget`; the kernels `light`
    /// names are kept in the light timeline too.
    pub fn read(
        report: &Report,
        chunking: Chunking,
        budget: Arc<Budget>,
        light: LightKernels,
    ) -> Result<Capture> {
        let own_clock = crate::model::own_clock(report.meta());
        let sink = Spill::new(budget, light);
        let (light, events) = crate::nsys::read_report_into(report, own_clock, chunking, sink)?;
        Ok(Capture {
            source: report.input_path().to_path_buf(),
            light,
            events,
        })
    }
}

/// Captures on one clock and one set of ids.
pub struct Captures {
    /// The light timelines merged (sorted, on the merged clock, with `--align` applied).
    pub light: Timeline,
    /// Each capture's events, how its ids map onto the merged ones, and the ns its times move
    /// by, in input order.
    pub parts: Vec<Joined>,
}

/// One capture's events with what carries them onto the merged timeline.
pub struct Joined {
    /// The file it was read from.
    pub source: PathBuf,
    /// Its report in the merged timeline.
    pub report: ReportId,
    /// The bounds of its events' own ids, which every event read back is checked against.
    pub limits: Limits,
    /// The events, with the report's own ids and clock.
    pub events: Events,
    /// Its ids onto the merged ones.
    pub translation: Translation,
    /// Added to each of its times: the report's clock offset (with any collective correction).
    pub shift: i64,
}

impl Captures {
    /// Reads opened reports (up to `threads` at once, with fewer reports than threads a
    /// report's large tables shared among its threads) and joins them; the light timeline
    /// keeps the kernels `light` names.
    pub fn read(
        reports: Vec<Report>,
        threads: usize,
        budget: Arc<Budget>,
        light: LightKernels,
    ) -> Result<Captures> {
        let chunking = Chunking::shared(threads, reports.len(), crate::nsys::CHUNK_ROWS);
        let read = |report: Report| Capture::read(&report, chunking, budget.clone(), light);
        Captures::join(crate::nsys::read_all(reports, threads, read)?)
    }

    /// Counts, per report, the kernels, copies and sets that repeat the one before them in
    /// every field, in a warning, as a whole timeline's reading does
    /// (`Warning::DuplicateGpuOps`): one pass over those events, each capture's kernels on a
    /// thread of their own beside its copies and sets.
    pub fn warn_repeated_gpu_ops(&mut self) -> Result<()> {
        let counts: Vec<Result<u64>> = std::thread::scope(|scope| {
            let threads: Vec<_> = (self.parts.iter())
                .map(|part| {
                    let e = &part.events;
                    let kernels = scope.spawn(|| repeats(&e.kernels));
                    let others =
                        repeats(&e.memcpys).and_then(|copies| Ok(copies + repeats(&e.memsets)?));
                    (part, kernels, others)
                })
                .collect();
            (threads.into_iter())
                .map(|(part, kernels, others)| {
                    let kernels = kernels.join().unwrap_or_else(|_| {
                        Err(io::Error::other("counting repeated kernels panicked"))
                    });
                    Ok(kernels.map_err(|e| part.error(e))? + others.map_err(|e| part.error(e))?)
                })
                .collect()
        });
        for (part, count) in self.parts.iter().zip(counts) {
            let report = &mut self.light.reports[part.report.index()];
            report.warnings.add_n(Warning::DuplicateGpuOps, count?);
        }
        Ok(())
    }

    /// Each merged stream's memory copies and sets, counted in one pass over those events.
    pub fn copies_per_stream(&self) -> Result<Vec<[u64; 2]>> {
        let mut counts = vec![[0u64; 2]; self.light.streams.len()];
        for part in &self.parts {
            // Checked and moved onto the merged ids, as every pass reads events back.
            for m in part.events.memcpys.iter() {
                let m = m.and_then(|m| part.checked(m)).map_err(|e| part.error(e))?;
                counts[m.stream.index()][0] += 1;
            }
            for m in part.events.memsets.iter() {
                let m = m.and_then(|m| part.checked(m)).map_err(|e| part.error(e))?;
                counts[m.stream.index()][1] += 1;
            }
        }
        Ok(counts)
    }

    /// Puts captures (in input order) on the merged clock (DESIGN.md, Clock) with the same ids a
    /// [`Timeline::load`] of their reports would give.
    pub fn join(captures: Vec<Capture>) -> Result<Captures> {
        let metas: Vec<_> = captures
            .iter()
            .map(|c| c.light.reports[0].meta.clone())
            .collect();
        let mappings = crate::model::plan_clocks(&metas.iter().collect::<Vec<_>>());
        let mut light = Timeline::default();
        let mut parts = Vec::with_capacity(captures.len());
        for (capture, mapping) in captures.into_iter().zip(&mappings) {
            let limits = Limits::of(&capture.light);
            let translation = if light.reports.is_empty() {
                let translation = Translation::identity(&capture.light.strings);
                light = capture.light;
                translation
            } else {
                light.append(capture.light)?
            };
            parts.push(Joined {
                source: capture.source,
                report: ReportId(parts.len() as u32),
                limits,
                events: capture.events,
                translation,
                shift: mapping.offset,
            });
        }
        light.sort_events();
        let offsets: Vec<i64> = mappings.iter().map(|m| m.offset).collect();
        light.shift_reports(&offsets);
        Ok(Captures { light, parts })
    }

    /// The whole timeline: every event moved onto the merged ids and clock and sorted, as
    /// [`Timeline::load`] gives it (for the analyses, which hold every event in memory).
    pub fn into_timeline(self) -> Result<Timeline> {
        let mut timeline = self.light;
        timeline.kernels.clear();
        timeline.memcpys.clear();
        timeline.api_calls.clear();
        timeline.mpi_calls.clear();
        for part in &self.parts {
            add_events(&mut timeline, part).map_err(|cause| part.error(cause))?;
        }
        timeline.sort_events();
        Ok(timeline)
    }

    /// Applies one clock correction per host (`--align collectives`) to the light timeline and
    /// to every capture's shift.
    pub fn shift_hosts(&mut self, corrections: &[i64]) {
        self.light.shift_hosts(corrections);
        for (part, report) in self.parts.iter_mut().zip(&self.light.reports) {
            part.shift += corrections[report.host.index()];
        }
    }
}

/// Appends every event of a part to the timeline.
fn add_events(timeline: &mut Timeline, part: &Joined) -> io::Result<()> {
    let e = &part.events;
    extend(&mut timeline.kernels, &e.kernels, part)?;
    extend(&mut timeline.memcpys, &e.memcpys, part)?;
    extend(&mut timeline.memsets, &e.memsets, part)?;
    extend(&mut timeline.graph_launches, &e.graph_launches, part)?;
    extend(&mut timeline.api_calls, &e.api_calls, part)?;
    extend(&mut timeline.syncs, &e.syncs, part)?;
    extend(&mut timeline.os_calls, &e.os_calls, part)?;
    extend(&mut timeline.mpi_calls, &e.mpi_calls, part)?;
    extend(&mut timeline.acc_events, &e.acc_events, part)?;
    extend(&mut timeline.metrics, &e.metrics, part)?;
    extend(&mut timeline.memory, &e.memory, part)?;
    extend(&mut timeline.samples, &e.samples, part)?;
    extend(&mut timeline.thread_runs, &e.thread_runs, part)
}

/// Appends a part's sorted events, checked and moved onto the merged timeline.
fn extend<T: Record + Moved + Fits>(
    into: &mut Vec<T>,
    sorted: &Sorted<T>,
    part: &Joined,
) -> io::Result<()> {
    into.reserve(sorted.len() as usize);
    for event in sorted.iter() {
        into.push(part.checked(event?)?);
    }
    Ok(())
}

impl Joined {
    /// A failure to read this capture's events back, naming its file.
    pub fn error(&self, cause: io::Error) -> crate::nsys::Error {
        crate::nsys::Error::Events {
            path: self.source.clone(),
            cause,
        }
    }

    /// An event of this capture, moved onto the merged timeline once checked against its
    /// limits (a damaged part file can hold anything).
    pub fn checked<T: Moved + Fits>(&self, event: T) -> io::Result<T> {
        if !event.fits(&self.limits) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "an event refers to what its report does not hold, or ends before it starts \
                 (a damaged part file?)",
            ));
        }
        Ok(event.moved(&self.translation, self.shift))
    }
}

/// The sink of a streaming read: every event into a sorter, and into the light timeline what
/// classification reads (NCCL kernels, the calls that launched them, NVTX events, the MPI
/// calls that messages are matched from).
struct Spill {
    kernels: Sorter<Kernel>,
    memcpys: Sorter<Memcpy>,
    memsets: Sorter<Memset>,
    graph_launches: Sorter<GraphLaunch>,
    api_calls: Sorter<ApiCall>,
    syncs: Sorter<SyncEvent>,
    os_calls: Sorter<OsCall>,
    mpi_calls: Sorter<MpiCall>,
    acc_events: Sorter<AccEvent>,
    metrics: Sorter<MetricSample>,
    memory: Sorter<MemoryEvent>,
    samples: Sorter<SampleEvent>,
    thread_runs: Sorter<ThreadRun>,
    comm: Vec<Kernel>,
    /// Copies between GPUs (communication too), for the light timeline.
    peer_copies: Vec<Memcpy>,
    /// Which kernels go to `comm` (and the light timeline).
    light: LightKernels,
    /// `light`'s answer per (short name, name) already asked: kernels repeat a few names.
    light_names: FxHashMap<(StringId, StringId), bool>,
    /// Sends, receives and waits: what MPI messages are matched from.
    messaging: Vec<MpiCall>,
    /// (process, correlation id) of every communication kernel and peer copy (they are read
    /// before API calls).
    comm_launches: FxHashSet<(ProcessId, u32)>,
    launches: Vec<ApiCall>,
    nvtx: Vec<NvtxEvent>,
    names: Names,
    /// The first write error; the rest of the report is still read, then it is returned.
    error: Option<io::Error>,
}

impl Spill {
    fn new(budget: Arc<Budget>, light: LightKernels) -> Spill {
        Spill {
            kernels: Sorter::new(budget.clone()),
            memcpys: Sorter::new(budget.clone()),
            memsets: Sorter::new(budget.clone()),
            graph_launches: Sorter::new(budget.clone()),
            api_calls: Sorter::new(budget.clone()),
            syncs: Sorter::new(budget.clone()),
            os_calls: Sorter::new(budget.clone()),
            mpi_calls: Sorter::new(budget.clone()),
            acc_events: Sorter::new(budget.clone()),
            metrics: Sorter::new(budget.clone()),
            memory: Sorter::new(budget.clone()),
            samples: Sorter::new(budget.clone()),
            thread_runs: Sorter::new(budget),
            comm: Vec::new(),
            peer_copies: Vec::new(),
            light,
            light_names: FxHashMap::default(),
            messaging: Vec::new(),
            comm_launches: FxHashSet::default(),
            launches: Vec::new(),
            nvtx: Vec::new(),
            names: Names::default(),
            error: None,
        }
    }

    /// Keeps the first error of a push.
    fn check(&mut self, pushed: io::Result<()>) {
        if let Err(e) = pushed {
            self.error.get_or_insert(e);
        }
    }
}

impl Default for Spill {
    fn default() -> Self {
        // Only a placeholder until the reader's own sink is given: it keeps no kernel light.
        Spill::new(Budget::new(usize::MAX / 2), |_, _| false)
    }
}

impl crate::nsys::Sink for Spill {
    type Output = Events;

    fn kernel(&mut self, k: Kernel, process: ProcessId, (short, name): (&str, &str)) {
        self.names.add(k.short_name, Names::KERNEL);
        let light = self.light;
        let names = (k.short_name, k.name);
        if *self
            .light_names
            .entry(names)
            .or_insert_with(|| light(short, name))
        {
            self.comm.push(k);
            self.comm_launches.insert((process, k.correlation));
        }
        let pushed = self.kernels.push(k);
        self.check(pushed);
    }

    fn memcpy(&mut self, m: Memcpy, process: ProcessId) {
        self.names.copy_kinds.insert(m.copy_kind);
        if m.is_peer() {
            self.peer_copies.push(m);
            self.comm_launches.insert((process, m.correlation));
        }
        let pushed = self.memcpys.push(m);
        self.check(pushed);
    }

    fn memset(&mut self, m: Memset) {
        self.names.memset = true;
        let pushed = self.memsets.push(m);
        self.check(pushed);
    }

    fn graph(&mut self, g: GraphLaunch) {
        self.names.graph_execs.insert(g.exec);
        let pushed = self.graph_launches.push(g);
        self.check(pushed);
    }

    fn sync(&mut self, s: SyncEvent) {
        let pushed = self.syncs.push(s);
        self.check(pushed);
    }

    fn api_call(&mut self, a: ApiCall, process: ProcessId) {
        self.names.add(a.name, Names::API);
        if self.comm_launches.contains(&(process, a.correlation)) {
            self.launches.push(a);
        }
        let pushed = self.api_calls.push(a);
        self.check(pushed);
    }

    fn os_call(&mut self, o: OsCall) {
        self.names.add(o.name, Names::OS);
        let pushed = self.os_calls.push(o);
        self.check(pushed);
    }

    fn nvtx(&mut self, n: NvtxEvent) {
        self.nvtx.push(n);
    }

    fn mpi_call(&mut self, m: MpiCall) {
        self.names.add(m.name, Names::MPI);
        if matches!(
            m.table,
            MpiTable::PointToPoint | MpiTable::StartWait | MpiTable::Request
        ) {
            self.messaging.push(m);
        }
        let pushed = self.mpi_calls.push(m);
        self.check(pushed);
    }

    fn acc_event(&mut self, a: AccEvent) {
        self.names.add(a.source, Names::acc(a.table, false));
        if a.function != StringId::EMPTY {
            self.names.add(a.function, Names::acc(a.table, true));
        }
        let pushed = self.acc_events.push(a);
        self.check(pushed);
    }

    fn metric(&mut self, m: MetricSample) {
        let pushed = self.metrics.push(m);
        self.check(pushed);
    }

    fn memory(&mut self, m: MemoryEvent) {
        let pushed = self.memory.push(m);
        self.check(pushed);
    }

    fn sample(&mut self, s: SampleEvent) {
        let pushed = self.samples.push(s);
        self.check(pushed);
    }

    fn thread_run(&mut self, r: ThreadRun) {
        let pushed = self.thread_runs.push(r);
        self.check(pushed);
    }

    fn finish(self, timeline: &mut Timeline) -> io::Result<Events> {
        if let Some(e) = self.error {
            return Err(e);
        }
        timeline.kernels = self.comm;
        timeline.memcpys = self.peer_copies;
        timeline.api_calls = self.launches;
        timeline.nvtx = self.nvtx;
        timeline.mpi_calls = self.messaging;
        // The two largest sorts, kernels and API calls, on two cores.
        let (kernels, api_calls) = std::thread::scope(|scope| {
            let kernels = scope.spawn(|| self.kernels.finish());
            let api_calls = self.api_calls.finish();
            let kernels = kernels
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e));
            (kernels, api_calls)
        });
        Ok(Events {
            kernels,
            memcpys: self.memcpys.finish(),
            memsets: self.memsets.finish(),
            graph_launches: self.graph_launches.finish(),
            api_calls,
            syncs: self.syncs.finish(),
            os_calls: self.os_calls.finish(),
            mpi_calls: self.mpi_calls.finish(),
            acc_events: self.acc_events.finish(),
            metrics: self.metrics.finish(),
            memory: self.memory.finish(),
            samples: self.samples.finish(),
            thread_runs: self.thread_runs.finish(),
            names: self.names,
        })
    }
}

/// How many events of `sorted` repeat the one before them in every field (sorted by every
/// field, a repeated row follows the one it repeats).
fn repeats<T: Record + PartialEq>(sorted: &Sorted<T>) -> io::Result<u64> {
    let mut count = 0;
    let mut last = None;
    for event in sorted.iter() {
        let event = event?;
        count += u64::from(last.as_ref() == Some(&event));
        last = Some(event);
    }
    Ok(count)
}
