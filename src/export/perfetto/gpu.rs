//! GPU side of a process: one track per CUDA stream (lanes where its operations overlap), grouped
//! per device, flow arrows from the launching API calls, and the counters that draw the overlap
//! analysis.

use super::Writer;
use super::lanes::Lanes;
use super::sequence::{Arg, Category, Name, Value};
use crate::analysis::memory::allocated;
use crate::classify::Role;
use crate::classify::streams::{BARRIER, clip};
use crate::export::counters::Counters;
use crate::export::items::{Clipped, GpuOp, copy_names, stream_ops};
use crate::export::{Part, Scope};
use crate::model::ProcessId;
use std::io::Write;

/// Track order under a process: GPU groups after threads and NVTX, counters last.
const GPU_ORDER: i32 = 2_000;
const COUNTER_ORDER: i32 = 3_000;
/// Track order of the GPU metric counters: after the overlap counters.
const METRIC_ORDER: i32 = 4_000;
/// Track order of the allocated-memory counters: last.
const MEMORY_ORDER: i32 = 5_000;

/// The (process, correlation id) pairs of exported GPU operations and API calls: a flow is
/// drawn only when both of its ends are exported.
pub struct FlowKeys {
    gpu: Vec<(ProcessId, u32)>,
    api: Vec<(ProcessId, u32)>,
}

impl FlowKeys {
    /// Collects both ends over every exported part.
    pub fn new(scope: &Scope) -> FlowKeys {
        let activity = scope.activity;
        let (mut gpu, mut api) = (Vec::new(), Vec::new());
        for part in &scope.parts {
            let (p, w) = (part.process, part.window);
            let inside = |span| clip(span, w).is_some();
            let ops = activity
                .operations(p)
                .map(|(_, start, end, correlation)| (start.0, end.0, correlation));
            gpu.extend(
                ops.filter(|&(s, e, c)| c != 0 && inside((s, e)))
                    .map(|(_, _, c)| (p, c)),
            );
            api.extend(
                activity
                    .api_calls(p)
                    .filter(|a| a.correlation != 0 && inside((a.start.0, a.end.0)))
                    .map(|a| (p, a.correlation)),
            );
        }
        for keys in [&mut gpu, &mut api] {
            keys.sort_unstable();
            keys.dedup();
        }
        FlowKeys { gpu, api }
    }

    /// The flow id of an API call, when it launched exported GPU work.
    pub fn api_flow(&self, process: ProcessId, correlation: u32) -> Option<u64> {
        self.gpu
            .binary_search(&(process, correlation))
            .ok()
            .map(|_| flow_id(process, correlation))
    }

    /// The flow id of a GPU operation, when its launching API call is exported.
    pub fn gpu_flow(&self, process: ProcessId, correlation: u32) -> Option<u64> {
        self.api
            .binary_search(&(process, correlation))
            .ok()
            .map(|_| flow_id(process, correlation))
    }
}

/// A trace-wide flow id: correlation ids repeat across processes, so the process is in it.
fn flow_id(process: ProcessId, correlation: u32) -> u64 {
    ((process.index() as u64 + 1) << 32) | u64::from(correlation)
}

/// The stream tracks of a process, grouped by device.
pub fn streams<W: Write>(w: &mut Writer<W>, part: &Part, process_uuid: u64) -> anyhow::Result<()> {
    let timeline = w.scope.activity.timeline;
    let by_stream = stream_ops(w.scope.activity, part);
    let mut group: Option<(u32, u64)> = None;
    for (order, ((device, stream_id, stream), ops)) in by_stream.into_iter().enumerate() {
        let group_uuid = match group {
            Some((d, uuid)) if d == device => uuid,
            _ => {
                let gpu = timeline.gpu(timeline.stream(stream).gpu);
                let name = match timeline.text(gpu.name) {
                    "" => format!("GPU {device}"),
                    product => format!("GPU {device} · {product}"),
                };
                let uuid = w.group(process_uuid, name, GPU_ORDER + device as i32)?;
                group = Some((device, uuid));
                uuid
            }
        };
        let role = part.streams.role(stream).unwrap_or(Role::Copy);
        let name = format!(
            "GPU {device} · stream {stream_id} · {}",
            role.name(w.scope.rules)
        );
        stream_track(w, part, (group_uuid, name, order as i32), role, &ops)?;
    }
    Ok(())
}

/// One stream's operations on strict lanes (same-named sibling tracks).
fn stream_track<W: Write>(
    w: &mut Writer<W>,
    part: &Part,
    (parent, name, order): (u64, String, i32),
    role: Role,
    ops: &[Clipped<GpuOp>],
) -> anyhow::Result<()> {
    let texts = w.texts();
    let mut lanes = Lanes::new(false);
    for op in ops {
        let (start, end) = (w.scope.rebase(op.start), w.scope.rebase(op.end));
        let lane = match lanes.place(&mut w.out, start, end)? {
            Some(lane) => lane,
            None => {
                let seq = w.child(parent, name.clone(), order)?;
                lanes.add(seq)
            }
        };
        let flow = w.flows.gpu_flow(part.process, op.what.correlation());
        let correlation = (Arg::Correlation, Value::Uint(op.what.correlation().into()));
        let seq = lanes.sequence(lane);
        match op.what {
            GpuOp::Kernel(k) => {
                let nccl = part.streams.nccl_at(k.stream, op.start);
                let comm_role = nccl.map_or(Value::Fixed(""), |n| match n.is_barrier() {
                    true => Value::Fixed(BARRIER),
                    false => Value::Purpose(n.purpose),
                });
                let evidence = nccl.map_or("", |n| n.evidence.kind());
                let collective = w.scope.collectives.kernels.get(&(k.stream, k.start.0));
                let number = collective.map_or(0, |c| c.0);
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
                // NCCL kernels carry their own role and its evidence, and a collective's its
                // instance; others stop at the stream's role.
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
                let name = (Name::Text(k.short_name), Category::Kernel);
                let linked: Vec<u64>;
                let flows = match collective {
                    Some((_, ids)) if !ids.is_empty() => {
                        linked = flow.into_iter().chain(ids.iter().copied()).collect();
                        &linked[..]
                    }
                    _ => flow.as_slice(),
                };
                seq.begin(&mut w.out, start, name, &args[..shown], flows, texts)?;
                w.counts.kernels += 1;
            }
            GpuOp::Memcpy(m) => {
                let (name, kind) = copy_names(m.copy_kind);
                let args = [
                    (Arg::Bytes, Value::Uint(m.bytes)),
                    (Arg::CopyKind, Value::Fixed(kind)),
                    correlation,
                ];
                seq.begin(
                    &mut w.out,
                    start,
                    (Name::Fixed(name), Category::Memcpy),
                    &args,
                    flow.as_slice(),
                    texts,
                )?;
                w.counts.memcpy += 1;
            }
            GpuOp::Memset(m) => {
                let args = [(Arg::Bytes, Value::Uint(m.bytes)), correlation];
                let name = (Name::Fixed("[CUDA memset]"), Category::Memset);
                seq.begin(&mut w.out, start, name, &args, flow.as_slice(), texts)?;
                w.counts.memset += 1;
            }
            GpuOp::Graph(g) => {
                let args = [
                    (Arg::GraphId, Value::Uint(g.graph.into())),
                    (Arg::GraphExecId, Value::Uint(g.exec.into())),
                    correlation,
                    (Arg::Role, Value::Role(role)),
                ];
                let name = (Name::Fixed("CUDA graph"), Category::Graph);
                seq.begin(&mut w.out, start, name, &args, flow.as_slice(), texts)?;
                w.counts.graphs += 1;
            }
        }
        w.counts.flows += u64::from(flow.is_some());
        lanes.opened(lane, end);
    }
    lanes.finish(&mut w.out)?;
    Ok(())
}

/// The GPU metrics of a process's GPUs: one counter track per metric per GPU
/// (`GPU 0 · SMs Active`), with every sample inside the part's window as nsys recorded it.
pub fn metrics<W: Write>(w: &mut Writer<W>, part: &Part, process_uuid: u64) -> anyhow::Result<()> {
    let activity = w.scope.activity;
    let timeline = activity.timeline;
    for (order, (gpu, series)) in activity.metric_series(part.process).into_iter().enumerate() {
        let name = format!(
            "GPU {} · {}",
            timeline.gpu(gpu).device,
            timeline.text(timeline.metric_series(series).name)
        );
        let mut seq = w.counter_track(process_uuid, name, METRIC_ORDER + order as i32)?;
        for sample in activity.metric_samples_in(series, part.window) {
            seq.counter(&mut w.out, w.scope.rebase(sample.time.0), sample.value)?;
            w.counts.metric_samples += 1;
        }
    }
    Ok(())
}

/// The device memory each GPU of a process has allocated since the capture started: one
/// counter track per GPU (`GPU 0 · memory allocated (bytes)`).
pub fn memory<W: Write>(w: &mut Writer<W>, part: &Part, process_uuid: u64) -> anyhow::Result<()> {
    let timeline = w.scope.activity.timeline;
    let per_gpu = allocated(w.scope.activity, part.process, part.window);
    for (order, a) in per_gpu.into_iter().enumerate() {
        let name = format!(
            "GPU {} · memory allocated (bytes)",
            timeline.gpu(a.gpu).device
        );
        let mut seq = w.counter_track(process_uuid, name, MEMORY_ORDER + order as i32)?;
        for (t, bytes) in a.steps {
            seq.counter(&mut w.out, w.scope.rebase(t), bytes)?;
        }
    }
    Ok(())
}

/// The counter tracks of a process, from [`Counters`].
pub fn counters<W: Write>(w: &mut Writer<W>, part: &Part, process_uuid: u64) -> anyhow::Result<()> {
    let Some(c) = Counters::new(w.scope, part) else {
        return Ok(());
    };
    let mut series = vec![("compute kernels in flight".to_string(), c.compute)];
    for (role, steps) in c.by_role {
        series.push((format!("communication in flight · {role}"), steps));
    }
    series.push(("exposed communication".to_string(), c.exposed));
    if !c.waiting.is_empty() {
        series.push(("waiting in collectives".to_string(), c.waiting));
    }
    for (order, (name, steps)) in series.into_iter().enumerate() {
        let mut seq = w.counter_track(process_uuid, name, COUNTER_ORDER + order as i32)?;
        for (t, value) in steps {
            seq.counter(&mut w.out, w.scope.rebase(t), value)?;
        }
    }
    Ok(())
}
