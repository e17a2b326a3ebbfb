//! Fourth step of the data flow: numbers computed from the classified timeline. Every measure
//! of time goes through [`IntervalSet`] (in [`crate::intervals`], below both `classify` and
//! `analysis`).

pub mod align;
pub mod bubbles;
pub mod collectives;
pub mod critical_path;
pub mod graph;
pub mod idle;
pub mod kernels;
pub mod memory;
pub mod metrics;
pub mod mfu;
pub mod overlap;
pub mod pithtrain;
pub mod what_if;

pub use crate::intervals::IntervalSet;

/// The upper median of `values` (the element at `len / 2` once sorted, as every median of the
/// tool is taken), sorting them in place; None when there are none.
pub fn upper_median<T: Ord + Copy>(values: &mut [T]) -> Option<T> {
    values.sort_unstable();
    values.get(values.len() / 2).copied()
}
