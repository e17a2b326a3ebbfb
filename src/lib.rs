//! nsys-lens reads Nsight Systems SQLite exports (`nsys export --type=sqlite`), one or many (one per
//! node), merges them into one multi-rank timeline on one clock, and answers the questions people
//! ask of distributed GPU training profiles.
//!
//! The data flow reads top to bottom:
//!
//! * [`input`]: torch.profiler and JAX traces, recognised by content and translated into nsys's
//!   schema, so that the one reader reads them;
//! * [`nsys`]: the reader (schema probe, string ids, global ids, streaming row readers);
//! * [`model`]: the merged [`model::Timeline`] (hosts, processes, GPUs, streams, events);
//! * [`classify`]: ranks, the steady-state window, stream roles;
//! * [`analysis`]: interval algebra, overlap and exposed communication, PithTrain parity;
//! * [`export`]: the merged, classified timeline as Perfetto and Paraver traces;
//! * [`report`]: tables and JSON for people and scripts;
//! * [`load`] and [`query`]: inputs as people give them, and every analysis command as one call
//!   (what the CLI and the Python package share);
//! * [`synth`]: a generator of realistic exports for tests, benchmarks and demos.
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
pub mod spill;
pub mod synth;
