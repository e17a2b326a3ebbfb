//! A synthetic run as torch.profiler would have written it (`synth --format kineto`): one
//! Kineto Chrome-trace JSON per rank, made from the run's own exports read back, so that the
//! same truth checks run on both input formats.
//!
//! Each rank's file holds its kernels, copies and sets (on the GPU pseudo-process `pid` =
//! device, `tid` = stream, as Kineto lays them out), its CUDA API calls, its framework's NVTX ranges (not NCCL's: torch.profiler does not
//! record them) as `user_annotation`s (marks as ranges of no length), PyTorch's own range
//! around each collective it calls (`nccl:all_reduce`, `nccl:all_to_all`, ...: what NCCL's calls
//! around the launch show) inside its `record_param_comms` with the collective's arguments
//! (name, element counts, dtype, group size, process group), an `aten::mm` around each GEMM's
//! launch and PyTorch's SDPA operator around each FlashAttention kernel's, with their `Input
//! Dims`, `Input type` and `Concrete Inputs` as `record_shapes=True` writes them (the
//! simulator's shapes, `synth::operators`; truth.json gives their FLOPs), process and thread
//! names,
//! `distributedInfo` and
//! `baseTimeNanoseconds` (the earliest session start: every `ts` counts from it, in µs with
//! three decimals, so no ns is lost).

use super::Generated;
use super::operators::Operator;
use super::sim::TorchCall;
use crate::classify::nccl_calls::{NcclCalls, Pattern};
use crate::classify::{Activity, ranks};
use crate::hash::FxHashMap;
use crate::model::{Ns, NvtxKind, ProcessId, StreamId, StringId, Timeline};
use anyhow::{Context, Result};
use serde_json::{Value, json};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Writes `dir/rank<R>.json` for every rank of the run; returns their paths.
pub fn write(run: &Generated, dir: &Path) -> Result<Vec<PathBuf>> {
    let timeline =
        Timeline::load(&run.exports).context("cannot read the synthetic exports back")?;
    let activity = Activity::new(&timeline);
    let ranks = ranks::discover(&activity)?;
    let base = timeline
        .reports
        .iter()
        .filter_map(|r| r.meta.session_start_utc_ns)
        .min()
        .unwrap_or(0);
    let mut files: Vec<Option<RankFile>> = (0..timeline.processes.len()).map(|_| None).collect();
    for rank in &ranks {
        let path = dir.join(format!("rank{}.json", rank.rank));
        let mut file = RankFile::create(&path)?;
        file.head(&timeline, rank, ranks.len(), base)?;
        files[rank.process.index()] = Some(file);
    }
    let mut sink = Sink {
        timeline: &timeline,
        activity: &activity,
        files,
        torch_calls: by_launch(&run.torch_calls, |c| c.correlation),
        operators: by_launch(&run.operators, |o| o.correlation),
    };
    sink.events()?;
    let mut written = Vec::new();
    for file in sink.files.into_iter().flatten() {
        written.push(file.finish()?);
    }
    written.sort();
    Ok(written)
}

/// One rank's JSON being written.
struct RankFile {
    out: BufWriter<crate::output::Output>,
    path: PathBuf,
    first: bool,
}

impl RankFile {
    fn create(path: &Path) -> Result<RankFile> {
        Ok(RankFile {
            out: BufWriter::new(crate::output::Output::create(path)?),
            path: path.to_path_buf(),
            first: true,
        })
    }

    /// The top-level keys, and the names as metadata events.
    fn head(&mut self, t: &Timeline, rank: &ranks::Rank, world: usize, base: i64) -> Result<()> {
        let process = t.process(rank.process);
        let devices: Vec<Value> = t
            .gpus
            .iter()
            .filter(|g| g.process == rank.process)
            .map(|g| json!({"id": g.device, "name": t.text(g.name)}))
            .collect();
        let distributed = json!({"backend": "nccl", "rank": rank.rank, "world_size": world});
        write!(
            self.out,
            "{{\"schemaVersion\": 1, \"distributedInfo\": {distributed}, \"deviceProperties\": {}, \
             \"baseTimeNanoseconds\": {base}, \"traceEvents\": [",
            Value::Array(devices)
        )?;
        let name = t.text(process.name);
        self.event(
            &json!({"ph": "M", "name": "process_name", "pid": process.pid, "tid": 0,
            "args": {"name": name}}),
        )?;
        for thread in t.threads.iter().filter(|th| th.process == rank.process) {
            self.event(
                &json!({"ph": "M", "name": "thread_name", "pid": process.pid,
                "tid": thread.tid, "args": {"name": t.text(thread.name)}}),
            )?;
        }
        Ok(())
    }

    fn event(&mut self, event: &Value) -> Result<()> {
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        serde_json::to_writer(&mut self.out, event)?;
        Ok(())
    }

    fn finish(mut self) -> Result<PathBuf> {
        self.out.write_all(b"\n]}\n")?;
        let output = self.out.into_inner().map_err(|e| e.into_error())?;
        output.commit()?;
        Ok(self.path)
    }
}

/// `ts` or `dur` in µs with three decimals (exact ns), as a JSON number.
fn micros(ns: i64) -> Value {
    let text = format!(
        "{}{}.{:03}",
        if ns < 0 { "-" } else { "" },
        ns.abs() / 1000,
        ns.abs() % 1000
    );
    serde_json::from_str(&text).expect("a decimal number")
}

fn times(start: Ns, end: Ns) -> (Value, Value) {
    (micros(start.0), micros(end.0 - start.0))
}

/// What each rank (host name, pid) recorded, by (host, pid, correlation id) of its launch.
fn by_launch<T>(
    per_rank: &[((String, u32), Vec<T>)],
    correlation: impl Fn(&T) -> u32 + Copy,
) -> FxHashMap<(&str, u32, u32), &T> {
    per_rank
        .iter()
        .flat_map(|((host, pid), records)| {
            (records.iter()).map(move |r| ((host.as_str(), *pid, correlation(r)), r))
        })
        .collect()
}

/// Sends every event of a rank's process to its file.
struct Sink<'t> {
    timeline: &'t Timeline,
    activity: &'t Activity<'t>,
    files: Vec<Option<RankFile>>,
    /// What PyTorch records of each collective call, by (host, pid, correlation id).
    torch_calls: FxHashMap<(&'t str, u32, u32), &'t TorchCall>,
    /// The operators around the simulator's GEMM and attention launches, by (host, pid,
    /// correlation id).
    operators: FxHashMap<(&'t str, u32, u32), &'t Operator>,
}

impl Sink<'_> {
    fn to(&mut self, process: ProcessId, event: &Value) -> Result<()> {
        match &mut self.files[process.index()] {
            Some(file) => file.event(event),
            None => Ok(()),
        }
    }

    /// A GPU operation of category and name `(cat, name)` on `stream`, as Kineto lays it out
    /// (`pid` the device, `tid` the stream), its `extra` arguments beside its place and
    /// correlation.
    fn gpu_op(
        &mut self,
        stream: StreamId,
        (cat, name): (&str, &str),
        (start, end): (Ns, Ns),
        correlation: u32,
        extra: Value,
    ) -> Result<()> {
        let t = self.timeline;
        let s = t.stream(stream);
        let device = t.gpu(s.gpu).device;
        let (ts, dur) = times(start, end);
        let mut args = json!({"device": device, "context": 1, "stream": s.stream,
            "correlation": correlation});
        if let (Value::Object(args), Value::Object(extra)) = (&mut args, extra) {
            args.extend(extra);
        }
        let event = json!({"ph": "X", "cat": cat, "name": name, "pid": device,
            "tid": s.stream, "ts": ts, "dur": dur, "args": args});
        self.to(s.process, &event)
    }

    /// Every event, in the order torch.profiler writes them: the CPU's ranges and operators
    /// first, then the runtime calls, then the GPU's work.
    fn events(&mut self) -> Result<()> {
        let t = self.timeline;
        self.collective_ranges()?;
        self.operators()?;
        // torch.profiler records the framework's ranges (record_function), not NCCL's own.
        for n in t.nvtx.iter().filter(|n| n.domain == StringId::EMPTY) {
            // A mark (the rank label) is a range of no length: record_function has no marks.
            let end = match n.kind {
                NvtxKind::Mark => n.start,
                NvtxKind::Metadata => continue,
                _ => match n.end {
                    Some(end) => end,
                    None => continue,
                },
            };
            let thread = t.thread(n.thread);
            let (ts, dur) = times(n.start, end);
            let pid = t.process(thread.process).pid;
            let event = json!({"ph": "X", "cat": "user_annotation", "name": t.text(n.text),
                "pid": pid, "tid": thread.tid, "ts": ts, "dur": dur});
            self.to(thread.process, &event)?;
        }
        for a in &t.api_calls {
            let thread = t.thread(a.thread);
            let cat = if a.class == 1 {
                "cuda_driver"
            } else {
                "cuda_runtime"
            };
            let (ts, dur) = times(a.start, a.end);
            let pid = t.process(thread.process).pid;
            // torch.profiler names the call as Nsight does (`cudaLaunchKernel`, no `_v7000`).
            let name = crate::model::split_api_version(t.text(a.name)).0;
            let event = json!({"ph": "X", "cat": cat, "name": name, "pid": pid,
                "tid": thread.tid, "ts": ts, "dur": dur,
                "args": {"correlation": a.correlation}});
            self.to(thread.process, &event)?;
        }
        for k in &t.kernels {
            let extra = json!({"registers per thread": k.registers,
                "shared memory": k.static_shared + k.dynamic_shared,
                "grid": k.grid, "block": k.block});
            let name = ("kernel", t.text(k.name));
            self.gpu_op(k.stream, name, (k.start, k.end), k.correlation, extra)?;
        }
        for m in &t.memcpys {
            let name = ("gpu_memcpy", copy_name(m.copy_kind));
            let extra = json!({"bytes": m.bytes});
            self.gpu_op(m.stream, name, (m.start, m.end), m.correlation, extra)?;
        }
        for m in &t.memsets {
            let name = ("gpu_memset", "Memset (Device)");
            let extra = json!({"bytes": m.bytes});
            self.gpu_op(m.stream, name, (m.start, m.end), m.correlation, extra)?;
        }
        Ok(())
    }

    /// PyTorch's range around the launch of every NCCL kernel, named as ProcessGroupNCCL names
    /// the collective NCCL's calls around the launch show, inside its `record_param_comms`
    /// when the rank recorded the call.
    fn collective_ranges(&mut self) -> Result<()> {
        let (t, activity) = (self.timeline, self.activity);
        for p in 0..t.processes.len() {
            let process = ProcessId(p as u32);
            let (host, pid) = (
                &t.host(t.process(process).host).name,
                t.process(process).pid,
            );
            let calls = NcclCalls::new(activity, process);
            for k in activity.kernels(process) {
                let launch = activity.launch_call(process, k.correlation);
                let Some((launch, found)) = launch.and_then(|l| Some((l, calls.around(l)?))) else {
                    continue;
                };
                let tid = t.thread(launch.thread).tid;
                let (ts, dur) = times(Ns(launch.start.0 - 1_000), Ns(launch.end.0 + 1_000));
                let event = json!({"ph": "X", "cat": "cpu_op", "name": torch_name(found.pattern),
                    "pid": pid, "tid": tid, "ts": ts, "dur": dur});
                self.to(process, &event)?;
                if let Some(call) = self.torch_calls.get(&(host.as_str(), pid, k.correlation)) {
                    let (ts, dur) = times(Ns(launch.start.0 - 2_000), Ns(launch.end.0 + 2_000));
                    let event = json!({"ph": "X", "cat": "cpu_op", "name": "record_param_comms",
                        "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": comms_args(call)});
                    self.to(process, &event)?;
                }
            }
        }
        Ok(())
    }
}

impl Sink<'_> {
    /// The operator around the launch of every GEMM and attention kernel, with the inputs the
    /// simulator gave it ([`Operator`]) as `record_shapes=True` records them.
    fn operators(&mut self) -> Result<()> {
        let (t, activity) = (self.timeline, self.activity);
        for p in 0..t.processes.len() {
            let process = ProcessId(p as u32);
            let (pid, host) = (
                t.process(process).pid,
                &t.host(t.process(process).host).name,
            );
            for k in activity.kernels(process) {
                let Some(op) = self.operators.get(&(host.as_str(), pid, k.correlation)) else {
                    continue;
                };
                let Some(launch) = activity.launch_call(process, k.correlation) else {
                    continue;
                };
                let tid = t.thread(launch.thread).tid;
                let (ts, dur) = times(Ns(launch.start.0 - 500), Ns(launch.end.0 + 500));
                let s = &op.shapes;
                let args = json!({"Input Dims": s.dims, "Input type": s.types,
                    "Concrete Inputs": s.values});
                let event = json!({"ph": "X", "cat": "cpu_op", "name": s.name,
                    "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args});
                self.to(process, &event)?;
            }
        }
        Ok(())
    }
}

/// The arguments PyTorch records on `record_param_comms` (names and forms as PyTorch 2.x
/// writes them, as in HTA's `nccl_data` trace).
fn comms_args(call: &TorchCall) -> Value {
    let (group, members) = &call.group;
    let ranks: Vec<String> = members.iter().map(usize::to_string).collect();
    json!({"Collective name": call.name, "In msg nelems": call.nelems.0,
        "Out msg nelems": call.nelems.1, "Group size": members.len(), "dtype": call.dtype,
        "Process Group Name": group.to_string(), "Process Group Description": "undefined",
        "Process Group Ranks": format!("[{}]", ranks.join(", ")),
        "In split size": "[]", "Out split size": "[]"})
}

/// ProcessGroupNCCL's range name for what NCCL's calls show.
fn torch_name(pattern: Pattern) -> &'static str {
    match pattern {
        Pattern::Collective("AllReduce") => "nccl:all_reduce",
        Pattern::Collective("AllGather") => "nccl:_all_gather_base",
        Pattern::Collective("ReduceScatter") => "nccl:_reduce_scatter_base",
        Pattern::Collective("Broadcast") => "nccl:broadcast",
        Pattern::Collective(_) => "nccl:other",
        Pattern::AllToAll { .. } => "nccl:all_to_all",
        Pattern::PointToPoint { sends: 0, .. } => "nccl:recv 1<-0",
        Pattern::PointToPoint { recvs: 0, .. } => "nccl:send 0->1",
        Pattern::PointToPoint { .. } => "nccl:batch_isend_irecv",
    }
}

/// Kineto's name of a copy of CUPTI kind `kind`.
fn copy_name(kind: u8) -> &'static str {
    match kind {
        1 => "Memcpy HtoD (Pageable -> Device)",
        2 => "Memcpy DtoH (Device -> Pageable)",
        8 => "Memcpy DtoD (Device -> Device)",
        10 => "Memcpy PtoP (Device -> Device)",
        _ => "Memcpy",
    }
}
