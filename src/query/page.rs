//! The HTML report's numbers: each run's ranks (their time bar, overlap, kernel families and
//! bubble) and the timeline strip, computed by the same analyses as the commands. The CLI's
//! `report` loads the runs and writes [`crate::report::html::page`] of these views.

use super::captured::{PageMeasures, Span};
use super::{Loaded, Selection};
use crate::analysis::IntervalSet;
use crate::analysis::align::Alignment;
use crate::analysis::bubbles::{StepBubble, ideal_pct, micro_batches};
use crate::analysis::collectives::{Instance, RankWaits, WHOLE, by_rank, match_classified};
use crate::analysis::kernels::RankKernels;
use crate::analysis::mfu::RankWork;
use crate::analysis::overlap::rank_exposure;
use crate::analysis::upper_median;
use crate::classify::families::Families;
use crate::classify::layout;
use crate::classify::window::MeasuredSteps;
use crate::classify::{Activity, Rank, RankStreams, Role, RoleRules, WindowSource};
use crate::model::{StreamId, Timeline};
use crate::report::RankWindow;
use crate::report::html::{
    CollectivesView, CommunicatorSkew, MANY_RANKS, RankView, RunView, Segment, StripRow,
};
use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;

/// One run's view, titled `title`: every rank over its window under `selection`, with how its
/// clocks were put together (`alignment`, when aligned from its collectives). From captures,
/// every measure comes from passes over their sorted events. The critical path's part (a graph
/// of every operation, replayed for each fix weighed) is made on a thread of its own beside the
/// ranks' views.
pub fn run_view<'a>(
    loaded: impl Into<Loaded<'a>>,
    alignment: Option<&Alignment>,
    selection: &Selection,
    title: String,
) -> anyhow::Result<RunView> {
    let loaded = loaded.into();
    let timeline = loaded.timeline();
    let activity = Activity::new(timeline);
    let windows = selection.windows_in(loaded, &activity)?;
    let (critical, ranks) = std::thread::scope(|scope| {
        let critical = scope.spawn(|| super::critical::page_views(loaded, &windows, selection));
        let ranks = RanksPart::new(loaded, &activity, &windows, &selection.rules);
        (critical.join(), ranks)
    });
    let (paths, fixes) = critical.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    let RanksPart {
        views,
        collectives,
        strip: (strip, strip_ns),
    } = ranks?;
    let mut summary = vec![
        hosts_line(timeline),
        format!("{} rank(s); each measured over its own window", views.len()),
    ];
    summary.push(match alignment {
        Some(a) => format!(
            "clocks aligned from {} collective(s); end spread {} ns before, {} ns after",
            a.instances, a.spread_before_ns, a.spread_after_ns
        ),
        None => "clocks: session starts (use --align collectives to correct them)".to_string(),
    });
    Ok(RunView {
        title,
        summary,
        ranks: views,
        strip,
        strip_ns,
        paths,
        fixes,
        collectives,
    })
}

/// What the page shows of the ranks: each rank's view, the collectives, the timeline strip
/// (its rows and its length, ns).
struct RanksPart {
    views: Vec<RankView>,
    collectives: CollectivesView,
    strip: (Vec<StripRow>, i64),
}

impl RanksPart {
    /// The ranks of `windows` (in `activity`, of what was loaded), each over its window.
    fn new(
        loaded: Loaded,
        activity: &Activity,
        windows: &[RankWindow],
        rules: &RoleRules,
    ) -> anyhow::Result<RanksPart> {
        let ranks: Vec<Rank> = windows.iter().map(|w| w.rank).collect();
        let Streams {
            windows: streams,
            transfers,
            whole,
        } = Streams::classify(loaded, activity, windows, rules)?;
        let transfers = (transfers.iter())
            .map(|s| layout::transfers(s, rules))
            .collect();
        let Ok(pipeline) = layout::pipeline_layout(&ranks, || Ok::<_, Infallible>(transfers));
        let (collectives, waits) = collectives_view(activity, (windows, &whole), rules);
        let measured = measure(loaded, activity, (windows, &streams), rules)?;
        let mut views = Vec::new();
        for ((((w, streams), coord), waits), measured) in (windows
            .iter()
            .zip(&streams)
            .zip(&pipeline.coords)
            .zip(waits))
        .zip(measured)
        {
            let pp = coord.map(|(c, _)| c.size);
            let mut view = rank_view(activity, (w, streams, pp), measured, rules);
            (view.waits, view.instance_waits) = waits;
            views.push(view);
        }
        Ok(RanksPart {
            views,
            collectives,
            strip: strip(loaded, activity, (windows, &streams), rules)?,
        })
    }
}

/// Each rank's streams over the spans the page reads, classified in one pass: its window, its
/// transfer window (for the pipeline layout, when some rank has no label) and the whole capture
/// (for matching collectives).
struct Streams {
    /// Each rank's streams over its window.
    windows: Vec<RankStreams>,
    /// Each rank's streams over its transfer window ([`layout::transfer_window`]); none when
    /// every rank has a label.
    transfers: Vec<RankStreams>,
    /// Each rank's streams over the whole capture.
    whole: Vec<RankStreams>,
}

impl Streams {
    /// The streams of each rank of `windows`.
    fn classify(
        loaded: Loaded,
        activity: &Activity,
        windows: &[RankWindow],
        rules: &RoleRules,
    ) -> crate::nsys::Result<Streams> {
        let mut spans: Vec<Span> = windows.iter().map(|w| (w.rank.process, w.bounds)).collect();
        if windows.iter().any(|w| w.rank.label.is_none()) {
            let transfer = |w: &RankWindow| layout::transfer_window(activity, &w.rank);
            spans.extend(windows.iter().map(|w| (w.rank.process, transfer(w))));
        }
        spans.extend(windows.iter().map(|w| (w.rank.process, WHOLE)));
        let mut streams = loaded.classify(activity, &spans, rules)?;
        let whole = streams.split_off(streams.len() - windows.len());
        let transfers = streams.split_off(windows.len());
        Ok(Streams {
            windows: streams,
            transfers,
            whole,
        })
    }
}

/// What a rank's view shows besides its streams: its steps, kernel families, bubble per step
/// and work (for the MFU).
struct Measured {
    found: MeasuredSteps,
    kernels: RankKernels,
    bubbles: Vec<StepBubble>,
    work: RankWork,
}

/// Each rank's [`Measured`] over its window of `windows`, its streams over it `streams`.
fn measure(
    loaded: Loaded,
    activity: &Activity,
    (windows, streams): (&[RankWindow], &[RankStreams]),
    rules: &RoleRules,
) -> anyhow::Result<Vec<Measured>> {
    let found = loaded.measured_steps(activity, windows.iter(), None)?;
    let spans: Vec<Span> = windows.iter().map(|w| (w.rank.process, w.bounds)).collect();
    let steps: Vec<MeasuredSteps> = (found.iter().zip(&spans))
        .map(|(f, &(_, bounds))| f.clone().or_window(bounds))
        .collect();
    let families = Families::default();
    let PageMeasures {
        kernels,
        bubbles,
        work,
    } = loaded.page_measures(activity, &spans, (streams, &steps), rules, &families)?;
    Ok((found.into_iter().zip(kernels).zip(bubbles).zip(work))
        .map(|(((found, kernels), bubbles), work)| Measured {
            found,
            kernels,
            bubbles,
            work,
        })
        .collect())
}

/// A rank's part in the collectives: its totals, and its wait in each heatmap column.
type RankCollectives = (RankWaits, Vec<Option<f64>>);

/// Columns of the wait heatmap: instances of largest skew, at most.
fn wait_columns(ranks: usize) -> usize {
    if ranks > MANY_RANKS { 8 } else { 24 }
}

/// The collectives matched across the ranks of `windows` (their streams classified over the
/// whole capture, `whole`), those inside every member's window (as `collectives` keeps them),
/// and per rank its totals (as `collectives --by rank` gives them) and its waits in the
/// instances of largest skew.
fn collectives_view(
    activity: &Activity,
    (windows, whole): (&[RankWindow], &[RankStreams]),
    rules: &RoleRules,
) -> (CollectivesView, Vec<RankCollectives>) {
    let processes: Vec<_> = windows.iter().map(|w| w.rank.process).collect();
    let matched = match_classified(activity, &processes, rules, whole);
    let inside: Vec<&Instance> = (matched.instances.iter())
        .filter(|i| i.within(|rank| windows[rank].bounds))
        .collect();
    let mut skews: Vec<i64> = inside.iter().map(|i| i.skew()).collect();
    let communicators: BTreeSet<usize> = inside.iter().map(|i| i.communicator).collect();
    let mut widest: Vec<&Instance> = inside.clone();
    widest.sort_by_key(|i| std::cmp::Reverse(i.skew()));
    widest.truncate(wait_columns(windows.len()));
    widest.sort_by_key(|i| (i.first_last().0.start, i.communicator));
    let communicator_skews = (communicators.iter())
        .map(|&n| {
            let c = &matched.communicators[n];
            let mut skews: Vec<i64> = (inside.iter())
                .filter(|i| i.communicator == n)
                .map(|i| i.skew())
                .collect();
            let median = upper_median(&mut skews).unwrap_or(0);
            CommunicatorSkew {
                name: format!("c{n}"),
                op: c.op.clone(),
                members: c.members.iter().map(|&m| windows[m].rank.rank).collect(),
                instances: skews.len(),
                skew: (median, skews.last().copied().unwrap_or(0)),
            }
        })
        .collect();
    let view = CollectivesView {
        instances: inside.len(),
        communicators: communicators.len(),
        communicator_skews,
        skew: upper_median(&mut skews).zip(skews.iter().max().copied()),
        columns: (widest.iter())
            .map(|i| format!("c{} #{}", i.communicator, i.sequence))
            .collect(),
    };
    let waits = by_rank(processes.len(), &inside).into_iter().enumerate();
    let per_rank = waits
        .map(|(rank, totals)| (totals, widest.iter().map(|i| wait_share(i, rank)).collect()))
        .collect();
    (view, per_rank)
}

/// Member `rank`'s wait in an instance as a share of its skew, %, when it took part.
fn wait_share(instance: &Instance, rank: usize) -> Option<f64> {
    let (_, last) = instance.first_last();
    let arrival = instance.arrivals.iter().find(|a| a.rank == rank)?;
    let skew = instance.skew().max(1) as f64;
    Some(100.0 * (last.start - arrival.start) as f64 / skew)
}

/// `2 host(s): node0, node1`, the list cut after a few hosts.
fn hosts_line(timeline: &Timeline) -> String {
    const SHOWN: usize = 8;
    let names: Vec<&str> = timeline.hosts.iter().map(|h| h.name.as_str()).collect();
    let more = names.len().saturating_sub(SHOWN);
    let mut line = format!(
        "{} host(s): {}",
        names.len(),
        names[..names.len().min(SHOWN)].join(", ")
    );
    if more > 0 {
        line += &format!(" and {more} more");
    }
    line
}

/// How a rank's window was chosen, in words: the anchor range's name, or why there is none.
fn window_name(w: &RankWindow) -> String {
    if !w.window.name.is_empty() {
        return format!("`{}`", w.window.name);
    }
    match w.window.source {
        WindowSource::Anchor { .. } => "the median anchor range",
        WindowSource::Explicit => "as given",
        WindowSource::Whole => "the whole capture",
        WindowSource::NoAnchor => "the whole capture: no step range to take the median of",
    }
    .to_string()
}

/// A rank's bar, overlap rows, families and bubble.
fn rank_view(
    activity: &Activity,
    (w, streams, pp): (&RankWindow, &RankStreams, Option<u32>),
    measured: Measured,
    rules: &RoleRules,
) -> RankView {
    let timeline = activity.timeline;
    let process = timeline.process(w.rank.process);
    let name = format!(
        "rank {} · node {} · pid {}",
        w.rank.rank,
        timeline.host(process.host).name,
        process.pid
    );
    let (bar, hidden_ns) = bar(w, streams, rules);
    let overlap = rank_exposure(streams, rules)
        .into_iter()
        .map(|((stage, role), e)| {
            let role = role.label();
            (
                stage.to_string(),
                role,
                e.comm_ns,
                e.exposed_wall_ns,
                e.overlap_pct,
            )
        })
        .collect();
    let Measured {
        found,
        kernels,
        bubbles,
        work,
    } = measured;
    // 1F1B's ideal describes whole steps of a one-directional schedule (not PithTrain's
    // DualPipeV, whose ranks carry the label), as in `bubbles`.
    let formula_applies = !found.ranges.is_empty() && w.rank.label.is_none();
    let found = found.or_window(w.bounds);
    let (ranges, steps) = (found.ranges, found.measured);
    let n = steps.len() as i64;
    let families = kernels
        .families
        .iter()
        .map(|f| (f.family.clone(), f.time_ns / n))
        .collect();
    let mean = bubbles.iter().map(|b| b.bubble_pct()).sum::<f64>() / bubbles.len().max(1) as f64;
    let ideal = formula_applies
        .then(|| ideal_pct(pp?, micro_batches(activity, w.rank.process, ranges[0])?))
        .flatten();
    let flops: f64 = work
        .steps
        .iter()
        .flat_map(|f| f.values())
        .map(|f| f.flops)
        .sum();
    let flops_by_family = super::mfu::family_summaries(timeline, &w.rank, &steps, &work);
    let mfu = (flops > 0.0).then(|| {
        let mfu = super::mfu::mean_mfu(timeline, &w.rank, &steps, &work);
        (flops / n as f64, mfu)
    });
    RankView {
        name,
        window: (w.bounds.0, w.bounds.1, window_name(w)),
        bar,
        hidden_ns,
        overlap,
        families,
        bubble: Some((mean, ideal)),
        steps: bubbles
            .iter()
            .map(|b| (b.step_ns, b.bubble_pct()))
            .collect(),
        mfu,
        flops_by_family,
        pipeline: pp.is_some(),
        waits: RankWaits::default(),
        instance_waits: Vec::new(),
    }
}

/// Compute, exposed communication per role (each exposed moment counted once, for the first
/// role in name order), barrier communication, and idle; they add up to the window.
fn bar(w: &RankWindow, streams: &RankStreams, rules: &RoleRules) -> (Vec<Segment>, i64) {
    let compute = &streams.compute;
    let mut by_role: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    let mut barrier = Vec::new();
    for k in &streams.comm {
        if k.is_barrier() {
            barrier.push((k.start, k.end));
        } else {
            by_role
                .entry(k.role_name(rules).to_string())
                .or_default()
                .push((k.start, k.end));
        }
    }
    let comm = IntervalSet::from_intervals(by_role.values().flatten().copied());
    let hidden = comm.intersection(compute).measure();
    let mut covered = compute.clone();
    let mut segments = vec![Segment {
        label: "compute".into(),
        key: "compute".into(),
        ns: compute.measure(),
    }];
    for (role, spans) in by_role {
        let set = IntervalSet::from_intervals(spans);
        let exposed = set.difference(&covered).measure();
        covered = covered.union(&set);
        segments.push(Segment {
            label: format!("exposed {role}"),
            key: role,
            ns: exposed,
        });
    }
    let barrier = IntervalSet::from_intervals(barrier);
    segments.push(Segment {
        label: "barrier".into(),
        key: "barrier".into(),
        ns: barrier.difference(&covered).measure(),
    });
    covered = covered.union(&barrier);
    let span = w.bounds.1 - w.bounds.0;
    segments.push(Segment {
        label: "idle".into(),
        key: "idle".into(),
        ns: span - covered.measure(),
    });
    (segments, hidden)
}

/// The ranks the timeline strip draws (indices into `windows`): every rank up to [`MANY_RANKS`],
/// else the first rank of each node (up to as many nodes).
fn strip_ranks(timeline: &Timeline, windows: &[RankWindow]) -> Vec<usize> {
    if windows.len() <= MANY_RANKS {
        return (0..windows.len()).collect();
    }
    let mut hosts = BTreeSet::new();
    (0..windows.len())
        .filter(|&r| hosts.insert(timeline.process(windows[r].rank.process).host))
        .take(MANY_RANKS)
        .collect()
}

/// The streams of the ranks [`strip_ranks`] draws, over their windows.
fn strip(
    loaded: Loaded,
    activity: &Activity,
    (windows, streams): (&[RankWindow], &[RankStreams]),
    rules: &RoleRules,
) -> anyhow::Result<(Vec<StripRow>, i64)> {
    let timeline = activity.timeline;
    let drawn = strip_ranks(timeline, windows);
    let wanted: Vec<(StreamId, (i64, i64))> = (drawn.iter())
        .flat_map(|&r| (streams[r].streams.iter()).map(move |s| (s.stream, windows[r].bounds)))
        .collect();
    let mut spans = loaded.kernel_spans(activity, &wanted)?.into_iter();
    let mut rows = Vec::new();
    let mut longest = 0;
    for r in drawn {
        let w = &windows[r];
        let (start, end) = w.bounds;
        longest = longest.max(end - start);
        for (s, spans) in streams[r].streams.iter().zip(&mut spans) {
            let stream = timeline.stream(s.stream);
            let spans = (spans.into_iter())
                .map(|(s, e)| (s.max(start) - start, e.min(end) - start))
                .collect();
            let role = s.role.name(rules).to_string();
            let key = if s.role == Role::Compute {
                "compute".to_string()
            } else {
                role.clone()
            };
            rows.push(StripRow {
                name: format!(
                    "rank {} · GPU {} · stream {} · {role}",
                    w.rank.rank,
                    timeline.gpu(stream.gpu).device,
                    stream.stream
                ),
                key,
                spans,
            });
        }
    }
    Ok((rows, longest))
}
