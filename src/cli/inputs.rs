//! Options shared by every command that reads reports.

use anyhow::Context as _;
use nsys_lens::analysis::align::{self, Alignment};
use nsys_lens::export::capture::Captures;
use nsys_lens::model::Timeline;
use nsys_lens::nsys;
use nsys_lens::spill::Budget;
use std::path::PathBuf;
use std::sync::Arc;

/// The reports to read.
#[derive(Debug, clap::Args)]
pub struct Inputs {
    /// nsys SQLite exports (one per node), .nsys-rep reports when nsys is on PATH, or
    /// directories (their .sqlite files).
    #[arg(required = true, value_name = "REPORT")]
    pub reports: Vec<PathBuf>,

    /// Where .nsys-rep inputs are exported to (default: beside each report).
    #[arg(long, value_name = "DIR")]
    pub export_dir: Option<PathBuf>,

    /// Print nothing but errors and the requested output (no warnings).
    #[arg(short, long)]
    pub quiet: bool,

    /// How hosts' clocks are put together: session starts, or corrected from the collectives
    /// that span hosts.
    #[arg(long, value_enum, default_value_t)]
    pub align: Align,

    /// Threads that read the reports (default: one per core): reports are read at once, each on
    /// its own thread, and with fewer reports than threads a report's large tables are shared
    /// among its threads in rowid ranges. The result is the same whatever the number.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
}

/// Clock alignment across hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Align {
    /// Each report's session start (its host's system clock).
    #[default]
    Session,
    /// Session starts, then one correction per host from the collectives' end times.
    Collectives,
}

impl Inputs {
    /// Exports `.nsys-rep` inputs when needed, loads every report into one timeline, and with
    /// `--align collectives` corrects each host's clock.
    pub fn load(&self) -> anyhow::Result<Timeline> {
        Ok(self.load_aligned()?.0)
    }

    /// [`Inputs::load`], and the alignment estimate when `--align collectives` asked for one.
    pub fn load_aligned(&self) -> anyhow::Result<(Timeline, Option<Alignment>)> {
        let mut timeline = self.load_session()?;
        if self.align == Align::Session {
            return Ok((timeline, None));
        }
        let alignment = align::estimate(&timeline);
        let corrections: Vec<i64> = alignment.hosts.iter().map(|h| h.correction_ns).collect();
        timeline.shift_hosts(&corrections);
        Ok((timeline, Some(alignment)))
    }

    /// The reports on the session-start clock.
    fn load_session(&self) -> anyhow::Result<Timeline> {
        let what = format!("reading {} report(s)", self.reports.len());
        let _progress = super::progress::Progress::reading(what, self.quiet);
        let paths = self.paths()?;
        Timeline::load_with_threads(&paths, self.threads()).context("cannot load the reports")
    }

    /// Reads every report for a streaming conversion (its events sorted under `budget`), puts
    /// them on one clock, and with `--align collectives` corrects each host's clock.
    pub fn captures(&self, budget: Arc<Budget>) -> anyhow::Result<Captures> {
        let what = format!("reading {} report(s)", self.reports.len());
        let _progress = super::progress::Progress::reading(what, self.quiet);
        let reports = self
            .paths()?
            .iter()
            .map(|p| nsys::Report::open(p))
            .collect::<Result<Vec<_>, _>>()?;
        let mut joined =
            Captures::read(reports, self.threads(), budget).context("cannot load the reports")?;
        if self.align == Align::Collectives {
            let alignment = align::estimate(&joined.light);
            let corrections: Vec<i64> = alignment.hosts.iter().map(|h| h.correction_ns).collect();
            joined.shift_hosts(&corrections);
        }
        Ok(joined)
    }

    /// The input files: directories expanded, `.nsys-rep` reports exported.
    fn paths(&self) -> anyhow::Result<Vec<PathBuf>> {
        Ok(self
            .expanded()?
            .iter()
            .map(|p| nsys::resolve_input(p, self.export_dir.as_deref()))
            .collect::<Result<Vec<_>, _>>()?)
    }

    /// Threads that read (`--threads`, else one per core).
    pub fn threads(&self) -> usize {
        self.threads.map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            usize::from,
        )
    }
}

impl Inputs {
    /// The reports, with each directory replaced by its `.sqlite` files in name order.
    fn expanded(&self) -> anyhow::Result<Vec<PathBuf>> {
        let mut paths = Vec::new();
        for path in &self.reports {
            if !path.is_dir() {
                paths.push(path.clone());
                continue;
            }
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("cannot list {}", path.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "sqlite"))
                .collect();
            anyhow::ensure!(
                !found.is_empty(),
                "{}: no .sqlite file in this directory",
                path.display()
            );
            found.sort();
            paths.extend(found);
        }
        Ok(paths)
    }
}

/// The output format flag of analysis commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum FormatArg {
    /// Aligned text for people.
    #[default]
    Table,
    /// JSON for scripts.
    Json,
    /// CSV for spreadsheets.
    Csv,
}

impl From<FormatArg> for nsys_lens::report::Format {
    fn from(arg: FormatArg) -> Self {
        match arg {
            FormatArg::Table => Self::Table,
            FormatArg::Json => Self::Json,
            FormatArg::Csv => Self::Csv,
        }
    }
}
