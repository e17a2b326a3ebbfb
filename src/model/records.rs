//! The events as fixed-size records ([`Record`]): how they are spilled to disk while a report is
//! sorted under a memory budget, and how a part file stores them. Fields are written in
//! declaration order, little-endian, ids as their index; a record reads back equal.

use super::events::{
    AccEvent, AccTable, ApiCall, GraphLaunch, Kernel, Memcpy, MemoryEvent, Memset, MetricSample,
    MpiCall, MpiTable, OsCall, SampleEvent, SyncEvent, ThreadRun,
};
use super::{GpuId, MetricSeriesId, Ns, ProcessId, StackId, StreamId, StringId, ThreadId};
use crate::spill::Record;
use crate::spill::bytes::{Get, Put};

/// `None` of an optional id.
const NONE: u32 = u32::MAX;

impl Record for Kernel {
    const SIZE: usize = 72;

    fn encode(&self, out: &mut [u8]) {
        let mut p = Put::new(out);
        p.i64(self.start.0).i64(self.end.0).u32(self.stream.0);
        p.u32(self.short_name.0)
            .u32(self.name.0)
            .u32(self.correlation);
        for v in self.grid.into_iter().chain(self.block) {
            p.u32(v);
        }
        p.u32(self.registers).u32(self.static_shared);
        p.u32(self.dynamic_shared).u32(self.graph_node);
    }

    fn decode(bytes: &[u8]) -> Self {
        let mut g = Get::new(bytes);
        Kernel {
            start: Ns(g.i64()),
            end: Ns(g.i64()),
            stream: StreamId(g.u32()),
            short_name: StringId(g.u32()),
            name: StringId(g.u32()),
            correlation: g.u32(),
            grid: [g.u32(), g.u32(), g.u32()],
            block: [g.u32(), g.u32(), g.u32()],
            registers: g.u32(),
            static_shared: g.u32(),
            dynamic_shared: g.u32(),
            graph_node: g.u32(),
        }
    }
}

impl Record for Memcpy {
    const SIZE: usize = 39;

    fn encode(&self, out: &mut [u8]) {
        let mut p = Put::new(out);
        p.i64(self.start.0).i64(self.end.0).u32(self.stream.0);
        p.u32(self.correlation).u64(self.bytes).u8(self.copy_kind);
        p.u8(self.memory_kinds.0).u8(self.memory_kinds.1);
    }

    fn decode(bytes: &[u8]) -> Self {
        let mut g = Get::new(bytes);
        Memcpy {
            start: Ns(g.i64()),
            end: Ns(g.i64()),
            stream: StreamId(g.u32()),
            correlation: g.u32(),
            bytes: g.u64(),
            copy_kind: g.u8(),
            memory_kinds: (g.u8(), g.u8()),
        }
    }
}

impl Record for Memset {
    const SIZE: usize = 41;

    fn encode(&self, out: &mut [u8]) {
        let mut p = Put::new(out);
        p.i64(self.start.0).i64(self.end.0).u32(self.stream.0);
        p.u32(self.correlation).u64(self.bytes).u32(self.value);
        p.u8(self.memory_kind);
    }

    fn decode(bytes: &[u8]) -> Self {
        let mut g = Get::new(bytes);
        Memset {
            start: Ns(g.i64()),
            end: Ns(g.i64()),
            stream: StreamId(g.u32()),
            correlation: g.u32(),
            bytes: g.u64(),
            value: g.u32(),
            memory_kind: g.u8(),
        }
    }
}

impl Record for GraphLaunch {
    const SIZE: usize = 32;

    fn encode(&self, out: &mut [u8]) {
        let mut p = Put::new(out);
        p.i64(self.start.0).i64(self.end.0).u32(self.stream.0);
        p.u32(self.correlation).u32(self.graph).u32(self.exec);
    }

    fn decode(bytes: &[u8]) -> Self {
        let mut g = Get::new(bytes);
        GraphLaunch {
            start: Ns(g.i64()),
            end: Ns(g.i64()),
            stream: StreamId(g.u32()),
            correlation: g.u32(),
            graph: g.u32(),
            exec: g.u32(),
        }
    }
}

impl Record for ApiCall {
    const SIZE: usize = 31;

    fn encode(&self, out: &mut [u8]) {
        let mut p = Put::new(out);
        p.i64(self.start.0).i64(self.end.0).u32(self.thread.0);
        p.u32(self.name.0).u32(self.correlation).u8(self.class);
        p.u16(self.return_value);
    }

    fn decode(bytes: &[u8]) -> Self {
        let mut g = Get::new(bytes);
        ApiCall {
            start: Ns(g.i64()),
            end: Ns(g.i64()),
            thread: ThreadId(g.u32()),
            name: StringId(g.u32()),
            correlation: g.u32(),
            class: g.u8(),
            return_value: g.u16(),
        }
    }
}

impl Record for OsCall {
    const SIZE: usize = 28;

    fn encode(&self, out: &mut [u8]) {
        let mut p = Put::new(out);
        p.i64(self.start.0).i64(self.end.0);
        p.u32(self.thread.0).u32(self.name.0);
        p.u32(self.stack.map_or(NONE, |s| s.0));
    }

    fn decode(bytes: &[u8]) -> Self {
        let mut g = Get::new(bytes);
        OsCall {
            start: Ns(g.i64()),
            end: Ns(g.i64()),
            thread: ThreadId(g.u32()),
            name: StringId(g.u32()),
            stack: Some(g.u32()).filter(|&s| s != NONE).map(StackId),
        }
    }
}

impl Record for MpiCall {
    const SIZE: usize = 69;

    fn encode(&self, out: &mut [u8]) {
        let mut p = Put::new(out);
        p.i64(self.start.0).i64(self.end.0);
        p.u32(self.thread.0).u32(self.name.0).u8(self.table as u8);
        p.u32(self.peer as u32).u32(self.tag as u32).u64(self.comm);
        p.u64(self.size).u64(self.recv_size).u64(self.request);
    }

    fn decode(bytes: &[u8]) -> Self {
        let mut g = Get::new(bytes);
        MpiCall {
            start: Ns(g.i64()),
            end: Ns(g.i64()),
            thread: ThreadId(g.u32()),
            name: StringId(g.u32()),
            table: MpiTable::from_index(g.u8()),
            peer: g.u32() as i32,
            tag: g.u32() as i32,
            comm: g.u64(),
            size: g.u64(),
            recv_size: g.u64(),
            request: g.u64(),
        }
    }
}

impl Record for AccEvent {
    const SIZE: usize = 46;

    fn encode(&self, out: &mut [u8]) {
        let mut p = Put::new(out);
        p.i64(self.start.0).i64(self.end.0).u32(self.thread.0);
        p.u8(self.table as u8).u8(self.event_kind);
        p.u32(self.name.0).u32(self.source.0).u32(self.function.0);
        p.u32(self.object.0).u64(self.bytes);
    }

    fn decode(bytes: &[u8]) -> Self {
        let mut g = Get::new(bytes);
        AccEvent {
            start: Ns(g.i64()),
            end: Ns(g.i64()),
            thread: ThreadId(g.u32()),
            table: AccTable::from_index(g.u8()),
            event_kind: g.u8(),
            name: StringId(g.u32()),
            source: StringId(g.u32()),
            function: StringId(g.u32()),
            object: StringId(g.u32()),
            bytes: g.u64(),
        }
    }
}

impl Record for SyncEvent {
    const SIZE: usize = 29;

    fn encode(&self, out: &mut [u8]) {
        let mut p = Put::new(out);
        p.i64(self.start.0).i64(self.end.0).u32(self.process.0);
        p.u32(self.stream.map_or(NONE, |s| s.0));
        p.u32(self.correlation).u8(self.sync_type);
    }

    fn decode(bytes: &[u8]) -> Self {
        let mut g = Get::new(bytes);
        SyncEvent {
            start: Ns(g.i64()),
            end: Ns(g.i64()),
            process: ProcessId(g.u32()),
            stream: Some(g.u32()).filter(|&s| s != NONE).map(StreamId),
            correlation: g.u32(),
            sync_type: g.u8(),
        }
    }
}

impl Record for MetricSample {
    const SIZE: usize = 20;

    fn encode(&self, out: &mut [u8]) {
        let mut p = Put::new(out);
        p.i64(self.time.0).i64(self.value).u32(self.series.0);
    }

    fn decode(bytes: &[u8]) -> Self {
        let mut g = Get::new(bytes);
        MetricSample {
            time: Ns(g.i64()),
            value: g.i64(),
            series: MetricSeriesId(g.u32()),
        }
    }
}

impl Record for MemoryEvent {
    const SIZE: usize = 20;

    fn encode(&self, out: &mut [u8]) {
        let mut p = Put::new(out);
        p.i64(self.time.0).i64(self.bytes).u32(self.gpu.0);
    }

    fn decode(bytes: &[u8]) -> Self {
        let mut g = Get::new(bytes);
        MemoryEvent {
            time: Ns(g.i64()),
            bytes: g.i64(),
            gpu: GpuId(g.u32()),
        }
    }
}

impl Record for SampleEvent {
    const SIZE: usize = 18;

    fn encode(&self, out: &mut [u8]) {
        let mut p = Put::new(out);
        p.i64(self.time.0).u32(self.thread.0).u32(self.stack.0);
        p.u16(self.cpu);
    }

    fn decode(bytes: &[u8]) -> Self {
        let mut g = Get::new(bytes);
        SampleEvent {
            time: Ns(g.i64()),
            thread: ThreadId(g.u32()),
            stack: StackId(g.u32()),
            cpu: g.u16(),
        }
    }
}

impl Record for ThreadRun {
    const SIZE: usize = 23;

    fn encode(&self, out: &mut [u8]) {
        let mut p = Put::new(out);
        p.i64(self.start.0).i64(self.end.0).u32(self.thread.0);
        p.u16(self.cpu).u8(self.left_as);
    }

    fn decode(bytes: &[u8]) -> Self {
        let mut g = Get::new(bytes);
        ThreadRun {
            start: Ns(g.i64()),
            end: Ns(g.i64()),
            thread: ThreadId(g.u32()),
            cpu: g.u16(),
            left_as: g.u8(),
        }
    }
}

/// How many of each entity one report has: the bounds of its events' ids. A record read back
/// from a file is checked against them before it is used ([`Fits`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Processes.
    pub processes: u32,
    /// Threads.
    pub threads: u32,
    /// GPUs.
    pub gpus: u32,
    /// Streams.
    pub streams: u32,
    /// Metric series.
    pub series: u32,
    /// Strings.
    pub strings: u32,
    /// Call stacks.
    pub stacks: u32,
}

impl Limits {
    /// The limits of a report read alone.
    pub fn of(t: &super::Timeline) -> Limits {
        let n = |len: usize| len as u32;
        Limits {
            processes: n(t.processes.len()),
            threads: n(t.threads.len()),
            gpus: n(t.gpus.len()),
            streams: n(t.streams.len()),
            series: n(t.metric_series.len()),
            strings: n(t.strings.len()),
            stacks: n(t.stacks.len()),
        }
    }
}

/// Whether a record's ids are inside its report's [`Limits`] and its interval is not reversed.
pub trait Fits {
    /// True when the record can be used.
    fn fits(&self, l: &Limits) -> bool;
}

impl Fits for Kernel {
    fn fits(&self, l: &Limits) -> bool {
        self.end >= self.start
            && self.stream.0 < l.streams
            && self.short_name.0 < l.strings
            && self.name.0 < l.strings
    }
}

impl Fits for Memcpy {
    fn fits(&self, l: &Limits) -> bool {
        self.end >= self.start && self.stream.0 < l.streams
    }
}

impl Fits for Memset {
    fn fits(&self, l: &Limits) -> bool {
        self.end >= self.start && self.stream.0 < l.streams
    }
}

impl Fits for GraphLaunch {
    fn fits(&self, l: &Limits) -> bool {
        self.end >= self.start && self.stream.0 < l.streams
    }
}

impl Fits for ApiCall {
    fn fits(&self, l: &Limits) -> bool {
        self.end >= self.start && self.thread.0 < l.threads && self.name.0 < l.strings
    }
}

impl Fits for OsCall {
    fn fits(&self, l: &Limits) -> bool {
        self.end >= self.start
            && self.thread.0 < l.threads
            && self.name.0 < l.strings
            && self.stack.is_none_or(|s| s.0 < l.stacks)
    }
}

impl Fits for MpiCall {
    fn fits(&self, l: &Limits) -> bool {
        self.end >= self.start && self.thread.0 < l.threads && self.name.0 < l.strings
    }
}

impl Fits for AccEvent {
    fn fits(&self, l: &Limits) -> bool {
        let texts = [self.name, self.source, self.function, self.object];
        self.end >= self.start && self.thread.0 < l.threads && texts.iter().all(|t| t.0 < l.strings)
    }
}

impl Fits for SyncEvent {
    fn fits(&self, l: &Limits) -> bool {
        self.end >= self.start
            && self.process.0 < l.processes
            && self.stream.is_none_or(|s| s.0 < l.streams)
    }
}

impl Fits for SampleEvent {
    fn fits(&self, l: &Limits) -> bool {
        self.thread.0 < l.threads && self.stack.0 < l.stacks
    }
}

impl Fits for ThreadRun {
    fn fits(&self, l: &Limits) -> bool {
        self.end >= self.start && self.thread.0 < l.threads
    }
}

impl Fits for MetricSample {
    fn fits(&self, l: &Limits) -> bool {
        self.series.0 < l.series
    }
}

impl Fits for MemoryEvent {
    fn fits(&self, l: &Limits) -> bool {
        self.gpu.0 < l.gpus
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: Record + std::fmt::Debug>(record: T) {
        let mut bytes = vec![0u8; T::SIZE];
        record.encode(&mut bytes);
        assert_eq!(T::decode(&bytes), record);
    }

    #[test]
    fn every_record_reads_back_equal() {
        let (start, end) = (Ns(-5), Ns(i64::MAX));
        round_trip(Kernel {
            start,
            end,
            stream: StreamId(3),
            short_name: StringId(4),
            name: StringId(5),
            correlation: u32::MAX,
            grid: [1, 2, 3],
            block: [4, 5, 6],
            registers: 7,
            static_shared: 8,
            dynamic_shared: 9,
            graph_node: 10,
        });
        round_trip(Memcpy {
            start,
            end,
            stream: StreamId(1),
            correlation: 2,
            bytes: u64::MAX,
            memory_kinds: (1, 2),
            copy_kind: 8,
        });
        round_trip(Memset {
            start,
            end,
            stream: StreamId(1),
            correlation: 2,
            bytes: 3,
            memory_kind: 4,
            value: 4,
        });
        round_trip(GraphLaunch {
            start,
            end,
            stream: StreamId(1),
            correlation: 2,
            graph: 3,
            exec: 4,
        });
        round_trip(ApiCall {
            start,
            end,
            thread: ThreadId(1),
            name: StringId(2),
            correlation: 3,
            class: 4,
            return_value: 700,
        });
        round_trip(OsCall {
            start,
            end,
            thread: ThreadId(1),
            stack: Some(StackId(9)),
            name: StringId(2),
        });
        for table in MpiTable::ALL {
            round_trip(MpiCall {
                start,
                end,
                thread: ThreadId(1),
                name: StringId(2),
                table,
                peer: -3,
                tag: i32::MIN,
                comm: u64::MAX,
                size: 5,
                recv_size: 6,
                request: 7,
            });
        }
        for table in AccTable::ALL {
            round_trip(AccEvent {
                start,
                end,
                thread: ThreadId(1),
                table,
                event_kind: 5,
                name: StringId(2),
                source: StringId(3),
                function: StringId(4),
                object: StringId(5),
                bytes: u64::MAX,
            });
        }
        for stream in [None, Some(StreamId(7))] {
            round_trip(SyncEvent {
                start,
                end,
                process: ProcessId(1),
                stream,
                correlation: 2,
                sync_type: 3,
            });
        }
        round_trip(SampleEvent {
            time: start,
            thread: ThreadId(3),
            stack: StackId(u32::MAX - 1),
            cpu: u16::MAX,
        });
        round_trip(ThreadRun {
            start,
            end,
            thread: ThreadId(4),
            cpu: 17,
            left_as: 5,
        });
        round_trip(MetricSample {
            time: start,
            value: -1,
            series: MetricSeriesId(2),
        });
        round_trip(MemoryEvent {
            time: end,
            bytes: -4096,
            gpu: GpuId(1),
        });
    }
}
