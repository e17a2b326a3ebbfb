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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

/// One call on the gate, as the writer made it (lines by their place in [`Batch::bytes`]).
enum Op {
    Record(Key, usize, usize),
    WaitFor(Key),
    Comm(Key, usize, usize),
    Resolved(Key),
    Drain,
}

/// Calls on the gate, in the order they were made, with the lines they carry.
#[derive(Default)]
struct Batch {
    ops: Vec<Op>,
    bytes: Vec<u8>,
}

impl Batch {
    /// Makes the calls on `gate`.
    fn apply<W: Write>(&self, gate: &mut Gate<W>) -> io::Result<()> {
        for op in &self.ops {
            match *op {
                Op::Record(key, from, to) => gate.record(key, &self.bytes[from..to])?,
                Op::WaitFor(key) => gate.wait_for(key),
                Op::Comm(key, from, to) => gate.comm(key, &self.bytes[from..to]),
                Op::Resolved(key) => gate.resolved(key),
                Op::Drain => gate.drain()?,
            }
        }
        Ok(())
    }
}

/// Bytes of lines a batch carries before it is handed over.
const BATCH_BYTES: usize = 1 << 20;
/// Batches in flight to the gate's thread.
const BATCHES_IN_FLIGHT: usize = 4;

/// A [`Gate`] run on a thread of its own ([`on_thread`]): the same calls, handed over in
/// batches, so that holding records in order and writing them run beside their formatting.
pub struct Remote {
    batch: Batch,
    send: std::sync::mpsc::SyncSender<Batch>,
    recycle: std::sync::mpsc::Receiver<Batch>,
}

impl Remote {
    /// Where record lines are formatted, in place: [`Remote::record`] names them by their
    /// range. It is handed over (and emptied) only by [`Remote::drain`].
    pub fn bytes(&mut self) -> &mut Vec<u8> {
        &mut self.batch.bytes
    }

    /// [`Gate::record`] of the line at `range` of [`Remote::bytes`].
    pub fn record(&mut self, key: Key, range: std::ops::Range<usize>) {
        self.batch.ops.push(Op::Record(key, range.start, range.end));
    }

    /// [`Gate::wait_for`].
    pub fn wait_for(&mut self, key: Key) {
        self.batch.ops.push(Op::WaitFor(key));
    }

    /// [`Gate::comm`].
    pub fn comm(&mut self, key: Key, line: &[u8]) {
        let from = self.batch.bytes.len();
        self.batch.bytes.extend_from_slice(line);
        let to = self.batch.bytes.len();
        self.batch.ops.push(Op::Comm(key, from, to));
    }

    /// [`Gate::resolved`].
    pub fn resolved(&mut self, key: Key) {
        self.batch.ops.push(Op::Resolved(key));
    }

    /// [`Gate::drain`]; fails when the gate's thread stopped (on a write error).
    pub fn drain(&mut self) -> io::Result<()> {
        self.batch.ops.push(Op::Drain);
        if self.batch.bytes.len() < BATCH_BYTES {
            return Ok(());
        }
        self.hand_over()
    }

    fn hand_over(&mut self) -> io::Result<()> {
        let next = self.recycle.try_recv().unwrap_or_default();
        let batch = std::mem::replace(&mut self.batch, next);
        self.send
            .send(batch)
            .map_err(|_| io::Error::other("the Paraver body's writer stopped"))
    }
}

/// Runs `make` with a [`Remote`] gate writing to `out` on a thread of its own; returns what
/// `make` returned, the writer, and the records written (as [`Gate::finish`]). A write error
/// of the gate comes first: it is why `make` could not hand over its calls.
pub fn on_thread<W: Write + Send, R>(
    out: W,
    memory: usize,
    make: impl FnOnce(&mut Remote) -> io::Result<R>,
) -> io::Result<(R, W, u64)> {
    let (send, batches) = std::sync::mpsc::sync_channel::<Batch>(BATCHES_IN_FLIGHT);
    let (give_back, recycle) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let gate = move || -> io::Result<(W, u64)> {
            let mut gate = Gate::new(out, memory);
            for mut batch in batches {
                batch.apply(&mut gate)?;
                batch.ops.clear();
                batch.bytes.clear();
                // The writer may be done; the batch is then dropped.
                let _ = give_back.send(batch);
            }
            gate.finish()
        };
        let gate = std::thread::Builder::new()
            .name("paraver-order".to_string())
            .spawn_scoped(scope, gate)
            .expect("the system starts a thread");
        let mut remote = Remote {
            batch: Batch::default(),
            send,
            recycle,
        };
        let made = make(&mut remote);
        let handed = match made {
            Ok(_) if !remote.batch.ops.is_empty() => remote.hand_over(),
            _ => Ok(()),
        };
        drop(remote);
        let (out, records) = gate
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the Paraver body's writer panicked")))?;
        handed?;
        Ok((made?, out, records))
    })
}

#[cfg(test)]
mod tests {
    use super::{Key, Remote, on_thread};
    use std::io::{self, Write};

    /// A writer that fails once it holds `room` bytes.
    struct Cramped {
        written: Vec<u8>,
        room: usize,
    }

    impl Write for Cramped {
        fn write(&mut self, data: &[u8]) -> io::Result<usize> {
            if self.written.len() + data.len() > self.room {
                return Err(io::Error::other("no room left"));
            }
            self.written.extend_from_slice(data);
            Ok(data.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn key(time: u64, seq: u64) -> Key {
        Key {
            time,
            task: 1,
            thread: 1,
            seq,
            sub: 0,
        }
    }

    /// Records `n` lines, each drained; with `launch`, the first is a launch whose operation
    /// starts at the last record, so every line after it waits in the gate until then. Fails
    /// with the line it stopped at.
    fn record(remote: &mut Remote, n: u64, launch: bool) -> Result<(), (u64, io::Error)> {
        for seq in 0..n {
            let from = remote.bytes().len();
            writeln!(remote.bytes(), "2:0:1:1:1:{seq}:1:1").map_err(|e| (seq, e))?;
            let to = remote.bytes().len();
            remote.record(key(seq, seq), from..to);
            if launch && seq == 0 {
                remote.wait_for(key(0, 0));
            }
            if launch && seq == n - 1 {
                remote.comm(
                    Key {
                        sub: 1,
                        ..key(0, 0)
                    },
                    b"3:comm\n",
                );
                remote.resolved(key(0, 0));
            }
            remote.drain().map_err(|e| (seq, e))?;
        }
        Ok(())
    }

    #[test]
    fn the_thread_writes_what_the_gate_would_in_the_order_it_would() {
        let out = Cramped {
            written: Vec::new(),
            room: usize::MAX,
        };
        let made = on_thread(out, 1 << 10, |remote| {
            record(remote, 50_000, true).map_err(|(_, e)| e)
        });
        let ((), out, records) = made.unwrap();
        assert_eq!(records, 50_001);
        let text = String::from_utf8(out.written).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // The launch, then its communication, then the records that waited for it.
        assert_eq!(
            &lines[..3],
            ["2:0:1:1:1:0:1:1", "3:comm", "2:0:1:1:1:1:1:1"]
        );
        assert_eq!(lines.last(), Some(&"2:0:1:1:1:49999:1:1"));
    }

    /// The gate's write error stops the writer at its next hand-over (not at the end of its
    /// lines) and is the error returned.
    #[test]
    fn a_write_error_of_the_gate_is_returned_not_waited_on() {
        let out = Cramped {
            written: Vec::new(),
            room: 1 << 16,
        };
        let lines = 10_000_000;
        let mut stopped = lines;
        let made = on_thread(out, 1 << 20, |remote| {
            record(remote, lines, false).map_err(|(seq, e)| {
                stopped = seq;
                e
            })
        });
        let error = made.map(|_| ()).expect_err("the writer has no room");
        assert_eq!(error.to_string(), "no room left");
        // 64 kB of room, batches of 1 MiB, a few batches in flight: well before the end.
        assert!(stopped < lines / 10, "the writer went on to line {stopped}");
    }
}
