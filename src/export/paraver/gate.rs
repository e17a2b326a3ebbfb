//! The order of the `.prv` body: records are written by [`Key`], and a record waits while a
//! launch before it still waits for one of its GPU operations (whose communication record goes
//! right after the launch's). Waiting records queue in a [`Fifo`] that moves to a temporary file
//! past its memory share, so a GPU far behind its CPU costs disk, not memory.

use crate::spill::Fifo;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::io::{self, Write};

/// Where a record goes in the body: by time, task, thread, the order its thread made it, and
/// for a communication record its place after its launch's record (`sub` from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    /// Rebased time.
    pub time: u64,
    /// Task number.
    pub task: u32,
    /// Thread number.
    pub thread: u32,
    /// The order its thread made it in.
    pub seq: u64,
    /// 0, or the communication record's place after its launch's.
    pub sub: u32,
}

/// Bytes of a key in the queue.
const KEY_BYTES: usize = 28;

impl Key {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend(self.time.to_le_bytes());
        out.extend(self.task.to_le_bytes());
        out.extend(self.thread.to_le_bytes());
        out.extend(self.seq.to_le_bytes());
        out.extend(self.sub.to_le_bytes());
    }

    fn decode(b: &[u8]) -> Key {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Key {
            time: u64_at(0),
            task: u32_at(8),
            thread: u32_at(12),
            seq: u64_at(16),
            sub: u32_at(24),
        }
    }
}

/// Writes records in key order.
pub struct Gate<W: Write> {
    out: W,
    /// Records waiting (key, then line), in key order.
    held: Fifo,
    /// Communication records waiting, by key, with where their lines are in `comm_lines`.
    comms: BinaryHeap<Reverse<(Key, usize, usize)>>,
    comm_lines: Vec<u8>,
    /// The records of launches whose operations have not all started.
    waiting: BTreeSet<Key>,
    scratch: Vec<u8>,
    records: u64,
}

impl<W: Write> Gate<W> {
    /// A gate writing to `out`, holding about `memory` bytes of waiting records in memory.
    pub fn new(out: W, memory: usize) -> Gate<W> {
        Gate {
            out,
            held: Fifo::new(memory),
            comms: BinaryHeap::new(),
            comm_lines: Vec::new(),
            waiting: BTreeSet::new(),
            scratch: Vec::new(),
            records: 0,
        }
    }

    /// A record, in key order among records (communication records come through
    /// [`Gate::comm`]).
    pub fn record(&mut self, key: Key, line: &[u8]) -> io::Result<()> {
        let idle = self.waiting.is_empty() && self.comms.is_empty();
        if idle && self.held.is_empty() {
            self.records += 1;
            return self.out.write_all(line);
        }
        self.scratch.clear();
        key.encode(&mut self.scratch);
        self.scratch.extend_from_slice(line);
        self.held.push(&self.scratch)
    }

    /// The record at `key` launched operations not all started: what follows it waits.
    pub fn wait_for(&mut self, key: Key) {
        self.waiting.insert(key);
    }

    /// A communication record.
    pub fn comm(&mut self, key: Key, line: &[u8]) {
        let from = self.comm_lines.len();
        self.comm_lines.extend_from_slice(line);
        self.comms.push(Reverse((key, from, self.comm_lines.len())));
    }

    /// Every operation of the launch at `key` has started.
    pub fn resolved(&mut self, key: Key) {
        self.waiting.remove(&key);
    }

    /// Writes every record no waiting launch comes before.
    pub fn drain(&mut self) -> io::Result<()> {
        let limit = self.waiting.first().copied();
        loop {
            let comm = self.comms.peek().map(|Reverse((k, ..))| *k);
            let front = self.held.front()?;
            let held = front.map(|f| Key::decode(&f[..KEY_BYTES]));
            let (key, is_comm) = match (held, comm) {
                (Some(h), Some(c)) if c < h => (c, true),
                (Some(h), _) => (h, false),
                (None, Some(c)) => (c, true),
                (None, None) => return Ok(()),
            };
            // A launch's own record may go; what comes after it waits.
            if limit.is_some_and(|l| key > l) {
                return Ok(());
            }
            self.records += 1;
            if is_comm {
                let Reverse((_, from, to)) = self.comms.pop().expect("peeked");
                self.out.write_all(&self.comm_lines[from..to])?;
                if self.comms.is_empty() {
                    self.comm_lines.clear();
                }
            } else {
                let front = front.expect("peeked");
                self.out.write_all(&front[KEY_BYTES..])?;
                self.held.pop();
            }
        }
    }

    /// Writes what waits (a launch whose operation never came is written without it); returns
    /// the writer and the records written.
    pub fn finish(mut self) -> io::Result<(W, u64)> {
        self.waiting.clear();
        self.drain()?;
        Ok((self.out, self.records))
    }
}
