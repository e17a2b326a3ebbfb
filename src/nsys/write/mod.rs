//! Writing an export in nsys's schema: the tables of `ddl.rs`, created lazily as nsys does, rows
//! inserted through cached statements in one transaction on a thread of their own (the `worker`
//! module), the file built under a temporary name and renamed when complete. The reading
//! layer's own writer: the translation of torch.profiler and JAX traces (`input::export`) and
//! the generator (`synth`) both write through it.

mod ddl;
mod worker;

use super::GlobalId;
use super::tables::{NVTX, RUNTIME};
use crate::hash::{FxBuildHasher, FxHashSet};
use anyhow::{Context, Result};
pub use ddl::{PRODUCT_VERSION, SCHEMA_VERSION};
use indexmap::IndexSet;
use rusqlite::{Connection, ToSql};
use std::path::{Path, PathBuf};

/// NVTX push/pop range (`ENUM_NSYS_EVENT_TYPE`).
pub const NVTX_PUSH_POP: i64 = 59;

/// A node's export being written.
pub struct ExportWriter {
    worker: worker::Worker,
    output: crate::output::Output,
    path: PathBuf,
    strings: IndexSet<String, FxBuildHasher>,
    created: FxHashSet<&'static str>,
}

impl ExportWriter {
    /// Starts an export that will be renamed to `path` by [`ExportWriter::finish`].
    pub fn create(path: &Path) -> Result<ExportWriter> {
        let output = crate::output::Output::create_with(path, ".sqlite")?;
        anyhow::ensure!(
            output.is_file(),
            "{}: an export is a SQLite file; name a file, not a device",
            path.display()
        );
        let conn = Connection::open(output.path())?;
        // Large pages: fewer of them to write, for rows appended in rowid order.
        conn.execute_batch(
            "PRAGMA page_size = 65536; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; BEGIN;",
        )?;
        Ok(ExportWriter {
            worker: worker::Worker::start(conn),
            output,
            path: path.to_path_buf(),
            strings: IndexSet::default(),
            created: FxHashSet::default(),
        })
    }

    /// The `StringIds` id of `text` (ids dense from 0, in first-use order).
    pub fn string(&mut self, text: &str) -> i64 {
        match self.strings.get_index_of(text) {
            Some(i) => i as i64,
            None => self.strings.insert_full(text.to_string()).0 as i64,
        }
    }

    /// Inserts one row, naming the columns given (the others stay NULL); creates the table with
    /// its full 2026.2.1 layout on first use.
    pub fn insert(
        &mut self,
        table: &'static str,
        columns: &'static str,
        values: &[&dyn ToSql],
    ) -> Result<()> {
        if self.created.insert(table) {
            self.create_table(table)?;
        }
        self.worker.insert(table, columns, values)
    }

    /// A CUDA API call of thread `(pid, tid)` (`CUPTI_ACTIVITY_KIND_RUNTIME`; `class` 0 runtime,
    /// 1 driver), its name interned.
    pub fn api_call(
        &mut self,
        (start, end): (i64, i64),
        (pid, tid): (u32, u32),
        correlation: u32,
        name: &str,
        class: i64,
    ) -> Result<()> {
        let name = self.string(name);
        self.insert(
            RUNTIME,
            "start, end, eventClass, globalTid, correlationId, nameId, returnValue",
            &[
                &start,
                &end,
                &class,
                &GlobalId::encode(pid, tid),
                &correlation,
                &name,
                &0,
            ],
        )
    }

    /// A closed NVTX push/pop range of thread `(pid, tid)` with inline text, in `domain` (0:
    /// the default domain).
    pub fn nvtx_range(
        &mut self,
        (start, end): (i64, i64),
        (pid, tid): (u32, u32),
        text: &str,
        domain: i64,
    ) -> Result<()> {
        self.insert(
            NVTX,
            "start, end, eventType, text, globalTid, domainId",
            &[
                &start,
                &end,
                &NVTX_PUSH_POP,
                &text,
                &GlobalId::encode(pid, tid),
                &domain,
            ],
        )
    }

    /// A process's `PROCESSES` row.
    pub fn process(&mut self, pid: u32, name: &str) -> Result<()> {
        self.insert(
            "PROCESSES",
            "globalPid, pid, name",
            &[&GlobalId::encode(pid, 0), &pid, &name],
        )
    }

    /// A thread's name (`ThreadNames`), interned.
    pub fn thread_name(&mut self, (pid, tid): (u32, u32), name: &str) -> Result<()> {
        let name = self.string(name);
        self.insert(
            "ThreadNames",
            "nameId, priority, globalTid",
            &[&name, &0, &GlobalId::encode(pid, tid)],
        )
    }

    /// Whether a row of `table` has been inserted (nsys creates tables lazily, and so does this).
    pub fn has_table(&self, table: &str) -> bool {
        self.created.contains(table)
    }

    /// Runs one SQL statement with `values` on the export being written (an update of rows
    /// already inserted).
    pub fn execute(&mut self, sql: &str, values: &[&dyn ToSql]) -> Result<()> {
        self.worker.execute(sql, values)
    }

    fn create_table(&mut self, table: &str) -> Result<()> {
        let spec = ddl::TABLES
            .iter()
            .find(|(name, _)| *name == table)
            .with_context(|| format!("no schema for table {table}"))?;
        self.worker
            .ddl(ddl::create_table(table, &ddl::columns(spec.1)))
    }

    /// Writes `StringIds` and the ENUM tables, commits, and renames the file into place.
    pub fn finish(mut self) -> Result<PathBuf> {
        let strings = std::mem::take(&mut self.strings);
        for (id, value) in strings.iter().enumerate() {
            self.insert("StringIds", "id, value", &[&(id as i64), value])?;
        }
        let conn = self.worker.finish()?;
        write_enums(&conn)?;
        conn.execute_batch("COMMIT;")?;
        drop(conn);
        self.output.commit()?;
        Ok(self.path)
    }
}

/// The ENUM tables nsys writes.
fn write_enums(conn: &Connection) -> Result<()> {
    let enum_columns = ddl::columns("id INTEGER NN PK, name TEXT, label TEXT");
    let mut insert = None;
    for line in ddl::ENUMS.lines().filter(|l| !l.is_empty()) {
        let fields: Vec<&str> = line.split('\t').collect();
        match fields.as_slice() {
            [table] => {
                conn.execute_batch(&ddl::create_table(table, &enum_columns))?;
                insert = Some(format!("INSERT INTO {table} VALUES (?, ?, ?)"));
            }
            [id, name, label] => {
                let sql = insert.as_deref().context("enum row before its table")?;
                conn.prepare_cached(sql)?.execute(rusqlite::params![
                    id.parse::<i64>()?,
                    name,
                    label
                ])?;
            }
            _ => anyhow::bail!("malformed enum line {line:?}"),
        }
    }
    Ok(())
}
