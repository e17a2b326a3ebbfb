//! Reading one large table over several connections at once (issue 17): the table's rowids are
//! cut into ranges, workers read the ranges (each on a connection of its own) into row buffers,
//! and the caller consumes the buffers in rowid order. What it sees is exactly what one scan in
//! rowid order gives: the same rows, in the same order, and the same first error.

use super::error::Result;
use super::report::Report;
use crate::model::Warnings;
use std::sync::{Condvar, Mutex};

/// Rows per range: large enough that a range costs far more than its query's setup, small
/// enough that the buffers in flight stay a few megabytes.
pub const CHUNK_ROWS: i64 = 1 << 14;

/// The rows of a table to read: all of them, or an inclusive rowid range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rows(Option<(i64, i64)>);

impl Rows {
    /// Every row.
    pub(crate) const ALL: Rows = Rows(None);

    /// The `WHERE` clause that selects these rows.
    pub(crate) fn tail(self) -> String {
        match self.0 {
            None => String::new(),
            Some((first, last)) => format!("WHERE rowid BETWEEN {first} AND {last}"),
        }
    }
}

/// How a report's large tables are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunking {
    /// Connections reading at once (1: one sequential scan on the report's own connection).
    pub workers: usize,
    /// Rows per range.
    pub rows: i64,
}

impl Chunking {
    /// How `reports` reports read by `threads` threads at once share them: with fewer reports
    /// than threads, each report's large tables are read by `threads / reports` connections.
    pub fn shared(threads: usize, reports: usize, rows: i64) -> Chunking {
        Chunking {
            workers: threads.max(1) / reports.max(1),
            rows,
        }
    }

    /// The ranges of `table` to read: None when one scan is as good (one worker, an absent or
    /// small table).
    pub(crate) fn ranges(self, report: &Report, table: &'static str) -> Result<Option<Vec<Rows>>> {
        if self.workers <= 1 || !report.schema.has_table(table) {
            return Ok(None);
        }
        let sql = bounds_sql(table);
        let bounds: (Option<i64>, Option<i64>) = report
            .conn
            .query_row(&sql, [], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(|e| report.sqlite_error(table, e))?;
        let (Some(first), Some(last)) = bounds else {
            return Ok(None);
        };
        let size = self.rows.max(1);
        if last - first < size {
            return Ok(None);
        }
        let ranges = (0..)
            .map(|i| first.saturating_add(i * size))
            .take_while(|&start| start <= last)
            .map(|start| Rows(Some((start, start.saturating_add(size - 1).min(last)))))
            .collect();
        Ok(Some(ranges))
    }
}

/// A row reader: reads the given rows of a table on a connection, handing each to the sink.
pub(crate) trait ReadRows<R>:
    Fn(&Report, Rows, &mut Warnings, &mut dyn FnMut(R)) -> Result<u64> + Sync
{
}

impl<R, F> ReadRows<R> for F where
    F: Fn(&Report, Rows, &mut Warnings, &mut dyn FnMut(R)) -> Result<u64> + Sync
{
}

/// Reads `table` with `chunking` and hands every row to `apply`, in rowid order: one scan on the
/// report's own connection, or ranges read by workers ([`read_in_order`]). Either way the rows,
/// their order, the warnings and the first error are the same. Returns the number of rows.
pub(crate) fn read_table<R: Send>(
    report: &Report,
    chunking: Chunking,
    table: &'static str,
    warnings: &mut Warnings,
    read: impl ReadRows<R>,
    mut apply: impl FnMut(R) -> Result<()>,
) -> Result<u64> {
    if let Some(ranges) = chunking.ranges(report, table)? {
        return read_in_order(report, chunking.workers, &ranges, warnings, read, apply);
    }
    let mut failed = None;
    let count = read(report, Rows::ALL, warnings, &mut |row| {
        if failed.is_none()
            && let Err(e) = apply(row)
        {
            failed = Some(e);
        }
    });
    // A row that failed to apply came before any row that failed to read.
    match failed {
        Some(e) => Err(e),
        None => count,
    }
}

/// An `apply` for rows that cannot fail.
pub(crate) fn infallible<R>(mut sink: impl FnMut(R)) -> impl FnMut(R) -> Result<()> {
    move |row| {
        sink(row);
        Ok(())
    }
}

/// What a worker read from one range: its rows, its warnings, and the error that stopped it
/// (after the rows before it).
struct Chunk<R> {
    rows: Vec<R>,
    warnings: Warnings,
    outcome: Result<u64>,
}

/// The state workers and the consumer share.
struct Shared<R> {
    /// Read ranges not yet consumed, by range index.
    done: Vec<Option<Chunk<R>>>,
    /// The next range to hand out.
    next: usize,
    /// Ranges consumed so far.
    consumed: usize,
    /// Set when the consumer stops early: workers stop too.
    stop: bool,
}

/// Reads `ranges` of a table with `workers` connections (`read` reads one range on a connection,
/// pushing its rows) and hands every row to `apply` in range order, merging each range's
/// warnings into `warnings` as it is consumed. Returns the number of rows.
pub(crate) fn read_in_order<R: Send>(
    report: &Report,
    workers: usize,
    ranges: &[Rows],
    warnings: &mut Warnings,
    read: impl ReadRows<R>,
    mut apply: impl FnMut(R) -> Result<()>,
) -> Result<u64> {
    // At most this many ranges are read ahead of the consumer, which bounds the buffers.
    let ahead = 2 * workers;
    let shared = Mutex::new(Shared {
        done: (0..ranges.len()).map(|_| None).collect(),
        next: 0,
        consumed: 0,
        stop: false,
    });
    let changed = Condvar::new();
    let lock = || shared.lock().unwrap_or_else(|e| e.into_inner());
    let work = |connection: Report| loop {
        let index = {
            let mut state = lock();
            while !state.stop && state.next < ranges.len() && state.next >= state.consumed + ahead {
                state = changed.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            if state.stop || state.next >= ranges.len() {
                return;
            }
            state.next += 1;
            state.next - 1
        };
        let mut chunk = Chunk {
            rows: Vec::new(),
            warnings: Warnings::default(),
            outcome: Ok(0),
        };
        let rows = &mut chunk.rows;
        chunk.outcome = read(
            &connection,
            ranges[index],
            &mut chunk.warnings,
            &mut |row| rows.push(row),
        );
        lock().done[index] = Some(chunk);
        changed.notify_all();
    };
    let mut consume = |warnings: &mut Warnings| -> Result<u64> {
        let mut count = 0;
        for index in 0..ranges.len() {
            let chunk = {
                let mut state = lock();
                loop {
                    if let Some(chunk) = state.done[index].take() {
                        state.consumed = index + 1;
                        break chunk;
                    }
                    state = changed.wait(state).unwrap_or_else(|e| e.into_inner());
                }
            };
            changed.notify_all();
            for row in chunk.rows {
                apply(row)?;
            }
            warnings.extend(&chunk.warnings);
            count += chunk.outcome?;
        }
        Ok(count)
    };
    // Connections are opened here, so that a worker never fails to start.
    let connections = (0..workers.min(ranges.len()))
        .map(|_| report.reopen())
        .collect::<Result<Vec<Report>>>()?;
    std::thread::scope(|scope| {
        for connection in connections {
            scope.spawn(|| work(connection));
        }
        let result = consume(warnings);
        lock().stop = true;
        changed.notify_all();
        result
    })
}

/// The first and last rowid of `table`, each read at an end of its B-tree: SQLite finds a lone
/// `min()` or `max()` of the rowid without a scan, but scans the whole table for both in one
/// query.
fn bounds_sql(table: &str) -> String {
    format!("SELECT (SELECT min(rowid) FROM \"{table}\"), (SELECT max(rowid) FROM \"{table}\")")
}

#[cfg(test)]
mod tests {
    use super::bounds_sql;

    /// What SQLite plans for `sql` on a table `t`: one line per step.
    fn plan(sql: &str) -> Vec<String> {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute("CREATE TABLE t (start INTEGER, end INTEGER)", [])
            .unwrap();
        let mut statement = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let rows = statement
            .query_map([], |row| row.get::<_, String>(3))
            .unwrap();
        rows.map(Result::unwrap).collect()
    }

    #[test]
    fn the_rowid_bounds_are_read_without_a_scan() {
        let steps = plan(&bounds_sql("t"));
        assert!(steps.iter().all(|s| !s.starts_with("SCAN t")), "{steps:?}");
        assert_eq!(
            steps.iter().filter(|s| s.starts_with("SEARCH t")).count(),
            2
        );
        // The one query both ends would take scans: the test can tell.
        let both = plan("SELECT min(rowid), max(rowid) FROM t");
        assert!(both.iter().any(|s| s.starts_with("SCAN t")), "{both:?}");
    }
}
