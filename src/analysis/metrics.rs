//! GPU metrics per rank and window: for every metric of the rank's GPUs, the time-weighted
//! mean, the smallest and largest sample. nsys samples at a fixed rate and a sample stands for
//! the period up to the series' next one, so each sample inside the window weighs the time to
//! the next sample (also inside the window): with even sampling that is the plain mean of the
//! samples, and a gap in the sampling does not let one value stand for it.

use crate::classify::Activity;
use crate::model::{GpuId, MetricSample, MetricSeriesId, ProcessId};

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
    let mut tally = MetricTally::new(activity, process, window);
    let series: Vec<MetricSeriesId> = tally.series().collect();
    for m in series
        .into_iter()
        .flat_map(|s| activity.metric_samples_in(s, window))
    {
        tally.sample(m);
    }
    tally.finish()
}

/// [`rank_metrics`] gathered one sample at a time, each series' samples in time order.
#[derive(Debug, Clone)]
pub struct MetricTally {
    window: (i64, i64),
    /// The process's series, with their GPUs, in [`Activity::metric_series`] order.
    series: Vec<(GpuId, MetricSeriesId)>,
    /// Per series: samples, min, max, the last sample's time and value, weighted sum, time.
    sums: Vec<Option<Sums>>,
}

/// What a series' samples add up to so far.
#[derive(Debug, Clone, Copy)]
struct Sums {
    samples: u64,
    min: i64,
    max: i64,
    last: (i64, i64),
    weighted: f64,
    time: f64,
}

impl MetricTally {
    /// Nothing yet, for the series of `process` over `window`.
    pub fn new(activity: &Activity, process: ProcessId, window: (i64, i64)) -> MetricTally {
        let series = activity.metric_series(process);
        MetricTally {
            window,
            sums: vec![None; series.len()],
            series,
        }
    }

    /// The series this tally reads.
    pub fn series(&self) -> impl Iterator<Item = MetricSeriesId> + '_ {
        self.series.iter().map(|&(_, s)| s)
    }

    /// A sample of one of its series (others, and samples outside the window, are ignored).
    pub fn sample(&mut self, m: &MetricSample) {
        let (from, to) = self.window;
        let Some(i) = self.series.iter().position(|&(_, s)| s == m.series) else {
            return;
        };
        if m.time.0 < from || m.time.0 > to {
            return;
        }
        let (t, v) = (m.time.0, m.value);
        let sums = self.sums[i].get_or_insert(Sums {
            samples: 0,
            min: v,
            max: v,
            last: (t, v),
            weighted: 0.0,
            time: 0.0,
        });
        if sums.samples > 0 {
            let span = (t - sums.last.0) as f64;
            sums.weighted += sums.last.1 as f64 * span;
            sums.time += span;
        }
        sums.samples += 1;
        (sums.min, sums.max, sums.last) = (sums.min.min(v), sums.max.max(v), (t, v));
    }

    /// The summaries of the series with samples in the window.
    pub fn finish(self) -> Vec<MetricSummary> {
        (self.series.into_iter().zip(self.sums))
            .filter_map(|((gpu, series), sums)| {
                let sums = sums?;
                Some(MetricSummary {
                    gpu,
                    series,
                    samples: sums.samples,
                    mean: (sums.time > 0.0).then(|| sums.weighted / sums.time),
                    min: sums.min,
                    max: sums.max,
                })
            })
            .collect()
    }
}
