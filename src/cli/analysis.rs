//! What the analysis commands share: inputs, output format, compatibility mode, window and
//! role options, and the pipeline read -> ranks -> windows -> stream roles.

pub use super::inputs::FormatArg;
use super::inputs::Inputs;
use super::{NothingFound, Outcome};
use anyhow::Context as _;
use nsys_lens::analysis::pithtrain::{self, CompatError, Setup};
use nsys_lens::classify::{self, Activity, Rank, RankStreams, RoleRules, WindowSpec};
use nsys_lens::model::{Ns, Timeline};
use nsys_lens::report::{self, Format, Output, RankWindow, Table};
use regex::Regex;
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

    /// Analyse the whole capture.
    #[arg(long, conflicts_with = "start")]
    pub whole: bool,

    /// Clip to the window's GPU projection (first start to last end of the GPU work launched
    /// inside the anchor range) instead of its CPU extent.
    #[arg(long)]
    pub gpu_window: bool,
}

/// The window `--start/--end` (checked) or `--anchor` (compiled) ask for, else `otherwise`.
pub fn window_spec(
    start_end: Option<(i64, i64)>,
    anchor: Option<&str>,
    otherwise: WindowSpec,
) -> anyhow::Result<WindowSpec> {
    Ok(match (start_end, anchor) {
        (Some((start, end)), _) => {
            anyhow::ensure!(start < end, "--start {start} is not before --end {end}");
            WindowSpec::Explicit {
                start: Ns(start),
                end: Ns(end),
            }
        }
        (None, Some(pattern)) => WindowSpec::Anchor(anchor_regex(pattern)?),
        (None, None) => otherwise,
    })
}

/// An `--anchor` pattern, compiled.
fn anchor_regex(pattern: &str) -> anyhow::Result<Regex> {
    Regex::new(pattern).with_context(|| format!("bad --anchor regex `{pattern}`"))
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

    /// The selected ranks over their windows, with their streams classified, and the rules.
    pub fn classified(
        &self,
        activity: &Activity,
    ) -> anyhow::Result<(Vec<(RankWindow, RankStreams)>, RoleRules)> {
        let rules = self.streams.rules()?;
        let ranks = self.streams.select(ranks(activity)?)?;
        let windows = self.window.windows(activity, &ranks)?;
        Ok((classify_streams(activity, windows, &rules), rules))
    }
}

/// Global ranks named on the command line (`--ranks 0,4-7`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankList(pub Vec<u32>);

impl RankList {
    /// Parses `3`, `0,2` or `0,4-7`.
    pub fn parse(list: &str) -> Result<RankList, String> {
        let mut ranks = Vec::new();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let number = |s: &str| {
                s.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("`{item}` is not a rank or a range a-b"))
            };
            match item.split_once('-') {
                Some((a, b)) => ranks.extend(number(a)?..=number(b)?),
                None => ranks.push(number(item)?),
            }
        }
        if ranks.is_empty() {
            return Err("no rank given".to_string());
        }
        Ok(RankList(ranks))
    }

    /// Whether the list names `rank`.
    pub fn contains(&self, rank: u32) -> bool {
        self.0.contains(&rank)
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
        if !self.inputs.quiet {
            for r in &timeline.reports {
                for message in r.warnings.messages() {
                    eprintln!("nsys-lens: warning: {}: {message}", r.path.display());
                }
            }
        }
        Ok(timeline)
    }

    /// Prints a result in the chosen format.
    pub fn print(&self, output: &Output) -> anyhow::Result<Outcome> {
        let mut stdout = std::io::stdout().lock();
        output.write(Format::from(self.format), &mut stdout)?;
        stdout.flush()?;
        Ok(Outcome::Done)
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

    /// The window specification these options ask for.
    pub fn spec(&self) -> anyhow::Result<WindowSpec> {
        let otherwise = if self.whole {
            WindowSpec::Whole
        } else {
            WindowSpec::Steady
        };
        window_spec(self.start.zip(self.end), self.anchor.as_deref(), otherwise)
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

    /// `--anchor` compiled, when given.
    pub fn anchor_regex(&self) -> anyhow::Result<Option<Regex>> {
        self.anchor.as_deref().map(anchor_regex).transpose()
    }

    /// Each rank's window; an `--anchor` that matches no range on any rank is an error naming
    /// the range names closest to it.
    pub fn windows(&self, activity: &Activity, ranks: &[Rank]) -> anyhow::Result<Vec<RankWindow>> {
        let spec = self.spec()?;
        let windows: Vec<RankWindow> = ranks
            .iter()
            .map(|&rank| {
                let window = classify::window::find(activity, rank.process, &spec);
                let bounds = window.bounds(self.gpu_window);
                RankWindow {
                    rank,
                    window,
                    bounds,
                }
            })
            .collect();
        let unmatched = |w: &RankWindow| w.window.source == classify::WindowSource::NoAnchor;
        if let (Some(pattern), true) = (&self.anchor, windows.iter().all(unmatched)) {
            let processes: Vec<_> = ranks.iter().map(|r| r.process).collect();
            let closest = classify::window::closest_ranges(activity, &processes, pattern, 3);
            anyhow::bail!(
                "--anchor `{pattern}` matches no NVTX range of any rank; the closest range names \
                 are: {}",
                closest.join(" | ")
            );
        }
        Ok(windows)
    }
}

impl StreamArgs {
    /// The role rules: the file's, then the built-in ones.
    pub fn rules(&self) -> anyhow::Result<RoleRules> {
        Ok(match &self.roles {
            Some(path) => RoleRules::from_file(path)?,
            None => RoleRules::default(),
        })
    }

    /// The ranks kept by `--ranks`.
    pub fn select(&self, ranks: Vec<Rank>) -> anyhow::Result<Vec<Rank>> {
        keep_ranks(ranks, self.ranks.as_ref())
    }
}

/// The ranks a `--ranks` list keeps (all without one); every rank it names must exist.
pub fn keep_ranks(ranks: Vec<Rank>, wanted: Option<&RankList>) -> anyhow::Result<Vec<Rank>> {
    let Some(wanted) = wanted else {
        return Ok(ranks);
    };
    let missing: Vec<String> = wanted
        .0
        .iter()
        .filter(|&&w| !ranks.iter().any(|r| r.rank == w))
        .map(u32::to_string)
        .collect();
    let known: Vec<String> = ranks.iter().map(|r| r.rank.to_string()).collect();
    anyhow::ensure!(
        missing.is_empty(),
        "no rank {} (ranks: {})",
        missing.join(", "),
        known.join(", ")
    );
    Ok(ranks
        .into_iter()
        .filter(|r| wanted.contains(r.rank))
        .collect())
}

/// The ranks of the timeline ([`NothingFound`] when there is none).
pub fn ranks(activity: &Activity) -> anyhow::Result<Vec<Rank>> {
    let ranks = classify::ranks::discover(activity)?;
    if ranks.is_empty() {
        return Err(
            NothingFound("no process has GPU work or a rank label: no ranks".into()).into(),
        );
    }
    Ok(ranks)
}

/// Each rank's windows and stream roles.
pub fn classify_streams(
    activity: &Activity,
    windows: Vec<RankWindow>,
    rules: &RoleRules,
) -> Vec<(RankWindow, RankStreams)> {
    windows
        .into_iter()
        .map(|w| {
            let streams = classify::streams::classify(activity, w.rank.process, w.bounds, rules);
            (w, streams)
        })
        .collect()
}
