//! Part files: one node's reports read where they lie, for a cluster's scheduler to spread a
//! capture of hundreds of nodes (issue 17). `nsys-lens part` writes one per node; `convert`,
//! and every analysis, take part files wherever they take exports.
//!
//! A part file holds what [`Capture::read`] made of each of its reports: the light timeline
//! (entities, NVTX events, communication kernels, peer copies and their launches, on the
//! report's own clock and ids) and every event, each kind one sorted run, read back from the
//! file as it is needed (a part is never loaded whole). Layout: [`MAGIC`], the length of the light section, the light
//! section, then the runs, report by report and kind by kind, in the order the light section
//! lists their lengths, then the seal ([`super::seal`]: a checksum of the whole file, and the
//! fingerprint of its light section, which stands for the reports it was made from). Every
//! number is little-endian; text is length-prefixed UTF-8.

use super::capture::{Capture, Events, Names};
use super::codec::{Get, Got, Put};
use super::seal::{self, Sealing};
use crate::input::Format;
use crate::model::records::{Fits, Limits};
use crate::model::{
    ApiCall, ClockMapping, Frame, GpuId, Host, HostId, Kernel, Memcpy, MetricSeries, MpiCall, Ns,
    NvtxEvent, NvtxKind, Process, ProcessId, ReportId, ReportInfo, RowCounts, Stream, StringId,
    StringTable, Thread, ThreadId, TimeBase, Timeline,
};
use crate::nsys::{ExportMeta, HostGpu, Warning, Warnings};
use crate::spill::{Record, Sorted};
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The extension `nsys-lens part` gives a part file (without its dot).
pub const PART_EXTENSION: &str = "lens-part";

/// The first bytes of every part file: the format's number last (11: sealed, [`super::seal`],
/// with the peer copies in the light section and each report's world size).
pub const MAGIC: &[u8; 16] = b"nsys-lens part\x00\x0b";

/// A part file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file cannot be opened or read.
    #[error("{path}: cannot read the part file: {cause}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        cause: io::Error,
    },
    /// Not a part file, or one of another format.
    #[error("{path}: not an nsys-lens part file of this version (made by `nsys-lens part`)")]
    NotAPart {
        /// The file.
        path: PathBuf,
    },
    /// The file ends early or holds impossible values.
    #[error("{path}: the part file is truncated or corrupted ({what})")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        what: String,
    },
}

/// Whether `path` starts like a part file.
pub fn is_part(path: &Path) -> bool {
    let mut head = [0u8; 16];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| head[..14] == MAGIC[..14])
}

/// Writes `captures` (one node's reports) to `path`, under a temporary name renamed when
/// complete.
pub fn write(captures: &[Capture], path: &Path) -> anyhow::Result<()> {
    let mut light = Put::default();
    light.u64(captures.len() as u64);
    for capture in captures {
        put_timeline(&mut light, &capture.light, Paths::Kept);
        put_names(&mut light, &capture.events.names);
        for len in run_lengths(&capture.events) {
            light.u64(len);
        }
    }
    let output = crate::output::Output::create(path)?;
    let sealing = Sealing::new(output.file().try_clone()?);
    let mut out = io::BufWriter::with_capacity(1 << 20, sealing);
    out.write_all(MAGIC)?;
    out.write_all(&(light.0.len() as u64).to_le_bytes())?;
    out.write_all(&light.0)?;
    for capture in captures {
        let e = &capture.events;
        e.kernels.write_to(&mut out)?;
        e.memcpys.write_to(&mut out)?;
        e.memsets.write_to(&mut out)?;
        e.graph_launches.write_to(&mut out)?;
        e.api_calls.write_to(&mut out)?;
        e.syncs.write_to(&mut out)?;
        e.os_calls.write_to(&mut out)?;
        e.mpi_calls.write_to(&mut out)?;
        e.acc_events.write_to(&mut out)?;
        e.metrics.write_to(&mut out)?;
        e.memory.write_to(&mut out)?;
        e.samples.write_to(&mut out)?;
        e.thread_runs.write_to(&mut out)?;
    }
    let sealing = out.into_inner().map_err(|e| e.into_error())?;
    sealing.seal(seal::fingerprint(&light.0))?.flush()?;
    output.commit()
}

/// How many kinds of event a capture has a run of.
const RUNS: usize = 13;

/// The records of each kind, in file order.
fn run_lengths(e: &Events) -> [u64; RUNS] {
    [
        e.kernels.len(),
        e.memcpys.len(),
        e.memsets.len(),
        e.graph_launches.len(),
        e.api_calls.len(),
        e.syncs.len(),
        e.os_calls.len(),
        e.mpi_calls.len(),
        e.acc_events.len(),
        e.metrics.len(),
        e.memory.len(),
        e.samples.len(),
        e.thread_runs.len(),
    ]
}

/// The captures a part file holds; their events stay in the file.
pub fn read(path: &Path) -> Result<Vec<Capture>, Error> {
    let io = |cause| Error::Io {
        path: path.to_path_buf(),
        cause,
    };
    let mut file = File::open(path).map_err(io)?;
    let corrupt = |what: String| Error::Corrupt {
        path: path.to_path_buf(),
        what,
    };
    let mut head = [0u8; 24];
    let got = read_up_to(&mut file, &mut head).map_err(io)?;
    if got < MAGIC.len() || &head[..16] != MAGIC {
        let started = got >= 14 && head[..14] == MAGIC[..14];
        return Err(match started {
            true if got < 16 => corrupt("it ends inside its first bytes".into()),
            _ => Error::NotAPart {
                path: path.to_path_buf(),
            },
        });
    }
    if got < head.len() {
        return Err(corrupt("it ends before its header".into()));
    }
    // Positional reads: the file's cursor stays after the header.
    let sealed = seal::check(&file).map_err(corrupt)?;
    let light_len = u64::from_le_bytes(head[16..24].try_into().expect("8 bytes"));
    let file_len = sealed.data_len;
    if light_len > file_len.saturating_sub(24) {
        return Err(corrupt("the light section is longer than the file".into()));
    }
    let mut light = vec![0u8; light_len as usize];
    file.read_exact(&mut light).map_err(io)?;
    let file = Arc::new(file);
    let mut at = 24 + light_len;
    let mut get = Get::new(&light);
    let count = get.u64().map_err(corrupt)?;
    let mut captures = Vec::new();
    for _ in 0..count {
        let timeline = get_timeline(&mut get).map_err(corrupt)?;
        let names = get_names(&mut get).map_err(corrupt)?;
        let mut lengths = [0u64; RUNS];
        for len in &mut lengths {
            *len = get.u64().map_err(corrupt)?;
        }
        let mut run = |records: u64, size: usize| -> Result<(Arc<File>, u64, u64), Error> {
            let start = at;
            at = records
                .checked_mul(size as u64)
                .and_then(|b| b.checked_add(at))
                .filter(|&end| end <= file_len)
                .ok_or_else(|| corrupt("an event run ends beyond the file".into()))?;
            Ok((file.clone(), start, records))
        };
        let events = Events {
            kernels: sorted(run(lengths[0], Kernel::SIZE)?),
            memcpys: sorted(run(lengths[1], crate::model::Memcpy::SIZE)?),
            memsets: sorted(run(lengths[2], crate::model::Memset::SIZE)?),
            graph_launches: sorted(run(lengths[3], crate::model::GraphLaunch::SIZE)?),
            api_calls: sorted(run(lengths[4], ApiCall::SIZE)?),
            syncs: sorted(run(lengths[5], crate::model::SyncEvent::SIZE)?),
            os_calls: sorted(run(lengths[6], crate::model::OsCall::SIZE)?),
            mpi_calls: sorted(run(lengths[7], MpiCall::SIZE)?),
            acc_events: sorted(run(lengths[8], crate::model::AccEvent::SIZE)?),
            metrics: sorted(run(lengths[9], crate::model::MetricSample::SIZE)?),
            memory: sorted(run(lengths[10], crate::model::MemoryEvent::SIZE)?),
            samples: sorted(run(lengths[11], crate::model::SampleEvent::SIZE)?),
            thread_runs: sorted(run(lengths[12], crate::model::ThreadRun::SIZE)?),
            names,
        };
        captures.push(Capture {
            source: path.to_path_buf(),
            light: timeline,
            events,
        });
    }
    Ok(captures)
}

/// Reads as much of `buf` as the file holds; how much.
fn read_up_to(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

/// A run of a part file as a sorted set.
fn sorted<T: Record>((file, offset, records): (Arc<File>, u64, u64)) -> Sorted<T> {
    Sorted::from_file(file, offset, records)
}

/// Whether a serialized timeline keeps its reports' paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Paths {
    /// Kept: a part file names where its reports were read.
    Kept,
    /// Left out: a fingerprint stands for what was read, wherever it lay.
    Left,
}

/// A fingerprint of what the light timeline `t` holds (not where its reports lay), and of
/// `sizes`: what an encoded part checks its join against (`export::encoded`).
pub fn fingerprint(t: &Timeline, sizes: impl IntoIterator<Item = u64>) -> u64 {
    let mut p = Put::default();
    put_timeline(&mut p, t, Paths::Left);
    for size in sizes {
        p.u64(size);
    }
    seal::fingerprint(&p.0)
}

/// Writes the light timeline of one report (its heavy event vectors are empty but for the
/// communication kernels, the peer copies and their launches).
fn put_timeline(p: &mut Put, t: &Timeline, paths: Paths) {
    p.u64(t.strings.len() as u64);
    for i in 0..t.strings.len() as u32 {
        p.str(t.strings.get(StringId(i)));
    }
    p.u64(t.strings.non_utf8_count());
    p.u64(t.reports.len() as u64);
    for r in &t.reports {
        put_report(p, r, paths);
    }
    p.u64(t.hosts.len() as u64);
    for h in &t.hosts {
        p.str(&h.name);
        p.u64(h.reports.len() as u64);
        for r in &h.reports {
            p.u32(r.0);
        }
    }
    p.u64(t.processes.len() as u64);
    for x in &t.processes {
        p.u32(x.report.0);
        p.u32(x.host.0);
        p.u32(x.pid);
        p.u32(x.name.0);
        p.span(x.span);
        p.opt_i64(x.mpi_rank.map(i64::from));
    }
    p.u64(t.threads.len() as u64);
    for x in &t.threads {
        p.u32(x.process.0);
        p.u32(x.tid);
        p.u32(x.name.0);
        p.span(x.span);
    }
    p.u64(t.gpus.len() as u64);
    for g in &t.gpus {
        p.u32(g.process.0);
        p.u32(g.device);
        p.opt_i64(g.host_gpu);
        p.u32(g.name.0);
    }
    p.u64(t.streams.len() as u64);
    for s in &t.streams {
        p.u32(s.process.0);
        p.u32(s.gpu.0);
        p.u32(s.context);
        p.u32(s.stream);
        p.opt_i64(s.priority.map(i64::from));
        p.u64(s.kernels);
    }
    p.u64(t.metric_series.len() as u64);
    for m in &t.metric_series {
        p.u32(m.report.0);
        p.u32(m.gpu_index);
        p.u32(m.metric_id);
        p.u32(m.name.0);
        p.span(Some(m.span));
    }
    p.u64(t.stacks.len() as u64);
    for stack in t.stacks.iter() {
        p.u64(stack.len() as u64);
        for frame in stack {
            p.u32(frame.symbol.0);
            p.u32(frame.module.0);
        }
    }
    p.u64(t.kernels.len() as u64);
    t.kernels.iter().for_each(|k| p.record(k));
    p.u64(t.memcpys.len() as u64);
    t.memcpys.iter().for_each(|m| p.record(m));
    p.u64(t.api_calls.len() as u64);
    t.api_calls.iter().for_each(|a| p.record(a));
    p.u64(t.mpi_calls.len() as u64);
    t.mpi_calls.iter().for_each(|m| p.record(m));
    p.u64(t.nvtx.len() as u64);
    for n in &t.nvtx {
        p.i64(n.start.0);
        p.opt_i64(n.end.map(|e| e.0));
        p.u8(n.kind as u8);
        p.u32(n.thread.0);
        p.opt_i64(n.end_thread.map(|t| i64::from(t.0)));
        p.u32(n.domain.0);
        p.u32(n.text.0);
        p.u32(n.payload.0);
    }
}

fn put_report(p: &mut Put, r: &ReportInfo, paths: Paths) {
    match paths {
        Paths::Kept => p.str(&r.path.to_string_lossy()),
        Paths::Left => p.str(""),
    }
    p.u32(r.host.0);
    let m = &r.meta;
    p.opt_str(&m.product_version);
    p.opt_str(&m.schema_version);
    p.u8(u8::from(m.time_normalized));
    p.str(&m.hostname);
    p.opt_i64(m.session_start_utc_ns);
    p.opt_str(&m.session_start_text);
    p.opt_str(&m.source.map(|f| f.id().to_string()));
    p.opt_i64(m.world_size.map(i64::from));
    p.u64(m.gpus.len() as u64);
    for g in &m.gpus {
        p.i64(g.id);
        p.str(&g.name);
        p.opt_str(&g.bus_location);
    }
    p.u8(u8::from(r.clock.base == TimeBase::UtcEpoch));
    p.i64(r.clock.offset);
    p.i64(r.clock.correction);
    let c = &r.counts;
    for n in [
        c.kernels,
        c.memcpy,
        c.memset,
        c.cuda_api,
        c.sync,
        c.graphs,
        c.nvtx,
        c.osrt,
        c.gpu_metrics,
        c.memory,
        c.mpi,
        c.openacc,
        c.samples,
        c.sched,
    ] {
        p.u64(n);
    }
    p.span(r.span);
    let warnings: Vec<_> = r.warnings.iter().collect();
    p.u64(warnings.len() as u64);
    for (w, n) in warnings {
        let (tag, text, number) = match w {
            Warning::NoSessionStart => (0, "", 0),
            Warning::NoHostname => (1, "", 0),
            Warning::NewerSchema(v) => (2, v.as_str(), 0),
            Warning::EpochTimesWithoutMetadata => (3, "", 0),
            Warning::UnclosedNvtxRange => (4, "", 0),
            Warning::UnknownNvtxType(t) => (5, "", *t),
            Warning::NonUtf8Text => (6, "", 0),
            Warning::MissingGlobalPid(table) => (7, *table, 0),
            Warning::UnusedGpuMetrics => (8, "", 0),
            Warning::UnendedMpiCall => (9, "", 0),
            Warning::Untranslated(kind) => (10, kind.as_str(), 0),
            Warning::LongText => (11, "", 0),
            Warning::DuplicateGpuOps => (12, "", 0),
            Warning::NoClockBase => (13, "", 0),
            Warning::SampleWithoutStack => (14, "", 0),
            Warning::UnpairedSchedEvent => (15, "", 0),
        };
        p.u8(tag);
        p.str(text);
        p.i64(number);
        p.u64(n);
    }
}

fn put_names(p: &mut Put, n: &Names) {
    for kind in Names::KINDS {
        let used: Vec<StringId> = n.used(kind).collect();
        p.u64(used.len() as u64);
        used.iter().for_each(|id| p.u32(id.0));
    }
    p.u64(n.copy_kinds.len() as u64);
    n.copy_kinds.iter().for_each(|&k| p.u8(k));
    p.u8(u8::from(n.memset));
    p.u64(n.graph_execs.len() as u64);
    n.graph_execs.iter().for_each(|&e| p.u32(e));
}

fn get_names(g: &mut Get) -> Got<Names> {
    let mut names = Names::default();
    for kind in Names::KINDS {
        for _ in 0..g.count(4)? {
            names.add(StringId(g.u32()?), kind);
        }
    }
    for _ in 0..g.count(1)? {
        names.copy_kinds.insert(g.u8()?);
    }
    names.memset = g.bool()?;
    for _ in 0..g.count(4)? {
        names.graph_execs.insert(g.u32()?);
    }
    Ok(names)
}

/// Checks a record against its report's limits.
fn fits(record: &impl Fits, limits: &Limits) -> Got<()> {
    if record.fits(limits) {
        Ok(())
    } else {
        Err("an event refers to what the report does not hold".into())
    }
}

/// Checks that an id indexes a table of `len` entries.
fn id(v: u32, len: usize, what: &str) -> Got<u32> {
    if (v as usize) < len {
        Ok(v)
    } else {
        Err(format!("{what} {v} of {len}"))
    }
}

fn get_timeline(g: &mut Get) -> Got<Timeline> {
    let mut t = Timeline::default();
    let n = g.count(8)?;
    let mut strings = StringTable::default();
    for i in 0..n {
        let s = g.str()?;
        let got = strings.intern(&s);
        if got.index() != i {
            return Err("a string table with a repeated string".into());
        }
    }
    strings.add_non_utf8(g.u64()?);
    t.strings = strings;
    let text = |v: u32| id(v, n, "string").map(StringId);
    for _ in 0..g.count(8)? {
        t.reports.push(get_report(g)?);
    }
    for _ in 0..g.count(8)? {
        let name = g.str()?;
        let mut reports = Vec::new();
        for _ in 0..g.count(4)? {
            reports.push(ReportId(id(g.u32()?, t.reports.len(), "report")?));
        }
        t.hosts.push(Host { name, reports });
    }
    for r in &t.reports {
        id(r.host.0, t.hosts.len(), "host")?;
    }
    for _ in 0..g.count(42)? {
        let report = ReportId(id(g.u32()?, t.reports.len(), "report")?);
        let host = HostId(id(g.u32()?, t.hosts.len(), "host")?);
        let pid = g.u32()?;
        let name = text(g.u32()?)?;
        let span = g.span()?;
        let mpi_rank = match g.opt_i64()? {
            Some(r) => Some(u32::try_from(r).map_err(|_| format!("MPI rank {r}"))?),
            None => None,
        };
        t.processes.push(Process {
            report,
            host,
            pid,
            name,
            span,
            mpi_rank,
        });
    }
    let processes = t.processes.len();
    for _ in 0..g.count(29)? {
        let process = ProcessId(id(g.u32()?, processes, "process")?);
        let tid = g.u32()?;
        let name = text(g.u32()?)?;
        let span = g.span()?;
        t.threads.push(Thread {
            process,
            tid,
            name,
            span,
        });
    }
    for _ in 0..g.count(16)? {
        let process = ProcessId(id(g.u32()?, processes, "process")?);
        let device = g.u32()?;
        let host_gpu = g.opt_i64()?;
        let name = text(g.u32()?)?;
        t.gpus.push(crate::model::Gpu {
            process,
            device,
            host_gpu,
            name,
        });
    }
    for _ in 0..g.count(24)? {
        let process = ProcessId(id(g.u32()?, processes, "process")?);
        let gpu = GpuId(id(g.u32()?, t.gpus.len(), "GPU")?);
        let context = g.u32()?;
        let stream = g.u32()?;
        let priority = g.opt_i64()?.map(|p| p as i32);
        let kernels = g.u64()?;
        t.streams.push(Stream {
            process,
            gpu,
            context,
            stream,
            priority,
            kernels,
        });
    }
    for _ in 0..g.count(16)? {
        let report = ReportId(id(g.u32()?, t.reports.len(), "report")?);
        let gpu_index = g.u32()?;
        let metric_id = g.u32()?;
        let name = text(g.u32()?)?;
        let span = g.span()?.ok_or("a metric series without samples")?;
        t.metric_series.push(MetricSeries {
            report,
            gpu_index,
            metric_id,
            name,
            span,
        });
    }
    let mut frames = Vec::new();
    for _ in 0..g.count(8)? {
        frames.clear();
        for _ in 0..g.count(8)? {
            let symbol = text(g.u32()?)?;
            let module = text(g.u32()?)?;
            frames.push(Frame { symbol, module });
        }
        t.stacks.intern(&frames);
    }
    let limits = Limits::of(&t);
    for _ in 0..g.count(Kernel::SIZE)? {
        let k: Kernel = g.record()?;
        fits(&k, &limits)?;
        t.kernels.push(k);
    }
    for _ in 0..g.count(Memcpy::SIZE)? {
        let m: Memcpy = g.record()?;
        fits(&m, &limits)?;
        t.memcpys.push(m);
    }
    for _ in 0..g.count(ApiCall::SIZE)? {
        let a: ApiCall = g.record()?;
        fits(&a, &limits)?;
        t.api_calls.push(a);
    }
    for _ in 0..g.count(MpiCall::SIZE)? {
        let m: MpiCall = g.record()?;
        fits(&m, &limits)?;
        t.mpi_calls.push(m);
    }
    let threads = t.threads.len();
    for _ in 0..g.count(34)? {
        let start = Ns(g.i64()?);
        let end = g.opt_i64()?.map(Ns);
        let kind = match g.u8()? {
            0 => NvtxKind::Mark,
            1 => NvtxKind::PushPop,
            2 => NvtxKind::StartEnd,
            3 => NvtxKind::Metadata,
            k => return Err(format!("NVTX kind {k}")),
        };
        let thread = ThreadId(id(g.u32()?, threads, "thread")?);
        let end_thread = match g.opt_i64()? {
            Some(v) => Some(ThreadId(id(v as u32, threads, "thread")?)),
            None => None,
        };
        let domain = text(g.u32()?)?;
        let text_id = text(g.u32()?)?;
        let payload = text(g.u32()?)?;
        if end.is_some_and(|e| e < start) {
            return Err("an NVTX range that ends before it starts".into());
        }
        t.nvtx.push(NvtxEvent {
            start,
            end,
            kind,
            thread,
            end_thread,
            domain,
            text: text_id,
            payload,
        });
    }
    Ok(t)
}

fn get_report(g: &mut Get) -> Got<ReportInfo> {
    let path = PathBuf::from(g.str()?);
    let host = HostId(g.u32()?);
    let product_version = g.opt_str()?;
    let schema_version = g.opt_str()?;
    let time_normalized = g.bool()?;
    let hostname = g.str()?;
    let session_start_utc_ns = g.opt_i64()?;
    let session_start_text = g.opt_str()?;
    let source = g.opt_str()?.and_then(|f| Format::from_id(&f));
    let world_size = g.opt_i64()?.and_then(|n| u32::try_from(n).ok());
    let mut gpus = Vec::new();
    for _ in 0..g.count(17)? {
        gpus.push(HostGpu {
            id: g.i64()?,
            name: g.str()?,
            bus_location: g.opt_str()?,
        });
    }
    let base = if g.bool()? {
        TimeBase::UtcEpoch
    } else {
        TimeBase::SessionRelative
    };
    let clock = ClockMapping {
        base,
        offset: g.i64()?,
        correction: g.i64()?,
    };
    let mut c = [0u64; 14];
    for n in &mut c {
        *n = g.u64()?;
    }
    let counts = RowCounts {
        kernels: c[0],
        memcpy: c[1],
        memset: c[2],
        cuda_api: c[3],
        sync: c[4],
        graphs: c[5],
        nvtx: c[6],
        osrt: c[7],
        gpu_metrics: c[8],
        memory: c[9],
        mpi: c[10],
        openacc: c[11],
        samples: c[12],
        sched: c[13],
    };
    let span = g.span()?;
    let mut warnings = Warnings::default();
    for _ in 0..g.count(25)? {
        let tag = g.u8()?;
        let text = g.str()?;
        let number = g.i64()?;
        let n = g.u64()?;
        let warning = match tag {
            0 => Warning::NoSessionStart,
            1 => Warning::NoHostname,
            2 => Warning::NewerSchema(text),
            3 => Warning::EpochTimesWithoutMetadata,
            4 => Warning::UnclosedNvtxRange,
            5 => Warning::UnknownNvtxType(number),
            6 => Warning::NonUtf8Text,
            7 => match crate::nsys::table_name(&text) {
                Some(table) => Warning::MissingGlobalPid(table),
                None => continue,
            },
            8 => Warning::UnusedGpuMetrics,
            9 => Warning::UnendedMpiCall,
            10 => Warning::Untranslated(text),
            11 => Warning::LongText,
            12 => Warning::DuplicateGpuOps,
            13 => Warning::NoClockBase,
            14 => Warning::SampleWithoutStack,
            15 => Warning::UnpairedSchedEvent,
            _ => continue,
        };
        warnings.add_n(warning, n);
    }
    Ok(ReportInfo {
        path,
        host,
        meta: ExportMeta {
            product_version,
            schema_version,
            time_normalized,
            hostname,
            session_start_utc_ns,
            session_start_text,
            gpus,
            source,
            world_size,
        },
        clock,
        counts,
        span,
        warnings,
    })
}
