//! Event types and their `.pcf` labels. The types nsys2prv defines keep its ids and its exact
//! labels (paraver.md §3.4), so its `.cfg` presets, which resolve filters by label first, work
//! on these traces unchanged; the types nsys-lens adds live in the 63100000 range, unused by
//! nsys2prv and Extrae.

use crate::classify::mpi::MpiClass;
use crate::model::AccTable;

/// `CUDA library call`: the API call's name id on its CPU thread.
pub const CUDA_API: u32 = 63_000_000;
/// `CUDA memcpy kernel`: memory copies and sets on their stream thread.
pub const MEMOP: u32 = 63_000_001;
/// `Memcopy size`: bytes of a copy or set.
pub const MEMOP_BYTES: u32 = 63_000_002;
/// `CUDA kernel`: non-NCCL kernels.
pub const KERNEL: u32 = 63_000_006;
/// `NCCL kernel`: NCCL kernels.
pub const NCCL_KERNEL: u32 = 63_000_007;
/// Launch geometry and resources: grid x, y, z, block x, y, z, static and dynamic shared memory.
pub const GEOMETRY: [u32; 8] = [9101, 9102, 9103, 9104, 9105, 9106, 9107, 9108];
/// `Kernel Registers/Thread`.
pub const REGISTERS: u32 = 9110;
/// `Correlation ID` (CPU and stream threads).
pub const CORRELATION: u32 = 9200;
/// `NCCL regions`: NVTX ranges of the NCCL domain.
pub const NCCL_REGIONS: u32 = 9500;
/// nsys2prv: the NCCL payload fields, 9501 + the field's index, labelled `NCCL <field>`, on
/// NCCL kernels.
pub const NCCL_PAYLOAD_BASE: u32 = 9501;
/// `NVTX pushpop ranges <domain> domain`: 9600 + 100·k, k the domain's rank (default first).
pub const NVTX_PUSHPOP_BASE: u32 = 9600;
/// `NVTX startend ranges`.
pub const NVTX_STARTEND: u32 = 9004;
/// Communication tag of API call -> kernel.
pub const TAG_KERNEL: u32 = 55_001;
/// Communication tag of API call -> copy or set (size = bytes).
pub const TAG_MEMOP: u32 = 55_002;
/// Communication tag of a synchronization link (from the operation waited for).
pub const TAG_SYNC: u32 = 55_003;

/// nsys-lens: the role of the stream a GPU operation runs on.
pub const STREAM_ROLE: u32 = 63_100_001;
/// nsys-lens: the PithTrain stage an NCCL kernel was launched in.
pub const STAGE: u32 = 63_100_002;
/// nsys-lens: NVTX marks (punctual).
pub const NVTX_MARK: u32 = 63_100_003;
/// nsys-lens: a communication kernel's or peer copy's own role (`barrier` for a collective on
/// a compute stream); its values are the stream roles' table.
pub const COMM_ROLE: u32 = 63_100_004;
/// nsys-lens: what decided a communication kernel's or peer copy's role.
pub const ROLE_EVIDENCE: u32 = 63_100_005;
/// Values of [`ROLE_EVIDENCE`], from 1.
pub const EVIDENCE_KINDS: [&str; 7] = [
    "rule",
    "framework",
    "torch",
    "nccl_nvtx",
    "stream",
    "kernel_name",
    "copy_kind",
];
/// nsys-lens counters on the per-rank analysis thread.
pub const COMPUTE_IN_FLIGHT: u32 = 63_100_010;
/// Communication (non-barrier NCCL) kernels running.
pub const COMM_IN_FLIGHT: u32 = 63_100_011;
/// 1 while communication runs with no compute.
pub const EXPOSED_COMM: u32 = 63_100_012;
/// NCCL kernels running on compute streams.
pub const BARRIER_IN_FLIGHT: u32 = 63_100_013;
/// 1 while the rank waits in a collective for its last member.
pub const COLLECTIVE_WAIT: u32 = 63_100_014;
/// 1 while a step's critical path runs on the rank.
pub const CRITICAL_PATH: u32 = 63_100_015;
/// The FLOP rate of the rank's kernels in flight, MFLOP/s (each kernel's FLOPs, as `mfu`
/// counts them, over its time).
pub const ACHIEVED_MFLOPS: u32 = 63_100_016;
/// nsys2prv: a CUDA graph launch (graph-level trace); values `Graph Exec <n>`, after the
/// kernel names.
pub const GRAPH_EXEC: u32 = 63_000_008;
/// nsys2prv: the launched graph's id.
pub const GRAPH_ID: u32 = 63_000_100;
/// nsys2prv: the launched executable graph's id.
pub const GRAPH_EXEC_ID: u32 = 63_000_101;
/// nsys2prv: the CUDA graph node a kernel ran as (node-level graph trace).
pub const GRAPH_NODE: u32 = 63_000_102;
/// nsys-lens: device memory allocated on a GPU since the capture started, bytes.
pub const GPU_MEMORY: u32 = 63_100_020;
/// nsys-lens: a PyTorch NVTX range's autograd sequence number (`seq = N` of its text).
pub const TORCH_SEQ: u32 = 63_100_040;
/// nsys-lens: a PyTorch NVTX range's op id (`op_id = N` of its text).
pub const TORCH_OP_ID: u32 = 63_100_041;
/// nsys-lens: a CUDA call's return code, on the calls that failed (non-zero).
pub const RETURN_CODE: u32 = 63_100_030;
/// nsys-lens: a copy's source memory kind ([`MEMORY_KINDS`]).
pub const SOURCE_MEMORY: u32 = 63_100_031;
/// nsys-lens: a copy's destination memory kind, or the memory a set wrote.
pub const DESTINATION_MEMORY: u32 = 63_100_032;
/// The memory kinds' values: `ENUM_CUDA_MEM_KIND` id + 1, as Nsight names them.
pub const MEMORY_KINDS: [(u32, &str); 8] = [
    (1, "pageable"),
    (2, "pinned"),
    (3, "device"),
    (4, "array"),
    (5, "managed"),
    (6, "device static"),
    (7, "managed static"),
    (8, "unknown"),
];
/// nsys-lens: the collective instance an NCCL kernel took part in (the same value on every
/// member, from 1).
pub const COLLECTIVE: u32 = 63_100_006;

/// nsys2prv: GPU metrics are types 9400 + nsys's metric id, labelled with the metric's name.
pub const GPU_METRICS_BASE: u32 = 9400;
/// nsys2prv 0.6: OS runtime calls other than pthread ones; values are the names, sorted.
pub const OSRT: u32 = 66_400_000;
/// nsys2prv 0.6: pthread calls; values from [`PTHREAD_VALUES`], then other pthread names sorted.
pub const PTHREAD: u32 = 61_000_000;
/// nsys2prv 0.6's fixed values of the pthread calls it knows.
pub const PTHREAD_VALUES: [(&str, u32); 13] = [
    ("pthread_exit", 1),
    ("pthread_create", 2),
    ("pthread_join", 3),
    ("pthread_detach", 4),
    ("pthread_rwlock_wrlock", 5),
    ("pthread_rwlock_rdlock", 6),
    ("pthread_rwlock_unlock", 7),
    ("pthread_mutex_lock", 8),
    ("pthread_mutex_unlock", 9),
    ("pthread_cond_signal", 10),
    ("pthread_cond_broadcast", 11),
    ("pthread_cond_wait", 12),
    ("pthread_barrier_wait", 13),
];

/// Extrae (and nsys2prv): MPI calls by class, valued by function ([`super::mpi_values`]).
pub const MPI_TYPES: [(MpiClass, u32, &str); 5] = [
    (MpiClass::PointToPoint, 50_000_001, "MPI Point-to-point"),
    (MpiClass::Collective, 50_000_002, "MPI Collective Comm"),
    (MpiClass::Other, 50_000_003, "MPI Other"),
    (MpiClass::OneSided, 50_000_004, "MPI One-sided"),
    (MpiClass::Io, 50_000_005, "MPI I/O"),
];
/// Extrae: bytes a collective sends (on its begin record).
pub const MPI_SEND_SIZE: u32 = 50_100_001;
/// Extrae: bytes a collective receives.
pub const MPI_RECV_SIZE: u32 = 50_100_002;

/// nsys2prv: OpenACC events by table: (table, event kind type, region source type, function
/// name type) and their labels. Event kinds are valued `ENUM_OPENACC_EVENT_KIND` id + 1.
pub const ACC_TYPES: [(AccTable, [(u32, &str); 3]); 3] = [
    (
        AccTable::Data,
        [
            (66_000_001, "OpenACC Data Events"),
            (66_100_001, "OpenACC data region source"),
            (66_200_001, "OpenACC data function name"),
        ],
    ),
    (
        AccTable::Launch,
        [
            (66_000_002, "OpenACC Launch Events"),
            (66_100_002, "OpenACC launch region source"),
            (66_200_002, "OpenACC launch function name"),
        ],
    ),
    (
        AccTable::Other,
        [
            (66_000_000, "OpenACC Other Events"),
            (66_100_000, "OpenACC other region source"),
            (66_200_000, "OpenACC other function name"),
        ],
    ),
];
/// nsys2prv: bytes of an OpenACC data event.
pub const ACC_DATA_BYTES: u32 = 66_300_001;

/// The (event kind, region source, function name) types of an OpenACC table.
pub fn acc_types(table: AccTable) -> [u32; 3] {
    let (_, types) = ACC_TYPES[table as usize];
    types.map(|(ty, _)| ty)
}

/// The event type of an MPI call's class.
pub fn mpi_type(class: MpiClass) -> u32 {
    MPI_TYPES
        .iter()
        .find(|(c, ..)| *c == class)
        .map_or(MPI_TYPES[2].1, |(_, ty, _)| *ty)
}

/// Extrae's sampled function (`SAMPLING_EV`): a CPU sample's innermost frame; its callers at
/// level `k` are `SAMPLED_FUNCTION + k`, all valued by function (one value table).
pub const SAMPLED_FUNCTION: u32 = 30_000_000;

/// Extrae's callers of a traced call (`CALLER_EV`): the frame at depth `k` of an OS runtime
/// call's stack is `CALLER + k + 1`, `Caller at level k+1`, valued as the sampled functions.
pub const CALLER: u32 = 70_000_000;

/// Callers a sample records at most (Extrae's `MAX_CALLERS`); deeper frames are left out.
pub const MAX_SAMPLE_DEPTH: usize = 100;

/// The label of a sampled function's level, as Extrae writes it.
pub fn sampled_label(level: usize) -> String {
    match level {
        0 => "Sampled functions".to_string(),
        k => format!("Sampled caller at level {k}"),
    }
}

/// The thread states a `1:` record takes (`STATES`), as Extrae labels them.
pub const STATES: [(u32, &str, (u8, u8, u8)); 2] =
    [(0, "Idle", (117, 195, 255)), (1, "Running", (0, 0, 255))];

/// Labels of the types without a value table (nsys2prv's exact wording for its own).
pub const PLAIN: &[(u32, &str)] = &[
    (MEMOP_BYTES, "Memcopy size"),
    (9101, "Kernel GrdX"),
    (9102, "Kernel GrdY"),
    (9103, "Kernel GrdZ"),
    (9104, "Kernel BlkX"),
    (9105, "Kernel BlkY"),
    (9106, "Kernel BlkZ"),
    (9107, "Kernel Static Shared Memory"),
    (9108, "Kernel Dynamic Shared Memory"),
    (REGISTERS, "Kernel Registers/Thread"),
    (CORRELATION, "Correlation ID"),
    (GRAPH_ID, "CUDA Graphs ID"),
    (GRAPH_EXEC_ID, "CUDA Graphs Exec ID"),
    (GRAPH_NODE, "Graph Node ID"),
    (COMPUTE_IN_FLIGHT, "nsys-lens compute kernels in flight"),
    (COMM_IN_FLIGHT, "nsys-lens communication kernels in flight"),
    (EXPOSED_COMM, "nsys-lens exposed communication"),
    (COLLECTIVE_WAIT, "nsys-lens waiting in collectives"),
    (CRITICAL_PATH, "nsys-lens on the critical path"),
    (ACHIEVED_MFLOPS, "nsys-lens achieved MFLOP/s"),
    (RETURN_CODE, "nsys-lens CUDA return code"),
    (TORCH_SEQ, "nsys-lens PyTorch sequence number"),
    (TORCH_OP_ID, "nsys-lens PyTorch op id"),
    (COLLECTIVE, "nsys-lens collective instance"),
    (GPU_MEMORY, "nsys-lens GPU memory allocated (bytes)"),
    (ACC_DATA_BYTES, "OpenACC data bytes"),
    (
        BARRIER_IN_FLIGHT,
        "nsys-lens barrier communication in flight",
    ),
];

/// The label of the push/pop type of an NVTX domain (`""` is the default domain).
pub fn pushpop_label(domain: &str) -> String {
    let domain = if domain.is_empty() { "default" } else { domain };
    format!("NVTX pushpop ranges {domain} domain")
}
