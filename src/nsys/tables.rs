//! The names of the export's event tables that the reader reads and that the translations and
//! `synth` write: one spelling for all three.

/// Kernels.
pub const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
/// Memory copies.
pub const MEMCPY: &str = "CUPTI_ACTIVITY_KIND_MEMCPY";
/// Memory sets.
pub const MEMSET: &str = "CUPTI_ACTIVITY_KIND_MEMSET";
/// CUDA graph launches.
pub const GRAPH: &str = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE";
/// Synchronizations.
pub const SYNC: &str = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION";
/// CUDA runtime and driver calls.
pub const RUNTIME: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";
/// NVTX ranges and marks.
pub const NVTX: &str = "NVTX_EVENTS";
