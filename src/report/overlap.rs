//! `overlap`: hidden and exposed communication per rank, stage and role, then across ranks.

use super::ranks::{RankWindow, key_cells, per_rank_output};
use super::table::{Cell, Output, Table};
use crate::analysis::overlap::{BARRIER, Exposure, RankExposure, RoleKey, summarize};
use crate::classify::RankStreams;
use crate::model::Timeline;

const COLUMNS: &[&str] = &[
    "rank",
    "host",
    "pid",
    "stage",
    "role",
    "kernels",
    "comm_ns",
    "hidden_ns",
    "exposed_ns",
    "exposed_wall_ns",
    "overlap_pct",
    "overlap_min_pct",
    "overlap_max_pct",
];

/// The `overlap` output: each rank's groups, then the cross-rank summary (`rank` = `all`).
pub fn overlap_output(
    timeline: &Timeline,
    ranks: &[(RankWindow, RankStreams, RankExposure)],
) -> Output {
    let mut table = Table::new(COLUMNS);
    for (w, _, groups) in ranks {
        for ((stage, role), e) in groups {
            let mut row = key_cells(timeline, &w.rank);
            row.extend([Cell::text(stage.to_string()), Cell::text(role.to_string())]);
            row.extend(numbers(e, e.overlap_min_pct, e.overlap_max_pct));
            table.push(row);
        }
    }
    let exposures: Vec<RankExposure> = ranks.iter().map(|(_, _, g)| g.clone()).collect();
    if ranks.len() > 1 {
        for ((stage, role), s) in summarize(&exposures) {
            let worst = &ranks[s.worst].0.rank;
            let process = timeline.process(worst.process);
            let mut row = vec![
                Cell::text("all"),
                Cell::text(&timeline.host(process.host).name),
                Cell::Int(process.pid.into()),
                Cell::text(stage.to_string()),
                Cell::text(role.to_string()),
            ];
            row.extend(numbers(&s.median, s.worst_pct, s.best_pct));
            table.push(row);
        }
    }
    let mut output = per_rank_output(timeline, table, ranks.iter().map(|(w, ..)| w));
    if ranks.len() > 1 {
        output.notes.push(
            "rows with rank `all`: medians across the ranks that have the row (upper median); \
             overlap_min_pct and overlap_max_pct are the worst and best rank's overlap_pct, and \
             host and pid name the worst rank"
                .to_string(),
        );
    }
    output.notes.extend(stream_notes(ranks));
    output
}

/// `kernels .. overlap_max_pct`.
fn numbers(e: &Exposure, min_pct: f64, max_pct: f64) -> [Cell; 8] {
    [
        Cell::Int(e.kernels as i64),
        Cell::Int(e.comm_ns),
        Cell::Int(e.hidden_ns),
        Cell::Int(e.exposed_ns),
        Cell::Int(e.exposed_wall_ns),
        Cell::Percent(e.overlap_pct),
        Cell::Percent(min_pct),
        Cell::Percent(max_pct),
    ]
}

/// Says so when no communication stream exists, or no NCCL kernel at all.
fn stream_notes(ranks: &[(RankWindow, RankStreams, RankExposure)]) -> Vec<String> {
    let any_comm_stream = ranks
        .iter()
        .any(|(_, s, _)| s.streams.iter().any(|u| u.role.is_comm()));
    if any_comm_stream {
        return Vec::new();
    }
    let (kernels, ns) = ranks
        .iter()
        .flat_map(|(_, _, groups)| groups)
        .filter(|((stage, role), _)| {
            *stage == crate::analysis::overlap::StageKey::All
                && *role == RoleKey::Role(BARRIER.to_string())
        })
        .fold((0, 0), |(k, t), (_, e)| (k + e.kernels, t + e.comm_ns));
    if kernels == 0 {
        vec!["no NCCL kernel ran inside the window(s): nothing to hide or expose".to_string()]
    } else {
        vec![format!(
            "no communication stream: all {kernels} NCCL kernel(s) ran on compute streams \
             ({ns} ns of in-stream communication, in the `{BARRIER}` rows; it blocks its stream \
             and is never counted as exposed communication)"
        )]
    }
}
