//! The merged multi-rank timeline: every report on one clock, with hosts > processes > GPUs >
//! CUDA streams, CPU threads, and the events (kernels, memory operations, API calls,
//! synchronization, NVTX ranges and marks, OS runtime and MPI calls, GPU metrics).
//!
//! Data only: the reading layer (`nsys`, `input`) reads rows and builds a timeline
//! (`Timeline::load`), and `classify`, `analysis` and the exporters read this model only. Entities are
//! addressed by typed ids (indices into the timeline's vectors); events are compact `Copy` records
//! (integers and interned [`StringId`]s), each vector sorted once by start time.

mod clock;
mod entities;
mod events;
mod meta;
pub mod records;
mod shift;
mod stacks;
mod strings;
mod warnings;

pub use clock::{ClockMapping, TimeBase, own_clock, plan as plan_clocks};
pub use entities::{Gpu, Host, MetricSeries, Process, ReportInfo, RowCounts, Stream, Thread};
pub use events::{
    ACC_EVENT_KINDS, AccEvent, AccTable, ApiCall, GraphLaunch, Kernel, MEMORY_KIND_UNKNOWN, Memcpy,
    MemoryEvent, Memset, MetricSample, MpiCall, MpiTable, NO_CPU, NO_RANK, NvtxEvent, NvtxKind,
    OsCall, SampleEvent, SyncEvent, ThreadRun, split_api_version, split_torch_ids,
};
pub use meta::{ExportMeta, Format, HostGpu};
pub use stacks::{Frame, Hit, StackId, Stacks, module_file};
pub use strings::{MAX_TEXT, StringId, StringTable};
pub use warnings::{Warning, Warnings};

/// A time in nanoseconds on the merged clock (signed: NVTX ranges can open before the capture).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ns(pub i64);

macro_rules! typed_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub(crate) u32);

        impl $name {
            /// The index into the timeline's vector of this entity.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

typed_id!(
    /// One input report, in the order given. Created by [`Timeline::load`].
    ReportId
);
typed_id!(
    /// One host (node), named by the report's `Hostname`; reports of one host share its clock.
    HostId
);
typed_id!(
    /// One process: (report, pid). Two ranks with the same pid on different hosts are two processes.
    ProcessId
);
typed_id!(
    /// One CPU thread: (process, tid).
    ThreadId
);
typed_id!(
    /// One GPU as a process sees it: (process, CUDA device ordinal).
    GpuId
);
typed_id!(
    /// One CUDA stream: (process, device, stream id). Equal stream ids on two devices never merge.
    StreamId
);
typed_id!(
    /// One GPU metric of one GPU of one report: (report, GPU index, metric id).
    MetricSeriesId
);

/// Every report merged onto one clock. Built by [`Timeline::load`]; read-only afterwards.
#[derive(Debug, Default)]
pub struct Timeline {
    /// All text of the timeline.
    pub strings: StringTable,
    /// Inputs, indexed by [`ReportId`].
    pub reports: Vec<ReportInfo>,
    /// Hosts, indexed by [`HostId`], in order of first appearance.
    pub hosts: Vec<Host>,
    /// Processes, indexed by [`ProcessId`]: reports in input order, each report's processes in
    /// order of first appearance.
    pub processes: Vec<Process>,
    /// CPU threads that made CUDA calls or NVTX events, indexed by [`ThreadId`].
    pub threads: Vec<Thread>,
    /// GPUs per process, indexed by [`GpuId`].
    pub gpus: Vec<Gpu>,
    /// CUDA streams, indexed by [`StreamId`].
    pub streams: Vec<Stream>,
    /// Kernels, sorted by start.
    pub kernels: Vec<Kernel>,
    /// Memory copies, sorted by start.
    pub memcpys: Vec<Memcpy>,
    /// Memory sets, sorted by start.
    pub memsets: Vec<Memset>,
    /// CUDA graph launches (graph-level trace), sorted by start.
    pub graph_launches: Vec<GraphLaunch>,
    /// CUDA runtime and driver API calls, sorted by start.
    pub api_calls: Vec<ApiCall>,
    /// Synchronization events, sorted by start.
    pub syncs: Vec<SyncEvent>,
    /// OS runtime library calls, sorted by start, enclosing calls first on equal starts.
    pub os_calls: Vec<OsCall>,
    /// NVTX ranges and marks, sorted by start, enclosing ranges first on equal starts.
    pub nvtx: Vec<NvtxEvent>,
    /// MPI calls, sorted by start, enclosing calls first on equal starts.
    pub mpi_calls: Vec<MpiCall>,
    /// OpenACC events, sorted by start, enclosing events first on equal starts.
    pub acc_events: Vec<AccEvent>,
    /// GPU metric series, indexed by [`MetricSeriesId`]: reports in input order, each report's
    /// series in order of first appearance.
    pub metric_series: Vec<MetricSeries>,
    /// GPU metric samples, sorted by series, then time: each series is one run.
    pub metrics: Vec<MetricSample>,
    /// Device-memory allocations and releases, sorted by time.
    pub memory: Vec<MemoryEvent>,
    /// CPU samples, sorted by time.
    pub samples: Vec<SampleEvent>,
    /// The call stacks of the CPU samples.
    pub stacks: Stacks,
    /// When CPU threads ran on a core (scheduled in to out), sorted by start.
    pub thread_runs: Vec<ThreadRun>,
}

impl Timeline {
    /// The report.
    pub fn report(&self, id: ReportId) -> &ReportInfo {
        &self.reports[id.index()]
    }

    /// The process.
    pub fn process(&self, id: ProcessId) -> &Process {
        &self.processes[id.index()]
    }

    /// The thread.
    pub fn thread(&self, id: ThreadId) -> &Thread {
        &self.threads[id.index()]
    }

    /// The GPU.
    pub fn gpu(&self, id: GpuId) -> &Gpu {
        &self.gpus[id.index()]
    }

    /// The stream.
    pub fn stream(&self, id: StreamId) -> &Stream {
        &self.streams[id.index()]
    }

    /// The GPU metric series.
    pub fn metric_series(&self, id: MetricSeriesId) -> &MetricSeries {
        &self.metric_series[id.index()]
    }

    /// The host.
    pub fn host(&self, id: HostId) -> &Host {
        &self.hosts[id.index()]
    }

    /// The text of an interned string.
    pub fn text(&self, id: StringId) -> &str {
        self.strings.get(id)
    }
}
