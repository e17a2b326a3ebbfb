//! `critical-path` and `what-if`: each step's critical path across ranks, and the step times a
//! replay of the run's dependency graph predicts with changed durations.

use super::{Loaded, NothingFound, Selection, captured, ranks};
use crate::analysis::critical_path::{Names, PathSummary, Steps, step_ranges, walk};
use crate::analysis::graph::{Evidence, Graph};
use crate::analysis::what_if::{Change, Factors};
use crate::classify::families::{Families, FamilyCache};
use crate::classify::{Activity, Rank};
use crate::report::html::{FixView, PathView};
use crate::report::{Cell, Output, RankWindow, Table};
use crate::time::human_duration;

/// A run on its graph: ranks, each rank's step ranges, the graph and its steps.
struct Run<'t> {
    activity: Activity<'t>,
    ranks: Vec<Rank>,
    ranges: Vec<Vec<(i64, i64)>>,
    graph: Graph,
    steps: Steps,
}

impl<'t> Run<'t> {
    /// Every rank of what was loaded (the path crosses them all), its steps inside its window
    /// of `selection` (the window itself when it holds no step range). From captures, the
    /// graph is built in passes over their sorted events ([`captured::graph`]).
    fn new(loaded: Loaded<'t>, selection: &Selection) -> anyhow::Result<Run<'t>> {
        let activity = Activity::new(loaded.timeline());
        let ranks = ranks(&activity)?;
        let windows = selection.window.windows_in(loaded, &activity, &ranks)?;
        Run::over(loaded, activity, &windows, selection)
    }

    /// [`Run::new`] over `windows`, one for every rank of `activity` (what was loaded, indexed).
    fn over(
        loaded: Loaded<'t>,
        activity: Activity<'t>,
        windows: &[RankWindow],
        selection: &Selection,
    ) -> anyhow::Result<Run<'t>> {
        let timeline = loaded.timeline();
        let ranks: Vec<Rank> = windows.iter().map(|w| w.rank).collect();
        let anchor = selection.window.anchor_regex()?;
        let bounds: Vec<_> = windows.iter().map(|w| (w.rank.process, w.bounds)).collect();
        let ranges = step_ranges(&activity, &bounds, anchor.as_ref());
        let families = Families::default();
        let rules = &selection.rules;
        let graph = match loaded {
            Loaded::Whole(_) => {
                let mut cache = FamilyCache::new(&families, timeline);
                Graph::build(&activity, &ranks, rules, &mut cache)
            }
            Loaded::Captures(captures) => {
                captured::graph((captures, &activity), &ranks, rules, &families)?
            }
        };
        if graph.is_empty() {
            return Err(NothingFound("no GPU operation: no critical path".into()).into());
        }
        let steps = Steps::new(&graph, &ranges);
        if steps.bounds.is_empty() {
            return Err(NothingFound("no step common to every rank".into()).into());
        }
        Ok(Run {
            activity,
            ranks,
            ranges,
            graph,
            steps,
        })
    }

    /// What the graph rests on and what it lacks, for the notes.
    fn evidence_notes(&self) -> Vec<String> {
        let Evidence {
            launches,
            host_waits,
            stream_waits,
            waits_on_stream,
            timed_waits,
            collectives,
            transfers,
        } = self.graph.evidence;
        let mut notes = vec![format!(
            "edges: stream order; {launches} launches; {host_waits} host waits; {stream_waits} \
             stream waits from cudaStreamWaitEvent ({waits_on_stream} calls with their stream \
             from synchronization records), {timed_waits} from timing; {collectives} \
             collective instances and {transfers} transfers matched across ranks"
        )];
        if launches == 0 {
            notes.push(
                "no launch is linked to its operation: CPU launch-bound time cannot show \
                 (capture with --trace=cuda)"
                    .into(),
            );
        }
        if stream_waits > 0 && waits_on_stream == 0 {
            notes.push(
                "no cudaStreamWaitEvent call has a synchronization record naming the stream it \
                 made wait, so each counts for every stream (nsys records them with \
                 --trace=cuda; torch.profiler with experimental_config=torch._C._profiler.\
                 _ExperimentalConfig(enable_cuda_sync_events=True))"
                    .into(),
            );
        }
        if self.ranks.len() > 1 && collectives + transfers == 0 {
            notes.push(
                "no collective matched across ranks: the path stays on each rank (see \
                 `collectives` for why)"
                    .into(),
            );
        }
        notes
    }

    /// The rank number of graph rank `r`.
    fn rank(&self, r: u32) -> i64 {
        i64::from(self.ranks[r as usize].rank)
    }

    /// Each step's time a replay with `changes` predicts, ns. The changes apply inside the
    /// steps: what ran before them replays as measured, so the first step starts where it did.
    fn predicted(&self, changes: &[Change]) -> Vec<i64> {
        let inside = self.steps.inside(self.graph.nodes.len());
        let in_step = |i: u32| inside[i as usize];
        let call_in_step = |j: usize| {
            let call = &self.graph.cpu[j];
            let rank = self.graph.caller(call).rank;
            self.steps.at(&self.ranges, rank, call.start).is_some()
        };
        let factors = Factors::new(&self.graph, self.ranks.len(), changes, in_step);
        let scale = |i: u32| if in_step(i) { factors.node(i) } else { 1.0 };
        let cpu_scale = |j: usize| if call_in_step(j) { factors.launch } else { 1.0 };
        let replayed = self.graph.replay(scale, cpu_scale);
        self.steps.durations(&replayed, &self.ranges)
    }

    /// The fixes the report weighs, each a change and what it means: no launch-bound gaps,
    /// no straggler (with several ranks), each communication role free, and the family that
    /// computes longest inside the steps twice as fast.
    fn candidate_fixes(&self) -> Vec<(Change, String)> {
        let mut fixes = vec![(Change::Launch(0.0), "no launch-bound CPU gaps".to_string())];
        if self.ranks.len() > 1 {
            let meaning = "every rank's compute at the median rank's speed";
            fixes.push((Change::StragglerMedian, meaning.to_string()));
        }
        let mut roles = std::collections::BTreeSet::new();
        let mut compute: std::collections::BTreeMap<u16, i64> = Default::default();
        for (i, node) in self.graph.nodes.iter().enumerate() {
            match node.comm {
                true => {
                    roles.insert(node.label);
                }
                false if self.steps.of(i as u32).is_some() => {
                    *compute.entry(node.label).or_default() += node.end - node.start;
                }
                false => {}
            }
        }
        for label in roles {
            let role = self.graph.labels[label as usize].clone();
            let meaning = format!("{role} communication free (all of it hidden)");
            fixes.push((Change::Role(role, 0.0), meaning));
        }
        let longest = compute
            .into_iter()
            .max_by_key(|&(label, ns)| (ns, u16::MAX - label));
        if let Some((label, _)) = longest {
            let family = self.graph.labels[label as usize].clone();
            let meaning = format!("{family} kernels twice as fast");
            fixes.push((Change::Family(family, 0.5), meaning));
        }
        fixes
    }
}

/// `critical-path`: per step, its time, the path's length and what the path was, per rank,
/// category and name, longest first; in JSON, `crossings`: where the path goes from one rank
/// (`from_rank`, whose operation arrived last at `at_ns`) to another (`to_rank`).
pub fn critical_path<'a>(
    loaded: impl Into<Loaded<'a>>,
    selection: &Selection,
) -> anyhow::Result<Output> {
    let mut run = Run::new(loaded.into(), selection)?;
    // Summed as each is walked: a step's stretches (one per operation on its path) are not
    // kept for every step at once.
    let (mut paths, high) = crate::second_core::halves(run.steps.bounds.len(), |steps| {
        let walked = steps.map(|k| walk(&run.graph, &run.steps, k).summary());
        walked.collect::<Vec<PathSummary>>()
    });
    paths.extend(high);
    let texts = Names::new(&run.graph, &run.activity, &run.ranks, &paths).texts(&paths);
    let mut notes = run.evidence_notes();
    let mut crossings = Vec::new();
    for path in &paths {
        for &(left, from) in &path.crossings {
            let graph = &run.graph;
            crossings.push(serde_json::json!({
                "step": path.step,
                "at_ns": graph.nodes[from as usize].start,
                "from_rank": run.rank(graph.lane(from).rank),
                "to_rank": run.rank(graph.lane(left).rank),
            }));
        }
    }
    // The table holds a row per step and part: the graph goes first.
    drop(std::mem::take(&mut run.graph));
    let mut table = Table::new(&[
        "step",
        "step_ns",
        "path_ns",
        "rank",
        "category",
        "name",
        "ns",
        "share_pct",
    ]);
    let wanted = |r: u32| {
        let rank = run.ranks[r as usize].rank;
        selection.ranks.as_ref().is_none_or(|l| l.contains(rank))
    };
    for path in &paths {
        let parts = path.longest_parts();
        for ((r, category, name), ns) in parts.into_iter().filter(|p| wanted(p.0.0)) {
            table.push(vec![
                Cell::Int(path.step as i64),
                Cell::Duration(path.step_ns),
                Cell::Duration(path.path_ns),
                Cell::Int(run.rank(r)),
                Cell::text(category.name()),
                Cell::Text(texts[&name].clone()),
                Cell::Duration(ns),
                Cell::Percent(100.0 * ns as f64 / path.step_ns.max(1) as f64),
            ]);
        }
        let ranks: Vec<String> = path
            .ranks
            .iter()
            .map(|&r| run.rank(r).to_string())
            .collect();
        notes.push(format!(
            "step {}: the path crosses rank(s) {} (from the step's end back)",
            path.step,
            ranks.join(" <- ")
        ));
    }
    Ok(Output {
        table,
        context: serde_json::Map::from_iter([(
            "crossings".to_string(),
            serde_json::Value::Array(crossings),
        )]),
        heading: vec![format!(
            "{} step(s) of {} rank(s): each step from the previous one's end to the end of \
             its last GPU operation on any rank; the path walks back from there (see \
             docs/critical-path.md)",
            paths.len(),
            run.ranks.len()
        )],
        notes,
    })
}

/// Parts of a step shown on the report's page.
const PAGE_PARTS: usize = 6;

/// Fixes shown on the report's page.
const PAGE_FIXES: usize = 3;

/// The report's view of the critical path: the median and the longest step (one when they are
/// the same), each with its longest parts, and the fixes that would shorten the steps most
/// (no launch-bound gaps, no straggler, each communication role free, the longest family
/// twice as fast); none when the run has no path. `windows` holds one window for every rank of
/// what was loaded.
pub fn page_views(
    loaded: Loaded,
    windows: &[RankWindow],
    selection: &Selection,
) -> (Vec<PathView>, Vec<FixView>) {
    let activity = Activity::new(loaded.timeline());
    let Ok(run) = Run::over(loaded, activity, windows, selection) else {
        return (Vec::new(), Vec::new());
    };
    (path_views(&run), fix_views(&run))
}

/// The fixes of largest gain, best first; none that gains nothing.
fn fix_views(run: &Run) -> Vec<FixView> {
    let measured: i64 = run.steps.bounds.iter().map(|b| b.1 - b.0).sum();
    let mut fixes: Vec<FixView> = (run.candidate_fixes().into_iter())
        .map(|(change, meaning)| FixView {
            predicted_ns: run.predicted(std::slice::from_ref(&change)).iter().sum(),
            change: change.to_string(),
            meaning,
            measured_ns: measured,
        })
        .filter(|f| f.predicted_ns < f.measured_ns)
        .collect();
    fixes.sort_by(|a, b| {
        a.predicted_ns
            .cmp(&b.predicted_ns)
            .then(a.change.cmp(&b.change))
    });
    fixes.truncate(PAGE_FIXES);
    fixes
}

/// The median and the longest step's paths.
fn path_views(run: &Run) -> Vec<PathView> {
    let mut order: Vec<usize> = (0..run.steps.bounds.len()).collect();
    order.sort_by_key(|&k| (run.steps.bounds[k].1 - run.steps.bounds[k].0, k));
    let (median, longest) = (order[order.len() / 2], order[order.len() - 1]);
    let mut shown = vec![(median, "median")];
    if longest != median {
        shown.push((longest, "longest"));
    }
    let paths: Vec<PathSummary> = shown
        .iter()
        .map(|&(k, _)| walk(&run.graph, &run.steps, k).summary())
        .collect();
    let names = Names::new(&run.graph, &run.activity, &run.ranks, &paths);
    paths
        .iter()
        .zip(shown)
        .map(|(path, (k, which))| {
            let parts = path.longest_parts();
            PathView {
                title: format!("step {k} ({which})"),
                step_ns: path.step_ns,
                ranks: path.ranks.iter().map(|&r| run.rank(r) as u32).collect(),
                parts: parts
                    .into_iter()
                    .take(PAGE_PARTS)
                    .map(|((r, category, name), ns)| {
                        let rank = run.rank(r) as u32;
                        (rank, category.name().to_string(), names.text(name), ns)
                    })
                    .collect(),
            }
        })
        .collect()
}

/// `what-if`: each step's measured time beside the time a replay with `changes` predicts.
pub fn what_if<'a>(
    loaded: impl Into<Loaded<'a>>,
    selection: &Selection,
    changes: &[Change],
) -> anyhow::Result<Output> {
    let run = Run::new(loaded.into(), selection)?;
    let predicted = run.predicted(changes);
    let mut table = Table::new(&["step", "measured_ns", "predicted_ns", "change_pct"]);
    let (mut measured_sum, mut predicted_sum) = (0i64, 0i64);
    for (k, (&bounds, &predicted)) in run.steps.bounds.iter().zip(&predicted).enumerate() {
        let measured = bounds.1 - bounds.0;
        measured_sum += measured;
        predicted_sum += predicted;
        table.push(vec![
            Cell::Int(k as i64),
            Cell::Duration(measured),
            Cell::Duration(predicted),
            Cell::Percent(change_pct(measured, predicted)),
        ]);
    }
    let mut notes = vec![format!(
        "all steps: measured {}, predicted {} ({:+.1} %)",
        human_duration(measured_sum),
        human_duration(predicted_sum),
        change_pct(measured_sum, predicted_sum)
    )];
    notes.extend(run.evidence_notes());
    Ok(Output {
        table,
        heading: vec![
            format!(
                "changes: {}",
                changes
                    .iter()
                    .map(Change::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "model: operations keep their order and dependencies; an operation starts at \
             the latest of its constraints, each with its measured lag; a transfer keeps its \
             duration once all members arrived; CPU gaps between a rank's calls scale with \
             launch=F; host waits end when what they waited for ends"
                .into(),
        ],
        notes,
        ..Output::default()
    })
}

fn change_pct(measured: i64, predicted: i64) -> f64 {
    100.0 * (predicted - measured) as f64 / measured.max(1) as f64
}
