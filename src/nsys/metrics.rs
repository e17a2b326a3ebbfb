//! Streaming reader for `GPU_METRICS` and its names in `TARGET_INFO_GPU_METRICS` (nsys-sqlite.md
//! §8.16): one row per metric per sampling time (long format), the GPU in the low byte of
//! `typeId`. Metric ids are stable only within one metric set, so metrics are told apart by id
//! and shown by name.

use super::chunks::{Chunking, Rows, infallible, read_table};
use super::error::Result;
use super::events::Clock;
use super::report::Report;
use super::schema::{Column, req};
use crate::hash::FxHashMap;
use crate::model::Ns;
use crate::model::Warnings;

const METRICS: &str = "GPU_METRICS";
const NAMES: &str = "TARGET_INFO_GPU_METRICS";

/// One sample of one metric of one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricRow {
    /// Sample time on the merged clock.
    pub time: Ns,
    /// The host's GPU index (`typeId & 0xFF`).
    pub gpu_index: u32,
    /// nsys's metric id.
    pub metric_id: u32,
    /// The value.
    pub value: i64,
}

impl Report {
    /// The name of every metric id (`TARGET_INFO_GPU_METRICS.metricName`; the first row of an id
    /// names it); empty when the export has no GPU metrics.
    pub fn metric_names(&self) -> Result<FxHashMap<u32, String>> {
        const COLUMNS: &[Column] = &[req("metricId"), req("metricName")];
        let mut names = FxHashMap::default();
        self.for_each_row(NAMES, COLUMNS, "", |f| {
            let id = f.int()? as u32;
            let name = String::from_utf8_lossy(f.opt_bytes()?.unwrap_or_default()).into_owned();
            names.entry(id).or_insert(name);
            Ok(())
        })?;
        Ok(names)
    }

    /// Reads `GPU_METRICS` with `chunking`, in rowid order; returns the number of samples.
    pub fn read_metrics(
        &self,
        chunking: Chunking,
        clock: Clock,
        sink: impl FnMut(MetricRow),
    ) -> Result<u64> {
        let read = |r: &Report, rows, _: &mut Warnings, out: &mut dyn FnMut(_)| {
            r.scan_metrics(rows, clock, out)
        };
        // The table raises no warnings.
        let mut none = Warnings::default();
        read_table(self, chunking, METRICS, &mut none, read, infallible(sink))
    }

    /// Streams the `rows` of `GPU_METRICS`.
    fn scan_metrics(
        &self,
        rows: Rows,
        clock: Clock,
        mut sink: impl FnMut(MetricRow),
    ) -> Result<u64> {
        const COLUMNS: &[Column] = &[
            req("timestamp"),
            req("typeId"),
            req("metricId"),
            req("value"),
        ];
        self.for_each_row(METRICS, COLUMNS, &rows.tail(), |f| {
            let time = f.int()?;
            let time = clock.map(time, f)?;
            let gpu_index = (f.int()? & 0xFF) as u32;
            sink(MetricRow {
                time,
                gpu_index,
                metric_id: f.int()? as u32,
                value: f.int()?,
            });
            Ok(())
        })
    }
}
