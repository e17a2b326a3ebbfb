//! Streaming reader for the OpenACC tables of `--trace=openacc`
//! (`CUPTI_ACTIVITY_KIND_OPENACC_DATA`, `_LAUNCH` and `_OTHER`; their layout is in the nsys
//! user guide's SQLite schema): each event with its name, its source location as nsys2prv
//! labels regions (`name@file:line`), its function, and its variable and bytes (data) or kernel
//! (launches).

use super::chunks::{Chunking, Rows, read_table};
use super::error::Result;
use super::events::Clock;
use super::ids::GlobalId;
use super::report::Report;
use super::schema::{Column, Fields, opt, req};
use super::strings::{Deferred, DeferredName, Names, StringRef, StringResolver};
use crate::hash::FxHashMap;
use crate::model::Warnings;
use crate::model::{AccTable, Ns, StringId};

/// The OpenACC tables, in reading order.
const TABLES: [(&str, AccTable); 3] = [
    ("CUPTI_ACTIVITY_KIND_OPENACC_DATA", AccTable::Data),
    ("CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH", AccTable::Launch),
    ("CUPTI_ACTIVITY_KIND_OPENACC_OTHER", AccTable::Other),
];

/// The columns read from every table; those a table lacks read as NULL.
const COLUMNS: &[Column] = &[
    req("start"),
    req("end"),
    req("globalTid"),
    req("eventKind"),
    req("nameId"),
    opt("srcFile"),
    opt("lineNo"),
    opt("funcName"),
    opt("varName|kernelName"),
    opt("bytes"),
];

/// One OpenACC event; its strings are [`StringId`]s once resolved (`N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccRow<N = StringId> {
    /// Start on the merged clock.
    pub start: Ns,
    /// End on the merged clock.
    pub end: Ns,
    /// The thread.
    pub thread: GlobalId,
    /// The table it came from.
    pub table: AccTable,
    /// `CUpti_OpenAccEventKind`.
    pub event_kind: u8,
    /// The event's name.
    pub name: N,
    /// Its source file and line, when known.
    pub source: Option<(N, i64)>,
    /// Its function, when known.
    pub function: Option<N>,
    /// Its variable or kernel, when known.
    pub object: Option<N>,
    /// Bytes moved (data events).
    pub bytes: u64,
}

/// An event as handed on: its strings resolved, its source composed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccEventRow {
    /// The row.
    pub row: AccRow,
    /// `name@file:line`, or the name.
    pub source: StringId,
}

impl Report {
    /// Reads the events of the three OpenACC tables with `chunking`, table by table in rowid
    /// order; returns how many there were.
    pub fn read_openacc(
        &self,
        chunking: Chunking,
        strings: &mut StringResolver,
        clock: Clock,
        mut sink: impl FnMut(AccEventRow),
    ) -> Result<u64> {
        // (name, file, line) -> `name@file:line`, each composed once.
        let mut sources: FxHashMap<(StringId, StringId, i64), StringId> = FxHashMap::default();
        let mut read = 0;
        for (table, kind) in TABLES {
            let scan = |r: &Report, rows, _: &mut Warnings, out: &mut dyn FnMut(_)| {
                r.scan_openacc(table, kind, rows, clock, out)
            };
            // The tables raise no warnings.
            let mut none = Warnings::default();
            read += read_table(self, chunking, table, &mut none, scan, |raw| {
                let resolve = |n: Option<DeferredName>, s: &mut StringResolver| {
                    n.map(|n| n.resolve(s)).transpose()
                };
                let row = AccRow {
                    name: raw.name.resolve(strings)?,
                    source: match raw.source {
                        Some((file, line)) => Some((file.resolve(strings)?, line)),
                        None => None,
                    },
                    function: resolve(raw.function, strings)?,
                    object: resolve(raw.object, strings)?,
                    start: raw.start,
                    end: raw.end,
                    thread: raw.thread,
                    table: raw.table,
                    event_kind: raw.event_kind,
                    bytes: raw.bytes,
                };
                let source = match row.source {
                    None => row.name,
                    Some((file, line)) => {
                        *sources.entry((row.name, file, line)).or_insert_with(|| {
                            let text =
                                format!("{}@{}:{line}", strings.text(row.name), strings.text(file));
                            strings.intern(&text)
                        })
                    }
                };
                sink(AccEventRow { row, source });
                Ok(())
            })?;
        }
        Ok(read)
    }

    /// Streams the events among the `rows` of one OpenACC table; returns how many there were.
    fn scan_openacc(
        &self,
        table: &'static str,
        kind: AccTable,
        rows: Rows,
        clock: Clock,
        sink: &mut dyn FnMut(AccRow<DeferredName>),
    ) -> Result<u64> {
        self.for_each_row(table, COLUMNS, &rows.tail(), |f| {
            let (start, end) = (f.int()?, f.int()?);
            let (start, end) = clock.span(start, end, f)?;
            let thread = GlobalId::decode(f.int()?);
            let event_kind = f.int()?.clamp(0, 255) as u8;
            let name = string(f, table)?.ok_or_else(|| f.bad("is NULL"))?;
            let file = string(f, table)?;
            let line = f.opt_int()?.unwrap_or(0);
            let function = string(f, table)?;
            let object = string(f, table)?;
            let bytes = f.opt_int()?.unwrap_or(0).max(0) as u64;
            sink(AccRow {
                start,
                end,
                thread,
                table: kind,
                event_kind,
                name,
                source: file.map(|file| (file, line)),
                function,
                object,
                bytes,
            });
            Ok(())
        })
    }
}

/// The next column as a `StringIds` reference, when not NULL.
fn string(f: &mut Fields, table: &'static str) -> Result<Option<DeferredName>> {
    let Some(id) = f.opt_int()? else {
        return Ok(None);
    };
    let at = StringRef {
        table,
        row: f.rowid,
        column: f.last_column(),
    };
    Deferred.name(id, at).map(Some)
}
