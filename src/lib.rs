//! nsys-lens reads Nsight Systems SQLite exports (`nsys export --type=sqlite`), one or many (one per
//! node), merges them into one multi-rank timeline on one clock, and answers the questions people
//! ask of distributed GPU training profiles.
//!
//! The code stands on floors, and an import only goes down (`tests/layers.rs` checks every
//! `crate::` path):
//!
//! 1. leaves: [`output`] (files written whole or not at all), [`intervals`], [`spill`],
//!    [`time`] (formatting times), `hash`, `second_core` (reading ahead, sorting halves), `bits`
//!    (sets of small integers);
//! 2. [`model`]: the merged [`model::Timeline`] (hosts, processes, GPUs, streams, events), data
//!    only;
//! 3. the reading layer: [`nsys`] (the SQLite reader, the timeline builder, the nsys-schema
//!    writer) and [`input`] (torch.profiler and JAX traces, recognised by content and
//!    translated into nsys's schema, so that the one reader reads them);
//! 4. [`classify`]: ranks, the steady-state window, stream roles, kernel families;
//! 5. [`analysis`]: overlap and exposed communication, collectives, bubbles, PithTrain parity;
//! 6. [`report`] (tables and JSON for people and scripts) and [`export`] (Perfetto and Paraver
//!    traces);
//! 7. [`load`] and [`query`]: inputs as people give them, and every analysis command as one call
//!    (what the CLI and the Python package share);
//! 8. [`synth`]: a generator of realistic exports for tests, benchmarks and demos, which no
//!    library module imports; the CLI and the Python package stand above all.
//!
//! ```
//! use nsys_lens::model::Timeline;
//!
//! let timeline = Timeline::load(&["fixtures/pithtrain_pp2_ep2/node0.sqlite"])?;
//! assert!(!timeline.kernels.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod analysis;
mod bits;
pub mod classify;
pub mod export;
mod hash;
pub mod input;
pub mod intervals;
pub mod load;
pub mod model;
pub mod nsys;
pub mod output;
pub mod query;
pub mod report;
mod second_core;
pub mod spill;
pub mod synth;
pub mod time;
