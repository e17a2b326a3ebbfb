//! CPU samples as Perfetto perf samples (`PerfSample`): what the UI draws as a thread's sample
//! track and sums into a flame graph. One sequence per process carries its samples, each
//! naming its thread by the pid and tid of the thread's track, and interns what they refer to
//! the first time it is used ([`Callstacks`], which slices with a call stack use too):
//! function names, modules (as mappings, their paths cut at `/`), frames and call stacks
//! (outermost frame first, as Perfetto orders them).

use super::protos::{
    Callstack, Frame as FrameProto, InternedData, InternedString, Mapping, PerfSample, TracePacket,
    trace_packet::SequenceFlags,
};
use super::sequence::{PacketStream, intern};
use crate::hash::FxHashMap;
use crate::model::{Frame, NO_CPU, SampleEvent, StackId, StringId, Timeline};
use std::io::{self, Write};

/// `BUILTIN_CLOCK_BOOTTIME`: the clock of every sample's time.
const BOOTTIME: u32 = 6;

/// One process's sample sequence and the call stacks it interned.
pub struct Samples {
    id: u32,
    started: bool,
    stacks: Callstacks,
}

/// The call stacks one sequence interned, and what they are made of (iids count from 1 per
/// table): function names, module paths' components, mappings, frames.
#[derive(Default)]
pub struct Callstacks {
    functions: FxHashMap<StringId, u64>,
    paths: FxHashMap<String, u64>,
    mappings: FxHashMap<StringId, u64>,
    frames: FxHashMap<Frame, u64>,
    stacks: FxHashMap<StackId, u64>,
}

impl Samples {
    /// The samples of sequence `id`.
    pub fn new(id: u32) -> Samples {
        Samples {
            id,
            started: false,
            stacks: Callstacks::default(),
        }
    }

    /// Writes `sample` at `ts` (trace time) for the thread whose track has `pid` and `tid`.
    pub fn write<W: Write>(
        &mut self,
        out: &mut PacketStream<W>,
        (ts, pid, tid): (u64, u32, u32),
        sample: &SampleEvent,
        timeline: &Timeline,
    ) -> io::Result<()> {
        let mut interned = InternedData::default();
        let callstack = self.stacks.iid(sample.stack, timeline, &mut interned);
        let flags = match std::mem::replace(&mut self.started, true) {
            false => SequenceFlags::SeqIncrementalStateCleared as u32,
            true => 0,
        } | SequenceFlags::SeqNeedsIncrementalState as u32;
        out.write(&TracePacket {
            timestamp: Some(ts),
            timestamp_clock_id: Some(BOOTTIME),
            trusted_packet_sequence_id: Some(self.id),
            sequence_flags: Some(flags),
            interned_data: (interned != InternedData::default()).then_some(interned),
            perf_sample: Some(PerfSample {
                cpu: (sample.cpu != NO_CPU).then_some(u32::from(sample.cpu)),
                pid: Some(pid),
                tid: Some(tid),
                callstack_iid: Some(callstack),
            }),
            ..TracePacket::default()
        })
    }
}

impl Callstacks {
    /// The iid of a call stack, its definition (and its frames') added to `new` when new.
    pub fn iid(&mut self, id: StackId, timeline: &Timeline, new: &mut InternedData) -> u64 {
        if let Some(&iid) = self.stacks.get(&id) {
            return iid;
        }
        let frames = timeline.stacks.get(id);
        let frame_ids = frames
            .iter()
            .rev()
            .map(|&frame| self.frame(frame, timeline, new))
            .collect();
        let iid = self.stacks.len() as u64 + 1;
        self.stacks.insert(id, iid);
        new.callstacks.push(Callstack {
            iid: Some(iid),
            frame_ids,
        });
        iid
    }

    /// The iid of a frame; its `rel_pc` is its own iid, so that no two frames of one module
    /// look like one address.
    fn frame(&mut self, frame: Frame, timeline: &Timeline, new: &mut InternedData) -> u64 {
        if let Some(&iid) = self.frames.get(&frame) {
            return iid;
        }
        let function = intern(&mut self.functions, frame.symbol, |iid| {
            let text = timeline.text(frame.symbol).as_bytes().to_vec();
            new.function_names.push(interned(iid, text));
        });
        let mapping = self.mapping(frame.module, timeline, new);
        let iid = self.frames.len() as u64 + 1;
        self.frames.insert(frame, iid);
        new.frames.push(FrameProto {
            iid: Some(iid),
            function_name_id: Some(function),
            mapping_id: Some(mapping),
            rel_pc: Some(iid),
        });
        iid
    }

    /// The iid of a module's mapping, its path's components interned as mapping paths.
    fn mapping(&mut self, module: StringId, timeline: &Timeline, new: &mut InternedData) -> u64 {
        if let Some(&iid) = self.mappings.get(&module) {
            return iid;
        }
        let mut path_string_ids = Vec::new();
        for part in timeline.text(module).split('/').filter(|p| !p.is_empty()) {
            let iid = intern(&mut self.paths, part.to_string(), |iid| {
                new.mapping_paths
                    .push(interned(iid, part.as_bytes().to_vec()));
            });
            path_string_ids.push(iid);
        }
        let iid = self.mappings.len() as u64 + 1;
        self.mappings.insert(module, iid);
        new.mappings.push(Mapping {
            iid: Some(iid),
            path_string_ids,
        });
        iid
    }
}

fn interned(iid: u64, text: Vec<u8>) -> InternedString {
    InternedString {
        iid: Some(iid),
        str: Some(text),
    }
}
