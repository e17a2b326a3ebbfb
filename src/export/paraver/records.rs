//! The `.prv` body, written in one pass over the events in time order ([`Events`]): each thread
//! (a CPU thread, a stream's lanes, the analysis thread, a GPU's metrics and memory threads)
//! turns its events into records as they come, a closing event before an opening one at equal
//! times. All records of one time are written task by task, thread by thread, in the order each
//! thread made them, so the body is globally time-sorted and each thread's records do not
//! depend on which other processes the same pass writes. Nothing is formatted before it is due.
//!
//! A launch's communication record (API call to GPU operation) belongs right after the call's
//! own record, but is only known when its operation starts: the [`Gate`](super::gate::Gate) holds the records after
//! a call whose operations have not all started, and writes them once they have.

use super::gate::{Key, Remote};
use super::layout::{GpuName, Task, Values};
use super::types;
use crate::classify::CommKernel;
use crate::classify::mpi::MpiClass;
use crate::classify::payloads::MAX_FIELDS;
use crate::export::Plan;
use crate::export::counters::Counters;
use crate::export::prepare::{FirstFit, Prepared};
use crate::export::stream::{Event, Events, Item, Shared, Writer, copy_names};
use crate::export::syncs::OpKey;
use crate::hash::FxHashMap;
use crate::input::capture::Joined;
use crate::model::{
    AccTable, GpuId, MEMORY_KIND_UNKNOWN, MpiCall, MpiTable, NvtxKind, SampleEvent, StackId,
    StreamId, StringId, ThreadId,
};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::io::{self, Write};

/// Most type:value pairs in one record: a kernel begin has up to 25 (12 for every kernel; an
/// NCCL kernel's role, evidence, stage and collective; a graph node; up to 8 payload fields).
const MAX_PAIRS: usize = 17 + MAX_FIELDS;

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
    /// MPI call begins (50000001 to 50000005).
    pub mpi_calls: u64,
    /// OpenACC event begins (66000000 to 66000002).
    pub acc_events: u64,
    /// GPU metric samples (9400 + metric id).
    pub metric_samples: u64,
    /// CPU samples (30000000 + level).
    pub cpu_samples: u64,
    /// Times a thread ran on a core (`Running` state records).
    pub thread_runs: u64,
    /// Communication records (launch -> GPU operation).
    pub comms: u64,
    /// Launches not drawn as communication because the GPU operation starts before the call.
    pub comms_skipped: u64,
    /// Communication records of MPI messages (send to receive).
    pub mpi_comms: u64,
    /// Communication records of synchronization links (from the operation waited for).
    pub sync_comms: u64,
    /// Lines in the body.
    pub records: u64,
}

impl Counts {
    /// Adds another part's counts.
    pub fn add(&mut self, o: &Counts) {
        self.kernels += o.kernels;
        self.memops += o.memops;
        self.graphs += o.graphs;
        self.api += o.api;
        self.nvtx += o.nvtx;
        self.os_calls += o.os_calls;
        self.mpi_calls += o.mpi_calls;
        self.acc_events += o.acc_events;
        self.metric_samples += o.metric_samples;
        self.cpu_samples += o.cpu_samples;
        self.thread_runs += o.thread_runs;
        self.comms += o.comms;
        self.comms_skipped += o.comms_skipped;
        self.mpi_comms += o.mpi_comms;
        self.sync_comms += o.sync_comms;
        self.records += o.records;
    }
}

/// The role and stage values the body used, which the `.pcf` labels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Used {
    /// Role values (stream and communication roles).
    pub roles: BTreeSet<u32>,
    /// Stage values.
    pub stages: BTreeSet<u32>,
}

/// Writes the body of the plan's processes in `parts` to `out`, with the value tables
/// `values`; their events come from `shared` when given, else from a stream of its own.
pub fn write_body<W: Write + Send>(
    plan: &Plan,
    parts: &[&Joined],
    prepared: &[Option<Prepared>],
    values: &Values,
    (out, memory): (W, usize),
    shared: Option<Shared>,
) -> io::Result<(W, Counts, Used)> {
    let timeline = plan.activity.timeline;
    let nodes = super::layout::nodes(plan).1;
    let mut tasks: Vec<Option<TaskWriter>> = Vec::new();
    for (position, p) in prepared.iter().enumerate() {
        let report = timeline.process(plan.exported[position].process).report;
        let mine = parts.iter().any(|part| part.report == report);
        tasks.push(match p {
            Some(p) if mine => {
                let task = super::layout::task(plan, position, p, nodes[position]);
                Some(TaskWriter::new(plan, position, p, task))
            }
            _ => None,
        });
    }
    let mut events = Events::new(plan, parts, shared);
    let ((mut counts, used), out, records) = super::gate::on_thread(out, memory, |gate| {
        let mut body = Body {
            plan,
            values,
            gate,
            counts: Counts::default(),
            used: Used::default(),
            records: Vec::new(),
            seq: 0,
            comm: Vec::with_capacity(128),
            closes: FxHashMap::default(),
            kernel_shapes: FxHashMap::default(),
            syncs: SyncEnds::default(),
        };
        events.drive(&mut tasks, &mut body, Body::flush_group)?;
        Ok((body.counts, body.used))
    })?;
    counts.records = records;
    Ok((out, counts, used))
}

/// The records being made: the group of one time, and where they go.
struct Body<'p, 'a, 't, 'g> {
    plan: &'p Plan<'a, 't>,
    values: &'p Values,
    gate: &'g mut Remote,
    counts: Counts,
    used: Used,
    /// This time's records: their keys and where their lines are in the gate's bytes.
    records: Vec<(Key, usize, usize)>,
    seq: u64,
    /// A communication record's line.
    comm: Vec<u8>,
    /// The pairs (`:type:0...` and the newline) of each kind of closing record.
    closes: FxHashMap<Close, Vec<u8>>,
    /// The first pairs of kernel begins (`:type:value...`), by what they show.
    kernel_shapes: FxHashMap<KernelShape, Vec<u8>>,
    /// Synchronization links with one end made.
    syncs: SyncEnds,
}

/// Synchronization links (flow ids) whose communication record waits for its other end.
#[derive(Default)]
struct SyncEnds {
    /// Sent (the operation waited for ended): where the record goes.
    sent: FxHashMap<u64, Key>,
    /// Received first: where it arrives (task, thread, merged-clock time), None when nowhere.
    early: FxHashMap<u64, Option<(u32, u32, i64)>>,
    /// The close records with links not yet received, and how many.
    left: FxHashMap<Key, u32>,
}

/// Kernel shapes whose pairs are kept formatted, at most (about 200 bytes each).
const MAX_KERNEL_SHAPES: usize = 1 << 14;

/// What a kernel's begin shows besides its correlation and roles: its type and name, grid,
/// block, shared memory and registers. Kernels of one shape repeat by the thousand.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct KernelShape {
    ty: u32,
    name: u64,
    grid: [u32; 3],
    block: [u32; 3],
    shared: [u32; 2],
    registers: u32,
}

impl KernelShape {
    /// Appends its pairs, formatted (without a newline), to `line`.
    fn append_to(&self, line: &mut Vec<u8>) {
        let [gx, gy, gz] = self.grid.map(u64::from);
        let [bx, by, bz] = self.block.map(u64::from);
        let [shared, dynamic] = self.shared.map(u64::from);
        append_pairs(
            &[
                (self.ty, self.name),
                (types::GEOMETRY[0], gx),
                (types::GEOMETRY[1], gy),
                (types::GEOMETRY[2], gz),
                (types::GEOMETRY[3], bx),
                (types::GEOMETRY[4], by),
                (types::GEOMETRY[5], bz),
                (types::GEOMETRY[6], shared),
                (types::GEOMETRY[7], dynamic),
                (types::REGISTERS, u64::from(self.registers)),
            ],
            line,
        );
    }
}

/// A kind of closing record.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Close {
    /// A CPU interval of this type, and what else its begin set.
    Cpu { ty: u32, also: Also },
    /// A GPU operation.
    Gpu(EndKind),
}

impl Body<'_, '_, '_, '_> {
    /// Makes an event record of `thread` of `task` at merged-clock time `t`; returns its key.
    fn event(&mut self, task: u32, thread: u32, t: i64, pairs: &[(u32, u64)]) -> Key {
        let (time, from) = self.head(task, thread, t);
        format_pairs(pairs, self.gate.bytes());
        self.made(task, thread, time, from)
    }

    /// Starts a record of `thread` of `task` at merged-clock time `t` with its head
    /// (`2:0:1:task:thread:time`); its rebased time and where its line starts.
    fn head(&mut self, task: u32, thread: u32, t: i64) -> (u64, usize) {
        let time = self.plan.rebase(t);
        let from = self.gate.bytes().len();
        format_head(task, thread, time, self.gate.bytes());
        (time, from)
    }

    /// Makes a state record (`1:0:1:task:thread:begin:end:state`) of `thread` of `task`.
    fn state(&mut self, task: u32, thread: u32, (start, end): (i64, i64), state: u32) {
        let (time, from) = (self.plan.rebase(start), self.gate.bytes().len());
        let mut num = itoa::Buffer::new();
        let line = self.gate.bytes();
        line.extend_from_slice(b"1:0:1:");
        for v in [
            u64::from(task),
            u64::from(thread),
            time,
            self.plan.rebase(end),
        ] {
            line.extend_from_slice(num.format(v).as_bytes());
            line.push(b':');
        }
        line.extend_from_slice(num.format(state).as_bytes());
        line.push(b'\n');
        self.made(task, thread, time, from);
    }

    /// Makes a kernel's begin record: the pairs its shape gives (formatted once per shape, for
    /// the first [`MAX_KERNEL_SHAPES`] shapes; shapes that vary call by call, such as dynamic
    /// grids, beyond them are formatted in place, so the cache stays bounded and keeps the
    /// shapes that came first), then `pairs`.
    fn kernel_event(
        &mut self,
        (task, thread, t): (u32, u32, i64),
        shape: KernelShape,
        pairs: &[(u32, u64)],
    ) -> Key {
        let (time, from) = self.head(task, thread, t);
        let bytes = self.gate.bytes();
        match self.kernel_shapes.get(&shape) {
            Some(shaped) => bytes.extend_from_slice(shaped),
            None if self.kernel_shapes.len() < MAX_KERNEL_SHAPES => {
                let mut shaped = Vec::new();
                shape.append_to(&mut shaped);
                bytes.extend_from_slice(&shaped);
                self.kernel_shapes.insert(shape, shaped);
            }
            None => shape.append_to(bytes),
        }
        format_pairs(pairs, self.gate.bytes());
        self.made(task, thread, time, from)
    }

    /// Files the record just formatted from `from` on; returns its key.
    fn made(&mut self, task: u32, thread: u32, time: u64, from: usize) -> Key {
        self.seq += 1;
        let key = Key {
            time,
            task,
            thread,
            seq: self.seq,
            sub: 0,
        };
        self.records.push((key, from, self.gate.bytes().len()));
        key
    }

    /// Makes the closing record of an interval: its types at 0, formatted once per kind.
    fn close(&mut self, task: u32, thread: u32, t: i64, close: Close) -> Key {
        let (time, from) = self.head(task, thread, t);
        let pairs = self.closes.entry(close).or_insert_with(|| {
            let mut line = Vec::new();
            match close {
                Close::Cpu { ty, also } => match also {
                    Also::Nothing => format_pairs(&[(ty, 0)], &mut line),
                    Also::Correlation => {
                        format_pairs(&[(ty, 0), (types::CORRELATION, 0)], &mut line)
                    }
                    Also::Failed => format_pairs(
                        &[(ty, 0), (types::CORRELATION, 0), (types::RETURN_CODE, 0)],
                        &mut line,
                    ),
                    Also::TorchIds { seq } => {
                        let mut pairs = Pairs::new();
                        pairs.push((ty, 0));
                        if seq {
                            pairs.push((types::TORCH_SEQ, 0));
                        }
                        pairs.push((types::TORCH_OP_ID, 0));
                        format_pairs(pairs.as_slice(), &mut line)
                    }
                    Also::MpiSizes => format_pairs(
                        &[
                            (ty, 0),
                            (types::MPI_SEND_SIZE, 0),
                            (types::MPI_RECV_SIZE, 0),
                        ],
                        &mut line,
                    ),
                    Also::Acc(table) => {
                        let [kind, source, function] = types::acc_types(table);
                        let mut pairs = Pairs::new();
                        for ty in [kind, source, function] {
                            pairs.push((ty, 0));
                        }
                        if table == AccTable::Data {
                            pairs.push((types::ACC_DATA_BYTES, 0));
                        }
                        format_pairs(pairs.as_slice(), &mut line)
                    }
                },
                Close::Gpu(kind) => format_pairs(end_pairs(kind).as_slice(), &mut line),
            }
            line
        });
        self.gate.bytes().extend_from_slice(pairs);
        self.made(task, thread, time, from)
    }

    /// The end of an operation that synchronizations waited for (its close record at `key`):
    /// one communication record per link in `flows`, made now for the links whose other end
    /// came first, later for the others.
    fn sync_sent(&mut self, key: Key, flows: &[u64]) {
        let mut left = 0;
        for (i, &flow) in flows.iter().enumerate() {
            let sent = Key {
                sub: i as u32 + 1,
                ..key
            };
            match self.syncs.early.remove(&flow) {
                Some(Some(to)) => self.sync_comm(sent, to),
                Some(None) => {}
                None => {
                    self.syncs.sent.insert(flow, sent);
                    left += 1;
                }
            }
        }
        if left > 0 {
            self.gate.wait_for(key);
            self.syncs.left.insert(key, left);
        }
    }

    /// Where a synchronization link arrives: (task, thread, merged-clock time); None when
    /// its thread is not drawn (no record then).
    fn sync_received(&mut self, flow: u64, to: Option<(u32, u32, i64)>) {
        let Some(sent) = self.syncs.sent.remove(&flow) else {
            self.syncs.early.insert(flow, to);
            return;
        };
        if let Some(to) = to {
            self.sync_comm(sent, to);
        }
        let key = Key { sub: 0, ..sent };
        if let Some(left) = self.syncs.left.get_mut(&key) {
            *left -= 1;
            if *left == 0 {
                self.syncs.left.remove(&key);
                self.gate.resolved(key);
            }
        }
    }

    /// The communication record of a link sent at `sent`, received at `to`.
    fn sync_comm(&mut self, sent: Key, (task, thread, t): (u32, u32, i64)) {
        let time = self.plan.rebase(t);
        format_comm(
            sent,
            (task, thread),
            (time, time),
            0,
            types::TAG_SYNC,
            &mut self.comm,
        );
        self.gate.comm(sent, &self.comm);
        self.counts.sync_comms += 1;
    }

    /// Writes this time's records (at `_t`), task by task, thread by thread.
    fn flush_group(&mut self, _t: i64) -> io::Result<()> {
        self.records.sort_unstable_by_key(|r| r.0);
        for &(key, from, to) in &self.records {
            self.gate.record(key, from..to);
        }
        self.records.clear();
        self.gate.drain()
    }
}

/// What a CPU interval's begin set besides its type, which its end sets back to 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Also {
    /// Nothing.
    Nothing,
    /// An API call's correlation id.
    Correlation,
    /// A failed API call's correlation id and return code.
    Failed,
    /// A PyTorch NVTX range's op id, and its sequence number when `seq`.
    TorchIds { seq: bool },
    /// An MPI collective's send and receive sizes.
    MpiSizes,
    /// An OpenACC event's source and function types (of its table), and for data its bytes.
    Acc(AccTable),
}

/// A CPU thread's state: its number, pending closes (end, order, type, what else), and the
/// levels its last CPU sample set.
struct CpuThread {
    number: u32,
    sampled: usize,
    ends: BinaryHeap<Reverse<(i64, u64, u32, Also)>>,
    sequence: u64,
}

/// A stream's state: its lanes (first fit, as [`prepare`](crate::export::prepare) counted them)
/// and pending closes (end, lane, types to close).
struct GpuStream {
    first_thread: u32,
    role: u64,
    lanes: FirstFit,
    ends: BinaryHeap<Reverse<GpuEnd>>,
}

/// A GPU operation's pending close: its end, lane, types, and the operation when
/// synchronizations waited for it.
type GpuEnd = (i64, u32, EndKind, Option<OpKey>);

/// Which types a GPU operation's end closes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum EndKind {
    Kernel {
        ty: u32,
        nccl: bool,
        staged: bool,
        collective: bool,
        graph_node: bool,
        /// The payload fields set, a bit each.
        payload: u8,
    },
    Memop {
        /// A peer copy, with its communication role.
        comm: bool,
    },
    Graph,
}

/// A GPU metric sample waiting for its line: its series' place on the line, type and value.
type Sample = (usize, u32, u64);

/// A GPU's allocated memory.
struct Memory {
    thread: u32,
    total: i64,
    changed: bool,
    due_at_start: bool,
}

/// A launch whose operations have not all started: its record's key and how many are to come.
struct Pending {
    key: Key,
    left: u32,
    made: u32,
}

/// One task's threads.
struct TaskWriter<'p> {
    task: u32,
    window: (i64, i64),
    prepared: &'p Prepared,
    cpu: FxHashMap<ThreadId, CpuThread>,
    streams: FxHashMap<StreamId, GpuStream>,
    counters: Option<(u32, Counters)>,
    metrics: FxHashMap<GpuId, (u32, Vec<Sample>)>,
    memory: FxHashMap<GpuId, Memory>,
    /// Launches waiting for their operations, by correlation id.
    pending: FxHashMap<u32, Pending>,
    /// Operations that started before their (exported, later) launch, by correlation id.
    early: FxHashMap<u32, u32>,
    /// Whether metric samples or memory steps wait for the end of this time.
    dirty: bool,
    /// When each thread with an interval open closes one: (end, thread).
    closes: BinaryHeap<Reverse<(i64, Closer)>>,
    /// Which thread draws what.
    task_info: Task,
    /// Host waits' returns drawn so far (`Prepared::syncs`).
    returned: usize,
}

/// A thread with intervals to close.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Closer {
    Cpu(ThreadId),
    Gpu(StreamId),
}

impl<'p> TaskWriter<'p> {
    fn new(plan: &Plan, position: usize, prepared: &'p Prepared, task: Task) -> TaskWriter<'p> {
        let e = &plan.exported[position];
        let cpu = task
            .cpu
            .iter()
            .map(|(&thread, &number)| {
                let state = CpuThread {
                    number,
                    sampled: 0,
                    ends: BinaryHeap::new(),
                    sequence: 0,
                };
                (thread, state)
            })
            .collect();
        let streams = task
            .streams
            .iter()
            .map(|(&stream, s)| {
                let state = GpuStream {
                    first_thread: s.first_thread,
                    role: 0,
                    lanes: FirstFit::default(),
                    ends: BinaryHeap::new(),
                };
                (stream, state)
            })
            .collect();
        TaskWriter {
            task: position as u32 + 1,
            window: e.window,
            prepared,
            cpu,
            streams,
            counters: task
                .analysis
                .and_then(|thread| Some((thread, Counters::new(plan, position, prepared)?))),
            metrics: task
                .metrics
                .iter()
                .map(|(&gpu, (thread, _))| (gpu, (*thread, Vec::new())))
                .collect(),
            memory: task
                .memory
                .iter()
                .map(|(&gpu, &thread)| {
                    let memory = Memory {
                        thread,
                        total: 0,
                        changed: false,
                        due_at_start: false,
                    };
                    (gpu, memory)
                })
                .collect(),
            pending: FxHashMap::default(),
            early: FxHashMap::default(),
            dirty: false,
            closes: BinaryHeap::new(),
            task_info: task,
            returned: 0,
        }
    }
}

impl Writer<Body<'_, '_, '_, '_>> for TaskWriter<'_> {
    /// A close, a counter change, a memory step at the window's start.
    fn due(&self) -> Option<i64> {
        let closes = self.closes.peek().map(|Reverse((t, _))| *t);
        let counters = self.counters.as_ref().and_then(|(_, c)| c.due());
        let memory = self
            .memory
            .values()
            .any(|m| m.due_at_start)
            .then_some(self.window.0);
        let sync = (self.prepared.syncs.returns.get(self.returned)).map(|(r, _)| r.time);
        closes
            .into_iter()
            .chain(counters)
            .chain(memory)
            .chain(sync)
            .min()
    }

    fn item(&mut self, body: &mut Body<'_, '_, '_, '_>, item: &Item) -> io::Result<()> {
        let values = &body.values;
        match item.event {
            Event::Api(a) => {
                body.counts.api += 1;
                let id = u64::from(values.api.get(&a.name).copied().unwrap_or(0));
                let code = (types::RETURN_CODE, u64::from(a.return_value));
                let pairs = [
                    (types::CUDA_API, id),
                    (types::CORRELATION, a.correlation.into()),
                    code,
                ];
                let (pairs, also) = match a.return_value {
                    0 => (&pairs[..2], Also::Correlation),
                    _ => (&pairs[..], Also::Failed),
                };
                let key = self.cpu_begin(body, a.thread, item, pairs, also);
                if let Some(key) = key {
                    self.launch(body, key, a.correlation);
                }
            }
            Event::Os(o) => {
                body.counts.os_calls += 1;
                let (ty, value) = values.os.get(&o.name).copied().unwrap_or((types::OSRT, 0));
                let call = (ty, u64::from(value));
                match o.stack {
                    None => self.cpu_begin(body, o.thread, item, &[call], Also::Nothing),
                    Some(stack) => {
                        let callers = stack_pairs(body, stack, types::CALLER + 1);
                        let pairs: Vec<_> = std::iter::once(call).chain(callers).collect();
                        self.cpu_begin(body, o.thread, item, &pairs, Also::Nothing)
                    }
                };
            }
            Event::Mpi(m) => self.mpi(body, &m, item),
            Event::Sample(s) => self.sample(body, &s, item),
            // What it waited for is linked (`Prepared::syncs`).
            Event::Sync(_) => {}
            // A run the window (or the trace's start) cuts to nothing is not drawn.
            Event::Run(r) if body.plan.cuts_to_nothing(item, r.end.0 - r.start.0) => {}
            Event::Run(r) => {
                if let Some(c) = self.cpu.get(&r.thread) {
                    body.counts.thread_runs += 1;
                    body.state(self.task, c.number, (item.start, item.end), 1);
                }
            }
            Event::Acc(a) => {
                body.counts.acc_events += 1;
                let [kind, source, function] = types::acc_types(a.table);
                let [sources, functions] = &body.values.acc;
                let value = |map: &FxHashMap<_, u32>, id| {
                    u64::from(map.get(&(a.table, id)).copied().unwrap_or(0))
                };
                let mut pairs = Pairs::new();
                pairs.push((kind, u64::from(a.event_kind) + 1));
                pairs.push((source, value(sources, a.source)));
                if a.function != StringId::EMPTY {
                    pairs.push((function, value(functions, a.function)));
                }
                if a.table == AccTable::Data {
                    pairs.push((types::ACC_DATA_BYTES, a.bytes));
                }
                self.cpu_begin(body, a.thread, item, pairs.as_slice(), Also::Acc(a.table));
            }
            Event::Nvtx(n) => {
                body.counts.nvtx += 1;
                let id = u64::from(values.nvtx.get(&(n.domain, n.text)).copied().unwrap_or(0));
                match n.kind {
                    NvtxKind::Mark => {
                        if let Some(c) = self.cpu.get_mut(&n.thread) {
                            close_cpu(body, self.task, c, item.start);
                            body.event(self.task, c.number, item.start, &[(types::NVTX_MARK, id)]);
                        }
                    }
                    NvtxKind::StartEnd | NvtxKind::PushPop | NvtxKind::Metadata => {
                        let ty = match n.kind {
                            NvtxKind::StartEnd => types::NVTX_STARTEND,
                            _ => (values.domain_types.get(&n.domain).copied())
                                .unwrap_or(types::NVTX_PUSHPOP_BASE),
                        };
                        let mut pairs = Pairs::new();
                        pairs.push((ty, id));
                        let also = match values.torch_ids.get(&n.text) {
                            Some(&(seq, op_id)) => {
                                if let Some(seq) = seq {
                                    pairs.push((types::TORCH_SEQ, seq));
                                }
                                pairs.push((types::TORCH_OP_ID, op_id));
                                Also::TorchIds { seq: seq.is_some() }
                            }
                            None => Also::Nothing,
                        };
                        self.cpu_begin(body, n.thread, item, pairs.as_slice(), also);
                    }
                }
            }
            Event::Kernel(_) | Event::Memcpy(_) | Event::Memset(_) | Event::Graph(_) => {
                if let Some((_, counters)) = &mut self.counters {
                    counters.add(body.plan, self.prepared, item);
                    self.dirty = true;
                }
                self.gpu_begin(body, item)?;
            }
            Event::Metric(sample, gpu) => {
                if let Some((_, samples)) = self.metrics.get_mut(&gpu) {
                    let order = self.task_info.metrics[&gpu]
                        .1
                        .iter()
                        .position(|&s| s == sample.series)
                        .unwrap_or(0);
                    let ty = types::GPU_METRICS_BASE
                        + body
                            .plan
                            .activity
                            .timeline
                            .metric_series(sample.series)
                            .metric_id;
                    samples.push((order, ty, sample.value.max(0) as u64));
                    body.counts.metric_samples += 1;
                    self.dirty = true;
                }
            }
            Event::Memory(m) => {
                if let Some(memory) = self.memory.get_mut(&m.gpu) {
                    memory.total += m.bytes;
                    if m.time.0 < self.window.0 {
                        memory.due_at_start = true;
                    } else {
                        memory.changed = true;
                        self.dirty = true;
                    }
                }
            }
        }
        Ok(())
    }

    /// After every event at `t`: the closes due, the counters that changed, metric samples and
    /// memory steps.
    fn end_group(&mut self, body: &mut Body<'_, '_, '_, '_>, t: i64) -> io::Result<()> {
        while let Some(&Reverse((end, closer))) = self.closes.peek()
            && end <= t
        {
            self.closes.pop();
            match closer {
                Closer::Cpu(thread) => {
                    if let Some(c) = self.cpu.get_mut(&thread) {
                        close_cpu(body, self.task, c, t);
                    }
                }
                Closer::Gpu(stream) => {
                    if let Some(s) = self.streams.get_mut(&stream) {
                        close_gpu(body, (self.task, self.prepared), s, t);
                    }
                }
            }
        }
        let returns = &self.prepared.syncs.returns;
        while let Some(&(r, thread)) = returns.get(self.returned)
            && r.time <= t
        {
            self.returned += 1;
            let to = self.cpu.get(&thread).map(|c| (self.task, c.number, r.time));
            body.sync_received(r.flow, to);
        }
        if let Some((thread, counters)) = &mut self.counters
            && let Some(c) = counters.at(t)
        {
            let series = [
                (types::COMPUTE_IN_FLIGHT, c.compute),
                (types::COMM_IN_FLIGHT, c.comm),
                (types::EXPOSED_COMM, c.exposed),
                (types::BARRIER_IN_FLIGHT, c.barrier),
                (types::COLLECTIVE_WAIT, c.waiting),
                (types::CRITICAL_PATH, c.on_path),
                (types::ACHIEVED_MFLOPS, c.achieved),
            ];
            let mut pairs = Pairs::new();
            for (ty, v) in series {
                if let Some(v) = v {
                    pairs.push((ty, v.max(0) as u64));
                }
            }
            if !pairs.as_slice().is_empty() {
                body.event(self.task, *thread, t, pairs.as_slice());
            }
        }
        if !self.dirty && !self.memory.values().any(|m| m.due_at_start) {
            return Ok(());
        }
        self.dirty = false;
        let mut gpus: Vec<GpuId> = self.metrics.keys().copied().collect();
        gpus.sort();
        for gpu in gpus {
            let (thread, samples) = self.metrics.get_mut(&gpu).expect("listed");
            samples.sort_by_key(|&(order, ..)| order);
            for line in samples.chunks(MAX_PAIRS) {
                let pairs: Vec<(u32, u64)> = line.iter().map(|&(_, ty, v)| (ty, v)).collect();
                body.event(self.task, *thread, t, &pairs);
            }
            samples.clear();
        }
        let at_start = t >= self.window.0;
        for memory in self.memory.values_mut() {
            if memory.changed || (memory.due_at_start && at_start) {
                let pairs = [(types::GPU_MEMORY, memory.total.max(0) as u64)];
                body.event(self.task, memory.thread, t, &pairs);
                memory.changed = false;
                memory.due_at_start = false;
            }
        }
        Ok(())
    }
}

impl TaskWriter<'_> {
    /// Opens an interval on a CPU thread (after closing what ended by its start); returns the
    /// record's key.
    fn cpu_begin(
        &mut self,
        body: &mut Body<'_, '_, '_, '_>,
        thread: ThreadId,
        item: &Item,
        pairs: &[(u32, u64)],
        also: Also,
    ) -> Option<Key> {
        let c = self.cpu.get_mut(&thread)?;
        close_cpu(body, self.task, c, item.start);
        c.sequence += 1;
        c.ends
            .push(Reverse((item.end, c.sequence, pairs[0].0, also)));
        self.closes.push(Reverse((item.end, Closer::Cpu(thread))));
        Some(body.event(self.task, c.number, item.start, pairs))
    }

    /// A CPU sample: its function and callers, one type per level, innermost first; the
    /// levels the thread's previous sample set deeper than this one go back to 0.
    fn sample(&mut self, body: &mut Body<'_, '_, '_, '_>, s: &SampleEvent, item: &Item) {
        let Some(c) = self.cpu.get_mut(&s.thread) else {
            return;
        };
        let mut pairs: Vec<(u32, u64)> =
            stack_pairs(body, s.stack, types::SAMPLED_FUNCTION).collect();
        let depth = pairs.len();
        let level = |k: usize| types::SAMPLED_FUNCTION + k as u32;
        pairs.extend((depth..c.sampled).map(|k| (level(k), 0)));
        c.sampled = depth;
        if !pairs.is_empty() {
            body.counts.cpu_samples += 1;
            body.event(self.task, c.number, item.start, &pairs);
        }
    }

    /// An MPI call under its class's type, valued by function (a collective with its sizes);
    /// a send's record is followed by one communication record per message it sent.
    fn mpi(&mut self, body: &mut Body<'_, '_, '_, '_>, m: &MpiCall, item: &Item) {
        let plan = body.plan;
        let timeline = plan.activity.timeline;
        let class = MpiClass::of(m.table, timeline.text(m.name));
        let value = u64::from(body.values.mpi.get(&m.name).copied().unwrap_or(0));
        let ty = types::mpi_type(class);
        let sized = [
            (ty, value),
            (types::MPI_SEND_SIZE, m.size),
            (types::MPI_RECV_SIZE, m.recv_size),
        ];
        let (pairs, also) = match m.table {
            MpiTable::Collective => (&sized[..], Also::MpiSizes),
            _ => (&sized[..1], Also::Nothing),
        };
        body.counts.mpi_calls += 1;
        let Some(key) = self.cpu_begin(body, m.thread, item, pairs, also) else {
            return;
        };
        let call = (m.thread, m.start.0);
        for (sub, &n) in (1..).zip(plan.messages.of(call)) {
            let message = &plan.messages.list[n as usize];
            if message.send != call {
                continue;
            }
            let (_, to) = plan.messages.ends[n as usize];
            let Some(thread) = plan.cpu_threads[to]
                .iter()
                .position(|&(_, t)| t == message.recv.0)
            else {
                continue;
            };
            let window = plan.exported[to].window;
            let received = (
                plan.rebase(message.recv_span.0),
                plan.rebase(message.done.min(window.1)),
            );
            let to = (to as u32 + 1, thread as u32 + 1);
            let tag = message.tag.max(0) as u32;
            format_comm(
                Key { sub, ..key },
                to,
                received,
                message.size,
                tag,
                &mut body.comm,
            );
            body.gate.comm(Key { sub, ..key }, &body.comm);
            body.counts.mpi_comms += 1;
        }
    }

    /// An API call's launch: its operations' communication records follow its record, once
    /// they have all started.
    fn launch(&mut self, body: &mut Body<'_, '_, '_, '_>, key: Key, correlation: u32) {
        let ops = self.prepared.launches.ops(correlation);
        if ops == 0 {
            return;
        }
        let early = self.early.remove(&correlation).unwrap_or(0);
        body.counts.comms_skipped += u64::from(early);
        let left = ops.saturating_sub(early);
        if left > 0 {
            body.gate.wait_for(key);
            let pending = Pending { key, left, made: 0 };
            self.pending.insert(correlation, pending);
        }
    }

    /// Opens a GPU operation on the first idle lane of its stream.
    fn gpu_begin(&mut self, body: &mut Body<'_, '_, '_, '_>, item: &Item) -> io::Result<()> {
        let values = &body.values;
        let (stream, correlation) = match item.event {
            Event::Kernel(k) => (k.stream, k.correlation),
            Event::Memcpy(m) => (m.stream, m.correlation),
            Event::Memset(m) => (m.stream, m.correlation),
            Event::Graph(g) => (g.stream, g.correlation),
            _ => return Ok(()),
        };
        let Some(s) = self.streams.get_mut(&stream) else {
            return Ok(());
        };
        if s.role == 0 {
            let role = self.task_info.streams[&stream].role;
            s.role = values.role(role.name(body.plan.rules));
            body.used.roles.insert(s.role as u32);
        }
        close_gpu(body, (self.task, self.prepared), s, item.start);
        let lane = s.lanes.place(item.start, item.end);
        let thread = s.first_thread + lane;
        let mut pairs = Pairs::new();
        let (kind, tag, size, shape) = begin_pairs(body, self.prepared, item, s.role, &mut pairs);
        let op = (stream, item.event.span().0, correlation);
        let syncs = &self.prepared.syncs;
        let waited_for = syncs.sources.contains_key(&op).then_some(op);
        s.ends.push(Reverse((item.end, lane, kind, waited_for)));
        for &flow in syncs.held.get(&op).into_iter().flatten() {
            body.sync_received(flow, Some((self.task, thread, item.start)));
        }
        self.closes.push(Reverse((item.end, Closer::Gpu(stream))));
        match shape {
            Some(shape) => {
                body.kernel_event((self.task, thread, item.start), shape, pairs.as_slice())
            }
            None => body.event(self.task, thread, item.start, pairs.as_slice()),
        };
        if correlation != 0 && self.prepared.launches.has_call(correlation) {
            let time = body.plan.rebase(item.start);
            match self.pending.get_mut(&correlation) {
                Some(p) => {
                    p.left -= 1;
                    p.made += 1;
                    body.counts.comms += 1;
                    let key = Key {
                        sub: p.made,
                        ..p.key
                    };
                    let to = (self.task, thread);
                    format_comm(key, to, (time, time), size, tag, &mut body.comm);
                    body.gate.comm(key, &body.comm);
                    if p.left == 0 {
                        let resolved = p.key;
                        self.pending.remove(&correlation);
                        body.gate.resolved(resolved);
                    }
                }
                None => *self.early.entry(correlation).or_default() += 1,
            }
        }
        Ok(())
    }
}

/// A call stack's frames, innermost first and at most [`types::MAX_SAMPLE_DEPTH`], as pairs
/// of types from `first` on, valued by function.
fn stack_pairs<'b>(
    body: &'b Body<'_, '_, '_, '_>,
    stack: StackId,
    first: u32,
) -> impl Iterator<Item = (u32, u64)> + 'b {
    let frames = body.plan.activity.timeline.stacks.get(stack);
    let frames = frames.iter().take(types::MAX_SAMPLE_DEPTH).enumerate();
    frames.map(move |(k, f)| {
        let value = body.values.frames.get(f).copied().unwrap_or(0);
        (first + k as u32, u64::from(value))
    })
}

/// Writes a CPU thread's closes due by `t`.
fn close_cpu(body: &mut Body<'_, '_, '_, '_>, task: u32, c: &mut CpuThread, t: i64) {
    while let Some(&Reverse((end, _, ty, also))) = c.ends.peek()
        && end <= t
    {
        c.ends.pop();
        body.close(task, c.number, end, Close::Cpu { ty, also });
    }
}

/// Writes a stream's closes due by `t`.
fn close_gpu(
    body: &mut Body<'_, '_, '_, '_>,
    (task, prepared): (u32, &Prepared),
    s: &mut GpuStream,
    t: i64,
) {
    while let Some(&Reverse((end, lane, kind, waited_for))) = s.ends.peek()
        && end <= t
    {
        s.ends.pop();
        let key = body.close(task, s.first_thread + lane, end, Close::Gpu(kind));
        if let Some(flows) = waited_for.and_then(|op| prepared.syncs.sources.get(&op)) {
            body.sync_sent(key, flows);
        }
    }
}

/// Type:value pairs, on the stack.
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

/// Puts a GPU operation's begin pairs in `pairs` (a kernel's after those of its shape); returns
/// what its end closes, its communication tag and size, and a kernel's shape.
fn begin_pairs(
    body: &mut Body<'_, '_, '_, '_>,
    prepared: &Prepared,
    item: &Item,
    role: u64,
    pairs: &mut Pairs,
) -> (EndKind, u32, u64, Option<KernelShape>) {
    let plan = body.plan;
    let timeline = plan.activity.timeline;
    let values = &body.values;
    let gpu_id = |name: GpuName| u64::from(values.gpu.get(&name).copied().unwrap_or(0));
    let role = (types::STREAM_ROLE, role);
    match item.event {
        Event::Kernel(k) => {
            body.counts.kernels += 1;
            let ty = if body.plan.activity.is_comm_kernel(&k) {
                types::NCCL_KERNEL
            } else {
                types::KERNEL
            };
            let shape = KernelShape {
                ty,
                name: gpu_id(GpuName::Kernel(k.short_name)),
                grid: k.grid,
                block: k.block,
                shared: [k.static_shared, k.dynamic_shared],
                registers: k.registers,
            };
            pairs.push((types::CORRELATION, u64::from(k.correlation)));
            pairs.push(role);
            let nccl = prepared.streams.comm_at(k.stream, item.start);
            if let Some(n) = nccl {
                comm_role_pairs(body, n, pairs);
            }
            let values = &body.values;
            let stage = nccl.and_then(|n| n.stage).map(|s| values.stage(s));
            if let Some(stage) = stage {
                body.used.stages.insert(stage as u32);
                pairs.push((types::STAGE, stage));
            }
            let collective = plan.collectives.kernels.get(&(k.stream, k.start.0));
            if let Some(&(number, _)) = collective {
                pairs.push((types::COLLECTIVE, number));
            }
            if k.graph_node != 0 {
                pairs.push((types::GRAPH_NODE, u64::from(k.graph_node)));
            }
            let process = timeline.stream(k.stream).process;
            let mut payload = 0u8;
            if nccl.is_some() {
                for &(field, value) in plan.payloads.of(process, k.correlation) {
                    pairs.push((types::NCCL_PAYLOAD_BASE + field as u32, value));
                    payload |= 1 << field;
                }
            }
            let kind = EndKind::Kernel {
                ty,
                nccl: nccl.is_some(),
                staged: stage.is_some(),
                collective: collective.is_some(),
                graph_node: k.graph_node != 0,
                payload,
            };
            (kind, types::TAG_KERNEL, 0, Some(shape))
        }
        Event::Graph(g) => {
            body.counts.graphs += 1;
            for pair in [
                (types::GRAPH_EXEC, gpu_id(GpuName::Graph(g.exec))),
                (types::GRAPH_ID, u64::from(g.graph)),
                (types::GRAPH_EXEC_ID, u64::from(g.exec)),
                (types::CORRELATION, u64::from(g.correlation)),
                role,
            ] {
                pairs.push(pair);
            }
            (EndKind::Graph, types::TAG_KERNEL, 0, None)
        }
        Event::Memcpy(_) | Event::Memset(_) => {
            body.counts.memops += 1;
            // A copy between GPUs is communication: its role as a transfer kernel's.
            let transfer = match item.event {
                Event::Memcpy(m) => prepared.streams.peer_copy_at(&m, item.start),
                _ => None,
            };
            let (name, bytes, correlation, (source, destination)) = match item.event {
                Event::Memcpy(m) => {
                    let name = copy_names(m.copy_kind).0;
                    (name, m.bytes, m.correlation, m.memory_kinds)
                }
                Event::Memset(m) => {
                    let kinds = (MEMORY_KIND_UNKNOWN, m.memory_kind);
                    ("[CUDA memset]", m.bytes, m.correlation, kinds)
                }
                _ => unreachable!("a copy or set"),
            };
            for pair in [
                (types::MEMOP, gpu_id(GpuName::Fixed(name))),
                (types::MEMOP_BYTES, bytes),
                (types::CORRELATION, u64::from(correlation)),
                role,
                (types::DESTINATION_MEMORY, u64::from(destination) + 1),
            ] {
                pairs.push(pair);
            }
            if let Event::Memcpy(_) = item.event {
                pairs.push((types::SOURCE_MEMORY, u64::from(source) + 1));
            }
            if let Some(n) = transfer {
                comm_role_pairs(body, n, pairs);
            }
            let kind = EndKind::Memop {
                comm: transfer.is_some(),
            };
            (kind, types::TAG_MEMOP, bytes, None)
        }
        _ => unreachable!("a GPU operation"),
    }
}

/// A communication kernel's or peer copy's own role and what decided it.
fn comm_role_pairs(body: &mut Body<'_, '_, '_, '_>, n: &CommKernel, pairs: &mut Pairs) {
    let kind = n.evidence.kind();
    let evidence = types::EVIDENCE_KINDS.iter().position(|&e| e == kind);
    let role = body.values.role(n.role_name(body.plan.rules));
    body.used.roles.insert(role as u32);
    pairs.push((types::COMM_ROLE, role));
    pairs.push((types::ROLE_EVIDENCE, evidence.map_or(0, |i| i as u64 + 1)));
}

/// The closing pairs of a GPU operation: every type of its begin, at 0.
fn end_pairs(kind: EndKind) -> Pairs {
    let mut pairs = Pairs::new();
    let types: &[u32] = match kind {
        EndKind::Kernel { ty, .. } => {
            pairs.push((ty, 0));
            for t in types::GEOMETRY {
                pairs.push((t, 0));
            }
            &[types::REGISTERS, types::CORRELATION, types::STREAM_ROLE]
        }
        EndKind::Memop { .. } => &[
            types::MEMOP,
            types::MEMOP_BYTES,
            types::CORRELATION,
            types::STREAM_ROLE,
            types::DESTINATION_MEMORY,
            types::SOURCE_MEMORY,
        ],
        EndKind::Graph => &[
            types::GRAPH_EXEC,
            types::GRAPH_ID,
            types::GRAPH_EXEC_ID,
            types::CORRELATION,
            types::STREAM_ROLE,
        ],
    };
    for &t in types {
        pairs.push((t, 0));
    }
    if let EndKind::Memop { comm: true } = kind {
        pairs.push((types::COMM_ROLE, 0));
        pairs.push((types::ROLE_EVIDENCE, 0));
    }
    if let EndKind::Kernel {
        nccl,
        staged,
        collective,
        graph_node,
        payload,
        ..
    } = kind
    {
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
        for field in (0..MAX_FIELDS).filter(|f| payload & (1 << f) != 0) {
            pairs.push((types::NCCL_PAYLOAD_BASE + field as u32, 0));
        }
    }
    pairs
}

/// Appends an event record's head: `2:0:1:task:thread:time`.
fn format_head(task: u32, thread: u32, time: u64, line: &mut Vec<u8>) {
    let mut num = itoa::Buffer::new();
    line.extend_from_slice(b"2:0:1:");
    line.extend_from_slice(num.format(task).as_bytes());
    line.push(b':');
    line.extend_from_slice(num.format(thread).as_bytes());
    line.push(b':');
    line.extend_from_slice(num.format(time).as_bytes());
}

/// Appends an event record's pairs (`:type:value...`) and its newline.
fn format_pairs(pairs: &[(u32, u64)], line: &mut Vec<u8>) {
    append_pairs(pairs, line);
    line.push(b'\n');
}

/// Appends pairs (`:type:value...`).
fn append_pairs(pairs: &[(u32, u64)], line: &mut Vec<u8>) {
    let mut num = itoa::Buffer::new();
    for &(ty, value) in pairs {
        line.push(b':');
        line.extend_from_slice(num.format(ty).as_bytes());
        line.push(b':');
        line.extend_from_slice(num.format(value).as_bytes());
    }
}

/// Formats a communication record sent by the record at `key` (logical and physical send at its
/// time) and received by (task, thread) at (logical, physical) times into `line`:
/// `3:0:1:task:thread:ls:ps:0:1:task:thread:lr:pr:size:tag`.
fn format_comm(
    key: Key,
    (task, thread): (u32, u32),
    (logical, physical): (u64, u64),
    size: u64,
    tag: u32,
    line: &mut Vec<u8>,
) {
    let mut num = itoa::Buffer::new();
    line.clear();
    line.extend_from_slice(b"3:0:1:");
    for v in [
        u64::from(key.task),
        u64::from(key.thread),
        key.time,
        key.time,
    ] {
        line.extend_from_slice(num.format(v).as_bytes());
        line.push(b':');
    }
    line.extend_from_slice(b"0:1:");
    for v in [
        u64::from(task),
        u64::from(thread),
        logical,
        physical,
        size,
        u64::from(tag),
    ] {
        line.extend_from_slice(num.format(v).as_bytes());
        line.push(b':');
    }
    line.pop();
    line.push(b'\n');
}
