//! Perfetto export: one protobuf trace (`Trace` of TrackEvent packets, streamed to disk) with a
//! process track per rank, in rank order, holding its CPU threads (CUDA API calls, NVTX push/pop
//! ranges and marks), its NVTX start/end ranges, one track per CUDA stream named with its device
//! and role, and counters (compute and communication in flight, exposed communication) computed
//! from the same classification as the `overlap` table. Reference: perfetto.md.
//!
//! The trace is a head (the root track and an `nsys-lens` track recording the rebase) followed
//! by one *chunk* per exported process, in the plan's order. A chunk is written in one pass over
//! its process's events, in time order; its track uuids, sequence ids, pid and tids
//! come from the process's position in the plan alone, so chunks written apart (one per part of
//! a run, or one temporary file per process) concatenate into the same bytes.
//!
//! Layout rules kept here: every rank gets a pid unique in the trace (ranks on two nodes may
//! share a real pid; the real one is in the name); overlapping events that would break a track's
//! nesting go on lanes (same-named sibling tracks); each leaf track is one sequence with its own
//! interning and delta timestamps; a flow links each API call to the GPU work it launched when
//! both are exported.

mod lanes;
mod process;
mod protos;
mod samples;
mod sequence;
mod wire;

use super::Plan;
use super::prepare::Prepared;
use super::stream::{Events, Shared};
use crate::input::capture::Joined;
use crate::output::{Background, Output, Staged};
use protos::{TrackDescriptor, track_descriptor::ProcessOrdering};
use sequence::{Arg, Category, Name, PacketStream, Sequence, Texts, Value};
use std::io::{self, BufWriter, Write};
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
    /// MPI call slices.
    pub mpi_calls: u64,
    /// OpenACC event slices.
    pub acc_events: u64,
    /// GPU metric samples (counter values).
    pub metric_samples: u64,
    /// CPU samples (with call stacks).
    pub cpu_samples: u64,
    /// Times a CPU thread ran on a core (`Running` slices).
    pub thread_runs: u64,
    /// Flow arrows (API call to GPU operation, between collectives' kernels, MPI send to
    /// receive).
    pub flows: u64,
    /// Synchronization links (flows from the GPU operation a synchronization waited for to
    /// where the wait ended), also in `flows`.
    pub sync_links: u64,
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
            + self.mpi_calls
            + self.acc_events
            + self.thread_runs
    }

    fn add(&mut self, o: &Counts) {
        self.kernels += o.kernels;
        self.memcpy += o.memcpy;
        self.memset += o.memset;
        self.graphs += o.graphs;
        self.api += o.api;
        self.nvtx += o.nvtx;
        self.os_calls += o.os_calls;
        self.mpi_calls += o.mpi_calls;
        self.acc_events += o.acc_events;
        self.metric_samples += o.metric_samples;
        self.cpu_samples += o.cpu_samples;
        self.thread_runs += o.thread_runs;
        self.flows += o.flows;
        self.sync_links += o.sync_links;
        self.tracks += o.tracks;
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

/// Writes the trace of `plan` to `path` (under a temporary name, renamed when `staged` commits;
/// see [`crate::output`]). `parts`
/// are the joined captures, `prepared` what [`super::prepare`] found for every exported process,
/// `threads` how many parts are encoded at once. With one exported process its chunk is encoded
/// straight into the file; otherwise each part is encoded into one temporary file per process,
/// and the files are appended in the plan's order. The events come from `shared` when given:
/// a stream over all `parts` run elsewhere, given only when one stream covers the trace (one
/// exported process, or one part).
pub fn write(
    plan: &Plan,
    parts: &[Joined],
    prepared: &[Option<Prepared>],
    path: &Path,
    (options, threads): (Options, usize),
    shared: Option<Shared>,
    staged: &Staged,
) -> anyhow::Result<Summary> {
    write_file(path, options, staged, |out| {
        let mut stream = PacketStream::new(out);
        let mut counts = head(plan, &mut stream)?;
        if plan.exported.len() != 1 {
            let chunks = match (parts, shared) {
                ([part], Some(shared)) => {
                    let chunks = encode_part(plan, part, prepared, Some(shared));
                    let chunks = chunks.map_err(|cause| part.error(cause))?;
                    chunks.into_iter().map(|(_, chunk)| Some(chunk)).collect()
                }
                _ => encode_parts(plan, parts, prepared, threads)?,
            };
            return append(stream, counts, chunks.into_iter().flatten());
        }
        let all: Vec<&Joined> = parts.iter().collect();
        let mut out = Some(stream);
        let encoded = encode(plan, &all, prepared, shared, |_| {
            Ok(out.take().expect("one exported process"))
        })?;
        let (stream, one) = encoded
            .into_iter()
            .flatten()
            .next()
            .expect("the exported process is prepared");
        counts.add(&one);
        Ok((stream.bytes, counts))
    })
}

/// Writes the trace of `plan` from its processes' chunks encoded elsewhere (every exported
/// process's, in the plan's order), renamed into place when `staged` commits.
pub fn write_chunks(
    plan: &Plan,
    chunks: Vec<Chunk>,
    path: &Path,
    options: Options,
    staged: &Staged,
) -> anyhow::Result<Summary> {
    write_file(path, options, staged, |out| {
        let mut stream = PacketStream::new(out);
        let counts = head(plan, &mut stream)?;
        append(stream, counts, chunks)
    })
}

/// Writes `path` (gzipped with `options.gzip`) under a temporary name with `body`, which
/// returns the bytes it wrote and what they hold; the file joins `staged`.
fn write_file(
    path: &Path,
    options: Options,
    staged: &Staged,
    body: impl FnOnce(&mut dyn Write) -> anyhow::Result<(u64, Counts)>,
) -> anyhow::Result<Summary> {
    let output = Output::create(path)?;
    let mut out = Background::new(output.file().try_clone()?, options.gzip)?;
    let (trace_bytes, counts) = body(&mut out)?;
    out.finish()?;
    let bytes = output.file().metadata()?.len();
    staged.add(output)?;
    Ok(Summary {
        path: path.to_path_buf(),
        bytes,
        trace_bytes,
        counts,
    })
}

/// Appends chunks after the head; the bytes written in all, and the counts.
fn append(
    stream: PacketStream<&mut dyn Write>,
    mut counts: Counts,
    chunks: impl IntoIterator<Item = Chunk>,
) -> anyhow::Result<(u64, Counts)> {
    let mut bytes = stream.bytes;
    let out = stream.into_inner()?;
    for mut chunk in chunks {
        counts.add(&chunk.counts);
        bytes += chunk.bytes;
        io::copy(&mut chunk.reader, out)?;
    }
    Ok((bytes, counts))
}

/// One process's chunk, encoded apart: its bytes, their number and what they hold.
pub struct Chunk {
    /// The bytes.
    pub reader: Box<dyn io::Read + Send>,
    /// How many.
    pub bytes: u64,
    /// What they hold.
    pub counts: Counts,
}

/// One process's chunk: its stream and what it holds.
type Encoded<W> = (PacketStream<W>, Counts);

/// Encodes every part into temporary chunks, up to `threads` parts at once; the chunks come back
/// by position in the plan.
fn encode_parts(
    plan: &Plan,
    parts: &[Joined],
    prepared: &[Option<Prepared>],
    threads: usize,
) -> anyhow::Result<Vec<Option<Chunk>>> {
    let per_part = crate::nsys::read_each(
        parts.iter().collect(),
        threads,
        |part: &Joined| -> crate::nsys::Result<Vec<(usize, Chunk)>> {
            encode_part(plan, part, prepared, None).map_err(|cause| part.error(cause))
        },
    );
    let mut chunks: Vec<Option<Chunk>> = (0..plan.exported.len()).map(|_| None).collect();
    for part in per_part {
        for (position, chunk) in part? {
            chunks[position] = Some(chunk);
        }
    }
    Ok(chunks)
}

/// Encodes one part's processes, each into a temporary file of its own; their chunks by
/// position in the plan. The events come from `shared` when given (a stream over `part`).
pub fn encode_part(
    plan: &Plan,
    part: &Joined,
    prepared: &[Option<Prepared>],
    shared: Option<Shared>,
) -> io::Result<Vec<(usize, Chunk)>> {
    let encoded = encode(plan, &[part], prepared, shared, |_| {
        let file = crate::spill::temporary_file()?;
        Ok(PacketStream::new(BufWriter::with_capacity(1 << 18, file)))
    })?;
    let mut chunks = Vec::new();
    for (position, done) in encoded.into_iter().enumerate() {
        let Some((stream, counts)) = done else {
            continue;
        };
        let bytes = stream.bytes;
        let mut file = stream
            .into_inner()?
            .into_inner()
            .map_err(|e| e.into_error())?;
        io::Seek::seek(&mut file, io::SeekFrom::Start(0))?;
        let reader = Box::new(io::BufReader::new(file));
        chunks.push((
            position,
            Chunk {
                reader,
                bytes,
                counts,
            },
        ));
    }
    Ok(chunks)
}

/// Encodes the processes of `parts` (one pass over their events), each into the stream `make`
/// gives for its position; returns each one's stream and counts by position.
fn encode<W: Write>(
    plan: &Plan,
    parts: &[&Joined],
    prepared: &[Option<Prepared>],
    shared: Option<Shared>,
    mut make: impl FnMut(usize) -> io::Result<PacketStream<W>>,
) -> io::Result<Vec<Option<Encoded<W>>>> {
    let timeline = plan.activity.timeline;
    let mut writers: Vec<Option<process::ProcessWriter<W>>> = Vec::new();
    for (position, p) in prepared.iter().enumerate() {
        let report = timeline.process(plan.exported[position].process).report;
        let mine = parts.iter().any(|part| part.report == report);
        writers.push(match p {
            Some(p) if mine => {
                let out = make(position)?;
                Some(process::ProcessWriter::new(plan, position, p, out)?)
            }
            _ => None,
        });
    }
    Events::new(plan, parts, shared).drive(&mut writers, &mut (), |_, _| Ok(()))?;
    writers
        .into_iter()
        .map(|w| w.map(|w| w.finish()).transpose())
        .collect()
}

/// The root track (explicit process order) and an `nsys-lens` track with one instant at 0
/// recording the rebase offset; its description gives every report's clock offset (and
/// collective correction).
fn head<W: Write>(plan: &Plan, out: &mut PacketStream<W>) -> io::Result<Counts> {
    out.describe(TrackDescriptor {
        uuid: Some(0),
        process_ordering: Some(ProcessOrdering::Explicit as i32),
        ..TrackDescriptor::default()
    })?;
    let mut description = String::from(
        "Times are ns since the earliest exported event: merged-clock time minus \
         rebase_offset_ns. Reports onto the merged clock:",
    );
    for r in &plan.activity.timeline.reports {
        description += &format!(
            " {}: {:+} ns (of which collective correction {:+} ns);",
            r.path.display(),
            r.clock.offset,
            r.clock.correction
        );
    }
    out.describe(TrackDescriptor {
        uuid: Some(METADATA_TRACK),
        name: Some("nsys-lens".to_string()),
        description: Some(description),
        ..TrackDescriptor::default()
    })?;
    let mut seq = Sequence::new(METADATA_SEQUENCE, METADATA_TRACK);
    let texts = Texts {
        timeline: plan.activity.timeline,
        rules: plan.rules,
    };
    seq.instant(
        out,
        0,
        (Name::Fixed("nsys-lens export"), Category::Export),
        &[(Arg::RebaseOffset, Value::Int(plan.offset))],
        texts,
    )?;
    // Collective, critical-path and MPI message flows are counted here, once each; launch flows as their
    // operations are written.
    Ok(Counts {
        tracks: 1,
        flows: plan.collectives.flows
            + plan.critical_path.flow_count
            + plan.messages.list.len() as u64,
        ..Counts::default()
    })
}

/// The uuid of the `nsys-lens` track.
const METADATA_TRACK: u64 = 1;
/// Its sequence.
const METADATA_SEQUENCE: u32 = sequence::DESCRIPTOR_SEQUENCE + 1;
