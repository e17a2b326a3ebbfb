//! The thread that runs an export's statements: the writer hands it batches of rows as they are
//! made and goes on, so that making rows (parsing a trace, generating a run) and SQLite's inserts
//! run at once, on two cores. Statements run in the order they were handed over; the first
//! failure stops the thread, and the writer reports it at its next hand-over or at the end.

use crate::hash::FxHashMap;
use anyhow::{Context, Result};
use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::{Connection, Statement, ToSql};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

/// Statements per batch handed over.
const BATCH: usize = 8192;
/// Batches handed over and not yet run, at most: what the writer may hold ahead of SQLite.
const AHEAD: usize = 4;

/// One statement to run.
enum Op {
    /// DDL, run as a batch.
    Ddl(String),
    /// One row of `table` with `columns` named: the batch's next values, one per column.
    Insert {
        table: &'static str,
        columns: &'static str,
        values: usize,
    },
    /// One statement with the batch's next `values` values.
    Execute { sql: String, values: usize },
}

/// Statements and their values, handed over together.
#[derive(Default)]
struct Batch {
    ops: Vec<Op>,
    values: Vec<Value>,
}

/// The thread, and the batch being filled for it.
pub(super) struct Worker {
    sender: Option<SyncSender<Batch>>,
    thread: Option<JoinHandle<Result<Connection>>>,
    batch: Batch,
}

impl Worker {
    /// Starts running statements on `conn`.
    pub fn start(conn: Connection) -> Worker {
        let (sender, receiver) = sync_channel(AHEAD);
        let thread = std::thread::spawn(move || run(conn, receiver));
        Worker {
            sender: Some(sender),
            thread: Some(thread),
            batch: Batch::default(),
        }
    }

    /// Runs `ddl` in its turn.
    pub fn ddl(&mut self, ddl: String) -> Result<()> {
        self.push(Op::Ddl(ddl), &[])
    }

    /// Inserts a row of `table`, `values` for the `columns` named, in its turn.
    pub fn insert(
        &mut self,
        table: &'static str,
        columns: &'static str,
        values: &[&dyn ToSql],
    ) -> Result<()> {
        let op = Op::Insert {
            table,
            columns,
            values: values.len(),
        };
        self.push(op, values)
            .with_context(|| format!("inserting into {table}"))
    }

    /// Runs `sql` with `values` in its turn.
    pub fn execute(&mut self, sql: &str, values: &[&dyn ToSql]) -> Result<()> {
        let op = Op::Execute {
            sql: sql.to_string(),
            values: values.len(),
        };
        self.push(op, values)
            .with_context(|| format!("running {sql}"))
    }

    fn push(&mut self, op: Op, values: &[&dyn ToSql]) -> Result<()> {
        for v in values {
            self.batch.values.push(owned(v.to_sql()?)?);
        }
        self.batch.ops.push(op);
        if self.batch.ops.len() >= BATCH {
            self.hand_over()?;
        }
        Ok(())
    }

    /// Sends the batch; on a failure of the thread, its error.
    fn hand_over(&mut self) -> Result<()> {
        // The next batch as large as this one, so that filling it never copies it.
        let next = Batch {
            ops: Vec::with_capacity(self.batch.ops.len()),
            values: Vec::with_capacity(self.batch.values.len()),
        };
        let batch = std::mem::replace(&mut self.batch, next);
        let sent = self.sender.as_ref().map(|s| s.send(batch));
        match sent {
            Some(Ok(())) => Ok(()),
            // The thread stopped: it says why.
            _ => self.join().map(drop),
        }
    }

    /// Runs what is left and gives the connection back.
    pub fn finish(mut self) -> Result<Connection> {
        self.hand_over()?;
        self.join()
    }

    fn join(&mut self) -> Result<Connection> {
        self.sender = None;
        let thread = self
            .thread
            .take()
            .context("the export's writer has stopped")?;
        match thread.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.sender = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A value as the worker keeps it until its statement runs.
fn owned(value: ToSqlOutput<'_>) -> rusqlite::Result<Value> {
    Ok(match value {
        ToSqlOutput::Borrowed(v) => match v {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(i) => Value::Integer(i),
            ValueRef::Real(r) => Value::Real(r),
            ValueRef::Text(t) => match std::str::from_utf8(t) {
                Ok(text) => Value::Text(text.to_string()),
                Err(_) => Value::Blob(t.to_vec()),
            },
            ValueRef::Blob(b) => Value::Blob(b.to_vec()),
        },
        ToSqlOutput::Owned(v) => v,
        #[allow(unreachable_patterns)]
        _ => {
            let unsupported = "a value kind the export writer does not take".into();
            return Err(rusqlite::Error::ToSqlConversionFailure(unsupported));
        }
    })
}

/// Runs every batch received on `conn`, in order; gives the connection back at the end.
fn run(conn: Connection, batches: Receiver<Batch>) -> Result<Connection> {
    {
        let mut inserts: FxHashMap<(usize, usize), Statement<'_>> = FxHashMap::default();
        for batch in batches {
            let mut values = batch.values.into_iter();
            for op in batch.ops {
                match op {
                    Op::Ddl(ddl) => conn.execute_batch(&ddl)?,
                    Op::Insert {
                        table,
                        columns,
                        values: n,
                    } => {
                        let key = (table.as_ptr() as usize, columns.as_ptr() as usize);
                        let statement = match inserts.get_mut(&key) {
                            Some(statement) => statement,
                            None => {
                                let marks = vec!["?"; n].join(",");
                                let sql =
                                    format!("INSERT INTO {table} ({columns}) VALUES ({marks})");
                                inserts.entry(key).or_insert(conn.prepare(&sql)?)
                            }
                        };
                        let row = rusqlite::params_from_iter(values.by_ref().take(n));
                        statement
                            .execute(row)
                            .with_context(|| format!("inserting into {table}"))?;
                    }
                    Op::Execute { sql, values: n } => {
                        let params = rusqlite::params_from_iter(values.by_ref().take(n));
                        conn.execute(&sql, params)
                            .with_context(|| format!("running {sql}"))?;
                    }
                }
            }
        }
    }
    Ok(conn)
}
