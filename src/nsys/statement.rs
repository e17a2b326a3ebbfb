//! A query read through SQLite's C API: the row loop every table read runs, tens of millions
//! of times per export.
//!
//! rusqlite's `Row::get_ref` asks SQLite for the statement's column count before each value
//! and wraps each call in its own; reading a column that way cost about as much as SQLite's
//! virtual machine spent producing it (round 20 of `docs/performance.md`). [`Statement`] asks
//! for the count once, when it is prepared, and takes each value once, then its type and its
//! content from it (rusqlite asks SQLite for the column twice). Everything else (opening, the schema, `StringIds`)
//! stays with rusqlite, whose connection the statement borrows.

use rusqlite::Connection;
use rusqlite::ffi;
use rusqlite::types::ValueRef;
use std::ffi::{CStr, c_int};
use std::marker::PhantomData;
use std::ptr::NonNull;

/// A prepared query on a borrowed connection, stepped row by row.
pub(crate) struct Statement<'c> {
    db: *mut ffi::sqlite3,
    stmt: NonNull<ffi::sqlite3_stmt>,
    columns: usize,
    /// Whether the last row was passed (SQLite would run the query again on the next step).
    done: bool,
    /// The connection outlives the statement.
    _conn: PhantomData<&'c Connection>,
}

impl<'c> Statement<'c> {
    /// Prepares `sql` (one statement) on `conn`.
    pub fn prepare(conn: &'c Connection, sql: &str) -> rusqlite::Result<Statement<'c>> {
        // SAFETY: the handle is only used while `conn` is borrowed (the statement's lifetime),
        // on this thread (the statement is neither `Send` nor `Sync`), and never closed here.
        let db = unsafe { conn.handle() };
        let len = c_int::try_from(sql.len()).map_err(|_| failure(ffi::SQLITE_TOOBIG, None))?;
        let mut stmt = std::ptr::null_mut();
        // SAFETY: `sql` is valid for `len` bytes; SQLite writes the statement into `stmt`.
        let rc = unsafe {
            ffi::sqlite3_prepare_v2(
                db,
                sql.as_ptr().cast(),
                len,
                &mut stmt,
                std::ptr::null_mut(),
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(error(db, rc));
        }
        let stmt =
            NonNull::new(stmt).ok_or_else(|| failure(ffi::SQLITE_MISUSE, Some("no statement")))?;
        // SAFETY: `stmt` is a statement just prepared.
        let columns = unsafe { ffi::sqlite3_column_count(stmt.as_ptr()) };
        Ok(Statement {
            db,
            stmt,
            columns: usize::try_from(columns).unwrap_or(0),
            done: false,
            _conn: PhantomData,
        })
    }

    /// Steps to the next row: whether there is one (never again once there was none).
    pub fn step(&mut self) -> rusqlite::Result<bool> {
        if self.done {
            return Ok(false);
        }
        // SAFETY: the statement is live; no value of the previous row is borrowed (`&mut self`).
        match unsafe { ffi::sqlite3_step(self.stmt.as_ptr()) } {
            ffi::SQLITE_ROW => Ok(true),
            ffi::SQLITE_DONE => {
                self.done = true;
                Ok(false)
            }
            rc => Err(error(self.db, rc)),
        }
    }

    /// Column `column` (from 0) of the current row, valid until the next step; NULL past the
    /// last column.
    #[inline]
    pub fn value(&self, column: usize) -> ValueRef<'_> {
        if column >= self.columns {
            return ValueRef::Null;
        }
        // SAFETY: the statement is on a row (`step` returned true before any call here) and
        // `column` is one of its columns. SQLite calls the value unprotected: reading it is not
        // thread-safe, and this statement is used on one thread, its connection borrowed (not
        // `Sync`). Each value is read in its own type (no conversion), text and blobs before
        // their length, as SQLite documents; the bytes live until the next step, which needs
        // `&mut self` and so ends the borrow this value holds.
        unsafe {
            let value = ffi::sqlite3_column_value(self.stmt.as_ptr(), column as c_int);
            match ffi::sqlite3_value_type(value) {
                ffi::SQLITE_INTEGER => ValueRef::Integer(ffi::sqlite3_value_int64(value)),
                ffi::SQLITE_FLOAT => ValueRef::Real(ffi::sqlite3_value_double(value)),
                ffi::SQLITE_TEXT => {
                    let text = ffi::sqlite3_value_text(value);
                    ValueRef::Text(bytes(text, ffi::sqlite3_value_bytes(value)))
                }
                ffi::SQLITE_BLOB => {
                    let blob = ffi::sqlite3_value_blob(value).cast::<u8>();
                    ValueRef::Blob(bytes(blob, ffi::sqlite3_value_bytes(value)))
                }
                _ => ValueRef::Null,
            }
        }
    }

    /// Column `column` of the current row when it is an integer or NULL (most columns read are):
    /// `Ok(None)` for NULL; any other value as [`Statement::value`] gives it.
    #[inline]
    pub fn integer(&self, column: usize) -> Result<Option<i64>, ValueRef<'_>> {
        if column >= self.columns {
            return Ok(None);
        }
        // SAFETY: as in `value`; an integer is read in its own type.
        unsafe {
            let value = ffi::sqlite3_column_value(self.stmt.as_ptr(), column as c_int);
            match ffi::sqlite3_value_type(value) {
                ffi::SQLITE_INTEGER => Ok(Some(ffi::sqlite3_value_int64(value))),
                ffi::SQLITE_NULL => Ok(None),
                _ => Err(self.value(column)),
            }
        }
    }
}

impl Drop for Statement<'_> {
    fn drop(&mut self) {
        // SAFETY: the statement is live and finalized once, here.
        unsafe { ffi::sqlite3_finalize(self.stmt.as_ptr()) };
    }
}

/// The `len` bytes at `data` (none when SQLite gives a null pointer: an empty blob).
///
/// # Safety
/// `data` is null or points to `len` bytes that live as long as `'a`.
unsafe fn bytes<'a>(data: *const u8, len: c_int) -> &'a [u8] {
    match (data.is_null(), usize::try_from(len)) {
        (false, Ok(len)) => unsafe { std::slice::from_raw_parts(data, len) },
        _ => &[],
    }
}

/// The error SQLite reports on `db` for result code `rc`, as rusqlite reports it.
fn error(db: *mut ffi::sqlite3, rc: c_int) -> rusqlite::Error {
    // SAFETY: `db` is a live connection; the message is copied before any other call on it.
    let message = unsafe {
        let text = ffi::sqlite3_errmsg(db);
        (!text.is_null()).then(|| CStr::from_ptr(text).to_string_lossy().into_owned())
    };
    rusqlite::Error::SqliteFailure(ffi::Error::new(rc), message)
}

/// An error of our own making with result code `rc`, as rusqlite reports SQLite's.
fn failure(rc: c_int, message: Option<&str>) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(ffi::Error::new(rc), message.map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::Statement;
    use rusqlite::Connection;
    use rusqlite::types::ValueRef;

    /// Every type reads as rusqlite reads it (and as an integer when it is one or NULL), NULL
    /// past the last column, and a bad query or a failing step is an error with SQLite's
    /// message.
    #[test]
    fn values_read_as_rusqlite_reads_them() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE t(a, b, c, d, e);
             INSERT INTO t VALUES (1, -2.5, 'naïve', x'00ff', NULL);
             INSERT INTO t VALUES (9223372036854775807, 0.0, '', x'', 'x');",
        )
        .unwrap();
        let sql = "SELECT a, b, c, d, e FROM t ORDER BY rowid";
        let mut ours = Statement::prepare(&conn, sql).unwrap();
        let mut theirs = conn.prepare(sql).unwrap();
        let mut rows = theirs.query([]).unwrap();
        let mut n = 0;
        while ours.step().unwrap() {
            let row = rows.next().unwrap().expect("as many rows");
            for i in 0..5 {
                let theirs = row.get_ref(i).unwrap();
                assert_eq!(ours.value(i), theirs, "row {n}, column {i}");
                let integer = match theirs {
                    ValueRef::Integer(v) => Ok(Some(v)),
                    ValueRef::Null => Ok(None),
                    other => Err(other),
                };
                assert_eq!(ours.integer(i), integer, "row {n}, column {i}");
            }
            assert_eq!(ours.value(5), ValueRef::Null);
            assert_eq!(ours.integer(5), Ok(None));
            n += 1;
        }
        assert!(rows.next().unwrap().is_none());
        assert_eq!(n, 2);
        assert!(!ours.step().unwrap(), "a finished statement stays finished");

        let bad = Statement::prepare(&conn, "SELECT nope FROM t")
            .err()
            .unwrap();
        assert!(bad.to_string().contains("no such column: nope"), "{bad}");
        let mut failing = Statement::prepare(&conn, "SELECT abs(-9223372036854775808)").unwrap();
        let failed = failing.step().unwrap_err();
        assert!(failed.to_string().contains("integer overflow"), "{failed}");
    }
}
