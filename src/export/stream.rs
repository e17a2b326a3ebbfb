//! The events of some captures as one stream in time order, as the writers draw them: moved
//! onto the merged timeline's ids and clock, each clipped to its process's exported window, in
//! order of (clipped) start, and handed out one start time at a time ([`Stream::group`]) with
//! the events of that time in one fixed order (enclosing events first, then by kind and every
//! field), so that each process's events come out the same however the captures are grouped.
//!
//! The repeated rows of an MPI wait on several requests are not streamed.
//!
//! The captures' sorted events are merged lazily (nothing is held but one event per source and
//! the few events that straddle a window's start, held until it). NVTX events come from the
//! light timeline. Synchronizations are not drawn and not streamed. GPU metric samples come once
//! per exported process whose GPU they sampled, inside `[start, end]` of its window; device
//! memory events come from the start of the capture (the allocated total counts them all) up
//! to the window's end.
//!
//! A stream read by several writers runs once, on a thread of its own ([`share`]): it hands
//! each writer the same groups, a batch at a time, and a writer reads them as [`Events`] as it
//! would read a stream of its own.

use super::Plan;
use crate::classify::streams::clip;
use crate::input::capture::Joined;
use crate::model::records::Fits;
use crate::model::{
    AccEvent, ApiCall, GpuId, GraphLaunch, Kernel, Memcpy, MemoryEvent, Memset, MetricSample,
    MpiCall, MpiTable, NvtxEvent, NvtxKind, OsCall, ProcessId, SampleEvent, SyncEvent, ThreadRun,
};
use crate::nsys::Moved;
use crate::spill::Record;
use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

/// Events streamed so far by every pass, and how many the passes will stream.
static STREAMED: AtomicU64 = AtomicU64::new(0);
static TO_STREAM: AtomicU64 = AtomicU64::new(0);

/// Events are counted in batches of this many (one atomic add per batch).
const BATCH: u64 = 4096;

/// (events streamed, events to stream) since the last [`expect`], for a progress line.
pub fn progress() -> (u64, u64) {
    (
        STREAMED.load(Ordering::Relaxed),
        TO_STREAM.load(Ordering::Relaxed),
    )
}

/// Starts counting afresh: `passes` passes over `events` events are to come.
pub fn expect(events: u64, passes: u64) {
    STREAMED.store(0, Ordering::Relaxed);
    TO_STREAM.store(events * passes, Ordering::Relaxed);
}

/// Something drawn, with global ids and merged-clock times (unclipped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    /// A CUDA runtime or driver call.
    Api(ApiCall),
    /// An OS runtime call.
    Os(OsCall),
    /// An MPI call.
    Mpi(MpiCall),
    /// An OpenACC event.
    Acc(AccEvent),
    /// An NVTX range or mark.
    Nvtx(NvtxEvent),
    /// A kernel.
    Kernel(Kernel),
    /// A memory copy.
    Memcpy(Memcpy),
    /// A memory set.
    Memset(Memset),
    /// A CUDA graph launch.
    Graph(GraphLaunch),
    /// A GPU metric sample, for this GPU of the process.
    Metric(MetricSample, GpuId),
    /// A device-memory allocation or release.
    Memory(MemoryEvent),
    /// A CPU sample.
    Sample(SampleEvent),
    /// A time a CPU thread ran on a core.
    Run(ThreadRun),
    /// A synchronization record (not drawn itself: what it waited for is linked).
    Sync(SyncEvent),
}

/// One event as exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item {
    /// Start, clipped to the window (a device-memory event before the window keeps its time).
    pub start: i64,
    /// End, clipped to the window (an open NVTX range ends with the window).
    pub end: i64,
    /// The position of its process in [`Plan::exported`].
    pub exported: usize,
    /// What it is.
    pub event: Event,
}

/// The order of the events of one start time: enclosing ones first, then by kind and every
/// field.
fn order(a: &Item, b: &Item) -> std::cmp::Ordering {
    b.end.cmp(&a.end).then_with(|| a.event.cmp(&b.event))
}

/// An event held until its window opens: (clipped start, reversed clipped end, event,
/// position of its process), in the order of a group.
type Held = (i64, Reverse<i64>, Event, usize);

/// A source of events in start order.
type Source<'a> = Box<dyn Iterator<Item = io::Result<(i64, Event)>> + Send + 'a>;

/// The events of some captures, in time order.
pub struct Stream<'p, 'a, 't> {
    plan: &'p Plan<'a, 't>,
    sources: Vec<Source<'p>>,
    /// Each source's next event.
    heads: Vec<Option<Event>>,
    /// The sources with a next event, by (its start, source).
    heap: BinaryHeap<Reverse<(i64, usize)>>,
    /// Events whose clipped start is later than their start (they straddle the window's start).
    held: BinaryHeap<Reverse<Held>>,
    /// Events whose clipped start is their start, from the last merged event.
    ready: VecDeque<Item>,
    /// Each metric series' exported (process, GPU) pairs, by series id.
    series: Vec<Vec<(usize, GpuId)>>,
    error: Option<io::Error>,
    /// Events merged since the last count.
    counted: u64,
}

/// Which of its events a stream carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kinds {
    /// Every kind.
    All,
    /// Kernels, copies, sets and graph launches, and the synchronization records that
    /// waited for them.
    GpuOperations,
    /// Every kind but those.
    Others,
}

impl<'p, 'a, 't> Stream<'p, 'a, 't> {
    /// The events of `parts` (captures joined into the plan's timeline), and the NVTX events of
    /// their processes.
    pub fn new(plan: &'p Plan<'a, 't>, parts: &[&'p Joined]) -> Stream<'p, 'a, 't> {
        Stream::of(plan, parts, Kinds::All)
    }

    /// The events of `kinds` of `parts`: the same events, in the same order, as those kinds
    /// have in [`Stream::new`].
    pub fn of(plan: &'p Plan<'a, 't>, parts: &[&'p Joined], kinds: Kinds) -> Stream<'p, 'a, 't> {
        let timeline = plan.activity.timeline;
        let mut sources: Vec<Source<'p>> = Vec::new();
        for part in parts {
            sources.extend(event_sources(part, kinds));
        }
        for e in &plan.exported {
            let report = timeline.process(e.process).report;
            if kinds != Kinds::GpuOperations && parts.iter().any(|part| part.report == report) {
                let nvtx = plan
                    .activity
                    .nvtx(e.process)
                    .filter(|n| n.kind != NvtxKind::Metadata)
                    .map(|n| Ok((n.start.0, Event::Nvtx(*n))));
                sources.push(Box::new(nvtx));
            }
        }
        let mut series: Vec<Vec<(usize, GpuId)>> = vec![Vec::new(); timeline.metric_series.len()];
        for (i, e) in plan.exported.iter().enumerate() {
            for (gpu, s) in plan.activity.metric_series(e.process) {
                series[s.index()].push((i, gpu));
            }
        }
        let mut stream = Stream {
            plan,
            sources,
            heads: vec![None; 0],
            heap: BinaryHeap::new(),
            held: BinaryHeap::new(),
            ready: VecDeque::new(),
            series,
            error: None,
            counted: 0,
        };
        stream.heads = vec![None; stream.sources.len()];
        for i in 0..stream.sources.len() {
            stream.pull(i);
        }
        stream
    }

    /// Reads the first event of source `i` into its head.
    fn pull(&mut self, i: usize) {
        if let Some(start) = next_head(&mut self.sources[i], &mut self.heads[i], &mut self.error) {
            self.heap.push(Reverse((start, i)));
        }
    }

    /// The start of the next group, or None at the end. Fails on a read error of a run.
    pub fn peek(&mut self) -> io::Result<Option<i64>> {
        self.fill();
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let held = self.held.peek().map(|Reverse((t, ..))| *t);
        let next = self.ready.front().map(|i| i.start);
        Ok(match (held, next) {
            (Some(h), Some(n)) => Some(h.min(n)),
            (h, n) => h.or(n),
        })
    }

    /// Every event starting at `t` (the time [`Stream::peek`] gave), in their fixed order.
    pub fn group(&mut self, t: i64, out: &mut Vec<Item>) -> io::Result<()> {
        out.clear();
        loop {
            self.fill();
            if let Some(e) = self.error.take() {
                return Err(e);
            }
            if let Some(Reverse((start, ..))) = self.held.peek()
                && *start == t
            {
                let Reverse((start, Reverse(end), event, exported)) =
                    self.held.pop().expect("peeked");
                out.push(Item {
                    start,
                    end,
                    exported,
                    event,
                });
                continue;
            }
            match self.ready.front() {
                Some(item) if item.start == t => out.extend(self.ready.pop_front()),
                _ => break,
            }
        }
        if out.len() > 1 {
            out.sort_unstable_by(order);
        }
        Ok(())
    }

    /// Merges events until one is ready (its clipped start is its own start), holding those
    /// that straddle their window's start: no held event, nor any event still to come, can then
    /// start before the ready ones.
    fn fill(&mut self) {
        while self.ready.is_empty() {
            let Some(mut top) = self.heap.peek_mut() else {
                return;
            };
            let Reverse((start, i)) = *top;
            let event = self.heads[i]
                .take()
                .expect("a source in the heap has a head");
            // The source's next event takes its place at the top (one sift instead of a pop
            // and a push).
            match next_head(&mut self.sources[i], &mut self.heads[i], &mut self.error) {
                Some(next) => {
                    *top = Reverse((next, i));
                    drop(top);
                }
                None => {
                    PeekMut::pop(top);
                }
            }
            self.counted += 1;
            if self.counted == BATCH {
                STREAMED.fetch_add(BATCH, Ordering::Relaxed);
                self.counted = 0;
            }
            self.place(start, event);
        }
    }

    /// Where one merged event goes: dropped, held until its window opens, or next.
    fn place(&mut self, start: i64, event: Event) {
        if let Event::Metric(sample, _) = event {
            for i in 0..self.series[sample.series.index()].len() {
                let (exported, gpu) = self.series[sample.series.index()][i];
                let (ws, we) = self.plan.exported[exported].window;
                if ws <= start && start <= we {
                    self.push(Item {
                        start,
                        end: start,
                        exported,
                        event: Event::Metric(sample, gpu),
                    });
                }
            }
            return;
        }
        let timeline = self.plan.activity.timeline;
        let process = process_of(timeline, &event);
        let Some(exported) = self.plan.position(process) else {
            return;
        };
        let window = self.plan.exported[exported].window;
        let span = match event {
            Event::Memory(m) => {
                if m.time.0 <= window.1 {
                    self.push(Item {
                        start,
                        end: start,
                        exported,
                        event,
                    });
                }
                return;
            }
            Event::Nvtx(n) => match (n.kind, n.end) {
                (NvtxKind::Mark, _) => (start, start),
                (_, end) => (start, end.map_or(window.1, |e| e.0)),
            },
            _ => (start, event.span().1),
        };
        let Some((s, e)) = clip(span, window) else {
            return;
        };
        let item = Item {
            start: s,
            end: e,
            exported,
            event,
        };
        if s > start {
            self.held.push(Reverse((s, Reverse(e), event, exported)));
        } else {
            self.push(item);
        }
    }

    /// Readies an event whose clipped start is its own (events arrive in start order).
    fn push(&mut self, item: Item) {
        self.ready.push_back(item);
    }
}

/// Reads the next event of `source` into `head`; its start, or None at the end or on a read
/// error (kept in `error`, the first one only).
fn next_head(
    source: &mut Source,
    head: &mut Option<Event>,
    error: &mut Option<io::Error>,
) -> Option<i64> {
    match source.next()? {
        Ok((start, event)) => {
            *head = Some(event);
            Some(start)
        }
        Err(e) => {
            error.get_or_insert(e);
            None
        }
    }
}

/// A writer of some exported processes, fed by [`Events::drive`] with a context `X` it shares
/// with the others.
pub trait Writer<X> {
    /// One event of its process.
    fn item(&mut self, x: &mut X, item: &Item) -> io::Result<()>;
    /// After every event at `t`: what was due by `t`.
    fn end_group(&mut self, x: &mut X, t: i64) -> io::Result<()>;
    /// When it next has something due without an event.
    fn due(&self) -> Option<i64>;
}

/// Events handed out time by time: [`Stream`] itself, or its groups received from the thread
/// that runs it ([`Shared`]).
pub enum Events<'p, 'a, 't> {
    /// A stream run by the pass itself.
    Own(Stream<'p, 'a, 't>),
    /// A stream run on another thread.
    Shared(Shared),
}

impl<'p, 'a, 't> Events<'p, 'a, 't> {
    /// `shared` when given, else a stream of its own over `parts`.
    pub fn new(
        plan: &'p Plan<'a, 't>,
        parts: &[&'p Joined],
        shared: Option<Shared>,
    ) -> Events<'p, 'a, 't> {
        match shared {
            Some(shared) => Events::Shared(shared),
            None => Events::Own(Stream::new(plan, parts)),
        }
    }

    /// The start of the next group, or None at the end.
    pub fn peek(&mut self) -> io::Result<Option<i64>> {
        match self {
            Events::Own(stream) => stream.peek(),
            Events::Shared(shared) => shared.peek(),
        }
    }

    /// Every event starting at `t` (the time [`Events::peek`] gave or earlier), in their fixed
    /// order.
    pub fn group(&mut self, t: i64, out: &mut Vec<Item>) -> io::Result<()> {
        match self {
            Events::Own(stream) => stream.group(t, out),
            Events::Shared(shared) => {
                shared.group(t, out);
                Ok(())
            }
        }
    }
}

/// Events a batch holds before it is handed over (groups are never split).
const BATCH_ITEMS: usize = 4096;
/// Batches in flight to each reader.
const BATCHES_IN_FLIGHT: usize = 8;

/// Consecutive groups of a stream: their events, and each group's time and end in `items`.
#[derive(Default)]
struct Batch {
    items: Vec<Item>,
    groups: Vec<(i64, usize)>,
}

/// A reader's share of a stream run on another thread ([`share`]): the same groups, a batch at
/// a time.
pub struct Shared {
    batches: Receiver<io::Result<Arc<Batch>>>,
    batch: Arc<Batch>,
    /// The next group in `batch`.
    next: usize,
}

impl Shared {
    fn peek(&mut self) -> io::Result<Option<i64>> {
        while self.next == self.batch.groups.len() {
            match self.batches.recv() {
                Ok(batch) => {
                    self.batch = batch?;
                    self.next = 0;
                }
                // The stream ended.
                Err(_) => return Ok(None),
            }
        }
        Ok(Some(self.batch.groups[self.next].0))
    }

    /// The group at `t`, when the next one is at `t` (after [`Shared::peek`]).
    fn group(&mut self, t: i64, out: &mut Vec<Item>) {
        out.clear();
        let Some(&(time, end)) = self.batch.groups.get(self.next) else {
            return;
        };
        if time == t {
            let start = match self.next {
                0 => 0,
                n => self.batch.groups[n - 1].1,
            };
            out.extend_from_slice(&self.batch.items[start..end]);
            self.next += 1;
        }
    }
}

/// Runs `stream` for `readers` readers: returns the function that runs it (on a thread of its
/// own, while the readers read) and each reader's share. A reader that stops early (on an
/// error) does not stop the others; a read error reaches every reader.
pub fn share<'p, 'a, 't>(
    mut stream: Stream<'p, 'a, 't>,
    readers: usize,
) -> (impl FnOnce() + Send + use<'p, 'a, 't>, Vec<Shared>) {
    let (senders, shares): (Vec<SyncSender<_>>, Vec<Shared>) = (0..readers)
        .map(|_| {
            let (send, batches) = sync_channel(BATCHES_IN_FLIGHT);
            let shared = Shared {
                batches,
                batch: Arc::default(),
                next: 0,
            };
            (send, shared)
        })
        .unzip();
    let run = move || {
        let send = |batch: io::Result<Arc<Batch>>| {
            for sender in &senders {
                let copy = match &batch {
                    Ok(b) => Ok(Arc::clone(b)),
                    Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
                };
                // A reader that stopped has nothing more to read.
                let _ = sender.send(copy);
            }
        };
        let mut batch = Batch::default();
        let mut group = Vec::new();
        loop {
            let t = match stream.peek() {
                Ok(Some(t)) => t,
                Ok(None) => break,
                Err(e) => return send(Err(e)),
            };
            if let Err(e) = stream.group(t, &mut group) {
                return send(Err(e));
            }
            batch.items.extend_from_slice(&group);
            batch.groups.push((t, batch.items.len()));
            if batch.items.len() >= BATCH_ITEMS {
                send(Ok(Arc::new(std::mem::take(&mut batch))));
            }
        }
        if !batch.groups.is_empty() {
            send(Ok(Arc::new(batch)));
        }
    };
    (run, shares)
}

impl Events<'_, '_, '_> {
    /// Feeds every event, time by time, to the writer of its process (`writers` by position in
    /// the plan), then ends the time for each writer that had an event or something due, then
    /// calls `after`; until no event is left and nothing is due.
    pub fn drive<X, W: Writer<X>>(
        &mut self,
        writers: &mut [Option<W>],
        x: &mut X,
        mut after: impl FnMut(&mut X, i64) -> io::Result<()>,
    ) -> io::Result<()> {
        // (time, position) of what each writer has due, at most one entry per writer in
        // `scheduled`; an entry a writer no longer needs only costs it a visit.
        let mut scheduled: Vec<Option<i64>> = writers
            .iter()
            .map(|w| w.as_ref().and_then(W::due))
            .collect();
        let mut due: BinaryHeap<Reverse<(i64, usize)>> = scheduled
            .iter()
            .enumerate()
            .filter_map(|(i, &when)| Some(Reverse((when?, i))))
            .collect();
        let mut group = Vec::new();
        let mut touched: Vec<usize> = Vec::new();
        loop {
            let next_due = due.peek().map(|Reverse((t, _))| *t);
            let t = match (self.peek()?, next_due) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(t) => t,
                    None => return Ok(()),
                },
            };
            self.group(t, &mut group)?;
            touched.clear();
            for item in &group {
                if let Some(w) = writers[item.exported].as_mut() {
                    w.item(x, item)?;
                    touched.push(item.exported);
                }
            }
            while let Some(&Reverse((when, i))) = due.peek()
                && when <= t
            {
                due.pop();
                if scheduled[i] == Some(when) {
                    scheduled[i] = None;
                }
                touched.push(i);
            }
            touched.sort_unstable();
            touched.dedup();
            for &i in &touched {
                if let Some(w) = writers[i].as_mut() {
                    w.end_group(x, t)?;
                    if let Some(when) = w.due()
                        && scheduled[i].is_none_or(|s| when < s)
                    {
                        scheduled[i] = Some(when);
                        due.push(Reverse((when, i)));
                    }
                }
            }
            after(x, t)?;
        }
    }
}

/// The process an event belongs to.
fn process_of(timeline: &crate::model::Timeline, event: &Event) -> ProcessId {
    match event {
        Event::Api(a) => timeline.thread(a.thread).process,
        Event::Os(o) => timeline.thread(o.thread).process,
        Event::Mpi(m) => timeline.thread(m.thread).process,
        Event::Acc(a) => timeline.thread(a.thread).process,
        Event::Nvtx(n) => timeline.thread(n.thread).process,
        Event::Kernel(k) => timeline.stream(k.stream).process,
        Event::Memcpy(m) => timeline.stream(m.stream).process,
        Event::Memset(m) => timeline.stream(m.stream).process,
        Event::Graph(g) => timeline.stream(g.stream).process,
        Event::Metric(_, gpu) => timeline.gpu(*gpu).process,
        Event::Memory(m) => timeline.gpu(m.gpu).process,
        Event::Sample(s) => timeline.thread(s.thread).process,
        Event::Run(r) => timeline.thread(r.thread).process,
        Event::Sync(s) => s.process,
    }
}

/// One source per kind (of `kinds`) of a capture's events, moved onto the merged ids and clock.
fn event_sources(part: &Joined, kinds: Kinds) -> Vec<Source<'_>> {
    let e = &part.events;
    let gpu = vec![
        source(&e.kernels, part, Event::Kernel),
        source(&e.memcpys, part, Event::Memcpy),
        source(&e.memsets, part, Event::Memset),
        source(&e.graph_launches, part, Event::Graph),
        // What a synchronization waited for is found among the GPU operations.
        source(&e.syncs, part, Event::Sync),
    ];
    let others = || {
        vec![
            source(&e.api_calls, part, Event::Api),
            source(&e.os_calls, part, Event::Os),
            mpi_source(part),
            source(&e.acc_events, part, Event::Acc),
            // The GPU a sample is drawn for is set where it is placed.
            source(&e.metrics, part, |m| Event::Metric(m, GpuId(0))),
            source(&e.memory, part, Event::Memory),
            source(&e.samples, part, Event::Sample),
            source(&e.thread_runs, part, Event::Run),
        ]
    };
    match kinds {
        Kinds::All => gpu.into_iter().chain(others()).collect(),
        Kinds::GpuOperations => gpu,
        Kinds::Others => others(),
    }
}

/// A source of one kind: the sorted events, each checked and moved onto the merged timeline,
/// then made an [`Event`] by `make`.
fn source<'p, T: Record + Moved + Fits + 'p>(
    sorted: &'p crate::spill::Sorted<T>,
    part: &'p Joined,
    make: impl Fn(T) -> Event + Send + 'p,
) -> Source<'p> {
    Box::new(sorted.iter().map(move |r| {
        let event = make(part.checked(r?)?);
        Ok((event.span().0, event))
    }))
}

/// The MPI calls of a capture that are drawn: every one but the repeated rows of a wait on
/// several requests.
fn mpi_source(part: &Joined) -> Source<'_> {
    let calls = part.events.mpi_calls.iter().filter(|m| {
        m.as_ref()
            .map_or(true, |m: &MpiCall| m.table != MpiTable::Request)
    });
    Box::new(calls.map(move |r| {
        let event = Event::Mpi(part.checked(r?)?);
        Ok((event.span().0, event))
    }))
}

impl Event {
    /// Its start and end on the merged clock (an instant's end is its time; an open NVTX
    /// range's its start).
    pub fn span(&self) -> (i64, i64) {
        let (start, end) = match self {
            Event::Api(a) => (a.start, a.end),
            Event::Os(o) => (o.start, o.end),
            Event::Mpi(m) => (m.start, m.end),
            Event::Acc(a) => (a.start, a.end),
            Event::Nvtx(n) => (n.start, n.end.unwrap_or(n.start)),
            Event::Kernel(k) => (k.start, k.end),
            Event::Memcpy(m) => (m.start, m.end),
            Event::Memset(m) => (m.start, m.end),
            Event::Graph(g) => (g.start, g.end),
            Event::Metric(m, _) => (m.time, m.time),
            Event::Memory(m) => (m.time, m.time),
            Event::Sample(s) => (s.time, s.time),
            Event::Run(r) => (r.start, r.end),
            Event::Sync(s) => (s.start, s.end),
        };
        (start.0, end.0)
    }
}

/// nsys's name of a copy (`[CUDA memcpy Host-to-Device]`) and its direction, from
/// `ENUM_CUDA_MEMCPY_OPER`.
pub fn copy_names(kind: u8) -> (&'static str, &'static str) {
    match kind {
        1 => ("[CUDA memcpy Host-to-Device]", "Host-to-Device"),
        2 => ("[CUDA memcpy Device-to-Host]", "Device-to-Host"),
        3 => ("[CUDA memcpy Host-to-Array]", "Host-to-Array"),
        4 => ("[CUDA memcpy Array-to-Host]", "Array-to-Host"),
        8 => ("[CUDA memcpy Device-to-Device]", "Device-to-Device"),
        10 => ("[CUDA memcpy Peer-to-Peer]", "Peer-to-Peer"),
        11 => ("[CUDA memcpy Host-to-Host]", "Host-to-Host"),
        _ => ("[CUDA memcpy]", "other"),
    }
}
