//! Options shared by every command that reads reports.

use anyhow::Context as _;
use nsys_lens::analysis::align::{self, Alignment};
use nsys_lens::export::capture::{Capture, Captures};
use nsys_lens::export::part::{self, PART_EXTENSION};
use nsys_lens::model::Timeline;
use nsys_lens::nsys;
use nsys_lens::spill::Budget;
use std::path::PathBuf;
use std::sync::Arc;

/// The reports to read.
#[derive(Debug, clap::Args)]
pub struct Inputs {
    /// nsys SQLite exports (one per node), .nsys-rep reports when nsys is on PATH, part files
    /// (`nsys-lens part`), or directories (their .sqlite and .lens-part files).
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

    /// The reports on the session-start clock (part files' events loaded into memory too).
    fn load_session(&self) -> anyhow::Result<Timeline> {
        let paths = self.paths()?;
        if !paths.iter().any(|p| part::is_part(p)) {
            let what = format!("reading {} report(s)", self.reports.len());
            let _progress = super::progress::Progress::reading(what, self.quiet);
            return Timeline::load_with_threads(&paths, self.threads())
                .context("cannot load the reports");
        }
        let captures = self.read_captures(Budget::new(usize::MAX / 2))?;
        let joined = Captures::join(captures.into_iter().map(|(_, c)| c).collect())?;
        Ok(joined.into_timeline()?)
    }

    /// Every input read for a streaming conversion, each with the position of the input it
    /// came from: exports read (their events sorted under `budget`), part files opened.
    pub fn read_captures(&self, budget: Arc<Budget>) -> anyhow::Result<Vec<(usize, Capture)>> {
        let what = format!("reading {} report(s)", self.reports.len());
        let _progress = super::progress::Progress::reading(what, self.quiet);
        let paths = self.paths()?;
        let (parts, exports): (Vec<_>, Vec<_>) = paths
            .iter()
            .enumerate()
            .partition(|(_, p)| part::is_part(p));
        let reports = exports
            .iter()
            .map(|&(i, p)| Ok((i, nsys::Report::open(p)?)))
            .collect::<Result<Vec<_>, nsys::Error>>()?;
        let chunking = nsys::Chunking::shared(self.threads(), reports.len(), nsys::CHUNK_ROWS);
        let read = |(i, report): (usize, nsys::Report)| {
            Ok((i, Capture::read(&report, chunking, budget.clone())?))
        };
        let mut captures = nsys_lens::model::read_all(reports, self.threads(), read)
            .context("cannot load the reports")?;
        for (i, path) in parts {
            captures.extend(part::read(path)?.into_iter().map(|c| (i, c)));
        }
        // Input order; a part's reports in their order.
        captures.sort_by_key(|(i, _)| *i);
        Ok(captures)
    }

    /// Reads every input for a streaming conversion (its events sorted under `budget`), puts
    /// them on one clock, and with `--align collectives` corrects each host's clock; with the
    /// input each joined capture came from.
    pub fn captures(&self, budget: Arc<Budget>) -> anyhow::Result<(Captures, Vec<usize>)> {
        let (inputs, captures): (Vec<usize>, Vec<Capture>) =
            self.read_captures(budget)?.into_iter().unzip();
        let mut joined = Captures::join(captures).context("cannot load the reports")?;
        if self.align == Align::Collectives {
            let alignment = align::estimate(&joined.light);
            let corrections: Vec<i64> = alignment.hosts.iter().map(|h| h.correction_ns).collect();
            joined.shift_hosts(&corrections);
        }
        Ok((joined, inputs))
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
                .filter(|p| {
                    p.extension()
                        .is_some_and(|e| e == "sqlite" || e == PART_EXTENSION)
                })
                .collect();
            anyhow::ensure!(
                !found.is_empty(),
                "{}: no .sqlite or .{PART_EXTENSION} file in this directory",
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

/// `512M`, `2G`, `64k`, `1.5GiB` or plain bytes.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let digits = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size (e.g. 512M, 2G or bytes)"))?;
    let scale: f64 = match unit
        .trim()
        .to_ascii_lowercase()
        .trim_end_matches("ib")
        .trim_end_matches('b')
    {
        "" => 1.0,
        "k" => 1024.0,
        "m" => 1024.0 * 1024.0,
        "g" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(format!("`{text}`: the unit is k, M or G")),
    };
    Ok((number * scale) as usize)
}
