//! GPU idle time per stream, by cause (HTA's categories): between two consecutive operations of
//! a stream, the GPU waited for the host when the second was launched after the first ended;
//! it waited on launch latency ("kernel wait") when it was launched before and the gap is
//! shorter than the launch-gap threshold; anything else is "other".

use crate::classify::Activity;
use crate::classify::streams::clip;
use crate::hash::FxHashMap;
use crate::model::{ProcessId, StreamId, StringId, ThreadId, Timeline};
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
    let mut per_stream: BTreeMap<StreamId, Vec<(i64, i64, u32)>> = BTreeMap::new();
    for (stream, start, end, correlation) in activity.operations(process) {
        if let Some((s, e)) = clip((start.0, end.0), window) {
            per_stream
                .entry(stream)
                .or_default()
                .push((s, e, correlation));
        }
    }
    let mut streams = Vec::new();
    let mut gaps = Vec::new();
    for (stream, mut ops) in per_stream {
        ops.sort_unstable();
        let mut idle = StreamIdle {
            stream,
            ops: ops.len() as u64,
            span_ns: 0,
            idle_ns: 0,
            host_wait_ns: 0,
            kernel_wait_ns: 0,
            other_ns: 0,
        };
        let mut reach = ops[0].1;
        for &(start, end, correlation) in &ops[1..] {
            if start > reach {
                let launch = activity.launch_call(process, correlation);
                let cause = match launch {
                    Some(call) if call.start.0 > reach => Cause::HostWait,
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
                    launcher: launch.map(|c| c.thread),
                });
            }
            reach = reach.max(end);
        }
        idle.span_ns = reach - ops[0].0;
        streams.push(idle);
    }
    // By device and stream number, whatever order the streams were first seen in.
    let timeline = activity.timeline;
    streams.sort_by_key(|s| {
        let stream = timeline.stream(s.stream);
        (timeline.gpu(stream.gpu).device, stream.stream, s.stream)
    });
    (streams, gaps)
}

/// The innermost OS runtime call (`--trace=osrt`) a thread was in at `t`: what a host that let
/// the GPU wait was blocked in (`pthread_cond_wait`, `read`, `poll`...).
pub fn os_call(
    activity: &Activity,
    process: ProcessId,
    thread: ThreadId,
    t: i64,
) -> Option<String> {
    activity
        .os_calls(process)
        .take_while(|o| o.start.0 <= t)
        .filter(|o| o.thread == thread && t < o.end.0)
        .min_by_key(|o| o.end.0 - o.start.0)
        .map(|o| activity.timeline.text(o.name).to_string())
}

/// The function a thread's CPU samples hit most often in `[start, end)` (each sample's
/// innermost frame the sampler could name, else its innermost address; on a tie the first by
/// name), with how many samples hit it and how many the thread had then. None without
/// samples.
pub fn hottest_frame(
    timeline: &Timeline,
    thread: ThreadId,
    (start, end): (i64, i64),
) -> Option<HotFrame> {
    let first = timeline.samples.partition_point(|s| s.time.0 < start);
    let mut hits: FxHashMap<StringId, usize> = FxHashMap::default();
    let mut samples = 0;
    for sample in timeline.samples[first..]
        .iter()
        .take_while(|s| s.time.0 < end)
    {
        if sample.thread != thread {
            continue;
        }
        samples += 1;
        let stack = timeline.stacks.get(sample.stack);
        let named = stack
            .iter()
            .find(|f| !timeline.text(f.symbol).starts_with("0x"));
        if let Some(frame) = named.or(stack.first()) {
            *hits.entry(frame.symbol).or_default() += 1;
        }
    }
    let (function, hits) = hits
        .into_iter()
        .map(|(f, n)| (timeline.text(f), n))
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))?;
    Some(HotFrame {
        function: function.to_string(),
        hits,
        samples,
    })
}

/// The function a thread's CPU samples hit most often over a time.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HotFrame {
    /// The function (the samples' innermost frame).
    pub function: String,
    /// Samples that hit it.
    pub hits: usize,
    /// The thread's samples over that time.
    pub samples: usize,
}

/// What a thread was doing at `t`: the API call it was in, else its innermost NVTX range.
pub fn cpu_activity(
    activity: &Activity,
    process: ProcessId,
    thread: ThreadId,
    t: i64,
) -> Option<String> {
    let timeline = activity.timeline;
    let encloses = |s: i64, e: i64| s <= t && t < e;
    if let Some(call) = activity
        .api_calls(process)
        .find(|a| a.thread == thread && encloses(a.start.0, a.end.0))
    {
        return Some(
            crate::model::split_api_version(timeline.text(call.name))
                .0
                .to_string(),
        );
    }
    activity
        .nvtx(process)
        .filter(|e| e.kind.is_range() && (e.thread == thread || e.end_thread == Some(thread)))
        .filter_map(|e| Some((e.start.0, e.end?.0, e.text)))
        .filter(|&(s, e, _)| encloses(s, e))
        .min_by_key(|&(s, e, _)| e - s)
        .map(|(_, _, text)| timeline.text(text).to_string())
}
