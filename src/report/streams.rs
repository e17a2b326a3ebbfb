//! `streams`: the role of every CUDA stream per rank, with its work inside the window.

use super::ranks::{RankWindow, key_cells, per_rank_output};
use super::table::{Cell, Output, Table};
use crate::classify::{RankStreams, RoleRules};
use crate::model::Timeline;

/// The `streams` output: one row per (rank, stream with work in the window).
pub fn streams_output(
    timeline: &Timeline,
    ranks: &[(RankWindow, RankStreams)],
    rules: &RoleRules,
) -> Output {
    let mut table = Table::new(&[
        "rank", "host", "pid", "device", "stream", "role", "n_comm", "n_comp", "comm_ns",
        "comp_ns", "busy_ns",
    ]);
    for (w, streams) in ranks {
        for s in &streams.streams {
            let stream = timeline.stream(s.stream);
            let mut row = key_cells(timeline, &w.rank);
            row.extend([
                Cell::Int(timeline.gpu(stream.gpu).device.into()),
                Cell::Int(stream.stream.into()),
                Cell::text(s.role.name(rules)),
                Cell::Int(s.n_comm as i64),
                Cell::Int(s.n_comp as i64),
                Cell::Int(s.comm_ns),
                Cell::Int(s.comp_ns),
                Cell::Int(s.busy_ns),
            ]);
            table.push(row);
        }
    }
    per_rank_output(timeline, table, ranks.iter().map(|(w, _)| w))
}
