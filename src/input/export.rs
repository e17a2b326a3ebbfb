//! An nsys-schema export written from another profiler's trace.
//!
//! Events keep the trace's own clock (ns), written as they arrive; [`TraceExport::finish`] names
//! the first event's time ([`TIME_ORIGIN`]: the reader counts the report's times from it, so
//! that no row is rewritten), fills in what only the whole trace knows (the process that owns
//! the GPU work, the session start in UTC), and writes the metadata tables the reader needs:
//! session start, host, GPUs, processes, thread names, the rank, and two rows of
//! `META_DATA_EXPORT` naming the trace the export was translated from.

use super::Format;
use crate::hash::{FxHashMap, FxHashSet};
use crate::nsys::GlobalId;
use crate::nsys::write::{ExportWriter, NVTX_PUSH_POP, SCHEMA_VERSION};
use anyhow::Result;
use indexmap::IndexSet;
use rusqlite::ToSql;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `META_DATA_EXPORT` row naming the format an export was translated from.
pub const SOURCE_FORMAT: &str = "NSYS_LENS_SOURCE_FORMAT";
/// `META_DATA_EXPORT` row naming the file an export was translated from.
pub const SOURCE_PATH: &str = "NSYS_LENS_SOURCE_PATH";
/// `META_DATA_EXPORT` row naming the raw time a translation's events count from (its first
/// event's): the reader subtracts it from every time. `TARGET_INFO_SESSION_START_TIME` gives the
/// UTC time of the raw time 0, so that the file reads as nsys's own exports do elsewhere.
pub const TIME_ORIGIN: &str = "NSYS_LENS_TIME_ORIGIN";
/// `META_DATA_EXPORT` row counting the trace's events of kinds not translated
/// (`kind=count`, one per line).
pub const UNTRANSLATED: &str = "NSYS_LENS_UNTRANSLATED";
/// `META_DATA_EXPORT` row holding the number of ranks of the run the trace is one of (empty
/// when it does not say).
pub const WORLD_SIZE: &str = "NSYS_LENS_WORLD_SIZE";

/// Times above this are UTC epoch ns (after 1973), not times since a start.
const EPOCH_NS: i64 = 100_000_000_000_000_000;

use crate::nsys::tables::{KERNEL, MEMCPY, MEMSET, NVTX, SYNC};

/// The session start of a trace whose times count from `base` (Kineto's
/// `baseTimeNanoseconds`, UTC ns) and whose first event is at `first`: an error naming the
/// field when it leaves the merged clock's range (1970 to 2043), never a wrapped time.
fn session_start(base: i64, first: i64) -> Result<i64> {
    let limit = crate::nsys::TIME_LIMIT;
    let start = base.checked_add(first).filter(|s| (0..limit).contains(s));
    start.ok_or_else(|| {
        anyhow::anyhow!(
            "baseTimeNanoseconds = {base} (with the first event at {first} ns) is out of range \
             (UTC ns between 1970 and 2043); the trace is corrupt"
        )
    })
}

/// Tables of GPU work, whose owning process is known only at the end.
const GPU_TABLES: [&str; 4] = [KERNEL, MEMCPY, MEMSET, SYNC];

/// `VM id 1` as serialised in `vmId` columns.
const VM_ID: i64 = 1 << 48;

/// NVTX domain creation.
const NVTX_DOMAIN_CREATE: i64 = 75;
/// The id of NCCL's NVTX domain in a translated export.
const NCCL_DOMAIN: i64 = 1;

/// The columns every GPU activity table opens with, followed by a table's own.
macro_rules! gpu_columns {
    ($rest:literal) => {
        concat!(
            "start, end, deviceId, contextId, streamId, correlationId, globalPid, ",
            $rest
        )
    };
}

/// Where a GPU operation ran, and the API call that launched it.
#[derive(Debug, Clone, Copy, Default)]
pub struct GpuPlace {
    /// CUDA device ordinal.
    pub device: u32,
    /// CUDA context id.
    pub context: u32,
    /// CUDA stream id.
    pub stream: u32,
    /// Correlation id of the launching API call.
    pub correlation: u32,
}

/// A kernel's launch configuration.
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelShape {
    /// Grid dimensions.
    pub grid: [i64; 3],
    /// Block dimensions.
    pub block: [i64; 3],
    /// Registers per thread.
    pub registers: i64,
    /// Shared memory per block, bytes.
    pub shared: i64,
}

/// A memory copy's direction: CUPTI's copy kind and source and destination memory kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyKind {
    /// `CUpti_ActivityMemcpyKind`.
    pub kind: i64,
    /// `CUpti_ActivityMemoryKind` of the source.
    pub src: i64,
    /// `CUpti_ActivityMemoryKind` of the destination.
    pub dst: i64,
}

/// What the whole trace says about itself, known once it is read.
#[derive(Debug, Clone, Default)]
pub struct TraceFacts {
    /// The host the trace stands for.
    pub hostname: String,
    /// The UTC epoch ns the trace's times count from (`baseTimeNanoseconds`), when it says.
    pub base_ns: Option<i64>,
    /// The rank of the traced process (`distributedInfo.rank`).
    pub rank: Option<u32>,
    /// The ranks of the run it is one of (`distributedInfo.world_size`).
    pub world_size: Option<u32>,
    /// Events of kinds not translated, by kind.
    pub skipped: BTreeMap<String, u64>,
}

/// A translated export being written.
pub struct TraceExport {
    writer: ExportWriter,
    first: Option<i64>,
    /// CPU processes, in order of first event.
    processes: IndexSet<u32>,
    /// Process names the trace gives (its GPU pseudo-processes' too, which have no events).
    process_names: FxHashMap<u32, String>,
    /// Named CPU threads.
    thread_names: BTreeMap<(u32, u32), String>,
    /// GPUs named by the trace.
    gpus: BTreeMap<u32, String>,
    /// API calls per process: the process with most owns the GPU work.
    calls: FxHashMap<u32, u64>,
    /// The process with most API calls so far, and how many.
    busiest: Option<(u64, u32)>,
    /// The owners GPU rows were written with.
    owners: FxHashSet<u32>,
    /// Each kernel name's short name, by string id.
    short_names: FxHashMap<i64, i64>,
    /// Kernels so far (each one's `gridId`).
    grids: i64,
    /// Whether NCCL's NVTX domain was created.
    nccl_domain: bool,
}

impl TraceExport {
    /// Starts an export that [`TraceExport::finish`] renames to `path`.
    pub fn create(path: &Path) -> Result<TraceExport> {
        Ok(TraceExport {
            writer: ExportWriter::create(path)?,
            first: None,
            processes: IndexSet::new(),
            process_names: FxHashMap::default(),
            thread_names: BTreeMap::new(),
            gpus: BTreeMap::new(),
            calls: FxHashMap::default(),
            busiest: None,
            owners: FxHashSet::default(),
            short_names: FxHashMap::default(),
            grids: 0,
            nccl_domain: false,
        })
    }

    fn saw(&mut self, start: i64) {
        self.first = Some(self.first.map_or(start, |f| f.min(start)));
    }

    fn cpu(&mut self, pid: u32) {
        self.processes.insert(pid);
    }

    /// A GPU operation's row: the columns of [`gpu_columns!`], then `extra`.
    fn gpu_row(
        &mut self,
        table: &'static str,
        columns: &'static str,
        (start, end): (i64, i64),
        place: GpuPlace,
        extra: &[&dyn ToSql],
    ) -> Result<()> {
        self.saw(start);
        let main = self.main_pid();
        self.owners.insert(main);
        let owner = GlobalId::encode(main, 0);
        let common: [&dyn ToSql; 7] = [
            &start,
            &end,
            &place.device,
            &place.context,
            &place.stream,
            &place.correlation,
            &owner,
        ];
        let mut values: [&dyn ToSql; 24] = [&rusqlite::types::Null; 24];
        let n = common.len() + extra.len();
        values[..common.len()].copy_from_slice(&common);
        values[common.len()..n].copy_from_slice(extra);
        self.writer.insert(table, columns, &values[..n])
    }

    /// A kernel named `name` (its demangled name; the short name is derived).
    pub fn kernel(
        &mut self,
        span: (i64, i64),
        place: GpuPlace,
        name: &str,
        shape: &KernelShape,
    ) -> Result<()> {
        let demangled = self.writer.string(name);
        let short = match self.short_names.get(&demangled) {
            Some(&short) => short,
            None => {
                let short = self.writer.string(short_name(name));
                *self.short_names.entry(demangled).or_insert(short)
            }
        };
        let [gx, gy, gz] = shape.grid;
        let [bx, by, bz] = shape.block;
        let columns = gpu_columns!(
            "demangledName, shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, \
             blockZ, staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, \
             localMemoryTotal, gridId, tensorSizeMinusOneElements"
        );
        self.grids += 1;
        let grid_id = self.grids;
        let extra: [&dyn ToSql; 15] = [
            &demangled,
            &short,
            &shape.registers,
            &gx,
            &gy,
            &gz,
            &bx,
            &by,
            &bz,
            &0,
            &shape.shared,
            &0,
            &0,
            &grid_id,
            &"[]",
        ];
        self.gpu_row(KERNEL, columns, span, place, &extra)
    }

    /// A memory copy of `bytes`.
    pub fn memcpy(
        &mut self,
        span: (i64, i64),
        place: GpuPlace,
        bytes: i64,
        copy: CopyKind,
    ) -> Result<()> {
        let columns = gpu_columns!("bytes, copyKind, srcKind, dstKind");
        let extra: [&dyn ToSql; 4] = [&bytes, &copy.kind, &copy.src, &copy.dst];
        self.gpu_row(MEMCPY, columns, span, place, &extra)
    }

    /// A memory set of `bytes` of device memory.
    pub fn memset(&mut self, span: (i64, i64), place: GpuPlace, bytes: i64) -> Result<()> {
        const DEVICE: i64 = 3;
        let columns = gpu_columns!("value, bytes, memKind");
        let extra: [&dyn ToSql; 3] = [&0, &bytes, &DEVICE];
        self.gpu_row(MEMSET, columns, span, place, &extra)
    }

    /// A synchronization (`CUpti_ActivitySynchronizationType`).
    pub fn sync(&mut self, span: (i64, i64), place: GpuPlace, sync_type: i64) -> Result<()> {
        let extra: [&dyn ToSql; 2] = [&sync_type, &0];
        self.gpu_row(SYNC, gpu_columns!("syncType, eventId"), span, place, &extra)
    }

    /// A CUDA runtime (or, with `driver`, driver) API call of thread `(pid, tid)`.
    pub fn api_call(
        &mut self,
        (start, end): (i64, i64),
        (pid, tid): (u32, u32),
        correlation: u32,
        name: &str,
        driver: bool,
    ) -> Result<()> {
        self.saw(start);
        self.cpu(pid);
        let calls = self.calls.entry(pid).or_default();
        *calls += 1;
        let rank = |(n, pid): (u64, u32)| (n, std::cmp::Reverse(pid));
        if self.busiest.is_none_or(|b| rank((*calls, pid)) > rank(b)) {
            self.busiest = Some((*calls, pid));
        }
        let class = i64::from(driver);
        self.writer
            .api_call((start, end), (pid, tid), correlation, name, class)
    }

    /// A closed range of thread `(pid, tid)`, in NVTX's default domain (where PyTorch's
    /// `emit_nvtx` puts its operators under nsys).
    pub fn range(
        &mut self,
        (start, end): (i64, i64),
        (pid, tid): (u32, u32),
        text: &str,
    ) -> Result<()> {
        self.saw(start);
        self.cpu(pid);
        self.writer.nvtx_range((start, end), (pid, tid), text, 0)
    }

    /// A closed range of thread `(pid, tid)` in NVTX's default domain whose payload is `json`
    /// (what an operator's record says of its inputs: torch.profiler's `Input type`).
    pub fn range_with_payload(
        &mut self,
        span: (i64, i64),
        thread: (u32, u32),
        text: &str,
        json: &str,
    ) -> Result<()> {
        self.payload_range(span, thread, (text, 0), json)
    }

    /// A range of thread `(pid, tid)` in NCCL's NVTX domain whose extended payload is `json`
    /// (what NCCL 2.23 and later record, and what a framework says of its collective): its
    /// fields reach the NCCL kernel launched inside it. Its text is not an NCCL API name, so it
    /// is never taken for NCCL's own call.
    pub fn nccl_payload_range(
        &mut self,
        (start, end): (i64, i64),
        (pid, tid): (u32, u32),
        text: &str,
        json: &str,
    ) -> Result<()> {
        if !self.nccl_domain {
            self.nccl_domain = true;
            let name = self.writer.string("NCCL");
            let thread = GlobalId::encode(pid, tid);
            self.writer.insert(
                NVTX,
                "start, eventType, globalTid, textId, domainId",
                &[&start, &NVTX_DOMAIN_CREATE, &thread, &name, &NCCL_DOMAIN],
            )?;
        }
        self.payload_range((start, end), (pid, tid), (text, NCCL_DOMAIN), json)
    }

    /// A closed push/pop range of `(text, domain)` whose payload is `json`.
    fn payload_range(
        &mut self,
        (start, end): (i64, i64),
        (pid, tid): (u32, u32),
        (text, domain): (&str, i64),
        json: &str,
    ) -> Result<()> {
        self.saw(start);
        self.cpu(pid);
        let thread = GlobalId::encode(pid, tid);
        self.writer.insert(
            NVTX,
            "start, end, eventType, text, globalTid, domainId, jsonText",
            &[&start, &end, &NVTX_PUSH_POP, &text, &thread, &domain, &json],
        )
    }

    /// Names a process (written when it has events).
    pub fn process_name(&mut self, pid: u32, name: &str) {
        self.process_names.insert(pid, name.to_string());
    }

    /// Names a thread.
    pub fn thread_name(&mut self, (pid, tid): (u32, u32), name: &str) {
        self.thread_names.insert((pid, tid), name.to_string());
    }

    /// Names a GPU (by CUDA ordinal).
    pub fn gpu(&mut self, device: u32, name: &str) {
        self.gpus.insert(device, name.to_string());
    }

    /// The process with the most API calls (else the first with events; on a tie the lowest
    /// pid) so far: the owner of the GPU work, which traces record on per-device
    /// pseudo-processes. Rows written before the end may name another, corrected by
    /// [`TraceExport::finish`].
    fn main_pid(&self) -> u32 {
        let busiest = self.busiest.map(|(_, pid)| pid);
        busiest
            .or_else(|| self.processes.first().copied())
            .unwrap_or(0)
    }

    /// Completes the export, translated from `source` (a file of `format`).
    pub fn finish(mut self, source: &Path, format: Format, facts: &TraceFacts) -> Result<PathBuf> {
        let Some(first) = self.first else {
            let skipped: u64 = facts.skipped.values().sum();
            anyhow::bail!(
                "it holds no event nsys-lens reads ({skipped} event(s) of kinds it does not \
                 translate): was the profiler running around the steps it should record?"
            );
        };
        let main = self.main_pid();
        let owner = GlobalId::encode(main, 0);
        let rewrite = self.owners.iter().any(|&o| o != main);
        let tables: Vec<&str> = (GPU_TABLES.into_iter())
            .filter(|t| rewrite && self.writer.has_table(t))
            .collect();
        for table in tables {
            let sql = format!("UPDATE {table} SET globalPid = ?1 WHERE globalPid IS NOT ?1");
            self.writer.execute(&sql, &[&owner])?;
        }
        // The UTC time of the raw time 0: `baseTimeNanoseconds`, or the epoch for epoch times.
        let utc = match facts.base_ns {
            Some(base) => Some(session_start(base, first).map(|_| base)?),
            None => (first > EPOCH_NS).then_some(0),
        };
        if let Some(utc) = utc {
            let iso = crate::time::utc_iso(utc)[..19].to_string();
            self.writer.insert(
                "TARGET_INFO_SESSION_START_TIME",
                "utcEpochNs, utcTime, localTime",
                &[&utc, &iso, &iso],
            )?;
        }
        self.write_entities(main, facts)?;
        let product = format!("nsys-lens translation of a {}", format.describe());
        let export = [
            ("EXPORT_PRODUCT_NAME", product),
            ("EXPORT_SCHEMA_VERSION", schema_version()),
            ("EXPORT_PARAM_TIME_NORMALIZE", "false".to_string()),
            (SOURCE_FORMAT, format.id().to_string()),
            (SOURCE_PATH, source.display().to_string()),
            (TIME_ORIGIN, first.to_string()),
            (UNTRANSLATED, untranslated(&facts.skipped)),
            (
                WORLD_SIZE,
                facts.world_size.map_or_else(String::new, |n| n.to_string()),
            ),
        ];
        for (name, value) in &export {
            self.writer
                .insert("META_DATA_EXPORT", "name, value", &[name, value])?;
        }
        self.writer.finish()
    }

    /// The host, its GPUs, the processes, thread names and the rank.
    fn write_entities(&mut self, main: u32, facts: &TraceFacts) -> Result<()> {
        // `Hostname` is nameEnum 619 in every version (nsys-sqlite.md §8.14).
        self.writer.insert(
            "TARGET_INFO_SYSTEM_ENV",
            "devStateName, name, nameEnum, value",
            &[&"", &"Hostname", &619, &facts.hostname],
        )?;
        for (id, name) in std::mem::take(&mut self.gpus) {
            self.writer.insert(
                "TARGET_INFO_GPU",
                "vmId, id, name, cuDevice",
                &[&VM_ID, &id, &name, &id],
            )?;
        }
        for pid in std::mem::take(&mut self.processes) {
            let name = self.process_names.get(&pid).map_or("", String::as_str);
            self.writer.process(pid, name)?;
        }
        for (thread, name) in std::mem::take(&mut self.thread_names) {
            self.writer.thread_name(thread, &name)?;
        }
        if let Some(rank) = facts.rank {
            self.writer.insert(
                "MPI_RANKS",
                "globalTid, rank",
                &[&GlobalId::encode(main, main), &rank],
            )?;
        }
        Ok(())
    }
}

/// `kind=count` lines.
fn untranslated(skipped: &BTreeMap<String, u64>) -> String {
    let lines: Vec<String> = skipped.iter().map(|(k, n)| format!("{k}={n}")).collect();
    lines.join("\n")
}

/// The counts [`UNTRANSLATED`] holds, by kind.
pub fn parse_untranslated(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|line| {
            let (kind, n) = line.rsplit_once('=')?;
            Some((kind.to_string(), n.parse().ok()?))
        })
        .collect()
}

fn schema_version() -> String {
    let (major, minor, micro) = SCHEMA_VERSION;
    format!("{major}.{minor}.{micro}")
}

/// A kernel's short name, as nsys's `shortName` gives it: the demangled name without its
/// return type, scope, template arguments and parameters (`void at::native::foo<float>(int)`
/// is `foo`).
pub fn short_name(demangled: &str) -> &str {
    let mut depth = 0i32;
    let mut end = demangled.len();
    for (i, c) in demangled.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            // A scope, not the parameters: `at::native::(anonymous namespace)::f(...)`.
            '(' if demangled[i..].starts_with(ANONYMOUS) => {}
            '(' if depth == 0 && i > 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let mut name = demangled[..end].trim_end();
    if name.ends_with('>')
        && let Some(open) = matching_open(name)
    {
        name = &name[..open];
    }
    let start = top_level_start(name);
    let short = &name[start..];
    if short.is_empty() { demangled } else { short }
}

/// The index of the `<` that opens the template arguments `name` ends with.
fn matching_open(name: &str) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in name.char_indices().rev() {
        match c {
            '>' => depth += 1,
            '<' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The scope GCC's demangler writes for an unnamed namespace.
const ANONYMOUS: &str = "(anonymous namespace)";

/// Where the last scope (`::`) or word (after the return type) of `name` starts, outside
/// template arguments and parentheses.
fn top_level_start(name: &str) -> usize {
    let bytes = name.as_bytes();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'<' | b'(' => depth += 1,
            b'>' | b')' => depth -= 1,
            b' ' if depth == 0 => start = i + 1,
            b':' if depth == 0 && bytes.get(i + 1) == Some(&b':') => start = i + 2,
            _ => {}
        }
    }
    start.min(name.len())
}

#[cfg(test)]
mod tests {
    use super::short_name;

    #[test]
    fn short_names_drop_return_type_scope_templates_and_parameters() {
        let cases = [
            (
                "void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*)",
                "permute_2D_lengths_kernel",
            ),
            (
                "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
                "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t",
            ),
            (
                "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous \
                 namespace)::foo<float>, at::detail::Array<char*, 2> >(int, float)",
                "vectorized_elementwise_kernel",
            ),
            ("volta_sgemm_128x64_nn", "volta_sgemm_128x64_nn"),
            // HolisticTraceAnalysis' hta_sampled_rank-0.json.gz: an unnamed namespace in the scope.
            (
                "void at::native::(anonymous namespace)::CatArrayBatchedCopy<int, unsigned int, 1, \
                 128, 1>(int*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<int, \
                 unsigned int, 128, 1>, int, unsigned int)",
                "CatArrayBatchedCopy",
            ),
            (
                "void (anonymous namespace)::elementwise_kernel_with_index<int, float>(int, float)",
                "elementwise_kernel_with_index",
            ),
            (
                "sm90_xmma_gemm_bf16bf16_bf16f32",
                "sm90_xmma_gemm_bf16bf16_bf16f32",
            ),
        ];
        for (name, short) in cases {
            assert_eq!(short_name(name), short, "{name}");
        }
    }
}
