//! `info`: what each report holds, and how the reports were put on one clock.

use super::table::{Cell, Table};
use super::{format_seconds, utc_iso};
use crate::analysis::align::Alignment;
use crate::input::Format;
use crate::model::{ClockMapping, RowCounts, TimeBase, Timeline};
use serde::Serialize;
use std::fmt::Write as _;

/// The whole `info` output: one row per report plus the merged-clock context.
#[derive(Debug, Clone, Serialize)]
pub struct InfoOutput {
    /// One summary per report, in input order.
    pub rows: Vec<ReportSummary>,
    /// What the merged clock counts from.
    pub clock: String,
    /// Hosts, processes, GPUs and streams across all reports.
    pub totals: Totals,
    /// With `--align collectives`: the clock correction of every report's host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alignment: Option<AlignmentSummary>,
}

/// The clock alignment from collectives, per report.
#[derive(Debug, Clone, Serialize)]
pub struct AlignmentSummary {
    /// One row per report.
    pub rows: Vec<AlignmentRow>,
    /// Collective instances spanning two hosts or more.
    pub instances: usize,
    /// Median end-time spread of those instances before the corrections, ns.
    pub spread_before_ns: i64,
    /// The same after, ns.
    pub spread_after_ns: i64,
    /// What the estimate rests on.
    pub notes: Vec<String>,
}

/// One report's clock.
#[derive(Debug, Clone, Serialize)]
pub struct AlignmentRow {
    /// The report file.
    pub report: String,
    /// Its host.
    pub host: String,
    /// Offset from the session starts, ns.
    pub session_offset_ns: i64,
    /// Correction from the collectives added to every time of the host, ns.
    pub collective_correction_ns: i64,
    /// Collective instances the host's estimate used.
    pub collectives_used: usize,
    /// The host's median end-time distance from the consensus before, ns.
    pub residual_before_ns: i64,
    /// The same after, ns.
    pub residual_after_ns: i64,
}

impl AlignmentSummary {
    /// The rows of an estimate applied to `timeline`.
    pub fn new(timeline: &Timeline, alignment: &Alignment) -> AlignmentSummary {
        let rows = timeline
            .reports
            .iter()
            .map(|r| {
                let h = &alignment.hosts[r.host.index()];
                AlignmentRow {
                    report: r.path.display().to_string(),
                    host: timeline.host(r.host).name.clone(),
                    session_offset_ns: r.clock.offset - r.clock.correction,
                    collective_correction_ns: h.correction_ns,
                    collectives_used: h.collectives_used,
                    residual_before_ns: h.residual_before_ns,
                    residual_after_ns: h.residual_after_ns,
                }
            })
            .collect();
        AlignmentSummary {
            rows,
            instances: alignment.instances,
            spread_before_ns: alignment.spread_before_ns,
            spread_after_ns: alignment.spread_after_ns,
            notes: alignment.notes.clone(),
        }
    }

    fn write_table(&self, out: &mut String) {
        let mut table = Table::new(&[
            "report",
            "host",
            "session_offset_ns",
            "collective_correction_ns",
            "collectives_used",
            "residual_before_ns",
            "residual_after_ns",
        ]);
        for r in &self.rows {
            table.push(vec![
                Cell::text(&r.report),
                Cell::text(&r.host),
                Cell::Int(r.session_offset_ns),
                Cell::Int(r.collective_correction_ns),
                Cell::Int(r.collectives_used as i64),
                Cell::Int(r.residual_before_ns),
                Cell::Int(r.residual_after_ns),
            ]);
        }
        let _ = writeln!(
            out,
            "\nclock alignment from collectives ({} instance(s) spanning hosts; median end spread \
             {} ns before, {} ns after)",
            self.instances, self.spread_before_ns, self.spread_after_ns
        );
        out.push_str(&table.to_text());
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
    }
}

/// Entity counts over every report.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Totals {
    /// Reports.
    pub reports: usize,
    /// Distinct hosts.
    pub hosts: usize,
    /// Processes.
    pub processes: usize,
    /// GPUs in use (process, device).
    pub gpus: usize,
    /// CUDA streams.
    pub streams: usize,
}

/// What one report holds.
#[derive(Debug, Clone, Serialize)]
pub struct ReportSummary {
    /// The file read.
    pub file: String,
    /// What the file is: `nsys` (an export), `kineto` (torch.profiler) or `xplane` (JAX/XLA).
    pub format: Format,
    /// `EXPORT_PRODUCT_VERSION`.
    pub nsys_version: Option<String>,
    /// `EXPORT_SCHEMA_VERSION`.
    pub schema_version: Option<String>,
    /// The profiled host.
    pub host: String,
    /// Session start, ISO 8601 UTC.
    pub session_start_utc: Option<String>,
    /// Session start, UTC epoch ns.
    pub session_start_utc_ns: Option<i64>,
    /// How the report's times were mapped onto the merged clock.
    pub clock: ClockMapping,
    /// First event start on the merged clock, ns.
    pub start_ns: Option<i64>,
    /// Last event end on the merged clock, ns.
    pub end_ns: Option<i64>,
    /// Rows per event table.
    pub rows: RowCounts,
    /// Every GPU of the host.
    pub host_gpus: Vec<HostGpuSummary>,
    /// Processes with CUDA or NVTX activity.
    pub processes: Vec<ProcessSummary>,
    /// Warnings raised while reading.
    pub warnings: Vec<String>,
}

/// One GPU of a host.
#[derive(Debug, Clone, Serialize)]
pub struct HostGpuSummary {
    /// Host GPU index.
    pub id: i64,
    /// Product name.
    pub name: String,
}

/// One process of a report.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessSummary {
    /// Operating-system pid.
    pub pid: u32,
    /// Executable name (empty when unknown).
    pub name: String,
    /// Threads with CUDA API calls or NVTX events.
    pub threads: usize,
    /// Its MPI rank, when it traced MPI (for a torch.profiler trace, `distributedInfo.rank`).
    pub mpi_rank: Option<u32>,
    /// Its CUDA streams.
    pub streams: Vec<StreamSummary>,
}

/// One CUDA stream and the GPU work on it.
#[derive(Debug, Clone, Serialize)]
pub struct StreamSummary {
    /// CUDA device ordinal in the process.
    pub device: u32,
    /// GPU product name (empty when unknown).
    pub gpu: String,
    /// Stream id.
    pub stream: u32,
    /// Kernels.
    pub kernels: u64,
    /// Memory copies.
    pub memcpy: u64,
    /// Memory sets.
    pub memset: u64,
}

impl InfoOutput {
    /// Summarises the reports of `timeline` (its entities and reports: the light timeline of
    /// captures read for streaming does), with each stream's memory copies and sets `copies`
    /// (its kernels it counts itself).
    pub fn new(timeline: &Timeline, copies: &[[u64; 2]]) -> InfoOutput {
        let per_stream: Vec<[u64; 3]> = (timeline.streams.iter().zip(copies))
            .map(|(s, &[memcpy, memset])| [s.kernels, memcpy, memset])
            .collect();
        let rows = (0..timeline.reports.len())
            .map(|r| summarize(timeline, r, &per_stream))
            .collect();
        let clock = match timeline.reports.len() {
            1 => "the report's own timestamps".to_string(),
            _ => match timeline
                .reports
                .iter()
                .filter_map(|r| r.meta.session_start_utc_ns)
                .min()
            {
                Some(reference) => format!(
                    "ns since the earliest session start, {} ({reference} ns since the epoch)",
                    utc_iso(reference)
                ),
                None => "each report's own timestamps (no report has a session start)".to_string(),
            },
        };
        InfoOutput {
            rows,
            clock,
            totals: Totals {
                reports: timeline.reports.len(),
                hosts: timeline.hosts.len(),
                processes: timeline.processes.len(),
                gpus: timeline.gpus.len(),
                streams: timeline.streams.len(),
            },
            alignment: None,
        }
    }

    /// Renders the aligned text form (warnings included unless `quiet`).
    pub fn to_table(&self, quiet: bool) -> String {
        let mut out = String::new();
        let t = &self.totals;
        let _ = writeln!(
            out,
            "{} report(s), {} host(s), {} process(es), {} GPU(s), {} stream(s); times: {}",
            t.reports, t.hosts, t.processes, t.gpus, t.streams, self.clock
        );
        for row in &self.rows {
            out.push('\n');
            row.write_table(&mut out, quiet);
        }
        if let Some(alignment) = &self.alignment {
            alignment.write_table(&mut out);
        }
        out
    }
}

fn summarize(timeline: &Timeline, report: usize, per_stream: &[[u64; 3]]) -> ReportSummary {
    let info = &timeline.reports[report];
    let processes = timeline
        .processes
        .iter()
        .enumerate()
        .filter(|(_, p)| p.report.index() == report)
        .map(|(pi, p)| ProcessSummary {
            pid: p.pid,
            name: timeline.text(p.name).to_string(),
            threads: timeline
                .threads
                .iter()
                .filter(|t| t.process.index() == pi)
                .count(),
            mpi_rank: p.mpi_rank,
            streams: streams_of(timeline, pi, per_stream),
        });
    let mut processes: Vec<_> = processes.collect();
    processes.sort_by_key(|p| p.pid);
    ReportSummary {
        file: info.path.display().to_string(),
        format: info.meta.source.unwrap_or(Format::Nsys),
        nsys_version: info.meta.product_version.clone(),
        schema_version: info.meta.schema_version.clone(),
        host: timeline.host(info.host).name.clone(),
        session_start_utc: info.meta.session_start_utc_ns.map(utc_iso),
        session_start_utc_ns: info.meta.session_start_utc_ns,
        clock: info.clock,
        start_ns: info.span.map(|s| s.0.0),
        end_ns: info.span.map(|s| s.1.0),
        rows: info.counts,
        host_gpus: info
            .meta
            .gpus
            .iter()
            .map(|g| HostGpuSummary {
                id: g.id,
                name: g.name.clone(),
            })
            .collect(),
        processes,
        warnings: info.warnings.messages(),
    }
}

fn streams_of(timeline: &Timeline, process: usize, per_stream: &[[u64; 3]]) -> Vec<StreamSummary> {
    let mut streams: Vec<_> = timeline
        .streams
        .iter()
        .enumerate()
        .filter(|(_, s)| s.process.index() == process)
        .map(|(si, s)| {
            let gpu = timeline.gpu(s.gpu);
            let [kernels, memcpy, memset] = per_stream[si];
            StreamSummary {
                device: gpu.device,
                gpu: timeline.text(gpu.name).to_string(),
                stream: s.stream,
                kernels,
                memcpy,
                memset,
            }
        })
        .collect();
    streams.sort_by_key(|s| (s.device, s.stream));
    streams
}

impl ReportSummary {
    fn write_table(&self, out: &mut String, quiet: bool) {
        let _ = writeln!(out, "{}", self.file);
        let version = match (&self.nsys_version, &self.schema_version) {
            (Some(v), Some(s)) => format!("{v} (export schema {s})"),
            (Some(v), None) => v.clone(),
            _ => "unknown (no export metadata: an export older than 2022.4)".to_string(),
        };
        let field = |out: &mut String, name: &str, value: &str| {
            let _ = writeln!(out, "  {name:<14}{value}");
        };
        match self.format {
            Format::Nsys => field(out, "nsys", &version),
            other => field(out, "format", &format!("{} (translated)", other.describe())),
        }
        field(out, "host", &self.host);
        let session = match (&self.session_start_utc, self.session_start_utc_ns) {
            (Some(iso), Some(ns)) => format!("{iso} ({ns} ns since the epoch)"),
            _ => "unknown".to_string(),
        };
        field(out, "session start", &session);
        let base = match self.clock.base {
            TimeBase::SessionRelative => "session-relative",
            TimeBase::UtcEpoch => "UTC epoch ns (--ts-normalize)",
        };
        field(
            out,
            "timestamps",
            &format!(
                "{base}; offset onto the merged clock {:+} ns",
                self.clock.offset
            ),
        );
        if let (Some(start), Some(end)) = (self.start_ns, self.end_ns) {
            let span = format!(
                "{} to {} ({})",
                format_seconds(start),
                format_seconds(end),
                format_seconds(end - start)
            );
            field(out, "time span", &span);
        }
        let r = &self.rows;
        let mut rows = format!(
            "kernels {}, memcpy {}, memset {}, cuda api {}, sync {}, nvtx {}, os runtime {}",
            r.kernels, r.memcpy, r.memset, r.cuda_api, r.sync, r.nvtx, r.osrt
        );
        for (n, what) in [
            (r.graphs, "graph launches"),
            (r.gpu_metrics, "gpu metric samples"),
            (r.memory, "device memory events"),
            (r.mpi, "mpi calls"),
            (r.openacc, "openacc events"),
            (r.samples, "cpu samples"),
            (r.sched, "thread runs"),
        ] {
            if n > 0 {
                rows.push_str(&format!(", {what} {n}"));
            }
        }
        field(out, "rows", &rows);
        match self.host_gpus.is_empty() {
            true => field(out, "host GPUs", "not recorded"),
            false => field(out, "host GPUs", &group_gpus(&self.host_gpus)),
        }
        for p in &self.processes {
            let name = if p.name.is_empty() { "?" } else { &p.name };
            let source = match self.format {
                Format::Kineto => "torch.distributed",
                _ => "MPI",
            };
            let rank = p.mpi_rank.map(|r| format!(", {source} rank {r}"));
            let _ = writeln!(
                out,
                "  process {} ({name}), {} thread(s){}",
                p.pid,
                p.threads,
                rank.unwrap_or_default()
            );
            for s in &p.streams {
                let gpu = if s.gpu.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", s.gpu)
                };
                let _ = writeln!(
                    out,
                    "    GPU {}{gpu} stream {}: {} kernels, {} memcpy, {} memset",
                    s.device, s.stream, s.kernels, s.memcpy, s.memset
                );
            }
        }
        for w in self.warnings.iter().filter(|_| !quiet) {
            let _ = writeln!(out, "  warning: {w}");
        }
    }
}

/// `0-6 NVIDIA GeForce RTX 3090, 7 NVIDIA H100`: runs of consecutive ids with one name grouped.
fn group_gpus(gpus: &[HostGpuSummary]) -> String {
    let mut groups: Vec<(i64, i64, &str)> = Vec::new();
    for g in gpus {
        match groups.last_mut() {
            Some((_, last, name)) if *name == g.name && *last + 1 == g.id => *last = g.id,
            _ => groups.push((g.id, g.id, &g.name)),
        }
    }
    let text: Vec<String> = groups
        .iter()
        .map(|&(first, last, name)| match first == last {
            true => format!("{first} {name}"),
            false => format!("{first}-{last} {name}"),
        })
        .collect();
    text.join(", ")
}
