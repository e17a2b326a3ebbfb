//! Output for people (aligned text) and scripts (JSON, CSV): the last step of the data flow.
//!
//! Each command has one row type here that feeds every format, so the JSON field names are the
//! table's column names in snake_case. JSON is `{"rows": [...]}` plus context fields.

mod breakdown;
mod collectives;
pub mod html;
mod info;
mod metrics;
mod overlap;
pub mod pithtrain;
mod ranks;
mod streams;
mod table;

pub use crate::time::{TimeUnit, format_seconds, human_duration, utc_iso, with_separators};
pub use breakdown::{
    GapContext, RankBreakdown, RankBubbles, RankIdle, bubbles_output, idle_output, kernels_output,
    unclassified_output, unclassified_warning,
};
pub use collectives::{by_rank_output, instances_output};
pub use info::{AlignmentSummary, InfoOutput, ReportSummary};
pub use metrics::{RankMetrics, metrics_output};
pub use overlap::overlap_output;
pub use ranks::{RankWindow, ranks_output, window_output};
pub use streams::streams_output;
pub use table::{Cell, Output, Table};

use std::io::{self, Write};

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Aligned text for people.
    #[default]
    Table,
    /// One JSON document (`{"rows": [...], ...}`) for scripts.
    Json,
    /// CSV with a header row, for spreadsheets.
    Csv,
}

/// Writes any serializable output as pretty JSON followed by a newline.
pub fn write_json<T: serde::Serialize>(value: &T, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}
