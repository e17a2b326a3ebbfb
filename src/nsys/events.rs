//! Streaming readers for the CUDA activity tables: kernels, memcpy, memset, synchronization and
//! runtime/driver API calls (nsys-sqlite.md §8.1 to §8.5).
//!
//! Each reader runs one `SELECT`, converts every row into a small `Copy` record (names as
//! [`StringId`]s, times on the merged clock) and hands it to a sink: nothing per row is allocated.

use super::chunks::{Chunking, Rows, infallible, read_table};
use super::error::{Error, Result};
use super::ids::GlobalId;
use super::report::Report;
use super::schema::{Column, Fields, opt, req};
use super::strings::{Deferred, Names, StringRef, StringResolver};
use crate::model::{MEMORY_KIND_UNKNOWN, Ns, StringId};
use crate::model::{Warning, Warnings};

/// How a report's times map onto the merged clock: `t -> t + offset`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clock {
    /// Added to every time of the report.
    pub offset: i64,
}

/// The largest time (in absolute value) on the merged clock: 2^61 ns, about 73 years, so that
/// the difference of any two times fits in 64 bits (UTC epoch times of ts-normalized exports,
/// about 1.8e18 in 2027, stay below it until 2043).
pub const TIME_LIMIT: i64 = 1 << 61;

impl Clock {
    /// Maps one time of row `f` onto the merged clock; times beyond ±[`TIME_LIMIT`] are refused.
    pub(crate) fn map(self, time: i64, f: &Fields) -> Result<Ns> {
        let (path, table) = f.location();
        time.checked_add(self.offset)
            .filter(|t| (-TIME_LIMIT..=TIME_LIMIT).contains(t))
            .map(Ns)
            .ok_or_else(|| Error::TimeOverflow {
                path: path.to_path_buf(),
                table,
                row: f.rowid,
                time,
                offset: self.offset,
            })
    }

    /// Reads `start, end` (the next two columns), checks `end >= start` and maps both.
    fn interval(self, f: &mut Fields) -> Result<(Ns, Ns)> {
        let start = f.int()?;
        let end = f.int()?;
        self.span(start, end, f)
    }

    /// Checks that row `f`'s interval does not end before it starts, and maps both ends.
    pub(crate) fn span(self, start: i64, end: i64, f: &Fields) -> Result<(Ns, Ns)> {
        if end < start {
            let (path, table) = f.location();
            return Err(Error::ReversedInterval {
                path: path.to_path_buf(),
                table,
                row: f.rowid,
                start,
                end,
            });
        }
        Ok((self.map(start, f)?, self.map(end, f)?))
    }
}

/// Where a GPU operation ran: the fields every GPU activity table shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuOpRow {
    /// Start on the merged clock.
    pub start: Ns,
    /// End on the merged clock.
    pub end: Ns,
    /// Owning process.
    pub pid: u32,
    /// CUDA device ordinal of the process.
    pub device: u32,
    /// CUDA context.
    pub context: u32,
    /// Stream id.
    pub stream: u32,
    /// Correlation id of the launching API call (0 when none).
    pub correlation: u32,
}

/// One `CUPTI_ACTIVITY_KIND_KERNEL` row; its names are [`StringId`]s once resolved (`N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelRow<N = StringId> {
    /// Where and when it ran.
    pub op: GpuOpRow,
    /// Base name (`shortName`).
    pub short_name: N,
    /// Full signature (`demangledName`).
    pub name: N,
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
    /// `graphNodeId` (node-level graph trace); 0 when NULL, `u32::MAX` beyond 32 bits.
    pub graph_node: u32,
}

/// The next column read as an `ENUM_CUDA_MEM_KIND` id ([`MEMORY_KIND_UNKNOWN`] when NULL or
/// beyond the kinds nsys names).
fn memory_kind(f: &mut Fields) -> Result<u8> {
    Ok(match f.opt_int()? {
        Some(k @ 0..7) => k as u8,
        _ => MEMORY_KIND_UNKNOWN,
    })
}

/// One `CUPTI_ACTIVITY_KIND_MEMCPY` row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemcpyRow {
    /// Where and when it ran.
    pub op: GpuOpRow,
    /// Bytes copied.
    pub bytes: u64,
    /// `ENUM_CUDA_MEMCPY_OPER` id.
    pub copy_kind: u8,
    /// Source and destination `ENUM_CUDA_MEM_KIND` ids (7, unknown, when not recorded).
    pub memory_kinds: (u8, u8),
}

/// One `CUPTI_ACTIVITY_KIND_MEMSET` row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemsetRow {
    /// Where and when it ran.
    pub op: GpuOpRow,
    /// Bytes set.
    pub bytes: u64,
    /// The value written.
    pub value: u32,
    /// The memory set (`ENUM_CUDA_MEM_KIND`; [`MEMORY_KIND_UNKNOWN`] when not recorded).
    pub memory_kind: u8,
}

/// One `CUPTI_ACTIVITY_KIND_GRAPH_TRACE` row: a CUDA graph launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphRow {
    /// Where and when it ran.
    pub op: GpuOpRow,
    /// `graphId`.
    pub graph: u32,
    /// `graphExecId`.
    pub exec: u32,
}

/// One `CUPTI_ACTIVITY_KIND_SYNCHRONIZATION` row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncRow {
    /// Where and when (the host thread's wait, or the stream wait).
    pub op: GpuOpRow,
    /// `ENUM_CUPTI_SYNC_TYPE` id.
    pub sync_type: u8,
}

/// One `CUPTI_ACTIVITY_KIND_RUNTIME` row (runtime or driver API call); its name is a
/// [`StringId`] once resolved (`N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiRow<N = StringId> {
    /// Start on the merged clock.
    pub start: Ns,
    /// End on the merged clock.
    pub end: Ns,
    /// Calling thread.
    pub thread: GlobalId,
    /// Function name with its version suffix (`cudaLaunchKernel_v7000`).
    pub name: N,
    /// Correlation id (unique per process only).
    pub correlation: u32,
    /// `ENUM_NSYS_EVENT_CLASS`: 0 runtime, 1 driver.
    pub class: u8,
    /// `returnValue` (0 success; any other value a failure, kept non-zero within `u16`).
    pub return_value: u16,
}

use super::tables::{GRAPH, KERNEL, MEMCPY, MEMSET, RUNTIME, SYNC};

/// The GPU-op columns, first in every activity `SELECT`, read by [`gpu_op`].
macro_rules! gpu_op_columns {
    ($($rest:expr),* $(,)?) => {
        &[
            req("start"), req("end"), req("deviceId"), opt("contextId"), req("streamId"),
            opt("correlationId"), opt("globalPid"), $($rest),*
        ]
    };
}

/// Reads the columns listed by `gpu_op_columns!`.
fn gpu_op(f: &mut Fields, clock: Clock, main_pid: u32, missing_pid: &mut u64) -> Result<GpuOpRow> {
    let (start, end) = clock.interval(f)?;
    let device = f.u32_or(0)?;
    let context = f.u32_or(0)?;
    let stream = f.u32_or(0)?;
    let correlation = correlation(f)?;
    let pid = match f.opt_int()? {
        Some(g) => GlobalId::decode(g).pid,
        None => {
            *missing_pid += 1;
            main_pid
        }
    };
    Ok(GpuOpRow {
        start,
        end,
        pid,
        device,
        context,
        stream,
        correlation,
    })
}

/// CUPTI correlation ids are 32-bit; NULL means none (0).
fn correlation(f: &mut Fields) -> Result<u32> {
    f.u32_or(0)
}

fn string<N: Names>(f: &mut Fields, names: &mut N, table: &'static str) -> Result<N::Name> {
    let id = f.int()?;
    names.name(
        id,
        StringRef {
            table,
            row: f.rowid,
            column: f.last_column(),
        },
    )
}

fn dims(f: &mut Fields) -> Result<[u32; 3]> {
    Ok([f.u32_or(0)?, f.u32_or(0)?, f.u32_or(0)?])
}

impl Report {
    /// Reads `CUPTI_ACTIVITY_KIND_KERNEL` with `chunking`, in rowid order; returns the number of
    /// rows. The sink gets each row and the strings, to read its names.
    pub fn read_kernels(
        &self,
        chunking: Chunking,
        strings: &mut StringResolver,
        warnings: &mut Warnings,
        clock: Clock,
        mut sink: impl FnMut(KernelRow, &StringResolver),
    ) -> Result<u64> {
        let read = |r: &Report, rows, w: &mut Warnings, out: &mut dyn FnMut(_)| {
            r.scan_kernels(rows, &mut Deferred, w, clock, out)
        };
        read_table(self, chunking, KERNEL, warnings, read, |k| {
            let row = KernelRow {
                op: k.op,
                short_name: k.short_name.resolve(strings)?,
                name: k.name.resolve(strings)?,
                grid: k.grid,
                block: k.block,
                registers: k.registers,
                static_shared: k.static_shared,
                dynamic_shared: k.dynamic_shared,
                graph_node: k.graph_node,
            };
            sink(row, strings);
            Ok(())
        })
    }

    /// Reads `CUPTI_ACTIVITY_KIND_MEMCPY` with `chunking`, in rowid order.
    pub fn read_memcpys(
        &self,
        chunking: Chunking,
        warnings: &mut Warnings,
        clock: Clock,
        sink: impl FnMut(MemcpyRow),
    ) -> Result<u64> {
        let read = |r: &Report, rows, w: &mut Warnings, out: &mut dyn FnMut(_)| {
            r.scan_memcpys(rows, w, clock, out)
        };
        read_table(self, chunking, MEMCPY, warnings, read, infallible(sink))
    }

    /// Reads `CUPTI_ACTIVITY_KIND_MEMSET` with `chunking`, in rowid order.
    pub fn read_memsets(
        &self,
        chunking: Chunking,
        warnings: &mut Warnings,
        clock: Clock,
        sink: impl FnMut(MemsetRow),
    ) -> Result<u64> {
        let read = |r: &Report, rows, w: &mut Warnings, out: &mut dyn FnMut(_)| {
            r.scan_memsets(rows, w, clock, out)
        };
        read_table(self, chunking, MEMSET, warnings, read, infallible(sink))
    }

    /// Reads `CUPTI_ACTIVITY_KIND_GRAPH_TRACE` (CUDA graph launches) with `chunking`, in rowid
    /// order.
    pub fn read_graphs(
        &self,
        chunking: Chunking,
        warnings: &mut Warnings,
        clock: Clock,
        sink: impl FnMut(GraphRow),
    ) -> Result<u64> {
        let read = |r: &Report, rows, w: &mut Warnings, out: &mut dyn FnMut(_)| {
            r.scan_graphs(rows, w, clock, out)
        };
        read_table(self, chunking, GRAPH, warnings, read, infallible(sink))
    }

    /// Reads `CUPTI_ACTIVITY_KIND_SYNCHRONIZATION` with `chunking`, in rowid order.
    pub fn read_syncs(
        &self,
        chunking: Chunking,
        warnings: &mut Warnings,
        clock: Clock,
        sink: impl FnMut(SyncRow),
    ) -> Result<u64> {
        let read = |r: &Report, rows, w: &mut Warnings, out: &mut dyn FnMut(_)| {
            r.scan_syncs(rows, w, clock, out)
        };
        read_table(self, chunking, SYNC, warnings, read, infallible(sink))
    }

    /// Reads `CUPTI_ACTIVITY_KIND_RUNTIME` (CUDA runtime and driver API calls) with `chunking`,
    /// in rowid order.
    pub fn read_api_calls(
        &self,
        chunking: Chunking,
        strings: &mut StringResolver,
        clock: Clock,
        mut sink: impl FnMut(ApiRow),
    ) -> Result<u64> {
        let read = |r: &Report, rows, _: &mut Warnings, out: &mut dyn FnMut(_)| {
            r.scan_api_calls(rows, &mut Deferred, clock, out)
        };
        // The runtime table raises no warnings.
        let mut none = Warnings::default();
        read_table(self, chunking, RUNTIME, &mut none, read, |a| {
            sink(ApiRow {
                start: a.start,
                end: a.end,
                thread: a.thread,
                name: a.name.resolve(strings)?,
                correlation: a.correlation,
                class: a.class,
                return_value: a.return_value,
            });
            Ok(())
        })
    }

    /// Runs a GPU activity reader, counting rows without `globalPid` as a warning.
    #[allow(clippy::too_many_arguments)]
    fn gpu_table<R>(
        &self,
        rows: Rows,
        warnings: &mut Warnings,
        table: &'static str,
        columns: &'static [Column],
        clock: Clock,
        mut read: impl FnMut(&mut Fields, GpuOpRow) -> Result<R>,
        mut sink: impl FnMut(R),
    ) -> Result<u64> {
        let main_pid = self.main_pid()?;
        let mut missing_pid = 0;
        let count = self.for_each_row(table, columns, &rows.tail(), |f| {
            let op = gpu_op(f, clock, main_pid, &mut missing_pid)?;
            sink(read(f, op)?);
            Ok(())
        })?;
        warnings.add_n(Warning::MissingGlobalPid(table), missing_pid);
        Ok(count)
    }

    /// Streams the `rows` of `CUPTI_ACTIVITY_KIND_KERNEL`, their names taken by `names`;
    /// returns the number of rows.
    pub(crate) fn scan_kernels<N: Names>(
        &self,
        rows: Rows,
        names: &mut N,
        warnings: &mut Warnings,
        clock: Clock,
        sink: impl FnMut(KernelRow<N::Name>),
    ) -> Result<u64> {
        const COLUMNS: &[Column] = gpu_op_columns![
            req("shortName"),
            req("demangledName"),
            opt("gridX"),
            opt("gridY"),
            opt("gridZ"),
            opt("blockX"),
            opt("blockY"),
            opt("blockZ"),
            opt("registersPerThread"),
            opt("staticSharedMemory"),
            opt("dynamicSharedMemory"),
            opt("graphNodeId"),
        ];
        let read = |f: &mut Fields, op| {
            Ok(KernelRow {
                op,
                short_name: string(f, names, KERNEL)?,
                name: string(f, names, KERNEL)?,
                grid: dims(f)?,
                block: dims(f)?,
                registers: f.u32_or(0)?,
                static_shared: f.u32_or(0)?,
                dynamic_shared: f.u32_or(0)?,
                // CUPTI's node ids are 64-bit; ids beyond 32 bits show as u32::MAX.
                graph_node: f
                    .opt_int()?
                    .map_or(0, |v| u32::try_from(v).unwrap_or(u32::MAX)),
            })
        };
        self.gpu_table(rows, warnings, KERNEL, COLUMNS, clock, read, sink)
    }

    /// Streams the `rows` of `CUPTI_ACTIVITY_KIND_MEMCPY`.
    pub(crate) fn scan_memcpys(
        &self,
        rows: Rows,
        warnings: &mut Warnings,
        clock: Clock,
        sink: impl FnMut(MemcpyRow),
    ) -> Result<u64> {
        const COLUMNS: &[Column] = gpu_op_columns![
            req("bytes"),
            opt("copyKind"),
            opt("srcKind"),
            opt("dstKind")
        ];
        let read = |f: &mut Fields, op| {
            let bytes = f.int()?.max(0) as u64;
            let copy_kind = f.u32_or(0)?.min(255) as u8;
            let memory_kinds = (memory_kind(f)?, memory_kind(f)?);
            Ok(MemcpyRow {
                op,
                bytes,
                copy_kind,
                memory_kinds,
            })
        };
        self.gpu_table(rows, warnings, MEMCPY, COLUMNS, clock, read, sink)
    }

    /// Streams the `rows` of `CUPTI_ACTIVITY_KIND_MEMSET`.
    pub(crate) fn scan_memsets(
        &self,
        rows: Rows,
        warnings: &mut Warnings,
        clock: Clock,
        sink: impl FnMut(MemsetRow),
    ) -> Result<u64> {
        const COLUMNS: &[Column] = gpu_op_columns![req("bytes"), opt("value"), opt("memKind")];
        let read = |f: &mut Fields, op| {
            Ok(MemsetRow {
                op,
                bytes: f.int()?.max(0) as u64,
                value: f.opt_int()?.unwrap_or(0) as u32,
                memory_kind: memory_kind(f)?,
            })
        };
        self.gpu_table(rows, warnings, MEMSET, COLUMNS, clock, read, sink)
    }

    /// Streams the `rows` of `CUPTI_ACTIVITY_KIND_GRAPH_TRACE`.
    pub(crate) fn scan_graphs(
        &self,
        rows: Rows,
        warnings: &mut Warnings,
        clock: Clock,
        sink: impl FnMut(GraphRow),
    ) -> Result<u64> {
        const COLUMNS: &[Column] = gpu_op_columns![req("graphId"), req("graphExecId")];
        let read = |f: &mut Fields, op| {
            Ok(GraphRow {
                op,
                graph: f.u32_or(0)?,
                exec: f.u32_or(0)?,
            })
        };
        self.gpu_table(rows, warnings, GRAPH, COLUMNS, clock, read, sink)
    }

    /// Streams the `rows` of `CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`.
    pub(crate) fn scan_syncs(
        &self,
        rows: Rows,
        warnings: &mut Warnings,
        clock: Clock,
        sink: impl FnMut(SyncRow),
    ) -> Result<u64> {
        const COLUMNS: &[Column] = gpu_op_columns![opt("syncType")];
        let read = |f: &mut Fields, op| {
            Ok(SyncRow {
                op,
                sync_type: f.u32_or(0)?.min(255) as u8,
            })
        };
        self.gpu_table(rows, warnings, SYNC, COLUMNS, clock, read, sink)
    }

    /// Streams the `rows` of `CUPTI_ACTIVITY_KIND_RUNTIME` (CUDA runtime and driver API calls),
    /// their names taken by `names`.
    pub(crate) fn scan_api_calls<N: Names>(
        &self,
        rows: Rows,
        names: &mut N,
        clock: Clock,
        mut sink: impl FnMut(ApiRow<N::Name>),
    ) -> Result<u64> {
        const COLUMNS: &[Column] = &[
            req("start"),
            req("end"),
            opt("eventClass"),
            req("globalTid"),
            opt("correlationId"),
            req("nameId"),
            opt("returnValue"),
        ];
        self.for_each_row(RUNTIME, COLUMNS, &rows.tail(), |f| {
            let (start, end) = clock.interval(f)?;
            let class = f.u32_or(0)?.min(255) as u8;
            let thread = GlobalId::decode(f.int()?);
            let correlation = correlation(f)?;
            let name = string(f, names, RUNTIME)?;
            // Any other value than 0 is a failure: kept non-zero, within u16.
            let return_value = match f.opt_int()? {
                None | Some(0) => 0,
                Some(v) => v.clamp(1, u16::MAX.into()) as u16,
            };
            sink(ApiRow {
                start,
                end,
                thread,
                name,
                correlation,
                class,
                return_value,
            });
            Ok(())
        })
    }
}
