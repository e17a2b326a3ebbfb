//! `overlap`: hidden and exposed communication per rank, stage and role, then across ranks.

use super::ranks::{RankWindow, key_cells, per_rank_output};
use super::table::{Cell, Output, Table};
use crate::analysis::overlap::{BARRIER, Exposure, RankExposure, RoleKey, summarize};
use crate::classify::{RankStreams, RoleRules};
use crate::model::Timeline;

const COLUMNS: &[&str] = &[
    "rank",
    "host",
    "pid",
    "stage",
    "role",
    "in_stream",
    "kernels",
    "comm_ns",
    "hidden_ns",
    "exposed_ns",
    "exposed_wall_ns",
    "overlap_pct",
    "overlap_min_pct",
    "overlap_max_pct",
    "worst_rank",
];

/// The `overlap` output: each rank's groups, then the cross-rank summary (`rank` = `all`).
pub fn overlap_output(
    timeline: &Timeline,
    ranks: &[(RankWindow, RankStreams, RankExposure)],
    rules: &RoleRules,
) -> Output {
    let mut table = Table::new(COLUMNS);
    for (w, _, groups) in ranks {
        for ((stage, role), e) in groups {
            let mut row = key_cells(timeline, &w.rank);
            row.extend([
                Cell::text(stage.to_string()),
                Cell::text(role.to_string()),
                Cell::opt_bool(role.in_stream()),
            ]);
            row.extend(numbers(
                e,
                e.overlap_min_pct,
                e.overlap_max_pct,
                is_barrier(role),
            ));
            row.push(Cell::Empty);
            table.push(row);
        }
    }
    let exposures: Vec<RankExposure> = ranks.iter().map(|(_, _, g)| g.clone()).collect();
    if ranks.len() > 1 {
        for ((stage, role), s) in summarize(&exposures) {
            let mut row = vec![
                Cell::text("all"),
                Cell::text("median"),
                Cell::Empty,
                Cell::text(stage.to_string()),
                Cell::text(role.to_string()),
                Cell::opt_bool(role.in_stream()),
            ];
            row.extend(numbers(
                &s.median,
                s.worst_pct,
                s.best_pct,
                is_barrier(&role),
            ));
            row.push(Cell::Int(ranks[s.worst].0.rank.rank.into()));
            table.push(row);
        }
    }
    let mut output = per_rank_output(timeline, table, ranks.iter().map(|(w, ..)| w));
    if ranks.len() > 1 {
        output.notes.push(
            "rows with rank `all` (host `median`): medians across the ranks that have the row \
             (upper median); overlap_min_pct and overlap_max_pct are the worst and best rank's \
             overlap_pct, and worst_rank is the rank of the worst"
                .to_string(),
        );
    }
    output.notes.extend(stream_notes(ranks));
    output.notes.extend(super::streams::missing_evidence(
        ranks.iter().map(|(_, s, _)| s),
        rules,
    ));
    output
}

/// Whether a group is barrier communication.
fn is_barrier(role: &RoleKey) -> bool {
    matches!(role, RoleKey::Role { name, .. } if name == BARRIER)
}

/// `kernels .. overlap_max_pct`; barrier rows leave the exposed columns empty, since barrier
/// communication is never counted as exposed.
fn numbers(e: &Exposure, min_pct: f64, max_pct: f64, barrier: bool) -> [Cell; 8] {
    let exposed = |ns: i64| if barrier { Cell::Empty } else { Cell::Int(ns) };
    [
        Cell::Int(e.kernels as i64),
        Cell::Int(e.comm_ns),
        Cell::Int(e.hidden_ns),
        exposed(e.exposed_ns),
        exposed(e.exposed_wall_ns),
        Cell::Percent(e.overlap_pct),
        Cell::Percent(min_pct),
        Cell::Percent(max_pct),
    ]
}

/// Says so when no NCCL kernel ran, and what in-stream communication means when some did.
fn stream_notes(ranks: &[(RankWindow, RankStreams, RankExposure)]) -> Vec<String> {
    let kernels = || ranks.iter().flat_map(|(_, s, _)| &s.comm);
    if kernels().next().is_none() {
        return vec!["no NCCL kernel ran inside the window(s): nothing to hide or expose".into()];
    }
    let in_stream = kernels().filter(|k| k.in_stream).count();
    let barrier = kernels().filter(|k| k.is_barrier()).count();
    if in_stream == 0 {
        return Vec::new();
    }
    let mut parts = Vec::new();
    if in_stream > barrier {
        parts.push(format!(
            "{} point-to-point kernel(s) or peer copies keep their role and count as exposed \
             where no other stream's compute covers them (they block the compute queued behind \
             them)",
            in_stream - barrier
        ));
    }
    if barrier > 0 {
        parts.push(format!(
            "{barrier} collective(s) other than point-to-point are `{BARRIER}` rows, never \
             counted in the totals"
        ));
    }
    vec![format!(
        "{in_stream} communication kernel(s) or peer copies ran in-stream, on compute streams \
         (in_stream = yes): {}",
        parts.join("; ")
    )]
}
