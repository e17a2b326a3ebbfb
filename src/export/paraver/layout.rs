//! The Paraver object model of an export and its value tables: one node per host, one task per
//! exported process (ranks in rank order), and per task its CPU threads, one thread per stream
//! lane, and an analysis thread for the counters. Value ids follow one documented rule: API
//! names first, then kernel and memory-operation names, each sorted; NVTX names, roles and
//! stages in their own sorted tables.

use super::types;
use crate::analysis::memory::allocated;
use crate::classify::{Role, Stage};
use crate::export::counters::Counters;
use crate::export::items::{Clipped, CpuEvent, GpuOp, copy_names, stream_ops, thread_events};
use crate::export::{Part, Scope};
use crate::hash::{FxHashMap, FxHashSet};
use crate::model::{HostId, MetricSeriesId, ProcessId, StreamId, StringId, Timeline};
use std::collections::BTreeMap;

/// Paraver's default builds index objects with 16 bits.
pub const MAX_THREADS: usize = 65_535;

/// A GPU operation's name: a kernel's short name or a fixed memory-operation label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuName {
    /// Kernel short name.
    Kernel(StringId),
    /// `CUDA memcpy Host-to-Device`, `CUDA memset`...
    Fixed(&'static str),
    /// A CUDA graph launch, by executable graph id (`Graph Exec <n>`).
    Graph(u32),
}

/// One stream's lane threads.
pub struct StreamThreads<'t> {
    /// The stream.
    pub stream: StreamId,
    /// Thread number (1-based in the task) of its first lane.
    pub first_thread: u32,
    /// Its role.
    pub role: Role,
    /// Its operations, sorted.
    pub ops: Vec<Clipped<GpuOp<'t>>>,
}

/// One task (process).
pub struct Task<'t> {
    /// The part it exports.
    pub part: usize,
    /// `rank N` or `node h pid p`.
    pub name: String,
    /// Node number (1-based).
    pub node: u32,
    /// Thread names, in thread order.
    pub threads: Vec<String>,
    /// CPU threads: their number and events.
    pub cpu: Vec<(u32, Vec<Clipped<CpuEvent<'t>>>)>,
    /// Stream threads.
    pub streams: Vec<StreamThreads<'t>>,
    /// The analysis thread's number and its counters.
    pub counters: Option<(u32, Counters)>,
    /// Per GPU with metrics: its `Metrics GPU<d>` thread's number and its metric series.
    pub metrics: Vec<(u32, Vec<MetricSeriesId>)>,
    /// Per GPU with memory events: its `Memory GPU<d>` thread's number and allocated bytes.
    pub memory: Vec<(u32, Vec<(i64, i64)>)>,
}

/// Where a launch's GPU operation was drawn: the receiving end of a communication record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Receiver {
    /// The process and correlation id (the key).
    pub key: (ProcessId, u32),
    /// Task number.
    pub task: u32,
    /// Thread number.
    pub thread: u32,
    /// Operation start, merged clock.
    pub start: i64,
    /// 55001 (kernel) or 55002 (copy or set).
    pub tag: u32,
    /// Bytes for copies and sets, else 0.
    pub size: u64,
}

/// Value ids of every name used.
#[derive(Default)]
pub struct Values {
    /// API name -> id, and labels by id.
    pub api: FxHashMap<StringId, u32>,
    /// GPU operation name -> id (after the API ids).
    pub gpu: FxHashMap<GpuName, u32>,
    /// Labels of API and GPU names by id (index = id - 1).
    pub names: Vec<String>,
    /// Number of API names (ids 1..=api_count).
    pub api_count: u32,
    /// NVTX (domain, text) -> id.
    pub nvtx: FxHashMap<(StringId, StringId), u32>,
    /// NVTX labels by id.
    pub nvtx_labels: Vec<String>,
    /// NVTX domain -> event type.
    pub domains: BTreeMap<String, u32>,
    /// OS runtime call name -> (event type, value): [`types::OSRT`] or [`types::PTHREAD`].
    pub os: FxHashMap<StringId, (u32, u32)>,
    /// Labels of the [`types::OSRT`] values, by value.
    pub os_labels: Vec<(u32, String)>,
    /// Labels of the [`types::PTHREAD`] values, by value.
    pub pthread_labels: Vec<(u32, String)>,
    /// Role names by id.
    pub roles: Vec<String>,
    /// Stages by id.
    pub stages: Vec<Stage>,
    /// GPU metric event types (9400 + metric id) and their names.
    pub metrics: BTreeMap<u32, String>,
}

/// The whole model.
pub struct Layout<'t> {
    /// Node names (hostnames), by node number - 1.
    pub nodes: Vec<String>,
    /// Tasks, by task number - 1.
    pub tasks: Vec<Task<'t>>,
    /// Value tables.
    pub values: Values,
    /// Communication receivers, sorted by key.
    pub receivers: Vec<Receiver>,
    /// The latest record time (rebased): the header's end time.
    pub end: u64,
    /// Limits the trace exceeds.
    pub warnings: Vec<String>,
}

impl<'t> Layout<'t> {
    /// Builds the model of a scope.
    pub fn new(scope: &Scope<'_, 't>) -> Layout<'t> {
        let timeline = scope.activity.timeline;
        let mut hosts: Vec<HostId> = Vec::new();
        let mut tasks = Vec::new();
        for (index, part) in scope.parts.iter().enumerate() {
            let host = timeline.process(part.process).host;
            if !hosts.contains(&host) {
                hosts.push(host);
            }
            let node = hosts.iter().position(|&h| h == host).unwrap_or(0) as u32 + 1;
            tasks.push(task(scope, index, part, node));
        }
        let threads: usize = tasks.iter().map(|t| t.threads.len()).sum();
        let mut warnings = Vec::new();
        if threads > MAX_THREADS {
            warnings.push(format!(
                "{threads} Paraver threads exceed the {MAX_THREADS} a default Paraver build can \
                 index (builds with --enable-extended-objects open it): export fewer ranks \
                 (--ranks) for a default build"
            ));
        }
        let values = values(scope, &tasks);
        let receivers = receivers(scope, &tasks);
        let end = end_time(scope, &tasks);
        Layout {
            nodes: hosts
                .iter()
                .map(|&h| timeline.host(h).name.clone())
                .collect(),
            tasks,
            values,
            receivers,
            end,
            warnings,
        }
    }
}

/// One task: its threads in order (CPU, stream lanes, analysis) and their names.
fn task<'t>(scope: &Scope<'_, 't>, index: usize, part: &Part, node: u32) -> Task<'t> {
    let activity = scope.activity;
    let timeline = activity.timeline;
    let task_no = index + 1;
    let mut names = Vec::new();
    let mut cpu = Vec::new();
    for ((tid, thread), events) in thread_events(activity, part, true) {
        let number = names.len() as u32 + 1;
        let name = timeline.text(timeline.thread(thread).name);
        names.push(
            format!("THREAD 1.{task_no}.{number} {name} [{tid}]")
                .trim_end()
                .to_string(),
        );
        cpu.push((number, events));
    }
    let mut streams = Vec::new();
    for ((device, stream_id, stream), ops) in stream_ops(activity, part) {
        let role = part.streams.role(stream).unwrap_or(Role::Copy);
        let role_name = role.name(scope.rules);
        let first_thread = names.len() as u32 + 1;
        for lane in 0..lane_count(&ops) {
            names.push(match lane {
                0 => format!("CUDA-D{device}.S{stream_id} {role_name}"),
                n => format!("CUDA-D{device}.S{stream_id} {role_name} (lane {})", n + 1),
            });
        }
        streams.push(StreamThreads {
            stream,
            first_thread,
            role,
            ops,
        });
    }
    let counters = Counters::new(scope, part).map(|c| {
        names.push(format!("ANALYSIS {}", task_name(timeline, part)));
        (names.len() as u32, c)
    });
    let mut metrics: Vec<(u32, Vec<MetricSeriesId>)> = Vec::new();
    let mut last_gpu = None;
    for (gpu, series) in activity.metric_series(part.process) {
        if last_gpu != Some(gpu) {
            last_gpu = Some(gpu);
            names.push(format!("Metrics GPU{}", timeline.gpu(gpu).device));
            metrics.push((names.len() as u32, Vec::new()));
        }
        if let Some((_, all)) = metrics.last_mut() {
            all.push(series);
        }
    }
    let memory = allocated(activity, part.process, part.window)
        .into_iter()
        .map(|a| {
            names.push(format!("Memory GPU{}", timeline.gpu(a.gpu).device));
            (names.len() as u32, a.steps)
        })
        .collect();
    Task {
        part: index,
        name: task_name(timeline, part),
        node,
        threads: names,
        cpu,
        streams,
        counters,
        metrics,
        memory,
    }
}

/// `rank N`, or `node h pid p` for a process that is not a rank.
fn task_name(timeline: &Timeline, part: &Part) -> String {
    match part.rank {
        Some(rank) => format!("rank {}", rank.rank),
        None => {
            let p = timeline.process(part.process);
            format!("node {} pid {}", timeline.host(p.host).name, p.pid)
        }
    }
}

/// The lane of each operation, first fit: the first lane idle at its start.
pub fn assign_lanes<T>(ops: &[Clipped<T>]) -> Vec<u32> {
    let mut lane_ends: Vec<i64> = Vec::new();
    ops.iter()
        .map(|op| {
            let lane = match lane_ends.iter().position(|&end| end <= op.start) {
                Some(lane) => lane,
                None => {
                    lane_ends.push(i64::MIN);
                    lane_ends.len() - 1
                }
            };
            lane_ends[lane] = op.end;
            lane as u32
        })
        .collect()
}

fn lane_count<T>(ops: &[Clipped<T>]) -> u32 {
    assign_lanes(ops).into_iter().max().map_or(1, |m| m + 1)
}

/// The value tables of everything the tasks draw.
fn values(scope: &Scope, tasks: &[Task]) -> Values {
    let timeline = scope.activity.timeline;
    let mut api_keys: FxHashSet<StringId> = FxHashSet::default();
    let mut gpu_keys: FxHashSet<GpuName> = FxHashSet::default();
    let mut nvtx_keys: FxHashSet<(StringId, StringId)> = FxHashSet::default();
    let mut os_keys: FxHashSet<StringId> = FxHashSet::default();
    let mut roles: BTreeMap<String, ()> = BTreeMap::new();
    let mut stages: BTreeMap<Stage, ()> = BTreeMap::new();
    for task in tasks {
        for (_, events) in &task.cpu {
            for e in events {
                match e.what {
                    CpuEvent::Api(a) => api_keys.insert(a.name),
                    CpuEvent::Os(o) => os_keys.insert(o.name),
                    CpuEvent::Range(n) | CpuEvent::StartEnd(n) | CpuEvent::Mark(n) => {
                        nvtx_keys.insert((n.domain, n.text))
                    }
                };
            }
        }
        for s in &task.streams {
            roles.insert(s.role.name(scope.rules).to_string(), ());
            gpu_keys.extend(s.ops.iter().map(|op| gpu_name(op.what)));
        }
        let part = &scope.parts[task.part];
        for k in &part.streams.nccl {
            roles.insert(k.role_name(scope.rules).to_string(), ());
            if let Some(stage) = k.stage {
                stages.insert(stage, ());
            }
        }
    }
    let api = by_label(api_keys, |&k| strip_version(timeline.text(k)).to_string());
    let gpu = by_label(gpu_keys, |&k| gpu_label(timeline, k));
    let mut domains: BTreeMap<String, ()> = BTreeMap::new();
    let nvtx = by_label(nvtx_keys, |&(domain, text)| {
        let domain = timeline.text(domain);
        domains.insert(domain.to_string(), ());
        nvtx_label(domain, timeline.text(text))
    });
    let mut values = Values::default();
    for (label, keys) in api {
        values.names.push(label);
        let id = values.names.len() as u32;
        values.api.extend(keys.into_iter().map(|k| (k, id)));
    }
    values.api_count = values.names.len() as u32;
    for (label, keys) in gpu {
        values.names.push(label);
        let id = values.names.len() as u32;
        values.gpu.extend(keys.into_iter().map(|k| (k, id)));
    }
    for (label, keys) in nvtx {
        values.nvtx_labels.push(label);
        let id = values.nvtx_labels.len() as u32;
        values.nvtx.extend(keys.into_iter().map(|k| (k, id)));
    }
    let mut k = 0;
    for domain in domains.into_keys() {
        let ty = if domain == "NCCL" {
            types::NCCL_REGIONS
        } else {
            k += 1;
            types::NVTX_PUSHPOP_BASE + 100 * (k - 1)
        };
        values.domains.insert(domain, ty);
    }
    os_values(
        &mut values,
        by_label(os_keys, |&k| timeline.text(k).to_string()),
    );
    for task in tasks {
        for series in task.metrics.iter().flat_map(|(_, all)| all) {
            let series = timeline.metric_series(*series);
            let ty = types::GPU_METRICS_BASE + series.metric_id;
            let name = timeline.text(series.name).to_string();
            values.metrics.entry(ty).or_insert(name);
        }
    }
    values.roles = roles.into_keys().collect();
    values.stages = stages.into_keys().collect();
    values
}

/// The OS runtime call values, as nsys2prv 0.6 numbers them: names containing `pthread` (any
/// case) under [`types::PTHREAD`] with its fixed values, unknown ones after them in name order;
/// every other name under [`types::OSRT`], in name order from 1.
fn os_values(values: &mut Values, by_name: BTreeMap<String, Vec<StringId>>) {
    let fixed = |name: &str| types::PTHREAD_VALUES.iter().find(|(n, _)| *n == name);
    let mut next_pthread = types::PTHREAD_VALUES.len() as u32;
    for (name, keys) in by_name {
        let (ty, value) = if !name.to_ascii_lowercase().contains("pthread") {
            values
                .os_labels
                .push((values.os_labels.len() as u32 + 1, name));
            (types::OSRT, values.os_labels.len() as u32)
        } else if let Some(&(_, value)) = fixed(&name) {
            values.pthread_labels.push((value, name));
            (types::PTHREAD, value)
        } else {
            next_pthread += 1;
            values.pthread_labels.push((next_pthread, name));
            (types::PTHREAD, next_pthread)
        };
        values.os.extend(keys.into_iter().map(|k| (k, (ty, value))));
    }
    values.pthread_labels.sort();
}

/// Distinct keys grouped by their label, labels sorted (keys sharing a label share a value id).
fn by_label<K>(
    keys: FxHashSet<K>,
    mut label: impl FnMut(&K) -> String,
) -> BTreeMap<String, Vec<K>> {
    let mut grouped: BTreeMap<String, Vec<K>> = BTreeMap::new();
    for key in keys {
        grouped.entry(label(&key)).or_default().push(key);
    }
    grouped
}

/// `cudaLaunchKernel_v7000` -> `cudaLaunchKernel` (nsys2prv 0.5.8 shows names without the suffix).
pub fn strip_version(name: &str) -> &str {
    match name.rsplit_once("_v") {
        Some((base, digits))
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => name,
    }
}

/// nsys2prv's NVTX value label: `domain:text`, without the prefix in the NCCL domain.
fn nvtx_label(domain: &str, text: &str) -> String {
    if domain == "NCCL" {
        text.to_string()
    } else {
        format!("{domain}:{text}")
    }
}

/// The key of a GPU operation's name.
pub fn gpu_name(op: GpuOp) -> GpuName {
    match op {
        GpuOp::Kernel(k) => GpuName::Kernel(k.short_name),
        GpuOp::Memcpy(m) => GpuName::Fixed(copy_names(m.copy_kind).0),
        GpuOp::Memset(_) => GpuName::Fixed("[CUDA memset]"),
        GpuOp::Graph(g) => GpuName::Graph(g.exec),
    }
}

/// The `.pcf` label of a GPU operation's name: the kernel's short name, or the fixed name
/// without its brackets (`CUDA memcpy Host-to-Device`).
fn gpu_label(timeline: &Timeline, name: GpuName) -> String {
    match name {
        GpuName::Kernel(short) => timeline.text(short).to_string(),
        GpuName::Fixed(fixed) => fixed.trim_matches(['[', ']']).to_string(),
        GpuName::Graph(exec) => format!("Graph Exec {exec}"),
    }
}

/// Every GPU operation that can receive a communication record, keyed by (process, correlation).
fn receivers(scope: &Scope, tasks: &[Task]) -> Vec<Receiver> {
    let mut receivers = Vec::new();
    for (index, task) in tasks.iter().enumerate() {
        let process = scope.parts[task.part].process;
        for s in &task.streams {
            for (op, lane) in s.ops.iter().zip(assign_lanes(&s.ops)) {
                let correlation = op.what.correlation();
                if correlation == 0 {
                    continue;
                }
                let (tag, size) = match op.what {
                    GpuOp::Kernel(_) => (types::TAG_KERNEL, 0),
                    GpuOp::Memcpy(m) => (types::TAG_MEMOP, m.bytes),
                    GpuOp::Memset(m) => (types::TAG_MEMOP, m.bytes),
                    GpuOp::Graph(_) => (types::TAG_KERNEL, 0),
                };
                receivers.push(Receiver {
                    key: (process, correlation),
                    task: index as u32 + 1,
                    thread: s.first_thread + lane,
                    start: op.start,
                    tag,
                    size,
                });
            }
        }
    }
    receivers.sort_unstable();
    receivers
}

/// The latest time of any record (rebased).
fn end_time(scope: &Scope, tasks: &[Task]) -> u64 {
    let mut end = i64::MIN;
    for task in tasks {
        for (_, events) in &task.cpu {
            end = events.iter().map(|e| e.end).fold(end, i64::max);
        }
        for s in &task.streams {
            end = s.ops.iter().map(|o| o.end).fold(end, i64::max);
        }
        for (_, steps) in &task.memory {
            end = steps.last().map_or(end, |s| end.max(s.0));
        }
        let window = scope.parts[task.part].window;
        for series in task.metrics.iter().flat_map(|(_, all)| all) {
            let samples = scope.activity.metric_samples_in(*series, window);
            end = samples.last().map_or(end, |m| end.max(m.time.0));
        }
        if let Some((_, c)) = &task.counters {
            let last = |steps: &Vec<(i64, i64)>| steps.last().map_or(i64::MIN, |s| s.0);
            end = end
                .max(last(&c.compute))
                .max(last(&c.comm))
                .max(last(&c.exposed));
        }
    }
    if end == i64::MIN {
        0
    } else {
        scope.rebase(end)
    }
}
