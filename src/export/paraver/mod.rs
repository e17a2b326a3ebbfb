//! Paraver export: `OUT.prv` (or `.prv.gz`), `OUT.pcf`, `OUT.row`, for wxparaver and
//! `paramedir` (reference: paraver.md).
//!
//! One node per host, one application, one task per rank in rank order (keyed by host and pid,
//! so ranks of two nodes with the same pid stay two tasks); per task its CPU threads, one thread
//! per stream lane named with the stream's role, and an analysis thread with the counters of
//! the overlap analysis. Event types and labels are nsys2prv's where it has them, so its
//! presets work; the body is globally time-sorted; times are rebased to start at 0.

mod gate;
mod layout;
pub mod mpi_values;
mod records;
pub mod types;

pub use layout::TaskNames;
pub use records::{Counts, Used};

use super::Plan;
use super::prepare::Prepared;
use super::stream::Shared;
use crate::input::capture::Joined;
use crate::model::ACC_EVENT_KINDS;
use crate::output::{Background, Output, Staged};
use crate::time::utc_iso;
use layout::{GpuName, Layout};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write as _;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

/// How to write.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Gzip the `.prv` (wxparaver and paramedir read `.prv.gz`).
    pub gzip: bool,
    /// Bytes of records that may wait in memory for a launch's operation to start before they
    /// go to a temporary file.
    pub memory: usize,
}

/// The written files and what they hold.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The `.prv` (or `.prv.gz`).
    pub prv: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Records written.
    pub counts: Counts,
    /// Tasks.
    pub tasks: usize,
    /// Threads over all tasks.
    pub threads: usize,
    /// What the user should know (e.g. more objects than a default Paraver build indexes).
    pub warnings: Vec<String>,
}

/// Writes `base.prv[.gz]`, `base.pcf` and `base.row`, each under a temporary name renamed when
/// `staged` commits (see [`crate::output`]): the
/// plan's processes, from the joined captures `parts` and what was `prepared` for each; their
/// events come from `shared` when given (a stream over all `parts` run elsewhere).
pub fn write(
    plan: &Plan,
    parts: &[Joined],
    prepared: &[Option<Prepared>],
    base: &Path,
    options: Options,
    shared: Option<Shared>,
    staged: &Staged,
) -> anyhow::Result<Summary> {
    let nodes = layout::nodes(plan).1;
    let tasks: Vec<TaskNames> = prepared
        .iter()
        .enumerate()
        .map(|(position, p)| {
            let p = p.as_ref().expect("every exported process is prepared");
            layout::task(plan, position, p, nodes[position]).names
        })
        .collect();
    let end = prepared.iter().flatten().filter_map(|p| p.end).max();
    let layout = Layout::new(plan, tasks, end, parts);
    let all: Vec<&Joined> = parts.iter().collect();
    let values = &layout.values;
    write_files(plan, &layout, (base, staged), options, |out| {
        let out = (out, options.memory);
        let (_, counts, used) = records::write_body(plan, &all, prepared, values, out, shared)?;
        Ok((counts, used))
    })
}

/// One part's body encoded apart, and what the files need of it.
#[derive(Debug, Clone, Default)]
pub struct Encoded {
    /// Its tasks' names, by position in the plan.
    pub tasks: Vec<(usize, TaskNames)>,
    /// Its latest exported time.
    pub end: Option<i64>,
    /// The role and stage values it used.
    pub used: Used,
    /// What it wrote.
    pub counts: Counts,
}

/// Writes the body of the processes of `part` (some of the joined captures `parts`) to `out`:
/// its lines as the whole body holds them, to be merged with the other parts'.
pub fn encode_part<W: Write + Send>(
    plan: &Plan,
    parts: &[Joined],
    part: &[&Joined],
    prepared: &[Option<Prepared>],
    out: W,
    memory: usize,
) -> io::Result<(W, Encoded)> {
    let nodes = layout::nodes(plan).1;
    let tasks = prepared
        .iter()
        .enumerate()
        .filter_map(|(position, p)| {
            let names = layout::task(plan, position, p.as_ref()?, nodes[position]).names;
            Some((position, names))
        })
        .collect();
    let end = prepared.iter().flatten().filter_map(|p| p.end).max();
    let values = layout::values(plan, parts);
    let (out, counts, used) =
        records::write_body(plan, part, prepared, &values, (out, memory), None)?;
    let encoded = Encoded {
        tasks,
        end,
        used,
        counts,
    };
    Ok((out, encoded))
}

/// Writes the Paraver files from the bodies of every part, each encoded apart
/// ([`encode_part`]): the bodies merged in time order; renamed into place when `staged`
/// commits.
pub fn write_merged(
    plan: &Plan,
    parts: &[Joined],
    bodies: Vec<(Encoded, Box<dyn BufRead + Send>)>,
    base: &Path,
    options: Options,
    staged: &Staged,
) -> anyhow::Result<Summary> {
    let mut tasks: Vec<Option<TaskNames>> = vec![None; plan.exported.len()];
    let mut end = None::<i64>;
    let mut counts = Counts::default();
    let mut used = Used::default();
    let mut readers = Vec::new();
    for (encoded, reader) in bodies {
        for (position, names) in encoded.tasks {
            tasks[position] = Some(names);
        }
        end = end.max(encoded.end);
        counts.add(&encoded.counts);
        used.roles.extend(encoded.used.roles);
        used.stages.extend(encoded.used.stages);
        readers.push(reader);
    }
    let tasks = tasks
        .into_iter()
        .enumerate()
        .map(|(position, t)| {
            t.ok_or_else(|| anyhow::anyhow!("no encoded part holds exported process {position}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let layout = Layout::new(plan, tasks, end, parts);
    write_files(plan, &layout, (base, staged), options, |out| {
        merge_bodies(readers, out)?;
        Ok((counts, used.clone()))
    })
}

/// Writes the `.prv` (its header, then `body`), the `.pcf` and the `.row` of `base`, staged
/// together.
fn write_files(
    plan: &Plan,
    layout: &Layout,
    (base, staged): (&Path, &Staged),
    options: Options,
    body: impl FnOnce(&mut (dyn Write + Send)) -> io::Result<(Counts, Used)>,
) -> anyhow::Result<Summary> {
    let [prv, pcf_path, row_path] = files(base, options.gzip);
    let output = Output::create(&prv)?;
    let mut out = Background::new(output.file().try_clone()?, options.gzip)?;
    out.write_all((header(plan, layout) + &provenance(plan)).as_bytes())?;
    let (counts, used) = body(&mut out)?;
    out.finish()?;
    let bytes = output.file().metadata()?.len();
    staged.add(write_text(&pcf_path, &pcf(layout, &used))?)?;
    staged.add(write_text(&row_path, &row(layout))?)?;
    staged.add(output)?;
    Ok(Summary {
        prv,
        bytes,
        counts,
        tasks: layout.tasks.len(),
        threads: layout.tasks.iter().map(|t| t.threads.len()).sum(),
        warnings: layout.warnings.clone(),
    })
}

/// Merges bodies of disjoint tasks into one, in time order: records by (time, task, thread),
/// each body's in its own order. Returns the records written.
pub fn merge_bodies(
    mut readers: Vec<Box<dyn BufRead + Send>>,
    out: &mut dyn Write,
) -> io::Result<u64> {
    let mut lines: Vec<Vec<u8>> = vec![Vec::new(); readers.len()];
    let mut heap = BinaryHeap::new();
    for (i, (reader, line)) in readers.iter_mut().zip(&mut lines).enumerate() {
        if let Some(key) = next_line(reader, line)? {
            heap.push(Reverse((key, i)));
        }
    }
    let mut records = 0;
    while let Some(Reverse((_, i))) = heap.pop() {
        out.write_all(&lines[i])?;
        records += 1;
        if let Some(key) = next_line(&mut readers[i], &mut lines[i])? {
            heap.push(Reverse((key, i)));
        }
    }
    Ok(records)
}

/// Reads a body's next line into `line`; its key, or None at the end.
fn next_line(reader: &mut dyn BufRead, line: &mut Vec<u8>) -> io::Result<Option<(u64, u64, u64)>> {
    line.clear();
    if reader.read_until(b'\n', line)? == 0 {
        return Ok(None);
    }
    record_key(line).map(Some)
}

/// The (time, task, thread) of a body line (`2:cpu:appl:task:thread:time:...` or
/// `3:cpu:appl:task:thread:time:...`).
fn record_key(line: &[u8]) -> io::Result<(u64, u64, u64)> {
    let mut fields = line.splitn(7, |&b| b == b':').skip(3).map(digits);
    match (fields.next(), fields.next(), fields.next()) {
        (Some(Some(task)), Some(Some(thread)), Some(Some(time))) => Ok((time, task, thread)),
        _ => {
            let shown = String::from_utf8_lossy(line).trim_end().to_string();
            Err(io::Error::other(format!(
                "an encoded body line is not a Paraver record: {shown}"
            )))
        }
    }
}

/// A field of decimal digits as a number.
fn digits(field: &[u8]) -> Option<u64> {
    if field.is_empty() {
        return None;
    }
    field.iter().try_fold(0u64, |n, &d| {
        d.is_ascii_digit()
            .then(|| n.wrapping_mul(10).wrapping_add(u64::from(d - b'0')))
    })
}

/// The files of the trace at `base`: `.prv` (`.prv.gz` when gzipped), `.pcf` and `.row`; all
/// `base` itself when that is written in place ([`crate::output::is_stream`]).
pub fn files(base: &Path, gzip: bool) -> [PathBuf; 3] {
    if crate::output::is_stream(base) {
        return [0; 3].map(|_| base.to_path_buf());
    }
    [if gzip { "prv.gz" } else { "prv" }, "pcf", "row"].map(|ext| path_with(base, ext))
}

/// `base.ext` (a name that is not UTF-8 kept as it is).
fn path_with(base: &Path, ext: &str) -> PathBuf {
    let mut name = base.as_os_str().to_os_string();
    name.push(".");
    name.push(ext);
    PathBuf::from(name)
}

/// `path` written with `text`, to be staged.
fn write_text(path: &Path, text: &str) -> anyhow::Result<Output> {
    let mut output = Output::create(path)?;
    output.write_all(text.as_bytes())?;
    Ok(output)
}

/// `#Paraver (dd/mm/YYYY at HH:MM):END_ns:NODES(1,...):1:TASKS(threads:node,...)`; the date is
/// the earliest session start (UTC), so the same inputs give the same bytes.
fn header(plan: &Plan, layout: &Layout) -> String {
    let start = plan
        .activity
        .timeline
        .reports
        .iter()
        .filter_map(|r| r.meta.session_start_utc_ns)
        .min()
        .unwrap_or(0);
    let iso = utc_iso(start);
    let date = format!(
        "{}/{}/{} at {}",
        &iso[8..10],
        &iso[5..7],
        &iso[0..4],
        &iso[11..16]
    );
    let cpus = vec!["1"; layout.nodes.len()].join(",");
    let tasks: Vec<String> = layout
        .tasks
        .iter()
        .map(|t| format!("{}:{}", t.threads.len(), t.node))
        .collect();
    format!(
        "#Paraver ({date}):{}_ns:{}({cpus}):1:{}({})\n",
        layout.end,
        layout.nodes.len(),
        layout.tasks.len(),
        tasks.join(",")
    )
}

/// Body comment lines (kept by Paraver as trace metadata): how times were rebased.
fn provenance(plan: &Plan) -> String {
    let mut out = format!(
        "# nsys-lens: times are merged-clock ns minus {} (the earliest exported event)\n",
        plan.offset
    );
    for r in &plan.activity.timeline.reports {
        let _ = writeln!(
            out,
            "# nsys-lens: {} onto the merged clock: {:+} ns (of which collective correction {:+} ns)",
            r.path.display(),
            r.clock.offset,
            r.clock.correction
        );
    }
    out
}

/// Object names: CPUs, nodes (hostnames), tasks (`rank N`), threads.
fn row(layout: &Layout) -> String {
    let mut out = String::new();
    let mut level = |name: &str, items: &[String]| {
        let _ = writeln!(out, "LEVEL {name} SIZE {}", items.len());
        for item in items {
            let _ = writeln!(out, "{}", no_breaks(item));
        }
        out.push('\n');
    };
    let cpus: Vec<String> = (1..)
        .zip(&layout.nodes)
        .map(|(i, n)| format!("{i}.{n}"))
        .collect();
    level("CPU", &cpus);
    level("NODE", &layout.nodes);
    let tasks: Vec<String> = layout.tasks.iter().map(|t| t.name.clone()).collect();
    level("TASK", &tasks);
    let threads: Vec<String> = layout
        .tasks
        .iter()
        .flat_map(|t| t.threads.iter().cloned())
        .collect();
    level("THREAD", &threads);
    out
}

/// Labels: nsys2prv's preamble and shared types, then ours (of roles and stages, those `used`).
fn pcf(layout: &Layout, used: &Used) -> String {
    let v = &layout.values;
    let mut out = String::from(
        "DEFAULT_OPTIONS\n\nLEVEL               THREAD\nUNITS               NANOSEC\n\
         LOOK_BACK           100\nSPEED               1\nFLAG_ICONS          ENABLED\n\
         NUM_OF_STATE_COLORS 1000\nYMAX_SCALE          37\n\n\
         DEFAULT_SEMANTIC\n\nTHREAD_FUNC          State As Is\n\n",
    );
    let api: Vec<&str> = v.names[..v.api_count as usize]
        .iter()
        .map(String::as_str)
        .collect();
    let gpu: Vec<(u32, &str)> = (v.api_count + 1..)
        .zip(v.names[v.api_count as usize..].iter().map(String::as_str))
        .collect();
    let nvtx: Vec<(u32, &str)> = (1..)
        .zip(v.nvtx_labels.iter().map(String::as_str))
        .collect();
    block(
        &mut out,
        types::CUDA_API,
        "CUDA library call",
        &(1..).zip(api).collect::<Vec<_>>(),
    );
    // The GPU operations' types share one value table, and so do the NVTX types: each table
    // once, not once per type (the .pcf of 18,500 NVTX names was larger than its .prv).
    let mut gpu_types = vec![
        (types::KERNEL, "CUDA kernel".to_string()),
        (types::NCCL_KERNEL, "NCCL kernel".to_string()),
        (types::MEMOP, "CUDA memcpy kernel".to_string()),
    ];
    if v.gpu.keys().any(|k| matches!(k, GpuName::Graph(_))) {
        gpu_types.push((types::GRAPH_EXEC, "CUDA Graphs Exec name".to_string()));
    }
    shared_block(&mut out, &gpu_types, &gpu);
    let mut nvtx_types: Vec<(u32, String)> = (v.domains.iter())
        .map(|(domain, &ty)| match ty == types::NCCL_REGIONS {
            true => (ty, "NCCL regions".to_string()),
            false => (ty, types::pushpop_label(domain)),
        })
        .collect();
    nvtx_types.push((types::NVTX_STARTEND, "NVTX startend ranges".to_string()));
    nvtx_types.push((types::NVTX_MARK, "nsys-lens NVTX marks".to_string()));
    shared_block(&mut out, &nvtx_types, &nvtx);
    for (ty, label, values) in [
        (types::OSRT, "OS Runtime Calls", &v.os_labels),
        (types::PTHREAD, "Pthreads Calls", &v.pthread_labels),
    ] {
        if !values.is_empty() {
            let values: Vec<(u32, &str)> = values.iter().map(|(id, l)| (*id, l.as_str())).collect();
            block(&mut out, ty, label, &values);
        }
    }
    if !v.mpi_labels.is_empty() {
        let values: Vec<(u32, &str)> = v
            .mpi_labels
            .iter()
            .map(|(id, l)| (*id, l.as_str()))
            .collect();
        for (_, ty, label) in types::MPI_TYPES {
            block(&mut out, ty, label, &values);
        }
        let _ = writeln!(
            out,
            "EVENT_TYPE\n1    {}    Send Size in MPI Global OP\n1    {}    Recv Size in MPI Global OP\n",
            types::MPI_SEND_SIZE,
            types::MPI_RECV_SIZE
        );
    }
    acc_blocks(&mut out, v);
    sampling_blocks(&mut out, v);
    let memory = [
        (
            types::SOURCE_MEMORY,
            "nsys-lens copy source memory".to_string(),
        ),
        (
            types::DESTINATION_MEMORY,
            "nsys-lens copy or set memory".to_string(),
        ),
    ];
    shared_block(&mut out, &memory, &types::MEMORY_KINDS);
    for (i, field) in v.payloads.iter().enumerate() {
        let ty = types::NCCL_PAYLOAD_BASE + i as u32;
        let label = format!("NCCL {}", one_line(&field.name));
        match &field.labels {
            Some(labels) => {
                let values: Vec<(u32, &str)> =
                    (1..).zip(labels.iter().map(String::as_str)).collect();
                block(&mut out, ty, &label, &values);
            }
            None => {
                let _ = writeln!(out, "EVENT_TYPE\n0    {ty}    {label}\n");
            }
        }
    }
    let roles: Vec<(u32, &str)> = (1..)
        .zip(v.roles.iter().map(String::as_str))
        .filter(|(id, _)| used.roles.contains(id))
        .collect();
    block(
        &mut out,
        types::STREAM_ROLE,
        "nsys-lens stream role",
        &roles,
    );
    block(
        &mut out,
        types::COMM_ROLE,
        "nsys-lens communication role",
        &roles,
    );
    let evidence: Vec<(u32, &str)> = (1..).zip(types::EVIDENCE_KINDS).collect();
    block(
        &mut out,
        types::ROLE_EVIDENCE,
        "nsys-lens role evidence",
        &evidence,
    );
    let stages: Vec<String> = v.stages.iter().map(|s| s.to_string()).collect();
    let stages: Vec<(u32, &str)> = (1..)
        .zip(stages.iter().map(String::as_str))
        .filter(|(id, _)| used.stages.contains(id))
        .collect();
    block(&mut out, types::STAGE, "nsys-lens PithTrain stage", &stages);
    if !v.metrics.is_empty() {
        out.push_str("EVENT_TYPE\n");
        for (ty, name) in &v.metrics {
            let _ = writeln!(out, "7    {ty}    {}", one_line(name));
        }
        out.push('\n');
    }
    out.push_str("EVENT_TYPE\n");
    for (ty, label) in types::PLAIN {
        let _ = writeln!(out, "0    {ty}    {label}");
    }
    out
}

/// The types of call stacks (a sample's function and callers, an OS call's callers: one value
/// table) and the thread states, when there are stacks and runs.
fn sampling_blocks(out: &mut String, v: &layout::Values) {
    if !v.frame_labels.is_empty() {
        let sampled = (0..v.sample_depth)
            .map(|k| (types::SAMPLED_FUNCTION + k as u32, types::sampled_label(k)));
        let callers = (0..v.sample_depth).map(|k| {
            (
                types::CALLER + k as u32 + 1,
                format!("Caller at level {}", k + 1),
            )
        });
        let levels: Vec<(u32, String)> = sampled.chain(callers).collect();
        let frames: Vec<(u32, &str)> = (1..)
            .zip(v.frame_labels.iter().map(String::as_str))
            .collect();
        shared_block(out, &levels, &frames);
    }
    if v.states {
        out.push_str("STATES\n");
        for (id, label, _) in types::STATES {
            let _ = writeln!(out, "{id}    {label}");
        }
        out.push_str("\nSTATES_COLOR\n");
        for (id, _, (r, g, b)) in types::STATES {
            let _ = writeln!(out, "{id}    {{{r},{g},{b}}}");
        }
        out.push('\n');
    }
}

/// The OpenACC types of the tables with events, as nsys2prv labels them: event kinds valued
/// `ENUM_OPENACC_EVENT_KIND` id + 1, region sources and function names by value.
fn acc_blocks(out: &mut String, v: &layout::Values) {
    let kinds: Vec<(u32, &str)> = (1..).zip(ACC_EVENT_KINDS).collect();
    for (
        table,
        [
            (kind, kind_label),
            (source, source_label),
            (function, function_label),
        ],
    ) in types::ACC_TYPES
    {
        let [sources, functions] = &v.acc_labels;
        fn labels(l: &[(u32, String)]) -> Vec<(u32, &str)> {
            l.iter().map(|(id, s)| (*id, s.as_str())).collect()
        }
        let sources = labels(&sources[table as usize]);
        if sources.is_empty() {
            continue;
        }
        block(out, kind, kind_label, &kinds);
        block(out, source, source_label, &sources);
        block(
            out,
            function,
            function_label,
            &labels(&functions[table as usize]),
        );
    }
}

/// One `EVENT_TYPE` block with a value table (`0 End` first).
fn block(out: &mut String, ty: u32, label: &str, values: &[(u32, &str)]) {
    shared_block(out, &[(ty, label.to_string())], values);
}

/// One `.pcf` event block of several types (type, label) that share one value table, as
/// Paraver reads it: every type line of a block takes the block's `VALUES`.
fn shared_block(out: &mut String, types: &[(u32, String)], values: &[(u32, &str)]) {
    out.push_str("EVENT_TYPE\n");
    for (ty, label) in types {
        let _ = writeln!(out, "0    {ty}    {label}");
    }
    out.push_str("VALUES\n0      End\n");
    for (id, text) in values {
        let _ = writeln!(out, "{id}      {}", one_line(text));
    }
    out.push('\n');
}

/// `text` with every control character (a line break, a tab) made a space: Paraver's files
/// are read line by line, so a name with a line break would break them.
fn no_breaks(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Labels are one line each in the `.pcf`, without control characters (NUL included), and
/// never empty (a value line needs a label).
fn one_line(text: &str) -> String {
    let line = no_breaks(text);
    if line.trim().is_empty() {
        "(unnamed)".to_string()
    } else {
        line
    }
}
