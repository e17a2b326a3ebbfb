//! The steady-state window of a rank: the median instance of an anchor NVTX range (DESIGN.md,
//! CLI contract), its CPU extent and its projection onto the GPU.

use super::activity::Activity;
use crate::model::{Ns, ProcessId};
use regex::Regex;
use std::sync::LazyLock;

/// PithTrain's overlapped forward+backward chunk, as its `LIKE 'forward chunk%backward chunk%'`.
pub const PITHTRAIN_CHUNK: &str = r"(?i)^forward chunk.*backward chunk";
/// PyTorch profiler steps.
pub const PROFILER_STEP: &str = r"^ProfilerStep#\d+$";
/// JAX's `StepTraceAnnotation(name, step_num=N)`, which the translation names `name#N`.
pub const ANNOTATED_STEP: &str = r"^[^#\s]+#\d+$";

/// The default anchors, in the order they are tried.
static DEFAULT_ANCHORS: LazyLock<[Regex; 3]> = LazyLock::new(|| {
    [PITHTRAIN_CHUNK, PROFILER_STEP, ANNOTATED_STEP].map(|p| Regex::new(p).expect("valid regex"))
});

/// Which window the analyses use.
#[derive(Debug, Clone, Default)]
pub enum WindowSpec {
    /// The median instance of the default anchor on each rank (PithTrain's overlapped chunk,
    /// else `ProfilerStep#N`, else JAX's annotated steps `name#N`); the whole capture where
    /// the rank has none.
    #[default]
    Steady,
    /// The median instance of ranges matching this pattern.
    Anchor(Regex),
    /// The same bounds for every rank, on the merged clock.
    Explicit {
        /// Start, ns.
        start: Ns,
        /// End, ns.
        end: Ns,
    },
    /// The whole capture.
    Whole,
}

/// How a rank's window was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowSource {
    /// The median of `instances` anchor ranges.
    Anchor {
        /// Anchor ranges found on the rank.
        instances: usize,
    },
    /// Bounds given on the command line.
    Explicit,
    /// The whole capture, asked for.
    Whole,
    /// The whole capture, because the rank has no anchor range.
    NoAnchor,
}

/// One rank's window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// CPU start, ns on the merged clock.
    pub start: Ns,
    /// CPU end.
    pub end: Ns,
    /// First start and last end of the GPU work launched inside `[start, end]` (any thread of
    /// the process), when there is any.
    pub gpu: Option<(Ns, Ns)>,
    /// The anchor range's text (empty unless chosen from an anchor).
    pub name: String,
    /// How it was chosen.
    pub source: WindowSource,
}

impl Window {
    /// The interval analyses clip to: the CPU extent, or the GPU projection when `gpu` asks for
    /// it or when the anchor range only dispatches its work ([`Window::dispatch_only`]); the
    /// CPU extent when nothing was launched inside it.
    pub fn bounds(&self, gpu: bool) -> (i64, i64) {
        match (gpu || self.dispatch_only(), self.gpu) {
            (true, Some((s, e))) => (s.0, e.0),
            _ => (self.start.0, self.end.0),
        }
    }

    /// Whether the anchor range holds less than half of the GPU work it launched: a step
    /// dispatched asynchronously (JAX's `StepTraceAnnotation` around a jitted call returns
    /// once the work is queued), whose GPU projection is the step.
    pub fn dispatch_only(&self) -> bool {
        let Some((gs, ge)) = self.gpu else {
            return false;
        };
        let anchored = matches!(self.source, WindowSource::Anchor { .. });
        anchored && dispatches_only((self.start.0, self.end.0), (gs.0, ge.0))
    }
}

/// Whether the range `(start, end)` holds less than half of `gpu`, the GPU projection of the
/// work launched inside it: it only dispatches that work.
fn dispatches_only((start, end): (i64, i64), (gs, ge): (i64, i64)) -> bool {
    let held = end.min(ge) - start.max(gs);
    2 * held.max(0) < ge - gs
}

/// The steps as measured: a step whose range only dispatches its work (JAX's
/// `StepTraceAnnotation` returns once a jitted step is queued) is its GPU projection, any
/// other its range. `gpu` gives each step's projection ([`projections`], or from a pass over
/// captures).
pub fn measured_steps(steps: &[(i64, i64)], gpu: &[Option<(i64, i64)>]) -> Vec<(i64, i64)> {
    steps
        .iter()
        .zip(gpu)
        .map(|(&step, &gpu)| match gpu {
            Some(gpu) if dispatches_only(step, gpu) => gpu,
            _ => step,
        })
        .collect()
}

/// A process's steps: their ranges (NVTX, on the CPU), which own the work launched inside
/// them, and how long each lasts as measured ([`measured_steps`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MeasuredSteps {
    /// The step ranges, in order.
    pub ranges: Vec<(i64, i64)>,
    /// Each step as measured: its range, or its GPU projection when it only dispatches.
    pub measured: Vec<(i64, i64)>,
}

impl MeasuredSteps {
    /// The step ranges of a process inside `window` ([`steps`]; none when it holds none),
    /// measured with projections from a whole timeline.
    pub fn in_window(
        activity: &Activity,
        process: ProcessId,
        window: (i64, i64),
        anchor: Option<&Regex>,
    ) -> MeasuredSteps {
        let ranges = steps(activity, process, window, anchor);
        let measured = measured_steps(&ranges, &projections(activity, process, &ranges));
        MeasuredSteps { ranges, measured }
    }

    /// These steps, or the window itself as one step when there are none.
    pub fn or_window(self, window: (i64, i64)) -> MeasuredSteps {
        match self.ranges.is_empty() {
            true => MeasuredSteps {
                ranges: vec![window],
                measured: vec![window],
            },
            false => self,
        }
    }
}

/// The GPU projection of each of a process's ranges ([`Window::gpu`]'s, from a whole timeline),
/// in one pass over its operations.
pub fn projections(
    activity: &Activity,
    process: ProcessId,
    ranges: &[(i64, i64)],
) -> Vec<Option<(i64, i64)>> {
    let extents: Vec<(ProcessId, (i64, i64))> = ranges.iter().map(|&r| (process, r)).collect();
    let holding = Holding::new(activity.timeline.processes.len(), &extents);
    let mut projected: Vec<Option<(i64, i64)>> = vec![None; ranges.len()];
    for (_, start, end, correlation) in activity.operations(process) {
        let Some(launch) = activity.launch(process, correlation) else {
            continue;
        };
        holding.each(process, launch.0, |i| {
            widen(&mut projected[i], (start.0, end.0))
        });
    }
    projected
}

/// Widens a projection (first start, last end) to hold an operation's `(start, end)`.
pub fn widen(projection: &mut Option<(i64, i64)>, (start, end): (i64, i64)) {
    let p = projection.get_or_insert((start, end));
    *p = (p.0.min(start), p.1.max(end));
}

/// Each process's ranges (steps, windows) sorted by start, to find those holding a time in a
/// binary search.
pub struct Holding {
    /// Per process: (start, end, position in the ranges given), by start.
    sorted: Vec<Vec<(i64, i64, usize)>>,
    /// Per process, per sorted range: the latest end of it and those before it.
    reach: Vec<Vec<i64>>,
}

impl Holding {
    /// The ranges (process, (start, end)) of a timeline of `processes` processes.
    pub fn new(processes: usize, ranges: &[(ProcessId, (i64, i64))]) -> Holding {
        let mut sorted = vec![Vec::new(); processes];
        for (i, &(process, (start, end))) in ranges.iter().enumerate() {
            sorted[process.index()].push((start, end, i));
        }
        for list in &mut sorted {
            list.sort_unstable();
        }
        let reach = (sorted.iter())
            .map(|list| {
                let ends = list.iter().scan(i64::MIN, |reach, &(_, end, _)| {
                    *reach = (*reach).max(end);
                    Some(*reach)
                });
                ends.collect()
            })
            .collect();
        Holding { sorted, reach }
    }

    /// Calls `f` with the position of each range of `process` holding `t` (ends included).
    pub fn each(&self, process: ProcessId, t: i64, mut f: impl FnMut(usize)) {
        let (list, reach) = (&self.sorted[process.index()], &self.reach[process.index()]);
        let after = list.partition_point(|&(start, ..)| start <= t);
        for j in (0..after).rev().take_while(|&j| reach[j] >= t) {
            if list[j].1 >= t {
                f(list[j].2);
            }
        }
    }

    /// Whether a range of `process` holds `t`.
    pub fn any(&self, process: ProcessId, t: i64) -> bool {
        let mut found = false;
        self.each(process, t, |_| found = true);
        found
    }
}

/// The window of one process under `spec`.
pub fn find(activity: &Activity, process: ProcessId, spec: &WindowSpec) -> Window {
    let (start, end, name, source) = match spec {
        WindowSpec::Explicit { start, end } => {
            (*start, *end, String::new(), WindowSource::Explicit)
        }
        WindowSpec::Whole => whole(activity, process),
        WindowSpec::Anchor(pattern) => median(activity, process, std::slice::from_ref(pattern))
            .unwrap_or_else(|| no_anchor(activity, process)),
        WindowSpec::Steady => DEFAULT_ANCHORS
            .iter()
            .find_map(|p| median(activity, process, std::slice::from_ref(p)))
            .unwrap_or_else(|| no_anchor(activity, process)),
    };
    Window {
        start,
        end,
        gpu: projections(activity, process, &[(start.0, end.0)])[0].map(|(s, e)| (Ns(s), Ns(e))),
        name,
        source,
    }
}

type Chosen = (Ns, Ns, String, WindowSource);

/// The median closed range (index n/2 in start order) whose text matches one of `patterns`.
fn median(activity: &Activity, process: ProcessId, patterns: &[Regex]) -> Option<Chosen> {
    let timeline = activity.timeline;
    let instances: Vec<_> = activity
        .nvtx(process)
        .filter(|e| e.kind.is_range() && e.end.is_some())
        .filter(|e| patterns.iter().any(|p| p.is_match(timeline.text(e.text))))
        .collect();
    let chosen = instances.get(instances.len() / 2)?;
    Some((
        chosen.start,
        chosen.end?,
        timeline.text(chosen.text).to_string(),
        WindowSource::Anchor {
            instances: instances.len(),
        },
    ))
}

/// The report's whole capture: from its first event, or its session start when events began
/// before it (a window never starts before the capture did).
fn whole(activity: &Activity, process: ProcessId) -> Chosen {
    let (start, end) = span(activity, process);
    let timeline = activity.timeline;
    let capture = timeline
        .report(timeline.process(process).report)
        .capture_start();
    let start = capture.map_or(start, |capture| start.max(capture).min(end));
    (start, end, String::new(), WindowSource::Whole)
}

/// The first start and last end of the events of `process`'s report, those before its session
/// start too (what a trace of the whole capture draws).
pub fn span(activity: &Activity, process: ProcessId) -> (Ns, Ns) {
    let timeline = activity.timeline;
    let report = timeline.report(timeline.process(process).report);
    report.span.unwrap_or_default()
}

/// The whole capture, for want of an anchor range.
fn no_anchor(activity: &Activity, process: ProcessId) -> Chosen {
    let (start, end, name, _) = whole(activity, process);
    (start, end, name, WindowSource::NoAnchor)
}

/// The step ranges of a process inside `window` (`[start, end]`, wholly inside), in order:
/// closed NVTX ranges matching `anchor` when given, else `ProfilerStep#N`, else the PithTrain
/// rank label (which spans the profiled step).
pub fn steps(
    activity: &Activity,
    process: ProcessId,
    (ws, we): (i64, i64),
    anchor: Option<&Regex>,
) -> Vec<(i64, i64)> {
    let timeline = activity.timeline;
    let closed = || {
        activity
            .nvtx(process)
            .filter(|e| e.kind.is_range())
            .filter_map(|e| Some((e.start.0, e.end?.0, timeline.text(e.text))))
            .filter(|&(s, e, _)| ws <= s && e <= we)
    };
    let matching = |test: &dyn Fn(&str) -> bool| -> Vec<(i64, i64)> {
        let mut spans: Vec<(i64, i64)> = closed()
            .filter(|(_, _, text)| test(text))
            .map(|(s, e, _)| (s, e))
            .collect();
        spans.dedup();
        spans
    };
    if let Some(anchor) = anchor {
        return matching(&|t| anchor.is_match(t));
    }
    for steps in &DEFAULT_ANCHORS[1..] {
        let found = matching(&|t| steps.is_match(t));
        if !found.is_empty() {
            return found;
        }
    }
    matching(&|t| super::RankLabel::parse(t).is_some())
}

/// The `n` distinct NVTX range names of `processes` closest to `pattern` (by edit distance on
/// lowercase text, ties in name order): what to suggest when an anchor matches nothing.
pub fn closest_ranges(
    activity: &Activity,
    processes: &[ProcessId],
    pattern: &str,
    n: usize,
) -> Vec<String> {
    let timeline = activity.timeline;
    let mut names: Vec<&str> = processes
        .iter()
        .flat_map(|&p| activity.nvtx(p))
        .filter(|e| e.kind.is_range())
        .map(|e| timeline.text(e.text))
        .collect();
    names.sort_unstable();
    names.dedup();
    let wanted: Vec<char> = pattern.to_lowercase().chars().take(80).collect();
    let mut scored: Vec<(usize, &str)> = names
        .into_iter()
        .map(|name| {
            let text: Vec<char> = name.to_lowercase().chars().take(80).collect();
            (edit_distance(&wanted, &text), name)
        })
        .collect();
    scored.sort_unstable();
    scored
        .into_iter()
        .take(n)
        .map(|(_, name)| name.to_string())
        .collect()
}

/// Levenshtein distance.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != cb))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::{Holding, edit_distance, measured_steps};
    use crate::model::ProcessId;

    #[test]
    fn holding_finds_every_range_holding_a_time_overlapping_or_not() {
        let (p, q) = (ProcessId(0), ProcessId(1));
        let ranges = [(p, (30, 40)), (p, (0, 10)), (p, (5, 20)), (q, (0, 100))];
        let holding = Holding::new(2, &ranges);
        let found = |t: i64| {
            let mut found = Vec::new();
            holding.each(p, t, |i| found.push(i));
            found.sort();
            found
        };
        assert_eq!(found(7), [1, 2]);
        assert_eq!(found(10), [1, 2], "ends are held");
        assert_eq!(found(20), [2]);
        assert_eq!(found(25), [] as [usize; 0]);
        assert_eq!(found(30), [0]);
        assert_eq!(found(-1), [] as [usize; 0]);
        assert!(holding.any(q, 50) && !holding.any(q, 101));
    }

    #[test]
    fn a_step_is_its_projection_only_when_it_holds_less_than_half_of_it() {
        let steps = [(0, 100), (0, 100), (0, 100)];
        // Held: 80 of 130 (kept); 40 of 100 (projected); no projection (kept).
        let gpu = [Some((20, 150)), Some((60, 160)), None];
        assert_eq!(
            measured_steps(&steps, &gpu),
            [(0, 100), (60, 160), (0, 100)]
        );
    }

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions() {
        let d = |a: &str, b: &str| {
            let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
            edit_distance(&a, &b)
        };
        assert_eq!(d("kitten", "sitting"), 3);
        assert_eq!(d("profilerstp", "profilerstep#0"), 3);
        assert_eq!(d("", "abc"), 3);
        assert_eq!(d("same", "same"), 0);
    }
}
