//! Fourth step of the data flow: numbers computed from the classified timeline. Every measure
//! of time goes through [`IntervalSet`].

mod intervals;
pub mod overlap;
pub mod pithtrain;

pub use intervals::IntervalSet;
