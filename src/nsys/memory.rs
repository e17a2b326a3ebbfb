//! Streaming reader for `CUDA_GPU_MEMORY_USAGE_EVENTS` (nsys-sqlite.md §8.17,
//! `--cuda-memory-usage=true`): device-memory allocations and releases. Other memory kinds
//! (pageable, pinned, managed) are host or unified memory and are not read.

use super::chunks::{Chunking, Rows, infallible, read_table};
use super::error::Result;
use super::events::Clock;
use super::ids::GlobalId;
use super::report::Report;
use super::schema::{Column, req};
use crate::model::Ns;
use crate::model::Warnings;

const MEMORY: &str = "CUDA_GPU_MEMORY_USAGE_EVENTS";

/// `ENUM_CUDA_MEM_KIND` of device memory.
const DEVICE: i64 = 2;
/// `ENUM_CUDA_DEV_MEM_EVENT_OPER` of a release (0 is an allocation).
const DEALLOCATION: i64 = 1;

/// One allocation or release of device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryRow {
    /// When, on the merged clock.
    pub time: Ns,
    /// The process.
    pub pid: u32,
    /// CUDA device ordinal of the process.
    pub device: u32,
    /// Bytes allocated (positive) or released (negative).
    pub bytes: i64,
}

impl Report {
    /// Reads the device-memory rows of `CUDA_GPU_MEMORY_USAGE_EVENTS` with `chunking`, in rowid
    /// order; returns how many there were.
    pub fn read_memory(
        &self,
        chunking: Chunking,
        clock: Clock,
        sink: impl FnMut(MemoryRow),
    ) -> Result<u64> {
        let read = |r: &Report, rows, _: &mut Warnings, out: &mut dyn FnMut(_)| {
            r.scan_memory(rows, clock, out)
        };
        // The table raises no warnings.
        let mut none = Warnings::default();
        read_table(self, chunking, MEMORY, &mut none, read, infallible(sink))
    }

    /// Streams the device-memory rows among `rows`; returns how many there were.
    fn scan_memory(
        &self,
        rows: Rows,
        clock: Clock,
        mut sink: impl FnMut(MemoryRow),
    ) -> Result<u64> {
        const COLUMNS: &[Column] = &[
            req("start"),
            req("globalPid"),
            req("deviceId"),
            req("bytes"),
            req("memKind"),
            req("memoryOperationType"),
        ];
        let mut read = 0;
        self.for_each_row(MEMORY, COLUMNS, &rows.tail(), |f| {
            let time = f.int()?;
            let time = clock.map(time, f)?;
            let pid = GlobalId::decode(f.int()?).pid;
            let device = f.int()? as u32;
            let bytes = f.int()?;
            if f.int()? != DEVICE {
                return Ok(());
            }
            let bytes = if f.int()? == DEALLOCATION {
                -bytes
            } else {
                bytes
            };
            sink(MemoryRow {
                time,
                pid,
                device,
                bytes,
            });
            read += 1;
            Ok(())
        })?;
        Ok(read)
    }
}
