//! Who ran what: reports, hosts, processes, threads, GPUs and CUDA streams.

use super::{ClockMapping, GpuId, HostId, Ns, ProcessId, ReportId, StringId, TimeBase};
use super::{ExportMeta, Warnings};
use std::path::PathBuf;

/// One input report and what was read from it.
#[derive(Debug, Clone)]
pub struct ReportInfo {
    /// The SQLite file read (for a `.nsys-rep`, its export).
    pub path: PathBuf,
    /// The host it profiled.
    pub host: HostId,
    /// Versions, session start, host GPUs.
    pub meta: ExportMeta,
    /// How its times were mapped onto the merged clock.
    pub clock: ClockMapping,
    /// Rows read per event table (each equals the table's `count(*)`).
    pub counts: RowCounts,
    /// First start and last end of its events on the merged clock; None when it has none.
    pub span: Option<(Ns, Ns)>,
    /// Harmless oddities found while reading it.
    pub warnings: Warnings,
}

impl ReportInfo {
    /// Where its capture began on the merged clock (its session start), or None when the export
    /// does not say. Events before it are ranges and calls already under way then.
    pub fn capture_start(&self) -> Option<Ns> {
        match self.clock.base {
            TimeBase::SessionRelative => Some(Ns(self.clock.offset)),
            TimeBase::UtcEpoch => self
                .meta
                .session_start_utc_ns
                .map(|start| Ns(start + self.clock.offset)),
        }
    }
}

/// Rows read per event table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RowCounts {
    /// `CUPTI_ACTIVITY_KIND_KERNEL`.
    pub kernels: u64,
    /// `CUPTI_ACTIVITY_KIND_MEMCPY`.
    pub memcpy: u64,
    /// `CUPTI_ACTIVITY_KIND_MEMSET`.
    pub memset: u64,
    /// `CUPTI_ACTIVITY_KIND_RUNTIME` (runtime and driver API calls).
    pub cuda_api: u64,
    /// `CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`.
    pub sync: u64,
    /// `CUPTI_ACTIVITY_KIND_GRAPH_TRACE` (CUDA graph launches).
    pub graphs: u64,
    /// `NVTX_EVENTS` (all event types).
    pub nvtx: u64,
    /// `OSRT_API` calls (its profiler start and finish markers are not counted).
    pub osrt: u64,
    /// `GPU_METRICS` samples (one per metric and sampling time).
    pub gpu_metrics: u64,
    /// `CUDA_GPU_MEMORY_USAGE_EVENTS` rows of device memory.
    pub memory: u64,
    /// MPI calls: rows of `MPI_P2P_EVENTS`, `MPI_COLLECTIVES_EVENTS`, `MPI_START_WAIT_EVENTS` and
    /// `MPI_OTHER_EVENTS`, or nsys 2022.x's ranges in the NVTX domain `MPI` (also counted in
    /// `nvtx`).
    pub mpi: u64,
    /// OpenACC events: rows of `CUPTI_ACTIVITY_KIND_OPENACC_DATA`, `_LAUNCH` and `_OTHER`.
    pub openacc: u64,
    /// CPU samples with a call stack (`COMPOSITE_EVENTS`).
    pub samples: u64,
    /// Times a thread ran on a core: pairs of `SCHED_EVENTS` rows.
    pub sched: u64,
}

impl RowCounts {
    /// Whether the report holds no events at all.
    pub fn is_empty(&self) -> bool {
        *self == RowCounts::default()
    }
}

/// One host (node).
#[derive(Debug, Clone)]
pub struct Host {
    /// `Hostname` of its reports (else the first report's file stem).
    pub name: String,
    /// Its reports.
    pub reports: Vec<ReportId>,
}

/// One process: (report, pid).
#[derive(Debug, Clone)]
pub struct Process {
    /// The report it came from.
    pub report: ReportId,
    /// Its host.
    pub host: HostId,
    /// Operating-system pid (unique only within a host).
    pub pid: u32,
    /// Executable name from `PROCESSES` (empty when unknown).
    pub name: StringId,
    /// First start and last end of everything the process drew (CUDA calls and GPU work, OS
    /// calls, NVTX ranges and marks, device-memory events); an open NVTX range or device memory
    /// still allocated lasts to the end of time. None when it drew nothing.
    pub span: Option<(Ns, Ns)>,
    /// Its MPI rank (`MPI_RANKS`, or nsys's thread name `MPI Rank N` with `--trace=mpi`).
    pub mpi_rank: Option<u32>,
}

/// One CPU thread.
#[derive(Debug, Clone)]
pub struct Thread {
    /// Its process.
    pub process: ProcessId,
    /// Operating-system tid (equals the pid for the main thread).
    pub tid: u32,
    /// Name from NVTX (`nvtxNameOsThread`) or `ThreadNames` (empty when unknown).
    pub name: StringId,
    /// First start and last end of its calls (CUDA, OS runtime, MPI, OpenACC) and NVTX ranges and marks
    /// (an open range lasts to the end of time); None when it made none.
    pub span: Option<(Ns, Ns)>,
}

/// A GPU as one process sees it.
#[derive(Debug, Clone)]
pub struct Gpu {
    /// The process.
    pub process: ProcessId,
    /// CUDA device ordinal in that process (what activity rows call `deviceId`).
    pub device: u32,
    /// The host's GPU index (`TARGET_INFO_GPU.id`) when known.
    pub host_gpu: Option<i64>,
    /// Product name (empty when unknown).
    pub name: StringId,
}

/// One GPU metric of one GPU, as a report samples it (`TARGET_INFO_GPU_METRICS`).
#[derive(Debug, Clone)]
pub struct MetricSeries {
    /// The report.
    pub report: ReportId,
    /// The host's GPU index (`typeId & 0xFF`; `TARGET_INFO_GPU.id`).
    pub gpu_index: u32,
    /// nsys's metric id (stable within one metric set only).
    pub metric_id: u32,
    /// `metricName` (`SMs Active`, `NVLink RX Bandwidth`...).
    pub name: StringId,
    /// First and last sample time.
    pub span: (Ns, Ns),
}

/// One CUDA stream.
#[derive(Debug, Clone)]
pub struct Stream {
    /// The process.
    pub process: ProcessId,
    /// The GPU.
    pub gpu: GpuId,
    /// CUDA context.
    pub context: u32,
    /// Stream id (small, per context; repeats across processes).
    pub stream: u32,
    /// Priority when `TARGET_INFO_CUDA_STREAM` lists the stream.
    pub priority: Option<i32>,
    /// Kernels it ran over the whole capture.
    pub kernels: u64,
}
