//! Sorting more records than memory should hold: an external merge sort under a memory budget.
//!
//! A [`Sorter`] keeps records in memory until the [`Budget`] it shares with other sorters is
//! spent, then sorts its buffer and writes it as a *run* to the budget's spill file: one unnamed
//! temporary file (removed by the operating system when closed, so no exit path, interrupt or
//! crash leaves one behind) that every run of the budget is appended to. Runs merge as they
//! accumulate, [`MAX_RUNS`] runs of one size into one run of the next, so that each record is
//! written a logarithmic number of times and reading back needs few buffers. [`Sorter::finish`] gives a [`Sorted`] set: the runs plus the sorted remainder in
//! memory, read back as one ordered stream by a k-way merge ([`Sorted::iter`]) as often as
//! needed, each reader with its own small buffer per run.
//!
//! Records order by their own `Ord`, which must be total over every field: two records that
//! compare equal are identical, so the result does not depend on where the runs were cut, and a
//! small budget gives exactly the order a large one does.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Runs of one size a sorter holds before it merges them into one larger run.
pub const MAX_RUNS: usize = 16;

/// A fixed-size record that can be written to a run and read back.
pub trait Record: Copy + Ord + Send + Sync {
    /// Encoded size in bytes.
    const SIZE: usize;
    /// Writes the record into `out` (exactly [`Record::SIZE`] bytes).
    fn encode(&self, out: &mut [u8]);
    /// Reads a record written by [`Record::encode`].
    fn decode(bytes: &[u8]) -> Self;
}

/// The memory that the sorters sharing it may hold, in bytes of records, and the file their
/// runs go to.
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    used: AtomicUsize,
    /// The spill file, created with the first run, and its length.
    file: Mutex<Option<(Arc<File>, u64)>>,
}

impl Budget {
    /// The budget a command gets unless told otherwise: 128 MiB.
    pub const DEFAULT: usize = 128 << 20;

    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Arc<Budget> {
        Arc::new(Budget {
            limit: limit.max(1),
            used: AtomicUsize::new(0),
            file: Mutex::new(None),
        })
    }

    /// Reserves `bytes` at the end of the spill file: the file and where they go.
    fn reserve(&self, bytes: u64) -> io::Result<(Arc<File>, u64)> {
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let (f, end) = match &mut *file {
            Some(open) => open,
            None => file.insert((Arc::new(temporary_file()?), 0)),
        };
        let at = *end;
        *end += bytes;
        Ok((f.clone(), at))
    }

    /// The limit, bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Takes `bytes`; true when that went over the limit.
    fn take(&self, bytes: usize) -> bool {
        self.used.fetch_add(bytes, Ordering::Relaxed) + bytes > self.limit
    }

    /// Gives `bytes` back.
    fn give(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// An anonymous temporary file in `$TMPDIR` (unlinked at once, so nothing is left of it
/// whatever ends the process).
pub fn temporary_file() -> io::Result<File> {
    tempfile::tempfile().map_err(spill_error)
}

/// A failure to create or write a temporary file, saying where and what to do about it.
fn spill_error(cause: io::Error) -> io::Error {
    let message = format!(
        "cannot write temporary files in {} ($TMPDIR): {cause}; point TMPDIR at a directory \
         with room, or raise --memory-budget to keep more in memory",
        std::env::temp_dir().display()
    );
    io::Error::new(cause.kind(), message)
}

/// One sorted run on disk.
#[derive(Debug)]
struct Run {
    /// How many merges made it (0: a spilled buffer).
    level: u32,
    file: Arc<File>,
    /// Where the run starts in the file.
    offset: u64,
    records: u64,
}

/// Collects records, spilling sorted runs when the budget is spent.
pub struct Sorter<T: Record> {
    buffer: Vec<T>,
    runs: Vec<Run>,
    budget: Arc<Budget>,
    /// Records pushed so far.
    len: u64,
    /// Set when a spill failed: later records are dropped, not sorted and retried.
    failed: Option<io::ErrorKind>,
}

impl<T: Record> Sorter<T> {
    /// An empty sorter drawing on `budget`.
    pub fn new(budget: Arc<Budget>) -> Sorter<T> {
        Sorter {
            buffer: Vec::new(),
            runs: Vec::new(),
            budget,
            len: 0,
            failed: None,
        }
    }

    /// Adds a record; writes the buffer out as a run when the budget is spent. After a failed
    /// write every push fails at once (the sort is not retried on each record).
    pub fn push(&mut self, record: T) -> io::Result<()> {
        if let Some(kind) = self.failed {
            return Err(io::Error::new(kind, "an earlier spill failed"));
        }
        self.buffer.push(record);
        self.len += 1;
        if self.budget.take(size_of::<T>()) {
            let spilled = self.spill();
            if let Err(e) = &spilled {
                self.failed = Some(e.kind());
            }
            spilled?;
        }
        Ok(())
    }

    /// Sorts the buffer and writes it to a new run, freeing its memory; merges the last
    /// [`MAX_RUNS`] runs into one while they are of one level.
    fn spill(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        self.buffer.sort_unstable();
        let ordered = self.buffer.iter().map(|&r| Ok(r));
        let run = write_run(&self.budget, 0, self.buffer.len() as u64, ordered)?;
        self.runs.push(run);
        self.budget.give(self.buffer.len() * size_of::<T>());
        self.buffer = Vec::new();
        while self.runs.len() >= MAX_RUNS {
            let tail = self.runs.len() - MAX_RUNS;
            let level = self.runs[tail].level;
            if self.runs[tail..].iter().any(|r| r.level != level) {
                break;
            }
            let runs: Vec<Run> = self.runs.drain(tail..).collect();
            let records = runs.iter().map(|r| r.records).sum();
            let merged = merge(runs.iter().map(Cursor::<T>::run).collect());
            self.runs
                .push(write_run(&self.budget, level + 1, records, merged)?);
        }
        Ok(())
    }

    /// Ends the input: the records in order. Those of a sorter that never spilled stay in
    /// memory; once it spilled (its records outgrew the budget), the last of them go to disk
    /// too, so that the passes that read them back hold only a buffer per run.
    pub fn finish(mut self) -> Sorted<T> {
        if !self.runs.is_empty() && self.failed.is_none() {
            // A failed write leaves the records in memory, sorted, where they serve as well.
            let _ = self.spill();
        }
        self.buffer.sort_unstable();
        self.buffer.shrink_to_fit();
        Sorted {
            memory: std::mem::take(&mut self.buffer),
            runs: std::mem::take(&mut self.runs),
            budget: self.budget.clone(),
            len: self.len,
        }
    }
}

impl<T: Record> Drop for Sorter<T> {
    fn drop(&mut self) {
        self.budget.give(self.buffer.len() * size_of::<T>());
    }
}

/// Records in order: runs on disk and a sorted remainder in memory.
pub struct Sorted<T: Record> {
    memory: Vec<T>,
    runs: Vec<Run>,
    budget: Arc<Budget>,
    len: u64,
}

impl<T: Record> Default for Sorted<T> {
    fn default() -> Self {
        Sorted {
            memory: Vec::new(),
            runs: Vec::new(),
            budget: Budget::new(1),
            len: 0,
        }
    }
}

impl<T: Record> std::fmt::Debug for Sorted<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sorted")
            .field("len", &self.len)
            .field("runs", &self.runs.len())
            .finish()
    }
}

impl<T: Record> Drop for Sorted<T> {
    fn drop(&mut self) {
        self.budget.give(self.memory.len() * size_of::<T>());
    }
}

impl<T: Record> Sorted<T> {
    /// A sorted set of the given records, all in memory (not counted against any budget).
    pub fn from_vec(mut records: Vec<T>) -> Sorted<T> {
        records.sort_unstable();
        Sorted {
            len: records.len() as u64,
            memory: records,
            runs: Vec::new(),
            budget: Budget::new(1),
        }
    }

    /// How many records.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many runs went to disk.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Every record in order: a merge of the runs and the memory, reading each run through a
    /// buffer of its own. Fails only on a read error of a run.
    pub fn iter(&self) -> SortedIter<'_, T> {
        let mut cursors: Vec<Cursor<'_, T>> = self.runs.iter().map(Cursor::run).collect();
        cursors.push(Cursor::memory(&self.memory));
        merge(cursors)
    }

    /// Writes every record, in order, to `out`; returns how many.
    pub fn write_to(&self, out: &mut impl Write) -> io::Result<u64> {
        let mut bytes = vec![0u8; T::SIZE];
        let mut n = 0;
        for record in self.iter() {
            record?.encode(&mut bytes);
            out.write_all(&bytes)?;
            n += 1;
        }
        Ok(n)
    }

    /// `records` records written by [`Sorted::write_to`], read from `file` at `offset` as one
    /// run (the file may hold other data around them).
    pub fn from_file(file: Arc<File>, offset: u64, records: u64) -> Sorted<T> {
        Sorted {
            memory: Vec::new(),
            runs: vec![Run {
                level: 0,
                file,
                offset,
                records,
            }],
            budget: Budget::new(1),
            len: records,
        }
    }
}

/// Reads one run (or the memory) in order.
enum Cursor<'s, T> {
    Memory(std::slice::Iter<'s, T>),
    Run {
        file: &'s File,
        /// The file position of the next read, and of the run's end.
        at: u64,
        end: u64,
        buf: Vec<u8>,
        pos: usize,
    },
}

/// Bytes a run's reader holds at once.
const RUN_BUFFER: usize = 1 << 15;

/// Writes `records` records, in order, as a run of `level` at the end of the budget's spill
/// file.
fn write_run<T: Record>(
    budget: &Budget,
    level: u32,
    records: u64,
    ordered: impl Iterator<Item = io::Result<T>>,
) -> io::Result<Run> {
    let (file, offset) = budget.reserve(records * T::SIZE as u64)?;
    let mut at = offset;
    let mut block = Vec::with_capacity(RUN_BUFFER);
    let mut bytes = vec![0u8; T::SIZE];
    for record in ordered {
        record?.encode(&mut bytes);
        block.extend_from_slice(&bytes);
        if block.len() + T::SIZE > RUN_BUFFER {
            file.write_all_at(&block, at).map_err(spill_error)?;
            at += block.len() as u64;
            block.clear();
        }
    }
    file.write_all_at(&block, at).map_err(spill_error)?;
    Ok(Run {
        level,
        file,
        offset,
        records,
    })
}

/// The records of `cursors`, merged in order.
fn merge<T: Record>(mut cursors: Vec<Cursor<'_, T>>) -> SortedIter<'_, T> {
    let mut heap = BinaryHeap::with_capacity(cursors.len());
    let mut error = None;
    // With one cursor (nothing spilled) records are read straight from it, without a heap.
    let merged = if cursors.len() > 1 {
        &mut cursors[..]
    } else {
        &mut []
    };
    for (i, cursor) in merged.iter_mut().enumerate() {
        match cursor.next() {
            Ok(Some(record)) => heap.push(Reverse((record, i))),
            Ok(None) => {}
            Err(e) => error = error.or(Some(e)),
        }
    }
    SortedIter {
        cursors,
        heap,
        error,
    }
}

impl<'s, T: Record> Cursor<'s, T> {
    fn memory(records: &'s [T]) -> Self {
        Cursor::Memory(records.iter())
    }

    fn run(run: &'s Run) -> Self {
        Cursor::Run {
            file: &run.file,
            at: run.offset,
            end: run.offset + run.records * T::SIZE as u64,
            buf: Vec::new(),
            pos: 0,
        }
    }

    fn next(&mut self) -> io::Result<Option<T>> {
        match self {
            Cursor::Memory(iter) => Ok(iter.next().copied()),
            Cursor::Run {
                file,
                at,
                end,
                buf,
                pos,
            } => {
                if *pos == buf.len() {
                    if *at == *end {
                        return Ok(None);
                    }
                    let records = (RUN_BUFFER / T::SIZE).max(1) as u64;
                    let n = (records * T::SIZE as u64).min(*end - *at) as usize;
                    buf.resize(n, 0);
                    file.read_exact_at(buf, *at)?;
                    *at += n as u64;
                    *pos = 0;
                }
                let record = T::decode(&buf[*pos..*pos + T::SIZE]);
                *pos += T::SIZE;
                Ok(Some(record))
            }
        }
    }
}

/// The records of a [`Sorted`] set in order.
pub struct SortedIter<'s, T: Record> {
    cursors: Vec<Cursor<'s, T>>,
    heap: BinaryHeap<Reverse<(T, usize)>>,
    error: Option<io::Error>,
}

impl<T: Record> Iterator for SortedIter<'_, T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        if let Some(e) = self.error.take() {
            return Some(Err(e));
        }
        // One cursor only (nothing spilled): no heap needed.
        if self.cursors.len() == 1 {
            return self.cursors[0].next().transpose();
        }
        let Reverse((record, i)) = self.heap.pop()?;
        match self.cursors[i].next() {
            Ok(Some(next)) => self.heap.push(Reverse((next, i))),
            Ok(None) => {}
            Err(e) => self.error = Some(e),
        }
        Some(Ok(record))
    }
}

/// A first-in first-out queue of byte strings under a memory limit: past it, the queued strings
/// move to an unnamed temporary file and are read back from there, in order.
pub struct Fifo {
    limit: usize,
    /// The newest strings from `head` on, each as its length (`u32`, little-endian) then its
    /// bytes.
    memory: Vec<u8>,
    head: usize,
    /// Older strings, in the same form: the file, where its next read starts and where it ends.
    file: Option<File>,
    read: u64,
    written: u64,
    /// Bytes read ahead from the file, from `at` on.
    ahead: Vec<u8>,
    at: usize,
    len: usize,
}

/// Bytes of a string's length.
const LEN: usize = 4;

impl Fifo {
    /// An empty queue holding at most about `limit` bytes in memory.
    pub fn new(limit: usize) -> Fifo {
        Fifo {
            limit,
            memory: Vec::new(),
            head: 0,
            file: None,
            read: 0,
            written: 0,
            ahead: Vec::new(),
            at: 0,
            len: 0,
        }
    }

    /// How many strings are queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Queues a string; past the limit, moves the queue's memory to its file.
    pub fn push(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.memory
            .extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        self.memory.extend_from_slice(bytes);
        self.len += 1;
        if self.memory.len() - self.head > self.limit {
            let file = match &mut self.file {
                Some(file) => file,
                None => self.file.insert(temporary_file()?),
            };
            let written = file.write_all_at(&self.memory[self.head..], self.written);
            written.map_err(spill_error)?;
            self.written += (self.memory.len() - self.head) as u64;
            self.memory.clear();
            self.head = 0;
        }
        Ok(())
    }

    /// The oldest string, if any (it stays queued until [`Fifo::pop`]).
    pub fn front(&mut self) -> io::Result<Option<&[u8]>> {
        if self.len == 0 {
            return Ok(None);
        }
        if self.front_in_file() {
            let n = self.ahead_len()?;
            return Ok(Some(&self.ahead[self.at + LEN..self.at + LEN + n]));
        }
        let n = length(&self.memory[self.head..]);
        Ok(Some(&self.memory[self.head + LEN..self.head + LEN + n]))
    }

    /// Drops the oldest string (after [`Fifo::front`] gave it).
    pub fn pop(&mut self) {
        if self.len == 0 {
            return;
        }
        self.len -= 1;
        if self.front_in_file() {
            self.at += LEN + length(&self.ahead[self.at..]);
            return;
        }
        self.head += LEN + length(&self.memory[self.head..]);
        // Reclaim the front once it is most of the buffer.
        if self.head == self.memory.len() {
            self.memory.clear();
            self.head = 0;
        } else if self.head > 1 << 20 && self.head * 2 > self.memory.len() {
            self.memory.drain(..self.head);
            self.head = 0;
        }
    }

    /// Whether the oldest string is in the file part.
    fn front_in_file(&self) -> bool {
        self.at < self.ahead.len() || self.read < self.written
    }

    /// The length of the file part's oldest string, with the whole string read ahead.
    fn ahead_len(&mut self) -> io::Result<usize> {
        self.fill(LEN)?;
        let n = length(&self.ahead[self.at..]);
        self.fill(LEN + n)?;
        Ok(n)
    }

    /// Reads ahead until `need` bytes from `at` are in memory.
    fn fill(&mut self, need: usize) -> io::Result<()> {
        if self.ahead.len() - self.at >= need {
            return Ok(());
        }
        self.ahead.drain(..self.at);
        self.at = 0;
        let want = (need - self.ahead.len()).max(RUN_BUFFER) as u64;
        let n = want.min(self.written - self.read) as usize;
        let from = self.ahead.len();
        self.ahead.resize(from + n, 0);
        let file = self.file.as_ref().expect("a file part");
        file.read_exact_at(&mut self.ahead[from..], self.read)?;
        self.read += n as u64;
        Ok(())
    }
}

/// The length prefix at the start of `bytes`.
fn length(bytes: &[u8]) -> usize {
    u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize
}

/// Little-endian field writers and readers for [`Record`] implementations.
pub mod bytes {
    /// Writes fields one after another.
    pub struct Put<'b> {
        out: &'b mut [u8],
        at: usize,
    }

    impl<'b> Put<'b> {
        /// Writing from the start of `out`.
        pub fn new(out: &'b mut [u8]) -> Self {
            Put { out, at: 0 }
        }

        /// Appends bytes.
        pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
            self.out[self.at..self.at + b.len()].copy_from_slice(b);
            self.at += b.len();
            self
        }

        /// Appends a `u64`.
        pub fn u64(&mut self, v: u64) -> &mut Self {
            self.bytes(&v.to_le_bytes())
        }

        /// Appends an `i64`.
        pub fn i64(&mut self, v: i64) -> &mut Self {
            self.bytes(&v.to_le_bytes())
        }

        /// Appends a `u32`.
        pub fn u32(&mut self, v: u32) -> &mut Self {
            self.bytes(&v.to_le_bytes())
        }

        /// Appends a `u16`.
        pub fn u16(&mut self, v: u16) -> &mut Self {
            self.bytes(&v.to_le_bytes())
        }

        /// Appends a `u8`.
        pub fn u8(&mut self, v: u8) -> &mut Self {
            self.bytes(&[v])
        }
    }

    /// Reads fields one after another.
    pub struct Get<'b> {
        bytes: &'b [u8],
        at: usize,
    }

    impl<'b> Get<'b> {
        /// Reading from the start of `bytes`.
        pub fn new(bytes: &'b [u8]) -> Self {
            Get { bytes, at: 0 }
        }

        fn take<const N: usize>(&mut self) -> [u8; N] {
            let mut a = [0u8; N];
            a.copy_from_slice(&self.bytes[self.at..self.at + N]);
            self.at += N;
            a
        }

        /// The next `u64`.
        pub fn u64(&mut self) -> u64 {
            u64::from_le_bytes(self.take())
        }

        /// The next `i64`.
        pub fn i64(&mut self) -> i64 {
            i64::from_le_bytes(self.take())
        }

        /// The next `u32`.
        pub fn u32(&mut self) -> u32 {
            u32::from_le_bytes(self.take())
        }

        /// The next `u16`.
        pub fn u16(&mut self) -> u16 {
            u16::from_le_bytes(self.take())
        }

        /// The next `u8`.
        pub fn u8(&mut self) -> u8 {
            self.take::<1>()[0]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    struct Pair(u64, u32);

    impl Record for Pair {
        const SIZE: usize = 12;
        fn encode(&self, out: &mut [u8]) {
            bytes::Put::new(out).u64(self.0).u32(self.1);
        }
        fn decode(b: &[u8]) -> Self {
            let mut g = bytes::Get::new(b);
            Pair(g.u64(), g.u32())
        }
    }

    fn pseudo_random(n: usize) -> Vec<Pair> {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                Pair(x % 1000, i as u32 % 7)
            })
            .collect()
    }

    /// The records sorted under `budget`: in order, the runs on disk, the records in memory.
    fn sorted_with(budget: usize, records: &[Pair]) -> (Vec<Pair>, usize, usize) {
        let budget = Budget::new(budget);
        let mut sorter = Sorter::new(budget.clone());
        for &r in records {
            sorter.push(r).unwrap();
        }
        let sorted = sorter.finish();
        let out: Vec<Pair> = sorted.iter().map(Result::unwrap).collect();
        // Read twice: each reader has its own position.
        let again: Vec<Pair> = sorted.iter().map(Result::unwrap).collect();
        assert_eq!(out, again);
        (out, sorted.runs(), sorted.memory.len())
    }

    #[test]
    fn a_small_budget_spills_runs_and_merges_them_into_the_same_order() {
        let records = pseudo_random(10_000);
        let mut want = records.clone();
        want.sort();
        let (all_in_memory, runs, in_memory) = sorted_with(usize::MAX / 2, &records);
        assert_eq!((runs, in_memory), (0, 10_000));
        assert_eq!(all_in_memory, want);
        // 17 records per run (the push that overdraws the budget spills): 588 runs, and the 4
        // records left go to a run of their own when the input ends; merged 16 at a time,
        // 589 = 2·256 + 4·16 + 13, so 2 + 4 + 13 runs remain, and nothing in memory.
        let (spilled, runs, in_memory) = sorted_with(16 * size_of::<Pair>(), &records);
        assert_eq!((runs, in_memory), (19, 0));
        assert_eq!(spilled, want);
    }

    #[test]
    fn a_fifo_past_its_limit_reads_back_from_its_file_in_order() {
        let mut fifo = Fifo::new(64);
        let strings: Vec<Vec<u8>> = (0..500u32)
            .map(|i| i.to_string().repeat(1 + i as usize % 7).into_bytes())
            .collect();
        let mut got = Vec::new();
        let take = |fifo: &mut Fifo| {
            let front = fifo.front().unwrap().map(<[u8]>::to_vec);
            fifo.pop();
            front
        };
        for (i, s) in strings.iter().enumerate() {
            fifo.push(s).unwrap();
            // Take one back now and then, so reads and spills interleave.
            if i % 3 == 0 {
                got.push(take(&mut fifo).unwrap());
            }
        }
        assert!(fifo.written > 0, "the queue went to its file");
        while let Some(front) = take(&mut fifo) {
            got.push(front);
        }
        assert_eq!(got, strings);
        assert!(fifo.is_empty());
    }

    #[test]
    fn the_budget_is_given_back_and_runs_round_trip_through_a_file() {
        let budget = Budget::new(1 << 20);
        let mut sorter = Sorter::new(budget.clone());
        for r in pseudo_random(1000) {
            sorter.push(r).unwrap();
        }
        let sorted = sorter.finish();
        assert!(budget.used.load(Ordering::Relaxed) > 0);
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"header").unwrap();
        assert_eq!(sorted.write_to(&mut file).unwrap(), 1000);
        let back = Sorted::<Pair>::from_file(Arc::new(file), 6, 1000);
        let a: Vec<Pair> = sorted.iter().map(Result::unwrap).collect();
        let b: Vec<Pair> = back.iter().map(Result::unwrap).collect();
        assert_eq!(a, b);
        drop(sorted);
        assert_eq!(budget.used.load(Ordering::Relaxed), 0);
    }
}
