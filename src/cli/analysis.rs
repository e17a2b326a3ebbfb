//! What the analysis commands share: inputs, output format, compatibility mode, window and
//! role options, and the pipeline read -> ranks -> windows -> stream roles.

use super::Outcome;
pub use super::inputs::FormatArg;
use super::inputs::{Inputs, TimeUnitArg};
use nsys_lens::analysis::pithtrain::{self, CompatError, Setup};
use nsys_lens::classify::{Activity, RoleRules};
use nsys_lens::input::capture::Captures;
use nsys_lens::model::Timeline;
use nsys_lens::query::{Loaded, NothingFound, RankList, Selection, WindowOptions};
use nsys_lens::report::{self, Format, Output, Table};
use nsys_lens::spill::Budget;
use std::io::Write;
use std::path::PathBuf;

/// Options of every analysis command.
#[derive(Debug, clap::Args)]
pub struct Common {
    #[command(flatten)]
    pub inputs: Inputs,

    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: FormatArg,

    /// Unit of durations in tables (JSON and CSV always hold integer ns).
    #[arg(long, value_enum, default_value_t, value_name = "UNIT")]
    pub timeunit: TimeUnitArg,
}

/// `--compat`, on the commands that reproduce another tool's tables (`ranks`, `window`,
/// `streams`, `overlap`); the others do not take it.
#[derive(Debug, clap::Args)]
pub struct CompatArg {
    /// Reproduce another tool's tables exactly (one report only).
    #[arg(long, value_enum, value_name = "TOOL")]
    pub compat: Option<Compat>,
}

/// Tools whose output `--compat` reproduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Compat {
    /// pith-train's analyze-nsys-profile scripts (show_setup, find_window, classify_streams,
    /// compute_overlap) on one node's export.
    Pithtrain,
}

/// Which window each rank is analysed over.
#[derive(Debug, clap::Args)]
pub struct WindowArgs {
    /// Regex on NVTX range text marking a step or chunk; the window is its median instance
    /// (default: PithTrain's overlapped chunk, then `ProfilerStep#N`).
    #[arg(long, value_name = "REGEX", conflicts_with_all = ["start", "whole"])]
    pub anchor: Option<String>,

    /// Window start, ns on the merged clock (with --end; the same window for every rank).
    #[arg(
        long,
        value_name = "NS",
        requires = "end",
        allow_negative_numbers = true
    )]
    pub start: Option<i64>,

    /// Window end, ns on the merged clock (with --start).
    #[arg(
        long,
        value_name = "NS",
        requires = "start",
        allow_negative_numbers = true
    )]
    pub end: Option<i64>,

    /// Analyse the whole capture: from each report's first event, or from its session start
    /// when ranges or calls began before it (a window never starts before its capture).
    #[arg(long, conflicts_with = "start")]
    pub whole: bool,

    /// Clip to the window's GPU projection (first start to last end of the GPU work launched
    /// inside the anchor range) instead of its CPU extent (the default already where the range
    /// holds less than half of that work: an asynchronously dispatched step).
    #[arg(long)]
    pub gpu_window: bool,
}

/// Options of the commands that analyse each rank over a window.
#[derive(Debug, clap::Args)]
pub struct RankArgs {
    #[command(flatten)]
    pub common: Common,

    #[command(flatten)]
    pub streams: StreamArgs,

    #[command(flatten)]
    pub window: WindowArgs,
}

impl RankArgs {
    /// PithTrain's rows for every `show_setup` record that `--ranks` keeps, each computed by
    /// `rows` over the record's window (`--start/--end`, else its median chunk), tagged with
    /// the record's pid.
    pub fn pithtrain_rows<T>(
        &self,
        activity: &Activity,
        rows: impl Fn(&Setup, (i64, i64)) -> Vec<T>,
    ) -> anyhow::Result<Vec<(u32, T)>> {
        anyhow::ensure!(
            self.streams.roles.is_none(),
            "--compat pithtrain uses PithTrain's own rules: drop --roles"
        );
        let mut out = Vec::new();
        for record in compat_setup(activity)? {
            if self
                .streams
                .ranks
                .as_ref()
                .is_some_and(|list| !list.contains(record.label.rank))
            {
                continue;
            }
            let window = self.window.pithtrain(activity, &record)?;
            out.extend(
                rows(&record, window)
                    .into_iter()
                    .map(|row| (record.pid, row)),
            );
        }
        Ok(out)
    }

    /// Prints PithTrain's table of `rows` ([`RankArgs::pithtrain_rows`] over the whole timeline),
    /// made by `table`.
    pub fn print_pithtrain<T>(
        &self,
        rows: fn(&Activity, &Setup, (i64, i64)) -> Vec<T>,
        table: fn(&[(u32, T)]) -> Table,
    ) -> anyhow::Result<Outcome> {
        let timeline = self.common.load()?;
        let activity = Activity::new(&timeline);
        let rows =
            self.pithtrain_rows(&activity, |record, window| rows(&activity, record, window))?;
        self.common.print_compat(table(&rows))
    }

    /// Prints what `query` makes of the reports for these options' selection, read for
    /// streaming ([`Common::captures`]): memory stays bounded however long the capture.
    pub fn print_query(
        &self,
        query: impl FnOnce(Loaded, &Selection) -> anyhow::Result<Output>,
    ) -> anyhow::Result<Outcome> {
        let selection = self.selection()?;
        let captures = self.common.captures()?;
        self.common
            .print(&query(Loaded::Captures(&captures), &selection)?)
    }

    /// Which ranks, windows and role rules these options select.
    pub fn selection(&self) -> anyhow::Result<Selection> {
        Ok(Selection {
            ranks: self.streams.ranks.clone(),
            window: self.window.options(),
            rules: self.streams.rules()?,
        })
    }
}

/// Rank filter and role rules of the per-rank commands.
#[derive(Debug, clap::Args)]
pub struct StreamArgs {
    /// Only these global ranks: one (`3`), a list or ranges (`0,4-7`); `--rank` is the same.
    #[arg(long, visible_alias = "rank", value_name = "LIST", value_parser = RankList::parse)]
    pub ranks: Option<RankList>,

    /// TOML file of extra role rules (`[[rule]]` with `pattern` and `role`), tried before the
    /// built-in PithTrain rules.
    #[arg(long, value_name = "FILE")]
    pub roles: Option<PathBuf>,
}

impl Common {
    /// Loads the reports and prints their warnings on stderr (unless `-q`).
    pub fn load(&self) -> anyhow::Result<Timeline> {
        let timeline = self.inputs.load()?;
        self.warn(&timeline);
        Ok(timeline)
    }

    /// The reports read for streaming: their events sorted under the default memory budget
    /// (spilled to a temporary file past it), on one clock, warnings printed as
    /// [`Common::load`] prints them.
    pub fn captures(&self) -> anyhow::Result<Captures> {
        let (mut captures, _) = self.inputs.captures(Budget::new(Budget::DEFAULT))?;
        captures.warn_repeated_gpu_ops()?;
        self.warn(&captures.light);
        Ok(captures)
    }

    /// Prints the reports' warnings on stderr (unless `-q`).
    fn warn(&self, timeline: &Timeline) {
        self.inputs.warn(timeline);
    }

    /// Prints a result in the chosen format: an empty table too (its header, and notes that
    /// say why), which is [`Outcome::Empty`].
    pub fn print(&self, output: &Output) -> anyhow::Result<Outcome> {
        let mut stdout = std::io::stdout().lock();
        output.write_in(Format::from(self.format), self.timeunit.into(), &mut stdout)?;
        stdout.flush()?;
        match output.table.rows.is_empty() {
            true => Ok(Outcome::Empty),
            false => Ok(Outcome::Done),
        }
    }

    /// Prints a PithTrain table: its exact text, or the same rows as JSON or CSV.
    pub fn print_compat(&self, table: Table) -> anyhow::Result<Outcome> {
        if table.rows.is_empty() {
            return Err(NothingFound("the table is empty: nothing to report".into()).into());
        }
        let format = Format::from(self.format);
        if format != Format::Table {
            return self.print(&Output {
                table,
                ..Output::default()
            });
        }
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(report::pithtrain::python_text(&table).as_bytes())?;
        stdout.flush()?;
        Ok(Outcome::Done)
    }
}

/// A compatibility result: wrong usage is an error (exit 2); a profile without what the
/// scripts need is [`NothingFound`] (exit 1).
pub fn compat<T>(result: Result<T, CompatError>) -> anyhow::Result<T> {
    result.map_err(|e| match e {
        CompatError::NotOneReport(_) => e.into(),
        other => NothingFound(other.to_string()).into(),
    })
}

/// The PithTrain `show_setup` records.
pub fn compat_setup(activity: &Activity) -> anyhow::Result<Vec<Setup>> {
    compat(pithtrain::setup(activity))
}

impl WindowArgs {
    /// Whether no window option was given.
    pub fn is_default(&self) -> bool {
        self.anchor.is_none() && self.start.is_none() && !self.whole && !self.gpu_window
    }

    /// The library's window options.
    pub fn options(&self) -> WindowOptions {
        WindowOptions {
            anchor: self.anchor.clone(),
            start_end: self.start.zip(self.end),
            whole: self.whole,
            gpu_window: self.gpu_window,
        }
    }

    /// PithTrain's window for one record: `--start/--end` when given, else its median chunk.
    /// Other window options have no PithTrain meaning and are refused.
    pub fn pithtrain(&self, activity: &Activity, setup: &Setup) -> anyhow::Result<(i64, i64)> {
        anyhow::ensure!(
            self.anchor.is_none() && !self.whole && !self.gpu_window,
            "--compat pithtrain takes only --start/--end as window options"
        );
        match self.start.zip(self.end) {
            Some(bounds) => Ok(bounds),
            None => compat(pithtrain::find_window(activity, setup)).map(|w| (w.start, w.end)),
        }
    }
}

impl StreamArgs {
    /// The role rules: the file's, then the built-in ones.
    pub fn rules(&self) -> anyhow::Result<RoleRules> {
        Ok(RoleRules::load(self.roles.as_deref())?)
    }
}
