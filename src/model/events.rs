//! The events of a timeline: compact `Copy` records, times on the merged clock, text interned.

use super::{GpuId, MetricSeriesId, Ns, ProcessId, StackId, StreamId, StringId, ThreadId};

/// One kernel execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Kernel {
    /// Start.
    pub start: Ns,
    /// End.
    pub end: Ns,
    /// The stream (and so process and GPU) it ran on.
    pub stream: StreamId,
    /// Base name (`shortName`, e.g. `ncclDevKernel_SendRecv`).
    pub short_name: StringId,
    /// Full demangled signature.
    pub name: StringId,
    /// Correlation id of the launching API call in the same process (0 when none).
    pub correlation: u32,
    /// Grid dimensions.
    pub grid: [u32; 3],
    /// Block dimensions.
    pub block: [u32; 3],
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory, bytes.
    pub static_shared: u32,
    /// Dynamic shared memory, bytes.
    pub dynamic_shared: u32,
    /// The CUDA graph node it ran as (graph node-level trace, `--cuda-graph-trace=node`); 0 for
    /// a kernel launched on its own (`u32::MAX` for an id beyond 32 bits).
    pub graph_node: u32,
}

/// One memory copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Memcpy {
    /// Start.
    pub start: Ns,
    /// End.
    pub end: Ns,
    /// The stream.
    pub stream: StreamId,
    /// Correlation id of the API call.
    pub correlation: u32,
    /// Bytes copied.
    pub bytes: u64,
    /// `ENUM_CUDA_MEMCPY_OPER` id (1 host-to-device, 2 device-to-host, 8 device-to-device, 10 peer).
    pub copy_kind: u8,
    /// Source and destination `ENUM_CUDA_MEM_KIND` ids (0 pageable, 1 pinned, 2 device, 3 array,
    /// 4 managed, 5 device static, 6 managed static, 7 unknown or not recorded).
    pub memory_kinds: (u8, u8),
}

/// `ENUM_CUDA_MEM_KIND`'s Unknown, also for a memory kind not recorded or out of range.
pub const MEMORY_KIND_UNKNOWN: u8 = 7;

/// `ENUM_CUDA_MEMCPY_OPER`'s peer-to-peer: a copy from one GPU's memory to another's.
pub const COPY_PEER: u8 = 10;

impl Memcpy {
    /// Whether it copies between two GPUs (`cudaMemcpyPeer*`, a CUDA IPC pointer): data moved
    /// between GPUs, so communication, as a transfer kernel is.
    pub fn is_peer(&self) -> bool {
        self.copy_kind == COPY_PEER
    }
}

/// One memory set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Memset {
    /// Start.
    pub start: Ns,
    /// End.
    pub end: Ns,
    /// The stream.
    pub stream: StreamId,
    /// Correlation id of the API call.
    pub correlation: u32,
    /// Bytes set.
    pub bytes: u64,
    /// Value written.
    pub value: u32,
    /// The memory set (`ENUM_CUDA_MEM_KIND`, as [`Memcpy::memory_kinds`]).
    pub memory_kind: u8,
}

/// One CUDA runtime or driver API call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ApiCall {
    /// Start.
    pub start: Ns,
    /// End.
    pub end: Ns,
    /// Calling thread.
    pub thread: ThreadId,
    /// Name with its version suffix (`cudaLaunchKernel_v7000`, `cuLaunchKernelEx`).
    pub name: StringId,
    /// Correlation id (unique per process only).
    pub correlation: u32,
    /// 0 runtime API, 1 driver API (`ENUM_NSYS_EVENT_CLASS`).
    pub class: u8,
    /// What it returned (`cudaError_t`/`CUresult`: 0 success; any other value a failure, kept
    /// non-zero within `u16`).
    pub return_value: u16,
}

/// A CUDA API function's name as CUPTI records it, split into the name Nsight shows and its
/// version suffix: `cudaLaunchKernel_v7000` is `cudaLaunchKernel`, version 7000; a name without
/// a suffix (`cuLaunchKernelEx`, a torch.profiler trace's `cudaLaunchKernel`) is whole.
pub fn split_api_version(name: &str) -> (&str, Option<u32>) {
    match name.rsplit_once("_v") {
        Some((base, digits)) if !base.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            match digits.parse() {
                Ok(version) => (base, Some(version)),
                Err(_) => (name, None),
            }
        }
        _ => (name, None),
    }
}

/// An NVTX range of PyTorch's `emit_nvtx` (`aten::mm, seq = 12, op_id = 345`) split into the
/// operator's name and the numbers that make each call's text unique: its autograd sequence
/// number (when it has one) and its op id. With shapes (`record_shapes=True`), what follows
/// (`, sizes = [[4, 5], [5, 6]], input_op_ids = [(3,0)]`) is left out of the name too. Any
/// other text is whole, without numbers.
pub fn split_torch_ids(text: &str) -> (&str, Option<u64>, Option<u64>) {
    let text = text.find(", sizes = [").map_or(text, |at| &text[..at]);
    let number = |tail: &str, key: &str| -> Option<u64> {
        let digits = tail.strip_prefix(key)?;
        digits
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| digits.parse().ok())
            .flatten()
    };
    let Some((rest, op_id)) = text
        .rsplit_once(", ")
        .and_then(|(rest, tail)| Some((rest, number(tail, "op_id = ")?)))
    else {
        return (text, None, None);
    };
    match rest
        .rsplit_once(", ")
        .and_then(|(name, tail)| Some((name, number(tail, "seq = ")?)))
    {
        Some((name, seq)) => (name, Some(seq), Some(op_id)),
        None => (rest, None, Some(op_id)),
    }
}

/// One OS runtime library call (`OSRT_API`: `poll`, `ioctl`, `pthread_cond_wait`, `read`...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct OsCall {
    /// Start.
    pub start: Ns,
    /// End.
    pub end: Ns,
    /// Calling thread.
    pub thread: ThreadId,
    /// Function name.
    pub name: StringId,
    /// Its call stack (`OSRT_CALLCHAINS`), when recorded.
    pub stack: Option<StackId>,
}

/// Which nsys table an MPI call came from (nsys-sqlite.md §8.19), or nsys 2022.x's NVTX ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MpiTable {
    /// `MPI_P2P_EVENTS`: a send or receive, with its peer, tag and size.
    PointToPoint,
    /// `MPI_COLLECTIVES_EVENTS`: with its root and sizes.
    Collective,
    /// `MPI_START_WAIT_EVENTS`: `MPI_Wait*`, `MPI_Test*` and `MPI_Start*`, with one request.
    StartWait,
    /// Another row of the same `MPI_START_WAIT_EVENTS` call (nsys writes one row per request of
    /// an `MPI_Waitall`): it only carries its request, and is not drawn.
    Request,
    /// `MPI_OTHER_EVENTS`.
    Other,
    /// A range in the NVTX domain `MPI` (how nsys 2022.x records MPI calls): a name only.
    Nvtx,
}

impl MpiTable {
    /// Every table, in declaration order (a table's index is its place here).
    pub const ALL: [MpiTable; 6] = [
        MpiTable::PointToPoint,
        MpiTable::Collective,
        MpiTable::StartWait,
        MpiTable::Request,
        MpiTable::Other,
        MpiTable::Nvtx,
    ];

    /// The table of an index (`table as u8`); an unknown index reads as [`MpiTable::Other`].
    pub fn from_index(index: u8) -> MpiTable {
        MpiTable::ALL
            .get(usize::from(index))
            .copied()
            .unwrap_or(MpiTable::Other)
    }
}

/// No rank (a call without a peer or root).
pub const NO_RANK: i32 = i32::MIN;

/// One MPI call (`--trace=mpi`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MpiCall {
    /// Start.
    pub start: Ns,
    /// End.
    pub end: Ns,
    /// Calling thread.
    pub thread: ThreadId,
    /// Function name (`MPI_Send`).
    pub name: StringId,
    /// The table it came from.
    pub table: MpiTable,
    /// The remote rank of a send or receive, the root of a rooted collective; [`NO_RANK`] when
    /// none.
    pub peer: i32,
    /// The message tag of a send or receive (0 otherwise).
    pub tag: i32,
    /// The communicator (`commUid` where the export has it, else `commHandle`; 0 when none).
    pub comm: u64,
    /// Bytes sent (a collective's send size).
    pub size: u64,
    /// A collective's bytes received.
    pub recv_size: u64,
    /// The request handle of a non-blocking call or a wait (0 when none).
    pub request: u64,
}

/// Which OpenACC activity table an event came from (`--trace=openacc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AccTable {
    /// `CUPTI_ACTIVITY_KIND_OPENACC_DATA`: uploads, downloads, allocations, with their bytes.
    Data,
    /// `CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH`: kernel launches.
    Launch,
    /// `CUPTI_ACTIVITY_KIND_OPENACC_OTHER`: constructs, waits, initialisation.
    Other,
}

impl AccTable {
    /// Every table, in declaration order (a table's index is its place here).
    pub const ALL: [AccTable; 3] = [AccTable::Data, AccTable::Launch, AccTable::Other];

    /// The table of an index (`table as u8`); an unknown index reads as [`AccTable::Other`].
    pub fn from_index(index: u8) -> AccTable {
        AccTable::ALL
            .get(usize::from(index))
            .copied()
            .unwrap_or(AccTable::Other)
    }
}

/// The labels of `ENUM_OPENACC_EVENT_KIND` (`CUpti_OpenAccEventKind`), by id, as nsys exports
/// them (ids and labels unchanged since 2022.4).
pub const ACC_EVENT_KINDS: [&str; 17] = [
    "Invalid",
    "Device init",
    "Device shutdown",
    "Runtime shutdown",
    "Enqueue launch",
    "Enqueue upload",
    "Enqueue download",
    "Wait",
    "Implicit wait",
    "Compute construct",
    "UPDATE",
    "Enter data",
    "Exit data",
    "Create",
    "Delete",
    "Alloc",
    "Free",
];

/// One OpenACC event (a directive's runtime activity, on the thread that ran it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct AccEvent {
    /// Start.
    pub start: Ns,
    /// End.
    pub end: Ns,
    /// The thread.
    pub thread: ThreadId,
    /// The table it came from.
    pub table: AccTable,
    /// `CUpti_OpenAccEventKind` (`ENUM_OPENACC_EVENT_KIND`: 4 enqueue launch, 5 upload...).
    pub event_kind: u8,
    /// The event's name (`nameId`).
    pub name: StringId,
    /// Where in the source: `name@file:line` as nsys2prv labels regions, the name alone when
    /// the source file is unknown.
    pub source: StringId,
    /// The function it happened in (empty when unknown).
    pub function: StringId,
    /// The variable (data events) or kernel (launches) it concerns (empty when unknown).
    pub object: StringId,
    /// Bytes moved (data events).
    pub bytes: u64,
}

/// One sample of one GPU metric (`GPU_METRICS`, `--gpu-metrics-devices`): the value holds from
/// its time until the series' next sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MetricSample {
    /// Sample time.
    pub time: Ns,
    /// The value as nsys records it (percent of peak for most metrics, MHz for clocks).
    pub value: i64,
    /// Its series (one metric of one GPU of one report).
    pub series: MetricSeriesId,
}

/// One launch of a CUDA graph, traced as a whole (`CUPTI_ACTIVITY_KIND_GRAPH_TRACE`,
/// `--cuda-graph-trace=graph`, nsys's default): its nodes' kernels and copies are not listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct GraphLaunch {
    /// Start of its first node.
    pub start: Ns,
    /// End of its last node.
    pub end: Ns,
    /// The stream it was launched on.
    pub stream: StreamId,
    /// Correlation id of the launching `cudaGraphLaunch`.
    pub correlation: u32,
    /// The graph.
    pub graph: u32,
    /// The executable graph (one instantiation of the graph).
    pub exec: u32,
}

/// One device-memory allocation or release (`CUDA_GPU_MEMORY_USAGE_EVENTS`,
/// `--cuda-memory-usage=true`; device memory only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MemoryEvent {
    /// When.
    pub time: Ns,
    /// Bytes allocated (positive) or released (negative).
    pub bytes: i64,
    /// The GPU (and so the process).
    pub gpu: GpuId,
}

/// One synchronization event (a host wait, or a stream waiting on an event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SyncEvent {
    /// Start.
    pub start: Ns,
    /// End.
    pub end: Ns,
    /// The process.
    pub process: ProcessId,
    /// The stream concerned, when one is (stream sync, stream wait).
    pub stream: Option<StreamId>,
    /// Correlation id of the API call.
    pub correlation: u32,
    /// `ENUM_CUPTI_SYNC_TYPE`: 1 event, 2 stream wait, 3 stream, 4 context.
    pub sync_type: u8,
}

/// One CPU sample (`COMPOSITE_EVENTS`): where a thread was when the sampler interrupted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SampleEvent {
    /// When.
    pub time: Ns,
    /// The thread sampled.
    pub thread: ThreadId,
    /// Its call stack.
    pub stack: StackId,
    /// The core it ran on ([`NO_CPU`] when not recorded).
    pub cpu: u16,
}

/// A core not recorded.
pub const NO_CPU: u16 = u16::MAX;

/// One time a CPU thread ran on a core (`SCHED_EVENTS`): from scheduled in to scheduled out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ThreadRun {
    /// Scheduled in.
    pub start: Ns,
    /// Scheduled out.
    pub end: Ns,
    /// The thread.
    pub thread: ThreadId,
    /// The core ([`NO_CPU`] when beyond 16 bits).
    pub cpu: u16,
    /// The state it was left in (`ENUM_SAMPLING_THREAD_STATE`: 0 not recorded, 5 terminated...).
    pub left_as: u8,
}

impl ThreadRun {
    /// `ENUM_SAMPLING_THREAD_STATE`'s names, by id.
    pub const STATES: [&'static str; 11] = [
        "Unknown",
        "Running",
        "Interruptible",
        "Uninterruptible",
        "Stopped",
        "Terminated",
        "Unscheduled",
        "Waiting",
        "OS runtime",
        "Initialized",
        "Transition",
    ];

    /// The name of the state the thread was left in; None when not recorded (or unknown).
    pub fn left_as_name(&self) -> Option<&'static str> {
        match self.left_as {
            0 => None,
            id => Self::STATES.get(usize::from(id)).copied(),
        }
    }
}

/// What an NVTX event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NvtxKind {
    /// An instant (`nvtxMark`).
    Mark,
    /// A push/pop range: nests strictly per thread.
    PushPop,
    /// A start/end range: may overlap others and end on another thread.
    StartEnd,
    /// A naming record (thread, category or domain name) at the time it was given. Not a range
    /// nor a mark: analyses skip it, except PithTrain compatibility, whose queries see every row.
    Metadata,
}

impl NvtxKind {
    /// Whether it is a range (push/pop or start/end).
    pub fn is_range(self) -> bool {
        matches!(self, NvtxKind::PushPop | NvtxKind::StartEnd)
    }
}

/// One NVTX range or mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct NvtxEvent {
    /// Start (the mark's time for a mark); negative when opened before the capture.
    pub start: Ns,
    /// End; None for marks and for ranges that never close.
    pub end: Option<Ns>,
    /// Range or mark.
    pub kind: NvtxKind,
    /// Thread that opened it.
    pub thread: ThreadId,
    /// Thread that closed it, when another one.
    pub end_thread: Option<ThreadId>,
    /// Domain name ([`StringId::EMPTY`] for the default domain).
    pub domain: StringId,
    /// Text.
    pub text: StringId,
    /// Payload ([`StringId::EMPTY`] for none): the JSON of an extended payload, or a scalar
    /// payload's value.
    pub payload: StringId,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documented memory per event (README, "Limits"): a guard against bloating the records
    /// that tens of millions of rows become.
    /// Names from real exports: nsys 2025.1 (`fuser_report1_2025.1.1`: `cudaLaunchKernel_v7000`,
    /// `cudaStreamSynchronize_v3020`, `cuLaunchKernelEx`), and names a suffix rule must not cut.
    #[test]
    fn api_names_lose_only_cuptis_version_suffix() {
        let cases = [
            ("cudaLaunchKernel_v7000", ("cudaLaunchKernel", Some(7000))),
            (
                "cudaStreamSynchronize_v3020",
                ("cudaStreamSynchronize", Some(3020)),
            ),
            ("cudaGraphLaunch_v10000", ("cudaGraphLaunch", Some(10000))),
            ("cuLaunchKernelEx", ("cuLaunchKernelEx", None)),
            ("cudaLaunchKernel", ("cudaLaunchKernel", None)),
            ("cudaMemcpy_v", ("cudaMemcpy_v", None)),
            ("_v7000", ("_v7000", None)),
            ("cudaFoo_v99999999999", ("cudaFoo_v99999999999", None)),
            ("my_vec_v2_x", ("my_vec_v2_x", None)),
        ];
        for (name, expected) in cases {
            assert_eq!(split_api_version(name), expected, "{name}");
        }
    }

    #[test]
    fn torch_nvtx_ranges_split_into_name_and_ids() {
        // Texts as PyTorch's emit_nvtx writes them (nsysai_mfu_2gpu_before_2026.2.1).
        let cases = [
            (
                "aten::to, seq = 1828, op_id = 991315",
                ("aten::to", Some(1828), Some(991315)),
            ),
            ("aten::copy_, op_id = 4", ("aten::copy_", None, Some(4))),
            (
                "AllToAll4D, seq = 45440, op_id = 990760",
                ("AllToAll4D", Some(45440), Some(990760)),
            ),
            ("forward", ("forward", None, None)),
            ("a, op_id = 12x", ("a, op_id = 12x", None, None)),
            ("a, seq = x, op_id = 3", ("a, seq = x", None, Some(3))),
            ("", ("", None, None)),
            // With shapes, as PyTorch's getNvtxStr writes them.
            (
                "aten::mm, seq = 7, op_id = 9, sizes = [[4, 5], [5, 6]], input_op_ids = [(3,0)]",
                ("aten::mm", Some(7), Some(9)),
            ),
            (
                "aten::mm, sizes = [[4, 5], [5, 6]]",
                ("aten::mm", None, None),
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(split_torch_ids(text), expected, "{text}");
        }
    }

    #[test]
    fn events_stay_small() {
        assert!(std::mem::size_of::<Kernel>() <= 72);
        assert!(std::mem::size_of::<ApiCall>() <= 32);
        assert!(std::mem::size_of::<OsCall>() <= 32);
        assert!(std::mem::size_of::<MpiCall>() <= 72);
        assert!(std::mem::size_of::<AccEvent>() <= 48);
        assert!(std::mem::size_of::<MetricSample>() <= 24);
        assert!(std::mem::size_of::<MemoryEvent>() <= 24);
        assert!(std::mem::size_of::<GraphLaunch>() <= 32);
        assert!(std::mem::size_of::<NvtxEvent>() <= 56);
        assert!(std::mem::size_of::<Memcpy>() <= 40);
        assert!(std::mem::size_of::<Memset>() <= 40);
        assert!(std::mem::size_of::<SyncEvent>() <= 40);
        assert!(std::mem::size_of::<SampleEvent>() <= 24);
        assert!(std::mem::size_of::<ThreadRun>() <= 24);
    }
}
