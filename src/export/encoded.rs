//! Encoded parts: one part of a run written in both formats on the node that holds it, then
//! joined into the run's traces (issue 17). Every node plans the same export from every part's
//! light timeline (ranks, windows, clocks, value tables), so a part encodes its own processes
//! exactly as a whole conversion would; joining is then copying: the Perfetto chunks one after
//! another in the plan's order, and the Paraver bodies merged by (time, task, thread).
//!
//! An encoded part file is [`MAGIC`], its Paraver body, its processes' Perfetto chunks, a
//! trailer saying where each is and what it holds, the trailer's length, [`MAGIC`] again, and
//! the seal ([`crate::input::seal`]): a checksum of the file, and the fingerprint of the inputs and
//! options it was encoded from ([`fingerprint`]), which the join checks against its own.

use super::Plan;
use super::paraver::{self, TaskNames};
use super::perfetto::{self, Chunk};
use super::prepare::prepare;
use crate::input::capture::Joined;
use crate::input::codec::{Get, Got, Put};
use crate::input::seal::{self, Sealing};
use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The first and last bytes of an encoded part file (format 3: sealed, [`crate::input::seal`]).
pub const MAGIC: &[u8; 16] = b"nsys-lens coded\x05";

/// Which formats a conversion writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Formats {
    /// The Perfetto trace.
    pub perfetto: bool,
    /// The Paraver files.
    pub paraver: bool,
}

/// What an encoded part file holds.
pub struct EncodedPart {
    path: PathBuf,
    /// The options it was encoded with.
    pub options: String,
    /// Its part's index, and the number of parts.
    pub part: (u64, u64),
    paraver: Option<(paraver::Encoded, u64, u64)>,
    perfetto: Vec<(usize, perfetto::Counts, u64, u64)>,
}

/// Encodes the processes of `part` (some of the joined captures `parts`: the reports of input
/// `k` of `count`) to `path` (under a temporary name renamed when complete), in the `formats`
/// asked; `options` names the conversion's options, which the join checks.
#[allow(clippy::too_many_arguments)]
pub fn encode(
    plan: &Plan,
    parts: &[Joined],
    part: &[&Joined],
    (k, count): (usize, usize),
    formats: Formats,
    options: &str,
    path: &Path,
    memory: usize,
) -> anyhow::Result<()> {
    let prepared = prepare(plan, part)?;
    let output = crate::output::Output::create(path)?;
    let sealing = Sealing::new(output.file().try_clone()?);
    let mut out = io::BufWriter::with_capacity(1 << 20, sealing);
    out.write_all(MAGIC)?;
    let mut at = MAGIC.len() as u64;
    let mut trailer = Put::default();
    trailer.str(options);
    trailer.u64(k as u64);
    trailer.u64(count as u64);
    trailer.u8(u8::from(formats.paraver));
    if formats.paraver {
        let counting = Counting { out, bytes: 0 };
        let (counting, encoded) =
            paraver::encode_part(plan, parts, part, &prepared, counting, memory)?;
        out = counting.out;
        put_paraver(&mut trailer, &encoded, at, counting.bytes);
        at += counting.bytes;
    }
    let mut chunks = Vec::new();
    if formats.perfetto {
        for joined in part {
            chunks.extend(perfetto::encode_part(plan, joined, &prepared, None)?);
        }
        chunks.sort_by_key(|(position, _)| *position);
    }
    trailer.u64(chunks.len() as u64);
    for (position, mut chunk) in chunks {
        io::copy(&mut chunk.reader, &mut out)?;
        trailer.u64(position as u64);
        put_perfetto_counts(&mut trailer, &chunk.counts);
        trailer.u64(at);
        trailer.u64(chunk.bytes);
        at += chunk.bytes;
    }
    out.write_all(&trailer.0)?;
    out.write_all(&(trailer.0.len() as u64).to_le_bytes())?;
    out.write_all(MAGIC)?;
    let sealing = out.into_inner().map_err(|e| e.into_error())?;
    sealing.seal(fingerprint(plan, parts, options))?.flush()?;
    output.commit()
}

/// What an encoded part stands for: the light timeline of the whole run (not where its files
/// lay), every part's events, and the conversion's `options`. Every step of a cluster
/// conversion that reads the same inputs with the same options computes the same value.
pub fn fingerprint(plan: &Plan, parts: &[Joined], options: &str) -> u64 {
    let sizes = parts.iter().map(|p| p.events.size().0);
    let options = seal::fingerprint(options.as_bytes());
    crate::input::part::fingerprint(plan.activity.timeline, sizes.chain([options]))
}

/// Counts the bytes written through it.
struct Counting<W: Write> {
    out: W,
    bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Reads what an encoded part file holds (its bytes stay in the file), once its seal holds and
/// says it was encoded from what the join has (`expected`, its [`fingerprint`]).
pub fn read(path: &Path, expected: u64) -> anyhow::Result<EncodedPart> {
    let bad = |what: &str| {
        anyhow::anyhow!(
            "{}: not a complete encoded part ({what}); encode it again with \
             `nsys-lens convert PARTS --encode N`",
            path.display()
        )
    };
    let mut file = File::open(path)
        .map_err(|e| anyhow::anyhow!("{}: cannot read the encoded part: {e}", path.display()))?;
    let mut head = [0u8; 16];
    if file.read_exact(&mut head).is_err() || &head != MAGIC {
        return Err(bad("it does not start as one"));
    }
    let sealed = seal::check(&file).map_err(|what| bad(&what))?;
    anyhow::ensure!(
        sealed.fingerprint == expected,
        "{}: encoded from other inputs or with other options than this join's (another run, \
         or parts changed since); encode every input again with the inputs and options of the \
         join",
        path.display()
    );
    let len = sealed.data_len;
    if len < 40 {
        return Err(bad("it is too short"));
    }
    let mut tail = [0u8; 24];
    file.seek(SeekFrom::Start(len - 24))?;
    file.read_exact(&mut tail)?;
    if &tail[8..] != MAGIC {
        return Err(bad("it does not end as one: was it written whole?"));
    }
    let trailer_len = u64::from_le_bytes(tail[..8].try_into().expect("8 bytes"));
    if trailer_len > len - 40 {
        return Err(bad("its trailer is longer than the file"));
    }
    let mut trailer = vec![0u8; trailer_len as usize];
    file.seek(SeekFrom::Start(len - 24 - trailer_len))?;
    file.read_exact(&mut trailer)?;
    decode(path, &trailer, len - 24 - trailer_len).map_err(|what| bad(&what))
}

fn decode(path: &Path, trailer: &[u8], data_end: u64) -> Got<EncodedPart> {
    let mut g = Get::new(trailer);
    let options = g.str()?;
    let part = (g.u64()?, g.u64()?);
    let in_file = |at: u64, len: u64| {
        at.checked_add(len)
            .filter(|&end| end <= data_end)
            .map(|_| ())
            .ok_or_else(|| "a section beyond the file".to_string())
    };
    let paraver = if g.bool()? {
        let (encoded, at, len) = get_paraver(&mut g)?;
        in_file(at, len)?;
        Some((encoded, at, len))
    } else {
        None
    };
    let mut perfetto = Vec::new();
    for _ in 0..g.count(8)? {
        let position = g.u64()? as usize;
        let counts = get_perfetto_counts(&mut g)?;
        let (at, len) = (g.u64()?, g.u64()?);
        in_file(at, len)?;
        perfetto.push((position, counts, at, len));
    }
    Ok(EncodedPart {
        path: path.to_path_buf(),
        options,
        part,
        paraver,
        perfetto,
    })
}

impl EncodedPart {
    /// A reader of `len` bytes of the file from `at`.
    fn section(&self, at: u64, len: u64) -> io::Result<BufReader<io::Take<File>>> {
        let mut file = File::open(&self.path)?;
        file.seek(SeekFrom::Start(at))?;
        Ok(BufReader::with_capacity(1 << 18, file.take(len)))
    }

    /// Its Perfetto chunks, by position in the plan.
    pub fn chunks(&self) -> io::Result<Vec<(usize, Chunk)>> {
        self.perfetto
            .iter()
            .map(|&(position, counts, at, len)| {
                let chunk = Chunk {
                    reader: Box::new(self.section(at, len)?),
                    bytes: len,
                    counts,
                };
                Ok((position, chunk))
            })
            .collect()
    }

    /// Its Paraver body and what goes with it, when it was encoded.
    pub fn body(&self) -> io::Result<Option<(paraver::Encoded, Box<dyn io::BufRead + Send>)>> {
        let Some((encoded, at, len)) = &self.paraver else {
            return Ok(None);
        };
        Ok(Some((encoded.clone(), Box::new(self.section(*at, *len)?))))
    }
}

fn put_paraver(p: &mut Put, e: &paraver::Encoded, at: u64, len: u64) {
    p.u64(e.tasks.len() as u64);
    for (position, t) in &e.tasks {
        p.u64(*position as u64);
        p.str(&t.name);
        p.u32(t.node);
        p.u64(t.threads.len() as u64);
        t.threads.iter().for_each(|name| p.str(name));
    }
    p.opt_i64(e.end);
    for set in [&e.used.roles, &e.used.stages] {
        p.u64(set.len() as u64);
        set.iter().for_each(|&v| p.u32(v));
    }
    let c = &e.counts;
    for n in [
        c.kernels,
        c.memops,
        c.graphs,
        c.api,
        c.nvtx,
        c.os_calls,
        c.mpi_calls,
        c.acc_events,
        c.metric_samples,
        c.cpu_samples,
        c.thread_runs,
        c.comms,
        c.comms_skipped,
        c.mpi_comms,
        c.sync_comms,
        c.records,
    ] {
        p.u64(n);
    }
    p.u64(at);
    p.u64(len);
}

fn get_paraver(g: &mut Get) -> Got<(paraver::Encoded, u64, u64)> {
    let mut tasks = Vec::new();
    for _ in 0..g.count(24)? {
        let position = g.u64()? as usize;
        let name = g.str()?;
        let node = g.u32()?;
        let mut threads = Vec::new();
        for _ in 0..g.count(8)? {
            threads.push(g.str()?);
        }
        let names = TaskNames {
            name,
            node,
            threads,
        };
        tasks.push((position, names));
    }
    let end = g.opt_i64()?;
    let mut sets: [BTreeSet<u32>; 2] = Default::default();
    for set in &mut sets {
        for _ in 0..g.count(4)? {
            set.insert(g.u32()?);
        }
    }
    let mut c = [0u64; 16];
    for n in &mut c {
        *n = g.u64()?;
    }
    let [roles, stages] = sets;
    let encoded = paraver::Encoded {
        tasks,
        end,
        used: paraver::Used { roles, stages },
        counts: paraver::Counts {
            kernels: c[0],
            memops: c[1],
            graphs: c[2],
            api: c[3],
            nvtx: c[4],
            os_calls: c[5],
            mpi_calls: c[6],
            acc_events: c[7],
            metric_samples: c[8],
            cpu_samples: c[9],
            thread_runs: c[10],
            comms: c[11],
            comms_skipped: c[12],
            mpi_comms: c[13],
            sync_comms: c[14],
            records: c[15],
        },
    };
    Ok((encoded, g.u64()?, g.u64()?))
}

fn put_perfetto_counts(p: &mut Put, c: &perfetto::Counts) {
    for n in [
        c.kernels,
        c.memcpy,
        c.memset,
        c.graphs,
        c.api,
        c.nvtx,
        c.os_calls,
        c.mpi_calls,
        c.acc_events,
        c.metric_samples,
        c.cpu_samples,
        c.thread_runs,
        c.flows,
        c.sync_links,
        c.tracks,
    ] {
        p.u64(n);
    }
}

fn get_perfetto_counts(g: &mut Get) -> Got<perfetto::Counts> {
    let mut c = [0u64; 15];
    for n in &mut c {
        *n = g.u64()?;
    }
    Ok(perfetto::Counts {
        kernels: c[0],
        memcpy: c[1],
        memset: c[2],
        graphs: c[3],
        api: c[4],
        nvtx: c[5],
        os_calls: c[6],
        mpi_calls: c[7],
        acc_events: c[8],
        metric_samples: c[9],
        cpu_samples: c[10],
        thread_runs: c[11],
        flows: c[12],
        sync_links: c[13],
        tracks: c[14],
    })
}
