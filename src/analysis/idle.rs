//! GPU idle time per stream, by cause (HTA's categories): between two consecutive operations of
//! a stream, the GPU waited for the host when the second was launched after the first ended;
//! it waited on launch latency ("kernel wait") when it was launched before and the gap is
//! shorter than the launch-gap threshold; anything else is "other".

use crate::classify::Activity;
use crate::classify::streams::clip;
use crate::hash::FxHashMap;
use crate::model::{
    ApiCall, Frame, Hit, OsCall, ProcessId, SampleEvent, StreamId, StringId, ThreadId, Timeline,
    module_file, split_api_version,
};
use std::collections::BTreeMap;

/// Why a stream was idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The next operation was launched after the previous one ended.
    HostWait,
    /// Launched in time; a short gap (launch latency).
    KernelWait,
    /// Anything else (dependencies on other streams, events).
    Other,
}

impl Cause {
    /// Its name in tables and notes (`host_wait`, as the `host_wait_ns` column).
    pub fn name(self) -> &'static str {
        match self {
            Cause::HostWait => "host_wait",
            Cause::KernelWait => "kernel_wait",
            Cause::Other => "other",
        }
    }
}

/// One idle gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// The stream.
    pub stream: StreamId,
    /// Gap start (the previous operation's end), ns.
    pub start: i64,
    /// Gap end (the next operation's start), ns.
    pub end: i64,
    /// Why.
    pub cause: Cause,
    /// The thread that launched the next operation, when known.
    pub launcher: Option<ThreadId>,
}

/// One stream's idle time inside the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamIdle {
    /// The stream.
    pub stream: StreamId,
    /// Operations inside the window.
    pub ops: u64,
    /// Time from its first operation's start to its last one's end, ns.
    pub span_ns: i64,
    /// Idle time between its operations, ns.
    pub idle_ns: i64,
    /// Of which host wait, ns.
    pub host_wait_ns: i64,
    /// Of which kernel wait, ns.
    pub kernel_wait_ns: i64,
    /// Of which other, ns.
    pub other_ns: i64,
}

/// Per stream idle times, and every gap (for the longest ones).
pub fn rank_idle(
    activity: &Activity,
    process: ProcessId,
    window: (i64, i64),
    launch_gap: i64,
) -> (Vec<StreamIdle>, Vec<Gap>) {
    let mut ops: Vec<(i64, i64, u32, StreamId)> = (activity.operations(process))
        .map(|(stream, start, end, correlation)| (start.0, end.0, correlation, stream))
        .collect();
    ops.sort_unstable();
    let mut tally = IdleTally::new(window);
    for (start, end, correlation, stream) in ops {
        tally.operation(stream, (start, end), correlation);
    }
    let launch = |c| {
        activity
            .launch_call(process, c)
            .map(|a| (a.start.0, a.thread))
    };
    tally.finish(activity.timeline, launch, launch_gap)
}

/// A process's idle gaps over a window, from its GPU operations handed over in start order on
/// each stream ([`IdleTally::operation`]); the launch of the operation after each gap gives
/// the gap's cause ([`IdleTally::finish`]). The whole timeline ([`rank_idle`]) and the passes
/// over captures feed it alike.
pub struct IdleTally {
    window: (i64, i64),
    streams: BTreeMap<StreamId, StreamGaps>,
}

/// One stream's operations so far.
#[derive(Default)]
struct StreamGaps {
    ops: u64,
    /// The first operation's start.
    first: Option<i64>,
    /// The latest end so far.
    reach: i64,
    /// Operations starting at one time, not yet measured: they count in the order of their
    /// ends, then their correlation ids.
    tied: Vec<(i64, i64, u32)>,
    /// Each gap: its start, its end, and the correlation id of the operation after it.
    gaps: Vec<(i64, i64, u32)>,
}

impl StreamGaps {
    fn push(&mut self, op: (i64, i64, u32)) {
        if self.tied.first().is_some_and(|t| t.0 != op.0) {
            self.settle();
        }
        self.tied.push(op);
    }

    fn settle(&mut self) {
        let mut tied = std::mem::take(&mut self.tied);
        tied.sort_unstable();
        for &(start, end, correlation) in &tied {
            self.ops += 1;
            if self.first.is_none() {
                self.first = Some(start);
                self.reach = end;
                continue;
            }
            if start > self.reach {
                self.gaps.push((self.reach, start, correlation));
            }
            self.reach = self.reach.max(end);
        }
        tied.clear();
        self.tied = tied;
    }
}

impl IdleTally {
    /// Gaps inside `window`.
    pub fn new(window: (i64, i64)) -> IdleTally {
        IdleTally {
            window,
            streams: BTreeMap::new(),
        }
    }

    /// One GPU operation of `stream`, clipped to the window; each stream's come in start
    /// order.
    pub fn operation(&mut self, stream: StreamId, span: (i64, i64), correlation: u32) {
        if let Some((start, end)) = clip(span, self.window) {
            let gaps = self.streams.entry(stream).or_default();
            gaps.push((start, end, correlation));
        }
    }

    /// The correlation ids of the operations after the gaps: the launches
    /// [`IdleTally::finish`] asks for.
    pub fn launches_wanted(&mut self) -> impl Iterator<Item = u32> + '_ {
        self.streams.values_mut().flat_map(|s| {
            s.settle();
            s.gaps.iter().map(|g| g.2)
        })
    }

    /// Per stream idle times and every gap, each gap's cause from `launch` (the start and
    /// thread of the call that launched the operation of a correlation id, when known); the
    /// streams by device and stream number.
    pub fn finish(
        mut self,
        timeline: &Timeline,
        launch: impl Fn(u32) -> Option<(i64, ThreadId)>,
        launch_gap: i64,
    ) -> (Vec<StreamIdle>, Vec<Gap>) {
        let mut streams = Vec::new();
        let mut gaps = Vec::new();
        for (stream, mut tally) in std::mem::take(&mut self.streams) {
            tally.settle();
            let mut idle = StreamIdle {
                stream,
                ops: tally.ops,
                span_ns: tally.reach - tally.first.unwrap_or(tally.reach),
                idle_ns: 0,
                host_wait_ns: 0,
                kernel_wait_ns: 0,
                other_ns: 0,
            };
            for (reach, start, correlation) in tally.gaps {
                let launch = launch(correlation);
                let cause = match launch {
                    Some((called, _)) if called > reach => Cause::HostWait,
                    Some(_) if start - reach < launch_gap => Cause::KernelWait,
                    _ => Cause::Other,
                };
                let length = start - reach;
                idle.idle_ns += length;
                *match cause {
                    Cause::HostWait => &mut idle.host_wait_ns,
                    Cause::KernelWait => &mut idle.kernel_wait_ns,
                    Cause::Other => &mut idle.other_ns,
                } += length;
                gaps.push(Gap {
                    stream,
                    start: reach,
                    end: start,
                    cause,
                    launcher: launch.map(|(_, thread)| thread),
                });
            }
            streams.push(idle);
        }
        // By device and stream number, whatever order the streams were first seen in.
        streams.sort_by_key(|s| {
            let stream = timeline.stream(s.stream);
            (timeline.gpu(stream.gpu).device, stream.stream, s.stream)
        });
        (streams, gaps)
    }
}

/// What the thread that launched the operation after a gap was doing in the middle of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GapContext {
    /// The API call it was in, else its innermost NVTX range.
    pub cpu: Option<String>,
    /// The innermost OS runtime call it was in (captures with `--trace=osrt`).
    pub os_call: Option<String>,
    /// The function its CPU samples hit most often during the gap (captures with CPU
    /// sampling).
    pub hot_frame: Option<HotFrame>,
}

/// What a thread was doing during a gap, found in the API calls, OS runtime calls and CPU
/// samples handed over (each kind in start order): the API call it was in at the gap's middle
/// (else its innermost NVTX range then), the innermost OS call it was in then (what a host
/// that let the GPU wait was blocked in: `pthread_cond_wait`, `read`, `poll`...), and the
/// function its samples hit most often during the gap.
pub struct GapWitness {
    process: ProcessId,
    thread: ThreadId,
    gap: (i64, i64),
    /// The API call at the middle, the first found.
    call: Option<StringId>,
    /// The shortest OS call around the middle, the first of its length, and its length.
    os_call: Option<(i64, StringId)>,
    /// Samples during the gap, by what they hit.
    hits: FxHashMap<Hit, usize>,
    samples: usize,
}

impl GapWitness {
    /// What `thread` of `process` was doing during `gap`.
    pub fn new(process: ProcessId, thread: ThreadId, gap: (i64, i64)) -> GapWitness {
        GapWitness {
            process,
            thread,
            gap,
            call: None,
            os_call: None,
            hits: FxHashMap::default(),
            samples: 0,
        }
    }

    /// The process the thread belongs to.
    pub fn process(&self) -> ProcessId {
        self.process
    }

    fn middle(&self) -> i64 {
        self.gap.0 + (self.gap.1 - self.gap.0) / 2
    }

    /// An API call of the process.
    pub fn call(&mut self, call: &ApiCall) {
        let t = self.middle();
        if self.call.is_none() && call.thread == self.thread && call.start.0 <= t && t < call.end.0
        {
            self.call = Some(call.name);
        }
    }

    /// An OS runtime call of the process.
    pub fn os_call(&mut self, call: &OsCall) {
        let t = self.middle();
        if call.thread == self.thread && call.start.0 <= t && t < call.end.0 {
            let length = call.end.0 - call.start.0;
            if self.os_call.is_none_or(|(shortest, _)| length < shortest) {
                self.os_call = Some((length, call.name));
            }
        }
    }

    /// A CPU sample; it counts for what it hit ([`Frame::hit`]: its innermost named function,
    /// else its innermost known module, else its innermost address).
    pub fn sample(&mut self, timeline: &Timeline, sample: &SampleEvent) {
        let (start, end) = self.gap;
        if sample.thread != self.thread || sample.time.0 < start || sample.time.0 >= end {
            return;
        }
        self.samples += 1;
        let stack = timeline.stacks.get(sample.stack);
        if let Some(hit) = Frame::hit(stack, |s| timeline.text(s)) {
            *self.hits.entry(hit).or_default() += 1;
        }
    }

    /// What was found; the CPU activity falls back on the thread's innermost NVTX range at the
    /// middle.
    pub fn finish(self, activity: &Activity) -> GapContext {
        let timeline = activity.timeline;
        let t = self.middle();
        let thread = self.thread;
        let call = self
            .call
            .map(|name| split_api_version(timeline.text(name)).0.to_string());
        let range = || {
            activity
                .nvtx(self.process)
                .filter(|e| {
                    e.kind.is_range() && (e.thread == thread || e.end_thread == Some(thread))
                })
                .filter_map(|e| Some((e.start.0, e.end?.0, e.text)))
                .filter(|&(s, e, _)| s <= t && t < e)
                .min_by_key(|&(s, e, _)| e - s)
                .map(|(_, _, text)| timeline.text(text).to_string())
        };
        let hot_frame = (self.hits.into_iter())
            .map(|(hit, n)| (hit_text(timeline, hit), n))
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
            .map(|(function, hits)| HotFrame {
                function: function.to_string(),
                hits,
                samples: self.samples,
            });
        GapContext {
            cpu: call.or_else(range),
            os_call: self
                .os_call
                .map(|(_, name)| timeline.text(name).to_string()),
            hot_frame,
        }
    }
}

/// What the launching thread was doing during `gap` ([`GapWitness`]), over the whole timeline.
pub fn gap_context(activity: &Activity, process: ProcessId, gap: &Gap) -> GapContext {
    let Some(thread) = gap.launcher else {
        return GapContext::default();
    };
    let mut witness = GapWitness::new(process, thread, (gap.start, gap.end));
    // Calls in start order: none starting after the middle can hold it.
    let middle = witness.middle();
    let by_middle = |start: i64| start <= middle;
    (activity.api_calls(process))
        .take_while(|c| by_middle(c.start.0))
        .for_each(|c| witness.call(c));
    (activity.os_calls(process))
        .take_while(|o| by_middle(o.start.0))
        .for_each(|o| witness.os_call(o));
    let samples = &activity.timeline.samples;
    let first = samples.partition_point(|s| s.time.0 < gap.start);
    for sample in samples[first..].iter().take_while(|s| s.time.0 < gap.end) {
        witness.sample(activity.timeline, sample);
    }
    witness.finish(activity)
}

/// How a [`Hit`] reads: a function by its name, a module by its file name in brackets
/// (`[libcuda.so.1]`; `[kernel.kallsyms]` as it is), an address as it is.
fn hit_text(timeline: &Timeline, hit: Hit) -> String {
    match hit {
        Hit::Function(s) | Hit::Address(s) => timeline.text(s).to_string(),
        Hit::Module(m) => {
            let module = timeline.text(m);
            match module.starts_with('[') {
                true => module.to_string(),
                false => format!("[{}]", module_file(module)),
            }
        }
    }
}

/// The function a thread's CPU samples hit most often over a time.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HotFrame {
    /// What the samples hit ([`Frame::hit`]): a function's name, else a module in brackets
    /// (`[kernel.kallsyms]`, `[libcuda.so.1]`: no frame of those samples was named), else an
    /// address.
    pub function: String,
    /// Samples that hit it.
    pub hits: usize,
    /// The thread's samples over that time.
    pub samples: usize,
}
