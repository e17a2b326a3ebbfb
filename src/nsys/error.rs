//! Errors of the reader. Every variant names the file, and where it helps the table, row and column,
//! so that the one line a user sees says what was wrong and where.

use std::path::PathBuf;

/// Something in an input made it unreadable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The path does not exist or cannot be read.
    #[error("{path}: cannot read: {cause}")]
    Io {
        /// The input.
        path: PathBuf,
        /// What the operating system said (in the message, not repeated as a source).
        cause: std::io::Error,
    },
    /// The path is a directory, not a file.
    #[error("{path}: is a directory, not an nsys SQLite export")]
    IsDirectory {
        /// The input.
        path: PathBuf,
    },
    /// The file is empty.
    #[error("{path}: the file is empty, not an nsys SQLite export")]
    Empty {
        /// The input.
        path: PathBuf,
    },
    /// The file is not a SQLite database at all.
    #[error("{path}: not a SQLite database (is it the .nsys-rep instead of the exported .sqlite?)")]
    NotSqlite {
        /// The input.
        path: PathBuf,
    },
    /// A SQLite database that holds none of the tables of an nsys export.
    #[error("{path}: a SQLite database but not an nsys export ({reason})")]
    NotAnExport {
        /// The input.
        path: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// The events being sorted could not be written to temporary files.
    #[error("{path}: cannot sort its events: {cause}")]
    Spill {
        /// The input being read.
        path: PathBuf,
        /// What the operating system said.
        cause: std::io::Error,
    },
    /// The events read back (from temporary files, or a part file) could not be used.
    #[error("{path}: reading its events back failed: {cause}")]
    Events {
        /// The input.
        path: PathBuf,
        /// What was wrong.
        cause: std::io::Error,
    },
    /// An export that holds no CUDA or NVTX events at all.
    #[error(
        "{path}: the export holds no CUDA kernels, memory operations, API calls or NVTX events (was the capture empty, or run without --trace=cuda,nvtx?)"
    )]
    NoEvents {
        /// The input.
        path: PathBuf,
    },
    /// SQLite failed while reading (truncated or corrupted file, I/O error).
    #[error("{path}: reading {table} failed: {cause} ({})", sqlite_hint(cause))]
    Sqlite {
        /// The input.
        path: PathBuf,
        /// The table being read, or what was being done.
        table: String,
        /// SQLite's error.
        cause: rusqlite::Error,
    },
    /// A column this reader needs is missing from a table that is present.
    #[error("{path}: table {table} has no column {column}")]
    MissingColumn {
        /// The input.
        path: PathBuf,
        /// The table.
        table: &'static str,
        /// The column.
        column: &'static str,
    },
    /// A value has the wrong type or is NULL where a value is required.
    #[error("{path}: {table} row {row}: column {column} {problem}")]
    BadValue {
        /// The input.
        path: PathBuf,
        /// The table.
        table: &'static str,
        /// The SQLite rowid.
        row: i64,
        /// The column.
        column: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// A clock value no capture can have.
    #[error("{path}: {field} = {value} is out of range ({expected}); the file is corrupt")]
    OutOfRange {
        /// The input.
        path: PathBuf,
        /// The table and column.
        field: &'static str,
        /// The value read.
        value: i64,
        /// What it must be.
        expected: &'static str,
    },
    /// An interval ends before it starts.
    #[error("{path}: {table} row {row}: end {end} is before start {start}")]
    ReversedInterval {
        /// The input.
        path: PathBuf,
        /// The table.
        table: &'static str,
        /// The SQLite rowid.
        row: i64,
        /// Start, ns.
        start: i64,
        /// End, ns.
        end: i64,
    },
    /// A row refers to a StringIds id that does not exist.
    #[error(
        "{path}: {table} row {row}: column {column} refers to string id {id}, which StringIds lacks"
    )]
    MissingString {
        /// The input.
        path: PathBuf,
        /// The table.
        table: &'static str,
        /// The SQLite rowid.
        row: i64,
        /// The column.
        column: &'static str,
        /// The missing id.
        id: i64,
    },
    /// A time is out of the range nsys-lens accepts on the merged clock (±2^61 ns, about 73
    /// years either side of the origin, so that any difference of two times fits 64 bits).
    #[error(
        "{path}: {table} row {row}: time {time} is out of range once shifted by {offset} ns onto the merged clock (times must lie within ±2^61 ns; this overflow points to a corrupt value)"
    )]
    TimeOverflow {
        /// The input.
        path: PathBuf,
        /// The table.
        table: &'static str,
        /// The SQLite rowid.
        row: i64,
        /// The time in the file.
        time: i64,
        /// The clock offset.
        offset: i64,
    },
    /// Two inputs hold the same process (same host and pid).
    #[error(
        "{second}: holds host {host} pid {pid}, which {first} holds too (the same report given twice?)"
    )]
    DuplicateProcess {
        /// The earlier input.
        first: PathBuf,
        /// The later input.
        second: PathBuf,
        /// The host name.
        host: String,
        /// The pid.
        pid: u32,
    },
    /// A `.nsys-rep` could not be exported to SQLite.
    #[error("{path}: {message}")]
    Export {
        /// The `.nsys-rep`.
        path: PathBuf,
        /// What went wrong, with the command to run by hand.
        message: String,
    },
}

/// The reader's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a SQLite failure most likely means for an export.
fn sqlite_hint(cause: &rusqlite::Error) -> &'static str {
    match cause.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            "another program is writing the file and holds its lock: wait for it, or read a copy"
        }
        _ => "is the file truncated or corrupted?",
    }
}
