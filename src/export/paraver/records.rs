//! The `.prv` body: one record source per thread (per stream for its lanes), each yielding its
//! records in time order with a closing event before an opening one at equal times, merged by a
//! k-way merge into one globally time-sorted stream. Nothing is formatted before it is written.

use super::layout::{Layout, Receiver, Task};
use super::types;
use crate::analysis::overlap::BARRIER;
use crate::classify::rules::is_nccl;
use crate::export::Scope;
use crate::export::items::{Clipped, CpuEvent, GpuOp};
use crate::hash::FxHashMap;
use crate::model::{MetricSample, ProcessId, StreamId};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Write};

/// Most type:value pairs in one record: a kernel begin has up to 17 (12 for every kernel; an
/// NCCL kernel's role, evidence, stage and collective; a graph node).
const MAX_PAIRS: usize = 17;

/// One record, ready to format.
#[derive(Clone, Copy)]
struct Record {
    time: u64,
    task: u32,
    thread: u32,
    body: Body,
}

/// The type:value pairs of one event record.
#[derive(Clone, Copy)]
struct Pairs {
    pairs: [(u32, u64); MAX_PAIRS],
    len: usize,
}

impl Pairs {
    fn new() -> Pairs {
        Pairs {
            pairs: [(0, 0); MAX_PAIRS],
            len: 0,
        }
    }

    fn push(&mut self, pair: (u32, u64)) {
        self.pairs[self.len] = pair;
        self.len += 1;
    }

    fn as_slice(&self) -> &[(u32, u64)] {
        &self.pairs[..self.len]
    }
}

// Records are built and formatted one at a time on the stack: boxing the pairs would allocate
// per record.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy)]
enum Body {
    Events(Pairs),
    Comm {
        task: u32,
        thread: u32,
        time: u64,
        size: u64,
        tag: u32,
    },
}

impl Body {
    fn events(pairs: &[(u32, u64)]) -> Body {
        let mut all = Pairs::new();
        for &p in pairs {
            all.push(p);
        }
        Body::Events(all)
    }
}

/// What was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Kernel begins (63000006 and 63000007).
    pub kernels: u64,
    /// Copy and set begins (63000001).
    pub memops: u64,
    /// CUDA graph launch begins (63000008).
    pub graphs: u64,
    /// API call begins (63000000).
    pub api: u64,
    /// NVTX range begins and marks.
    pub nvtx: u64,
    /// OS runtime call begins (66400000 and 61000000).
    pub os_calls: u64,
    /// GPU metric samples (9400 + metric id).
    pub metric_samples: u64,
    /// Communication records (launch -> GPU operation).
    pub comms: u64,
    /// Launches not drawn as communication because the GPU operation starts before the call.
    pub comms_skipped: u64,
    /// Lines in the body.
    pub records: u64,
}

/// What record sources look things up in.
struct Context<'a> {
    scope: &'a Scope<'a, 'a>,
    layout: &'a Layout<'a>,
}

/// Writes the body of `layout` to `out`.
pub fn write_body<W: Write>(scope: &Scope, layout: &Layout, out: &mut W) -> io::Result<Counts> {
    let ctx = Context { scope, layout };
    let mut sources = sources(&ctx);
    let mut counts = Counts::default();
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = sources
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.peek(&ctx).map(|t| Reverse((t, i))))
        .collect();
    let mut line = Vec::with_capacity(256);
    while let Some(Reverse((_, i))) = heap.pop() {
        let record = sources[i].next(&ctx, &mut counts);
        format(&record, &mut line);
        out.write_all(&line)?;
        counts.records += 1;
        if let Some(t) = sources[i].peek(&ctx) {
            heap.push(Reverse((t, i)));
        }
    }
    Ok(counts)
}

/// One source per CPU thread, per stream, and per analysis thread, task by task.
fn sources<'a>(ctx: &Context<'a>) -> Vec<Source<'a>> {
    let mut sources = Vec::new();
    for (index, task) in ctx.layout.tasks.iter().enumerate() {
        let task_no = index as u32 + 1;
        let part = &ctx.scope.parts[task.part];
        for (thread, events) in &task.cpu {
            sources.push(Source::Cpu(CpuSource {
                task: task_no,
                thread: *thread,
                process: part.process,
                events,
                next: 0,
                ends: BinaryHeap::new(),
                sequence: 0,
                comms: VecDeque::new(),
            }));
        }
        let mut nccl = nccl_events(ctx, task);
        for s in &task.streams {
            let role = 1 + ctx
                .layout
                .values
                .roles
                .iter()
                .position(|r| r == s.role.name(ctx.scope.rules))
                .unwrap_or(0) as u64;
            sources.push(Source::Gpu(GpuSource {
                task: task_no,
                first_thread: s.first_thread,
                stream: s.stream,
                role,
                ops: &s.ops,
                next: 0,
                busy: Vec::new(),
                ends: BinaryHeap::new(),
                nccl: nccl
                    .extract_if(|&(stream, ..), _| stream == s.stream)
                    .collect(),
            }));
        }
        if let Some((thread, counters)) = &task.counters {
            sources.push(Source::Counters(CounterSource::analysis(
                task_no, *thread, counters,
            )));
        }
        for (thread, steps) in &task.memory {
            let series = vec![(types::GPU_MEMORY, steps.as_slice())];
            sources.push(Source::Counters(CounterSource::new(
                task_no, *thread, series,
            )));
        }
        for (thread, series) in &task.metrics {
            let series = series
                .iter()
                .map(|&s| {
                    let ty = types::GPU_METRICS_BASE
                        + ctx.scope.activity.timeline.metric_series(s).metric_id;
                    (ty, ctx.scope.activity.metric_samples_in(s, part.window))
                })
                .collect();
            sources.push(Source::Metrics(CounterSource::new(
                task_no, *thread, series,
            )));
        }
    }
    sources
}

/// The events an NCCL kernel carries beside the kernel's own: its role, the evidence for it,
/// and the stage it was launched in.
#[derive(Debug, Clone, Copy)]
struct NcclEvents {
    role: u64,
    evidence: u64,
    stage: Option<u64>,
}

/// Those events of each NCCL kernel of a task, by (stream, clipped start, clipped end).
fn nccl_events(ctx: &Context, task: &Task) -> FxHashMap<(StreamId, i64, i64), NcclEvents> {
    let values = &ctx.layout.values;
    let position = |found: Option<usize>| found.map_or(0, |i| i as u64 + 1);
    ctx.scope.parts[task.part]
        .streams
        .nccl
        .iter()
        .map(|k| {
            let role = k.role_name(ctx.scope.rules);
            let kind = k.evidence.kind();
            let events = NcclEvents {
                role: position(values.roles.iter().position(|r| r == role)),
                evidence: position(types::EVIDENCE_KINDS.iter().position(|&e| e == kind)),
                stage: k
                    .stage
                    .and_then(|s| values.stages.iter().position(|&v| v == s))
                    .map(|i| i as u64 + 1),
            };
            ((k.stream, k.start, k.end), events)
        })
        .collect()
}

enum Source<'a> {
    Cpu(CpuSource<'a>),
    Gpu(GpuSource<'a>),
    Counters(CounterSource<'a, (i64, i64)>),
    Metrics(CounterSource<'a, MetricSample>),
}

impl Source<'_> {
    fn peek(&self, ctx: &Context) -> Option<u64> {
        match self {
            Source::Cpu(s) => s.peek(ctx),
            Source::Gpu(s) => s.peek(ctx),
            Source::Counters(s) => s.peek(ctx),
            Source::Metrics(s) => s.peek(ctx),
        }
    }

    fn next(&mut self, ctx: &Context, counts: &mut Counts) -> Record {
        match self {
            Source::Cpu(s) => s.next(ctx, counts),
            Source::Gpu(s) => s.next(ctx, counts),
            Source::Counters(s) => s.next(ctx),
            Source::Metrics(s) => {
                let record = s.next(ctx);
                if let Body::Events(pairs) = &record.body {
                    counts.metric_samples += pairs.len as u64;
                }
                record
            }
        }
    }
}

/// A CPU thread: API calls, NVTX ranges and marks, and the communication records of launches.
struct CpuSource<'a> {
    task: u32,
    thread: u32,
    process: ProcessId,
    events: &'a [Clipped<CpuEvent<'a>>],
    next: usize,
    /// Pending closes: (end, order, type to close, and for API calls the correlation too).
    ends: BinaryHeap<Reverse<(i64, u64, u32, bool)>>,
    sequence: u64,
    comms: VecDeque<Record>,
}

impl CpuSource<'_> {
    fn peek(&self, ctx: &Context) -> Option<u64> {
        if let Some(c) = self.comms.front() {
            return Some(c.time);
        }
        let end = self.ends.peek().map(|Reverse((t, ..))| *t);
        let begin = self.events.get(self.next).map(|e| e.start);
        let t = match (end, begin) {
            (Some(e), Some(b)) => e.min(b),
            (e, b) => e.or(b)?,
        };
        Some(ctx.scope.rebase(t))
    }

    fn next(&mut self, ctx: &Context, counts: &mut Counts) -> Record {
        if let Some(c) = self.comms.pop_front() {
            return c;
        }
        let next_begin = self.events.get(self.next).map_or(i64::MAX, |e| e.start);
        if let Some(&Reverse((end, _, ty, api))) = self.ends.peek()
            && end <= next_begin
        {
            self.ends.pop();
            let body = if api {
                Body::events(&[(ty, 0), (types::CORRELATION, 0)])
            } else {
                Body::events(&[(ty, 0)])
            };
            return self.record(ctx, end, body);
        }
        let event = self.events[self.next];
        self.next += 1;
        let values = &ctx.layout.values;
        let nvtx = |n: &crate::model::NvtxEvent| {
            values.nvtx.get(&(n.domain, n.text)).copied().unwrap_or(0) as u64
        };
        let (ty, value, api) = match event.what {
            CpuEvent::Api(a) => {
                counts.api += 1;
                let id = values.api.get(&a.name).copied().unwrap_or(0) as u64;
                self.launch(ctx, event.start, a.correlation, counts);
                (types::CUDA_API, id, Some(a.correlation))
            }
            CpuEvent::Range(n) => {
                counts.nvtx += 1;
                let domain = ctx.scope.activity.timeline.text(n.domain);
                let ty = values
                    .domains
                    .get(domain)
                    .copied()
                    .unwrap_or(types::NVTX_PUSHPOP_BASE);
                (ty, nvtx(n), None)
            }
            CpuEvent::Os(o) => {
                counts.os_calls += 1;
                let (ty, value) = values.os.get(&o.name).copied().unwrap_or((types::OSRT, 0));
                (ty, u64::from(value), None)
            }
            CpuEvent::StartEnd(n) => {
                counts.nvtx += 1;
                (types::NVTX_STARTEND, nvtx(n), None)
            }
            CpuEvent::Mark(n) => {
                counts.nvtx += 1;
                let body = Body::events(&[(types::NVTX_MARK, nvtx(n))]);
                return self.record(ctx, event.start, body);
            }
        };
        self.sequence += 1;
        self.ends
            .push(Reverse((event.end, self.sequence, ty, api.is_some())));
        let body = match api {
            Some(c) => Body::events(&[(ty, value), (types::CORRELATION, u64::from(c))]),
            None => Body::events(&[(ty, value)]),
        };
        self.record(ctx, event.start, body)
    }

    /// Queues the communication records from a launch at `start` to its GPU operations.
    fn launch(&mut self, ctx: &Context, start: i64, correlation: u32, counts: &mut Counts) {
        if correlation == 0 {
            return;
        }
        let receivers = &ctx.layout.receivers;
        let key = (self.process, correlation);
        let from = receivers.partition_point(|r| r.key < key);
        for r in receivers[from..].iter().take_while(|r| r.key == key) {
            if r.start < start {
                counts.comms_skipped += 1;
                continue;
            }
            counts.comms += 1;
            let comm = self.comm(ctx, start, r);
            self.comms.push_back(comm);
        }
    }

    fn comm(&self, ctx: &Context, start: i64, r: &Receiver) -> Record {
        Record {
            time: ctx.scope.rebase(start),
            task: self.task,
            thread: self.thread,
            body: Body::Comm {
                task: r.task,
                thread: r.thread,
                time: ctx.scope.rebase(r.start),
                size: r.size,
                tag: r.tag,
            },
        }
    }

    fn record(&self, ctx: &Context, t: i64, body: Body) -> Record {
        Record {
            time: ctx.scope.rebase(t),
            task: self.task,
            thread: self.thread,
            body,
        }
    }
}

/// One stream: its operations on lane threads (first fit, as the layout counted them).
struct GpuSource<'a> {
    task: u32,
    first_thread: u32,
    stream: StreamId,
    role: u64,
    ops: &'a [Clipped<GpuOp<'a>>],
    next: usize,
    busy: Vec<bool>,
    /// Pending ends: (end, lane, the begin's types to close).
    ends: BinaryHeap<Reverse<(i64, u32, EndKind)>>,
    nccl: FxHashMap<(StreamId, i64, i64), NcclEvents>,
}

/// Which types a GPU operation's end closes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum EndKind {
    Kernel {
        ty: u32,
        nccl: bool,
        staged: bool,
        collective: bool,
        graph_node: bool,
    },
    Memop,
    Graph,
}

impl GpuSource<'_> {
    fn peek(&self, ctx: &Context) -> Option<u64> {
        let end = self.ends.peek().map(|Reverse((t, ..))| *t);
        let begin = self.ops.get(self.next).map(|o| o.start);
        let t = match (end, begin) {
            (Some(e), Some(b)) => e.min(b),
            (e, b) => e.or(b)?,
        };
        Some(ctx.scope.rebase(t))
    }

    fn next(&mut self, ctx: &Context, counts: &mut Counts) -> Record {
        let next_begin = self.ops.get(self.next).map_or(i64::MAX, |o| o.start);
        if let Some(&Reverse((end, lane, kind))) = self.ends.peek()
            && end <= next_begin
        {
            self.ends.pop();
            self.busy[lane as usize] = false;
            return self.record(ctx, end, lane, end_body(kind));
        }
        let op = self.ops[self.next];
        self.next += 1;
        let lane = match self.busy.iter().position(|b| !b) {
            Some(lane) => lane,
            None => {
                self.busy.push(false);
                self.busy.len() - 1
            }
        };
        self.busy[lane] = true;
        let (body, kind) = self.begin_body(ctx, op, counts);
        self.ends.push(Reverse((op.end, lane as u32, kind)));
        self.record(ctx, op.start, lane as u32, body)
    }

    fn begin_body(
        &self,
        ctx: &Context,
        op: Clipped<GpuOp>,
        counts: &mut Counts,
    ) -> (Body, EndKind) {
        let timeline = ctx.scope.activity.timeline;
        let values = &ctx.layout.values;
        let id = values
            .gpu
            .get(&super::layout::gpu_name(op.what))
            .copied()
            .unwrap_or(0) as u64;
        let correlation = u64::from(op.what.correlation());
        let role = (types::STREAM_ROLE, self.role);
        match op.what {
            GpuOp::Kernel(k) => {
                counts.kernels += 1;
                let ty = if is_nccl(timeline.text(k.short_name)) {
                    types::NCCL_KERNEL
                } else {
                    types::KERNEL
                };
                let [gx, gy, gz] = k.grid.map(u64::from);
                let [bx, by, bz] = k.block.map(u64::from);
                let mut pairs = Pairs::new();
                for pair in [
                    (ty, id),
                    (types::GEOMETRY[0], gx),
                    (types::GEOMETRY[1], gy),
                    (types::GEOMETRY[2], gz),
                    (types::GEOMETRY[3], bx),
                    (types::GEOMETRY[4], by),
                    (types::GEOMETRY[5], bz),
                    (types::GEOMETRY[6], u64::from(k.static_shared)),
                    (types::GEOMETRY[7], u64::from(k.dynamic_shared)),
                    (types::REGISTERS, u64::from(k.registers)),
                    (types::CORRELATION, correlation),
                    role,
                ] {
                    pairs.push(pair);
                }
                let nccl = self.nccl.get(&(self.stream, op.start, op.end));
                if let Some(n) = nccl {
                    pairs.push((types::COMM_ROLE, n.role));
                    pairs.push((types::ROLE_EVIDENCE, n.evidence));
                }
                let stage = nccl.and_then(|n| n.stage);
                if let Some(stage) = stage {
                    pairs.push((types::STAGE, stage));
                }
                let collective = ctx.scope.collectives.kernels.get(&(k.stream, k.start.0));
                if let Some(&(number, _)) = collective {
                    pairs.push((types::COLLECTIVE, number));
                }
                if k.graph_node != 0 {
                    pairs.push((types::GRAPH_NODE, u64::from(k.graph_node)));
                }
                let kind = EndKind::Kernel {
                    ty,
                    nccl: nccl.is_some(),
                    staged: stage.is_some(),
                    collective: collective.is_some(),
                    graph_node: k.graph_node != 0,
                };
                (Body::Events(pairs), kind)
            }
            GpuOp::Graph(g) => {
                counts.graphs += 1;
                let pairs = [
                    (types::GRAPH_EXEC, id),
                    (types::GRAPH_ID, u64::from(g.graph)),
                    (types::GRAPH_EXEC_ID, u64::from(g.exec)),
                    (types::CORRELATION, correlation),
                    role,
                ];
                (Body::events(&pairs), EndKind::Graph)
            }
            GpuOp::Memcpy(_) | GpuOp::Memset(_) => {
                counts.memops += 1;
                let bytes = match op.what {
                    GpuOp::Memcpy(m) => m.bytes,
                    GpuOp::Memset(m) => m.bytes,
                    GpuOp::Kernel(_) | GpuOp::Graph(_) => 0,
                };
                let pairs = [
                    (types::MEMOP, id),
                    (types::MEMOP_BYTES, bytes),
                    (types::CORRELATION, correlation),
                    role,
                ];
                (Body::events(&pairs), EndKind::Memop)
            }
        }
    }

    fn record(&self, ctx: &Context, t: i64, lane: u32, body: Body) -> Record {
        Record {
            time: ctx.scope.rebase(t),
            task: self.task,
            thread: self.first_thread + lane,
            body,
        }
    }
}

/// The closing record of a GPU operation: every type of its begin, at 0.
fn end_body(kind: EndKind) -> Body {
    match kind {
        EndKind::Kernel {
            ty,
            nccl,
            staged,
            collective,
            graph_node,
        } => {
            let mut pairs = Pairs::new();
            pairs.push((ty, 0));
            for t in types::GEOMETRY {
                pairs.push((t, 0));
            }
            for t in [types::REGISTERS, types::CORRELATION, types::STREAM_ROLE] {
                pairs.push((t, 0));
            }
            if nccl {
                pairs.push((types::COMM_ROLE, 0));
                pairs.push((types::ROLE_EVIDENCE, 0));
            }
            if staged {
                pairs.push((types::STAGE, 0));
            }
            if collective {
                pairs.push((types::COLLECTIVE, 0));
            }
            if graph_node {
                pairs.push((types::GRAPH_NODE, 0));
            }
            Body::Events(pairs)
        }
        EndKind::Memop => Body::events(&[
            (types::MEMOP, 0),
            (types::MEMOP_BYTES, 0),
            (types::CORRELATION, 0),
            (types::STREAM_ROLE, 0),
        ]),
        EndKind::Graph => Body::events(&[
            (types::GRAPH_EXEC, 0),
            (types::GRAPH_ID, 0),
            (types::GRAPH_EXEC_ID, 0),
            (types::CORRELATION, 0),
            (types::STREAM_ROLE, 0),
        ]),
    }
}

/// A value that changes at a time: a counter's step, or a GPU metric's sample.
trait Step {
    /// `(time, value)`, merged-clock ns.
    fn step(&self) -> (i64, i64);
}

impl Step for (i64, i64) {
    fn step(&self) -> (i64, i64) {
        *self
    }
}

impl Step for MetricSample {
    fn step(&self) -> (i64, i64) {
        (self.time.0, self.value)
    }
}

/// A thread of step functions (the analysis thread's counters, a GPU's allocated memory, a
/// GPU's `Metrics GPU<d>` samples): one multi-event line per time, merged on the fly from the
/// series (nothing is held per line); negative values are written as 0.
struct CounterSource<'a, T> {
    task: u32,
    thread: u32,
    /// Each series' Paraver type and steps, in the order their pairs appear on a line.
    series: Vec<(u32, &'a [T])>,
    /// The next step of each series.
    next: Vec<usize>,
}

impl<'a, T: Step> CounterSource<'a, T> {
    /// The step series `series` on `thread` of `task`.
    fn new(task: u32, thread: u32, series: Vec<(u32, &'a [T])>) -> Self {
        let next = vec![0; series.len()];
        CounterSource {
            task,
            thread,
            series,
            next,
        }
    }

    /// The earliest pending change, rebased.
    fn peek(&self, ctx: &Context) -> Option<u64> {
        self.series
            .iter()
            .zip(&self.next)
            .filter_map(|((_, steps), &i)| steps.get(i))
            .map(|s| ctx.scope.rebase(s.step().0))
            .min()
    }

    /// Every change at the earliest pending time, series by series; what does not fit on one
    /// line (more than [`MAX_PAIRS`] series) follows on another at the same time.
    fn next(&mut self, ctx: &Context) -> Record {
        let time = self.peek(ctx).expect("next follows a successful peek");
        let mut pairs = Pairs::new();
        for ((ty, steps), next) in self.series.iter().zip(self.next.iter_mut()) {
            while let Some((t, v)) = steps.get(*next).map(Step::step)
                && ctx.scope.rebase(t) == time
                && pairs.len < MAX_PAIRS
            {
                pairs.push((*ty, v.max(0) as u64));
                *next += 1;
            }
        }
        Record {
            time,
            task: self.task,
            thread: self.thread,
            body: Body::Events(pairs),
        }
    }
}

impl<'a> CounterSource<'a, (i64, i64)> {
    /// The analysis thread's counters.
    fn analysis(task: u32, thread: u32, c: &'a crate::export::counters::Counters) -> Self {
        let barrier = c
            .by_role
            .iter()
            .find(|(role, _)| role == BARRIER)
            .map(|(_, steps)| steps.as_slice())
            .unwrap_or(&[]);
        let series = vec![
            (types::COMPUTE_IN_FLIGHT, c.compute.as_slice()),
            (types::COMM_IN_FLIGHT, &c.comm),
            (types::EXPOSED_COMM, &c.exposed),
            (types::BARRIER_IN_FLIGHT, barrier),
            (types::COLLECTIVE_WAIT, &c.waiting),
        ];
        CounterSource::new(task, thread, series)
    }
}

/// Formats one record as a `.prv` line.
fn format(record: &Record, line: &mut Vec<u8>) {
    let mut num = itoa::Buffer::new();
    let mut put = |line: &mut Vec<u8>, v: u64| line.extend_from_slice(num.format(v).as_bytes());
    line.clear();
    match record.body {
        Body::Events(pairs) => {
            line.extend_from_slice(b"2:0:1:");
            put(line, record.task.into());
            line.push(b':');
            put(line, record.thread.into());
            line.push(b':');
            put(line, record.time);
            for &(ty, value) in pairs.as_slice() {
                line.push(b':');
                put(line, ty.into());
                line.push(b':');
                put(line, value);
            }
        }
        Body::Comm {
            task,
            thread,
            time,
            size,
            tag,
        } => {
            line.extend_from_slice(b"3:0:1:");
            for v in [
                record.task.into(),
                record.thread.into(),
                record.time,
                record.time,
            ] {
                put(line, v);
                line.push(b':');
            }
            line.extend_from_slice(b"0:1:");
            for v in [task.into(), thread.into(), time, time, size, tag.into()] {
                put(line, v);
                line.push(b':');
            }
            line.pop();
        }
    }
    line.push(b'\n');
}
