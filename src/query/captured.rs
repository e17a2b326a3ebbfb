//! The stream-level commands over captures read for streaming ([`crate::load::Inputs::captures`]):
//! the light timeline finds the ranks and their windows, and passes over each capture's sorted
//! GPU operations (and calls, where windows and GEMM precisions need them) gather what the
//! commands measure, with the same accumulators as over a whole timeline ([`Usage`],
//! [`UnclassifiedShare`], [`Namer`], [`KernelTally`]). Memory stays within the sorting budget
//! plus what the accumulators keep (counts, and intervals joined as they come), whatever the
//! capture's length.

use crate::analysis::bubbles::{BubbleTally, StepBubble};
use crate::analysis::collectives::WHOLE;
use crate::analysis::graph::{Graph, Operations};
use crate::analysis::idle::{Gap, GapContext, GapWitness, IdleTally, StreamIdle};
use crate::analysis::kernels::Operation as NamedOperation;
use crate::analysis::kernels::{KernelTally, Namer, RankKernels, UnclassifiedShare};
use crate::analysis::metrics::{MetricSummary, MetricTally};
use crate::analysis::mfu::{RankWork, WorkTally};
use crate::classify::families::{CUDA_GRAPH, Families, FamilyCache, MEMCPY, MEMCPY_PEER, MEMSET};
use crate::classify::flops::LaunchFlops;
use crate::classify::precision::LaunchPrecisions;
use crate::classify::streams::{Usage, clip};
use crate::classify::window::{Holding, MeasuredSteps, widen};
use crate::classify::{Activity, Rank, RankStreams, RoleRules, WindowSource};
use crate::hash::FxHashMap;
use crate::input::capture::{Captures, Joined};
use crate::model::records::Fits;
use crate::model::{ApiCall, Kernel, Memcpy, Ns, ProcessId, StreamId, ThreadId, Timeline};
use crate::nsys::Moved;
use crate::report::RankWindow;
use crate::second_core::Reading;
use crate::spill::{Record, Sorted};

/// A process over a window, ns on the merged clock.
pub type Span = (ProcessId, (i64, i64));

/// What [`gather`] measured, in the order asked.
pub struct Gathered {
    /// Each span's streams, classified.
    pub streams: Vec<RankStreams>,
    /// Each span's (unnamed, all) GPU time, ns.
    pub shares: Vec<(i64, i64)>,
}

/// Classifies the streams of each process of `streams` over its window, and measures the kernel
/// time no family names of each process of `shares` over its window, in one pass over every
/// capture's GPU operations: the same results as [`crate::classify::streams::classify`] and
/// [`crate::analysis::kernels::unclassified_share`] on the whole timeline.
pub fn gather(
    (captures, activity): (&Captures, &Activity),
    streams: &[Span],
    shares: &[Span],
    rules: &RoleRules,
) -> crate::nsys::Result<Gathered> {
    let families = Families::default();
    let mut cache = FamilyCache::new(&families, activity.timeline);
    let mut usages: Vec<Usage> = streams.iter().map(|_| Usage::new(true)).collect();
    let mut tallies: Vec<UnclassifiedShare> = (shares.iter())
        .map(|&(_, w)| UnclassifiedShare::new(w))
        .collect();
    let (usage_slots, share_slots) = (slots(activity, streams), slots(activity, shares));
    operations((captures, activity), Reading::Inline, |process, op| {
        let span = op.span();
        let comm = match op {
            Operation::Kernel(k) if !usage_slots[process.index()].is_empty() => {
                activity.is_comm_kernel(k)
            }
            _ => false,
        };
        for &i in &usage_slots[process.index()] {
            if let Some(clipped) = clip(span, streams[i].1) {
                count(&mut usages[i], op, comm, clipped);
            }
        }
        for &i in &share_slots[process.index()] {
            match op {
                Operation::Kernel(k) => tallies[i].kernel(k, &mut cache),
                Operation::Other(..) => _ = tallies[i].operation(span),
            }
        }
    })?;
    Ok(Gathered {
        shares: tallies.iter().map(|s| (s.other, s.all)).collect(),
        streams: (usages.into_iter().zip(streams))
            .map(|(usage, &(process, _))| usage.classify(activity, process, rules))
            .collect(),
    })
}

/// Counts `op` toward a classification (`usage`) over a window it meets at `clipped`; `comm`:
/// whether it is a communication kernel.
fn count(usage: &mut Usage, op: &Operation, comm: bool, clipped: (i64, i64)) {
    let stream = op.stream();
    match op {
        Operation::Kernel(k) => usage.kernel(k, comm, clipped),
        Operation::Other(_, CUDA_GRAPH) => usage.graph(stream, clipped),
        Operation::Other((_, (start, _), correlation), MEMCPY_PEER) => {
            usage.peer_copy((stream, start.0, *correlation), clipped)
        }
        Operation::Other(..) => usage.copy(stream, clipped),
    }
}

/// Each span's kernel breakdown ([`crate::analysis::kernels::rank_kernels`]) with its
/// classification over the same span (`classified`, from [`gather`]).
pub fn rank_kernels(
    both: (&Captures, &Activity),
    spans: &[Span],
    (classified, rules): (&[RankStreams], &RoleRules),
    families: &Families,
) -> crate::nsys::Result<Vec<RankKernels>> {
    let timeline = both.1.timeline;
    let namers = namers(both, spans, (classified, rules), None)?;
    let mut tallies: Vec<KernelTally> = spans.iter().map(|_| KernelTally::default()).collect();
    let (slots, mut cache) = (slots(both.1, spans), FamilyCache::new(families, timeline));
    operations_in_order(both, |process, op| {
        for &i in &slots[process.index()] {
            count_kernel(&mut tallies[i], (&namers[i], op), (&mut cache, timeline));
        }
    })?;
    Ok(finish_kernels(tallies, spans))
}

/// Counts operation `op`, named by `namer`, toward a kernel breakdown.
fn count_kernel(
    tally: &mut KernelTally,
    (namer, op): (&Namer, &Operation),
    (cache, timeline): (&mut FamilyCache, &Timeline),
) {
    name(namer, op, cache, &mut |op, family| {
        tally.add(op, family, timeline)
    });
}

/// Each span's kernel breakdown, its tally finished over its window.
fn finish_kernels(tallies: Vec<KernelTally>, spans: &[Span]) -> Vec<RankKernels> {
    (tallies.into_iter().zip(spans))
        .map(|(tally, &(_, window))| tally.finish(window))
        .collect()
}

/// What sees each call of a span's process in [`namers`]' pass: the process, the call, the
/// spans' indices.
type CallHook<'h> = dyn FnMut(ProcessId, &ApiCall, &[usize]) + 'h;

/// What names each span's GPU operations as [`crate::analysis::kernels::each_operation`] does
/// over a whole timeline, with the span's classification (`classified`, from [`gather`]): the
/// launching operators' precisions from a pass over the calls (where an operator range records
/// its inputs). `also`, when given, sees every call of a span's process (with the spans'
/// indices) in that pass, which then always runs.
fn namers<'c>(
    (captures, activity): (&Captures, &Activity),
    spans: &[Span],
    (classified, rules): (impl IntoIterator<Item = &'c RankStreams>, &'c RoleRules),
    mut also: Option<&mut CallHook>,
) -> crate::nsys::Result<Vec<Namer<'c>>> {
    let slots = slots(activity, spans);
    let mut precisions: Vec<LaunchPrecisions> = (spans.iter())
        .map(|&(p, _)| LaunchPrecisions::ranges(activity, p))
        .collect();
    if also.is_some() || precisions.iter().any(LaunchPrecisions::speaks) {
        calls((captures, activity), Reading::Inline, |process, call| {
            let slots = &slots[process.index()];
            if slots.is_empty() {
                return;
            }
            for &i in slots {
                precisions[i].call(call);
            }
            if let Some(also) = also.as_mut() {
                also(process, call, slots);
            }
        })?;
    }
    Ok((spans.iter().zip(classified).zip(precisions))
        .map(|((&(_, window), comm), precisions)| Namer::new(window, (comm, rules), precisions))
        .collect())
}

/// Hands `each` operation `op`, named by `namer`, with its family.
fn name(
    namer: &Namer,
    op: &Operation,
    cache: &mut FamilyCache,
    each: &mut impl FnMut(NamedOperation, &str),
) {
    match op {
        Operation::Kernel(k) => namer.kernel(k, cache, each),
        Operation::Other(other, family) => namer.other(*other, family, each),
    }
}

/// The dependency graph of `ranks` ([`Graph::build`]'s), in a pass over the GPU operations
/// that classifies their streams over the whole capture and names each operation (its
/// communication by its role once the classification is known; after a pass over the calls
/// where operators record GEMM inputs), one over the synchronization records and one over the
/// calls.
pub fn graph(
    both: (&Captures, &Activity),
    ranks: &[Rank],
    rules: &RoleRules,
    families: &Families,
) -> crate::nsys::Result<Graph> {
    let (captures, activity) = both;
    let spans: Vec<Span> = ranks.iter().map(|r| (r.process, WHOLE)).collect();
    let slots = slots(activity, &spans);
    let unclassified = vec![RankStreams::default(); ranks.len()];
    let namers = namers(both, &spans, (&unclassified, rules), None)?;
    // Roles are all the graph needs of the classification: no busy intervals.
    let mut usages: Vec<Usage> = ranks.iter().map(|_| Usage::new(false)).collect();
    let operation_count = (captures.parts.iter())
        .map(|p| {
            let e = &p.events;
            e.kernels.len() + e.memcpys.len() + e.memsets.len() + e.graph_launches.len()
        })
        .sum::<u64>();
    let mut nodes = Operations::with_capacity(operation_count as usize);
    let mut cache = FamilyCache::new(families, activity.timeline);
    // The graph's passes do much per item: they read ahead on a second core.
    operations(both, Reading::Ahead, |process, op| {
        for &r in &slots[process.index()] {
            let comm = matches!(op, Operation::Kernel(k) if activity.is_comm_kernel(k));
            count(&mut usages[r], op, comm, op.span());
            name(&namers[r], op, &mut cache, &mut |op, family| {
                nodes.add(r as u32, &op, family)
            });
        }
    })?;
    let classified: Vec<RankStreams> = (usages.into_iter().zip(ranks))
        .map(|(usage, rank)| usage.classify(activity, rank.process, rules))
        .collect();
    nodes.name_communication(&classified, rules);
    let mut linking = nodes.link(activity, (ranks, &classified), rules);
    // The collectives are matched: what the calls add is the graph's peak.
    drop(classified);
    give_back_freed_memory();
    for part in &captures.parts {
        each(part, &part.events.syncs, |s| linking.sync(&s))?;
    }
    calls(both, Reading::Ahead, |process, call| {
        for &r in &slots[process.index()] {
            linking.call((r as u32, process), call, activity.timeline);
        }
    })?;
    let graph = linking.finish();
    give_back_freed_memory();
    Ok(graph)
}

/// Gives the pages of freed memory back to the system. glibc keeps blocks freed below the top
/// of its heap resident, and the graph's stages free tens of megabytes there before its
/// largest vectors fill (on the 4M bench export 17 MB of `critical-path`'s peak of 305 MB,
/// and 4 more after the graph is bound); a trim costs a few milliseconds.
fn give_back_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: `malloc_trim` only returns free pages of glibc's heap to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Each span's work per step ([`crate::analysis::mfu::rank_work`]): `found[i]` holds span i's
/// step ranges, `classified[i]` its classification over the whole capture (from [`gather`]).
/// One pass over the calls finds each operation's launch, its launching operator's work and
/// its GEMM precision; one over the GPU operations names and counts them.
pub fn rank_work(
    both: (&Captures, &Activity),
    spans: &[Span],
    (found, classified): (&[MeasuredSteps], &[RankStreams]),
    rules: &RoleRules,
    families: &Families,
) -> crate::nsys::Result<Vec<RankWork>> {
    let activity = both.1;
    let mut launched = Launched::new(activity, spans);
    let namers = namers(
        both,
        spans,
        (classified, rules),
        Some(&mut |process, call, slots| launched.call(process, call, slots.iter().copied())),
    )?;
    let slots = slots(activity, spans);
    let mut tallies: Vec<WorkTally> = found.iter().map(|f| WorkTally::new(&f.ranges)).collect();
    let mut cache = FamilyCache::new(families, activity.timeline);
    operations(both, Reading::Inline, |process, op| {
        for &i in &slots[process.index()] {
            let namer = (&namers[i], &mut cache);
            launched.count(&mut tallies[i], (process, i), op, namer);
        }
    })?;
    Ok(tallies.into_iter().map(WorkTally::finish).collect())
}

/// What a pass over the calls finds for each span's work ([`rank_work`]): each process's
/// launches, each span's launching operators.
struct Launched {
    launches: Vec<Launches>,
    operators: Vec<LaunchFlops>,
}

impl Launched {
    /// For the work of spans `spans` of `activity`.
    fn new(activity: &Activity, spans: &[Span]) -> Launched {
        Launched {
            launches: vec![Launches::default(); activity.timeline.processes.len()],
            operators: (spans.iter())
                .map(|&(p, _)| LaunchFlops::ranges(activity, p))
                .collect(),
        }
    }

    /// A call of `process`, whose spans are `spans`.
    fn call(&mut self, process: ProcessId, call: &ApiCall, spans: impl Iterator<Item = usize>) {
        self.launches[process.index()].call(call.correlation, call.start.0, || true);
        for i in spans {
            self.operators[i].call(call);
        }
    }

    /// Counts operation `op` of `process`, named by `namer`, toward span `i`'s work.
    fn count(
        &self,
        tally: &mut WorkTally,
        (process, i): (ProcessId, usize),
        op: &Operation,
        (namer, cache): (&Namer, &mut FamilyCache),
    ) {
        let (launches, operators) = (&self.launches[process.index()], &self.operators[i]);
        name(namer, op, cache, &mut |op, family| {
            let of = op.correlation;
            tally.add(&op, family, (launches.get(of), operators.of(of)));
        });
    }
}

/// A rank whose bubbles are measured: its process, its steps, and its streams classified over
/// a window that holds them.
pub type BubbleRank<'a> = (ProcessId, &'a [(i64, i64)], &'a RankStreams);

/// Each of `processes`' [`BubbleRank`]: its measured steps of `found`, its streams of
/// `classified`.
pub fn bubble_ranks<'a>(
    processes: &[ProcessId],
    found: &'a [MeasuredSteps],
    classified: &'a [RankStreams],
) -> Vec<BubbleRank<'a>> {
    (processes.iter().zip(found).zip(classified))
        .map(|((&p, f), streams)| (p, f.measured.as_slice(), streams))
        .collect()
}

/// Each rank's bubble per step ([`crate::analysis::bubbles::rank_bubbles`]), in one pass over
/// the captures' graph launches and one over their kernels.
pub fn bubbles(
    both: (&Captures, &Activity),
    ranks: &[BubbleRank],
    rules: &RoleRules,
) -> crate::nsys::Result<Vec<Vec<StepBubble>>> {
    let (captures, activity) = both;
    let timeline = activity.timeline;
    let mut tallies = bubble_tallies(both, ranks, rules)?;
    let spans: Vec<Span> = ranks.iter().map(|&(p, ..)| (p, WHOLE)).collect();
    let slots = slots(activity, &spans);
    for part in &captures.parts {
        each(part, &part.events.kernels, |k| {
            for &i in &slots[timeline.stream(k.stream).process.index()] {
                tallies[i].kernel(timeline, &k);
            }
        })?;
    }
    Ok(tallies.into_iter().map(BubbleTally::finish).collect())
}

/// The bubble tallies of `ranks`, with their processes' CUDA graph launches (one pass over
/// the captures' graph launches).
fn bubble_tallies(
    (captures, activity): (&Captures, &Activity),
    ranks: &[BubbleRank],
    rules: &RoleRules,
) -> crate::nsys::Result<Vec<BubbleTally>> {
    let timeline = activity.timeline;
    let mut graphs = vec![Vec::new(); timeline.processes.len()];
    for part in &captures.parts {
        each(part, &part.events.graph_launches, |g| {
            let process = timeline.stream(g.stream).process;
            graphs[process.index()].push((g.start.0, g.end.0));
        })?;
    }
    let tally = |&(process, steps, streams): &BubbleRank| {
        let graphs = graphs[process.index()].iter().copied();
        BubbleTally::new(activity, process, steps, (streams, rules), graphs)
    };
    Ok(ranks.iter().map(tally).collect())
}

/// What the report's page measures of each window's rank, in one pass over the calls, one over
/// the graph launches and one over the GPU operations: its kernel breakdown over its window
/// (`classified[i]`, as [`rank_kernels`]), its bubble in each step of `found[i]` ([`bubbles`])
/// and its work per step of `found[i]` ([`rank_work`]) over the whole capture.
pub fn page_measures(
    both: (&Captures, &Activity),
    windows: &[Span],
    (classified, found): (&[RankStreams], &[MeasuredSteps]),
    rules: &RoleRules,
    families: &Families,
) -> crate::nsys::Result<PageMeasures> {
    let (activity, n) = (both.1, windows.len());
    let timeline = activity.timeline;
    // The windows (kernels), then each window's rank over the whole capture (work).
    let whole = windows.iter().map(|&(p, _)| (p, WHOLE));
    let spans: Vec<Span> = windows.iter().copied().chain(whole).collect();
    let mut launched = Launched::new(activity, windows);
    let namers = namers(
        both,
        &spans,
        (classified.iter().chain(classified), rules),
        Some(&mut |process, call, slots| {
            launched.call(process, call, slots.iter().filter_map(|i| i.checked_sub(n)))
        }),
    )?;
    let slots = slots(activity, &spans);
    let mut kernels: Vec<KernelTally> = windows.iter().map(|_| KernelTally::default()).collect();
    let processes: Vec<ProcessId> = windows.iter().map(|&(p, _)| p).collect();
    let ranks = bubble_ranks(&processes, found, classified);
    let mut bubbles = bubble_tallies(both, &ranks, rules)?;
    let mut work: Vec<WorkTally> = found.iter().map(|f| WorkTally::new(&f.ranges)).collect();
    let mut cache = FamilyCache::new(families, timeline);
    operations_in_order(both, |process, op| {
        for &i in &slots[process.index()] {
            match i.checked_sub(n) {
                None => count_kernel(&mut kernels[i], (&namers[i], op), (&mut cache, timeline)),
                Some(r) => {
                    if let Operation::Kernel(k) = op {
                        bubbles[r].kernel(timeline, k);
                    }
                    let namer = (&namers[i], &mut cache);
                    launched.count(&mut work[r], (process, r), op, namer);
                }
            }
        }
    })?;
    Ok(PageMeasures {
        kernels: finish_kernels(kernels, windows),
        bubbles: bubbles.into_iter().map(BubbleTally::finish).collect(),
        work: work.into_iter().map(WorkTally::finish).collect(),
    })
}

/// What [`page_measures`] gives for each rank.
pub struct PageMeasures {
    /// Kernel breakdowns over the windows.
    pub kernels: Vec<RankKernels>,
    /// The bubble in each step.
    pub bubbles: Vec<Vec<StepBubble>>,
    /// Work per step.
    pub work: Vec<RankWork>,
}

/// The kernels of each of `streams` that meet its window, in start order, (start, end) ns: one
/// pass over the captures' kernels.
pub fn kernel_spans(
    (captures, activity): (&Captures, &Activity),
    streams: &[(StreamId, (i64, i64))],
) -> crate::nsys::Result<Vec<Vec<(i64, i64)>>> {
    let mut slots = vec![Vec::new(); activity.timeline.streams.len()];
    for (i, &(stream, _)) in streams.iter().enumerate() {
        slots[stream.index()].push(i);
    }
    let mut spans = vec![Vec::new(); streams.len()];
    for part in &captures.parts {
        each(part, &part.events.kernels, |k| {
            for &i in &slots[k.stream.index()] {
                let (start, end) = streams[i].1;
                if k.end.0 > start && k.start.0 < end {
                    spans[i].push((k.start.0, k.end.0));
                }
            }
        })?;
    }
    Ok(spans)
}

/// The GPU metrics of each span ([`crate::analysis::metrics::rank_metrics`]), in one pass over
/// the captures' samples.
pub fn metrics(
    (captures, activity): (&Captures, &Activity),
    spans: &[Span],
) -> crate::nsys::Result<Vec<Vec<MetricSummary>>> {
    let mut tallies: Vec<MetricTally> = (spans.iter())
        .map(|&(process, window)| MetricTally::new(activity, process, window))
        .collect();
    let mut by_series = vec![Vec::new(); activity.timeline.metric_series.len()];
    for (i, tally) in tallies.iter().enumerate() {
        for series in tally.series() {
            by_series[series.index()].push(i);
        }
    }
    for part in &captures.parts {
        each(part, &part.events.metrics, |m| {
            for &i in &by_series[m.series.index()] {
                tallies[i].sample(&m);
            }
        })?;
    }
    Ok(tallies.into_iter().map(MetricTally::finish).collect())
}

/// Sets each window's GPU projection (first start to last end of the process's GPU work whose
/// launch started inside its CPU extent: [`crate::classify::window::find`]'s) and its bounds,
/// from the captures' sorted calls and operations, where the bounds may depend on it (an
/// anchor's window, or every window with `gpu_window`); the others keep their CPU extent and no
/// projection (the light timeline's, of its communication kernels alone, would be wrong).
pub fn project(
    both: (&Captures, &Activity),
    windows: &mut [RankWindow],
    gpu_window: bool,
) -> crate::nsys::Result<()> {
    let wanted =
        |w: &RankWindow| gpu_window || matches!(w.window.source, WindowSource::Anchor { .. });
    for w in windows.iter_mut() {
        w.window.gpu = None;
    }
    let extents: Vec<Span> = (windows.iter())
        .filter(|w| wanted(w))
        .map(|w| (w.rank.process, (w.window.start.0, w.window.end.0)))
        .collect();
    let mut projections = projections(both, &extents)?.into_iter();
    for w in windows.iter_mut().filter(|w| wanted(w)) {
        w.window.gpu = projections.next().flatten().map(|(s, e)| (Ns(s), Ns(e)));
        w.bounds = w.window.bounds(gpu_window);
    }
    Ok(())
}

/// The GPU projection of each extent (process, CPU range): first start to last end of the
/// process's GPU work whose launch (the earliest call of its correlation id) started inside
/// the range, in one pass over the captures' calls and one over their operations (none when
/// `extents` is empty).
pub fn projections(
    (captures, activity): (&Captures, &Activity),
    extents: &[Span],
) -> crate::nsys::Result<Vec<Option<(i64, i64)>>> {
    if extents.is_empty() {
        return Ok(Vec::new());
    }
    let holding = Holding::new(activity.timeline.processes.len(), extents);
    let both = (captures, activity);
    // Each process's launches: the first call of each correlation id (calls come in start
    // order), and whether an extent holds it.
    let mut launches: Vec<Launches> = vec![Launches::default(); activity.timeline.processes.len()];
    calls(both, Reading::Inline, |process, call| {
        let t = call.start.0;
        let inside = || holding.any(process, t);
        launches[process.index()].call(call.correlation, t, inside);
    })?;
    let mut projections: Vec<Option<(i64, i64)>> = vec![None; extents.len()];
    operations(both, Reading::Inline, |process, op| {
        let Some(launch) = launches[process.index()].get(op.correlation()) else {
            return;
        };
        holding.each(process, launch, |i| widen(&mut projections[i], op.span()));
    })?;
    Ok(projections)
}

/// One process's launches by correlation id (the first call of each): its start when an
/// extent holds it, else only that it came. In a vector indexed by the id (ids are counters),
/// those past [`Launches::DENSE`] in a map.
#[derive(Clone, Default)]
struct Launches {
    dense: Vec<i64>,
    sparse: FxHashMap<u32, i64>,
}

impl Launches {
    /// Ids below this are kept in the vector (8 bytes each up to the largest id seen).
    const DENSE: u32 = 1 << 24;
    /// No call of the id yet.
    const UNSEEN: i64 = i64::MIN;
    /// The id's first call lies outside every extent.
    const OUTSIDE: i64 = i64::MIN + 1;

    /// A call of `id` at `t` (in start order); `inside` says whether an extent holds `t`.
    fn call(&mut self, id: u32, t: i64, inside: impl FnOnce() -> bool) {
        let slot = match id < Self::DENSE {
            true => {
                let at = id as usize;
                if at >= self.dense.len() {
                    self.dense.resize(at + 1, Self::UNSEEN);
                }
                &mut self.dense[at]
            }
            false => self.sparse.entry(id).or_insert(Self::UNSEEN),
        };
        if *slot == Self::UNSEEN {
            *slot = if inside() { t } else { Self::OUTSIDE };
        }
    }

    /// The launch of `id`, when an extent holds it.
    fn get(&self, id: u32) -> Option<i64> {
        let launch = match id < Self::DENSE {
            true => self.dense.get(id as usize),
            false => self.sparse.get(&id),
        };
        launch.copied().filter(|&t| t > Self::OUTSIDE)
    }
}

/// Each span's position, by process index.
fn slots(activity: &Activity, spans: &[Span]) -> Vec<Vec<usize>> {
    let mut slots = vec![Vec::new(); activity.timeline.processes.len()];
    for (i, &(process, _)) in spans.iter().enumerate() {
        slots[process.index()].push(i);
    }
    slots
}

/// A GPU operation read back from a capture.
enum Operation {
    /// A kernel.
    Kernel(Kernel),
    /// A copy, set or graph launch, (stream, span, correlation id), and its family (`MEMCPY`,
    /// `MEMCPY_PEER`, `MEMSET` or `CUDA_GRAPH`).
    Other((StreamId, (Ns, Ns), u32), &'static str),
}

impl Operation {
    fn stream(&self) -> StreamId {
        match self {
            Operation::Kernel(k) => k.stream,
            Operation::Other((stream, ..), _) => *stream,
        }
    }

    /// Start and end, ns.
    fn span(&self) -> (i64, i64) {
        match self {
            Operation::Kernel(k) => (k.start.0, k.end.0),
            Operation::Other((_, (start, end), _), _) => (start.0, end.0),
        }
    }

    fn correlation(&self) -> u32 {
        match self {
            Operation::Kernel(k) => k.correlation,
            Operation::Other((.., correlation), _) => *correlation,
        }
    }
}

/// Hands `f` every GPU operation of every capture with its process: kernels, then copies, sets
/// and graph launches, each kind in start order, read as `reading` says.
fn operations(
    (captures, activity): (&Captures, &Activity),
    reading: Reading,
    mut f: impl FnMut(ProcessId, &Operation),
) -> crate::nsys::Result<()> {
    let timeline = activity.timeline;
    let ops = (captures.parts.iter()).flat_map(|part| kinds(part).into_iter().flatten());
    crate::second_core::each(ops, reading, |op| {
        let op = op?;
        f(timeline.stream(op.stream()).process, &op);
        Ok(())
    })
}

/// A capture's GPU operations read back, one sequence per kind (kernels, copies, sets, graph
/// launches), each in start order.
type Kind<'p> = Box<dyn Iterator<Item = crate::nsys::Result<Operation>> + Send + 'p>;

/// The GPU operations of `part`, by kind ([`Kind`]).
fn kinds(part: &Joined) -> [Kind<'_>; 4] {
    let e = &part.events;
    let other = |family| {
        move |(stream, start, end, correlation)| {
            Operation::Other((stream, (start, end), correlation), family)
        }
    };
    let (memcpy, peer) = (other(MEMCPY), other(MEMCPY_PEER));
    let (memset, graph) = (other(MEMSET), other(CUDA_GRAPH));
    let copy = move |m: Memcpy| {
        let ends = (m.stream, m.start, m.end, m.correlation);
        if m.is_peer() {
            peer(ends)
        } else {
            memcpy(ends)
        }
    };
    [
        Box::new(moved(part, &e.kernels).map(|k| k.map(Operation::Kernel))),
        Box::new(moved(part, &e.memcpys).map(move |m| m.map(copy))),
        Box::new(
            moved(part, &e.memsets)
                .map(move |m| m.map(|m| memset((m.stream, m.start, m.end, m.correlation)))),
        ),
        Box::new(
            moved(part, &e.graph_launches)
                .map(move |g| g.map(|g| graph((g.stream, g.start, g.end, g.correlation)))),
        ),
    ]
}

/// Hands `f` every CUDA API call of every capture with its process, in start order per
/// capture, read as `reading` says.
fn calls(
    (captures, activity): (&Captures, &Activity),
    reading: Reading,
    mut f: impl FnMut(ProcessId, &ApiCall),
) -> crate::nsys::Result<()> {
    let timeline = activity.timeline;
    let calls = (captures.parts.iter()).flat_map(|part| moved(part, &part.events.api_calls));
    crate::second_core::each(calls, reading, |a| {
        let a = a?;
        f(timeline.thread(a.thread).process, &a);
        Ok(())
    })
}

/// Hands every event of `sorted` to `f`, moved onto the merged timeline.
fn each<T: Record + Moved + Fits>(
    part: &Joined,
    sorted: &Sorted<T>,
    mut f: impl FnMut(T),
) -> crate::nsys::Result<()> {
    for event in moved(part, sorted) {
        f(event?);
    }
    Ok(())
}

/// Every event of `sorted`, in order, moved onto the merged timeline.
fn moved<'p, T: Record + Moved + Fits>(
    part: &'p Joined,
    sorted: &'p Sorted<T>,
) -> impl Iterator<Item = crate::nsys::Result<T>> + 'p {
    (sorted.iter()).map(|event| {
        let event = event.and_then(|e| part.checked(e));
        event.map_err(|cause| part.error(cause))
    })
}

/// Hands `f` every GPU operation of every capture with its process, each capture's in start
/// order: its kernels, copies, sets and graph launches merged.
fn operations_in_order(
    (captures, activity): (&Captures, &Activity),
    mut f: impl FnMut(ProcessId, &Operation),
) -> crate::nsys::Result<()> {
    let timeline = activity.timeline;
    for part in &captures.parts {
        let mut kinds = kinds(part);
        let mut heads = Vec::with_capacity(kinds.len());
        for kind in &mut kinds {
            heads.push(kind.next().transpose()?);
        }
        loop {
            let earliest = (heads.iter().enumerate())
                .filter_map(|(i, head)| Some((head.as_ref()?.span().0, i)))
                .min();
            let Some((_, i)) = earliest else { break };
            let op = heads[i].take().expect("the earliest head");
            f(timeline.stream(op.stream()).process, &op);
            heads[i] = kinds[i].next().transpose()?;
        }
    }
    Ok(())
}

/// Each span's idle time per stream and its gaps ([`crate::analysis::idle::rank_idle`]): one
/// pass over each capture's GPU operations in start order, then one over the calls for the
/// launches of the operations after the gaps. What stays in memory is the gaps.
pub fn idle(
    (captures, activity): (&Captures, &Activity),
    spans: &[Span],
    launch_gap: i64,
) -> crate::nsys::Result<Vec<(Vec<StreamIdle>, Vec<Gap>)>> {
    let both = (captures, activity);
    let slots = slots(activity, spans);
    let mut tallies: Vec<IdleTally> = spans.iter().map(|&(_, w)| IdleTally::new(w)).collect();
    operations_in_order(both, |process, op| {
        for &i in &slots[process.index()] {
            tallies[i].operation(op.stream(), op.span(), op.correlation());
        }
    })?;
    let mut launches: FxHashMap<(ProcessId, u32), Option<(i64, ThreadId)>> = FxHashMap::default();
    for (tally, &(process, _)) in tallies.iter_mut().zip(spans) {
        launches.extend(tally.launches_wanted().map(|c| ((process, c), None)));
    }
    // A launch is the earliest call of its correlation id (no pass when no gap needs one).
    if !launches.is_empty() {
        calls(both, Reading::Inline, |process, call| {
            if let Some(launch @ None) = launches.get_mut(&(process, call.correlation)) {
                *launch = Some((call.start.0, call.thread));
            }
        })?;
    }
    let finished = tallies
        .into_iter()
        .zip(spans)
        .map(|(tally, &(process, _))| {
            let launch = |c| launches.get(&(process, c)).copied().flatten();
            tally.finish(activity.timeline, launch, launch_gap)
        });
    Ok(finished.collect())
}

/// What the launching thread was doing during each of each span's `gaps`
/// ([`crate::analysis::idle::gap_context`]): one pass each over the captures' calls, OS calls
/// and CPU samples.
pub fn gap_contexts(
    (captures, activity): (&Captures, &Activity),
    spans: &[Span],
    gaps: &[Vec<Gap>],
) -> crate::nsys::Result<Vec<Vec<GapContext>>> {
    let timeline = activity.timeline;
    // One witness per gap with a launching thread, in the order of the gaps.
    let mut witnesses: Vec<GapWitness> = Vec::new();
    for (&(process, _), gaps) in spans.iter().zip(gaps) {
        for gap in gaps {
            if let Some(thread) = gap.launcher {
                witnesses.push(GapWitness::new(process, thread, (gap.start, gap.end)));
            }
        }
    }
    if witnesses.is_empty() {
        return Ok(gaps
            .iter()
            .map(|g| vec![GapContext::default(); g.len()])
            .collect());
    }
    let mut by_process = vec![Vec::new(); timeline.processes.len()];
    for (w, witness) in witnesses.iter().enumerate() {
        by_process[witness.process().index()].push(w);
    }
    calls((captures, activity), Reading::Inline, |process, call| {
        for &w in &by_process[process.index()] {
            witnesses[w].call(call);
        }
    })?;
    for part in &captures.parts {
        each(part, &part.events.os_calls, |o| {
            for &w in &by_process[timeline.thread(o.thread).process.index()] {
                witnesses[w].os_call(&o);
            }
        })?;
        each(part, &part.events.samples, |s| {
            for &w in &by_process[timeline.thread(s.thread).process.index()] {
                witnesses[w].sample(timeline, &s);
            }
        })?;
    }
    let mut witnessed = witnesses.into_iter();
    let mut context = |gap: &Gap| match gap.launcher {
        Some(_) => (witnessed.next()).map_or_else(GapContext::default, |w| w.finish(activity)),
        None => GapContext::default(),
    };
    Ok(gaps
        .iter()
        .map(|g| g.iter().map(&mut context).collect())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::Launches;

    #[test]
    fn a_launch_is_the_first_call_of_its_id_whether_the_id_is_small_or_large() {
        let big = Launches::DENSE + 7;
        for id in [3, big] {
            let mut launches = Launches::default();
            // First called inside an extent at 10; a later call does not move it.
            launches.call(id, 10, || true);
            launches.call(id, 20, || true);
            assert_eq!(launches.get(id), Some(10), "id {id}");
            // First called outside every extent: a later call inside is no launch of it.
            let other = id + 1;
            launches.call(other, 5, || false);
            launches.call(other, 30, || true);
            assert_eq!(launches.get(other), None, "id {other}");
            assert_eq!(launches.get(id + 2), None, "never called");
        }
    }
}
