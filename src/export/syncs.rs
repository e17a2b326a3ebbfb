//! Synchronization links (issue 36): which GPU operation each synchronization record
//! (`CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`) waited for, found in the prepare pass as the
//! operations go by in time order, for both traces to draw as a flow.
//!
//! - A **host wait** (stream, event or context synchronize, and an event's query, which CUPTI
//!   records as an event synchronization) returned once the operation it waited for ended: the
//!   operation that ended last by its return, on its stream (stream sync) or on any stream of
//!   its process (event and context syncs: the stream an event was recorded on is in
//!   `CUPTI_ACTIVITY_KIND_CUDA_EVENT`, which no export here fills). The link goes from that
//!   operation to the calling thread at the return.
//! - A **stream wait** (`cudaStreamWaitEvent`) held back the waiting stream's next operation
//!   (the first to start after the call): the link goes to it from the operation of another
//!   stream of the process that ended last before it started.
//!
//! A record whose operation is not in the trace (nothing ran before it, or after a stream wait)
//! links nothing. Memory stays bounded: per stream the last ended operation and those running,
//! per pending record a few words.

use crate::hash::FxHashMap;
use crate::model::{ProcessId, StreamId, SyncEvent, ThreadId};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A GPU operation as both writers know it: its stream, start and correlation id.
pub type OpKey = (StreamId, i64, u32);

/// Flow ids of synchronization links: this bit set, so they never meet another flow's id.
const FLOW_BIT: u64 = 1 << 61;

/// `ENUM_CUPTI_SYNC_TYPE` of a stream wait (`cudaStreamWaitEvent`).
pub const STREAM_WAIT: u8 = 2;

/// A host wait's end: where a link arrives on the calling thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Return {
    /// When the call returned (merged clock).
    pub time: i64,
    /// The flow id.
    pub flow: u64,
    /// The correlation id of the call (its thread is found from it).
    pub correlation: u32,
    /// `ENUM_CUPTI_SYNC_TYPE`: 1 event, 3 stream, 4 context.
    pub sync_type: u8,
}

/// One process's synchronization links.
#[derive(Debug, Default)]
pub struct SyncLinks {
    /// Flow ids leaving each operation a synchronization waited for.
    pub sources: FxHashMap<OpKey, Vec<u64>>,
    /// Flow ids arriving at each operation a stream wait held back.
    pub held: FxHashMap<OpKey, Vec<u64>>,
    /// Host waits' returns, in time order, each with the calling thread.
    pub returns: Vec<(Return, ThreadId)>,
}

impl SyncLinks {
    /// The flow ids an operation takes part in (leaving it, or arriving at it).
    pub fn flows(&self, key: &OpKey) -> impl Iterator<Item = u64> + '_ {
        let from = self.sources.get(key).into_iter().flatten();
        from.chain(self.held.get(key).into_iter().flatten())
            .copied()
    }
}

/// A stream's operations as far as the pass has gone: the one that ended last, and those
/// still running.
#[derive(Debug, Default)]
struct Stream {
    ended: Option<(i64, OpKey)>,
    running: Vec<(i64, OpKey)>,
}

impl Stream {
    /// Moves the operations that ended by `t` out of `running`; the one that ended last by `t`.
    fn ended_by(&mut self, t: i64) -> Option<(i64, OpKey)> {
        let ended = &mut self.ended;
        self.running.retain(|&(end, key)| {
            if end > t {
                return true;
            }
            if ended.is_none_or(|(e, _)| end >= e) {
                *ended = Some((end, key));
            }
            false
        });
        self.ended
    }
}

/// A host wait not yet resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct HostWait {
    /// When the call returned.
    time: i64,
    /// The stream of a stream sync.
    stream: Option<StreamId>,
    correlation: u32,
    sync_type: u8,
}

/// Finds one process's links while its operations and synchronization records go by in
/// start order.
#[derive(Debug, Default)]
pub struct Resolver {
    process: u64,
    streams: FxHashMap<StreamId, Stream>,
    /// Host waits, by return time.
    waits: BinaryHeap<Reverse<HostWait>>,
    /// Stream waits, by waiting stream: their correlation ids, waiting for its next operation.
    holds: FxHashMap<StreamId, Vec<u32>>,
    /// Host waits resolved, their threads not yet known.
    returns: Vec<Return>,
    links: SyncLinks,
    next: u32,
}

impl Resolver {
    /// The resolver of `process`.
    pub fn new(process: ProcessId) -> Resolver {
        Resolver {
            process: process.index() as u64 + 1,
            ..Resolver::default()
        }
    }

    /// A synchronization record, at its start.
    pub fn sync(&mut self, s: &SyncEvent) {
        self.advance(s.start.0);
        match (s.sync_type, s.stream) {
            (STREAM_WAIT, Some(stream)) => {
                self.holds.entry(stream).or_default().push(s.correlation)
            }
            (1 | 3 | 4, stream) => {
                self.waits.push(Reverse(HostWait {
                    time: s.end.0,
                    stream: stream.filter(|_| s.sync_type == 3),
                    correlation: s.correlation,
                    sync_type: s.sync_type,
                }));
            }
            _ => {}
        }
    }

    /// A GPU operation `[start, end]`, at its start.
    pub fn op(&mut self, key: OpKey, end: i64) {
        let start = key.1;
        self.advance(start);
        if let Some(held) = self.holds.remove(&key.0) {
            let source = self.last_ended(start, Some(key.0));
            for _ in held {
                if let Some(source) = source {
                    let flow = self.link(source);
                    self.links.held.entry(key).or_default().push(flow);
                }
            }
        }
        // What ended by now stays only as its stream's last (every later question is about a
        // time from now on), so a stream holds its last ended operation and those running.
        let stream = self.streams.entry(key.0).or_default();
        stream.ended_by(start);
        stream.running.push((end, key));
    }

    /// Resolves the host waits that returned before `now` (every operation that could have
    /// ended by then has started).
    pub fn advance(&mut self, now: i64) {
        while let Some(&Reverse(wait)) = self.waits.peek()
            && wait.time < now
        {
            let HostWait {
                time,
                stream,
                correlation,
                sync_type,
            } = wait;
            self.waits.pop();
            let source = match stream {
                Some(stream) => (self.streams.get_mut(&stream)).and_then(|s| s.ended_by(time)),
                None => self.last_ended_anywhere(time),
            };
            if let Some((_, source)) = source {
                let flow = self.link(source);
                let r = Return {
                    time,
                    flow,
                    correlation,
                    sync_type,
                };
                self.returns.push(r);
            }
        }
    }

    /// The operation of any stream (but `except`) that ended last by `t`.
    fn last_ended(&mut self, t: i64, except: Option<StreamId>) -> Option<OpKey> {
        let streams = self.streams.iter_mut().filter(|(s, _)| Some(**s) != except);
        let ended = streams.filter_map(|(_, s)| s.ended_by(t));
        ended
            .max_by_key(|&(end, key)| (end, key))
            .map(|(_, key)| key)
    }

    /// [`Resolver::last_ended`] of every stream, with its end.
    fn last_ended_anywhere(&mut self, t: i64) -> Option<(i64, OpKey)> {
        let ended = self.streams.values_mut().filter_map(|s| s.ended_by(t));
        ended.max_by_key(|&(end, key)| (end, key))
    }

    /// A new link leaving `source`; its flow id.
    fn link(&mut self, source: OpKey) -> u64 {
        self.next += 1;
        let flow = FLOW_BIT | self.process << 32 | u64::from(self.next);
        self.links.sources.entry(source).or_default().push(flow);
        flow
    }

    /// The links, every host wait resolved, each return on its calling thread: `thread` of its
    /// correlation id, the API call's thread when it is drawn. A return without one, or after
    /// `end` (the window's), links nothing.
    pub fn finish(mut self, end: i64, thread: impl Fn(u32) -> Option<ThreadId>) -> SyncLinks {
        self.advance(i64::MAX);
        let mut links = self.links;
        let mut dropped = Vec::new();
        for r in self.returns {
            match thread(r.correlation).filter(|_| r.time <= end) {
                Some(t) => links.returns.push((r, t)),
                None => dropped.push(r.flow),
            }
        }
        if !dropped.is_empty() {
            dropped.sort_unstable();
            links.sources.retain(|_, flows| {
                flows.retain(|f| dropped.binary_search(f).is_err());
                !flows.is_empty()
            });
        }
        links.returns.sort_unstable();
        links
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Ns;

    fn op(stream: u32, start: i64) -> OpKey {
        (StreamId(stream), start, start as u32)
    }

    fn sync(sync_type: u8, stream: Option<u32>, (start, end): (i64, i64), corr: u32) -> SyncEvent {
        SyncEvent {
            start: Ns(start),
            end: Ns(end),
            process: ProcessId(0),
            stream: stream.map(StreamId),
            correlation: corr,
            sync_type,
        }
    }

    #[test]
    fn each_wait_links_the_operation_it_waited_for() {
        let mut r = Resolver::new(ProcessId(0));
        r.op(op(1, 0), 100);
        r.op(op(2, 10), 50);
        // A stream sync on stream 2 returns at 60: stream 2's op (ended 50), not stream 1's.
        r.sync(&sync(3, Some(2), (20, 60), 7));
        // A context sync returning at 120: the op that ended last anywhere (stream 1's, 100).
        r.sync(&sync(4, None, (30, 120), 8));
        // A stream wait on stream 2: its next op (at 130) waited for stream 1's (ended 100).
        r.sync(&sync(STREAM_WAIT, Some(2), (40, 41), 9));
        r.op(op(2, 130), 140);
        let links = r.finish(i64::MAX, |c| Some(ThreadId(c)));
        let returns: Vec<(i64, u32)> = (links.returns.iter()).map(|(r, t)| (r.time, t.0)).collect();
        assert_eq!(returns, [(60, 7), (120, 8)]);
        assert_eq!(links.sources[&op(2, 10)].len(), 1);
        assert_eq!(links.sources[&op(1, 0)].len(), 2);
        assert_eq!(links.held[&op(2, 130)].len(), 1);
        assert_eq!(
            links.returns.len() + links.held.values().map(Vec::len).sum::<usize>(),
            3
        );
    }

    #[test]
    fn a_stream_keeps_only_what_still_runs() {
        let mut r = Resolver::new(ProcessId(0));
        for i in 0..10_000 {
            r.op(op(1, i * 10), i * 10 + 5);
        }
        assert!(r.streams[&StreamId(1)].running.len() <= 1);
        // A return without its thread drawn links nothing, and leaves no flow behind.
        r.sync(&sync(3, Some(1), (100_000, 100_010), 1));
        let links = r.finish(i64::MAX, |_| None);
        assert!(links.returns.is_empty() && links.held.is_empty() && links.sources.is_empty());
    }
}
