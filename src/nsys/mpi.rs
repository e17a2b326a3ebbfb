//! Streaming reader for the MPI tables of `--trace=mpi` (nsys-sqlite.md §8.19): the calls of
//! `MPI_P2P_EVENTS`, `MPI_COLLECTIVES_EVENTS`, `MPI_START_WAIT_EVENTS` and `MPI_OTHER_EVENTS`,
//! and each process's rank from `MPI_RANKS`.
//!
//! nsys writes one `MPI_START_WAIT_EVENTS` row per request of a call (an `MPI_Waitall` on ten
//! requests is ten rows with the same times and name): the first row is the call, the rows
//! after it that repeat it only add a request ([`MpiTable::Request`]).

use super::chunks::{Chunking, Rows, read_table};
use super::error::Result;
use super::events::Clock;
use super::ids::GlobalId;
use super::report::Report;
use super::schema::{Column, opt, req};
use super::strings::{Deferred, Names, StringRef, StringResolver};
use crate::hash::FxHashMap;
use crate::model::{MpiTable, NO_RANK, Ns, StringId};
use crate::model::{Warning, Warnings};

/// The MPI call tables, in reading order, with the table each row's calls are from.
const TABLES: [(&str, MpiTable); 4] = [
    ("MPI_P2P_EVENTS", MpiTable::PointToPoint),
    ("MPI_COLLECTIVES_EVENTS", MpiTable::Collective),
    ("MPI_START_WAIT_EVENTS", MpiTable::StartWait),
    ("MPI_OTHER_EVENTS", MpiTable::Other),
];

/// The columns read from every table; those a table lacks read as NULL. Exports name the
/// communicator `commUid` (unique across processes) from 2023, `commHandle` before.
const COLUMNS: &[Column] = &[
    req("start"),
    opt("end"),
    req("globalTid"),
    req("textId"),
    opt("commUid|commHandle"),
    opt("tag"),
    opt("remoteRank|rootRank"),
    opt("size"),
    opt("recvSize"),
    opt("requestHandle"),
];

/// One MPI call; its name is a [`StringId`] once resolved (`N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MpiRow<N = StringId> {
    /// Start on the merged clock.
    pub start: Ns,
    /// End on the merged clock (the start for a call without an end).
    pub end: Ns,
    /// Calling thread.
    pub thread: GlobalId,
    /// Function name (`MPI_Isend`).
    pub name: N,
    /// The table it came from.
    pub table: MpiTable,
    /// Remote rank of a send or receive, root of a collective; [`NO_RANK`] when none.
    pub peer: i32,
    /// Message tag (0 when none).
    pub tag: i32,
    /// Communicator (0 when none).
    pub comm: u64,
    /// Bytes sent.
    pub size: u64,
    /// A collective's bytes received.
    pub recv_size: u64,
    /// Request handle (0 when none).
    pub request: u64,
}

impl<N> MpiRow<N> {
    fn with_name<M>(self, name: M) -> MpiRow<M> {
        MpiRow {
            start: self.start,
            end: self.end,
            thread: self.thread,
            name,
            table: self.table,
            peer: self.peer,
            tag: self.tag,
            comm: self.comm,
            size: self.size,
            recv_size: self.recv_size,
            request: self.request,
        }
    }
}

impl Report {
    /// Reads the calls of the four MPI call tables with `chunking`, table by table in rowid
    /// order; returns the number of rows read (nothing for tables the export lacks).
    pub fn read_mpi_calls(
        &self,
        chunking: Chunking,
        strings: &mut StringResolver,
        warnings: &mut Warnings,
        clock: Clock,
        mut sink: impl FnMut(MpiRow),
    ) -> Result<u64> {
        let mut rows = 0;
        for (table, kind) in TABLES {
            // The call a start/wait row repeats: (thread, start, end, name).
            let mut last: Option<(GlobalId, Ns, Ns, StringId)> = None;
            let read = |r: &Report, rows, w: &mut Warnings, out: &mut dyn FnMut(_)| {
                r.scan_mpi(table, kind, rows, w, clock, out)
            };
            rows += read_table(self, chunking, table, warnings, read, |row| {
                let mut row = row.with_name(row.name.resolve(strings)?);
                if kind == MpiTable::StartWait {
                    let call = (row.thread, row.start, row.end, row.name);
                    if last == Some(call) {
                        row.table = MpiTable::Request;
                    }
                    last = Some(call);
                }
                sink(row);
                Ok(())
            })?;
        }
        Ok(rows)
    }

    /// Streams the calls among the `rows` of one MPI table; returns how many there were.
    fn scan_mpi(
        &self,
        table: &'static str,
        kind: MpiTable,
        rows: Rows,
        warnings: &mut Warnings,
        clock: Clock,
        sink: &mut dyn FnMut(MpiRow<<Deferred as Names>::Name>),
    ) -> Result<u64> {
        self.for_each_row(table, COLUMNS, &rows.tail(), |f| {
            let start = f.int()?;
            let end = f.opt_int()?.unwrap_or_else(|| {
                warnings.add(Warning::UnendedMpiCall);
                start
            });
            let (start, end) = clock.span(start, end, f)?;
            let thread = GlobalId::decode(f.int()?);
            let id = f.int()?;
            let at = StringRef {
                table,
                row: f.rowid,
                column: "textId",
            };
            let name = Deferred.name(id, at)?;
            let comm = f.opt_int()?.unwrap_or(0) as u64;
            let tag = small(f.opt_int()?, 0);
            let peer = small(f.opt_int()?, NO_RANK);
            let size = f.opt_int()?.unwrap_or(0).max(0) as u64;
            let recv_size = f.opt_int()?.unwrap_or(0).max(0) as u64;
            let request = f.opt_int()?.unwrap_or(0) as u64;
            sink(MpiRow {
                start,
                end,
                thread,
                name,
                table: kind,
                peer,
                tag,
                comm,
                size,
                recv_size,
                request,
            });
            Ok(())
        })
    }

    /// `MPI_RANKS`: the MPI rank of each process that has one, by pid.
    pub fn mpi_ranks(&self) -> Result<FxHashMap<u32, u32>> {
        const RANKS: &[Column] = &[req("globalTid"), req("rank")];
        let mut ranks = FxHashMap::default();
        self.for_each_row("MPI_RANKS", RANKS, "", |f| {
            let pid = GlobalId::decode(f.int()?).pid;
            let rank = f.int()?;
            let rank =
                u32::try_from(rank).map_err(|_| f.bad(format!("rank {rank} is negative")))?;
            ranks.insert(pid, rank);
            Ok(())
        })?;
        Ok(ranks)
    }
}

/// A 32-bit rank or tag: `none` when NULL or out of range (`MPI_ANY_SOURCE` and `MPI_ANY_TAG`
/// are small negative numbers and stay as they are).
fn small(value: Option<i64>, none: i32) -> i32 {
    value.and_then(|v| i32::try_from(v).ok()).unwrap_or(none)
}
