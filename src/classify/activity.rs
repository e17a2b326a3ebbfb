//! Per-process views of a timeline, built once: each process's kernels, memory operations and
//! NVTX events (indices into the timeline's sorted vectors, so still in start order), and the
//! launching API call of each GPU operation.

use super::comm;
use crate::model::{
    ApiCall, GpuId, GraphLaunch, Kernel, Memcpy, MemoryEvent, Memset, MetricSample, MetricSeriesId,
    Ns, NvtxEvent, OsCall, ProcessId, StreamId, Timeline,
};
use std::ops::Range;
use std::sync::atomic::{AtomicU8, Ordering};

/// A timeline with its events grouped by process.
pub struct Activity<'t> {
    /// The timeline indexed.
    pub timeline: &'t Timeline,
    kernels: Vec<Vec<u32>>,
    memcpys: Vec<Vec<u32>>,
    memsets: Vec<Vec<u32>>,
    graph_launches: Vec<Vec<u32>>,
    api_calls: Vec<Vec<u32>>,
    nvtx: Vec<Vec<u32>>,
    os_calls: Vec<Vec<u32>>,
    memory: Vec<Vec<u32>>,
    /// Each metric series' samples: a range of the timeline's (series-sorted) samples.
    metric_samples: Vec<Range<usize>>,
    /// (process, correlation id, index into the API calls) of every API call, sorted (the
    /// calls are in start order, so equal correlation ids come earliest first).
    launches: Vec<(ProcessId, u32, u32)>,
    /// Per string id, what a kernel of that name is once asked: 0 not yet, 1 computation, 2
    /// communication ([`Activity::is_comm_kernel`]).
    comm_names: Vec<AtomicU8>,
}

impl<'t> Activity<'t> {
    /// Groups every event of `timeline` by process: one pass per event vector, one sort of the
    /// API calls.
    pub fn new(timeline: &'t Timeline) -> Activity<'t> {
        let n = timeline.processes.len();
        let process_of_stream = |s: crate::model::StreamId| timeline.stream(s).process;
        let kernels = group(n, &timeline.kernels, |k| process_of_stream(k.stream));
        let memcpys = group(n, &timeline.memcpys, |m| process_of_stream(m.stream));
        let memsets = group(n, &timeline.memsets, |m| process_of_stream(m.stream));
        let graph_launches = group(n, &timeline.graph_launches, |g| process_of_stream(g.stream));
        let api_calls = group(n, &timeline.api_calls, |a| {
            timeline.thread(a.thread).process
        });
        let nvtx = group(n, &timeline.nvtx, |e| timeline.thread(e.thread).process);
        let os_calls = group(n, &timeline.os_calls, |o| timeline.thread(o.thread).process);
        let memory = group(n, &timeline.memory, |m| timeline.gpu(m.gpu).process);
        let mut launches: Vec<(ProcessId, u32, u32)> = timeline
            .api_calls
            .iter()
            .enumerate()
            .map(|(i, a)| (timeline.thread(a.thread).process, a.correlation, i as u32))
            .collect();
        launches.sort_unstable();
        let mut metric_samples = vec![0..0; timeline.metric_series.len()];
        let mut from = 0;
        for run in timeline.metrics.chunk_by(|a, b| a.series == b.series) {
            metric_samples[run[0].series.index()] = from..from + run.len();
            from += run.len();
        }
        Activity {
            timeline,
            kernels,
            memcpys,
            memsets,
            graph_launches,
            api_calls,
            nvtx,
            os_calls,
            memory,
            metric_samples,
            launches,
            comm_names: (0..timeline.strings.len())
                .map(|_| AtomicU8::new(0))
                .collect(),
        }
    }

    /// Whether kernel `k` moves data between GPUs ([`comm::is_comm_kernel`]), its name read once
    /// per name however many kernels bear it (safe from every thread at once).
    pub fn is_comm_kernel(&self, k: &Kernel) -> bool {
        let Some(known) = self.comm_names.get(k.name.index()) else {
            return comm::is_comm_kernel(self.timeline, k);
        };
        match known.load(Ordering::Relaxed) {
            1 => false,
            2 => true,
            _ => {
                let comm = comm::is_comm_kernel(self.timeline, k);
                known.store(1 + u8::from(comm), Ordering::Relaxed);
                comm
            }
        }
    }

    /// The process's kernels, in start order.
    pub fn kernels(&self, process: ProcessId) -> impl Iterator<Item = &'t Kernel> + '_ {
        let all = &self.timeline.kernels;
        self.kernels[process.index()]
            .iter()
            .map(move |&i| &all[i as usize])
    }

    /// The process's memory copies, in start order.
    pub fn memcpys(&self, process: ProcessId) -> impl Iterator<Item = &'t Memcpy> + '_ {
        let all = &self.timeline.memcpys;
        self.memcpys[process.index()]
            .iter()
            .map(move |&i| &all[i as usize])
    }

    /// The process's memory sets, in start order.
    pub fn memsets(&self, process: ProcessId) -> impl Iterator<Item = &'t Memset> + '_ {
        let all = &self.timeline.memsets;
        self.memsets[process.index()]
            .iter()
            .map(move |&i| &all[i as usize])
    }

    /// The CUDA API calls of all the process's threads, in start order.
    pub fn api_calls(&self, process: ProcessId) -> impl Iterator<Item = &'t ApiCall> + '_ {
        let all = &self.timeline.api_calls;
        self.api_calls[process.index()]
            .iter()
            .map(move |&i| &all[i as usize])
    }

    /// The NVTX events of all the process's threads, in start order (enclosing ranges first).
    pub fn nvtx(&self, process: ProcessId) -> impl Iterator<Item = &'t NvtxEvent> + '_ {
        let all = &self.timeline.nvtx;
        self.nvtx[process.index()]
            .iter()
            .map(move |&i| &all[i as usize])
    }

    /// The NVTX events of the process that start inside `[start, end]`, in start order: a
    /// binary search, then those events alone.
    pub fn nvtx_starting_in(
        &self,
        process: ProcessId,
        (start, end): (i64, i64),
    ) -> impl Iterator<Item = &'t NvtxEvent> + '_ {
        let all = &self.timeline.nvtx;
        let indices = &self.nvtx[process.index()];
        let from = indices.partition_point(|&i| all[i as usize].start.0 < start);
        indices[from..]
            .iter()
            .map(move |&i| &all[i as usize])
            .take_while(move |e| e.start.0 <= end)
    }

    /// The OS runtime calls of all the process's threads, in start order (enclosing calls
    /// first).
    pub fn os_calls(&self, process: ProcessId) -> impl Iterator<Item = &'t OsCall> + '_ {
        let all = &self.timeline.os_calls;
        self.os_calls[process.index()]
            .iter()
            .map(move |&i| &all[i as usize])
    }

    /// The device-memory allocations and releases of the process, in time order.
    pub fn memory(&self, process: ProcessId) -> impl Iterator<Item = &'t MemoryEvent> + '_ {
        let all = &self.timeline.memory;
        self.memory[process.index()]
            .iter()
            .map(move |&i| &all[i as usize])
    }

    /// The GPU metric series sampled on a GPU of the process: the report's series whose GPU
    /// index is the GPU's host index (its CUDA ordinal when the export does not map it), with
    /// the GPU, by GPU then series.
    pub fn metric_series(&self, process: ProcessId) -> Vec<(GpuId, MetricSeriesId)> {
        let timeline = self.timeline;
        let report = timeline.process(process).report;
        let mut found = Vec::new();
        for (g, gpu) in timeline.gpus.iter().enumerate() {
            if gpu.process != process {
                continue;
            }
            let index = gpu.host_gpu.map_or(gpu.device, |i| i as u32);
            found.extend(
                (0..timeline.metric_series.len() as u32)
                    .map(MetricSeriesId)
                    .filter(|&s| {
                        let series = timeline.metric_series(s);
                        series.report == report && series.gpu_index == index
                    })
                    .map(|s| (GpuId(g as u32), s)),
            );
        }
        found
    }

    /// A metric series' samples, in time order.
    pub fn metric_samples(&self, series: MetricSeriesId) -> &'t [MetricSample] {
        &self.timeline.metrics[self.metric_samples[series.index()].clone()]
    }

    /// A metric series' samples taken inside `[from, to]`, in time order.
    pub fn metric_samples_in(
        &self,
        series: MetricSeriesId,
        (from, to): (i64, i64),
    ) -> &'t [MetricSample] {
        let all = self.metric_samples(series);
        let first = all.partition_point(|m| m.time.0 < from);
        let end = all.partition_point(|m| m.time.0 <= to);
        &all[first..end.max(first)]
    }

    /// The process's CUDA graph launches (graph-level trace), in start order.
    pub fn graph_launches(&self, process: ProcessId) -> impl Iterator<Item = &'t GraphLaunch> + '_ {
        let all = &self.timeline.graph_launches;
        self.graph_launches[process.index()]
            .iter()
            .map(move |&i| &all[i as usize])
    }

    /// Every GPU operation of the process (kernels, copies, sets, graph launches) as
    /// `(stream, start, end, correlation)`, kind by kind.
    pub fn operations(
        &self,
        process: ProcessId,
    ) -> impl Iterator<Item = (StreamId, Ns, Ns, u32)> + '_ {
        let kernels = self
            .kernels(process)
            .map(|k| (k.stream, k.start, k.end, k.correlation));
        let copies = self
            .memcpys(process)
            .map(|m| (m.stream, m.start, m.end, m.correlation));
        let sets = self
            .memsets(process)
            .map(|m| (m.stream, m.start, m.end, m.correlation));
        let graphs = self
            .graph_launches(process)
            .map(|g| (g.stream, g.start, g.end, g.correlation));
        kernels.chain(copies).chain(sets).chain(graphs)
    }

    /// Whether the process ran any kernel, copy, set or graph (a stream exists only for work).
    pub fn has_gpu_work(&self, process: ProcessId) -> bool {
        self.timeline.streams.iter().any(|s| s.process == process)
    }

    /// Start times of the process's API calls with this correlation id, earliest first (a
    /// correlation id is unique per process in practice; none for GPU work without a recorded
    /// launch).
    pub fn launch_starts(&self, process: ProcessId, correlation: u32) -> impl Iterator<Item = Ns> {
        self.launch_calls(process, correlation).map(|a| a.start)
    }

    /// The process's API calls with this correlation id, earliest first.
    pub fn launch_calls(
        &self,
        process: ProcessId,
        correlation: u32,
    ) -> impl Iterator<Item = &'t ApiCall> + '_ {
        let from = self
            .launches
            .partition_point(|&(p, c, ..)| (p, c) < (process, correlation));
        let all = &self.timeline.api_calls;
        self.launches[from..]
            .iter()
            .take_while(move |&&(p, c, ..)| (p, c) == (process, correlation))
            .map(move |&(.., i)| &all[i as usize])
    }

    /// The API call that launched the GPU operation with this correlation id.
    pub fn launch_call(&self, process: ProcessId, correlation: u32) -> Option<&'t ApiCall> {
        self.launch_calls(process, correlation).next()
    }

    /// When the GPU operation with this correlation id was launched: the start of its API call.
    pub fn launch(&self, process: ProcessId, correlation: u32) -> Option<Ns> {
        self.launch_starts(process, correlation).next()
    }
}

/// Indices of `events` grouped by the process `key` gives, each group in the input order.
fn group<T>(processes: usize, events: &[T], key: impl Fn(&T) -> ProcessId) -> Vec<Vec<u32>> {
    let mut groups = vec![Vec::new(); processes];
    for (i, e) in events.iter().enumerate() {
        groups[key(e).index()].push(i as u32);
    }
    groups
}
