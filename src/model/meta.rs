//! What a report says about itself: its export's metadata, its host's GPUs, and the kind of
//! trace it was read from. Data only: the readers fill it.

/// What an export says about itself.
#[derive(Debug, Clone, Default)]
pub struct ExportMeta {
    /// `EXPORT_PRODUCT_VERSION` (e.g. `2026.2.1.210`); None before 2022.4.
    pub product_version: Option<String>,
    /// `EXPORT_SCHEMA_VERSION` (e.g. `3.25.0`); None before 2022.4.
    pub schema_version: Option<String>,
    /// Whether event times are UTC epoch ns (`--ts-normalize=true`).
    pub time_normalized: bool,
    /// The profiled host (`Hostname`), else the file stem.
    pub hostname: String,
    /// `TARGET_INFO_SESSION_START_TIME.utcEpochNs`.
    pub session_start_utc_ns: Option<i64>,
    /// `TARGET_INFO_SESSION_START_TIME.utcTime` (ISO, UTC, no zone).
    pub session_start_text: Option<String>,
    /// Every GPU of the host (`TARGET_INFO_GPU`).
    pub gpus: Vec<HostGpu>,
    /// The format of the trace this export was translated from (None: an nsys export).
    pub source: Option<Format>,
    /// The ranks of the run the trace is one of, when it says (torch.profiler's
    /// `distributedInfo.world_size`).
    pub world_size: Option<u32>,
}

/// One GPU of a host, from `TARGET_INFO_GPU`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostGpu {
    /// The host's GPU index (`id`, or `deviceId` in the oldest layout).
    pub id: i64,
    /// Product name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// PCI bus location, when recorded.
    pub bus_location: Option<String>,
}

/// What an input file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// An nsys SQLite export (or anything else SQLite: the reader says whether it is one).
    Nsys,
    /// A torch.profiler (Kineto) Chrome-trace JSON, possibly gzip-compressed.
    Kineto,
    /// A JAX/XLA profiler `XSpace` protobuf (`*.xplane.pb`).
    Xplane,
    /// The Chrome-JSON trace xprof writes beside an `XSpace` (`*.trace.json.gz`, or
    /// `perfetto_trace.json.gz`): read by the Kineto reader, which tells it by its processes.
    JaxJson,
}

impl Format {
    /// The id stored in a translation's metadata and printed by `info --format json`.
    pub fn id(self) -> &'static str {
        match self {
            Format::Nsys => "nsys",
            Format::Kineto => "kineto",
            Format::Xplane => "xplane",
            Format::JaxJson => "jax_json",
        }
    }

    /// The format for people.
    pub fn describe(self) -> &'static str {
        match self {
            Format::Nsys => "Nsight Systems SQLite export",
            Format::Kineto => "torch.profiler (Kineto) trace",
            Format::Xplane => "JAX/XLA profiler XSpace",
            Format::JaxJson => "JAX profiler Chrome-JSON trace",
        }
    }

    /// The format with this [`Format::id`].
    pub fn from_id(id: &str) -> Option<Format> {
        [
            Format::Nsys,
            Format::Kineto,
            Format::Xplane,
            Format::JaxJson,
        ]
        .into_iter()
        .find(|f| f.id() == id)
    }
}
