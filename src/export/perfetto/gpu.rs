//! GPU side of a process: one track per CUDA stream (lanes where its operations overlap), grouped
//! per device, flow arrows from the launching API calls, and the counters that draw the overlap
//! analysis.

use super::Writer;
use super::lanes::{Clipped, Lanes, sort_nested};
use super::sequence::{Arg, Category, Name, Value};
use crate::analysis::IntervalSet;
use crate::analysis::overlap::BARRIER;
use crate::classify::streams::clip;
use crate::classify::{Role, rules::is_nccl};
use crate::export::{Part, Scope};
use crate::model::{Kernel, Memcpy, Memset, ProcessId, StreamId};
use std::collections::BTreeMap;
use std::io::Write;

/// Track order under a process: GPU groups after threads and NVTX, counters last.
const GPU_ORDER: i32 = 2_000;
const COUNTER_ORDER: i32 = 3_000;

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
                .kernels(p)
                .map(|k| (k.start.0, k.end.0, k.correlation))
                .chain(
                    activity
                        .memcpys(p)
                        .map(|m| (m.start.0, m.end.0, m.correlation)),
                )
                .chain(
                    activity
                        .memsets(p)
                        .map(|m| (m.start.0, m.end.0, m.correlation)),
                );
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

/// A GPU operation.
type Op<'t> = Clipped<OpKind<'t>>;

#[derive(Clone, Copy)]
enum OpKind<'t> {
    Kernel(&'t Kernel),
    Memcpy(&'t Memcpy),
    Memset(&'t Memset),
}

impl OpKind<'_> {
    fn correlation(&self) -> u32 {
        match self {
            OpKind::Kernel(k) => k.correlation,
            OpKind::Memcpy(m) => m.correlation,
            OpKind::Memset(m) => m.correlation,
        }
    }
}

/// The stream tracks of a process, grouped by device.
pub fn streams<'t, W: Write>(
    w: &mut Writer<'_, '_, 't, W>,
    part: &Part,
    process_uuid: u64,
) -> anyhow::Result<()> {
    let activity = w.scope.activity;
    let timeline = activity.timeline;
    let mut by_stream: BTreeMap<(u32, u32, StreamId), Vec<Op<'t>>> = BTreeMap::new();
    let mut add = |stream: StreamId, span: (i64, i64), what: OpKind<'t>| {
        if let Some((start, end)) = clip(span, part.window) {
            let s = timeline.stream(stream);
            let key = (timeline.gpu(s.gpu).device, s.stream, stream);
            by_stream
                .entry(key)
                .or_default()
                .push(Op { start, end, what });
        }
    };
    for k in activity.kernels(part.process) {
        add(k.stream, (k.start.0, k.end.0), OpKind::Kernel(k));
    }
    for m in activity.memcpys(part.process) {
        add(m.stream, (m.start.0, m.end.0), OpKind::Memcpy(m));
    }
    for m in activity.memsets(part.process) {
        add(m.stream, (m.start.0, m.end.0), OpKind::Memset(m));
    }
    let mut group: Option<(u32, u64)> = None;
    for (order, ((device, stream_id, stream), mut ops)) in by_stream.into_iter().enumerate() {
        sort_nested(&mut ops);
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
    ops: &[Op],
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
            OpKind::Kernel(k) => {
                let args = [
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
                ];
                let name = (Name::Text(k.short_name), Category::Kernel);
                seq.begin(&mut w.out, start, name, &args, flow, texts)?;
                w.counts.kernels += 1;
            }
            OpKind::Memcpy(m) => {
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
                    flow,
                    texts,
                )?;
                w.counts.memcpy += 1;
            }
            OpKind::Memset(m) => {
                let args = [(Arg::Bytes, Value::Uint(m.bytes)), correlation];
                let name = (Name::Fixed("[CUDA memset]"), Category::Memset);
                seq.begin(&mut w.out, start, name, &args, flow, texts)?;
                w.counts.memset += 1;
            }
        }
        w.counts.flows += u64::from(flow.is_some());
        lanes.opened(lane, end);
    }
    lanes.finish(&mut w.out)?;
    Ok(())
}

/// nsys's name of a copy and its direction, from `ENUM_CUDA_MEMCPY_OPER`.
fn copy_names(kind: u8) -> (&'static str, &'static str) {
    match kind {
        1 => ("[CUDA memcpy Host-to-Device]", "Host-to-Device"),
        2 => ("[CUDA memcpy Device-to-Host]", "Device-to-Host"),
        3 => ("[CUDA memcpy Host-to-Array]", "Host-to-Array"),
        4 => ("[CUDA memcpy Array-to-Host]", "Array-to-Host"),
        8 => ("[CUDA memcpy Device-to-Device]", "Device-to-Device"),
        10 => ("[CUDA memcpy Peer-to-Peer]", "Peer-to-Peer"),
        11 => ("[CUDA memcpy Host-to-Host]", "Host-to-Host"),
        _ => ("[CUDA memcpy]", "other"),
    }
}

/// The counters of a process: compute kernels in flight, communication in flight per role, and
/// exposed communication (1 while non-barrier communication runs with no compute): the same
/// sets the `overlap` analysis measures.
pub fn counters<W: Write>(w: &mut Writer<W>, part: &Part, process_uuid: u64) -> anyhow::Result<()> {
    let activity = w.scope.activity;
    let timeline = activity.timeline;
    let compute: Vec<(i64, i64)> = activity
        .kernels(part.process)
        .filter(|k| !is_nccl(timeline.text(k.short_name)))
        .filter_map(|k| clip((k.start.0, k.end.0), part.window))
        .collect();
    if compute.is_empty() && part.streams.nccl.is_empty() {
        return Ok(());
    }
    let mut series: Vec<(String, Vec<(i64, i64)>)> =
        vec![("compute kernels in flight".to_string(), in_flight(&compute))];
    let mut by_role: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    for k in &part.streams.nccl {
        let role = if k.barrier {
            BARRIER.to_string()
        } else {
            let role = part.streams.role(k.stream).unwrap_or(Role::Mixed);
            role.name(w.scope.rules).to_string()
        };
        by_role.entry(role).or_default().push((k.start, k.end));
    }
    for (role, spans) in &by_role {
        series.push((
            format!("communication in flight · {role}"),
            in_flight(spans),
        ));
    }
    let comm = IntervalSet::from_intervals(
        part.streams
            .nccl
            .iter()
            .filter(|k| !k.barrier)
            .map(|k| (k.start, k.end)),
    );
    let exposed = comm.difference(&part.streams.compute);
    let steps = exposed
        .spans()
        .iter()
        .flat_map(|&(s, e)| [(s, 1), (e, 0)])
        .collect();
    series.push(("exposed communication".to_string(), steps));
    for (order, (name, steps)) in series.into_iter().enumerate() {
        let mut seq = w.counter_track(process_uuid, name, COUNTER_ORDER + order as i32)?;
        for (t, value) in steps {
            seq.counter(&mut w.out, w.scope.rebase(t), value)?;
        }
    }
    Ok(())
}

/// How many intervals are open over time: `(time, value)` at each change.
fn in_flight(spans: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut edges: Vec<(i64, i64)> = spans.iter().flat_map(|&(s, e)| [(s, 1), (e, -1)]).collect();
    edges.sort_unstable();
    let mut steps: Vec<(i64, i64)> = Vec::new();
    let mut value = 0;
    for (t, delta) in edges {
        value += delta;
        match steps.last_mut() {
            Some(last) if last.0 == t => last.1 = value,
            _ => steps.push((t, value)),
        }
    }
    steps.dedup_by(|b, a| a.1 == b.1);
    steps
}

#[cfg(test)]
mod tests {
    use super::in_flight;

    #[test]
    fn in_flight_counts_overlaps_and_merges_equal_times() {
        // [0,10) and [5,15) overlap; [15,20) starts as the second ends; [20,20) is empty.
        let steps = in_flight(&[(0, 10), (5, 15), (15, 20), (20, 20)]);
        assert_eq!(steps, [(0, 1), (5, 2), (10, 1), (20, 0)]);
    }
}
