//! How far reading has come, for a progress line: the rows read so far by every report of this
//! process and about how many there are (each event table's largest rowid, known when a report
//! is opened, at no cost).

use std::sync::atomic::{AtomicU64, Ordering};

static READ: AtomicU64 = AtomicU64::new(0);
static EXPECTED: AtomicU64 = AtomicU64::new(0);

/// Rows are counted in batches of this many (one atomic add per batch, not per row).
pub(crate) const BATCH: u64 = 4096;

/// (rows read, rows expected) since the last [`reset`].
pub fn rows() -> (u64, u64) {
    (
        READ.load(Ordering::Relaxed),
        EXPECTED.load(Ordering::Relaxed),
    )
}

/// Starts counting afresh (before reading a new set of reports).
pub fn reset() {
    READ.store(0, Ordering::Relaxed);
    EXPECTED.store(0, Ordering::Relaxed);
}

/// Adds rows a report holds.
pub(crate) fn expect(rows: u64) {
    EXPECTED.fetch_add(rows, Ordering::Relaxed);
}

/// Adds rows read.
pub(crate) fn advance(rows: u64) {
    READ.fetch_add(rows, Ordering::Relaxed);
}
