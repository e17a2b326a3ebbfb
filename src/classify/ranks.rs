//! Which process is which rank, and where it sits in the parallelism mesh.
//!
//! A rank number comes from the rank label (the first NVTX event of the process, any thread,
//! whose text is exactly a [`RankLabel`]), else from MPI (`MPI_RANKS`, or nsys's `MPI Rank N`
//! thread name) or torch.distributed (a torch.profiler trace's `distributedInfo.rank`); other processes are numbered after those in (host, pid) order, hosts in input
//! order, and marked [`RankSource::Order`]. Only processes with a label, an MPI rank or GPU
//! work are ranks.

use super::activity::Activity;
use super::label::RankLabel;
use crate::model::{ProcessId, Timeline};
use std::collections::BTreeMap;

/// Where a rank number came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RankSource {
    /// The process's rank label.
    Label,
    /// The process's MPI rank (it has no label).
    Mpi,
    /// The rank torch.distributed recorded in a torch.profiler trace (`distributedInfo`).
    Distributed,
    /// The (host, pid) order: the process has no label and no MPI rank.
    Order,
}

impl RankSource {
    /// `label`, `mpi` or `order`.
    pub fn as_str(self) -> &'static str {
        match self {
            RankSource::Label => "label",
            RankSource::Mpi => "mpi",
            RankSource::Distributed => "distributed",
            RankSource::Order => "order",
        }
    }
}

/// One rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rank {
    /// Global rank number.
    pub rank: u32,
    /// Its process.
    pub process: ProcessId,
    /// The CUDA device (ordinal in the process) that ran most of its kernels.
    pub device: Option<u32>,
    /// Its label, when it has one.
    pub label: Option<RankLabel>,
    /// Where `rank` came from.
    pub source: RankSource,
}

/// Two processes carry the same rank label: the inputs mix runs, or a report was given twice.
#[derive(Debug, thiserror::Error)]
#[error("rank {rank} is claimed by two processes: {first} and {second}")]
pub struct DuplicateRank {
    /// The rank number.
    pub rank: u32,
    /// The first process (`host pid N`).
    pub first: String,
    /// The second.
    pub second: String,
}

/// The ranks of a timeline, ordered by rank number.
pub fn discover(activity: &Activity) -> Result<Vec<Rank>, DuplicateRank> {
    let timeline = activity.timeline;
    let mut labelled: BTreeMap<u32, Rank> = BTreeMap::new();
    let mut unlabelled = Vec::new();
    for (i, _) in timeline.processes.iter().enumerate() {
        let process = ProcessId(i as u32);
        let label = activity
            .nvtx(process)
            .find_map(|e| RankLabel::parse(timeline.text(e.text)));
        let device = main_device(activity, process);
        let numbered = match (label, timeline.process(process).mpi_rank) {
            (Some(label), _) => Some((label.rank, RankSource::Label)),
            (None, Some(rank)) => Some((rank, mpi_or_distributed(timeline, process))),
            (None, None) => None,
        };
        match numbered {
            Some((number, source)) => {
                let rank = Rank {
                    rank: number,
                    process,
                    device,
                    label,
                    source,
                };
                if let Some(first) = labelled.insert(number, rank) {
                    return Err(DuplicateRank {
                        rank: number,
                        first: describe(timeline, first.process),
                        second: describe(timeline, process),
                    });
                }
            }
            None if activity.has_gpu_work(process) => unlabelled.push((process, device)),
            None => {}
        }
    }
    let first_free = labelled.keys().next_back().map_or(0, |&r| r + 1);
    let mut ranks: Vec<Rank> = labelled.into_values().collect();
    // (report, pid) is (host in input order, pid).
    unlabelled.sort_by_key(|&(p, _)| (timeline.process(p).report, timeline.process(p).pid));
    ranks.extend(
        unlabelled
            .into_iter()
            .zip(first_free..)
            .map(|((process, device), rank)| Rank {
                rank,
                process,
                device,
                label: None,
                source: RankSource::Order,
            }),
    );
    Ok(ranks)
}

/// Where a rank recorded beside the events came from: MPI, or torch.distributed for a
/// translated torch.profiler trace.
fn mpi_or_distributed(timeline: &Timeline, process: ProcessId) -> RankSource {
    let report = timeline.report(timeline.process(process).report);
    match report.meta.source {
        Some(crate::input::Format::Kineto) => RankSource::Distributed,
        _ => RankSource::Mpi,
    }
}

/// `node0 pid 41207`.
pub fn describe(timeline: &Timeline, process: ProcessId) -> String {
    let p = timeline.process(process);
    format!("{} pid {}", timeline.host(p.host).name, p.pid)
}

/// The device ordinal that ran most of the process's kernels (the lowest on ties), from the
/// streams' kernel counts.
fn main_device(activity: &Activity, process: ProcessId) -> Option<u32> {
    let timeline = activity.timeline;
    let mut counts: BTreeMap<u32, u64> = BTreeMap::new();
    for s in timeline.streams.iter().filter(|s| s.process == process) {
        if s.kernels > 0 {
            *counts.entry(timeline.gpu(s.gpu).device).or_default() += s.kernels;
        }
    }
    let best = counts.values().copied().max()?;
    counts.into_iter().find(|&(_, n)| n == best).map(|(d, _)| d)
}
