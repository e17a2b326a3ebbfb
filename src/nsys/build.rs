//! Building a [`Timeline`] from reports: clock mapping, identity keys, names, one sort at the end.

use super::{
    CHUNK_ROWS, Chunking, Clock, Error, GlobalId, GpuOpRow, Report, Result, StringResolver,
};
use crate::hash::{FxHashMap, FxHashSet};
use crate::model::{
    AccEvent, ApiCall, ClockMapping, ExportMeta, Gpu, GpuId, GraphLaunch, Host, HostId, Kernel,
    Memcpy, MemoryEvent, Memset, MetricSample, MetricSeries, MetricSeriesId, MpiCall, MpiTable,
    NO_RANK, Ns, NvtxEvent, NvtxKind, OsCall, Process, ProcessId, ReportId, ReportInfo, RowCounts,
    SampleEvent, StackId, Stream, StreamId, StringId, StringTable, SyncEvent, Thread, ThreadId,
    ThreadRun, Timeline, Warning, Warnings,
};
use std::cmp::Reverse;
use std::path::Path;

/// Stream id that synchronization rows use for "no stream" (event and context syncs).
const NO_STREAM: u32 = u32::MAX;

/// The rank in a thread name `MPI Rank N`: how nsys 2022.x names a process's main thread when it
/// traces MPI without `MPI_RANKS`.
fn mpi_rank_name(name: &str) -> Option<u32> {
    name.strip_prefix("MPI Rank ")?.parse().ok()
}

impl Timeline {
    /// Opens the given SQLite exports and merges them into one timeline (DESIGN.md, Clock and
    /// Identity), reading up to one report per core at once. Fails on the first unreadable input
    /// (in the order given), naming it.
    pub fn load<P: AsRef<Path>>(paths: &[P]) -> Result<Timeline> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Timeline::load_with_threads(paths, cores)
    }

    /// [`Timeline::load`] with `threads` threads: reports are read at once, and a report that
    /// gets several threads shares its large tables among them; the timeline is the same
    /// whatever the number.
    pub fn load_with_threads<P: AsRef<Path>>(paths: &[P], threads: usize) -> Result<Timeline> {
        let reports = paths
            .iter()
            .map(|p| Report::open(p.as_ref()))
            .collect::<Result<Vec<_>>>()?;
        Timeline::from_reports(reports, threads)
    }

    /// Merges opened reports into one timeline: each is read into a timeline of its own on one
    /// of `threads` workers (with more threads than reports, each report's large tables are
    /// read by `threads / reports` connections at once), then they are appended in the order
    /// given (ids renumbered, strings interned in order), which gives exactly what reading them
    /// one after another would.
    pub fn from_reports(reports: Vec<Report>, threads: usize) -> Result<Timeline> {
        Timeline::from_reports_chunked(reports, threads, CHUNK_ROWS)
    }

    /// [`Timeline::from_reports`] with the size of the rowid ranges that share a large table among
    /// the threads a report gets when there are fewer reports than threads (each range is read on
    /// a connection of its own, and the rows are taken in rowid order, so the timeline is the
    /// same for any size; tests use small ones).
    pub fn from_reports_chunked(
        reports: Vec<Report>,
        threads: usize,
        chunk_rows: i64,
    ) -> Result<Timeline> {
        let metas: Vec<ExportMeta> = reports.iter().map(|r| r.meta().clone()).collect();
        let mappings = crate::model::plan_clocks(&metas.iter().collect::<Vec<_>>());
        let jobs: Vec<(Report, ClockMapping)> = reports.into_iter().zip(mappings).collect();
        let chunking = Chunking::shared(threads, jobs.len(), chunk_rows);
        let read = |(report, mapping): (Report, ClockMapping)| {
            let (timeline, ()) = read_report::<Vecs>(&report, mapping, chunking)?;
            Ok(timeline)
        };
        let mut parts = read_each(jobs, threads, read).into_iter();
        let mut timeline = match parts.next() {
            Some(first) => first?,
            None => Timeline::default(),
        };
        for part in parts {
            timeline.append(part?)?;
        }
        timeline.sort_events();
        timeline.warn_duplicate_gpu_ops();
        Ok(timeline)
    }

    /// Appends a report's own timeline (read alone, as report 0) after the reports already
    /// here, renumbering its ids and interning its strings; returns how its ids moved.
    pub(crate) fn append(&mut self, part: Timeline) -> Result<Translation> {
        let text = self.strings.absorb(&part.strings);
        let s = |id: StringId| text[id.index()];
        let report = ReportId(self.reports.len() as u32);
        let (p0, t0, g0, s0) = (
            self.processes.len() as u32,
            self.threads.len() as u32,
            self.gpus.len() as u32,
            self.streams.len() as u32,
        );
        let m0 = self.metric_series.len() as u32;
        let k0 = self.stacks.append(&part.stacks, s);
        let translation = Translation {
            process: p0,
            thread: t0,
            gpu: g0,
            stream: s0,
            series: m0,
            stack: k0,
            strings: text.clone(),
        };
        let process = |id: ProcessId| ProcessId(id.0 + p0);
        let thread = |id: ThreadId| ThreadId(id.0 + t0);
        let stream = |id: StreamId| StreamId(id.0 + s0);
        let info = part
            .reports
            .into_iter()
            .next()
            .expect("a part holds one report");
        let name = &part.hosts[info.host.index()].name;
        let host = match self.hosts.iter().position(|h| &h.name == name) {
            Some(h) => HostId(h as u32),
            None => {
                self.hosts.push(Host {
                    name: name.clone(),
                    reports: Vec::new(),
                });
                HostId(self.hosts.len() as u32 - 1)
            }
        };
        self.hosts[host.index()].reports.push(report);
        self.reports.push(ReportInfo { host, ..info });
        self.processes
            .extend(part.processes.into_iter().map(|p| Process {
                report,
                host,
                name: s(p.name),
                ..p
            }));
        self.threads
            .extend(part.threads.into_iter().map(|t| Thread {
                process: process(t.process),
                name: s(t.name),
                ..t
            }));
        self.gpus.extend(part.gpus.into_iter().map(|g| Gpu {
            process: process(g.process),
            name: s(g.name),
            ..g
        }));
        self.streams
            .extend(part.streams.into_iter().map(|st| Stream {
                process: process(st.process),
                gpu: GpuId(st.gpu.0 + g0),
                ..st
            }));
        self.kernels
            .extend(part.kernels.into_iter().map(|k| Kernel {
                stream: stream(k.stream),
                short_name: s(k.short_name),
                name: s(k.name),
                ..k
            }));
        self.memcpys
            .extend(part.memcpys.into_iter().map(|m| Memcpy {
                stream: stream(m.stream),
                ..m
            }));
        self.memsets
            .extend(part.memsets.into_iter().map(|m| Memset {
                stream: stream(m.stream),
                ..m
            }));
        self.graph_launches
            .extend(part.graph_launches.into_iter().map(|g| GraphLaunch {
                stream: stream(g.stream),
                ..g
            }));
        self.syncs.extend(part.syncs.into_iter().map(|e| SyncEvent {
            process: process(e.process),
            stream: e.stream.map(stream),
            ..e
        }));
        self.api_calls
            .extend(part.api_calls.into_iter().map(|a| ApiCall {
                thread: thread(a.thread),
                name: s(a.name),
                ..a
            }));
        self.os_calls
            .extend(part.os_calls.into_iter().map(|o| OsCall {
                thread: thread(o.thread),
                name: s(o.name),
                stack: o.stack.map(|s| StackId(s.0 + k0)),
                ..o
            }));
        let gpu = |id: GpuId| GpuId(id.0 + g0);
        self.memory
            .extend(part.memory.into_iter().map(|m| MemoryEvent {
                gpu: gpu(m.gpu),
                ..m
            }));
        self.metric_series
            .extend(part.metric_series.into_iter().map(|m| MetricSeries {
                report,
                name: s(m.name),
                ..m
            }));
        self.metrics
            .extend(part.metrics.into_iter().map(|m| MetricSample {
                series: MetricSeriesId(m.series.0 + m0),
                ..m
            }));
        self.nvtx.extend(part.nvtx.into_iter().map(|n| NvtxEvent {
            thread: thread(n.thread),
            end_thread: n.end_thread.map(thread),
            domain: s(n.domain),
            text: s(n.text),
            payload: s(n.payload),
            ..n
        }));
        self.mpi_calls
            .extend(part.mpi_calls.into_iter().map(|m| MpiCall {
                thread: thread(m.thread),
                name: s(m.name),
                ..m
            }));
        self.acc_events
            .extend(part.acc_events.into_iter().map(|a| AccEvent {
                thread: thread(a.thread),
                name: s(a.name),
                source: s(a.source),
                function: s(a.function),
                object: s(a.object),
                ..a
            }));
        self.samples
            .extend(part.samples.into_iter().map(|e| SampleEvent {
                thread: thread(e.thread),
                stack: StackId(e.stack.0 + k0),
                ..e
            }));
        self.thread_runs
            .extend(part.thread_runs.into_iter().map(|r| ThreadRun {
                thread: thread(r.thread),
                ..r
            }));
        check_unique_processes(self, report)?;
        Ok(translation)
    }
}

/// How the ids of a report read alone map onto a merged timeline's: each kind of entity moves
/// by an offset, strings through a table.
#[derive(Debug, Clone, Default)]
pub struct Translation {
    /// Added to process ids.
    pub process: u32,
    /// Added to thread ids.
    pub thread: u32,
    /// Added to GPU ids.
    pub gpu: u32,
    /// Added to stream ids.
    pub stream: u32,
    /// Added to metric series ids.
    pub series: u32,
    /// Added to call stack ids.
    pub stack: u32,
    /// The merged id of each of the report's string ids.
    pub strings: Vec<StringId>,
}

impl Translation {
    /// The translation of the first report: ids stay, strings map to themselves.
    pub(crate) fn identity(strings: &StringTable) -> Translation {
        Translation {
            strings: (0..strings.len() as u32).map(StringId).collect(),
            ..Translation::default()
        }
    }
}

/// Runs `read` on every job, up to `threads` at once; the results come back in the order of
/// `jobs`, or the first error in that order.
pub fn read_all<J: Send, T: Send, E: Send>(
    jobs: Vec<J>,
    threads: usize,
    read: impl Fn(J) -> std::result::Result<T, E> + Sync,
) -> std::result::Result<Vec<T>, E> {
    read_each(jobs, threads, read).into_iter().collect()
}

/// Runs `read` on every job, up to `threads` at once; the results come back in the order of
/// `jobs`.
pub(crate) fn read_each<J: Send, T: Send, E: Send>(
    jobs: Vec<J>,
    threads: usize,
    read: impl Fn(J) -> std::result::Result<T, E> + Sync,
) -> Vec<std::result::Result<T, E>> {
    let count = jobs.len();
    if threads <= 1 || count <= 1 {
        return jobs.into_iter().map(read).collect();
    }
    let queue = std::sync::Mutex::new(jobs.into_iter().enumerate());
    let results: std::sync::Mutex<Vec<Option<std::result::Result<T, E>>>> =
        std::sync::Mutex::new((0..count).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.min(count) {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().expect("no worker panics").next();
                    let Some((i, job)) = next else { break };
                    let part = read(job);
                    results.lock().expect("no worker panics")[i] = Some(part);
                }
            });
        }
    });
    results
        .into_inner()
        .expect("no worker panics")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// Reads one report into a timeline of its own (report 0, unsorted) whose events go to a sink
/// of kind `S`; returns the timeline and what the sink made of the events.
pub(crate) fn read_report<S: Sink>(
    report: &Report,
    mapping: ClockMapping,
    chunking: Chunking,
) -> Result<(Timeline, S::Output)> {
    read_report_into(report, mapping, chunking, S::default())
}

/// [`read_report`] into a given sink.
pub(crate) fn read_report_into<S: Sink>(
    report: &Report,
    mapping: ClockMapping,
    chunking: Chunking,
    sink: S,
) -> Result<(Timeline, S::Output)> {
    let mut strings = StringTable::default();
    let mut builder = Builder {
        sink,
        ..Builder::default()
    };
    builder.add_report(report, mapping, &mut strings, chunking)?;
    let Builder {
        mut timeline, sink, ..
    } = builder;
    timeline.strings = strings;
    let output = sink.finish(&mut timeline).map_err(|cause| Error::Spill {
        path: report.path().to_path_buf(),
        cause,
    })?;
    Ok((timeline, output))
}

/// Where a [`Builder`] puts the events it reads: into the timeline's vectors ([`Vecs`]), or
/// anywhere else (sorted under a memory budget for a streaming conversion).
pub(crate) trait Sink: Default {
    /// What the sink gives back when the report is read.
    type Output;
    /// A kernel of `process`, with its short and full names.
    fn kernel(&mut self, k: Kernel, process: ProcessId, names: (&str, &str));
    /// A memory copy of `process`.
    fn memcpy(&mut self, m: Memcpy, process: ProcessId);
    /// A memory set.
    fn memset(&mut self, m: Memset);
    /// A CUDA graph launch.
    fn graph(&mut self, g: GraphLaunch);
    /// A synchronization.
    fn sync(&mut self, s: SyncEvent);
    /// A CUDA API call of `process`.
    fn api_call(&mut self, a: ApiCall, process: ProcessId);
    /// An OS runtime call.
    fn os_call(&mut self, o: OsCall);
    /// An NVTX event.
    fn nvtx(&mut self, n: NvtxEvent);
    /// An MPI call.
    fn mpi_call(&mut self, m: MpiCall);
    /// An OpenACC event.
    fn acc_event(&mut self, a: AccEvent);
    /// A GPU metric sample.
    fn metric(&mut self, m: MetricSample);
    /// A device-memory event.
    fn memory(&mut self, m: MemoryEvent);
    /// A CPU sample.
    fn sample(&mut self, s: SampleEvent);
    /// A time a thread ran on a core.
    fn thread_run(&mut self, r: ThreadRun);
    /// Ends the report: moves into `timeline` what it keeps; fails on an earlier write error.
    fn finish(self, timeline: &mut Timeline) -> std::io::Result<Self::Output>;
}

/// Every event into the timeline's own vectors.
#[derive(Default)]
pub(crate) struct Vecs(Timeline);

impl Sink for Vecs {
    type Output = ();

    fn kernel(&mut self, k: Kernel, _: ProcessId, _: (&str, &str)) {
        self.0.kernels.push(k);
    }

    fn memcpy(&mut self, m: Memcpy, _: ProcessId) {
        self.0.memcpys.push(m);
    }

    fn memset(&mut self, m: Memset) {
        self.0.memsets.push(m);
    }

    fn graph(&mut self, g: GraphLaunch) {
        self.0.graph_launches.push(g);
    }

    fn sync(&mut self, s: SyncEvent) {
        self.0.syncs.push(s);
    }

    fn api_call(&mut self, a: ApiCall, _: ProcessId) {
        self.0.api_calls.push(a);
    }

    fn os_call(&mut self, o: OsCall) {
        self.0.os_calls.push(o);
    }

    fn nvtx(&mut self, n: NvtxEvent) {
        self.0.nvtx.push(n);
    }

    fn mpi_call(&mut self, m: MpiCall) {
        self.0.mpi_calls.push(m);
    }

    fn acc_event(&mut self, a: AccEvent) {
        self.0.acc_events.push(a);
    }

    fn metric(&mut self, m: MetricSample) {
        self.0.metrics.push(m);
    }

    fn memory(&mut self, m: MemoryEvent) {
        self.0.memory.push(m);
    }

    fn sample(&mut self, s: SampleEvent) {
        self.0.samples.push(s);
    }

    fn thread_run(&mut self, r: ThreadRun) {
        self.0.thread_runs.push(r);
    }

    fn finish(self, timeline: &mut Timeline) -> std::io::Result<()> {
        let events = self.0;
        timeline.kernels = events.kernels;
        timeline.memcpys = events.memcpys;
        timeline.memsets = events.memsets;
        timeline.graph_launches = events.graph_launches;
        timeline.syncs = events.syncs;
        timeline.api_calls = events.api_calls;
        timeline.os_calls = events.os_calls;
        timeline.nvtx = events.nvtx;
        timeline.mpi_calls = events.mpi_calls;
        timeline.acc_events = events.acc_events;
        timeline.samples = events.samples;
        timeline.thread_runs = events.thread_runs;
        timeline.metrics = events.metrics;
        timeline.memory = events.memory;
        Ok(())
    }
}

/// Accumulates entities, and hands events to its sink; the maps give each identity key one id.
#[derive(Default)]
struct Builder<S> {
    timeline: Timeline,
    sink: S,
    /// Each process's span (see [`Process::span`]), by process id.
    spans: Vec<Span>,
    /// Each thread's span (see [`Thread::span`]), by thread id.
    thread_spans: Vec<Span>,
    hosts: FxHashMap<String, HostId>,
    processes: FxHashMap<(ReportId, u32), ProcessId>,
    threads: FxHashMap<(ProcessId, u32), ThreadId>,
    gpus: FxHashMap<(ProcessId, u32), GpuId>,
    streams: FxHashMap<(ProcessId, u32, u32), StreamId>,
    /// (process, stream id) to the first stream with that id, for rows whose device is unreliable.
    streams_by_number: FxHashMap<(ProcessId, u32), StreamId>,
    /// The host of each report added so far.
    report_hosts: Vec<HostId>,
}

/// The report a builder reads, where its times go, and how its large tables are read.
#[derive(Clone, Copy)]
struct Source<'r> {
    report: &'r Report,
    id: ReportId,
    clock: Clock,
    chunking: Chunking,
}

/// First start and last end seen.
#[derive(Default, Clone, Copy)]
struct Span(Option<(Ns, Ns)>);

impl Span {
    fn add(&mut self, start: Ns, end: Ns) {
        self.0 = Some(match self.0 {
            None => (start, end),
            Some((s, e)) => (s.min(start), e.max(end)),
        });
    }
}

impl<S: Sink> Builder<S> {
    fn add_report(
        &mut self,
        report: &Report,
        mapping: ClockMapping,
        strings: &mut StringTable,
        chunking: Chunking,
    ) -> Result<()> {
        let id = ReportId(self.timeline.reports.len() as u32);
        let meta = report.meta();
        let host = self.host(&meta.hostname, id);
        self.report_hosts.push(host);
        let clock = Clock {
            offset: mapping.offset - report.time_origin(),
        };
        let mut warnings = report.warnings().clone();
        let mut span = Span::default();
        let non_utf8_before = strings.non_utf8_count();
        let cut_before = strings.cut_count();
        let mut resolver = report.strings(strings)?;
        let source = Source {
            report,
            id,
            clock,
            chunking,
        };
        let counts = self.read_events(source, &mut resolver, &mut warnings, &mut span)?;
        if counts.is_empty() {
            return Err(Error::NoEvents {
                path: report.path().to_path_buf(),
            });
        }
        self.name_entities(report, id, &mut resolver)?;
        drop(resolver);
        for (process, span) in self.timeline.processes.iter_mut().zip(&self.spans) {
            process.span = span.0;
        }
        for (thread, span) in self.timeline.threads.iter_mut().zip(&self.thread_spans) {
            thread.span = span.0;
        }
        warnings.add_n(Warning::UnusedGpuMetrics, self.unused_metric_series(id));
        warnings.add_n(
            Warning::NonUtf8Text,
            strings.non_utf8_count() - non_utf8_before,
        );
        warnings.add_n(Warning::LongText, strings.cut_count() - cut_before);
        self.timeline.reports.push(ReportInfo {
            path: report.input_path().to_path_buf(),
            host,
            meta: meta.clone(),
            clock: mapping,
            counts,
            span: span.0,
            warnings,
        });
        Ok(())
    }

    fn read_events(
        &mut self,
        Source {
            report,
            id,
            clock,
            chunking,
        }: Source,
        strings: &mut StringResolver,
        warnings: &mut Warnings,
        span: &mut Span,
    ) -> Result<RowCounts> {
        let kernels = report.read_kernels(chunking, strings, warnings, clock, |k, strings| {
            span.add(k.op.start, k.op.end);
            let stream = self.stream(id, &k.op);
            let process = self.timeline.streams[stream.index()].process;
            self.timeline.streams[stream.index()].kernels += 1;
            self.spans[process.index()].add(k.op.start, k.op.end);
            let kernel = Kernel {
                start: k.op.start,
                end: k.op.end,
                stream,
                short_name: k.short_name,
                name: k.name,
                correlation: k.op.correlation,
                grid: k.grid,
                block: k.block,
                registers: k.registers,
                static_shared: k.static_shared,
                dynamic_shared: k.dynamic_shared,
                graph_node: k.graph_node,
            };
            let names = (strings.text(k.short_name), strings.text(k.name));
            self.sink.kernel(kernel, process, names);
        })?;
        let memcpy = report.read_memcpys(chunking, warnings, clock, |m| {
            span.add(m.op.start, m.op.end);
            let stream = self.gpu_op(id, &m.op);
            let process = self.timeline.streams[stream.index()].process;
            let memcpy = Memcpy {
                start: m.op.start,
                end: m.op.end,
                stream,
                correlation: m.op.correlation,
                bytes: m.bytes,
                copy_kind: m.copy_kind,
                memory_kinds: m.memory_kinds,
            };
            self.sink.memcpy(memcpy, process);
        })?;
        let memset = report.read_memsets(chunking, warnings, clock, |m| {
            span.add(m.op.start, m.op.end);
            let stream = self.gpu_op(id, &m.op);
            self.sink.memset(Memset {
                start: m.op.start,
                end: m.op.end,
                stream,
                correlation: m.op.correlation,
                bytes: m.bytes,
                value: m.value,
                memory_kind: m.memory_kind,
            });
        })?;
        let graphs = report.read_graphs(chunking, warnings, clock, |g| {
            span.add(g.op.start, g.op.end);
            let stream = self.gpu_op(id, &g.op);
            self.sink.graph(GraphLaunch {
                start: g.op.start,
                end: g.op.end,
                stream,
                correlation: g.op.correlation,
                graph: g.graph,
                exec: g.exec,
            });
        })?;
        let sync = report.read_syncs(chunking, warnings, clock, |s| {
            span.add(s.op.start, s.op.end);
            let process = self.process(id, s.op.pid);
            // Synchronization rows carry deviceId 0 whatever the device (observed in 2026.2
            // exports), so they name a stream by number only, and only a stream that ran work.
            let stream = (s.op.stream != NO_STREAM)
                .then(|| self.streams_by_number.get(&(process, s.op.stream)).copied())
                .flatten();
            self.sink.sync(SyncEvent {
                start: s.op.start,
                end: s.op.end,
                process,
                stream,
                correlation: s.op.correlation,
                sync_type: s.sync_type,
            });
        })?;
        let cuda_api = report.read_api_calls(chunking, strings, clock, |a| {
            span.add(a.start, a.end);
            let thread = self.thread(id, a.thread);
            let process = self.drew(thread, a.start, a.end);
            let call = ApiCall {
                start: a.start,
                end: a.end,
                thread,
                name: a.name,
                correlation: a.correlation,
                class: a.class,
                return_value: a.return_value,
            };
            self.sink.api_call(call, process);
        })?;
        let mut mpi = 0;
        let nvtx = report.read_nvtx(chunking, strings, warnings, clock, |n| {
            span.add(n.start, n.end.unwrap_or(n.start));
            let thread = self.thread(id, n.thread);
            let end_thread = n.end_thread.map(|t| self.thread(id, t));
            if n.kind != NvtxKind::Metadata {
                let end = n.end.unwrap_or(match n.kind {
                    NvtxKind::Mark => n.start,
                    _ => Ns(i64::MAX),
                });
                self.drew(thread, n.start, end);
            }
            if n.mpi && n.kind == NvtxKind::PushPop {
                mpi += 1;
                self.sink.mpi_call(MpiCall {
                    start: n.start,
                    end: n.end.unwrap_or(Ns(i64::MAX)),
                    thread,
                    name: n.text,
                    table: MpiTable::Nvtx,
                    peer: NO_RANK,
                    tag: 0,
                    comm: 0,
                    size: 0,
                    recv_size: 0,
                    request: 0,
                });
                return;
            }
            self.sink.nvtx(NvtxEvent {
                start: n.start,
                end: n.end,
                kind: n.kind,
                thread,
                end_thread,
                domain: n.domain,
                text: n.text,
                payload: n.payload,
            });
        })?;
        let gpu_metrics = self.read_metrics(report, id, clock, chunking, strings, span)?;
        let memory = report.read_memory(chunking, clock, |m| {
            span.add(m.time, m.time);
            let process = self.process(id, m.pid);
            // Memory still allocated is drawn to the end of the export.
            self.spans[process.index()].add(m.time, Ns(i64::MAX));
            let gpu = self.gpu(process, m.device);
            self.sink.memory(MemoryEvent {
                time: m.time,
                bytes: m.bytes,
                gpu,
            });
        })?;
        let mut chains: FxHashMap<i64, StackId> = FxHashMap::default();
        let stacks = &mut self.timeline.stacks;
        report.read_os_callchains(strings, |chain, frames| {
            chains.insert(chain, stacks.intern(frames));
        })?;
        let osrt = report.read_os_calls(chunking, strings, clock, |o| {
            span.add(o.start, o.end);
            let thread = self.thread(id, o.thread);
            self.drew(thread, o.start, o.end);
            self.sink.os_call(OsCall {
                start: o.start,
                end: o.end,
                thread,
                name: o.name,
                stack: o.callchain.and_then(|c| chains.get(&c).copied()),
            });
        })?;
        mpi += report.read_mpi_calls(chunking, strings, warnings, clock, |m| {
            span.add(m.start, m.end);
            let thread = self.thread(id, m.thread);
            if m.table != MpiTable::Request {
                self.drew(thread, m.start, m.end);
            }
            self.sink.mpi_call(MpiCall {
                start: m.start,
                end: m.end,
                thread,
                name: m.name,
                table: m.table,
                peer: m.peer,
                tag: m.tag,
                comm: m.comm,
                size: m.size,
                recv_size: m.recv_size,
                request: m.request,
            });
        })?;
        let openacc = report.read_openacc(chunking, strings, clock, |a| {
            let r = a.row;
            span.add(r.start, r.end);
            let thread = self.thread(id, r.thread);
            self.drew(thread, r.start, r.end);
            self.sink.acc_event(AccEvent {
                start: r.start,
                end: r.end,
                thread,
                table: r.table,
                event_kind: r.event_kind,
                name: r.name,
                source: a.source,
                function: r.function.unwrap_or(StringId::EMPTY),
                object: r.object.unwrap_or(StringId::EMPTY),
                bytes: r.bytes,
            });
        })?;
        let samples = report.read_samples(strings, warnings, clock, |sample| {
            span.add(sample.time, sample.time);
            let thread = self.thread(id, sample.thread);
            self.drew(thread, sample.time, sample.time);
            let stack = self.timeline.stacks.intern(sample.frames);
            self.sink.sample(SampleEvent {
                time: sample.time,
                thread,
                stack,
                cpu: sample.cpu,
            });
        })?;
        let sched = report.read_thread_runs(warnings, clock, |run| {
            span.add(run.start, run.end);
            let thread = self.thread(id, run.thread);
            self.drew(thread, run.start, run.end);
            self.sink.thread_run(ThreadRun {
                start: run.start,
                end: run.end,
                thread,
                cpu: run.cpu,
                left_as: run.left_as,
            });
        })?;
        Ok(RowCounts {
            kernels,
            memcpy,
            memset,
            cuda_api,
            sync,
            graphs,
            nvtx,
            osrt,
            gpu_metrics,
            memory,
            mpi,
            openacc,
            samples,
            sched,
        })
    }

    /// A thread drew `[start, end]`: its span and its process's grow; returns the process.
    fn drew(&mut self, thread: ThreadId, start: Ns, end: Ns) -> ProcessId {
        self.thread_spans[thread.index()].add(start, end);
        let process = self.timeline.threads[thread.index()].process;
        self.spans[process.index()].add(start, end);
        process
    }

    /// The stream of a copy, set or graph launch, with its span added to its process's.
    fn gpu_op(&mut self, report: ReportId, op: &GpuOpRow) -> StreamId {
        let stream = self.stream(report, op);
        let process = self.timeline.streams[stream.index()].process;
        self.spans[process.index()].add(op.start, op.end);
        stream
    }

    /// How many of report `id`'s metric series belong to a GPU none of its processes used (a
    /// GPU's index is its host index, else its CUDA ordinal, as `Activity::metric_series` maps).
    fn unused_metric_series(&self, id: ReportId) -> u64 {
        let t = &self.timeline;
        let used: FxHashSet<u32> = t
            .gpus
            .iter()
            .filter(|g| t.processes[g.process.index()].report == id)
            .map(|g| g.host_gpu.map_or(g.device, |i| i as u32))
            .collect();
        t.metric_series
            .iter()
            .filter(|s| s.report == id && !used.contains(&s.gpu_index))
            .count() as u64
    }

    /// Reads the report's GPU metrics, one series per (GPU index, metric id).
    fn read_metrics(
        &mut self,
        report: &Report,
        id: ReportId,
        clock: Clock,
        chunking: Chunking,
        strings: &mut StringResolver,
        span: &mut Span,
    ) -> Result<u64> {
        let names = report.metric_names()?;
        let mut series: FxHashMap<(u32, u32), MetricSeriesId> = FxHashMap::default();
        let (timeline, sink) = (&mut self.timeline, &mut self.sink);
        report.read_metrics(chunking, clock, |m| {
            span.add(m.time, m.time);
            let key = (m.gpu_index, m.metric_id);
            let series = *series.entry(key).or_insert_with(|| {
                let name = match names.get(&m.metric_id) {
                    Some(name) => strings.intern(name),
                    None => strings.intern(&format!("metric {}", m.metric_id)),
                };
                timeline.metric_series.push(MetricSeries {
                    report: id,
                    gpu_index: m.gpu_index,
                    metric_id: m.metric_id,
                    name,
                    span: (m.time, m.time),
                });
                MetricSeriesId(timeline.metric_series.len() as u32 - 1)
            });
            let s = &mut timeline.metric_series[series.index()].span;
            *s = (s.0.min(m.time), s.1.max(m.time));
            sink.metric(MetricSample {
                time: m.time,
                value: m.value,
                series,
            });
        })
    }

    fn host(&mut self, name: &str, report: ReportId) -> HostId {
        let next = HostId(self.hosts.len() as u32);
        let id = *self.hosts.entry(name.to_string()).or_insert(next);
        if id == next {
            self.timeline.hosts.push(Host {
                name: name.to_string(),
                reports: Vec::new(),
            });
        }
        self.timeline.hosts[id.index()].reports.push(report);
        id
    }

    fn process(&mut self, report: ReportId, pid: u32) -> ProcessId {
        let processes = &mut self.timeline.processes;
        let spans = &mut self.spans;
        let host = self.report_hosts[report.index()];
        *self.processes.entry((report, pid)).or_insert_with(|| {
            processes.push(Process {
                report,
                host,
                pid,
                name: StringId::EMPTY,
                span: None,
                mpi_rank: None,
            });
            spans.push(Span::default());
            ProcessId(processes.len() as u32 - 1)
        })
    }

    fn thread(&mut self, report: ReportId, id: GlobalId) -> ThreadId {
        let process = self.process(report, id.pid);
        let threads = &mut self.timeline.threads;
        let spans = &mut self.thread_spans;
        *self.threads.entry((process, id.tid)).or_insert_with(|| {
            threads.push(Thread {
                process,
                tid: id.tid,
                name: StringId::EMPTY,
                span: None,
            });
            spans.push(Span::default());
            ThreadId(threads.len() as u32 - 1)
        })
    }

    fn gpu(&mut self, process: ProcessId, device: u32) -> GpuId {
        let gpus = &mut self.timeline.gpus;
        *self.gpus.entry((process, device)).or_insert_with(|| {
            gpus.push(Gpu {
                process,
                device,
                host_gpu: None,
                name: StringId::EMPTY,
            });
            GpuId(gpus.len() as u32 - 1)
        })
    }

    fn stream(&mut self, report: ReportId, op: &GpuOpRow) -> StreamId {
        let process = self.process(report, op.pid);
        if let Some(&id) = self.streams.get(&(process, op.device, op.stream)) {
            return id;
        }
        let gpu = self.gpu(process, op.device);
        let id = StreamId(self.timeline.streams.len() as u32);
        self.timeline.streams.push(Stream {
            process,
            gpu,
            context: op.context,
            stream: op.stream,
            priority: None,
            kernels: 0,
        });
        self.streams.insert((process, op.device, op.stream), id);
        self.streams_by_number
            .entry((process, op.stream))
            .or_insert(id);
        id
    }

    /// Names the processes, threads and GPUs of one report and attaches stream priorities.
    fn name_entities(
        &mut self,
        report: &Report,
        id: ReportId,
        strings: &mut StringResolver,
    ) -> Result<()> {
        let process_names = report.process_names()?;
        let wanted: FxHashSet<GlobalId> = self
            .timeline
            .threads
            .iter()
            .filter_map(|t| {
                let p = &self.timeline.processes[t.process.index()];
                (p.report == id).then_some(GlobalId {
                    pid: p.pid,
                    tid: t.tid,
                })
            })
            .collect();
        let mut thread_names = report.thread_names(strings, &wanted)?;
        thread_names.extend(report.nvtx_thread_names(strings)?);
        let cuda_devices = report.cuda_devices()?;
        let stream_infos = report.stream_infos()?;
        let host_gpus = &report.meta().gpus;
        let Timeline {
            processes,
            threads,
            gpus,
            streams,
            ..
        } = &mut self.timeline;
        let mpi_ranks = report.mpi_ranks()?;
        for process in processes.iter_mut().filter(|p| p.report == id) {
            if let Some(name) = process_names.get(&process.pid) {
                process.name = strings.intern(name);
            }
            process.mpi_rank = mpi_ranks.get(&process.pid).copied();
        }
        for thread in threads.iter_mut() {
            let process = &mut processes[thread.process.index()];
            if process.report != id {
                continue;
            }
            let global = GlobalId {
                pid: process.pid,
                tid: thread.tid,
            };
            if let Some(&name) = thread_names.get(&global) {
                thread.name = name;
                if process.mpi_rank.is_none() {
                    process.mpi_rank = mpi_rank_name(strings.text(name));
                }
            }
        }
        for gpu in gpus.iter_mut() {
            let pid = processes[gpu.process.index()].pid;
            if processes[gpu.process.index()].report != id {
                continue;
            }
            let host_gpu = cuda_devices
                .get(&(pid, gpu.device))
                .copied()
                .unwrap_or(i64::from(gpu.device));
            if let Some(found) = host_gpus.iter().find(|g| g.id == host_gpu) {
                gpu.host_gpu = Some(found.id);
                gpu.name = strings.intern(&found.name);
            }
        }
        for stream in streams.iter_mut() {
            let process = &processes[stream.process.index()];
            if process.report != id {
                continue;
            }
            stream.priority = stream_infos
                .iter()
                .find(|s| {
                    s.pid == process.pid && s.stream == stream.stream && s.context == stream.context
                })
                .map(|s| s.priority);
        }
        Ok(())
    }
}

/// Two reports must not hold the same process (same host and pid): checks report `id` against
/// the ones before it.
fn check_unique_processes(timeline: &Timeline, id: ReportId) -> Result<()> {
    let host = timeline.reports[id.index()].host;
    let mine = timeline.processes.iter().filter(|p| p.report == id);
    for process in mine {
        let other = timeline
            .processes
            .iter()
            .find(|p| p.report != id && p.host == host && p.pid == process.pid);
        if let Some(other) = other {
            return Err(Error::DuplicateProcess {
                first: timeline.reports[other.report.index()].path.clone(),
                second: timeline.reports[id.index()].path.clone(),
                host: timeline.hosts[host.index()].name.clone(),
                pid: process.pid,
            });
        }
    }
    Ok(())
}

impl Timeline {
    /// Counts, per report, the kernels, copies and sets that repeat the one before them in
    /// every field (a duplicated row: a damaged or twice-merged export), in a warning: they
    /// are kept as the file has them, but their time counts twice.
    fn warn_duplicate_gpu_ops(&mut self) {
        /// The streams of the rows of `rows` (sorted) that repeat the row before them.
        fn repeats<T: PartialEq>(
            rows: &[T],
            stream: fn(&T) -> StreamId,
        ) -> impl Iterator<Item = StreamId> + '_ {
            rows.windows(2)
                .filter(|w| w[0] == w[1])
                .map(move |w| stream(&w[0]))
        }
        let mut per_report = vec![0u64; self.reports.len()];
        let streams = repeats(&self.kernels, |k| k.stream)
            .chain(repeats(&self.memcpys, |m| m.stream))
            .chain(repeats(&self.memsets, |m| m.stream));
        for stream in streams {
            let process = self.streams[stream.index()].process;
            per_report[self.processes[process.index()].report.index()] += 1;
        }
        for (report, n) in self.reports.iter_mut().zip(per_report) {
            report.warnings.add_n(Warning::DuplicateGpuOps, n);
        }
    }

    /// Sorts every event vector by time (and a total tie-break, so the order is deterministic).
    pub(crate) fn sort_events(&mut self) {
        let t = self;
        t.kernels
            .sort_unstable_by_key(|k| (k.start, k.end, k.stream, k.correlation));
        t.memcpys
            .sort_unstable_by_key(|m| (m.start, m.end, m.stream, m.correlation));
        t.memsets
            .sort_unstable_by_key(|m| (m.start, m.end, m.stream, m.correlation));
        t.graph_launches
            .sort_unstable_by_key(|g| (g.start, g.end, g.stream, g.correlation));
        t.syncs
            .sort_unstable_by_key(|s| (s.start, s.end, s.process, s.correlation));
        t.api_calls
            .sort_unstable_by_key(|a| (a.start, a.end, a.thread, a.correlation));
        t.os_calls
            .sort_unstable_by_key(|o| (o.start, Reverse(o.end), o.thread, o.name));
        t.mpi_calls
            .sort_unstable_by_key(|m| (m.start, Reverse(m.end), *m));
        t.acc_events
            .sort_unstable_by_key(|a| (a.start, Reverse(a.end), *a));
        t.metrics
            .sort_unstable_by_key(|m| (m.series, m.time, m.value));
        t.memory.sort_by_key(|m| m.time);
        t.samples.sort_unstable();
        t.thread_runs.sort_unstable();
        // Enclosing ranges first on equal starts; an open range encloses everything after it.
        t.nvtx
            .sort_by_key(|n| (n.start, Reverse(n.end.map_or(i64::MAX, |e| e.0)), n.thread));
    }
}

/// An event of a report read alone, moved onto a merged timeline: its ids by a
/// [`Translation`], its times by `shift` ns (the report's clock offset).
pub trait Moved {
    /// The event as the merged timeline holds it.
    fn moved(self, t: &Translation, shift: i64) -> Self;
}

impl Translation {
    fn thread(&self, id: ThreadId) -> ThreadId {
        ThreadId(id.0 + self.thread)
    }

    fn stream(&self, id: StreamId) -> StreamId {
        StreamId(id.0 + self.stream)
    }

    fn text(&self, id: StringId) -> StringId {
        self.strings[id.index()]
    }
}

impl Moved for Kernel {
    fn moved(self, t: &Translation, d: i64) -> Self {
        Kernel {
            start: self.start.moved(d),
            end: self.end.moved(d),
            stream: t.stream(self.stream),
            short_name: t.text(self.short_name),
            name: t.text(self.name),
            ..self
        }
    }
}

impl Moved for Memcpy {
    fn moved(self, t: &Translation, d: i64) -> Self {
        Memcpy {
            start: self.start.moved(d),
            end: self.end.moved(d),
            stream: t.stream(self.stream),
            ..self
        }
    }
}

impl Moved for Memset {
    fn moved(self, t: &Translation, d: i64) -> Self {
        Memset {
            start: self.start.moved(d),
            end: self.end.moved(d),
            stream: t.stream(self.stream),
            ..self
        }
    }
}

impl Moved for GraphLaunch {
    fn moved(self, t: &Translation, d: i64) -> Self {
        GraphLaunch {
            start: self.start.moved(d),
            end: self.end.moved(d),
            stream: t.stream(self.stream),
            ..self
        }
    }
}

impl Moved for ApiCall {
    fn moved(self, t: &Translation, d: i64) -> Self {
        ApiCall {
            start: self.start.moved(d),
            end: self.end.moved(d),
            thread: t.thread(self.thread),
            name: t.text(self.name),
            ..self
        }
    }
}

impl Moved for SyncEvent {
    fn moved(self, t: &Translation, d: i64) -> Self {
        SyncEvent {
            start: self.start.moved(d),
            end: self.end.moved(d),
            process: ProcessId(self.process.0 + t.process),
            stream: self.stream.map(|s| t.stream(s)),
            ..self
        }
    }
}

impl Moved for MpiCall {
    fn moved(self, t: &Translation, d: i64) -> Self {
        MpiCall {
            start: self.start.moved(d),
            end: self.end.moved(d),
            thread: t.thread(self.thread),
            name: t.text(self.name),
            ..self
        }
    }
}

impl Moved for AccEvent {
    fn moved(self, t: &Translation, d: i64) -> Self {
        AccEvent {
            start: self.start.moved(d),
            end: self.end.moved(d),
            thread: t.thread(self.thread),
            name: t.text(self.name),
            source: t.text(self.source),
            function: t.text(self.function),
            object: t.text(self.object),
            ..self
        }
    }
}

impl Moved for OsCall {
    fn moved(self, t: &Translation, d: i64) -> Self {
        OsCall {
            start: self.start.moved(d),
            end: self.end.moved(d),
            thread: t.thread(self.thread),
            name: t.text(self.name),
            stack: self.stack.map(|s| StackId(s.0 + t.stack)),
        }
    }
}

impl Moved for SampleEvent {
    fn moved(self, t: &Translation, d: i64) -> Self {
        SampleEvent {
            time: self.time.moved(d),
            thread: t.thread(self.thread),
            stack: StackId(self.stack.0 + t.stack),
            ..self
        }
    }
}

impl Moved for ThreadRun {
    fn moved(self, t: &Translation, d: i64) -> Self {
        ThreadRun {
            start: self.start.moved(d),
            end: self.end.moved(d),
            thread: t.thread(self.thread),
            ..self
        }
    }
}

impl Moved for MetricSample {
    fn moved(self, t: &Translation, d: i64) -> Self {
        MetricSample {
            time: self.time.moved(d),
            series: MetricSeriesId(self.series.0 + t.series),
            ..self
        }
    }
}

impl Moved for MemoryEvent {
    fn moved(self, t: &Translation, d: i64) -> Self {
        MemoryEvent {
            time: self.time.moved(d),
            gpu: GpuId(self.gpu.0 + t.gpu),
            ..self
        }
    }
}
