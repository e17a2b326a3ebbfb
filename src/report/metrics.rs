//! The `metrics` table: one row per rank, GPU and metric.

use super::ranks::{RankWindow, key_cells, per_rank_output};
use super::table::{Cell, Output, Table};
use crate::analysis::metrics::MetricSummary;
use crate::model::Timeline;

/// One rank's window and its metrics.
#[derive(Debug, Clone)]
pub struct RankMetrics {
    /// The rank and its window.
    pub window: RankWindow,
    /// Its GPUs' metrics over the window.
    pub metrics: Vec<MetricSummary>,
}

/// The `metrics` output.
pub fn metrics_output(timeline: &Timeline, ranks: &[RankMetrics]) -> Output {
    let mut table = Table::new(&[
        "rank",
        "host",
        "pid",
        "device",
        "metric_id",
        "metric",
        "samples",
        "mean",
        "min",
        "max",
    ]);
    for r in ranks {
        for m in &r.metrics {
            let series = timeline.metric_series(m.series);
            let mut row = key_cells(timeline, &r.window.rank);
            row.extend([
                Cell::Int(timeline.gpu(m.gpu).device.into()),
                Cell::Int(series.metric_id.into()),
                Cell::text(timeline.text(series.name)),
                Cell::Int(m.samples as i64),
                m.mean.map_or(Cell::Empty, Cell::Number),
                Cell::Int(m.min),
                Cell::Int(m.max),
            ]);
            table.push(row);
        }
    }
    let mut output = per_rank_output(timeline, table, ranks.iter().map(|r| &r.window));
    if ranks.iter().all(|r| r.metrics.is_empty()) {
        output.notes.push(
            "no GPU metrics: capture with `nsys profile --gpu-metrics-devices=all` (or \
             `--gpu-metrics-device`) to sample them"
                .to_string(),
        );
    } else {
        output.notes.push(
            "mean: each sample weighs the time to its series' next sample inside the window; \
             values as nsys records them (percent of peak for activity and bandwidth metrics)"
                .to_string(),
        );
    }
    output
}
