//! The stream-level commands over captures read for streaming ([`crate::load::Inputs::captures`]):
//! the light timeline finds the ranks and their windows, and one pass over each capture's sorted
//! GPU operations gathers what the commands measure, with the same accumulators as over a whole
//! timeline ([`Usage`], [`UnclassifiedShare`]). Memory stays within the sorting budget plus what
//! the accumulators keep (counts, and intervals joined as they come), whatever the capture's
//! length.

use crate::analysis::kernels::{KernelTally, Namer, RankKernels, UnclassifiedShare};
use crate::classify::families::{CUDA_GRAPH, Families, FamilyCache, MEMCPY, MEMSET};
use crate::classify::precision::LaunchPrecisions;
use crate::classify::streams::{Usage, clip};
use crate::classify::{Activity, RankStreams, RoleRules, WindowSource};
use crate::hash::FxHashSet;
use crate::input::capture::{Captures, Joined};
use crate::model::records::Fits;
use crate::model::{Kernel, Ns, ProcessId, StreamId};
use crate::nsys::Moved;
use crate::report::RankWindow;
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
    let mut pass = Pass {
        activity,
        usages: streams
            .iter()
            .map(|&(_, w)| (w, Usage::new(true)))
            .collect(),
        shares: shares
            .iter()
            .map(|&(_, w)| UnclassifiedShare::new(w))
            .collect(),
        slots: vec![(Vec::new(), Vec::new()); activity.timeline.processes.len()],
        families: FamilyCache::new(&families, activity.timeline),
    };
    for (i, &(p, _)) in streams.iter().enumerate() {
        pass.slots[p.index()].0.push(i);
    }
    for (i, &(p, _)) in shares.iter().enumerate() {
        pass.slots[p.index()].1.push(i);
    }
    for part in &captures.parts {
        let events = &part.events;
        each(part, &events.kernels, |k| pass.kernel(&k))?;
        each(part, &events.graph_launches, |g| {
            pass.operation(g.stream, (g.start.0, g.end.0), Usage::graph)
        })?;
        each(part, &events.memcpys, |m| {
            pass.operation(m.stream, (m.start.0, m.end.0), Usage::copy)
        })?;
        each(part, &events.memsets, |m| {
            pass.operation(m.stream, (m.start.0, m.end.0), Usage::copy)
        })?;
    }
    Ok(Gathered {
        shares: pass.shares.iter().map(|s| (s.other, s.all)).collect(),
        streams: (pass.usages.into_iter().zip(streams))
            .map(|((_, usage), &(process, _))| usage.classify(activity, process, rules))
            .collect(),
    })
}

/// What the pass gathers so far.
struct Pass<'a, 't> {
    activity: &'a Activity<'t>,
    /// Each wanted stream classification: its window and the use gathered.
    usages: Vec<((i64, i64), Usage)>,
    /// Each wanted share of unnamed kernel time.
    shares: Vec<UnclassifiedShare>,
    /// Per process: its positions in `usages` and in `shares`.
    slots: Vec<(Vec<usize>, Vec<usize>)>,
    families: FamilyCache<'a>,
}

impl Pass<'_, '_> {
    /// A kernel, for every classification and share of its process.
    fn kernel(&mut self, k: &Kernel) {
        let process = self.activity.timeline.stream(k.stream).process;
        let (usages, shares) = &self.slots[process.index()];
        if !usages.is_empty() {
            let comm = self.activity.is_comm_kernel(k);
            for &i in usages {
                let (window, usage) = &mut self.usages[i];
                if let Some(span) = clip((k.start.0, k.end.0), *window) {
                    usage.kernel(k, comm, span);
                }
            }
        }
        for &i in shares {
            self.shares[i].kernel(k, &mut self.families);
        }
    }

    /// A graph launch, copy or set on `stream`, added to each classification by `add`.
    fn operation(
        &mut self,
        stream: StreamId,
        span: (i64, i64),
        add: fn(&mut Usage, StreamId, (i64, i64)),
    ) {
        let process = self.activity.timeline.stream(stream).process;
        let (usages, shares) = &self.slots[process.index()];
        for &i in usages {
            let (window, usage) = &mut self.usages[i];
            if let Some(clipped) = clip(span, *window) {
                add(usage, stream, clipped);
            }
        }
        for &i in shares {
            self.shares[i].operation(span);
        }
    }
}

/// Each span's kernel breakdown ([`crate::analysis::kernels::rank_kernels`]) with its
/// classification over the same span (`classified`, from [`gather`]): the launching operators'
/// precisions from a pass over the calls (where an operator range records its inputs), then one
/// pass naming every GPU operation.
pub fn rank_kernels(
    (captures, activity): (&Captures, &Activity),
    spans: &[Span],
    (classified, rules): (&[RankStreams], &RoleRules),
    families: &Families,
) -> crate::nsys::Result<Vec<RankKernels>> {
    let timeline = activity.timeline;
    let mut slots: Vec<Vec<usize>> = vec![Vec::new(); timeline.processes.len()];
    for (i, &(p, _)) in spans.iter().enumerate() {
        slots[p.index()].push(i);
    }
    let mut precisions: Vec<LaunchPrecisions> = (spans.iter())
        .map(|&(p, _)| LaunchPrecisions::ranges(activity, p))
        .collect();
    if precisions.iter().any(LaunchPrecisions::speaks) {
        for part in &captures.parts {
            each(part, &part.events.api_calls, |a| {
                for &i in &slots[timeline.thread(a.thread).process.index()] {
                    precisions[i].call(&a);
                }
            })?;
        }
    }
    let namers: Vec<Namer> = (spans.iter().zip(classified).zip(precisions))
        .map(|((&(_, window), comm), precisions)| Namer::new(window, (comm, rules), precisions))
        .collect();
    let mut tallies: Vec<KernelTally> = spans.iter().map(|_| KernelTally::default()).collect();
    let mut cache = FamilyCache::new(families, timeline);
    for part in &captures.parts {
        let events = &part.events;
        each(part, &events.kernels, |k| {
            for &i in &slots[timeline.stream(k.stream).process.index()] {
                let tally = &mut tallies[i];
                namers[i].kernel(&k, &mut cache, &mut |op, f| tally.add(op, f, timeline));
            }
        })?;
        let mut other = |stream: StreamId, op, family: &str| {
            for &i in &slots[timeline.stream(stream).process.index()] {
                let tally = &mut tallies[i];
                namers[i].other(op, family, &mut |op, f| tally.add(op, f, timeline));
            }
        };
        each(part, &events.memcpys, |m| {
            other(
                m.stream,
                (m.stream, (m.start, m.end), m.correlation),
                MEMCPY,
            )
        })?;
        each(part, &events.memsets, |m| {
            other(
                m.stream,
                (m.stream, (m.start, m.end), m.correlation),
                MEMSET,
            )
        })?;
        each(part, &events.graph_launches, |g| {
            other(
                g.stream,
                (g.stream, (g.start, g.end), g.correlation),
                CUDA_GRAPH,
            )
        })?;
    }
    Ok((tallies.into_iter().zip(spans))
        .map(|(tally, &(_, window))| tally.finish(window))
        .collect())
}

/// Sets each window's GPU projection (first start to last end of the process's GPU work whose
/// launch started inside its CPU extent: [`crate::classify::window::find`]'s) and its bounds,
/// from the captures' sorted calls and operations, where the bounds may depend on it (an
/// anchor's window, or every window with `gpu_window`); the others keep their CPU extent and no
/// projection (the light timeline's, of its communication kernels alone, would be wrong).
pub fn project(
    (captures, activity): (&Captures, &Activity),
    windows: &mut [RankWindow],
    gpu_window: bool,
) -> crate::nsys::Result<()> {
    let timeline = activity.timeline;
    let wanted =
        |w: &RankWindow| gpu_window || matches!(w.window.source, WindowSource::Anchor { .. });
    let mut slots: Vec<Vec<usize>> = vec![Vec::new(); timeline.processes.len()];
    for (i, w) in windows.iter_mut().enumerate() {
        w.window.gpu = None;
        if wanted(w) {
            slots[w.rank.process.index()].push(i);
        }
    }
    if slots.iter().all(Vec::is_empty) {
        return Ok(());
    }
    let extent = |i: usize| (windows[i].window.start.0, windows[i].window.end.0);
    // A launch is the earliest call of its correlation id: the ids first called inside the
    // extent, less those called before it too.
    let mut launched: Vec<FxHashSet<u32>> = vec![FxHashSet::default(); windows.len()];
    for part in &captures.parts {
        each(part, &part.events.api_calls, |a| {
            for &i in &slots[timeline.thread(a.thread).process.index()] {
                let (start, end) = extent(i);
                if start <= a.start.0 && a.start.0 <= end {
                    launched[i].insert(a.correlation);
                }
            }
        })?;
        each(part, &part.events.api_calls, |a| {
            for &i in &slots[timeline.thread(a.thread).process.index()] {
                if a.start.0 < extent(i).0 {
                    launched[i].remove(&a.correlation);
                }
            }
        })?;
    }
    let mut projections: Vec<Option<(Ns, Ns)>> = vec![None; windows.len()];
    let mut operation = |stream: StreamId, start: Ns, end: Ns, correlation: u32| {
        for &i in &slots[timeline.stream(stream).process.index()] {
            if launched[i].contains(&correlation) {
                let p = projections[i].get_or_insert((start, end));
                *p = (p.0.min(start), p.1.max(end));
            }
        }
    };
    for part in &captures.parts {
        let events = &part.events;
        each(part, &events.kernels, |k| {
            operation(k.stream, k.start, k.end, k.correlation)
        })?;
        each(part, &events.memcpys, |m| {
            operation(m.stream, m.start, m.end, m.correlation)
        })?;
        each(part, &events.memsets, |m| {
            operation(m.stream, m.start, m.end, m.correlation)
        })?;
        let graphs = &events.graph_launches;
        each(part, graphs, |g| {
            operation(g.stream, g.start, g.end, g.correlation)
        })?;
    }
    for (w, gpu) in windows.iter_mut().zip(projections) {
        w.window.gpu = gpu;
        w.bounds = w.window.bounds(gpu_window);
    }
    Ok(())
}

/// Hands every event of `sorted` to `f`, moved onto the merged timeline.
fn each<T: Record + Moved + Fits>(
    part: &Joined,
    sorted: &Sorted<T>,
    mut f: impl FnMut(T),
) -> crate::nsys::Result<()> {
    for event in sorted.iter() {
        let event = event.and_then(|e| part.checked(e));
        f(event.map_err(|cause| part.error(cause))?);
    }
    Ok(())
}
