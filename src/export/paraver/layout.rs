//! The Paraver object model of an export and its value tables: one node per host, one task per
//! exported process (ranks in rank order), and per task its CPU threads, one thread per stream
//! lane, an analysis thread for the counters, and a thread per GPU for its metrics and one for
//! its allocated memory. Value ids follow one documented rule: API names first, then kernel and
//! memory-operation names, each sorted; NVTX names, roles and stages in their own sorted tables.
//! The tables list every name the exported captures use, decided before any event is written.

use super::types;
use crate::classify::{Role, Stage};
use crate::export::Plan;
use crate::export::prepare::Prepared;
use crate::export::stream::copy_names;
use crate::hash::{FxHashMap, FxHashSet};
use crate::input::capture::{Joined, Names};
use crate::model::{
    AccTable, Frame, GpuId, HostId, MetricSeriesId, NvtxKind, StreamId, StringId, ThreadId,
    Timeline, module_file, split_api_version, split_torch_ids,
};
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
#[derive(Debug, Clone, Copy)]
pub struct StreamThreads {
    /// Thread number (1-based in the task) of its first lane.
    pub first_thread: u32,
    /// Its role.
    pub role: Role,
}

/// One task's names: what the header and the `.row` need of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskNames {
    /// `rank N` or `node h pid p`.
    pub name: String,
    /// Node number (1-based).
    pub node: u32,
    /// Thread names, in thread order.
    pub threads: Vec<String>,
}

/// One task (exported process): its names and which thread draws what.
#[derive(Debug, Clone)]
pub struct Task {
    /// Its names.
    pub names: TaskNames,
    /// CPU threads' numbers.
    pub cpu: FxHashMap<ThreadId, u32>,
    /// Stream threads.
    pub streams: FxHashMap<StreamId, StreamThreads>,
    /// The analysis thread's number, when the counters are drawn.
    pub analysis: Option<u32>,
    /// Per GPU with metrics: its `Metrics GPU<d>` thread's number and its series in order.
    pub metrics: FxHashMap<GpuId, (u32, Vec<MetricSeriesId>)>,
    /// Per GPU with memory events: its `Memory GPU<d>` thread's number.
    pub memory: FxHashMap<GpuId, u32>,
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
    /// NVTX labels by id: a PyTorch range's operator name without the ids that make each
    /// call's text unique ([`split_torch_ids`]), which go in [`Values::torch_ids`].
    pub nvtx_labels: Vec<String>,
    /// The PyTorch sequence number and op id of each NVTX text that has them.
    pub torch_ids: FxHashMap<StringId, (Option<u64>, u64)>,
    /// NVTX domain -> event type.
    pub domains: BTreeMap<String, u32>,
    /// NVTX domain id -> event type.
    pub domain_types: FxHashMap<StringId, u32>,
    /// OS runtime call name -> (event type, value): [`types::OSRT`] or [`types::PTHREAD`].
    pub os: FxHashMap<StringId, (u32, u32)>,
    /// Labels of the [`types::OSRT`] values, by value.
    pub os_labels: Vec<(u32, String)>,
    /// Labels of the [`types::PTHREAD`] values, by value.
    pub pthread_labels: Vec<(u32, String)>,
    /// OpenACC (table, source) -> value, and (table, function) -> value, numbered as nsys2prv
    /// does: by name, data's first, then launches', then the others'.
    pub acc: [FxHashMap<(AccTable, StringId), u32>; 2],
    /// Labels of the OpenACC source values and function values, by table, by value.
    pub acc_labels: [[Vec<(u32, String)>; 3]; 2],
    /// The NCCL payload fields (types 9501 + index).
    pub payloads: Vec<crate::classify::payloads::Field>,
    /// MPI function name -> value (of every MPI type).
    pub mpi: FxHashMap<StringId, u32>,
    /// Labels of the MPI values, by value: Extrae's table, then the names it lacks; empty when
    /// no MPI call is drawn.
    pub mpi_labels: Vec<(u32, String)>,
    /// Role names by id.
    pub roles: Vec<String>,
    /// Stages by id.
    pub stages: Vec<Stage>,
    /// GPU metric event types (9400 + metric id) and their names.
    pub metrics: BTreeMap<u32, String>,
    /// Sampled frame -> value.
    pub frames: FxHashMap<Frame, u32>,
    /// Labels of the sampled frames, by value (index = value - 1).
    pub frame_labels: Vec<String>,
    /// Levels of the deepest sampled stack (at most [`types::MAX_SAMPLE_DEPTH`]).
    pub sample_depth: usize,
    /// Whether a thread's runs on cores are drawn (as `Running` states).
    pub states: bool,
}

impl Values {
    /// The id of a role name (0 when unknown).
    pub fn role(&self, name: &str) -> u64 {
        self.roles
            .iter()
            .position(|r| r == name)
            .map_or(0, |i| i as u64 + 1)
    }

    /// The id of a stage (0 when unknown).
    pub fn stage(&self, stage: Stage) -> u64 {
        self.stages
            .iter()
            .position(|&s| s == stage)
            .map_or(0, |i| i as u64 + 1)
    }
}

/// The whole model.
pub struct Layout {
    /// Node names (hostnames), by node number - 1.
    pub nodes: Vec<String>,
    /// Tasks by position in the plan (task number - 1).
    pub tasks: Vec<TaskNames>,
    /// Value tables.
    pub values: Values,
    /// The latest record time (rebased): the header's end time.
    pub end: u64,
    /// Limits the trace exceeds.
    pub warnings: Vec<String>,
}

impl Layout {
    /// The model of a plan: its tasks' names (by position), the latest exported time, and the
    /// names every part uses.
    pub fn new(plan: &Plan, tasks: Vec<TaskNames>, end: Option<i64>, parts: &[Joined]) -> Layout {
        let threads: usize = tasks.iter().map(|t| t.threads.len()).sum();
        let mut warnings = Vec::new();
        if threads > MAX_THREADS {
            warnings.push(format!(
                "{threads} Paraver threads exceed the {MAX_THREADS} a default Paraver build can \
                 index (builds with --enable-extended-objects open it): export fewer ranks \
                 (--ranks) for a default build"
            ));
        }
        Layout {
            nodes: nodes(plan).0,
            tasks,
            values: values(plan, parts),
            end: end.map_or(0, |e| plan.rebase(e)),
            warnings,
        }
    }
}

/// The hostnames of the exported processes, in order of first appearance (Paraver's nodes),
/// and each exported process's node number (from 1).
pub fn nodes(plan: &Plan) -> (Vec<String>, Vec<u32>) {
    let timeline = plan.activity.timeline;
    let mut hosts: Vec<HostId> = Vec::new();
    let mut numbers = Vec::new();
    for e in &plan.exported {
        let host = timeline.process(e.process).host;
        if !hosts.contains(&host) {
            hosts.push(host);
        }
        numbers.push(hosts.iter().position(|&h| h == host).unwrap_or(0) as u32 + 1);
    }
    let names = hosts
        .iter()
        .map(|&h| timeline.host(h).name.clone())
        .collect();
    (names, numbers)
}

/// The task of the exported process at `position`: its threads in order (CPU, stream lanes,
/// analysis, metrics, memory) and their names.
pub fn task(plan: &Plan, position: usize, prepared: &Prepared, node: u32) -> Task {
    let activity = plan.activity;
    let timeline = activity.timeline;
    let task_no = position + 1;
    let mut names = Vec::new();
    let mut cpu = FxHashMap::default();
    for &(tid, thread) in &plan.cpu_threads[position] {
        let number = names.len() as u32 + 1;
        let name = timeline.text(timeline.thread(thread).name);
        names.push(
            format!("THREAD 1.{task_no}.{number} {name} [{tid}]")
                .trim_end()
                .to_string(),
        );
        cpu.insert(thread, number);
    }
    let mut streams = FxHashMap::default();
    for s in &prepared.streams_lanes {
        let role = prepared.streams.role(s.stream).unwrap_or(Role::Copy);
        let role_name = role.name(plan.rules);
        let first_thread = names.len() as u32 + 1;
        for lane in 0..s.lanes {
            let (device, id) = (s.device, s.number);
            names.push(match lane {
                0 => format!("CUDA-D{device}.S{id} {role_name}"),
                n => format!("CUDA-D{device}.S{id} {role_name} (lane {})", n + 1),
            });
        }
        streams.insert(s.stream, StreamThreads { first_thread, role });
    }
    let name = task_name(timeline, plan, position);
    let analysis = prepared.counters.then(|| {
        names.push(format!("ANALYSIS {name}"));
        names.len() as u32
    });
    let mut metrics: FxHashMap<GpuId, (u32, Vec<MetricSeriesId>)> = FxHashMap::default();
    let process = plan.exported[position].process;
    for (gpu, series) in activity.metric_series(process) {
        let entry = metrics.entry(gpu).or_insert_with(|| {
            names.push(format!("Metrics GPU{}", timeline.gpu(gpu).device));
            (names.len() as u32, Vec::new())
        });
        entry.1.push(series);
    }
    let mut memory = FxHashMap::default();
    for &gpu in &prepared.memory {
        names.push(format!("Memory GPU{}", timeline.gpu(gpu).device));
        memory.insert(gpu, names.len() as u32);
    }
    Task {
        names: TaskNames {
            name,
            node,
            threads: names,
        },
        cpu,
        streams,
        analysis,
        metrics,
        memory,
    }
}

/// `rank N`, or `node h pid p` for a process that is not a rank.
fn task_name(timeline: &Timeline, plan: &Plan, position: usize) -> String {
    let e = &plan.exported[position];
    match e.rank {
        Some(rank) => format!("rank {}", rank.rank),
        None => {
            let p = timeline.process(e.process);
            format!("node {} pid {}", timeline.host(p.host).name, p.pid)
        }
    }
}

/// The value tables of every name the parts use.
pub fn values(plan: &Plan, parts: &[Joined]) -> Values {
    let timeline = plan.activity.timeline;
    let mut api_keys: FxHashSet<StringId> = FxHashSet::default();
    let mut gpu_keys: FxHashSet<GpuName> = FxHashSet::default();
    let mut os_keys: FxHashSet<StringId> = FxHashSet::default();
    let mut mpi_keys: FxHashSet<StringId> = FxHashSet::default();
    let mut acc_keys: [[FxHashSet<StringId>; 3]; 2] = Default::default();
    for part in parts {
        let names = &part.events.names;
        let text = |id: StringId| part.translation.strings[id.index()];
        api_keys.extend(names.used(Names::API).map(text));
        os_keys.extend(names.used(Names::OS).map(text));
        mpi_keys.extend(names.used(Names::MPI).map(text));
        for (function, keys) in acc_keys.iter_mut().enumerate() {
            for table in AccTable::ALL {
                let kind = Names::acc(table, function == 1);
                keys[table as usize].extend(names.used(kind).map(text));
            }
        }
        gpu_keys.extend(names.used(Names::KERNEL).map(|k| GpuName::Kernel(text(k))));
        for &kind in &names.copy_kinds {
            gpu_keys.insert(GpuName::Fixed(copy_names(kind).0));
        }
        if names.memset {
            gpu_keys.insert(GpuName::Fixed("[CUDA memset]"));
        }
        gpu_keys.extend(names.graph_execs.iter().map(|&e| GpuName::Graph(e)));
    }
    let mut nvtx_keys: FxHashSet<(StringId, StringId)> = FxHashSet::default();
    let mut stages: BTreeMap<Stage, ()> = BTreeMap::new();
    let mut staged: FxHashSet<StringId> = FxHashSet::default();
    for e in &plan.exported {
        for n in plan.activity.nvtx(e.process) {
            if n.kind != NvtxKind::Metadata {
                nvtx_keys.insert((n.domain, n.text));
            }
            if n.kind.is_range() && staged.insert(n.text) {
                stages.extend(Stage::last_in(timeline.text(n.text)).map(|s| (s, ())));
            }
        }
    }
    let api = by_label(api_keys, |&k| {
        split_api_version(timeline.text(k)).0.to_string()
    });
    let gpu = by_label(gpu_keys, |&k| gpu_label(timeline, k));
    let mut domains: BTreeMap<String, Vec<StringId>> = BTreeMap::new();
    let mut torch_ids = FxHashMap::default();
    let nvtx = by_label(nvtx_keys, |&(domain, text)| {
        let name = timeline.text(domain);
        domains.entry(name.to_string()).or_default().push(domain);
        let (operator, seq, op_id) = split_torch_ids(timeline.text(text));
        if let Some(op_id) = op_id {
            torch_ids.insert(text, (seq, op_id));
        }
        nvtx_label(name, operator)
    });
    let mut values = Values {
        torch_ids,
        ..Values::default()
    };
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
    for (domain, ids) in domains {
        let ty = if domain == "NCCL" {
            types::NCCL_REGIONS
        } else {
            k += 1;
            types::NVTX_PUSHPOP_BASE + 100 * (k - 1)
        };
        values
            .domain_types
            .extend(ids.into_iter().map(|id| (id, ty)));
        values.domains.insert(domain, ty);
    }
    os_values(
        &mut values,
        by_label(os_keys, |&k| timeline.text(k).to_string()),
    );
    mpi_values(
        &mut values,
        by_label(mpi_keys, |&k| timeline.text(k).to_string()),
    );
    for (function, keys) in acc_keys.into_iter().enumerate() {
        let mut next = 0;
        for (table, keys) in AccTable::ALL.into_iter().zip(keys) {
            for (label, ids) in by_label(keys, |&k| timeline.text(k).to_string()) {
                next += 1;
                values.acc_labels[function][table as usize].push((next, label));
                let map = &mut values.acc[function];
                map.extend(ids.into_iter().map(|id| ((table, id), next)));
            }
        }
    }
    for e in &plan.exported {
        for (_, series) in plan.activity.metric_series(e.process) {
            let series = timeline.metric_series(series);
            let ty = types::GPU_METRICS_BASE + series.metric_id;
            let name = timeline.text(series.name).to_string();
            values.metrics.entry(ty).or_insert(name);
        }
    }
    frame_values(&mut values, timeline);
    values.states = parts.iter().any(|p| !p.events.thread_runs.is_empty());
    values.payloads = plan.payloads.fields.clone();
    let mut roles: Vec<String> = [
        "compute",
        "copy",
        "mixed",
        crate::classify::streams::BARRIER,
    ]
    .iter()
    .map(|r| r.to_string())
    .chain(plan.rules.labels().map(str::to_string))
    .collect();
    roles.sort();
    roles.dedup();
    values.roles = roles;
    values.stages = stages.into_keys().collect();
    values
}

/// The sampled frames' values, by label (`function (module file)`), and the deepest stack.
fn frame_values(values: &mut Values, timeline: &Timeline) {
    let mut frames: FxHashSet<Frame> = FxHashSet::default();
    for stack in timeline.stacks.iter() {
        values.sample_depth = values.sample_depth.max(stack.len());
        frames.extend(stack.iter().copied());
    }
    values.sample_depth = values.sample_depth.min(types::MAX_SAMPLE_DEPTH);
    let labels = by_label(frames, |f| {
        let symbol = timeline.text(f.symbol);
        let file = module_file(timeline.text(f.module));
        match !file.is_empty() && file != symbol {
            true => format!("{symbol} ({file})"),
            false => symbol.to_string(),
        }
    });
    for (label, keys) in labels {
        values.frame_labels.push(label);
        let id = values.frame_labels.len() as u32;
        values.frames.extend(keys.into_iter().map(|k| (k, id)));
    }
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

/// The MPI function values, as nsys2prv numbers them: Extrae's value for a name it knows (by
/// exact name), names it does not know after its last value in name order.
fn mpi_values(values: &mut Values, by_name: BTreeMap<String, Vec<StringId>>) {
    if by_name.is_empty() {
        return;
    }
    let table = &super::mpi_values::MPI_VALUES;
    values.mpi_labels = table.iter().map(|&(v, l)| (v, l.to_string())).collect();
    let mut next = table.iter().map(|&(v, _)| v).max().unwrap_or(0);
    for (name, keys) in by_name {
        let value = match table.iter().find(|(_, label)| *label == name) {
            Some(&(value, _)) => value,
            None => {
                next += 1;
                values.mpi_labels.push((next, name));
                next
            }
        };
        values.mpi.extend(keys.into_iter().map(|k| (k, value)));
    }
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

/// nsys2prv's NVTX value label: `domain:text`, without the prefix in the NCCL domain.
fn nvtx_label(domain: &str, text: &str) -> String {
    if domain == "NCCL" {
        text.to_string()
    } else {
        format!("{domain}:{text}")
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
