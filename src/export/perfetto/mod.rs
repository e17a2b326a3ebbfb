//! Perfetto export: one protobuf trace (`Trace` of TrackEvent packets, streamed to disk) with a
//! process track per rank, in rank order, holding its CPU threads (CUDA API calls, NVTX push/pop
//! ranges and marks), its NVTX start/end ranges, one track per CUDA stream named with its device
//! and role, and counters (compute and communication in flight, exposed communication) computed
//! from the same classification as the `overlap` table. Reference: perfetto.md.
//!
//! Layout rules kept here: every rank gets a pid unique in the trace (ranks on two nodes may
//! share a real pid; the real one is in the name); overlapping events that would break a track's
//! nesting go on lanes (same-named sibling tracks); each leaf track is one sequence with its own
//! interning and delta timestamps; a flow links each API call to the GPU work it launched when
//! both are exported.

mod cpu;
mod gpu;
mod lanes;
mod protos;
mod sequence;

use super::{Part, Scope};
use protos::{
    CounterDescriptor, ProcessDescriptor, ThreadDescriptor, TrackDescriptor,
    counter_descriptor::Unit,
    track_descriptor::{ChildTracksOrdering, ProcessOrdering},
};
use sequence::{Arg, Category, Name, PacketStream, Sequence, Texts, Value};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Above this many slices the browser UI is likely to run out of memory (perfetto.md §10).
pub const UI_SLICE_LIMIT: u64 = 10_000_000;

/// How to write.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Gzip the file (the UI and trace_processor read it directly).
    pub gzip: bool,
}

/// What was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Kernel slices.
    pub kernels: u64,
    /// Memory copy slices.
    pub memcpy: u64,
    /// Memory set slices.
    pub memset: u64,
    /// CUDA graph launch slices.
    pub graphs: u64,
    /// CUDA API call slices.
    pub api: u64,
    /// NVTX ranges and marks.
    pub nvtx: u64,
    /// OS runtime call slices.
    pub os_calls: u64,
    /// GPU metric samples (counter values).
    pub metric_samples: u64,
    /// Flow arrows (API call to GPU operation).
    pub flows: u64,
    /// Track descriptors.
    pub tracks: u64,
}

impl Counts {
    /// Slices and instants in all.
    pub fn slices(&self) -> u64 {
        self.kernels
            + self.memcpy
            + self.memset
            + self.graphs
            + self.api
            + self.nvtx
            + self.os_calls
    }
}

/// The written file and what it holds.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Uncompressed trace bytes.
    pub trace_bytes: u64,
    /// Events written.
    pub counts: Counts,
}

/// Writes `scope` to `path` (under a temporary name, renamed when complete).
pub fn write(scope: &Scope, path: &Path, options: Options) -> anyhow::Result<Summary> {
    let temp = crate::output::temporary_beside(path)?;
    let buffered = BufWriter::with_capacity(1 << 20, temp.as_file().try_clone()?);
    let (trace_bytes, counts) = if options.gzip {
        let gz = flate2::write::GzEncoder::new(buffered, flate2::Compression::fast());
        let (gz, bytes, counts) = write_to(scope, gz)?;
        gz.finish()?.flush()?;
        (bytes, counts)
    } else {
        let (mut out, bytes, counts) = write_to(scope, buffered)?;
        out.flush()?;
        (bytes, counts)
    };
    let bytes = temp.as_file().metadata()?.len();
    crate::output::persist(temp, path)?;
    Ok(Summary {
        path: path.to_path_buf(),
        bytes,
        trace_bytes,
        counts,
    })
}

fn write_to<W: Write>(scope: &Scope, out: W) -> anyhow::Result<(W, u64, Counts)> {
    let mut w = Writer {
        out: PacketStream::new(out),
        scope,
        next_uuid: 1,
        next_sequence: sequence::DESCRIPTOR_SEQUENCE + 1,
        next_pid: 10_000,
        next_tid: 100_000,
        // Collective flows are counted here, once each; launch flows as their kernels are written.
        counts: Counts {
            flows: scope.collectives.flows,
            ..Counts::default()
        },
        flows: gpu::FlowKeys::new(scope),
    };
    w.out.describe(TrackDescriptor {
        uuid: Some(0),
        process_ordering: Some(ProcessOrdering::Explicit as i32),
        ..TrackDescriptor::default()
    })?;
    w.metadata()?;
    for (order, part) in scope.parts.iter().enumerate() {
        w.part(order, part)?;
    }
    let bytes = w.out.bytes;
    let counts = w.counts;
    Ok((w.out.into_inner()?, bytes, counts))
}

/// The writer's state: the packet stream, id counters, counts, flow endpoints.
struct Writer<'s, 'a, 't, W: Write> {
    out: PacketStream<W>,
    scope: &'s Scope<'a, 't>,
    next_uuid: u64,
    next_sequence: u32,
    next_pid: i32,
    next_tid: i64,
    counts: Counts,
    flows: gpu::FlowKeys,
}

impl<'a, W: Write> Writer<'_, 'a, '_, W> {
    /// Writes a descriptor with a fresh uuid; returns the uuid.
    fn track(&mut self, mut descriptor: TrackDescriptor) -> anyhow::Result<u64> {
        let uuid = self.next_uuid;
        self.next_uuid += 1;
        descriptor.uuid = Some(uuid);
        self.out.describe(descriptor)?;
        self.counts.tracks += 1;
        Ok(uuid)
    }

    /// A plain track named `name` under `parent`, with its own sequence.
    fn child(&mut self, parent: u64, name: String, order: i32) -> anyhow::Result<Sequence> {
        let uuid = self.track(TrackDescriptor {
            parent_uuid: Some(parent),
            name: Some(name),
            sibling_order_rank: Some(order),
            ..TrackDescriptor::default()
        })?;
        Ok(self.sequence(uuid))
    }

    /// Where names come from.
    fn texts(&self) -> Texts<'a> {
        Texts {
            timeline: self.scope.activity.timeline,
            rules: self.scope.rules,
        }
    }

    /// A fresh sequence writing to `track`.
    fn sequence(&mut self, track: u64) -> Sequence {
        self.next_sequence += 1;
        Sequence::new(self.next_sequence - 1, track)
    }

    /// An `nsys-lens` track with one instant at 0 recording the rebase offset; its description
    /// gives every report's clock offset (and collective correction).
    fn metadata(&mut self) -> anyhow::Result<()> {
        let mut description = String::from(
            "Times are ns since the earliest exported event: merged-clock time minus \
             rebase_offset_ns. Reports onto the merged clock:",
        );
        for r in &self.scope.activity.timeline.reports {
            description += &format!(
                " {}: {:+} ns (of which collective correction {:+} ns);",
                r.path.display(),
                r.clock.offset,
                r.clock.correction
            );
        }
        let uuid = self.track(TrackDescriptor {
            name: Some("nsys-lens".to_string()),
            description: Some(description),
            ..TrackDescriptor::default()
        })?;
        let mut seq = self.sequence(uuid);
        let texts = self.texts();
        seq.instant(
            &mut self.out,
            0,
            (Name::Fixed("nsys-lens export"), Category::Export),
            &[(Arg::RebaseOffset, Value::Int(self.scope.offset))],
            texts,
        )?;
        Ok(())
    }

    /// One process: its descriptor, threads, NVTX tracks, GPU streams and counters.
    fn part(&mut self, order: usize, part: &Part) -> anyhow::Result<()> {
        let pid = self.next_pid;
        self.next_pid += 1;
        let timeline = self.scope.activity.timeline;
        let process = timeline.process(part.process);
        let host = &timeline.host(process.host).name;
        let uuid = self.track(TrackDescriptor {
            process: Some(ProcessDescriptor {
                pid: Some(pid),
                process_name: Some(process_name(self.scope, part)),
                process_labels: vec![format!("host {host}"), format!("pid {}", process.pid)],
            }),
            sibling_order_rank: Some(order as i32),
            ..TrackDescriptor::default()
        })?;
        cpu::threads(self, part, pid)?;
        cpu::nvtx_ranges(self, part, uuid)?;
        gpu::streams(self, part, uuid)?;
        gpu::counters(self, part, uuid)?;
        gpu::metrics(self, part, uuid)?;
        gpu::memory(self, part, uuid)
    }

    /// A thread track; returns its uuid.
    fn thread_track(&mut self, pid: i32, name: String, order: i32) -> anyhow::Result<u64> {
        let tid = self.next_tid;
        self.next_tid += 1;
        self.track(TrackDescriptor {
            thread: Some(ThreadDescriptor {
                pid: Some(pid),
                tid: Some(tid),
                thread_name: Some(name),
            }),
            sibling_order_rank: Some(order),
            ..TrackDescriptor::default()
        })
    }

    /// A group track (GPU) under the process whose children keep their given order.
    fn group(&mut self, parent: u64, name: String, order: i32) -> anyhow::Result<u64> {
        self.track(TrackDescriptor {
            parent_uuid: Some(parent),
            name: Some(name),
            child_ordering: Some(ChildTracksOrdering::Explicit as i32),
            sibling_order_rank: Some(order),
            ..TrackDescriptor::default()
        })
    }

    /// A counter track under `parent`.
    fn counter_track(&mut self, parent: u64, name: String, order: i32) -> anyhow::Result<Sequence> {
        let uuid = self.track(TrackDescriptor {
            parent_uuid: Some(parent),
            name: Some(name),
            sibling_order_rank: Some(order),
            counter: Some(CounterDescriptor {
                unit: Some(Unit::Count as i32),
                unit_name: None,
            }),
            ..TrackDescriptor::default()
        })?;
        Ok(self.sequence(uuid))
    }
}

/// `rank 3 · pp 1/2 ep 1/2 · node ault42 · pid 337169 · GPU 0 (H100)`; other processes
/// `node ault42 · pid 4242 · python3`.
fn process_name(scope: &Scope, part: &Part) -> String {
    let timeline = scope.activity.timeline;
    let process = timeline.process(part.process);
    let host = &timeline.host(process.host).name;
    let Some(rank) = part.rank else {
        return match timeline.text(process.name) {
            "" => format!("node {host} · pid {}", process.pid),
            name => format!("node {host} · pid {} · {name}", process.pid),
        };
    };
    let mut words = vec![format!("rank {}", rank.rank)];
    if let Some(label) = rank.label {
        let axes: Vec<String> = [
            ("pp", label.pp),
            ("dp", label.dp),
            ("cp", label.cp),
            ("ep", label.ep),
        ]
        .iter()
        .filter(|(_, c)| c.size > 1)
        .map(|(axis, c)| format!("{axis} {}/{}", c.rank, c.size))
        .collect();
        if !axes.is_empty() {
            words.push(axes.join(" "));
        }
    }
    words.push(format!("node {host}"));
    words.push(format!("pid {}", process.pid));
    if let Some(device) = rank.device {
        let gpu = timeline
            .gpus
            .iter()
            .find(|g| g.process == part.process && g.device == device)
            .map(|g| timeline.text(g.name))
            .unwrap_or("");
        words.push(if gpu.is_empty() {
            format!("GPU {device}")
        } else {
            format!("GPU {device} ({gpu})")
        });
    }
    words.join(" · ")
}
