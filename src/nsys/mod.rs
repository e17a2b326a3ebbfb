//! The SQLite reader: opens `nsys export --type=sqlite` files of every version (pre-2022 to 2026.2),
//! probes their schema, resolves `StringIds`, decodes global ids and streams rows.
//!
//! First step of the data flow (read -> model -> classify -> analyse -> export). Nothing here keeps
//! events: readers hand compact `Copy` rows to a sink, and [`crate::model`] stores them.
//! Facts relied on are in `reference/nsys-sqlite.md` (shared with the project).

mod build;
mod chunks;
mod error;
mod events;
mod ids;
mod memory;
mod metrics;
mod mpi;
mod nvtx;
mod openacc;
mod osrt;
pub mod progress;
mod rep;
mod report;
mod sampling;
mod schema;
mod statement;
mod strings;
pub mod tables;
pub mod write;

pub use crate::model::{ExportMeta, HostGpu, Warning, Warnings};
pub use build::{Moved, Translation, read_all};
pub(crate) use build::{Sink, read_each, read_report_into};
pub use chunks::{CHUNK_ROWS, Chunking};
pub use error::{Error, Result};
pub use events::{
    ApiRow, Clock, GpuOpRow, GraphRow, KernelRow, MemcpyRow, MemsetRow, SyncRow, TIME_LIMIT,
};
pub use ids::GlobalId;
pub use memory::MemoryRow;
pub use metrics::MetricRow;
pub use mpi::MpiRow;
pub use nvtx::NvtxRow;
pub use openacc::{AccEventRow, AccRow};
pub use osrt::OsRow;
pub use rep::{is_nsys_rep, resolve_input};
pub use report::{Report, StreamInfo, table_name};
pub use sampling::{RunRow, SampleRow};
pub use schema::Schema;
pub use strings::StringResolver;
