//! The first pass over a conversion's events: what each exported process draws, found before
//! anything is written (a writer names its tracks and numbers its threads up front).
//!
//! One pass over the [`Stream`] gives, per process: its streams' roles and NCCL kernels inside
//! its window (the same [`Usage`] classification that `streams` and `overlap` print), its CPU
//! threads with events, its streams with the lanes first fit gives their operations, its NVTX
//! start/end domains and GPUs with device-memory events, whether it ran kernels (its counters are
//! drawn), which launches have both ends exported, the latest exported time, and where operators
//! record their shapes, each kernel's FLOPs (the calls give each launch its operator).

use super::Plan;
use super::stream::{Event, Item, Kinds, Stream};
use super::syncs::{OpKey, Resolver, SyncLinks};
use crate::analysis::mfu::{Shares, arithmetic};
use crate::bits::Bits;
use crate::classify::RankStreams;
use crate::classify::families::{Families, FamilyCache};
use crate::classify::flops::LaunchFlops;
use crate::classify::streams::Usage;
use crate::hash::FxHashMap;
use crate::input::capture::Joined;
use crate::model::{GpuId, NvtxKind, ProcessId, StreamId, StringId, ThreadId};
use std::collections::{BTreeMap, BTreeSet};
use std::io;

/// What one exported process draws.
#[derive(Debug, Default)]
pub struct Prepared {
    /// Its streams' roles and NCCL kernels inside its window.
    pub streams: RankStreams,
    /// Its CPU threads with events, by (tid, thread); `true` for a thread with events other
    /// than NVTX start/end ranges (which Perfetto draws on tracks of their own).
    pub threads: Vec<(u32, ThreadId, bool)>,
    /// Its streams with operations, by (device, stream id), with their lane counts.
    pub streams_lanes: Vec<StreamLanes>,
    /// NVTX domains of its start/end ranges, by string id.
    pub domains: Vec<StringId>,
    /// GPUs with device-memory events, by id.
    pub memory: Vec<GpuId>,
    /// Whether it ran a kernel or graph inside the window (its counters are drawn).
    pub counters: bool,
    /// Which launches have both ends exported.
    pub launches: Launches,
    /// The latest exported time (merged clock), when it exports anything.
    pub end: Option<i64>,
    /// Its events in the window: (GPU operations, other events).
    pub events: (u64, u64),
    /// What its synchronizations waited for.
    pub syncs: SyncLinks,
    /// The FLOPs of each of its kernels with counted work (`mfu`'s share of its launching
    /// operator's), by correlation id; empty when no operator records shapes.
    pub flops: FxHashMap<u32, f64>,
}

/// A stream's lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLanes {
    /// The stream.
    pub stream: StreamId,
    /// Its device ordinal.
    pub device: u32,
    /// Its stream id.
    pub number: u32,
    /// Lanes its operations need (first fit, in the stream's order).
    pub lanes: u32,
}

/// The exported ends of a process's launches, by correlation id.
#[derive(Debug, Default)]
pub struct Launches {
    /// Correlation ids with one exported GPU operation or more.
    ops: Bits,
    /// Operations beyond the first, for correlation ids with several (graph node kernels).
    more_ops: FxHashMap<u32, u32>,
    /// Correlation ids of exported API calls.
    calls: Bits,
}

impl Launches {
    /// How many exported GPU operations the call with this correlation id launched.
    pub fn ops(&self, correlation: u32) -> u32 {
        if !self.ops.contains(correlation) {
            return 0;
        }
        1 + self.more_ops.get(&correlation).copied().unwrap_or(0)
    }

    /// Whether the API call with this correlation id is exported.
    pub fn has_call(&self, correlation: u32) -> bool {
        self.calls.contains(correlation)
    }

    fn op(&mut self, correlation: u32) {
        if correlation == 0 {
            return;
        }
        if !self.ops.insert(correlation) {
            *self.more_ops.entry(correlation).or_default() += 1;
        }
    }

    fn call(&mut self, correlation: u32) {
        if correlation != 0 {
            self.calls.insert(correlation);
        }
    }
}

/// Whether a CUDA call is one that CUPTI records a host wait for (stream, event, context or
/// device synchronize, and an event's query): `cudaStreamSynchronize`, `cuEventQuery`...
fn waits_on_the_gpu(name: &str) -> bool {
    ["Synchronize", "EventQuery"]
        .iter()
        .any(|w| name.contains(w))
}

/// What is being gathered for one process.
#[derive(Default)]
struct Gathering {
    usage: Usage,
    threads: BTreeMap<(u32, ThreadId), bool>,
    lanes: BTreeMap<(u32, u32, StreamId), FirstFit>,
    domains: BTreeSet<StringId>,
    memory: BTreeSet<GpuId>,
    counters: bool,
    launches: Launches,
    end: Option<i64>,
    events: (u64, u64),
    /// What the synchronizations waited for (the GPU operations' pass).
    syncs: Option<Resolver>,
    /// The thread of each host-wait call (`...Synchronize`), by correlation id (the other
    /// events' pass).
    waiting_calls: FxHashMap<u32, ThreadId>,
    /// Whether an API name is a host wait's.
    waits_by_name: FxHashMap<StringId, bool>,
    /// The operators recording shapes and the calls they made, when any records shapes (the
    /// other events' pass).
    operators: Option<LaunchFlops>,
    /// When operators record shapes: every kernel's correlation id and names (the GPU
    /// operations' pass).
    shaped: Option<Vec<(u32, StringId, StringId)>>,
}

/// First-fit lanes: the end of each lane's last operation.
#[derive(Debug, Default, Clone)]
pub struct FirstFit(Vec<i64>);

impl FirstFit {
    /// The lane of an operation `[start, end]` (the first idle at its start, else a new one).
    pub fn place(&mut self, start: i64, end: i64) -> u32 {
        let lane = match self.0.iter().position(|&e| e <= start) {
            Some(lane) => lane,
            None => {
                self.0.push(i64::MIN);
                self.0.len() - 1
            }
        };
        self.0[lane] = end;
        lane as u32
    }

    /// Lanes used (at least one).
    pub fn count(&self) -> u32 {
        (self.0.len() as u32).max(1)
    }
}

/// What every exported process draws: each part prepared on its own, up to `threads` at once.
pub fn prepare_all(
    plan: &Plan,
    parts: &[Joined],
    threads: usize,
) -> crate::nsys::Result<Vec<Option<Prepared>>> {
    let per_part = crate::nsys::read_all(parts.iter().collect(), threads, |part: &Joined| {
        prepare(plan, &[part]).map_err(|cause| part.error(cause))
    })?;
    let mut all: Vec<Option<Prepared>> = (0..plan.exported.len()).map(|_| None).collect();
    for part in per_part {
        for (slot, p) in all.iter_mut().zip(part) {
            if p.is_some() {
                *slot = p;
            }
        }
    }
    Ok(all)
}

/// What each exported process of `parts` draws, by position in [`Plan::exported`] (None for
/// processes of other parts). The GPU operations (what lanes and roles need in time order) and
/// the other events are gathered at once, on two threads, then joined.
pub fn prepare(plan: &Plan, parts: &[&Joined]) -> io::Result<Vec<Option<Prepared>>> {
    let timeline = plan.activity.timeline;
    // The operators that record shapes, of each exported process of these parts (read once:
    // the other events' pass gives them their calls, the GPU operations' pass keeps the kernels
    // of processes that have any).
    let mut operators: Vec<Option<Option<LaunchFlops>>> = (plan.exported.iter())
        .map(|e| {
            let report = timeline.process(e.process).report;
            parts.iter().any(|p| p.report == report).then(|| {
                Some(LaunchFlops::ranges(plan.activity, e.process)).filter(LaunchFlops::speaks)
            })
        })
        .collect();
    let shaped: Vec<Option<bool>> = (operators.iter())
        .map(|o| o.as_ref().map(Option::is_some))
        .collect();
    let (gpu, others) = std::thread::scope(|scope| {
        let gpu = scope.spawn(|| {
            let shaped = shaped.iter().map(|s| s.map(|s| (s, None)));
            gather(plan, parts, Kinds::GpuOperations, shaped.collect())
        });
        let with_operators = operators.iter_mut().map(|o| {
            let o = o.as_mut().map(Option::take);
            o.map(|o| (o.is_some(), o))
        });
        let others = gather(plan, parts, Kinds::Others, with_operators.collect());
        let gpu = gpu
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("preparing the GPU operations panicked")));
        (gpu, others)
    });
    Ok(gpu?
        .into_iter()
        .zip(others?)
        .zip(&plan.exported)
        .map(|((g, o), e)| Some(g?.join(o?).finish(plan, e)))
        .collect())
}

/// What the events of `kinds` of `parts` show of each exported process: those of the processes
/// `shapes` names (the others' are None), with whether it keeps kernels for their FLOPs and the
/// operators that record shapes, which take the calls.
fn gather(
    plan: &Plan,
    parts: &[&Joined],
    kinds: Kinds,
    shapes: Vec<Option<(bool, Option<LaunchFlops>)>>,
) -> io::Result<Vec<Option<Gathering>>> {
    let mut gathering: Vec<Option<Gathering>> = (shapes.into_iter())
        .map(|shapes| {
            shapes.map(|(shaped, operators)| Gathering {
                usage: Usage::new(false),
                shaped: shaped.then(Vec::new),
                operators,
                ..Gathering::default()
            })
        })
        .collect();
    let mut stream = Stream::of(plan, parts, kinds);
    let mut group = Vec::new();
    while let Some(t) = stream.peek()? {
        stream.group(t, &mut group)?;
        for item in &group {
            if let Some(g) = gathering[item.exported].as_mut() {
                g.add(plan, item);
            }
        }
    }
    Ok(gathering)
}

impl Gathering {
    fn add(&mut self, plan: &Plan, item: &Item) {
        let timeline = plan.activity.timeline;
        self.end = Some(self.end.map_or(item.end, |e| e.max(item.end)));
        match item.event {
            Event::Kernel(_) | Event::Memcpy(_) | Event::Memset(_) | Event::Graph(_) => {
                self.events.0 += 1;
            }
            _ => self.events.1 += 1,
        }
        let span = (item.start, item.end);
        let mut thread = |thread: ThreadId, besides_start_end: bool| {
            let key = (timeline.thread(thread).tid, thread);
            *self.threads.entry(key).or_default() |= besides_start_end;
        };
        match item.event {
            Event::Api(a) => {
                thread(a.thread, true);
                self.launches.call(a.correlation);
                if let Some(operators) = &mut self.operators {
                    operators.call(&a);
                }
                let waits = *(self.waits_by_name.entry(a.name))
                    .or_insert_with(|| waits_on_the_gpu(timeline.text(a.name)));
                if waits {
                    self.waiting_calls.insert(a.correlation, a.thread);
                }
            }
            Event::Os(o) => thread(o.thread, true),
            Event::Mpi(m) => thread(m.thread, true),
            Event::Acc(a) => thread(a.thread, true),
            Event::Sample(s) => thread(s.thread, true),
            Event::Run(r) => thread(r.thread, true),
            Event::Nvtx(n) if n.kind == NvtxKind::StartEnd => {
                thread(n.thread, false);
                self.domains.insert(n.domain);
            }
            Event::Nvtx(n) => thread(n.thread, true),
            Event::Kernel(k) => {
                if let Some(shaped) = &mut self.shaped {
                    shaped.push((k.correlation, k.short_name, k.name));
                }
                let comm = plan.activity.is_comm_kernel(&k);
                self.usage.kernel(&k, comm, span);
                self.gpu_op(plan, item, (k.stream, k.start.0, k.correlation), k.end.0);
                self.counters = true;
            }
            Event::Memcpy(m) => {
                self.usage.memcpy(&m, span);
                self.gpu_op(plan, item, (m.stream, m.start.0, m.correlation), m.end.0);
            }
            Event::Memset(m) => {
                self.usage.copy(m.stream, span);
                self.gpu_op(plan, item, (m.stream, m.start.0, m.correlation), m.end.0);
            }
            Event::Graph(g) => {
                self.usage.graph(g.stream, span);
                self.gpu_op(plan, item, (g.stream, g.start.0, g.correlation), g.end.0);
                self.counters = true;
            }
            Event::Sync(s) => self.resolver(s.process).sync(&s),
            Event::Metric(..) => {}
            Event::Memory(m) => {
                self.memory.insert(m.gpu);
            }
        }
    }

    /// A GPU operation (`key`, ending at `end`): its lane, its launch, and what it means for
    /// the synchronizations.
    fn gpu_op(&mut self, plan: &Plan, item: &Item, key: OpKey, end: i64) {
        let timeline = plan.activity.timeline;
        let (stream, _, correlation) = key;
        let st = timeline.stream(stream);
        let lane = (timeline.gpu(st.gpu).device, st.stream, stream);
        self.lanes
            .entry(lane)
            .or_default()
            .place(item.start, item.end);
        self.launches.op(correlation);
        self.resolver(st.process).op(key, end);
    }

    /// The synchronization resolver of this process.
    fn resolver(&mut self, process: ProcessId) -> &mut Resolver {
        self.syncs.get_or_insert_with(|| Resolver::new(process))
    }

    /// What the GPU operations showed (`self`) and what the other events showed, together.
    fn join(self, others: Gathering) -> Gathering {
        Gathering {
            usage: self.usage,
            threads: others.threads,
            lanes: self.lanes,
            domains: others.domains,
            memory: others.memory,
            counters: self.counters,
            launches: Launches {
                calls: others.launches.calls,
                ..self.launches
            },
            end: self.end.max(others.end),
            events: (self.events.0, others.events.1),
            syncs: self.syncs,
            waiting_calls: others.waiting_calls,
            waits_by_name: FxHashMap::default(),
            operators: others.operators,
            shaped: self.shaped,
        }
    }

    /// Each shaped kernel's FLOPs, shared as `mfu` shares them ([`Shares`]).
    fn flops(&mut self, timeline: &crate::model::Timeline) -> FxHashMap<u32, f64> {
        let mut flops = FxHashMap::default();
        let (Some(operators), Some(kernels)) = (self.operators.take(), self.shaped.take()) else {
            return flops;
        };
        let families = Families::default();
        let mut cache = FamilyCache::new(&families, timeline);
        let mut shares = Shares::default();
        for (correlation, short, name) in kernels {
            if let Some(operator) = operators.of(correlation) {
                shares.add(operator, correlation, arithmetic(cache.kernel(short, name)));
            }
        }
        shares.share(|correlation, share| {
            flops.insert(correlation, share.flops);
        });
        flops
    }

    fn finish(mut self, plan: &Plan, exported: &super::Exported) -> Prepared {
        let process = exported.process;
        let flops = self.flops(plan.activity.timeline);
        let calls = &self.waiting_calls;
        let syncs = self.syncs.map_or_else(SyncLinks::default, |r| {
            r.finish(exported.window.1, |c| calls.get(&c).copied())
        });
        Prepared {
            syncs,
            streams: self.usage.classify(plan.activity, process, plan.rules),
            threads: self
                .threads
                .into_iter()
                .map(|((tid, thread), besides)| (tid, thread, besides))
                .collect(),
            streams_lanes: self
                .lanes
                .into_iter()
                .map(|((device, number, stream), lanes)| StreamLanes {
                    stream,
                    device,
                    number,
                    lanes: lanes.count(),
                })
                .collect(),
            domains: self.domains.into_iter().collect(),
            memory: self.memory.into_iter().collect(),
            counters: self.counters,
            launches: self.launches,
            end: self.end,
            events: self.events,
            flops,
        }
    }
}
