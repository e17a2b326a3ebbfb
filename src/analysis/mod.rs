//! Fourth step of the data flow: numbers computed from the classified timeline. Every measure
//! of time goes through [`IntervalSet`].

pub mod align;
pub mod bubbles;
pub mod idle;
mod intervals;
pub mod kernels;
pub mod overlap;
pub mod pithtrain;

pub use intervals::IntervalSet;
