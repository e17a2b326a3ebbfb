//! `ranks`, `window`, and what every per-rank output shares: the rank's key cells, the inputs
//! and the window each rank was measured over.

use super::table::{Cell, Output, Table};
use crate::analysis::collectives::{Collectives, Communicator};
use crate::classify::layout::{PipelineLayout, PipelineSource};
use crate::classify::{AxisCoord, Rank, RankLabel, RankSource, Window, WindowSource};
use crate::model::Timeline;
use crate::time::format_seconds;
use serde_json::{Value, json};

/// One rank with the window an analysis used for it.
#[derive(Debug, Clone)]
pub struct RankWindow {
    /// The rank.
    pub rank: Rank,
    /// Its window.
    pub window: Window,
    /// The interval the analysis clipped to (the CPU extent, or the GPU projection).
    pub bounds: (i64, i64),
}

/// `rank, host, pid`.
pub fn key_cells(timeline: &Timeline, rank: &Rank) -> Vec<Cell> {
    let process = timeline.process(rank.process);
    vec![
        Cell::Int(rank.rank.into()),
        Cell::text(&timeline.host(process.host).name),
        Cell::Int(process.pid.into()),
    ]
}

/// The `ranks` output: each rank with its pipeline coordinate and where that came from
/// ([`pipeline_coords`](crate::classify::layout::pipeline_coords)).
pub fn ranks_output(
    timeline: &Timeline,
    ranks: &[Rank],
    pipeline: &PipelineLayout,
    collectives: &Collectives,
) -> Output {
    let mut table = Table::new(&[
        "rank",
        "host",
        "pid",
        "device",
        "pp",
        "pp_size",
        "pp_source",
        "dp",
        "dp_size",
        "cp",
        "cp_size",
        "ep",
        "ep_size",
        "mbs",
        "seq",
        "source",
        "groups",
    ]);
    for (index, (rank, pp)) in ranks.iter().zip(&pipeline.coords).enumerate() {
        let mut row = key_cells(timeline, rank);
        row.push(Cell::opt_int(rank.device));
        row.push(Cell::opt_int(pp.and_then(|(c, _)| c.stage)));
        row.push(Cell::opt_int(pp.map(|(c, _)| c.size)));
        row.push(pp.map_or(Cell::Empty, |(_, s)| Cell::text(s.as_str())));
        let label = rank.label.as_ref();
        let axes: [fn(&RankLabel) -> AxisCoord; 3] = [|l| l.dp, |l| l.cp, |l| l.ep];
        for axis in axes {
            let coord: Option<AxisCoord> = label.map(axis);
            row.push(Cell::opt_int(coord.map(|c| c.rank)));
            row.push(Cell::opt_int(coord.map(|c| c.size)));
        }
        row.push(Cell::opt_int(label.map(|l| l.mbs)));
        row.push(Cell::opt_int(label.map(|l| l.seq)));
        row.push(Cell::text(rank.source.as_str()));
        row.push(groups(ranks, collectives, index));
        table.push(row);
    }
    let mut notes = Vec::new();
    if let Some(why) = &pipeline.unread {
        notes.push(format!(
            "pipeline layout not read from the transfers: {why}"
        ));
    }
    if pipeline
        .coords
        .iter()
        .any(|p| p.is_some_and(|(_, s)| s == PipelineSource::Transfers))
    {
        notes.push(
            "pp_source p2p: the pipeline stage and size read from which ranks exchange \
             point-to-point transfers (docs/roles.md)"
                .to_string(),
        );
    }
    let unlabelled = ranks
        .iter()
        .filter(|r| r.source == RankSource::Order)
        .count();
    if unlabelled > 0 {
        notes.push(format!(
            "{unlabelled} of {} rank(s) carry no rank label (`rank=N; pp=R/S dp=R/S cp=R/S \
             ep=R/S; mbs=M seq=Q`): numbered in (host, pid) order, hosts in input order",
            ranks.len()
        ));
    }
    Output {
        table,
        notes,
        context: context(timeline),
        ..Output::default()
    }
}

/// The collective communicators a rank belongs to (`collectives` matches them): `c0 ×2
/// nccl:AllReduce` for people, `{communicator, op, members}` in JSON, members as rank numbers.
fn groups(ranks: &[Rank], collectives: &Collectives, index: usize) -> Cell {
    let mine: Vec<(usize, &Communicator)> = collectives
        .communicators
        .iter()
        .enumerate()
        .filter(|(_, c)| c.members.len() > 1 && c.members.contains(&index))
        .collect();
    let text = mine
        .iter()
        .map(|(id, c)| format!("c{id} ×{} {}", c.members.len(), c.op))
        .collect::<Vec<_>>()
        .join("; ");
    let json = mine
        .iter()
        .map(|(id, c)| {
            let members: Vec<u32> = c.members.iter().map(|&m| ranks[m].rank).collect();
            json!({"communicator": format!("c{id}"), "op": c.op, "members": members})
        })
        .collect();
    Cell::Detail(text, Value::Array(json))
}

/// The `window` output.
pub fn window_output(timeline: &Timeline, windows: &[RankWindow]) -> Output {
    let mut table = Table::new(&[
        "rank",
        "host",
        "pid",
        "start",
        "end",
        "gpu_start",
        "gpu_end",
        "name",
    ]);
    for w in windows {
        let mut row = key_cells(timeline, &w.rank);
        let (gpu_start, gpu_end) = w.window.gpu.unzip();
        row.extend([
            Cell::Int(w.window.start.0),
            Cell::Int(w.window.end.0),
            Cell::opt_int(gpu_start.map(|t| t.0)),
            Cell::opt_int(gpu_end.map(|t| t.0)),
            Cell::text(window_name(&w.window)),
        ]);
        table.push(row);
    }
    per_rank_output(timeline, table, windows.iter())
}

/// What a window's `name` column shows.
fn window_name(window: &Window) -> String {
    match window.source {
        WindowSource::Anchor { .. } => window.name.clone(),
        WindowSource::Explicit => "(given --start/--end)".to_string(),
        WindowSource::Whole | WindowSource::NoAnchor => "(whole capture)".to_string(),
    }
}

/// The output of a per-rank table: the inputs' context and the windows it was measured over.
pub fn per_rank_output<'w>(
    timeline: &Timeline,
    table: Table,
    windows: impl Iterator<Item = &'w RankWindow>,
) -> Output {
    let mut output = Output {
        table,
        context: context(timeline),
        ..Output::default()
    };
    let windows: Vec<RankWindow> = windows.cloned().collect();
    add_window_notes(&mut output, &windows);
    output
}

/// Heading lines naming each rank's window, a note when some fell back to the whole capture,
/// and the `windows` JSON field.
pub fn add_window_notes(output: &mut Output, windows: &[RankWindow]) {
    let whole: Vec<String> = windows
        .iter()
        .filter(|w| w.window.source == WindowSource::NoAnchor)
        .map(|w| w.rank.rank.to_string())
        .collect();
    for w in windows {
        let (s, e) = w.bounds;
        let cpu = (w.window.start.0, w.window.end.0);
        let how = match w.window.source {
            WindowSource::Anchor { instances } if (s, e) != cpu => format!(
                "median of {instances} `{}`, its GPU projection{}",
                w.window.name,
                match w.window.dispatch_only() {
                    true => ": the range only dispatches its work",
                    false => "",
                }
            ),
            WindowSource::Anchor { instances } => {
                format!("median of {instances} `{}`", w.window.name)
            }
            WindowSource::Explicit => "given --start/--end".to_string(),
            WindowSource::Whole => "whole capture".to_string(),
            WindowSource::NoAnchor => "whole capture: no anchor range".to_string(),
        };
        output.heading.push(format!(
            "window rank {}: {} to {} ({how})",
            w.rank.rank,
            format_seconds(s),
            format_seconds(e),
        ));
    }
    if !whole.is_empty()
        && windows
            .iter()
            .any(|w| w.window.source != WindowSource::Explicit)
    {
        output.notes.push(format!(
            "no anchor range (PithTrain's `forward chunk … backward chunk …`, `ProfilerStep#N`, or \
             --anchor) on rank(s) {}: the whole capture is used",
            whole.join(", ")
        ));
    }
    let list: Vec<Value> = windows
        .iter()
        .map(|w| {
            json!({
                "rank": w.rank.rank,
                "start": w.bounds.0,
                "end": w.bounds.1,
                "source": w.window.source,
                "name": w.window.name,
            })
        })
        .collect();
    output.context.insert("windows".into(), Value::Array(list));
}

/// `inputs` (file, host, clock offset) and `warnings`, for every JSON output.
pub fn context(timeline: &Timeline) -> serde_json::Map<String, Value> {
    let inputs: Vec<Value> = timeline
        .reports
        .iter()
        .map(|r| {
            json!({
                "file": r.path.display().to_string(),
                "host": timeline.host(r.host).name,
                "clock": r.clock,
            })
        })
        .collect();
    let warnings: Vec<String> = timeline
        .reports
        .iter()
        .flat_map(|r| {
            r.warnings
                .messages()
                .into_iter()
                .map(move |m| format!("{}: {m}", r.path.display()))
        })
        .collect();
    let mut map = serde_json::Map::new();
    map.insert("inputs".into(), Value::from(inputs));
    map.insert("warnings".into(), Value::from(warnings));
    map
}
