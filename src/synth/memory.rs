//! Device-memory events for `synth --memory-usage`: what `nsys profile
//! --cuda-memory-usage=true` records. Each rank allocates its model (8 GiB) 1 ms before its
//! first kernel or step, and 2 GiB of activations at the start of every step, released at its end.

use super::node::NodeExport;
use super::sim::{Placement, Schedule};
use anyhow::Result;

const GIB: i64 = 1 << 30;
/// The model's weights, gradients and optimizer state.
const MODEL: i64 = 8 * GIB;
/// One step's activations.
const ACTIVATIONS: i64 = 2 * GIB;
/// Where the allocations start in the device's address space.
const BASE_ADDRESS: i64 = 0x7f00_0000_0000;

/// Writes the rank's allocations and releases.
pub fn write(node: &mut NodeExport, place: &Placement, schedule: &Schedule) -> Result<()> {
    let who = (place.pid, place.device);
    let starts = schedule.kernels.iter().map(|k| k.start);
    let Some(first) = starts.chain(schedule.steps.iter().map(|s| s.0)).min() else {
        return Ok(());
    };
    node.memory(first - 1_000_000, who, (BASE_ADDRESS, MODEL), false)?;
    let activations = BASE_ADDRESS + MODEL;
    for &(start, end) in &schedule.steps {
        node.memory(start, who, (activations, ACTIVATIONS), false)?;
        node.memory(end, who, (activations, ACTIVATIONS), true)?;
    }
    Ok(())
}
