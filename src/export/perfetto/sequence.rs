//! Packets on the wire: the framed packet stream ([`PacketStream`]) and one sequence per leaf
//! track ([`Sequence`]) with its own interning tables and delta timestamps.
//!
//! A sequence's first packet clears its incremental state, sets the track as the default for
//! later events, and starts an incremental clock (id 64) at the first event's time; every later
//! packet carries only the time since the previous one. Names, categories, annotation names and
//! repeated string values are interned: defined once on the packet that first uses them.

use super::protos::{
    ClockSnapshot, DebugAnnotationName, EventCategory, EventName, InternedData, InternedString,
    TracePacket, TracePacketDefaults, TrackDescriptor, TrackEventDefaults, clock_snapshot,
    trace_packet::SequenceFlags, track_event,
};
use super::samples::Callstacks;
use super::wire::{Annotation, EventPacket};
use crate::classify::{Purpose, Role, RoleRules};
use crate::hash::FxHashMap;
use crate::model::{StackId, StringId, Timeline, split_api_version};
use prost::Message;
use std::io::{self, Write};

/// `BUILTIN_CLOCK_BOOTTIME`: the trace's clock.
const BOOTTIME: u32 = 6;
/// The sequence-scoped incremental clock every sequence uses for its deltas.
const DELTA_CLOCK: u32 = 64;
/// The sequence that carries track descriptors (absolute timestamps, no interning).
pub const DESCRIPTOR_SEQUENCE: u32 = 1;

/// Writes `Trace.packet` records (`0x0A`, length, bytes) one by one.
pub struct PacketStream<W: Write> {
    out: W,
    /// The packet being framed.
    body: Vec<u8>,
    /// Bytes written so far.
    pub bytes: u64,
}

impl<W: Write> PacketStream<W> {
    /// A stream into `out`.
    pub fn new(out: W) -> Self {
        PacketStream {
            out,
            body: Vec::with_capacity(256),
            bytes: 0,
        }
    }

    /// Appends one packet.
    pub fn write(&mut self, packet: &TracePacket) -> io::Result<()> {
        self.body.clear();
        packet
            .encode(&mut self.body)
            .map_err(|e| io::Error::other(e.to_string()))?;
        self.frame()
    }

    /// Appends one event's packet.
    fn write_event(&mut self, packet: &mut EventPacket) -> io::Result<()> {
        self.body.clear();
        packet.encode_record(&mut self.body);
        self.out.write_all(&self.body)?;
        self.bytes += self.body.len() as u64;
        Ok(())
    }

    /// Writes the packet in `body` as one `Trace.packet` record.
    fn frame(&mut self) -> io::Result<()> {
        let mut head = Vec::with_capacity(11);
        head.push(0x0A);
        super::wire::varint(&mut head, self.body.len() as u64);
        self.out.write_all(&head)?;
        self.out.write_all(&self.body)?;
        self.bytes += (head.len() + self.body.len()) as u64;
        Ok(())
    }

    /// Writes a track descriptor.
    pub fn describe(&mut self, descriptor: TrackDescriptor) -> io::Result<()> {
        self.write(&TracePacket {
            timestamp: Some(0),
            trusted_packet_sequence_id: Some(DESCRIPTOR_SEQUENCE),
            track_descriptor: Some(descriptor),
            ..TracePacket::default()
        })
    }

    /// Finishes the stream and returns the writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Event categories (interned per sequence; iid = index + 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// GPU kernels.
    Kernel,
    /// Memory copies.
    Memcpy,
    /// Memory sets.
    Memset,
    /// CUDA runtime and driver calls.
    CudaApi,
    /// NVTX ranges and marks.
    Nvtx,
    /// What nsys-lens records about the export itself.
    Export,
    /// OS runtime library calls.
    OsRuntime,
    /// CUDA graph launches.
    Graph,
    /// MPI calls.
    Mpi,
    /// OpenACC events.
    OpenAcc,
    /// A CUDA call that failed (an instant at its start).
    CudaError,
    /// A CPU thread running on a core (thread scheduling).
    Sched,
    /// Where a synchronization's wait ended: a host wait's return, a stream wait's release.
    CudaSync,
}

impl Category {
    const NAMES: [&'static str; 13] = [
        "kernel",
        "memcpy",
        "memset",
        "cuda_api",
        "nvtx",
        "nsys_lens",
        "os_runtime",
        "cuda_graph",
        "mpi",
        "openacc",
        "cuda_error",
        "sched",
        "cuda_sync",
    ];
}

/// Debug annotation names (interned per sequence; iid = index + 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// Full kernel signature.
    Demangled,
    /// Grid dimensions.
    Grid,
    /// Block dimensions.
    Block,
    /// Registers per thread.
    Registers,
    /// Static + dynamic shared memory, bytes.
    SharedMemory,
    /// CUDA correlation id.
    Correlation,
    /// The stream's role.
    Role,
    /// An NCCL kernel's own role (`barrier` for a collective on a compute stream).
    CommRole,
    /// What decided that role (`framework`, `nccl_nvtx`, ...).
    RoleEvidence,
    /// The collective instance a kernel took part in (the same number on every member).
    Collective,
    /// Bytes moved or set.
    Bytes,
    /// Memory copy direction.
    CopyKind,
    /// NVTX domain.
    Domain,
    /// What was subtracted from merged-clock times to put the export at 0.
    RebaseOffset,
    /// A CUDA graph's id.
    GraphId,
    /// A CUDA executable graph's id.
    GraphExecId,
    /// The CUDA graph node a kernel ran as.
    GraphNode,
    /// An MPI call's class (`point_to_point`, `collective`...).
    MpiClass,
    /// The remote rank of an MPI send or receive.
    PeerRank,
    /// The root rank of an MPI collective.
    RootRank,
    /// An MPI message tag.
    Tag,
    /// An MPI communicator.
    Communicator,
    /// Bytes an MPI collective received.
    RecvBytes,
    /// An OpenACC event's kind.
    EventKind,
    /// An OpenACC event's source location.
    Source,
    /// The function an OpenACC event happened in.
    Function,
    /// The variable an OpenACC data event moved.
    Variable,
    /// The kernel an OpenACC launch started.
    KernelName,
    /// An NVTX event's payload (the JSON of an extended payload, or a scalar's value).
    Payload,
    /// A CUDA API function's version suffix as CUPTI records it (`7000` of
    /// `cudaLaunchKernel_v7000`; the slice is named `cudaLaunchKernel`, as Nsight shows it).
    ApiVersion,
    /// A copy's or set's bytes over its duration, MB/s (Nsight's throughput).
    Throughput,
    /// A CUDA call's return code, where it failed (non-zero).
    ReturnValue,
    /// A copy's source memory kind (`pageable`, `pinned`, `device`, ...).
    SourceMemory,
    /// A copy's destination memory kind.
    DestinationMemory,
    /// The CPU core a thread ran on.
    Cpu,
    /// The state a thread was left in when scheduled out (when recorded).
    LeftAs,
}

impl Arg {
    const NAMES: [&'static str; 36] = [
        "name",
        "grid",
        "block",
        "registers",
        "shared_memory",
        "correlation_id",
        "stream_role",
        "comm_role",
        "role_evidence",
        "collective",
        "bytes",
        "copy_kind",
        "domain",
        "rebase_offset_ns",
        "graph_id",
        "graph_exec_id",
        "graph_node_id",
        "mpi_class",
        "peer_rank",
        "root_rank",
        "tag",
        "communicator",
        "recv_bytes",
        "event_kind",
        "source",
        "function",
        "variable",
        "kernel",
        "payload",
        "cupti_version",
        "throughput_mb_s",
        "return_value",
        "src_memory",
        "dst_memory",
        "cpu",
        "left_as",
    ];
}

// A sequence marks the argument names it interned in one `u64`, the categories in one `u32`.
const _: () = assert!(Arg::NAMES.len() <= 64 && Category::NAMES.len() <= 32);

/// An event name: timeline text or a fixed string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Name {
    /// Interned timeline text.
    Text(StringId),
    /// A fixed name (`[CUDA memset]`).
    Fixed(&'static str),
}

/// An annotation value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Value {
    /// An unsigned integer.
    Uint(u64),
    /// A signed integer.
    Int(i64),
    /// Timeline text (interned as a string value).
    Text(StringId),
    /// A fixed string (interned).
    Fixed(&'static str),
    /// Three dimensions, shown `x×y×z` (interned).
    Dims([u32; 3]),
    /// A stream role (interned).
    Role(Role),
    /// A communication role (interned).
    Purpose(Purpose),
}

/// Where names and values get their text: the timeline's strings and the role labels.
#[derive(Clone, Copy)]
pub struct Texts<'a> {
    /// The timeline.
    pub timeline: &'a Timeline,
    /// The rules the roles were named with.
    pub rules: &'a RoleRules,
}

/// One sequence: one leaf track's events, interning tables and clock.
pub struct Sequence {
    id: u32,
    track: u64,
    last: Option<u64>,
    names: FxHashMap<Name, u64>,
    values: FxHashMap<Value, u64>,
    categories: u32,
    args: u64,
    /// The call stacks interned (slices of OS calls carry theirs).
    callstacks: Option<Box<Callstacks>>,
    packet: EventPacket,
}

impl Sequence {
    /// A sequence with id `id` (never 0 or [`DESCRIPTOR_SEQUENCE`]) writing to track `track`.
    pub fn new(id: u32, track: u64) -> Sequence {
        Sequence {
            id,
            track,
            last: None,
            names: FxHashMap::default(),
            values: FxHashMap::default(),
            categories: 0,
            args: 0,
            callstacks: None,
            packet: EventPacket::new(id),
        }
    }

    /// Whether nothing was written on it.
    pub fn is_empty(&self) -> bool {
        self.last.is_none()
    }

    /// Opens a slice, with its call stack when it has one.
    #[allow(clippy::too_many_arguments)]
    pub fn begin<W: Write>(
        &mut self,
        out: &mut PacketStream<W>,
        ts: u64,
        label: (Name, Category),
        args: &[(Arg, Value)],
        flows: &[u64],
        stack: Option<StackId>,
        texts: Texts,
    ) -> io::Result<()> {
        let kind = track_event::Type::SliceBegin;
        self.labelled(out, (ts, kind), label, args, (flows, stack), texts)
    }

    /// Closes the innermost open slice.
    pub fn end<W: Write>(&mut self, out: &mut PacketStream<W>, ts: u64) -> io::Result<()> {
        self.event(out, ts, track_event::Type::SliceEnd)?;
        self.flush(out)
    }

    /// An instant event.
    pub fn instant<W: Write>(
        &mut self,
        out: &mut PacketStream<W>,
        ts: u64,
        label: (Name, Category),
        args: &[(Arg, Value)],
        texts: Texts,
    ) -> io::Result<()> {
        self.linked_instant(out, ts, label, args, &[], texts)
    }

    /// An instant event where `flows` arrive.
    pub fn linked_instant<W: Write>(
        &mut self,
        out: &mut PacketStream<W>,
        ts: u64,
        label: (Name, Category),
        args: &[(Arg, Value)],
        flows: &[u64],
        texts: Texts,
    ) -> io::Result<()> {
        let kind = track_event::Type::Instant;
        self.labelled(out, (ts, kind), label, args, (flows, None), texts)
    }

    /// An event with a name, a category, annotations, its flows and its call stack.
    fn labelled<W: Write>(
        &mut self,
        out: &mut PacketStream<W>,
        (ts, kind): (u64, track_event::Type),
        (name, category): (Name, Category),
        args: &[(Arg, Value)],
        (flows, stack): (&[u64], Option<StackId>),
        texts: Texts,
    ) -> io::Result<()> {
        let event = self.event(out, ts, kind)?;
        event.flow_ids.extend_from_slice(flows);
        // Most events define nothing: the interned data is built only when something is new.
        let mut interned = None;
        self.label(name, category, args, texts, &mut interned);
        if let Some(stack) = stack {
            let stacks = self.callstacks.get_or_insert_with(Box::default);
            let data = defining(&mut interned);
            self.packet.callstack_iid = Some(stacks.iid(stack, texts.timeline, data));
            interned = interned.filter(|data| *data != InternedData::default());
        }
        if interned.is_some() {
            self.packet.interned = interned;
        }
        self.flush(out)
    }

    /// A counter sample (on a counter track).
    pub fn counter<W: Write>(
        &mut self,
        out: &mut PacketStream<W>,
        ts: u64,
        value: i64,
    ) -> io::Result<()> {
        self.sample(out, ts, |event| event.counter_value = Some(value))
    }

    /// A counter sample of a fractional value (on a counter track).
    pub fn double_counter<W: Write>(
        &mut self,
        out: &mut PacketStream<W>,
        ts: u64,
        value: f64,
    ) -> io::Result<()> {
        self.sample(out, ts, |event| event.double_counter_value = Some(value))
    }

    /// A counter sample whose value `set` gives.
    fn sample<W: Write>(
        &mut self,
        out: &mut PacketStream<W>,
        ts: u64,
        set: impl FnOnce(&mut EventPacket),
    ) -> io::Result<()> {
        set(self.event(out, ts, track_event::Type::Counter)?);
        self.flush(out)
    }

    /// Starts the next packet: the clock on the first one, then the delta since the last.
    fn event<W: Write>(
        &mut self,
        out: &mut PacketStream<W>,
        ts: u64,
        kind: track_event::Type,
    ) -> io::Result<&mut EventPacket> {
        let last = match self.last {
            Some(last) => last,
            None => {
                self.start(out, ts)?;
                ts
            }
        };
        debug_assert!(ts >= last, "sequence {} goes back in time", self.id);
        self.last = Some(ts);
        let flags = SequenceFlags::SeqNeedsIncrementalState as u32;
        self.packet.reset(ts - last, flags, kind as i32);
        Ok(&mut self.packet)
    }

    /// The sequence's first packet: cleared state, default track, the delta clock at `ts`.
    fn start<W: Write>(&mut self, out: &mut PacketStream<W>, ts: u64) -> io::Result<()> {
        let clock = |clock_id, is_incremental| clock_snapshot::Clock {
            clock_id: Some(clock_id),
            timestamp: Some(ts),
            is_incremental,
        };
        out.write(&TracePacket {
            timestamp: Some(ts),
            timestamp_clock_id: Some(BOOTTIME),
            trusted_packet_sequence_id: Some(self.id),
            sequence_flags: Some(
                SequenceFlags::SeqIncrementalStateCleared as u32
                    | SequenceFlags::SeqNeedsIncrementalState as u32,
            ),
            trace_packet_defaults: Some(TracePacketDefaults {
                timestamp_clock_id: Some(DELTA_CLOCK),
                track_event_defaults: Some(TrackEventDefaults {
                    track_uuid: Some(self.track),
                }),
            }),
            clock_snapshot: Some(ClockSnapshot {
                clocks: vec![clock(BOOTTIME, None), clock(DELTA_CLOCK, Some(true))],
                primary_trace_clock: Some(BOOTTIME),
            }),
            ..TracePacket::default()
        })
    }

    /// Sets the pending event's name, category and annotations, adding what they define
    /// first to `interned` (created then).
    fn label(
        &mut self,
        name: Name,
        category: Category,
        args: &[(Arg, Value)],
        texts: Texts,
        interned: &mut Option<InternedData>,
    ) {
        let name_iid = intern(&mut self.names, name, |iid| {
            let name = match name {
                Name::Text(id) if category == Category::CudaApi => {
                    split_api_version(texts.timeline.text(id)).0.to_string()
                }
                Name::Text(id) => texts.timeline.text(id).to_string(),
                Name::Fixed(s) => s.to_string(),
            };
            defining(interned).event_names.push(EventName {
                iid: Some(iid),
                name: Some(name),
            });
        });
        let category_iid = category as u64 + 1;
        if self.categories & (1 << category as u32) == 0 {
            self.categories |= 1 << category as u32;
            defining(interned).event_categories.push(EventCategory {
                iid: Some(category_iid),
                name: Some(Category::NAMES[category as usize].to_string()),
            });
        }
        for &(arg, value) in args {
            let arg_iid = arg as u64 + 1;
            if self.args & (1u64 << arg as u32) == 0 {
                self.args |= 1u64 << arg as u32;
                defining(interned)
                    .debug_annotation_names
                    .push(DebugAnnotationName {
                        iid: Some(arg_iid),
                        name: Some(Arg::NAMES[arg as usize].to_string()),
                    });
            }
            let annotation = match value {
                Value::Uint(v) => Annotation::Uint(v),
                Value::Int(v) => Annotation::Int(v),
                _ => Annotation::StringIid(intern(&mut self.values, value, |iid| {
                    defining(interned)
                        .debug_annotation_string_values
                        .push(InternedString {
                            iid: Some(iid),
                            str: Some(value_text(value, texts).into_bytes()),
                        });
                })),
            };
            self.packet.annotate(arg_iid, annotation);
        }
        self.packet.name_iid = Some(name_iid);
        self.packet.category_iid = Some(category_iid);
    }

    fn flush<W: Write>(&mut self, out: &mut PacketStream<W>) -> io::Result<()> {
        out.write_event(&mut self.packet)
    }
}

/// The interned data of the packet being written, created when it first defines something.
fn defining(interned: &mut Option<InternedData>) -> &mut InternedData {
    interned.get_or_insert_with(InternedData::default)
}

/// The iid of `key`, defining it (with `define(iid)`) the first time.
pub(super) fn intern<K: std::hash::Hash + Eq>(
    table: &mut FxHashMap<K, u64>,
    key: K,
    define: impl FnOnce(u64),
) -> u64 {
    let next = table.len() as u64 + 1;
    *table.entry(key).or_insert_with(|| {
        define(next);
        next
    })
}

fn value_text(value: Value, texts: Texts) -> String {
    match value {
        Value::Uint(v) => v.to_string(),
        Value::Int(v) => v.to_string(),
        Value::Text(id) => texts.timeline.text(id).to_string(),
        Value::Role(role) => role.name(texts.rules).to_string(),
        Value::Purpose(p) => texts.rules.label(p).to_string(),
        Value::Fixed(s) => s.to_string(),
        Value::Dims([x, y, z]) => format!("{x}×{y}×{z}"),
    }
}
