//! The ground truth of a simulated run, computed from what the simulator placed ([`Schedule`]),
//! independently of nsys-lens' analyses, so they can be tested against it. Written as
//! `truth.json` beside the exports:
//!
//! - `kernels`: every communication kernel with the role the capture's evidence supports
//!   ([`Placed::role`]);
//! - `ranks`: per rank over the whole run, the time the GPU was busy (compute kernels and
//!   communication other than pipeline transfers), the pipeline wait (only pipeline transfers in
//!   flight) and the exposed communication (communication other than barriers running with no
//!   compute kernel);
//! - `steps`: the same busy and pipeline wait per `ProfilerStep#N`, with the bubble (span minus
//!   busy) and the FLOPs of the GEMM and attention kernels launched in it;
//! - `collectives`: every collective instance with its members' arrivals (kernel starts), the
//!   last to arrive and the skew (last minus first arrival);
//! - `transfers`: every point-to-point transfer: sender, receiver, each kernel's start, and
//!   its size;
//! - `operators`: every GEMM and attention kernel with the operator that launched it (`aten::mm`,
//!   `aten::_scaled_dot_product_flash_attention`, its `_backward`) and that operator's FLOPs
//!   (from the shapes the Kineto trace and the shape NVTX record), its launch's correlation id,
//!   and when its launch and the kernel started;
//! - `critical_paths`: per step, its critical path's time by (rank, category, name): the
//!   analysis's definition of a path over what truly set each operation's start
//!   ([`causes`](super::causes)); none when the capture shows no step (no framework NVTX).
//!
//! Pipeline transfers are the kernels whose role is `pp_p2p`, or point-to-point traffic that no
//! framework evidence names (`p2p`): the definition `bubbles` documents.

use super::sim::{Placed, PlacedCollective, Placement, Schedule};
use anyhow::{Context, Result};
use std::path::Path;

/// Roles that are pipeline transfers.
const PIPELINE: &[&str] = &["pp_p2p", "p2p"];

/// One step of one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct StepTruth {
    /// Global rank.
    pub rank: usize,
    /// Step index.
    pub step: usize,
    /// Step span (the `ProfilerStep#N` range), ns.
    pub step_ns: i64,
    /// Compute kernels and non-pipeline communication running, ns.
    pub busy_ns: i64,
    /// Span minus busy, ns.
    pub bubble_ns: i64,
    /// Of the bubble, the time only pipeline transfers ran, ns.
    pub pp_wait_ns: i64,
    /// The FLOPs of the GEMM and attention kernels launched in the step (their operators').
    pub flops: i64,
}

/// One rank over the whole run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RankTruth {
    /// Global rank.
    pub rank: usize,
    /// Its node (export) index.
    pub node: usize,
    /// Its process id.
    pub pid: u32,
    /// Compute kernels and non-pipeline communication running, ns.
    pub busy_ns: i64,
    /// Only pipeline transfers running, ns.
    pub pp_wait_ns: i64,
    /// Communication other than barriers running with no compute kernel, ns.
    pub exposed_comm_ns: i64,
    /// Per kernel family (what `kernels --whole` must say): kernels and their summed time, ns.
    pub families: std::collections::BTreeMap<&'static str, FamilyTruth>,
}

/// One family's kernels on a rank over the whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FamilyTruth {
    /// Kernels.
    pub kernels: u64,
    /// Their summed duration, ns.
    pub time_ns: i64,
}

/// One communication kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct KernelTruth {
    /// Global rank.
    pub rank: usize,
    /// Stream id.
    pub stream: u32,
    /// Start on the generator's clock (the merged clock of its exports), ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// The role the capture's evidence supports.
    pub role: &'static str,
}

/// Writes `truth.json` into `dir`; `steps_shown`: whether the capture shows the steps
/// (`ProfilerStep#N` ranges).
pub fn write(
    dir: &Path,
    schedules: &[Schedule],
    places: &[Placement],
    steps_shown: bool,
) -> Result<()> {
    let paths = match steps_shown {
        true => super::causes::critical_paths(schedules),
        false => Vec::new(),
    };
    let path = dir.join("truth.json");
    let truth = serde_json::json!({
        "ranks": ranks(schedules, places),
        "steps": steps(schedules),
        "kernels": kernels(schedules, places),
        "collectives": collectives(schedules),
        "transfers": schedules.iter().flat_map(|s| &s.transfers).collect::<Vec<_>>(),
        "operators": operators(schedules),
        "critical_paths": paths,
    });
    let text = serde_json::to_string(&truth)?;
    std::fs::write(&path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}

/// One collective instance.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CollectiveTruth {
    /// The kernel's short name (`ncclDevKernel_SendRecv` for all-to-alls and rings).
    pub kernel: &'static str,
    /// Whether the capture shows point-to-point transfers rather than a collective (a ring
    /// step, DeepEP's dispatch and combine), which `collectives` leaves out.
    pub point_to_point: bool,
    /// Member ranks, ascending.
    pub members: Vec<usize>,
    /// The first arrival (kernel start), ns.
    pub first_start_ns: i64,
    /// The last arrival, ns.
    pub last_start_ns: i64,
    /// Who arrived last (the lowest rank on a tie).
    pub last_rank: usize,
    /// Last minus first arrival, ns.
    pub skew_ns: i64,
    /// From the last arrival to the members' common end, ns.
    pub duration_ns: i64,
    /// Its buffer size, bytes, for a collective NCCL or PyTorch records.
    pub bytes: Option<u64>,
}

/// Every collective instance once, in order of first arrival.
fn collectives(schedules: &[Schedule]) -> Vec<CollectiveTruth> {
    let mut out: Vec<CollectiveTruth> = schedules
        .iter()
        .enumerate()
        .flat_map(|(rank, s)| s.collectives.iter().filter(move |c| c.members[0] == rank))
        .map(collective)
        .collect();
    out.sort_by_key(|c| (c.first_start_ns, c.members.clone()));
    out
}

fn collective(c: &PlacedCollective) -> CollectiveTruth {
    let mut arrivals: Vec<(i64, usize)> = c.starts.iter().copied().zip(c.members.clone()).collect();
    arrivals.sort_by_key(|&(start, rank)| (start, std::cmp::Reverse(rank)));
    let (first, _) = arrivals[0];
    let (last, last_rank) = arrivals[arrivals.len() - 1];
    let mut members = c.members.clone();
    members.sort_unstable();
    CollectiveTruth {
        kernel: c.kernel,
        point_to_point: c.point_to_point,
        members,
        first_start_ns: first,
        last_start_ns: last,
        last_rank,
        skew_ns: last - first,
        duration_ns: c.end - last,
        bytes: c.bytes,
    }
}

/// Every communication kernel, per rank in start order.
fn kernels(schedules: &[Schedule], places: &[Placement]) -> Vec<KernelTruth> {
    let mut out = Vec::new();
    for (rank, schedule) in schedules.iter().enumerate() {
        let mut comm: Vec<&Placed> = schedule
            .kernels
            .iter()
            .filter(|k| k.role != "compute")
            .collect();
        comm.sort_by_key(|k| (k.start, k.stream));
        out.extend(comm.into_iter().map(|k| KernelTruth {
            rank,
            stream: places[rank].stream_id(k.stream),
            start: k.start,
            end: k.end,
            role: k.role,
        }));
    }
    out
}

/// A rank's kernels per family.
fn families(schedule: &Schedule) -> std::collections::BTreeMap<&'static str, FamilyTruth> {
    let mut families = std::collections::BTreeMap::new();
    for k in &schedule.kernels {
        let family: &mut FamilyTruth = families.entry(k.family).or_default();
        family.kernels += 1;
        family.time_ns += k.end - k.start;
    }
    families
}

/// Every rank over the whole run.
fn ranks(schedules: &[Schedule], places: &[Placement]) -> Vec<RankTruth> {
    schedules
        .iter()
        .zip(places)
        .enumerate()
        .map(|(rank, (schedule, place))| {
            let split = Split::new(&schedule.kernels, (i64::MIN, i64::MAX));
            RankTruth {
                rank,
                node: place.node,
                pid: place.pid,
                busy_ns: length(&split.busy),
                pp_wait_ns: uncovered(&split.transfers, &split.busy),
                exposed_comm_ns: uncovered(&split.comm, &split.compute),
                families: families(schedule),
            }
        })
        .collect()
}

/// Every rank's steps.
pub fn steps(schedules: &[Schedule]) -> Vec<StepTruth> {
    let mut out = Vec::new();
    for (rank, schedule) in schedules.iter().enumerate() {
        let mut kernels = schedule.kernels.clone();
        kernels.sort_unstable_by_key(|k| k.start);
        let longest = kernels.iter().map(|k| k.end - k.start).max().unwrap_or(0);
        for (step, &(start, end)) in schedule.steps.iter().enumerate() {
            // The kernels that can overlap the step: started before its end, and not so long
            // before its start that even the longest kernel ended.
            let from = kernels.partition_point(|k| k.start < start.saturating_sub(longest));
            let to = kernels.partition_point(|k| k.start < end);
            let split = Split::new(&kernels[from..to.max(from)], (start, end));
            let busy_ns = length(&split.busy);
            out.push(StepTruth {
                rank,
                step,
                step_ns: end - start,
                busy_ns,
                bubble_ns: end - start - busy_ns,
                pp_wait_ns: uncovered(&split.transfers, &split.busy),
                flops: schedule
                    .operators
                    .iter()
                    .filter(|o| (start..=end).contains(&o.launch))
                    .map(|o| o.shapes.flops)
                    .sum(),
            });
        }
    }
    out
}

/// A rank's kernels inside a span, merged by what they are.
struct Split {
    /// Compute kernels.
    compute: Vec<(i64, i64)>,
    /// Communication other than barriers.
    comm: Vec<(i64, i64)>,
    /// Compute and communication other than pipeline transfers.
    busy: Vec<(i64, i64)>,
    /// Pipeline transfers.
    transfers: Vec<(i64, i64)>,
}

impl Split {
    fn new(kernels: &[Placed], (start, end): (i64, i64)) -> Split {
        let inside = |keep: &dyn Fn(&str) -> bool| {
            merged(
                kernels
                    .iter()
                    .filter(|k| keep(k.role))
                    .map(|k| (k.start.max(start), k.end.min(end)))
                    .filter(|(s, e)| s < e)
                    .collect(),
            )
        };
        Split {
            compute: inside(&|r| r == "compute"),
            comm: inside(&|r| r != "compute" && r != "barrier"),
            busy: inside(&|r| !PIPELINE.contains(&r)),
            transfers: inside(&|r| PIPELINE.contains(&r)),
        }
    }
}

/// Sorted, merged intervals.
fn merged(mut spans: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    spans.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::new();
    for (s, e) in spans {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Summed length of merged intervals.
fn length(spans: &[(i64, i64)]) -> i64 {
    spans.iter().map(|(s, e)| e - s).sum()
}

/// Length of merged `a` not covered by merged `b`, in one pass over both.
fn uncovered(a: &[(i64, i64)], b: &[(i64, i64)]) -> i64 {
    let mut first = 0;
    let mut total = 0;
    for &(s, e) in a {
        while first < b.len() && b[first].1 <= s {
            first += 1;
        }
        let covered: i64 = b[first..]
            .iter()
            .take_while(|&&(x, _)| x < e)
            .map(|&(x, y)| y.min(e) - x.max(s))
            .sum();
        total += (e - s) - covered;
    }
    total
}

/// Every operator of every rank: rank, correlation id, launch and kernel start, its name and
/// FLOPs.
fn operators(schedules: &[Schedule]) -> Vec<serde_json::Value> {
    let mut all = Vec::new();
    for (rank, schedule) in schedules.iter().enumerate() {
        for o in &schedule.operators {
            all.push(
                serde_json::json!({"rank": rank, "correlation": o.correlation,
                "launch": o.launch, "start": o.start, "operator": o.shapes.name,
                "flops": o.shapes.flops}),
            );
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncovered_length_by_hand() {
        let a = merged(vec![(0, 10), (20, 30), (40, 50)]);
        let b = merged(vec![(5, 25), (45, 46), (60, 70)]);
        // [0,5) + [25,30) + [40,45) + [46,50)
        assert_eq!(uncovered(&a, &b), 5 + 5 + 5 + 4);
        assert_eq!(uncovered(&a, &[]), 30);
        assert_eq!(length(&merged(vec![(0, 10), (5, 15)])), 15);
    }
}
