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
mod records;
pub mod types;

pub use records::{Counts, Used};

use super::Plan;
use super::capture::Joined;
use super::prepare::Prepared;
use crate::report::utc_iso;
use layout::{GpuName, Layout};
use std::fmt::Write as _;
use std::io::{BufWriter, Write};
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

/// Writes `base.prv[.gz]`, `base.pcf` and `base.row`, each under a temporary name first: the
/// plan's processes, from the joined captures `parts` and what was `prepared` for each.
pub fn write(
    plan: &Plan,
    parts: &[Joined],
    prepared: &[Option<Prepared>],
    base: &Path,
    options: Options,
) -> anyhow::Result<Summary> {
    let layout = Layout::new(plan, prepared, parts);
    let prv = path_with(base, if options.gzip { "prv.gz" } else { "prv" });
    let temp = crate::output::temporary_beside(&prv)?;
    let buffered = BufWriter::with_capacity(1 << 20, temp.as_file().try_clone()?);
    let head = header(plan, &layout) + &provenance(plan);
    let all: Vec<&Joined> = parts.iter().collect();
    let (counts, used) = if options.gzip {
        let mut gz = flate2::write::GzEncoder::new(buffered, flate2::Compression::fast());
        gz.write_all(head.as_bytes())?;
        let (gz, counts, used) =
            records::write_body(plan, &all, prepared, &layout, gz, options.memory)?;
        gz.finish()?.flush()?;
        (counts, used)
    } else {
        let mut out = buffered;
        out.write_all(head.as_bytes())?;
        let (mut out, counts, used) =
            records::write_body(plan, &all, prepared, &layout, out, options.memory)?;
        out.flush()?;
        (counts, used)
    };
    let bytes = temp.as_file().metadata()?.len();
    write_text(&path_with(base, "pcf"), &pcf(&layout, &used))?;
    write_text(&path_with(base, "row"), &row(&layout))?;
    crate::output::persist(temp, &prv)?;
    Ok(Summary {
        prv,
        bytes,
        counts,
        tasks: layout.tasks.len(),
        threads: layout.tasks.iter().map(|t| t.threads.len()).sum(),
        warnings: layout.warnings,
    })
}

/// `base.ext`.
fn path_with(base: &Path, ext: &str) -> PathBuf {
    PathBuf::from(format!("{}.{ext}", base.display()))
}

fn write_text(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut temp = crate::output::temporary_beside(path)?;
    temp.write_all(text.as_bytes())?;
    crate::output::persist(temp, path)
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
            let _ = writeln!(out, "{item}");
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
    block(&mut out, types::KERNEL, "CUDA kernel", &gpu);
    block(&mut out, types::NCCL_KERNEL, "NCCL kernel", &gpu);
    block(&mut out, types::MEMOP, "CUDA memcpy kernel", &gpu);
    if v.gpu.keys().any(|k| matches!(k, GpuName::Graph(_))) {
        block(&mut out, types::GRAPH_EXEC, "CUDA Graphs Exec name", &gpu);
    }
    for (domain, &ty) in &v.domains {
        let label = if ty == types::NCCL_REGIONS {
            "NCCL regions".to_string()
        } else {
            types::pushpop_label(domain)
        };
        block(&mut out, ty, &label, &nvtx);
    }
    block(
        &mut out,
        types::NVTX_STARTEND,
        "NVTX startend ranges",
        &nvtx,
    );
    block(&mut out, types::NVTX_MARK, "nsys-lens NVTX marks", &nvtx);
    for (ty, label, values) in [
        (types::OSRT, "OS Runtime Calls", &v.os_labels),
        (types::PTHREAD, "Pthreads Calls", &v.pthread_labels),
    ] {
        if !values.is_empty() {
            let values: Vec<(u32, &str)> = values.iter().map(|(id, l)| (*id, l.as_str())).collect();
            block(&mut out, ty, label, &values);
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

/// One `EVENT_TYPE` block with a value table (`0 End` first).
fn block(out: &mut String, ty: u32, label: &str, values: &[(u32, &str)]) {
    let _ = writeln!(out, "EVENT_TYPE\n0    {ty}    {label}\nVALUES\n0      End");
    for (id, text) in values {
        let _ = writeln!(out, "{id}      {}", one_line(text));
    }
    out.push('\n');
}

/// Labels are one line each in the `.pcf`, without control characters (NUL included), and
/// never empty (a value line needs a label).
fn one_line(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if line.trim().is_empty() {
        "(unnamed)".to_string()
    } else {
        line
    }
}
