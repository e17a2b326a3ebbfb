//! Options shared by every command that reads reports.

use nsys_lens::analysis::align::Alignment;
use nsys_lens::input::capture::{Capture, Captures};
use nsys_lens::load;
use nsys_lens::model::Timeline;
use nsys_lens::spill::Budget;
use std::path::PathBuf;
use std::sync::Arc;

/// The reports to read.
#[derive(Debug, clap::Args)]
pub struct Inputs {
    /// nsys SQLite exports (one per node), .nsys-rep reports when nsys is on PATH,
    /// torch.profiler traces (.json, .json.gz; one per rank), JAX traces (.xplane.pb, xprof's
    /// .trace.json.gz), part files (`nsys-lens part`), or directories of them.
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
    /// What the library reads.
    fn library(&self) -> load::Inputs {
        load::Inputs {
            reports: self.reports.clone(),
            export_dir: self.export_dir.clone(),
            align: match self.align {
                Align::Session => load::Align::Session,
                Align::Collectives => load::Align::Collectives,
            },
            threads: self.threads(),
        }
    }

    /// Exports `.nsys-rep` inputs when needed, loads every report into one timeline, and with
    /// `--align collectives` corrects each host's clock.
    pub fn load(&self) -> anyhow::Result<Timeline> {
        Ok(self.load_aligned()?.0)
    }

    /// [`Inputs::load`], and the alignment estimate when `--align collectives` asked for one.
    pub fn load_aligned(&self) -> anyhow::Result<(Timeline, Option<Alignment>)> {
        let _progress = self.reading();
        self.library().load()
    }

    /// Every input read for a streaming conversion, each with the position of the input it
    /// came from: exports read (their events sorted under `budget`), part files opened.
    pub fn read_captures(&self, budget: Arc<Budget>) -> anyhow::Result<Vec<(usize, Capture)>> {
        let _progress = self.reading();
        self.library().read_captures(budget)
    }

    /// Reads every input for a streaming conversion (its events sorted under `budget`), puts
    /// them on one clock, and with `--align collectives` corrects each host's clock; with the
    /// input each joined capture came from.
    pub fn captures(&self, budget: Arc<Budget>) -> anyhow::Result<(Captures, Vec<usize>)> {
        let _progress = self.reading();
        self.library().captures(budget)
    }

    /// [`Inputs::captures`], and the alignment estimate when `--align collectives` asked for
    /// one.
    pub fn captures_aligned(
        &self,
        budget: Arc<Budget>,
    ) -> anyhow::Result<(Captures, Option<Alignment>)> {
        let _progress = self.reading();
        let (captures, _, alignment) = self.library().captures_aligned(budget)?;
        Ok((captures, alignment))
    }

    /// Fails unless every path of `outputs` may be written: none is an input, and only the null
    /// device takes several ([`nsys_lens::output`]).
    pub fn check_outputs(&self, outputs: &[PathBuf]) -> anyhow::Result<()> {
        self.library().check_outputs(outputs)
    }

    /// The progress line while the reports are read.
    fn reading(&self) -> super::progress::Progress {
        let what = format!("reading {} report(s)", self.reports.len());
        super::progress::Progress::reading(what, self.quiet)
    }

    /// Prints the reports' warnings on stderr (unless `-q`).
    pub fn warn(&self, timeline: &Timeline) {
        if self.quiet {
            return;
        }
        for r in &timeline.reports {
            for message in r.warnings.messages() {
                eprintln!("nsys-lens: warning: {}: {message}", r.path.display());
            }
        }
    }

    /// Threads that read (`--threads`, else one per core).
    pub fn threads(&self) -> usize {
        self.threads.map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            usize::from,
        )
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

/// `--timeunit` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TimeUnitArg {
    /// A unit per value that fits it (`820 ns`, `1.432 ms`, `2.501 s`).
    #[default]
    Auto,
    /// Integer nanoseconds.
    Ns,
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
}

impl From<TimeUnitArg> for nsys_lens::report::TimeUnit {
    fn from(arg: TimeUnitArg) -> Self {
        match arg {
            TimeUnitArg::Auto => Self::Auto,
            TimeUnitArg::Ns => Self::Ns,
            TimeUnitArg::Us => Self::Us,
            TimeUnitArg::Ms => Self::Ms,
            TimeUnitArg::S => Self::S,
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
