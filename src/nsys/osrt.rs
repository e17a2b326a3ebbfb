//! Streaming reader for `OSRT_API` (nsys-sqlite.md §8.18): the OS runtime library calls that
//! `--trace=osrt` records (`poll`, `ioctl`, `pthread_cond_wait`, `read`...), with their names
//! resolved, and their call stacks (`OSRT_CALLCHAINS`). Its profiler start and finish markers (event classes 31 and 32) are not calls and
//! are skipped.

use super::chunks::{Chunking, Rows, read_table};
use super::error::Result;
use super::events::Clock;
use super::ids::GlobalId;
use super::report::Report;
use super::schema::{Column, opt, req};
use super::strings::{Deferred, Names, StringRef, StringResolver};
use crate::model::Warnings;
use crate::model::{Frame, Ns, StringId};

const OSRT: &str = "OSRT_API";
const CALLCHAINS: &str = "OSRT_CALLCHAINS";

/// `ENUM_NSYS_EVENT_CLASS` of a call (`TRACE_PROCESS_EVENT_OS_RUNTIME`).
const OS_RUNTIME_CALL: i64 = 27;

/// One OS runtime call; its name is a [`StringId`] once resolved (`N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OsRow<N = StringId> {
    /// Start on the merged clock.
    pub start: Ns,
    /// End on the merged clock.
    pub end: Ns,
    /// Calling thread.
    pub thread: GlobalId,
    /// Function name (`pthread_cond_wait`).
    pub name: N,
    /// Its call stack's id in `OSRT_CALLCHAINS`, when recorded.
    pub callchain: Option<i64>,
}

impl Report {
    /// Reads the calls of `OSRT_API` with `chunking`, in rowid order; returns the number of
    /// calls (nothing when the export has no such table).
    pub fn read_os_calls(
        &self,
        chunking: Chunking,
        strings: &mut StringResolver,
        clock: Clock,
        mut sink: impl FnMut(OsRow),
    ) -> Result<u64> {
        let read = |r: &Report, rows, _: &mut Warnings, out: &mut dyn FnMut(_)| {
            r.scan_os_calls(rows, &mut Deferred, clock, out)
        };
        // The table raises no warnings.
        let mut none = Warnings::default();
        read_table(self, chunking, OSRT, &mut none, read, |o| {
            sink(OsRow {
                start: o.start,
                end: o.end,
                thread: o.thread,
                name: o.name.resolve(strings)?,
                callchain: o.callchain,
            });
            Ok(())
        })
    }

    /// Reads `OSRT_CALLCHAINS`: each call stack's id and frames, innermost first (nothing when
    /// the export has no such table).
    pub fn read_os_callchains(
        &self,
        strings: &mut StringResolver,
        mut sink: impl FnMut(i64, &[Frame]),
    ) -> Result<()> {
        const COLUMNS: &[Column] = &[req("id"), req("symbol"), req("module")];
        let mut frames = Vec::new();
        let mut current = None;
        self.for_each_row(CALLCHAINS, COLUMNS, "ORDER BY id, stackDepth", |f| {
            let id = f.int()?;
            if let Some(done) = current.filter(|&c| c != id) {
                sink(done, &frames);
                frames.clear();
            }
            current = Some(id);
            frames.push(super::sampling::frame(f, strings, CALLCHAINS)?);
            Ok(())
        })?;
        if let Some(id) = current {
            sink(id, &frames);
        }
        Ok(())
    }

    /// Streams the calls among the `rows` of `OSRT_API`, their names taken by `names`; returns
    /// the number of calls.
    fn scan_os_calls<N: Names>(
        &self,
        rows: Rows,
        names: &mut N,
        clock: Clock,
        mut sink: impl FnMut(OsRow<N::Name>),
    ) -> Result<u64> {
        const COLUMNS: &[Column] = &[
            req("start"),
            req("end"),
            req("eventClass"),
            req("globalTid"),
            req("nameId"),
            opt("callchainId"),
        ];
        let mut calls = 0;
        self.for_each_row(OSRT, COLUMNS, &rows.tail(), |f| {
            let (start, end) = (f.int()?, f.int()?);
            if f.int()? != OS_RUNTIME_CALL {
                return Ok(());
            }
            let (start, end) = clock.span(start, end, f)?;
            let thread = GlobalId::decode(f.int()?);
            let id = f.int()?;
            let at = StringRef {
                table: OSRT,
                row: f.rowid,
                column: "nameId",
            };
            let name = names.name(id, at)?;
            sink(OsRow {
                start,
                end,
                thread,
                name,
                callchain: f.opt_int()?,
            });
            calls += 1;
            Ok(())
        })?;
        Ok(calls)
    }
}
