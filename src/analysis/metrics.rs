//! GPU metrics per rank and window: for every metric of the rank's GPUs, the time-weighted
//! mean, the smallest and largest sample. nsys samples at a fixed rate and a sample stands for
//! the period up to the series' next one, so each sample inside the window weighs the time to
//! the next sample (also inside the window): with even sampling that is the plain mean of the
//! samples, and a gap in the sampling does not let one value stand for it.

use crate::classify::Activity;
use crate::model::{GpuId, MetricSeriesId, ProcessId};

/// One metric of one GPU of a rank, over its window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricSummary {
    /// The GPU.
    pub gpu: GpuId,
    /// The series.
    pub series: MetricSeriesId,
    /// Samples inside the window.
    pub samples: u64,
    /// Time-weighted mean (None with fewer than two samples).
    pub mean: Option<f64>,
    /// Smallest sample.
    pub min: i64,
    /// Largest sample.
    pub max: i64,
}

/// Every metric of the process's GPUs over `window`; metrics with no sample inside it are left
/// out.
pub fn rank_metrics(
    activity: &Activity,
    process: ProcessId,
    window: (i64, i64),
) -> Vec<MetricSummary> {
    activity
        .metric_series(process)
        .into_iter()
        .filter_map(|(gpu, series)| {
            let samples = activity.metric_samples_in(series, window);
            let values = samples.iter().map(|m| m.value);
            let (min, max) = (values.clone().min()?, values.max()?);
            let (mut weighted, mut time) = (0.0, 0.0);
            for pair in samples.windows(2) {
                let span = (pair[1].time.0 - pair[0].time.0) as f64;
                weighted += pair[0].value as f64 * span;
                time += span;
            }
            Some(MetricSummary {
                gpu,
                series,
                samples: samples.len() as u64,
                mean: (time > 0.0).then(|| weighted / time),
                min,
                max,
            })
        })
        .collect()
}
