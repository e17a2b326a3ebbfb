//! Every analysis command as one call: a loaded timeline and the command's options in, the
//! command's [`Output`] (the rows every format prints) out. The CLI and the Python package both
//! call these, so a table and a DataFrame never differ.

pub mod captured;
pub mod critical;
pub mod gate;
mod loaded;
pub mod mfu;
pub mod page;

pub use loaded::Loaded;

use crate::analysis::bubbles::{ideal_pct, micro_batches};
use crate::analysis::collectives::{
    Collectives, Instance, WHOLE, add_transfers, by_rank, match_classified, match_instances,
    size_transfers,
};
use crate::analysis::idle::{Gap, GapContext, StreamIdle, gap_context, rank_idle};
use crate::analysis::kernels::unclassified_share;
use crate::analysis::metrics::rank_metrics;
use crate::analysis::overlap::{self, StageKey, rank_exposure};
use crate::classify::families::{Families, FamilyCache};
use crate::classify::layout::{self, PipelineLayout};
use crate::classify::window::MeasuredSteps;
use crate::classify::{self, Activity, Rank, RankStreams, RoleRules, WindowSpec};
use crate::input::capture::Captures;
use crate::model::{Ns, ProcessId, Timeline};
use crate::report::{self, Output, RankBreakdown, RankBubbles, RankIdle, RankMetrics, RankWindow};
use regex::Regex;
use std::collections::BTreeMap;

/// The analysis found nothing to report: no rank, no anchor match, an empty table (the CLI's
/// exit code 1).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NothingFound(pub String);

/// Global ranks named by the user (`0,4-7`).
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

/// Which window each rank is analysed over.
#[derive(Debug, Clone, Default)]
pub struct WindowOptions {
    /// A regex on NVTX range text marking a step or chunk: the window is its median instance.
    pub anchor: Option<String>,
    /// The same window for every rank, merged-clock ns.
    pub start_end: Option<(i64, i64)>,
    /// The whole capture.
    pub whole: bool,
    /// The window's GPU projection instead of its CPU extent.
    pub gpu_window: bool,
}

impl WindowOptions {
    /// The window specification these options ask for.
    pub fn spec(&self) -> anyhow::Result<WindowSpec> {
        let otherwise = if self.whole {
            WindowSpec::Whole
        } else {
            WindowSpec::Steady
        };
        window_spec(self.start_end, self.anchor.as_deref(), otherwise)
    }

    /// [`WindowOptions::windows`] of what was loaded: from captures, the GPU projections come
    /// from their events ([`captured::project`]).
    pub fn windows_in(
        &self,
        loaded: Loaded,
        activity: &Activity,
        ranks: &[Rank],
    ) -> anyhow::Result<Vec<RankWindow>> {
        let mut windows = self.windows(activity, ranks)?;
        if let Loaded::Captures(captures) = loaded {
            captured::project((captures, activity), &mut windows, self.gpu_window)?;
        }
        Ok(windows)
    }

    /// The anchor, compiled, when there is one.
    pub fn anchor_regex(&self) -> anyhow::Result<Option<Regex>> {
        self.anchor.as_deref().map(anchor_regex).transpose()
    }

    /// Each rank's window; an anchor that matches no range on any rank is an error naming the
    /// range names closest to it.
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

/// The window `start_end` (checked) or `anchor` (compiled) asks for, else `otherwise`.
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

/// What `convert` draws: the ranks of `activity` (only `ranks` when given; the others' processes
/// are left out too), each over the window `start_end`, `anchor` or `steady` (the steady-state
/// window, else the whole capture) asks for, with flows from each collective's last arrival
/// when `collective_flows`. An anchor range that only dispatches its work (a JAX step) gives
/// way to its GPU projection, found in the `captures`' calls and operations as the analyses find
/// it. The CLI and the Python package plan conversions through it.
pub fn conversion_plan<'a, 't>(
    (activity, rules): (&'a Activity<'t>, &'a RoleRules),
    captures: &Captures,
    ranks: Option<&RankList>,
    (start_end, anchor, steady): (Option<(i64, i64)>, Option<&str>, bool),
    collective_flows: bool,
) -> anyhow::Result<crate::export::Plan<'a, 't>> {
    let otherwise = match steady {
        true => WindowSpec::Steady,
        false => WindowSpec::Whole,
    };
    let spec = window_spec(start_end, anchor, otherwise)?;
    let kept = keep_ranks(classify::ranks::discover(activity)?, ranks)?;
    let mut windows: Vec<RankWindow> = Vec::new();
    if !matches!(spec, WindowSpec::Whole) {
        for &rank in &kept {
            let window = classify::window::find(activity, rank.process, &spec);
            let bounds = (window.start.0, window.end.0);
            windows.push(RankWindow {
                rank,
                window,
                bounds,
            });
        }
        captured::project((captures, activity), &mut windows, false)?;
    }
    let bounds: Vec<crate::export::ProcessWindow> =
        windows.iter().map(|w| (w.rank.process, w.bounds)).collect();
    let others = ranks.is_none();
    let plan = crate::export::Plan::new(activity, rules, &kept, (&spec, &bounds), others);
    Ok(match collective_flows {
        true => plan.with_collective_flows(),
        false => plan,
    })
}

/// An anchor pattern, compiled.
fn anchor_regex(pattern: &str) -> anyhow::Result<Regex> {
    crate::classify::rules::user_regex(pattern).map_err(|e| anyhow::anyhow!("--anchor: {e}"))
}

/// Ranks over their windows, with their streams classified.
type Classified = Vec<(RankWindow, RankStreams)>;

/// Which ranks, over which windows, with which role rules: what every per-rank command takes.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only these ranks (all without a list); every rank named must exist.
    pub ranks: Option<RankList>,
    /// The windows.
    pub window: WindowOptions,
    /// The role rules streams are classified with.
    pub rules: RoleRules,
}

impl Selection {
    /// The selected ranks' windows.
    pub fn windows(&self, activity: &Activity) -> anyhow::Result<Vec<RankWindow>> {
        let ranks = keep_ranks(ranks(activity)?, self.ranks.as_ref())?;
        self.window.windows(activity, &ranks)
    }

    /// [`Selection::windows`] in what was loaded ([`WindowOptions::windows_in`]).
    pub fn windows_in(
        &self,
        loaded: Loaded,
        activity: &Activity,
    ) -> anyhow::Result<Vec<RankWindow>> {
        let ranks = keep_ranks(ranks(activity)?, self.ranks.as_ref())?;
        self.window.windows_in(loaded, activity, &ranks)
    }

    /// The selected ranks over their windows, with their streams classified.
    pub fn classified(
        &self,
        activity: &Activity,
    ) -> anyhow::Result<Vec<(RankWindow, RankStreams)>> {
        let windows = self.windows(activity)?;
        Ok(windows
            .into_iter()
            .map(|w| {
                let streams =
                    classify::streams::classify(activity, w.rank.process, w.bounds, &self.rules);
                (w, streams)
            })
            .collect())
    }

    /// [`Selection::classified`] of what was loaded (`activity` indexes its timeline), with the
    /// notes on ranks whose kernels no family names ([`unclassified_warnings`]).
    fn measured(
        &self,
        loaded: Loaded,
        activity: &Activity,
    ) -> anyhow::Result<(Classified, Vec<String>)> {
        let Loaded::Captures(captures) = loaded else {
            let classified = self.classified(activity)?;
            let notes = unclassified_warnings(activity, classified.iter().map(|(w, _)| w));
            return Ok((classified, notes));
        };
        let windows = self.windows_in(loaded, activity)?;
        let spans: Vec<captured::Span> =
            windows.iter().map(|w| (w.rank.process, w.bounds)).collect();
        let gathered = captured::gather((captures, activity), &spans, &spans, &self.rules)?;
        let notes = unclassified_notes(windows.iter(), gathered.shares.into_iter());
        Ok((windows.into_iter().zip(gathered.streams).collect(), notes))
    }
}

/// The ranks a list keeps (all without one); every rank it names must exist.
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

/// `ranks`: which process is which rank, with its mesh coordinates.
pub fn rank_table(timeline: &Timeline) -> anyhow::Result<Output> {
    let activity = Activity::new(timeline);
    let ranks = ranks(&activity)?;
    let pipeline = layout::pipeline_coords(&activity, &ranks, &RoleRules::default());
    let processes: Vec<_> = ranks.iter().map(|r| r.process).collect();
    let collectives = match_instances(&activity, &processes, &RoleRules::default());
    Ok(report::ranks_output(
        timeline,
        &ranks,
        &pipeline,
        &collectives,
    ))
}

/// A warning per rank whose kernels no family names take over a tenth of its GPU time in its
/// window ([`report::unclassified_warning`]): every command says so, so that a user writes a
/// `--families` rule before trusting a table built on unnamed kernels.
fn unclassified_warnings<'w>(
    activity: &Activity,
    windows: impl Iterator<Item = &'w RankWindow>,
) -> Vec<String> {
    let families = Families::default();
    let mut cache = FamilyCache::new(&families, activity.timeline);
    let windows: Vec<&RankWindow> = windows.collect();
    let shares = windows
        .iter()
        .map(|w| unclassified_share(activity, (w.rank.process, w.bounds), &mut cache));
    unclassified_notes(windows.iter().copied(), shares)
}

/// [`unclassified_warnings`] from each window's (unnamed, all) GPU time, ns.
fn unclassified_notes<'w>(
    windows: impl Iterator<Item = &'w RankWindow>,
    shares: impl Iterator<Item = (i64, i64)>,
) -> Vec<String> {
    windows
        .zip(shares)
        .filter_map(|(w, (other, all))| report::unclassified_warning(w.rank.rank, other, all))
        .collect()
}

/// `window`: each rank's window.
pub fn windows(timeline: &Timeline, window: &WindowOptions) -> anyhow::Result<Output> {
    let activity = Activity::new(timeline);
    let ranks = ranks(&activity)?;
    let windows = window.windows(&activity, &ranks)?;
    Ok(report::window_output(timeline, &windows))
}

/// `streams`: the role of every stream of the selected ranks.
pub fn streams<'a>(loaded: impl Into<Loaded<'a>>, selection: &Selection) -> anyhow::Result<Output> {
    let loaded = loaded.into();
    let activity = Activity::new(loaded.timeline());
    let (classified, notes) = selection.measured(loaded, &activity)?;
    let mut output = report::streams_output(loaded.timeline(), &classified, &selection.rules);
    output.notes.extend(notes);
    Ok(output)
}

/// `overlap`: hidden and exposed communication per rank, stage and role.
pub fn overlap<'a>(loaded: impl Into<Loaded<'a>>, selection: &Selection) -> anyhow::Result<Output> {
    let loaded = loaded.into();
    let activity = Activity::new(loaded.timeline());
    let (classified, notes) = selection.measured(loaded, &activity)?;
    let measured: Vec<_> = classified
        .into_iter()
        .map(|(w, s)| {
            let exposure = overlap::rank_exposure(&s, &selection.rules);
            (w, s, exposure)
        })
        .collect();
    let mut output = report::overlap_output(loaded.timeline(), &measured, &selection.rules);
    output.notes.extend(notes);
    Ok(output)
}

/// `kernels`: time per kernel family per GPU per step; `steps` overrides the steps counted in
/// each window.
pub fn kernels<'a>(
    loaded: impl Into<Loaded<'a>>,
    selection: &Selection,
    families: &Families,
    steps: Option<usize>,
) -> anyhow::Result<Output> {
    let loaded = loaded.into();
    let breakdowns = breakdowns(loaded, selection, families, steps)?;
    Ok(report::kernels_output(loaded.timeline(), &breakdowns))
}

/// `kernels --unclassified`: the kernels no family names, by name, per rank, with their share
/// of the rank's kernel time.
pub fn unclassified<'a>(
    loaded: impl Into<Loaded<'a>>,
    selection: &Selection,
    families: &Families,
) -> anyhow::Result<Output> {
    let loaded = loaded.into();
    let breakdowns = breakdowns(loaded, selection, families, None)?;
    Ok(report::unclassified_output(loaded.timeline(), &breakdowns))
}

/// Each selected rank's kernel breakdown over its window, measured over the steps inside it.
fn breakdowns(
    loaded: Loaded,
    selection: &Selection,
    families: &Families,
    steps: Option<usize>,
) -> anyhow::Result<Vec<RankBreakdown>> {
    let activity = Activity::new(loaded.timeline());
    let mut windows = selection.windows_in(loaded, &activity)?;
    let anchor = selection.window.anchor_regex()?;
    let found = loaded.measured_steps(&activity, windows.iter(), anchor.as_ref())?;
    let counted: Vec<(usize, String)> = (windows.iter_mut())
        .zip(&found)
        .map(|(w, found)| count_steps(w, found, steps))
        .collect();
    let rules = &selection.rules;
    let spans: Vec<captured::Span> = windows.iter().map(|w| (w.rank.process, w.bounds)).collect();
    let classified = loaded.classify(&activity, &spans, rules)?;
    let kernels = loaded.kernels(&activity, &spans, (&classified, rules), families)?;
    Ok((windows.into_iter().zip(kernels).zip(counted))
        .map(|((window, kernels), (steps, steps_source))| RankBreakdown {
            window,
            kernels,
            steps,
            steps_source,
        })
        .collect())
}

/// How many steps a rank's window holds (`steps` when given), and where the count came from;
/// with step ranges found (and `measured`: [`classify::window::measured_steps`]), the window's
/// bounds become the first measured step's start to the last's end.
fn count_steps(w: &mut RankWindow, found: &MeasuredSteps, steps: Option<usize>) -> (usize, String) {
    let MeasuredSteps { ranges, measured } = found;
    match (steps, measured.first(), measured.last()) {
        (Some(n), ..) => (n.max(1), "given with --steps".to_string()),
        (None, None, _) if w.window.dispatch_only() => (
            1,
            "one step: the GPU projection of its range, which only dispatches its work".to_string(),
        ),
        (None, Some(first), Some(last)) => {
            // Measure over the steps themselves, not what the window holds around them.
            w.bounds = (first.0, last.1);
            let projected = ranges.iter().zip(measured).filter(|(r, m)| r != m).count();
            let how = match projected {
                0 => String::new(),
                n => {
                    format!("; {n} of them only dispatch their work, and are their GPU projection")
                }
            };
            (
                measured.len(),
                format!(
                    "step NVTX ranges inside the window, measured from the first's start to the \
                     last's end{how}"
                ),
            )
        }
        _ => (
            1,
            "no step NVTX range inside the window: the window is taken as one step".to_string(),
        ),
    }
}

/// How many of a rank's longest gaps `idle` lists.
const LONGEST: usize = 3;

/// A rank's idle streams, and its longest gaps with what the launching thread was doing.
type MeasuredIdle = (Vec<StreamIdle>, Vec<(Gap, GapContext)>);

/// `idle`: GPU idle time per stream by cause, and each rank's longest gaps; a gap shorter than
/// `launch_gap` ns after a launch that came in time is launch latency.
pub fn idle<'a>(
    loaded: impl Into<Loaded<'a>>,
    selection: &Selection,
    launch_gap: i64,
) -> anyhow::Result<Output> {
    let loaded = loaded.into();
    let timeline = loaded.timeline();
    let activity = Activity::new(timeline);
    let (classified, notes) = selection.measured(loaded, &activity)?;
    let spans: Vec<captured::Span> = (classified.iter())
        .map(|(w, _)| (w.rank.process, w.bounds))
        .collect();
    let longest = |gaps: Vec<Gap>| {
        let mut gaps = gaps;
        gaps.sort_by_key(|g| std::cmp::Reverse(g.end - g.start));
        gaps.truncate(LONGEST);
        gaps
    };
    let measured: Vec<MeasuredIdle> = match loaded {
        Loaded::Whole(_) => (spans.iter())
            .map(|&(process, window)| {
                let (streams, gaps) = rank_idle(&activity, process, window, launch_gap);
                let gaps = longest(gaps).into_iter();
                let gaps = gaps.map(|g| (g, gap_context(&activity, process, &g)));
                (streams, gaps.collect())
            })
            .collect(),
        Loaded::Captures(captures) => {
            let both = (captures, &activity);
            let idle = captured::idle(both, &spans, launch_gap)?;
            let (streams, gaps): (Vec<_>, Vec<_>) =
                idle.into_iter().map(|(s, g)| (s, longest(g))).unzip();
            let contexts = captured::gap_contexts(both, &spans, &gaps)?;
            let gaps = gaps.into_iter().zip(contexts);
            let gaps = gaps.map(|(g, c)| g.into_iter().zip(c).collect());
            streams.into_iter().zip(gaps).collect()
        }
    };
    let idle: Vec<RankIdle> = (classified.iter())
        .zip(measured)
        .map(|((w, roles), (streams, longest))| RankIdle {
            window: w.clone(),
            streams,
            roles,
            longest,
        })
        .collect();
    let mut output = report::idle_output(timeline, &idle, &selection.rules);
    output.notes.extend(notes);
    Ok(output)
}

/// `bubbles`: the pipeline bubble per rank and step, beside the ideal 1F1B bubble (`pp` and
/// `micro_batches` override what the trace shows).
pub fn bubbles<'a>(
    loaded: impl Into<Loaded<'a>>,
    selection: &Selection,
    pp: Option<u32>,
    micro_batches_given: Option<u32>,
) -> anyhow::Result<Output> {
    let loaded = loaded.into();
    let timeline = loaded.timeline();
    let activity = Activity::new(timeline);
    let anchor = selection.window.anchor_regex()?;
    let (classified, notes) = selection.measured(loaded, &activity)?;
    let ranks: Vec<Rank> = classified.iter().map(|(w, _)| w.rank).collect();
    let rules = &selection.rules;
    let pipeline = match pp {
        Some(_) => PipelineLayout::default(),
        None => loaded.pipeline(&activity, &ranks, &classified, rules)?,
    };
    let coords = pipeline
        .coords
        .iter()
        .copied()
        .chain(std::iter::repeat(None));
    let windows = classified.iter().map(|(w, _)| w);
    let found = loaded.measured_steps(&activity, windows, anchor.as_ref())?;
    // 1F1B's formula describes whole steps of a one-directional schedule: not a window that
    // is no step (a PithTrain chunk), nor PithTrain's DualPipeV.
    let whole_steps: Vec<bool> = found.iter().map(|f| !f.ranges.is_empty()).collect();
    let found: Vec<MeasuredSteps> = (found.into_iter().zip(&classified))
        .map(|(f, (w, _))| f.or_window(w.bounds))
        .collect();
    let at: Vec<_> = (classified.iter().zip(&found))
        .map(|((w, streams), f)| (w.rank.process, f.measured.as_slice(), streams))
        .collect();
    let steps = loaded.bubbles(&activity, &at, rules)?;
    let bubbles: Vec<RankBubbles> = (classified.into_iter())
        .zip(steps)
        .zip(coords)
        .zip(found)
        .zip(&whole_steps)
        .map(|(((((w, _), steps), coord), found), &whole_steps)| {
            let process = w.rank.process;
            let formula_applies = whole_steps && w.rank.label.is_none();
            let MeasuredSteps { ranges, .. } = found;
            let pp = pp.or(coord.map(|(c, _)| c.size));
            // Micro-batches are counted in the step's range, the bubble on the step measured.
            let ideal = ranges
                .iter()
                .map(|&range| {
                    let m =
                        micro_batches_given.or_else(|| micro_batches(&activity, process, range));
                    ideal_pct(pp?, m?).filter(|_| formula_applies)
                })
                .collect();
            RankBubbles {
                window: w,
                pp,
                steps,
                ideal,
            }
        })
        .collect();
    let mut output = report::bubbles_output(timeline, &bubbles);
    output.notes.extend(missing_ideal(
        &bubbles,
        &whole_steps,
        pipeline.unread.as_deref(),
    ));
    output.notes.extend(notes);
    Ok(output)
}

/// Says why the ideal bubble is absent where it is: 1F1B's formula does not apply (a PithTrain
/// rank runs DualPipeV; a window that is not whole steps), or an input is missing (and how to
/// give it).
fn missing_ideal(
    bubbles: &[RankBubbles],
    whole_steps: &[bool],
    why_no_pp: Option<&str>,
) -> Vec<String> {
    let mut notes = Vec::new();
    if bubbles.iter().any(|b| b.window.rank.label.is_some()) {
        notes.push(
            "ideal_bubble_pct is not shown for PithTrain ranks: 1F1B's (pp-1)/(m+pp-1) does not \
             describe its DualPipeV schedule"
                .to_string(),
        );
    }
    // Ranks where the formula would apply, but the window holds no whole step.
    let candidates = || {
        bubbles
            .iter()
            .zip(whole_steps)
            .filter(|(b, _)| b.window.rank.label.is_none())
    };
    if candidates().any(|(_, &whole)| !whole) {
        notes.push(
            "ideal_bubble_pct needs whole steps: no step range lies in the window \
             (`ProfilerStep#N`, or the range --anchor names)"
                .to_string(),
        );
    }
    let absent: Vec<(&RankBubbles, bool)> = candidates()
        .filter(|(b, _)| b.ideal.iter().any(Option::is_none))
        .map(|(b, &whole)| (b, whole))
        .collect();
    let mut missing = Vec::new();
    if absent.iter().any(|(b, _)| b.pp.is_none()) {
        let why = why_no_pp.map_or(String::new(), |w| format!(": {w}"));
        missing.push(format!(
            "the pipeline size (no rank label; give --pp N{why})"
        ));
    }
    if absent.iter().any(|(b, whole)| *whole && b.pp.is_some()) {
        missing.push(
            "the micro-batches per step (no `forward...` ranges in the step; give \
             --micro-batches M)"
                .to_string(),
        );
    }
    if !missing.is_empty() {
        notes.push(format!(
            "ideal_bubble_pct is absent where nsys-lens lacks {}",
            missing.join(" and ")
        ));
    }
    notes
}

/// What `collectives` lists.
#[derive(Debug, Clone, Copy, Default)]
pub struct CollectiveOptions {
    /// Also point-to-point transfers, matched sender to receiver.
    pub p2p: bool,
    /// Totals per rank instead of one row per instance.
    pub by_rank: bool,
    /// Only the instances with the largest arrival skew, worst first.
    pub top: Option<usize>,
}

/// `collectives`: every collective matched across its ranks, inside every member's window and
/// holding a selected rank.
pub fn collectives<'a>(
    loaded: impl Into<Loaded<'a>>,
    selection: &Selection,
    options: CollectiveOptions,
) -> anyhow::Result<Output> {
    let loaded = loaded.into();
    let timeline = loaded.timeline();
    let activity = Activity::new(timeline);
    let ranks = ranks(&activity)?;
    let windows = selection.window.windows_in(loaded, &activity, &ranks)?;
    let (collectives, notes) =
        match_with_notes(loaded, &activity, &ranks, &windows, selection, options.p2p)?;
    let wanted = selection.ranks.as_ref();
    let inside = |i: &&Instance| {
        let in_window = i.within(|rank| windows[rank].bounds);
        let has_rank = |r: u32| i.arrivals.iter().any(|a| ranks[a.rank].rank == r);
        in_window && wanted.is_none_or(|list| list.0.iter().any(|&r| has_rank(r)))
    };
    let mut instances: Vec<&Instance> = collectives.instances.iter().filter(inside).collect();
    if let Some(n) = options.top {
        instances.sort_by_key(|i| std::cmp::Reverse(i.skew()));
        instances.truncate(n);
    }
    let mut output = match options.by_rank {
        true => {
            let waits = by_rank(ranks.len(), &instances);
            report::by_rank_output(timeline, &windows, &waits)
        }
        false => report::instances_output(timeline, &windows, &collectives, &instances),
    };
    output.notes.extend(notes);
    Ok(output)
}

/// The collectives of `ranks` matched (point-to-point transfers too with `p2p`), and the notes
/// on ranks whose kernels no family names over their `windows`: from the whole timeline, or in
/// one pass over the captures' events.
fn match_with_notes(
    loaded: Loaded,
    activity: &Activity,
    ranks: &[Rank],
    windows: &[RankWindow],
    selection: &Selection,
    p2p: bool,
) -> anyhow::Result<(Collectives, Vec<String>)> {
    let processes: Vec<_> = ranks.iter().map(|r| r.process).collect();
    let rules = &selection.rules;
    let Loaded::Captures(captures) = loaded else {
        let mut collectives = match_instances(activity, &processes, rules);
        if p2p {
            let mut transfers = layout::rank_transfers(activity, ranks, rules);
            size_transfers(activity, &processes, &mut transfers);
            add_transfers(&mut collectives, &transfers);
        }
        return Ok((collectives, unclassified_warnings(activity, windows.iter())));
    };
    // Each rank classified over the whole capture (what matching reads), then over its transfer
    // window (what point-to-point pairing reads).
    let mut spans: Vec<captured::Span> = processes.iter().map(|&p| (p, WHOLE)).collect();
    if p2p {
        spans.extend(
            ranks
                .iter()
                .map(|r| (r.process, layout::transfer_window(activity, r))),
        );
    }
    let shares: Vec<captured::Span> = windows.iter().map(|w| (w.rank.process, w.bounds)).collect();
    let gathered = captured::gather((captures, activity), &spans, &shares, rules)?;
    let (whole, transfer) = gathered.streams.split_at(processes.len());
    let mut collectives = match_classified(activity, &processes, rules, whole);
    if p2p {
        let mut transfers: Vec<_> = transfer
            .iter()
            .map(|s| layout::transfers(s, rules))
            .collect();
        size_transfers(activity, &processes, &mut transfers);
        add_transfers(&mut collectives, &transfers);
    }
    let notes = unclassified_notes(windows.iter(), gathered.shares.into_iter());
    Ok((collectives, notes))
}

/// `metrics`: GPU metrics per rank over its window.
pub fn metrics<'a>(loaded: impl Into<Loaded<'a>>, selection: &Selection) -> anyhow::Result<Output> {
    let loaded = loaded.into();
    let activity = Activity::new(loaded.timeline());
    let windows = selection.windows_in(loaded, &activity)?;
    let spans: Vec<captured::Span> = windows.iter().map(|w| (w.rank.process, w.bounds)).collect();
    let metrics: Vec<_> = match loaded {
        Loaded::Whole(_) => (spans.iter())
            .map(|&(process, window)| rank_metrics(&activity, process, window))
            .collect(),
        Loaded::Captures(captures) => captured::metrics((captures, &activity), &spans)?,
    };
    let ranks: Vec<RankMetrics> = (windows.into_iter().zip(metrics))
        .map(|(window, metrics)| RankMetrics { window, metrics })
        .collect();
    Ok(report::metrics_output(loaded.timeline(), &ranks))
}

/// `compare`'s measures of one run, averaged over its ranks (each over its window): step time,
/// kernel, idle and concurrency time per step, each kernel family's time and share, exposed
/// communication per role (its time and its share of the window), the bubble, and the MFU
/// (over the ranks whose kernels have FLOPs and whose GPU's peak is known).
pub fn run_metrics<'a>(
    loaded: impl Into<Loaded<'a>>,
    window: &WindowOptions,
) -> anyhow::Result<BTreeMap<String, f64>> {
    let loaded = loaded.into();
    let timeline = loaded.timeline();
    let activity = Activity::new(timeline);
    let ranks = ranks(&activity)?;
    let windows = window.windows_in(loaded, &activity, &ranks)?;
    let anchor = window.anchor_regex()?;
    let rules = RoleRules::default();
    let families = Families::default();
    let found = loaded.measured_steps(&activity, windows.iter(), anchor.as_ref())?;
    let found: Vec<MeasuredSteps> = (found.into_iter().zip(&windows))
        .map(|(found, w)| found.or_window(w.bounds))
        .collect();
    // Each rank over its window, then over its measured steps' extent.
    let mut spans: Vec<captured::Span> =
        windows.iter().map(|w| (w.rank.process, w.bounds)).collect();
    let extents: Vec<captured::Span> = (windows.iter().zip(&found))
        .map(|(w, f)| {
            (
                w.rank.process,
                (f.measured[0].0, f.measured[f.measured.len() - 1].1),
            )
        })
        .collect();
    spans.extend(&extents);
    let mut streams = loaded.classify(&activity, &spans, &rules)?;
    let comm = streams.split_off(windows.len());
    let processes: Vec<ProcessId> = windows.iter().map(|w| w.rank.process).collect();
    let kernels = loaded.kernels(&activity, &extents, (&comm, &rules), &families)?;
    let ranks = captured::bubble_ranks(&processes, &found, &streams);
    let bubbles = loaded.bubbles(&activity, &ranks, &rules)?;
    let works = loaded.work(&activity, &processes, (&found, &comm), &rules, &families)?;
    let mut sums: BTreeMap<String, f64> = BTreeMap::new();
    let mut add = |metric: String, v: f64| *sums.entry(metric).or_default() += v;
    let mut mfus: Vec<f64> = Vec::new();
    let each =
        (windows.iter().zip(&found).zip(&streams)).zip(kernels.iter().zip(bubbles).zip(works));
    for (((w, found), streams), ((k, bubbles), work)) in each {
        let window_ns = w.bounds.1.saturating_sub(w.bounds.0).max(1) as f64;
        let steps = &found.measured;
        let n = steps.len() as f64;
        let step = k.span_ns as f64 / n;
        add("step_ns".into(), step);
        add("kernel_ns per step".into(), k.kernel_ns as f64 / n);
        add("idle_ns per step".into(), k.idle_ns as f64 / n);
        add(
            "concurrency_excess_ns per step".into(),
            k.concurrency_excess_ns as f64 / n,
        );
        add(
            "step_minus_kernel_ns per step".into(),
            k.step_minus_kernel_ns() as f64 / n,
        );
        for f in &k.families {
            add(
                format!("family {} ns per step", f.family),
                f.time_ns as f64 / n,
            );
            let share = 100.0 * f.time_ns as f64 / k.span_ns.max(1) as f64;
            add(format!("family {} share_of_step_pct", f.family), share);
        }
        for ((stage, role), e) in rank_exposure(streams, &rules) {
            if stage == StageKey::All {
                let role = role.label();
                add(format!("exposed_comm_ns {role}"), e.exposed_wall_ns as f64);
                let share = 100.0 * e.exposed_wall_ns as f64 / window_ns;
                add(format!("exposed_comm_pct {role}"), share);
            }
        }
        let mean = bubbles.iter().map(|b| b.bubble_pct()).sum::<f64>() / n;
        add("bubble_pct".into(), mean);
        mfus.extend(mfu::mean_mfu(timeline, &w.rank, steps, &work));
    }
    let ranks = ranks.len() as f64;
    let mut metrics: BTreeMap<String, f64> =
        sums.into_iter().map(|(k, v)| (k, v / ranks)).collect();
    if !mfus.is_empty() {
        let mean = mfus.iter().sum::<f64>() / mfus.len() as f64;
        metrics.insert("mfu_pct".into(), mean);
    }
    Ok(metrics)
}
