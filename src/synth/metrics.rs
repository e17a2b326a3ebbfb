//! GPU metrics for `synth --gpu-metrics`: what `nsys profile --gpu-metrics-devices=all` samples,
//! derived from what the simulator ran. Every [`SAMPLE_NS`] each GPU gets one sample per metric,
//! the metric's share of the period just ended (as nsys reports a period's average): SM and
//! tensor activity and DRAM bandwidth from the compute kernels, NVLink bandwidth from the
//! communication kernels, a constant clock.

use super::node::NodeExport;
use super::sim::Placed;
use crate::intervals::IntervalSet;
use anyhow::Result;

/// nsys's default sampling period (10 kHz).
pub const SAMPLE_NS: i64 = 100_000;

/// What a metric measures in the simulated run.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// A constant.
    Constant,
    /// Share of the period with a compute kernel running.
    Compute,
    /// Share of the period with a communication kernel running.
    Communication,
}

/// (metric id, name, source, value at full activity): an H100 metric set's names, the ids a
/// capture of such a GPU could give (ids are stable only within one metric set).
const METRICS: [(u32, &str, Source, i64); 9] = [
    (0, "GPC Clock Frequency", Source::Constant, 1755),
    (5, "SMs Active", Source::Compute, 90),
    (11, "Tensor Active", Source::Compute, 55),
    (18, "DRAM Read Bandwidth", Source::Compute, 40),
    (19, "DRAM Write Bandwidth", Source::Compute, 20),
    (20, "NVLink RX Bandwidth", Source::Communication, 70),
    (21, "NVLink TX Bandwidth", Source::Communication, 70),
    (28, "PCIe RX Bandwidth", Source::Constant, 1),
    (29, "PCIe TX Bandwidth", Source::Constant, 2),
];

/// Writes the metric names of GPU `gpu_index` and its samples over `kernels`' span (one sampling
/// period of margin each side).
pub fn write(node: &mut NodeExport, gpu_index: u32, kernels: &[Placed]) -> Result<()> {
    let type_id = (1_i64 << 40) | i64::from(gpu_index);
    for (id, name, ..) in METRICS {
        node.gpu_metric_name(type_id, id, name)?;
    }
    let (Some(first), Some(last)) = (
        kernels.iter().map(|k| k.start).min(),
        kernels.iter().map(|k| k.end).max(),
    ) else {
        return Ok(());
    };
    let busy = |compute: bool| {
        IntervalSet::from_intervals(
            kernels
                .iter()
                .filter(|k| (k.role == "compute") == compute)
                .map(|k| (k.start, k.end)),
        )
    };
    let (compute, communication) = (busy(true), busy(false));
    let mut t = (first / SAMPLE_NS) * SAMPLE_NS;
    while t <= last + 2 * SAMPLE_NS {
        let period = (t - SAMPLE_NS, t);
        for (id, _, source, full) in METRICS {
            let share = match source {
                Source::Constant => 1.0,
                Source::Compute => share(&compute, period),
                Source::Communication => share(&communication, period),
            };
            node.gpu_metric(t, type_id, id, (full as f64 * share).round() as i64)?;
        }
        t += SAMPLE_NS;
    }
    Ok(())
}

/// The share of `(from, to)` that `busy` covers.
fn share(busy: &IntervalSet, (from, to): (i64, i64)) -> f64 {
    busy.covered(from, to) as f64 / (to - from) as f64
}
