//! One node's export: event rows on the node's own session clock, and the metadata tables a real
//! 2026.2.1 export carries (versions, capture settings, session start, host, GPUs, contexts,
//! streams, processes, thread names).

use super::kernels::{KernelKind, Names};
use crate::hash::{FxHashMap, FxHashSet};
use crate::model::AccTable;
use crate::nsys::GlobalId;
use crate::nsys::write::{ExportWriter, NVTX_PUSH_POP, PRODUCT_VERSION, SCHEMA_VERSION};
use crate::time::utc_iso;
use anyhow::Result;
use rusqlite::ToSql;
use std::path::{Path, PathBuf};

/// The legacy default stream PyTorch's default stream maps to; exports do not list it in
/// `TARGET_INFO_CUDA_STREAM`.
pub const DEFAULT_STREAM: u32 = 7;

/// `VM id 1` as serialised in `vmId` / `globalVid` columns.
const VM_ID: i64 = 1 << 48;

/// The one CUDA context of every synthetic process.
const CONTEXT: i64 = 1;
/// `greenContextId` of ordinary contexts.
const GREEN_CONTEXT: i64 = 0;

use crate::nsys::tables::{GRAPH, KERNEL, MEMCPY, MEMSET, SYNC};

const ACC_DATA: &str = "CUPTI_ACTIVITY_KIND_OPENACC_DATA";
const ACC_LAUNCH: &str = "CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH";
const ACC_OTHER: &str = "CUPTI_ACTIVITY_KIND_OPENACC_OTHER";

/// The columns every OpenACC table opens with, followed by a table's own.
macro_rules! acc_columns {
    ($rest:literal) => {
        concat!(
            "start, end, nameId, globalTid, eventKind, DeviceType, lineNo, cuDeviceId, ",
            "cuContextId, cuStreamId, srcFile, funcName",
            $rest
        )
    };
}

/// The columns every GPU activity table opens with, followed by a table's own.
macro_rules! gpu_op_columns {
    ($rest:literal) => {
        concat!(
            "start, end, deviceId, contextId, greenContextId, streamId, correlationId, globalPid, ",
            $rest
        )
    };
}

/// NvtxThread (`ENUM_NSYS_EVENT_TYPE`): a thread's name.
const NVTX_THREAD_NAME: i64 = 39;
/// The NVTX domain id nsys 2022.x records MPI calls in, in every process (after NCCL's).
const MPI_DOMAIN: i64 = 2;
/// `MPI_COMM_WORLD`'s handle (MPICH's value) and its communicator uid.
const COMM_WORLD: (i64, i64) = (0x4400_0000, 1);
/// NvtxDomainCreate.
pub const NVTX_DOMAIN_CREATE: i64 = 75;
/// The NCCL NVTX domain id in every process.
pub const NCCL_DOMAIN: i64 = 1;

/// Node facts fixed before generation.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    /// `Hostname`.
    pub hostname: String,
    /// Session start in UTC epoch ns.
    pub session_start_utc: i64,
    /// Session start on the generator's clock (rows store `t - session_start`).
    pub session_start: i64,
    /// GPUs of the host.
    pub gpus: u32,
    /// Product name of its GPUs.
    pub gpu_name: &'static str,
    /// Whose kernel names it writes.
    pub names: Names,
    /// Variants of each compute kernel's name, grid and block (1: the kind's own).
    pub name_variety: u32,
}

/// NVTX text: inline (`text`) or registered (`textId`).
#[derive(Debug, Clone, Copy)]
pub enum NvtxText<'a> {
    /// Inline text.
    Inline(&'a str),
    /// A registered string.
    Registered(&'a str),
}

/// One node's export being written.
pub struct NodeExport {
    spec: NodeSpec,
    writer: ExportWriter,
    processes: Vec<(u32, u32)>,
    threads: Vec<(u32, u32, &'static str)>,
    streams: FxHashSet<(u32, u32)>,
    grid_ids: FxHashMap<u32, i64>,
    last_time: i64,
    command: String,
    /// Whether an OS runtime call was written (and so the tracing-started marker).
    os_runtime_started: bool,
    /// Processes whose NVTX domain `MPI` was created.
    mpi_domains: FxHashSet<u32>,
    /// Whether a range carries a payload's JSON (exported with `--include-json=true`).
    json_included: bool,
}

/// The fields of an MPI point-to-point call: (remote rank, tag, bytes, request handle).
pub type P2pFields = (i64, i64, i64, i64);

/// One OpenACC event to write.
#[derive(Debug, Clone, Copy)]
pub struct AccRow<'a> {
    /// Its table.
    pub table: AccTable,
    /// `CUpti_OpenAccEventKind`.
    pub kind: i64,
    /// Its name (`acc_enqueue_launch`).
    pub name: &'a str,
    /// The directive's line in `train.c`.
    pub line: i64,
    /// The CUDA device.
    pub device: u32,
    /// A data event's variable or a launch's kernel.
    pub object: Option<&'a str>,
    /// A data event's bytes.
    pub bytes: i64,
}

impl NodeExport {
    /// Starts writing `path`.
    pub fn create(path: &Path, spec: NodeSpec, command: String) -> Result<NodeExport> {
        Ok(NodeExport {
            spec,
            writer: ExportWriter::create(path)?,
            processes: Vec::new(),
            threads: Vec::new(),
            streams: FxHashSet::default(),
            grid_ids: FxHashMap::default(),
            last_time: 0,
            command,
            os_runtime_started: false,
            mpi_domains: FxHashSet::default(),
            json_included: false,
        })
    }

    fn local(&mut self, t: i64) -> i64 {
        let local = t - self.spec.session_start;
        self.last_time = self.last_time.max(local);
        local
    }

    /// Registers a process (a rank) on CUDA device `device` with its threads, and its NCCL NVTX
    /// domain, created at `t`.
    pub fn add_process(
        &mut self,
        pid: u32,
        device: u32,
        threads: &[(u32, &'static str)],
        t: i64,
    ) -> Result<()> {
        self.processes.push((pid, device));
        for &(tid, name) in threads {
            self.threads.push((pid, tid, name));
        }
        let local = self.local(t);
        let text = self.writer.string("NCCL");
        self.writer.insert(
            "NVTX_EVENTS",
            "start, eventType, globalTid, textId, domainId",
            &[
                &local,
                &NVTX_DOMAIN_CREATE,
                &GlobalId::encode(pid, pid),
                &text,
                &NCCL_DOMAIN,
            ],
        )
    }

    /// A CUDA API call.
    pub fn api(
        &mut self,
        (start, end): (i64, i64),
        (pid, tid): (u32, u32),
        correlation: u32,
        name: &str,
        class: i64,
    ) -> Result<()> {
        let span = (self.local(start), self.local(end));
        self.writer
            .api_call(span, (pid, tid), correlation, name, class)
    }

    /// An OS runtime call; the first one of the export is preceded by the marker nsys writes
    /// when OS runtime tracing starts (event class 31, no duration).
    pub fn os_call(
        &mut self,
        (start, end): (i64, i64),
        (pid, tid): (u32, u32),
        name: &str,
    ) -> Result<()> {
        const CALL: i64 = 27;
        const STARTED: i64 = 31;
        let (start, end) = (self.local(start), self.local(end));
        if !self.os_runtime_started {
            self.os_runtime_started = true;
            let marker = self.writer.string("OS runtime libraries profiling started");
            self.os_row((start, start), STARTED, GlobalId::encode(pid, pid), marker)?;
        }
        let name = self.writer.string(name);
        self.os_row((start, end), CALL, GlobalId::encode(pid, tid), name)
    }

    fn os_row(&mut self, (start, end): (i64, i64), class: i64, tid: i64, name: i64) -> Result<()> {
        self.writer.insert(
            "OSRT_API",
            "start, end, eventClass, globalTid, nameId, returnValue, nestingLevel, callchainId, \
             argumentsId",
            &[&start, &end, &class, &tid, &name, &0, &0, &0, &0],
        )
    }

    /// One device-memory allocation (`release` false) or release of `bytes` at `address`.
    pub fn memory(
        &mut self,
        t: i64,
        (pid, device): (u32, u32),
        (address, bytes): (i64, i64),
        release: bool,
    ) -> Result<()> {
        const DEVICE: i64 = 2;
        let t = self.local(t);
        self.writer.insert(
            "CUDA_GPU_MEMORY_USAGE_EVENTS",
            "start, globalPid, deviceId, contextId, address, pc, bytes, memKind, \
             memoryOperationType",
            &[
                &t,
                &GlobalId::encode(pid, 0),
                &device,
                &1,
                &address,
                &0,
                &bytes,
                &DEVICE,
                &i64::from(release),
            ],
        )
    }

    /// One row of `TARGET_INFO_GPU_METRICS`: a metric of the GPU `type_id` names.
    pub fn gpu_metric_name(&mut self, type_id: i64, metric_id: u32, name: &str) -> Result<()> {
        self.writer.insert(
            "TARGET_INFO_GPU_METRICS",
            "typeId, sourceId, typeName, metricId, metricName",
            &[&type_id, &0, &"GPU Metrics", &metric_id, &name],
        )
    }

    /// One sample of `GPU_METRICS` at `t` (the raw timestamp is the same time).
    pub fn gpu_metric(&mut self, t: i64, type_id: i64, metric_id: u32, value: i64) -> Result<()> {
        let t = self.local(t);
        self.writer.insert(
            "GPU_METRICS",
            "rawTimestamp, timestamp, typeId, metricId, value",
            &[&t, &t, &type_id, &metric_id, &value],
        )
    }

    /// Inserts a row of a GPU activity table: the eight columns every such table opens with
    /// (`gpu_op_columns!`), then `extra` for the table's own columns.
    fn gpu_op(
        &mut self,
        table: &'static str,
        columns: &'static str,
        (start, end): (i64, i64),
        (pid, device, stream): (u32, u32, u32),
        correlation: u32,
        extra: &[&dyn ToSql],
    ) -> Result<()> {
        let (start, end) = (self.local(start), self.local(end));
        let global_pid = GlobalId::encode(pid, 0);
        let mut values: Vec<&dyn ToSql> = vec![
            &start,
            &end,
            &device,
            &CONTEXT,
            &GREEN_CONTEXT,
            &stream,
            &correlation,
            &global_pid,
        ];
        values.extend_from_slice(extra);
        self.writer.insert(table, columns, &values)
    }

    /// A kernel execution.
    pub fn kernel(
        &mut self,
        span: (i64, i64),
        place: (u32, u32, u32),
        correlation: u32,
        kind: &KernelKind,
    ) -> Result<()> {
        self.kernel_row(span, place, correlation, kind, None)
    }

    /// The family `kernels` must give `kind` as this node names it.
    pub fn family(&self, kind: &KernelKind) -> &'static str {
        self.spec.names.apply(kind).family
    }

    /// `kind` as this node names it.
    pub fn named(&self, kind: &'static KernelKind) -> &'static KernelKind {
        self.spec.names.apply(kind)
    }

    /// A kernel that ran as node `graph_node` of a CUDA graph (node-level graph trace).
    pub fn graph_kernel(
        &mut self,
        span: (i64, i64),
        place: (u32, u32, u32),
        correlation: u32,
        kind: &KernelKind,
        graph_node: u32,
    ) -> Result<()> {
        self.kernel_row(span, place, correlation, kind, Some(graph_node))
    }

    fn kernel_row(
        &mut self,
        span: (i64, i64),
        place: (u32, u32, u32),
        correlation: u32,
        kind: &KernelKind,
        graph_node: Option<u32>,
    ) -> Result<()> {
        self.streams.insert((place.0, place.2));
        let grid_id = {
            let next = self.grid_ids.entry(place.0).or_insert(0);
            *next += 1;
            *next
        };
        let kind = self.spec.names.apply(kind);
        let (variant, shape) = self.variant(kind, place.0, correlation);
        let named = |text: &str| match variant {
            0 => text.to_owned(),
            v => text.replacen(kind.short, &format!("{}_v{v}", kind.short), 1),
        };
        let short = self.writer.string(&named(kind.short));
        let demangled = self.writer.string(&named(kind.demangled));
        let mangled = kind.mangled.map(|m| self.writer.string(&named(m)));
        let [gx, gy, gz] = kind.grid;
        let [bx, by, bz] = kind.block;
        let (gx, bx) = (gx + shape, (bx >> (shape % 3)).max(32));
        let columns = gpu_op_columns!(
            "demangledName, shortName, mangledName, launchType, cacheConfig, registersPerThread, \
             gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, \
             dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId, \
             sharedMemoryExecuted, sharedMemoryLimitConfig, tensorSizeMinusOneElements"
        );
        let extra: [&dyn ToSql; 20] = [
            &demangled,
            &short,
            &mangled,
            &1,
            &1,
            &kind.registers,
            &gx,
            &gy,
            &gz,
            &bx,
            &by,
            &bz,
            &0,
            &kind.shared,
            &0,
            &0,
            &grid_id,
            &kind.shared.max(1024).next_power_of_two(),
            &i64::from(kind.shared > 49_152),
            &"[]",
        ];
        match graph_node {
            None => self.gpu_op(KERNEL, columns, span, place, correlation, &extra),
            Some(node) => {
                let columns = gpu_op_columns!(
                    "demangledName, shortName, mangledName, launchType, cacheConfig, \
                     registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, \
                     staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, \
                     localMemoryTotal, gridId, sharedMemoryExecuted, sharedMemoryLimitConfig, \
                     tensorSizeMinusOneElements, graphNodeId"
                );
                let mut with_node: Vec<&dyn ToSql> = extra.to_vec();
                with_node.push(&node);
                self.gpu_op(KERNEL, columns, span, place, correlation, &with_node)
            }
        }
    }

    /// Which variants of `kind`'s name and of its grid and block a launch gets
    /// (`--name-variety`), drawn apart by a hash of the launch: (0, 0) for communication and
    /// for one variant.
    fn variant(&self, kind: &KernelKind, pid: u32, correlation: u32) -> (u32, u32) {
        let variety = u64::from(self.spec.name_variety);
        if kind.nccl || kind.point_to_point || variety <= 1 {
            return (0, 0);
        }
        let mixed =
            (u64::from(pid) << 32 | u64::from(correlation)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let draw = |shift: u32| ((mixed >> shift) % variety) as u32;
        (draw(33), draw(13))
    }

    /// A CUDA graph launch traced as a whole (`CUPTI_ACTIVITY_KIND_GRAPH_TRACE`).
    pub fn graph_launch(
        &mut self,
        span: (i64, i64),
        place: (u32, u32, u32),
        correlation: u32,
        (graph, exec): (u32, u32),
    ) -> Result<()> {
        self.streams.insert((place.0, place.2));
        let extra: [&dyn ToSql; 2] = [&graph, &exec];
        self.gpu_op(
            GRAPH,
            gpu_op_columns!("graphId, graphExecId"),
            span,
            place,
            correlation,
            &extra,
        )
    }

    /// A host-to-device copy (pageable host memory to device).
    pub fn memcpy(
        &mut self,
        span: (i64, i64),
        place: (u32, u32, u32),
        correlation: u32,
        bytes: u64,
    ) -> Result<()> {
        self.streams.insert((place.0, place.2));
        let device = place.1;
        let columns = gpu_op_columns!(
            "bytes, copyKind, srcKind, dstKind, srcDeviceId, srcContextId, dstDeviceId, \
             dstContextId, virtualAddress, copyCount"
        );
        let extra: [&dyn ToSql; 10] = [
            &(bytes as i64),
            &1,
            &1,
            &2,
            &device,
            &CONTEXT,
            &device,
            &CONTEXT,
            &0,
            &1,
        ];
        self.gpu_op(MEMCPY, columns, span, place, correlation, &extra)
    }

    /// A memset of device memory.
    pub fn memset(
        &mut self,
        span: (i64, i64),
        place: (u32, u32, u32),
        correlation: u32,
        bytes: u64,
    ) -> Result<()> {
        self.streams.insert((place.0, place.2));
        let columns = gpu_op_columns!("value, bytes, memKind");
        let extra: [&dyn ToSql; 3] = [&0, &(bytes as i64), &2];
        self.gpu_op(MEMSET, columns, span, place, correlation, &extra)
    }

    /// A synchronization event (`sync_type`: 2 stream wait, 3 stream sync).
    pub fn sync(
        &mut self,
        span: (i64, i64),
        place: (u32, u32, u32),
        correlation: u32,
        sync_type: i64,
    ) -> Result<()> {
        let columns = gpu_op_columns!("syncType, eventId");
        let extra: [&dyn ToSql; 2] = [&sync_type, &(i64::from(correlation) % 64)];
        self.gpu_op(SYNC, columns, span, place, correlation, &extra)
    }

    /// A closed push/pop range of NCCL's domain, with its extended payload's JSON when given
    /// (the export then says `--include-json=true`).
    pub fn nccl_range(
        &mut self,
        span: (i64, i64),
        who: (u32, u32),
        text: NvtxText,
        payload: Option<&str>,
    ) -> Result<()> {
        let Some(json) = payload else {
            return self.nvtx_range(span, who, text, NCCL_DOMAIN);
        };
        self.json_included = true;
        let NvtxText::Registered(name) = text else {
            anyhow::bail!("NCCL registers its range names");
        };
        let (start, end) = (self.local(span.0), self.local(span.1));
        let id = self.writer.string(name);
        self.writer.insert(
            "NVTX_EVENTS",
            "start, end, eventType, globalTid, textId, domainId, jsonText",
            &[
                &start,
                &end,
                &NVTX_PUSH_POP,
                &GlobalId::encode(who.0, who.1),
                &id,
                &NCCL_DOMAIN,
                &json,
            ],
        )
    }

    /// A closed push/pop range in `domain` (0 default, [`NCCL_DOMAIN`]).
    pub fn nvtx_range(
        &mut self,
        (start, end): (i64, i64),
        (pid, tid): (u32, u32),
        text: NvtxText,
        domain: i64,
    ) -> Result<()> {
        let (start, end) = (self.local(start), self.local(end));
        let gtid = GlobalId::encode(pid, tid);
        match text {
            NvtxText::Inline(text) => {
                self.writer
                    .nvtx_range((start, end), (pid, tid), text, domain)
            }
            NvtxText::Registered(text) => {
                let id = self.writer.string(text);
                self.writer.insert(
                    "NVTX_EVENTS",
                    "start, end, eventType, globalTid, textId, domainId",
                    &[&start, &end, &NVTX_PUSH_POP, &gtid, &id, &domain],
                )
            }
        }
    }

    /// `MPI_RANKS`: the process's MPI rank, on its main thread.
    pub fn mpi_rank(&mut self, pid: u32, rank: usize) -> Result<()> {
        let rank = rank as i64;
        self.writer.insert(
            "MPI_RANKS",
            "globalTid, rank",
            &[&GlobalId::encode(pid, pid), &rank],
        )
    }

    /// A send or receive on `MPI_COMM_WORLD` (`MPI_P2P_EVENTS`).
    pub fn mpi_p2p(
        &mut self,
        span: (i64, i64),
        who: (u32, u32),
        name: &str,
        (peer, tag, size, request): P2pFields,
    ) -> Result<()> {
        let (start, end, gtid, text) = self.mpi_head(span, who, name);
        let (handle, uid) = COMM_WORLD;
        self.writer.insert(
            "MPI_P2P_EVENTS",
            "start, end, globalTid, textId, commHandle, commUid, tag, remoteRank, size, \
             requestHandle",
            &[
                &start, &end, &gtid, &text, &handle, &uid, &tag, &peer, &size, &request,
            ],
        )
    }

    /// A rootless collective on `MPI_COMM_WORLD` sending and receiving `bytes`
    /// (`MPI_COLLECTIVES_EVENTS`).
    pub fn mpi_collective(
        &mut self,
        span: (i64, i64),
        who: (u32, u32),
        name: &str,
        bytes: i64,
    ) -> Result<()> {
        let (start, end, gtid, text) = self.mpi_head(span, who, name);
        let (handle, uid) = COMM_WORLD;
        self.writer.insert(
            "MPI_COLLECTIVES_EVENTS",
            "start, end, globalTid, textId, commHandle, commUid, size, recvSize",
            &[&start, &end, &gtid, &text, &handle, &uid, &bytes, &bytes],
        )
    }

    /// A wait on `requests` (`MPI_START_WAIT_EVENTS`: one row per request, as nsys writes).
    pub fn mpi_wait(
        &mut self,
        span: (i64, i64),
        who: (u32, u32),
        name: &str,
        requests: &[i64],
    ) -> Result<()> {
        let (start, end, gtid, text) = self.mpi_head(span, who, name);
        for request in requests {
            self.writer.insert(
                "MPI_START_WAIT_EVENTS",
                "start, end, globalTid, textId, requestHandle",
                &[&start, &end, &gtid, &text, request],
            )?;
        }
        Ok(())
    }

    /// Any other MPI call (`MPI_OTHER_EVENTS`).
    pub fn mpi_other(&mut self, span: (i64, i64), who: (u32, u32), name: &str) -> Result<()> {
        let (start, end, gtid, text) = self.mpi_head(span, who, name);
        self.writer.insert(
            "MPI_OTHER_EVENTS",
            "start, end, globalTid, textId",
            &[&start, &end, &gtid, &text],
        )
    }

    /// (start, end, globalTid, textId) of an MPI row.
    fn mpi_head(
        &mut self,
        (start, end): (i64, i64),
        (pid, tid): (u32, u32),
        name: &str,
    ) -> (i64, i64, i64, i64) {
        let (start, end) = (self.local(start), self.local(end));
        (
            start,
            end,
            GlobalId::encode(pid, tid),
            self.writer.string(name),
        )
    }

    /// An MPI call as nsys 2022.x records it: a push/pop range in the NVTX domain `MPI`
    /// (created, with the thread's name `MPI Rank N`, before the process's first call).
    pub fn mpi_nvtx(
        &mut self,
        span: (i64, i64),
        (pid, tid): (u32, u32),
        name: &str,
        rank: usize,
    ) -> Result<()> {
        if self.mpi_domains.insert(pid) {
            let local = self.local(span.0);
            let gtid = GlobalId::encode(pid, pid);
            let domain = self.writer.string("MPI");
            self.writer.insert(
                "NVTX_EVENTS",
                "start, eventType, globalTid, textId, domainId",
                &[&local, &NVTX_DOMAIN_CREATE, &gtid, &domain, &MPI_DOMAIN],
            )?;
            let thread = format!("MPI Rank {rank}");
            self.writer.insert(
                "NVTX_EVENTS",
                "start, eventType, text, globalTid, domainId",
                &[&local, &NVTX_THREAD_NAME, &thread, &gtid, &0],
            )?;
        }
        self.nvtx_range(span, (pid, tid), NvtxText::Registered(name), MPI_DOMAIN)
    }

    /// An OpenACC event of device `device` (`acc_device_nvidia`), from the directive at
    /// `train.c:<line>` in function `main_loop`: `object` is a data event's variable (with its
    /// `bytes`) or a launch's kernel.
    pub fn openacc(&mut self, span: (i64, i64), who: (u32, u32), event: &AccRow) -> Result<()> {
        const NVIDIA: i64 = 4;
        let (start, end, gtid, name) = self.mpi_head(span, who, event.name);
        let file = self.writer.string("train.c");
        let function = self.writer.string("main_loop");
        let object = event.object.map(|o| self.writer.string(o));
        let head: [&dyn ToSql; 12] = [
            &start,
            &end,
            &name,
            &gtid,
            &event.kind,
            &NVIDIA,
            &event.line,
            &event.device,
            &CONTEXT,
            &DEFAULT_STREAM,
            &file,
            &function,
        ];
        let mut values = head.to_vec();
        let (table, columns) = match event.table {
            AccTable::Data => {
                values.extend([&event.bytes as &dyn ToSql, &object]);
                (ACC_DATA, acc_columns!(", bytes, varName"))
            }
            AccTable::Launch => {
                values.push(&object);
                (ACC_LAUNCH, acc_columns!(", kernelName"))
            }
            AccTable::Other => (ACC_OTHER, acc_columns!("")),
        };
        self.writer.insert(table, columns, &values)
    }

    /// Writes the metadata tables and completes the file.
    pub fn finish(mut self) -> Result<PathBuf> {
        self.write_export_meta()?;
        self.write_target_info()?;
        self.write_processes()?;
        self.writer.finish()
    }

    fn key_values(&mut self, table: &'static str, rows: &[(&str, String)]) -> Result<()> {
        for (name, value) in rows {
            self.writer.insert(table, "name, value", &[name, value])?;
        }
        Ok(())
    }

    fn write_export_meta(&mut self) -> Result<()> {
        let (major, minor, micro) = SCHEMA_VERSION;
        let now = utc_iso(self.spec.session_start_utc + self.last_time)[..19].to_string();
        let s = |v: &str| v.to_string();
        let export = [
            ("EXPORT_PRODUCT_NAME", s("NVIDIA Nsight Systems")),
            ("EXPORT_PRODUCT_VERSION", s(PRODUCT_VERSION)),
            ("EXPORT_PRODUCT_DATE", s("2026.2")),
            ("EXPORT_SCHEMA_VERSION", format!("{major}.{minor}.{micro}")),
            ("EXPORT_SCHEMA_VERSION_MAJOR", major.to_string()),
            ("EXPORT_SCHEMA_VERSION_MINOR", minor.to_string()),
            ("EXPORT_SCHEMA_VERSION_MICRO", micro.to_string()),
            ("EXPORT_PLATFORM", s("linux-desktop")),
            ("EXPORT_ARCH", s("x64")),
            ("EXPORT_TIME_UTC", now.clone()),
            ("EXPORT_TIME_LOCAL", format!("{now} +0000 UTC")),
            ("EXPORT_HOST", self.spec.hostname.clone()),
            ("EXPORT_USER", s("nsys-lens-synth")),
            ("EXPORT_PARAM_EXPORT_TYPE", s("SQLite")),
            ("EXPORT_PARAM_LAZY", s("true")),
            ("EXPORT_PARAM_USE_SHUFFLE", s("false")),
            ("EXPORT_PARAM_INCLUDE_JSON", self.json_included.to_string()),
            ("EXPORT_PARAM_INCLUDE_BLOBS", s("false")),
            ("EXPORT_PARAM_TIME_NORMALIZE", s("false")),
            ("EXPORT_PARAM_TIME_SHIFT", s("0")),
            ("EXPORT_CONFIG_TIME_SHIFT", s("0")),
        ];
        self.key_values("META_DATA_EXPORT", &export)?;
        let capture = [
            ("DEVICE_ID", s("Local (CLI)")),
            ("DEVICE_DISPLAY_NAME", self.spec.hostname.clone()),
            ("START_TRIGGER", s("CudaProfilerApi")),
            ("PROCESS_0:COMMAND", self.command.clone()),
            ("PROCESS_0:COLLECT_NVTX_TRACE", s("true")),
            ("CUDA_TRACE_SCOPE", s("ProcessTree")),
            ("CUDA_GRAPH_TRACE_OPTIONS:MODE", s("Node")),
        ];
        self.key_values("META_DATA_CAPTURE", &capture)
    }

    fn write_target_info(&mut self) -> Result<()> {
        let utc = self.spec.session_start_utc;
        let iso = utc_iso(utc)[..19].to_string();
        let raw_clock = 4_000_000_000_000 + utc % 1_000_000_000_000;
        self.writer.insert(
            "TARGET_INFO_SESSION_START_TIME",
            "utcEpochNs, utcTime, localTime, systemClockNs",
            &[&utc, &iso, &iso, &raw_clock],
        )?;
        // `Hostname` is nameEnum 619 in every version (nsys-sqlite.md §8.14).
        self.writer.insert(
            "TARGET_INFO_SYSTEM_ENV",
            "globalVid, devStateName, name, nameEnum, value",
            &[
                &VM_ID,
                &"Local (CLI)",
                &"Hostname",
                &619,
                &self.spec.hostname,
            ],
        )?;
        self.writer.insert(
            "ANALYSIS_DETAILS",
            "globalVid, duration, startTime, stopTime",
            &[
                &VM_ID,
                &self.last_time,
                &raw_clock,
                &(raw_clock + self.last_time),
            ],
        )?;
        for gpu in 0..self.spec.gpus {
            let bus = format!("0000:{:02x}:00.0", 0x18 + gpu * 0x10);
            let uuid = format!("GPU-5e1f{gpu:04x}-0a2b-3c4d-5e6f-{:012x}", 0xabcdef + gpu);
            self.writer.insert(
                "TARGET_INFO_GPU",
                "vmId, id, name, busLocation, isDiscrete, l2CacheSize, totalMemory, \
                 memoryBandwidth, clockRate, smCount, uuid, chipName, cuDevice, \
                 threadsPerWarp, computeMajor, computeMinor, smMajor, smMinor",
                &[
                    &VM_ID,
                    &gpu,
                    &self.spec.gpu_name,
                    &bus,
                    &1,
                    &52_428_800,
                    &85_520_809_984_i64,
                    &3_352_320_000_000_i64,
                    &1_980_000_000,
                    &132,
                    &uuid,
                    &"GH100",
                    &gpu,
                    &32,
                    &9,
                    &0,
                    &9,
                    &0,
                ],
            )?;
        }
        let processes = self.processes.clone();
        for (pid, device) in processes {
            self.writer.insert(
                "TARGET_INFO_CUDA_DEVICE",
                "gpuId, cudaId, pid, numMultiprocessors",
                &[&device, &device, &pid, &132],
            )?;
            self.writer.insert(
                "TARGET_INFO_CUDA_CONTEXT_INFO",
                "nullStreamId, hwId, vmId, processId, deviceId, contextId, isGreenContext, \
                 numMultiprocessors",
                &[&DEFAULT_STREAM, &0, &1, &pid, &device, &1, &0, &132],
            )?;
        }
        let mut streams: Vec<_> = self.streams.iter().copied().collect();
        streams.sort_unstable();
        for (pid, stream) in streams.into_iter().filter(|s| s.1 != DEFAULT_STREAM) {
            // NCCL creates its streams with the highest priority (-5, stored unsigned).
            self.writer.insert(
                "TARGET_INFO_CUDA_STREAM",
                "streamId, hwId, vmId, processId, contextId, priority, flag",
                &[&stream, &0, &1, &pid, &1, &(-5i32 as u32), &2],
            )?;
        }
        Ok(())
    }

    fn write_processes(&mut self) -> Result<()> {
        for &(pid, _) in &self.processes {
            self.writer.process(pid, "python3")?;
        }
        for &(pid, tid, name) in &self.threads {
            self.writer.thread_name((pid, tid), name)?;
        }
        Ok(())
    }
}
