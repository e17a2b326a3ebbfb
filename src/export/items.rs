//! What an exported process draws, gathered once for every exporter: its CPU threads' events
//! and its streams' GPU operations, clipped to the part's window, grouped and sorted so that
//! enclosing events come first.

use super::Part;
use crate::classify::Activity;
use crate::classify::streams::clip;
use crate::model::{
    ApiCall, GraphLaunch, Kernel, Memcpy, Memset, NvtxEvent, NvtxKind, OsCall, StreamId, ThreadId,
};
use std::collections::BTreeMap;

/// Something to draw, clipped to the exported window (merged-clock ns).
#[derive(Debug, Clone, Copy)]
pub struct Clipped<T> {
    /// Start.
    pub start: i64,
    /// End.
    pub end: i64,
    /// What it is.
    pub what: T,
}

/// An event of a CPU thread.
#[derive(Debug, Clone, Copy)]
pub enum CpuEvent<'t> {
    /// A CUDA runtime or driver call.
    Api(&'t ApiCall),
    /// An NVTX push/pop range (an unclosed one ends with the window).
    Range(&'t NvtxEvent),
    /// An NVTX start/end range, on the thread that started it.
    StartEnd(&'t NvtxEvent),
    /// An NVTX mark.
    Mark(&'t NvtxEvent),
    /// An OS runtime library call.
    Os(&'t OsCall),
}

/// A GPU operation.
#[derive(Debug, Clone, Copy)]
pub enum GpuOp<'t> {
    /// A kernel.
    Kernel(&'t Kernel),
    /// A memory copy.
    Memcpy(&'t Memcpy),
    /// A memory set.
    Memset(&'t Memset),
    /// A CUDA graph launch (graph-level trace).
    Graph(&'t GraphLaunch),
}

impl GpuOp<'_> {
    /// Correlation id of the launching API call.
    pub fn correlation(&self) -> u32 {
        match self {
            GpuOp::Kernel(k) => k.correlation,
            GpuOp::Memcpy(m) => m.correlation,
            GpuOp::Memset(m) => m.correlation,
            GpuOp::Graph(g) => g.correlation,
        }
    }
}

/// A thread's events, keyed by (tid, thread) so that threads come in tid order.
pub type ThreadEvents<'t> = BTreeMap<(u32, ThreadId), Vec<Clipped<CpuEvent<'t>>>>;

/// A stream's operations, keyed by (device, stream id, stream).
pub type StreamOps<'t> = BTreeMap<(u32, u32, StreamId), Vec<Clipped<GpuOp<'t>>>>;

/// Sorts items so that enclosing ones come first: by start, then longest first.
pub fn sort_nested<T>(items: &mut [Clipped<T>]) {
    items.sort_by_key(|i| (i.start, std::cmp::Reverse(i.end)));
}

/// The CPU events of a part per thread, sorted; start/end ranges only when `start_end`.
pub fn thread_events<'t>(
    activity: &Activity<'t>,
    part: &Part,
    start_end: bool,
) -> ThreadEvents<'t> {
    let timeline = activity.timeline;
    let window = part.window;
    let mut by_thread = ThreadEvents::new();
    let mut add = |thread: ThreadId, span: (i64, i64), what: CpuEvent<'t>| {
        if let Some((start, end)) = clip(span, window) {
            let key = (timeline.thread(thread).tid, thread);
            by_thread
                .entry(key)
                .or_default()
                .push(Clipped { start, end, what });
        }
    };
    for a in activity.api_calls(part.process) {
        add(a.thread, (a.start.0, a.end.0), CpuEvent::Api(a));
    }
    for o in activity.os_calls(part.process) {
        add(o.thread, (o.start.0, o.end.0), CpuEvent::Os(o));
    }
    for e in activity.nvtx(part.process) {
        let span = (e.start.0, e.end.map_or(window.1, |t| t.0));
        match e.kind {
            NvtxKind::PushPop => add(e.thread, span, CpuEvent::Range(e)),
            NvtxKind::StartEnd if start_end => add(e.thread, span, CpuEvent::StartEnd(e)),
            NvtxKind::Mark => add(e.thread, (e.start.0, e.start.0), CpuEvent::Mark(e)),
            NvtxKind::StartEnd | NvtxKind::Metadata => {}
        }
    }
    for items in by_thread.values_mut() {
        sort_nested(items);
    }
    by_thread
}

/// The GPU operations of a part per stream, sorted.
pub fn stream_ops<'t>(activity: &Activity<'t>, part: &Part) -> StreamOps<'t> {
    let timeline = activity.timeline;
    let mut by_stream = StreamOps::new();
    let mut add = |stream: StreamId, span: (i64, i64), what: GpuOp<'t>| {
        if let Some((start, end)) = clip(span, part.window) {
            let s = timeline.stream(stream);
            let key = (timeline.gpu(s.gpu).device, s.stream, stream);
            by_stream
                .entry(key)
                .or_default()
                .push(Clipped { start, end, what });
        }
    };
    for k in activity.kernels(part.process) {
        add(k.stream, (k.start.0, k.end.0), GpuOp::Kernel(k));
    }
    for m in activity.memcpys(part.process) {
        add(m.stream, (m.start.0, m.end.0), GpuOp::Memcpy(m));
    }
    for m in activity.memsets(part.process) {
        add(m.stream, (m.start.0, m.end.0), GpuOp::Memset(m));
    }
    for g in activity.graph_launches(part.process) {
        add(g.stream, (g.start.0, g.end.0), GpuOp::Graph(g));
    }
    for ops in by_stream.values_mut() {
        sort_nested(ops);
    }
    by_stream
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
