//! One exported process's chunk, written as its events come in time order: its process track,
//! one thread track per CPU thread (CUDA API calls, OS runtime calls, NVTX push/pop ranges and
//! marks; nesting lanes), one track per NVTX start/end domain, one track per CUDA stream grouped
//! per device (strict lanes), flow arrows from the launching API calls, the counters that draw
//! the overlap analysis, the GPU metrics and the device memory allocated.
//!
//! Ids come from the process's position `k` in the plan: track uuids `(k + 1) << 32 | n`,
//! sequence ids `FIRST_SEQUENCE + k · 2^16 + n`, pid `10000 + k`, tids `(k + 1) · 10^6 + n`.

use super::lanes::Lanes;
use super::protos::{
    CounterDescriptor, ProcessDescriptor, ThreadDescriptor, TrackDescriptor,
    counter_descriptor::Unit, track_descriptor::ChildTracksOrdering,
};
use super::samples::Samples;
use super::sequence::{Arg, Category, Name, PacketStream, Sequence, Texts, Value};
use super::{Counts, Plan};
use crate::classify::Role;
use crate::classify::mpi::MpiClass;
use crate::classify::streams::BARRIER;
use crate::export::counters::{Changes, Counters};
use crate::export::prepare::Prepared;
use crate::export::stream::{Event, Item, copy_names};
use crate::hash::FxHashMap;
use crate::model::{
    ACC_EVENT_KINDS, AccEvent, AccTable, GpuId, Kernel, MetricSeriesId, MpiCall, MpiTable, NO_RANK,
    NvtxEvent, NvtxKind, ProcessId, SampleEvent, StackId, StreamId, StringId, ThreadId, ThreadRun,
    split_api_version,
};
use std::io::{self, Write};

/// Track order under a process: threads, then NVTX ranges, GPUs, counters.
const NVTX_ORDER: i32 = 1_000;
/// GPU groups after threads and NVTX.
const GPU_ORDER: i32 = 2_000;
/// The overlap counters after the GPUs.
const COUNTER_ORDER: i32 = 3_000;
/// The achieved-FLOP/s counter's track: the FLOP rate of the kernels in flight (each kernel's
/// FLOPs, as `mfu` counts them, over its time), TFLOP/s.
const ACHIEVED: &str = "achieved TFLOP/s";
/// The GPU metric counters after the overlap counters.
const METRIC_ORDER: i32 = 4_000;
/// The allocated-memory counters last.
const MEMORY_ORDER: i32 = 5_000;
/// The first process sequence id (lower ones are the descriptors' and the head's).
const FIRST_SEQUENCE: u32 = 16;
/// Sequences a process may have.
const SEQUENCES_PER_PROCESS: u32 = 1 << 16;

/// A track drawn on lanes: its lanes, and where (parent, name, order) another lane goes.
struct LaneTrack {
    lanes: Lanes,
    parent: u64,
    name: String,
    /// Every lane's order among its siblings; None: the lane's index.
    order: Option<i32>,
}

/// A stream's track: its lanes (created with its first operation) and its role.
struct StreamTrack {
    track: LaneTrack,
    role: Role,
}

/// A GPU's allocated bytes.
struct Memory {
    sequence: Sequence,
    total: i64,
    /// Whether a step is due at the current time.
    changed: bool,
    /// Whether earlier events left a step due at the window's start.
    due_at_start: bool,
}

/// What every track of a process writes with: its place in the plan, its output, its counts
/// and the next ids.
struct Core<'p, 'a, 't, W: Write> {
    plan: &'p Plan<'a, 't>,
    prepared: &'p Prepared,
    position: usize,
    process: ProcessId,
    window: (i64, i64),
    out: PacketStream<W>,
    counts: Counts,
    next_uuid: u64,
    next_sequence: u32,
    next_tid: i64,
    /// The flow ids of the slice being written.
    flows: Vec<u64>,
    /// The call stack of the slice being written.
    callstack: Option<StackId>,
}

/// The writer of one process's chunk.
pub struct ProcessWriter<'p, 'a, 't, W: Write> {
    core: Core<'p, 'a, 't, W>,
    threads: FxHashMap<ThreadId, LaneTrack>,
    /// Each thread's tid in the trace.
    tids: FxHashMap<ThreadId, u32>,
    /// Each thread's `thread state` track (created with its first run).
    runs: FxHashMap<ThreadId, LaneTrack>,
    /// The CPU samples' sequence (created with the first sample).
    samples: Option<Samples>,
    /// Host waits' returns drawn so far.
    returned: usize,
    domains: FxHashMap<StringId, LaneTrack>,
    streams: FxHashMap<StreamId, StreamTrack>,
    counters: Option<(Counters, Vec<Sequence>)>,
    metrics: FxHashMap<(GpuId, MetricSeriesId), Sequence>,
    memory: FxHashMap<GpuId, Memory>,
}

impl<'p, 'a, 't, W: Write> ProcessWriter<'p, 'a, 't, W> {
    /// Writes the process's descriptors and readies its tracks.
    pub fn new(
        plan: &'p Plan<'a, 't>,
        position: usize,
        prepared: &'p Prepared,
        out: PacketStream<W>,
    ) -> io::Result<Self> {
        let exported = &plan.exported[position];
        let core = Core {
            plan,
            prepared,
            position,
            process: exported.process,
            window: exported.window,
            out,
            counts: Counts::default(),
            next_uuid: 1,
            next_sequence: 0,
            next_tid: 0,
            flows: Vec::new(),
            callstack: None,
        };
        let mut w = ProcessWriter {
            core,
            threads: FxHashMap::default(),
            tids: FxHashMap::default(),
            runs: FxHashMap::default(),
            samples: None,
            returned: 0,
            domains: FxHashMap::default(),
            streams: FxHashMap::default(),
            counters: None,
            metrics: FxHashMap::default(),
            memory: FxHashMap::default(),
        };
        let uuid = w.core.track(TrackDescriptor {
            process: Some(ProcessDescriptor {
                pid: Some(w.core.pid()),
                process_name: Some(process_name(plan, position)),
                process_labels: w.core.labels(),
            }),
            sibling_order_rank: Some(position as i32),
            ..TrackDescriptor::default()
        })?;
        if exported.slices {
            w.thread_tracks()?;
            w.domain_tracks(uuid)?;
            w.stream_tracks(uuid)?;
        }
        w.counter_tracks(uuid)?;
        w.metric_tracks(uuid)?;
        w.memory_tracks(uuid)?;
        Ok(w)
    }

    /// One thread track per CPU thread with events besides NVTX start/end ranges, in tid order.
    fn thread_tracks(&mut self) -> io::Result<()> {
        let timeline = self.core.plan.activity.timeline;
        let threads = self
            .core
            .prepared
            .threads
            .iter()
            .filter(|(.., besides)| *besides);
        for (order, &(tid, thread, _)) in threads.enumerate() {
            let name = match timeline.text(timeline.thread(thread).name) {
                "" => format!("thread [{tid}]"),
                name => format!("{name} [{tid}]"),
            };
            let pid = self.core.pid();
            let tid_here = (self.core.position as i64 + 1) * 1_000_000 + self.core.next_tid;
            self.core.next_tid += 1;
            let uuid = self.core.track(TrackDescriptor {
                thread: Some(ThreadDescriptor {
                    pid: Some(pid),
                    tid: Some(tid_here),
                    thread_name: Some(name.clone()),
                }),
                sibling_order_rank: Some(order as i32),
                ..TrackDescriptor::default()
            })?;
            let mut lanes = Lanes::new(true);
            lanes.add(self.core.sequence(uuid)?);
            let track = LaneTrack {
                lanes,
                parent: uuid,
                name: format!("{name} · overlapping"),
                order: None,
            };
            self.threads.insert(thread, track);
            self.tids.insert(thread, tid_here as u32);
        }
        Ok(())
    }

    /// One track per NVTX domain of start/end ranges.
    fn domain_tracks(&mut self, process_uuid: u64) -> io::Result<()> {
        let timeline = self.core.plan.activity.timeline;
        for (order, &domain) in self.core.prepared.domains.iter().enumerate() {
            let name = match timeline.text(domain) {
                "" => "NVTX".to_string(),
                d => format!("NVTX · {d}"),
            };
            let order = NVTX_ORDER + order as i32;
            let mut lanes = Lanes::new(true);
            lanes.add(self.core.child(process_uuid, name.clone(), order)?);
            let track = LaneTrack {
                lanes,
                parent: process_uuid,
                name,
                order: None,
            };
            self.domains.insert(domain, track);
        }
        Ok(())
    }

    /// A group track per device, and the streams' tracks (whose lanes start with their first
    /// operation).
    fn stream_tracks(&mut self, process_uuid: u64) -> io::Result<()> {
        let timeline = self.core.plan.activity.timeline;
        let mut group: Option<(u32, u64)> = None;
        for (order, s) in self.core.prepared.streams_lanes.iter().enumerate() {
            let group_uuid = match group {
                Some((d, uuid)) if d == s.device => uuid,
                _ => {
                    let gpu = timeline.gpu(timeline.stream(s.stream).gpu);
                    let name = match timeline.text(gpu.name) {
                        "" => format!("GPU {}", s.device),
                        product => format!("GPU {} · {product}", s.device),
                    };
                    let uuid = self.core.track(TrackDescriptor {
                        parent_uuid: Some(process_uuid),
                        name: Some(name),
                        child_ordering: Some(ChildTracksOrdering::Explicit as i32),
                        sibling_order_rank: Some(GPU_ORDER + s.device as i32),
                        ..TrackDescriptor::default()
                    })?;
                    group = Some((s.device, uuid));
                    uuid
                }
            };
            let role = self
                .core
                .prepared
                .streams
                .role(s.stream)
                .unwrap_or(Role::Copy);
            let name = format!(
                "GPU {} · stream {} · {}",
                s.device,
                s.number,
                role.name(self.core.plan.rules)
            );
            let track = LaneTrack {
                lanes: Lanes::new(false),
                parent: group_uuid,
                name,
                order: Some(order as i32),
            };
            self.streams.insert(s.stream, StreamTrack { track, role });
        }
        Ok(())
    }

    /// The overlap counters' tracks.
    fn counter_tracks(&mut self, process_uuid: u64) -> io::Result<()> {
        let Some(counters) = Counters::new(self.core.plan, self.core.position, self.core.prepared)
        else {
            return Ok(());
        };
        let mut names = vec!["compute kernels in flight".to_string()];
        names.extend(
            counters
                .roles()
                .map(|role| format!("communication in flight · {role}")),
        );
        names.push("exposed communication".to_string());
        if counters.waits() {
            names.push("waiting in collectives".to_string());
        }
        if counters.on_path() {
            names.push("on the critical path".to_string());
        }
        if counters.achieves() {
            names.push(ACHIEVED.to_string());
        }
        let mut sequences = Vec::new();
        for (order, name) in names.into_iter().enumerate() {
            sequences.push(self.core.counter_track(
                process_uuid,
                name,
                COUNTER_ORDER + order as i32,
            )?);
        }
        self.counters = Some((counters, sequences));
        Ok(())
    }

    /// One counter track per GPU metric per GPU (`GPU 0 · SMs Active`).
    fn metric_tracks(&mut self, process_uuid: u64) -> io::Result<()> {
        let activity = self.core.plan.activity;
        let timeline = activity.timeline;
        let (start, end) = self.core.window;
        // A series sampled only outside the window has no track (it would have no sample).
        let sampled = |&(_, s): &(GpuId, MetricSeriesId)| {
            let (first, last) = timeline.metric_series(s).span;
            first.0 <= end && last.0 >= start
        };
        for (order, (gpu, series)) in activity
            .metric_series(self.core.process)
            .into_iter()
            .filter(sampled)
            .enumerate()
        {
            let name = format!(
                "GPU {} · {}",
                timeline.gpu(gpu).device,
                timeline.text(timeline.metric_series(series).name)
            );
            let seq = self
                .core
                .counter_track(process_uuid, name, METRIC_ORDER + order as i32)?;
            self.metrics.insert((gpu, series), seq);
        }
        Ok(())
    }

    /// One counter track per GPU with device-memory events (`GPU 0 · memory allocated
    /// (bytes)`).
    fn memory_tracks(&mut self, process_uuid: u64) -> io::Result<()> {
        let timeline = self.core.plan.activity.timeline;
        for (order, &gpu) in self.core.prepared.memory.iter().enumerate() {
            let name = format!(
                "GPU {} · memory allocated (bytes)",
                timeline.gpu(gpu).device
            );
            let sequence =
                self.core
                    .counter_track(process_uuid, name, MEMORY_ORDER + order as i32)?;
            let memory = Memory {
                sequence,
                total: 0,
                changed: false,
                due_at_start: false,
            };
            self.memory.insert(gpu, memory);
        }
        Ok(())
    }

    /// Closes every open slice; the stream and what was written.
    pub fn finish(mut self) -> io::Result<(PacketStream<W>, Counts)> {
        for track in self
            .threads
            .values_mut()
            .chain(self.runs.values_mut())
            .chain(self.domains.values_mut())
            .chain(self.streams.values_mut().map(|s| &mut s.track))
        {
            track.lanes.finish(&mut self.core.out)?;
        }
        // An overlap counter that never changed (no compute kernel, no exposed communication)
        // is 0 throughout: said once, so that no counter track lacks samples.
        let start = self.core.plan.rebase(self.core.window.0);
        let counters = self
            .counters
            .iter_mut()
            .flat_map(|(_, seqs)| seqs.iter_mut());
        for seq in counters.filter(|s| s.is_empty()) {
            seq.counter(&mut self.core.out, start, 0)?;
        }
        Ok((self.core.out, self.core.counts))
    }
}

impl<W: Write> crate::export::stream::Writer<()> for ProcessWriter<'_, '_, '_, W> {
    /// A counter change, or the step at the window's start of memory allocated before it.
    fn due(&self) -> Option<i64> {
        let counters = self.counters.as_ref().and_then(|(c, _)| c.due());
        let memory = self
            .memory
            .values()
            .any(|m| m.due_at_start)
            .then_some(self.core.window.0);
        let sync = (self.core.prepared.syncs.returns.get(self.returned)).map(|(r, _)| r.time);
        counters.into_iter().chain(memory).chain(sync).min()
    }

    /// Draws one event (of a process drawn by its counters only: what the counters count).
    fn item(&mut self, _: &mut (), item: &Item) -> io::Result<()> {
        if let (Event::Kernel(_) | Event::Graph(_) | Event::Memcpy(_), Some((counters, _))) =
            (item.event, &mut self.counters)
        {
            counters.add(self.core.plan, self.core.prepared, item);
        }
        let counter = matches!(item.event, Event::Metric(..) | Event::Memory(_));
        if !counter && !self.core.plan.exported[self.core.position].slices {
            return Ok(());
        }
        match item.event {
            Event::Api(a) => {
                self.core.counts.api += 1;
                let flow = (self.core.prepared.launches.ops(a.correlation) > 0)
                    .then(|| flow_id(self.core.process, a.correlation));
                let timeline = self.core.plan.activity.timeline;
                let label = (Name::Text(a.name), Category::CudaApi);
                let version = split_api_version(timeline.text(a.name)).1;
                let failed = (a.return_value != 0).then_some(a.return_value);
                let mut args = [(Arg::Correlation, Value::Uint(a.correlation.into())); 3];
                let mut n = 1;
                for (arg, value) in [
                    (Arg::ApiVersion, version),
                    (Arg::ReturnValue, failed.map(u32::from)),
                ] {
                    if let Some(v) = value {
                        args[n] = (arg, Value::Uint(v.into()));
                        n += 1;
                    }
                }
                self.cpu_slice(a.thread, item, label, &args[..n], flow)?;
                match failed {
                    Some(code) => self.failed_call(a.thread, item, code),
                    None => Ok(()),
                }
            }
            Event::Os(o) => {
                self.core.counts.os_calls += 1;
                let label = (Name::Text(o.name), Category::OsRuntime);
                self.core.callstack = o.stack;
                self.cpu_slice(o.thread, item, label, &[], None)
            }
            Event::Mpi(m) => self.mpi(&m, item),
            Event::Sample(s) => self.sample(&s, item),
            // What it waited for is linked (`Prepared::syncs`).
            Event::Sync(_) => Ok(()),
            Event::Run(r) => self.run(&r, item),
            Event::Acc(a) => {
                self.core.counts.acc_events += 1;
                let (label, args) = acc_slice(&a);
                self.cpu_slice(a.thread, item, label, &args, None)
            }
            Event::Nvtx(n) => self.nvtx(&n, item),
            Event::Kernel(k) => self.kernel(&k, item),
            Event::Graph(g) => {
                let args = [
                    (Arg::GraphId, Value::Uint(g.graph.into())),
                    (Arg::GraphExecId, Value::Uint(g.exec.into())),
                    (Arg::Correlation, Value::Uint(g.correlation.into())),
                ];
                self.core.counts.graphs += 1;
                let label = (Name::Fixed("CUDA graph"), Category::Graph);
                self.gpu_slice(g.stream, item, label, &args, g.correlation, true)
            }
            Event::Memcpy(m) => {
                let (name, kind) = copy_names(m.copy_kind);
                let mut args = vec![
                    (Arg::Bytes, Value::Uint(m.bytes)),
                    (Arg::CopyKind, Value::Fixed(kind)),
                    (Arg::Correlation, Value::Uint(m.correlation.into())),
                ];
                args.extend(throughput(m.bytes, item));
                let (source, destination) = m.memory_kinds;
                args.extend(memory_kind(source).map(|k| (Arg::SourceMemory, Value::Fixed(k))));
                args.extend(
                    memory_kind(destination).map(|k| (Arg::DestinationMemory, Value::Fixed(k))),
                );
                // A copy between GPUs is communication: its role as a transfer kernel's.
                if let Some(n) = self.core.prepared.streams.peer_copy_at(&m, item.start) {
                    args.push((Arg::CommRole, Value::Purpose(n.purpose)));
                    args.push((Arg::RoleEvidence, Value::Fixed(n.evidence.kind())));
                }
                self.core.counts.memcpy += 1;
                let label = (Name::Fixed(name), Category::Memcpy);
                self.gpu_slice(m.stream, item, label, &args, m.correlation, false)
            }
            Event::Memset(m) => {
                let mut args = vec![
                    (Arg::Bytes, Value::Uint(m.bytes)),
                    (Arg::Correlation, Value::Uint(m.correlation.into())),
                ];
                args.extend(throughput(m.bytes, item));
                let kind = memory_kind(m.memory_kind);
                args.extend(kind.map(|k| (Arg::DestinationMemory, Value::Fixed(k))));
                self.core.counts.memset += 1;
                let label = (Name::Fixed("[CUDA memset]"), Category::Memset);
                self.gpu_slice(m.stream, item, label, &args, m.correlation, false)
            }
            Event::Metric(sample, gpu) => {
                let ts = self.core.plan.rebase(item.start);
                if let Some(seq) = self.metrics.get_mut(&(gpu, sample.series)) {
                    seq.counter(&mut self.core.out, ts, sample.value)?;
                    self.core.counts.metric_samples += 1;
                }
                Ok(())
            }
            Event::Memory(m) => {
                if let Some(memory) = self.memory.get_mut(&m.gpu) {
                    memory.total += m.bytes;
                    if m.time.0 < self.core.window.0 {
                        memory.due_at_start = true;
                    } else {
                        memory.changed = true;
                    }
                }
                Ok(())
            }
        }
    }

    /// After every event at `t`: the counters that changed, and device memory.
    fn end_group(&mut self, _: &mut (), t: i64) -> io::Result<()> {
        self.returns(t)?;
        let ts = self.core.plan.rebase(t);
        self.counters_at(t, ts)?;
        let at_start = t >= self.core.window.0;
        for memory in self.memory.values_mut() {
            if memory.changed || (memory.due_at_start && at_start) {
                memory
                    .sequence
                    .counter(&mut self.core.out, ts, memory.total)?;
                memory.changed = false;
                memory.due_at_start = false;
            }
        }
        Ok(())
    }
}

impl<W: Write> ProcessWriter<'_, '_, '_, W> {
    /// The overlap counters that changed at `t` (trace time `ts`).
    fn counters_at(&mut self, t: i64, ts: u64) -> io::Result<()> {
        let Some((counters, sequences)) = &mut self.counters else {
            return Ok(());
        };
        let drawn = (counters.waits(), counters.on_path());
        let whole = sequences.len() - usize::from(counters.achieves());
        let Some(changes) = counters.at(t) else {
            return Ok(());
        };
        let (levels, rate) = sequences.split_at_mut(whole);
        for (seq, value) in levels.iter_mut().zip(values(changes, drawn)) {
            if let Some(v) = value {
                seq.counter(&mut self.core.out, ts, v)?;
            }
        }
        if let (Some(seq), Some(mflops)) = (rate.first_mut(), changes.achieved) {
            seq.double_counter(&mut self.core.out, ts, mflops as f64 / 1e6)?;
        }
        Ok(())
    }

    /// An NVTX range or mark: on its thread's track, or a start/end range on its domain's.
    fn nvtx(&mut self, n: &NvtxEvent, item: &Item) -> io::Result<()> {
        self.core.counts.nvtx += 1;
        let domain = (n.domain != StringId::EMPTY).then_some((Arg::Domain, Value::Text(n.domain)));
        let payload =
            (n.payload != StringId::EMPTY).then_some((Arg::Payload, Value::Text(n.payload)));
        let args: Vec<(Arg, Value)> = domain.into_iter().chain(payload).collect();
        let label = (Name::Text(n.text), Category::Nvtx);
        match n.kind {
            NvtxKind::Mark => {
                let start = self.core.plan.rebase(item.start);
                let texts = self.core.texts();
                let Some(track) = self.threads.get_mut(&n.thread) else {
                    return Ok(());
                };
                track.lanes.first(&mut self.core.out, start)?;
                track
                    .lanes
                    .sequence(0)
                    .instant(&mut self.core.out, start, label, &args, texts)
            }
            NvtxKind::StartEnd => {
                let Some(track) = self.domains.get_mut(&n.domain) else {
                    return Ok(());
                };
                self.core.flows.clear();
                self.core.slice(track, item, label, &args)
            }
            NvtxKind::PushPop | NvtxKind::Metadata => {
                self.cpu_slice(n.thread, item, label, &args, None)
            }
        }
    }

    /// An MPI call on its thread's track: its class, peer or root, tag, sizes and communicator
    /// as the table gives them, and a flow per message it sent or received.
    fn mpi(&mut self, m: &MpiCall, item: &Item) -> io::Result<()> {
        let timeline = self.core.plan.activity.timeline;
        let class = MpiClass::of(m.table, timeline.text(m.name));
        let mut args = vec![(Arg::MpiClass, Value::Fixed(class.name()))];
        let rank = match m.table {
            MpiTable::PointToPoint => Some(Arg::PeerRank),
            MpiTable::Collective => Some(Arg::RootRank),
            _ => None,
        };
        if let Some(arg) = rank.filter(|_| m.peer != NO_RANK) {
            args.push((arg, Value::Int(m.peer.into())));
        }
        if m.table == MpiTable::PointToPoint {
            args.push((Arg::Tag, Value::Int(m.tag.into())));
        }
        if matches!(m.table, MpiTable::PointToPoint | MpiTable::Collective) {
            args.push((Arg::Bytes, Value::Uint(m.size)));
        }
        if m.table == MpiTable::Collective {
            args.push((Arg::RecvBytes, Value::Uint(m.recv_size)));
        }
        if m.comm != 0 {
            args.push((Arg::Communicator, Value::Uint(m.comm)));
        }
        let messages = self.core.plan.messages.of((m.thread, m.start.0));
        self.core.counts.mpi_calls += 1;
        let Some(track) = self.threads.get_mut(&m.thread) else {
            return Ok(());
        };
        self.core.flows.clear();
        self.core.flows.extend(
            messages
                .iter()
                .map(|&n| crate::export::mpi::Drawn::flow_id(n)),
        );
        let label = (Name::Text(m.name), Category::Mpi);
        self.core.slice(track, item, label, &args)
    }

    /// A slice on a thread's track.
    fn cpu_slice(
        &mut self,
        thread: ThreadId,
        item: &Item,
        label: (Name, Category),
        args: &[(Arg, Value)],
        flow: Option<u64>,
    ) -> io::Result<()> {
        let Some(track) = self.threads.get_mut(&thread) else {
            self.core.callstack = None;
            return Ok(());
        };
        self.core.flows.clear();
        self.core.flows.extend(flow);
        self.core.slice(track, item, label, args)
    }

    /// The host waits that returned by `t`: an instant on the calling thread, where the flow
    /// from the GPU operation it waited for arrives.
    fn returns(&mut self, t: i64) -> io::Result<()> {
        let returns = &self.core.prepared.syncs.returns;
        while let Some(&(r, thread)) = returns.get(self.returned)
            && r.time <= t
        {
            self.returned += 1;
            let texts = self.core.texts();
            let Some(track) = self.threads.get_mut(&thread) else {
                continue;
            };
            let ts = self.core.plan.rebase(r.time);
            track.lanes.first(&mut self.core.out, ts)?;
            let name = match r.sync_type {
                1 => "event synchronized",
                3 => "stream synchronized",
                _ => "context synchronized",
            };
            let label = (Name::Fixed(name), Category::CudaSync);
            let args = [(Arg::Correlation, Value::Uint(r.correlation.into()))];
            self.core.counts.sync_links += 1;
            self.core.counts.flows += 1;
            let lane = track.lanes.sequence(0);
            lane.linked_instant(&mut self.core.out, ts, label, &args, &[r.flow], texts)?;
        }
        Ok(())
    }

    /// A CPU sample of a thread drawn here, on the process's sample sequence.
    fn sample(&mut self, s: &SampleEvent, item: &Item) -> io::Result<()> {
        let Some(&tid) = self.tids.get(&s.thread) else {
            return Ok(());
        };
        let samples = match &mut self.samples {
            Some(samples) => samples,
            None => {
                let sequence = self.core.sequence_id()?;
                self.samples.insert(Samples::new(sequence))
            }
        };
        let ts = self.core.plan.rebase(item.start);
        let pid = self.core.pid() as u32;
        let timeline = self.core.plan.activity.timeline;
        samples.write(&mut self.core.out, (ts, pid, tid), s, timeline)?;
        self.core.counts.cpu_samples += 1;
        Ok(())
    }

    /// A time a thread ran: a `Running` slice on the thread's `thread state` track, with its
    /// core and the state it was left in.
    fn run(&mut self, r: &ThreadRun, item: &Item) -> io::Result<()> {
        let Some(thread) = self.threads.get(&r.thread) else {
            return Ok(());
        };
        if self.core.plan.cuts_to_nothing(item, r.end.0 - r.start.0) {
            return Ok(());
        }
        let parent = thread.parent;
        let track = self.runs.entry(r.thread).or_insert_with(|| LaneTrack {
            lanes: Lanes::new(false),
            parent,
            name: "thread state".to_string(),
            order: Some(-1),
        });
        let mut args = vec![(Arg::Cpu, Value::Uint(r.cpu.into()))];
        args.extend(r.left_as_name().map(|s| (Arg::LeftAs, Value::Fixed(s))));
        self.core.counts.thread_runs += 1;
        self.core.flows.clear();
        let label = (Name::Fixed("Running"), Category::Sched);
        self.core.slice(track, item, label, &args)
    }

    /// An instant `CUDA call failed` on the calling thread at the start of a call that returned
    /// `code`, so a failure stands out on the timeline.
    fn failed_call(&mut self, thread: ThreadId, item: &Item, code: u16) -> io::Result<()> {
        let start = self.core.plan.rebase(item.start);
        let texts = self.core.texts();
        let Some(track) = self.threads.get_mut(&thread) else {
            return Ok(());
        };
        track.lanes.first(&mut self.core.out, start)?;
        let label = (Name::Fixed("CUDA call failed"), Category::CudaError);
        let args = [(Arg::ReturnValue, Value::Uint(code.into()))];
        track
            .lanes
            .sequence(0)
            .instant(&mut self.core.out, start, label, &args, texts)
    }

    /// A kernel on its stream's track, with its role, the evidence for it, and its collective.
    fn kernel(&mut self, k: &Kernel, item: &Item) -> io::Result<()> {
        let Some(stream) = self.streams.get(&k.stream) else {
            return Ok(());
        };
        let role = stream.role;
        let nccl = self.core.prepared.streams.comm_at(k.stream, item.start);
        let comm_role = nccl.map_or(Value::Fixed(""), |n| match n.is_barrier() {
            true => Value::Fixed(BARRIER),
            false => Value::Purpose(n.purpose),
        });
        let evidence = nccl.map_or("", |n| n.evidence.kind());
        let plan = self.core.plan;
        let collective = plan.collectives.kernels.get(&(k.stream, k.start.0));
        let number = collective.map_or(0, |c| c.0);
        let correlation = (Arg::Correlation, Value::Uint(k.correlation.into()));
        let mut args = [
            (Arg::Demangled, Value::Text(k.name)),
            (Arg::Grid, Value::Dims(k.grid)),
            (Arg::Block, Value::Dims(k.block)),
            (Arg::Registers, Value::Uint(k.registers.into())),
            (
                Arg::SharedMemory,
                Value::Uint(u64::from(k.static_shared) + u64::from(k.dynamic_shared)),
            ),
            correlation,
            (Arg::Role, Value::Role(role)),
            (Arg::CommRole, comm_role),
            (Arg::RoleEvidence, Value::Fixed(evidence)),
            (Arg::Collective, Value::Uint(number)),
            (Arg::GraphNode, Value::Uint(k.graph_node.into())),
        ];
        // NCCL kernels carry their own role and its evidence, and a collective's its instance;
        // others stop at the stream's role.
        let mut shown = match (nccl, collective) {
            (None, _) => 7,
            (Some(_), None) => 9,
            (Some(_), Some(_)) => 10,
        };
        // A kernel that ran as a graph node says which, after what it shows.
        if k.graph_node != 0 {
            args.swap(shown, 10);
            shown += 1;
        }
        let path = plan.critical_path.flows.get(&(k.stream, k.start.0));
        let linked: Vec<u64> = collective
            .map_or(&[][..], |c| &c.1)
            .iter()
            .chain(path.into_iter().flatten())
            .copied()
            .collect();
        self.core.counts.kernels += 1;
        let label = (Name::Text(k.short_name), Category::Kernel);
        self.gpu_op(
            k.stream,
            item,
            label,
            &args[..shown],
            k.correlation,
            &linked,
        )
    }

    /// A copy, set or graph launch on its stream's track (a graph launch shows the stream's
    /// role after its arguments).
    fn gpu_slice(
        &mut self,
        stream: StreamId,
        item: &Item,
        label: (Name, Category),
        args: &[(Arg, Value)],
        correlation: u32,
        with_role: bool,
    ) -> io::Result<()> {
        let Some(role) = self.streams.get(&stream).map(|s| s.role) else {
            return Ok(());
        };
        let mut all = args.to_vec();
        if with_role {
            all.push((Arg::Role, Value::Role(role)));
        }
        self.gpu_op(stream, item, label, &all, correlation, &[])
    }

    /// A GPU operation on the first idle lane of its stream, with its launch's flow and
    /// `linked` collective flows.
    fn gpu_op(
        &mut self,
        stream: StreamId,
        item: &Item,
        label: (Name, Category),
        args: &[(Arg, Value)],
        correlation: u32,
        linked: &[u64],
    ) -> io::Result<()> {
        let Some(s) = self.streams.get_mut(&stream) else {
            return Ok(());
        };
        let core = &mut self.core;
        let flow = (correlation != 0 && core.prepared.launches.has_call(correlation))
            .then(|| flow_id(core.process, correlation));
        core.counts.flows += u64::from(flow.is_some());
        core.flows.clear();
        core.flows.extend(flow);
        core.flows.extend_from_slice(linked);
        let syncs = &core.prepared.syncs;
        let key = (stream, item.event.span().0, correlation);
        let held = syncs.held.get(&key).map_or(0, Vec::len);
        core.counts.sync_links += held as u64;
        core.counts.flows += held as u64;
        core.flows.extend(syncs.flows(&key));
        core.slice(&mut s.track, item, label, args)
    }
}

impl<'a, W: Write> Core<'_, 'a, '_, W> {
    fn pid(&self) -> i32 {
        10_000 + self.position as i32
    }

    fn labels(&self) -> Vec<String> {
        let timeline = self.plan.activity.timeline;
        let process = timeline.process(self.process);
        let host = &timeline.host(process.host).name;
        vec![format!("host {host}"), format!("pid {}", process.pid)]
    }

    /// Writes a descriptor with a fresh uuid; returns the uuid.
    fn track(&mut self, mut descriptor: TrackDescriptor) -> io::Result<u64> {
        let uuid = ((self.position as u64 + 1) << 32) | self.next_uuid;
        self.next_uuid += 1;
        descriptor.uuid = Some(uuid);
        self.out.describe(descriptor)?;
        self.counts.tracks += 1;
        Ok(uuid)
    }

    /// A fresh sequence writing to `track`.
    fn sequence(&mut self, track: u64) -> io::Result<Sequence> {
        Ok(Sequence::new(self.sequence_id()?, track))
    }

    /// A fresh sequence id.
    fn sequence_id(&mut self) -> io::Result<u32> {
        if self.next_sequence >= SEQUENCES_PER_PROCESS {
            return Err(io::Error::other(format!(
                "{} needs more than {SEQUENCES_PER_PROCESS} Perfetto tracks",
                crate::classify::ranks::describe(self.plan.activity.timeline, self.process)
            )));
        }
        let base = FIRST_SEQUENCE + self.position as u32 * SEQUENCES_PER_PROCESS;
        self.next_sequence += 1;
        Ok(base + self.next_sequence - 1)
    }

    /// A plain track named `name` under `parent`, with its own sequence.
    fn child(&mut self, parent: u64, name: String, order: i32) -> io::Result<Sequence> {
        let uuid = self.track(TrackDescriptor {
            parent_uuid: Some(parent),
            name: Some(name),
            sibling_order_rank: Some(order),
            ..TrackDescriptor::default()
        })?;
        self.sequence(uuid)
    }

    /// A counter track under `parent`.
    fn counter_track(&mut self, parent: u64, name: String, order: i32) -> io::Result<Sequence> {
        let uuid = self.track(TrackDescriptor {
            parent_uuid: Some(parent),
            name: Some(name),
            sibling_order_rank: Some(order),
            counter: Some(CounterDescriptor {
                unit: Some(Unit::Count as i32),
                unit_name: None,
            }),
            ..TrackDescriptor::default()
        })?;
        self.sequence(uuid)
    }

    /// Where names come from.
    fn texts(&self) -> Texts<'a> {
        Texts {
            timeline: self.plan.activity.timeline,
            rules: self.plan.rules,
        }
    }

    /// A slice on the first lane of `track` where it fits (a new lane when none does), with
    /// the flows in `self.flows`.
    fn slice(
        &mut self,
        track: &mut LaneTrack,
        item: &Item,
        label: (Name, Category),
        args: &[(Arg, Value)],
    ) -> io::Result<()> {
        let (start, end) = (self.plan.rebase(item.start), self.plan.rebase(item.end));
        let lane = match track.lanes.place(&mut self.out, start, end)? {
            Some(lane) => lane,
            None => {
                let order = track.order.unwrap_or(track.lanes.len() as i32);
                // `GPU 0 · stream 7 · compute · lane 2`: each lane a name of its own.
                let name = match track.lanes.len() {
                    0 => track.name.clone(),
                    n => format!("{} · lane {}", track.name, n + 1),
                };
                let seq = self.child(track.parent, name, order)?;
                track.lanes.add(seq)
            }
        };
        let texts = self.texts();
        track.lanes.sequence(lane).begin(
            &mut self.out,
            start,
            label,
            args,
            &self.flows,
            self.callstack.take(),
            texts,
        )?;
        track.lanes.opened(lane, end);
        Ok(())
    }
}

/// `ENUM_CUDA_MEM_KIND`'s name, as Nsight shows a copy's memory kinds; None for unknown.
fn memory_kind(id: u8) -> Option<&'static str> {
    const NAMES: [&str; 7] = [
        "pageable",
        "pinned",
        "device",
        "array",
        "managed",
        "device static",
        "managed static",
    ];
    NAMES.get(usize::from(id)).copied()
}

/// A copy's or set's throughput argument, MB/s (bytes per ns x 1000, rounded down); none for
/// an operation of no duration.
fn throughput(bytes: u64, item: &Item) -> Option<(Arg, Value)> {
    let ns = u64::try_from(item.end - item.start)
        .ok()
        .filter(|&ns| ns > 0)?;
    let mb_s = u128::from(bytes) * 1000 / u128::from(ns);
    Some((Arg::Throughput, Value::Uint(mb_s as u64)))
}

/// The counter values of `changes` in track order: compute, per role, exposed, then waiting
/// and on the critical path where they are drawn (`drawn`).
fn values(
    changes: &Changes,
    (waits, on_path): (bool, bool),
) -> impl Iterator<Item = Option<i64>> + '_ {
    let waiting = waits.then_some(changes.waiting);
    let on_path = on_path.then_some(changes.on_path);
    std::iter::once(changes.compute)
        .chain(changes.roles.iter().copied())
        .chain([changes.exposed])
        .chain(waiting)
        .chain(on_path)
}

/// An OpenACC event's name and arguments: its kind, source, function, and its variable and
/// bytes (data) or kernel (launch), those it has.
fn acc_slice(a: &AccEvent) -> ((Name, Category), Vec<(Arg, Value)>) {
    let kind = ACC_EVENT_KINDS
        .get(usize::from(a.event_kind))
        .map_or(Value::Uint(a.event_kind.into()), |k| Value::Fixed(k));
    let mut args = vec![(Arg::EventKind, kind), (Arg::Source, Value::Text(a.source))];
    if a.function != StringId::EMPTY {
        args.push((Arg::Function, Value::Text(a.function)));
    }
    let object = match a.table {
        AccTable::Data => Some(Arg::Variable),
        AccTable::Launch => Some(Arg::KernelName),
        AccTable::Other => None,
    };
    if let Some(arg) = object.filter(|_| a.object != StringId::EMPTY) {
        args.push((arg, Value::Text(a.object)));
    }
    if a.table == AccTable::Data {
        args.push((Arg::Bytes, Value::Uint(a.bytes)));
    }
    ((Name::Text(a.name), Category::OpenAcc), args)
}

/// A trace-wide flow id: correlation ids repeat across processes, so the process is in it.
fn flow_id(process: ProcessId, correlation: u32) -> u64 {
    ((process.index() as u64 + 1) << 32) | u64::from(correlation)
}

/// `rank 3 · pp 1/2 ep 1/2 · node ault42 · pid 337169 · GPU 0 (H100)`; other processes
/// `node ault42 · pid 4242 · python3`.
fn process_name(plan: &Plan, position: usize) -> String {
    let timeline = plan.activity.timeline;
    let exported = &plan.exported[position];
    let process = timeline.process(exported.process);
    let host = &timeline.host(process.host).name;
    let Some(rank) = exported.rank else {
        return match timeline.text(process.name) {
            "" => format!("node {host} · pid {}", process.pid),
            name => format!("node {host} · pid {} · {name}", process.pid),
        };
    };
    let mut words = vec![format!("rank {}", rank.rank)];
    if let Some(label) = rank.label {
        let axes: Vec<String> = [
            ("pp", label.pp),
            ("dp", label.dp),
            ("cp", label.cp),
            ("ep", label.ep),
        ]
        .iter()
        .filter(|(_, c)| c.size > 1)
        .map(|(axis, c)| format!("{axis} {}/{}", c.rank, c.size))
        .collect();
        if !axes.is_empty() {
            words.push(axes.join(" "));
        }
    }
    words.push(format!("node {host}"));
    words.push(format!("pid {}", process.pid));
    if let Some(device) = rank.device {
        let gpu = timeline
            .gpus
            .iter()
            .find(|g| g.process == exported.process && g.device == device)
            .map(|g| timeline.text(g.name))
            .unwrap_or("");
        words.push(if gpu.is_empty() {
            format!("GPU {device}")
        } else {
            format!("GPU {device} ({gpu})")
        });
    }
    words.join(" · ")
}
