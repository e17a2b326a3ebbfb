//! Fourth step of the data flow: numbers computed from the classified timeline. Every measure
//! of time goes through [`IntervalSet`] (in [`crate::intervals`], below both `classify` and
//! `analysis`).

pub mod align;
pub mod bubbles;
pub mod collectives;
pub mod idle;
pub mod kernels;
pub mod memory;
pub mod metrics;
pub mod overlap;
pub mod pithtrain;

pub use crate::intervals::IntervalSet;
