//! The HTML report's numbers: each run's ranks (their time bar, overlap, kernel families and
//! bubble) and the timeline strip, computed by the same analyses as the commands. The CLI's
//! `report` loads the runs and writes [`crate::report::html::page`] of these views.

use super::Selection;
use crate::analysis::IntervalSet;
use crate::analysis::align::Alignment;
use crate::analysis::bubbles::{ideal_pct, micro_batches, rank_bubbles};
use crate::analysis::collectives::{Instance, RankWaits, by_rank, match_instances};
use crate::analysis::kernels::rank_kernels;
use crate::analysis::mfu::rank_work;
use crate::analysis::overlap::rank_exposure;
use crate::analysis::upper_median;
use crate::classify::families::{Families, FamilyCache};
use crate::classify::window::MeasuredSteps;
use crate::classify::{Activity, Rank, RankStreams, Role, RoleRules, WindowSource, layout};
use crate::model::Timeline;
use crate::report::RankWindow;
use crate::report::html::{
    CollectivesView, CommunicatorSkew, MANY_RANKS, RankView, RunView, Segment, StripRow,
};
use std::collections::{BTreeMap, BTreeSet};

/// One run's view, titled `title`: every rank over its window under `selection`, with how its
/// clocks were put together (`alignment`, when aligned from its collectives).
pub fn run_view(
    timeline: &Timeline,
    alignment: Option<&Alignment>,
    selection: &Selection,
    title: String,
) -> anyhow::Result<RunView> {
    let activity = Activity::new(timeline);
    let rules = &selection.rules;
    let classified = selection.classified(&activity)?;
    let ranks: Vec<Rank> = classified.iter().map(|(w, _)| w.rank).collect();
    let families = Families::default();
    let mut cache = FamilyCache::new(&families, timeline);
    let pipeline = layout::pipeline_coords(&activity, &ranks, rules);
    let (collectives, waits) = collectives_view(&activity, &classified, rules);
    let mut views = Vec::new();
    for (((w, streams), coord), waits) in classified.iter().zip(&pipeline.coords).zip(waits) {
        let pp = coord.map(|(c, _)| c.size);
        let mut view = rank_view(&activity, (w, streams, pp), rules, &mut cache);
        (view.waits, view.instance_waits) = waits;
        views.push(view);
    }
    let mut summary = vec![
        hosts_line(timeline),
        format!("{} rank(s); each measured over its own window", ranks.len()),
    ];
    summary.push(match alignment {
        Some(a) => format!(
            "clocks aligned from {} collective(s); end spread {} ns before, {} ns after",
            a.instances, a.spread_before_ns, a.spread_after_ns
        ),
        None => "clocks: session starts (use --align collectives to correct them)".to_string(),
    });
    let (strip, strip_ns) = strip(timeline, &classified, rules);
    let (paths, fixes) = super::critical::page_views(timeline, selection);
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

/// A rank's part in the collectives: its totals, and its wait in each heatmap column.
type RankCollectives = (RankWaits, Vec<Option<f64>>);

/// Columns of the wait heatmap: instances of largest skew, at most.
fn wait_columns(ranks: usize) -> usize {
    if ranks > MANY_RANKS { 8 } else { 24 }
}

/// The collectives matched across the ranks, those inside every member's window (as
/// `collectives` keeps them), and per rank its totals (as `collectives --by rank` gives them)
/// and its waits in the instances of largest skew.
fn collectives_view(
    activity: &Activity,
    classified: &[(RankWindow, RankStreams)],
    rules: &RoleRules,
) -> (CollectivesView, Vec<RankCollectives>) {
    let processes: Vec<_> = classified.iter().map(|(w, _)| w.rank.process).collect();
    let matched = match_instances(activity, &processes, rules);
    let inside: Vec<&Instance> = (matched.instances.iter())
        .filter(|i| i.within(|rank| classified[rank].0.bounds))
        .collect();
    let mut skews: Vec<i64> = inside.iter().map(|i| i.skew()).collect();
    let communicators: BTreeSet<usize> = inside.iter().map(|i| i.communicator).collect();
    let mut widest: Vec<&Instance> = inside.clone();
    widest.sort_by_key(|i| std::cmp::Reverse(i.skew()));
    widest.truncate(wait_columns(classified.len()));
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
                members: c
                    .members
                    .iter()
                    .map(|&m| classified[m].0.rank.rank)
                    .collect(),
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
    rules: &RoleRules,
    cache: &mut FamilyCache,
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
    let found = MeasuredSteps::in_window(activity, w.rank.process, w.bounds, None);
    // 1F1B's ideal describes whole steps of a one-directional schedule (not PithTrain's
    // DualPipeV, whose ranks carry the label), as in `bubbles`.
    let formula_applies = !found.ranges.is_empty() && w.rank.label.is_none();
    let found = found.or_window(w.bounds);
    let (ranges, steps) = (found.ranges, found.measured);
    let n = steps.len() as i64;
    let at = (w.rank.process, w.bounds);
    let kernels = rank_kernels(activity, at, (streams, rules), cache);
    let families = kernels
        .families
        .iter()
        .map(|f| (f.family.clone(), f.time_ns / n))
        .collect();
    let bubbles = rank_bubbles(activity, w.rank.process, &steps, streams, rules);
    let mean = bubbles.iter().map(|b| b.bubble_pct()).sum::<f64>() / bubbles.len().max(1) as f64;
    let ideal = formula_applies
        .then(|| ideal_pct(pp?, micro_batches(activity, w.rank.process, ranges[0])?))
        .flatten();
    let work = rank_work(activity, (w.rank.process, &ranges), (streams, rules), cache);
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

/// The ranks the timeline strip draws: every rank up to [`MANY_RANKS`], else the first rank of
/// each node (up to as many nodes).
fn strip_ranks<'c>(
    timeline: &Timeline,
    classified: &'c [(RankWindow, RankStreams)],
) -> Vec<&'c (RankWindow, RankStreams)> {
    if classified.len() <= MANY_RANKS {
        return classified.iter().collect();
    }
    let mut hosts = BTreeSet::new();
    classified
        .iter()
        .filter(|(w, _)| hosts.insert(timeline.process(w.rank.process).host))
        .take(MANY_RANKS)
        .collect()
}

/// The streams of the ranks [`strip_ranks`] draws, over their windows.
fn strip(
    timeline: &Timeline,
    classified: &[(RankWindow, RankStreams)],
    rules: &RoleRules,
) -> (Vec<StripRow>, i64) {
    let mut rows = Vec::new();
    let mut longest = 0;
    for (w, streams) in strip_ranks(timeline, classified) {
        let (start, end) = w.bounds;
        longest = longest.max(end - start);
        for s in &streams.streams {
            let stream = timeline.stream(s.stream);
            let spans = timeline
                .kernels
                .iter()
                .filter(|k| k.stream == s.stream && k.end.0 > start && k.start.0 < end)
                .map(|k| (k.start.0.max(start) - start, k.end.0.min(end) - start))
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
    (rows, longest)
}
