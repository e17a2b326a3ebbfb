//! What MPI calls are: their class (point-to-point, collective, one-sided, I/O, other, as
//! Extrae and nsys2prv group them), and the messages a send and its receive make.
//!
//! Messages are matched the way MPI orders them: on one communicator, the sends from one rank
//! to another with one tag are received in the order they were posted, so the n-th such send
//! (by start) goes to the n-th such receive. A non-blocking receive completes when the wait
//! holding its request returns (`MPI_START_WAIT_EVENTS` has a row per request). What cannot be
//! matched is counted: calls of processes without an MPI rank, receives from any source or with
//! any tag, and sends or receives left without a partner (their other end was not captured).
//! nsys 2022.x records MPI calls as NVTX ranges, without peers or sizes: those make no messages.

use crate::hash::FxHashMap;
use crate::model::{MpiCall, MpiTable, ThreadId, Timeline};
use std::collections::BTreeMap;

/// The class of an MPI call: the Paraver event type nsys2prv (and Extrae) file it under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MpiClass {
    /// Sends, receives, waits and tests.
    PointToPoint,
    /// Collectives (barriers, broadcasts, reductions...).
    Collective,
    /// Everything else (`MPI_Init`, communicator and type management...).
    Other,
    /// One-sided communication (windows, puts, gets, accumulates).
    OneSided,
    /// MPI I/O (`MPI_File_*`).
    Io,
}

impl MpiClass {
    /// Every class, in Paraver type order.
    pub const ALL: [MpiClass; 5] = [
        MpiClass::PointToPoint,
        MpiClass::Collective,
        MpiClass::Other,
        MpiClass::OneSided,
        MpiClass::Io,
    ];

    /// The class of a call: from its table as nsys2prv files it, else (an NVTX-recorded call)
    /// from its name.
    pub fn of(table: MpiTable, name: &str) -> MpiClass {
        let lower = name.to_ascii_lowercase();
        let function = lower.strip_prefix("mpi_").unwrap_or(&lower);
        let io = function.starts_with("file");
        let one_sided = [
            "win",
            "get",
            "put",
            "accumulate",
            "rget",
            "rput",
            "raccumulate",
        ]
        .iter()
        .any(|p| function.starts_with(p))
            || ["fetch_and_op", "compare_and_swap"].contains(&function);
        match table {
            MpiTable::PointToPoint | MpiTable::StartWait | MpiTable::Request => {
                MpiClass::PointToPoint
            }
            MpiTable::Collective if io => MpiClass::Io,
            MpiTable::Collective => MpiClass::Collective,
            _ if io => MpiClass::Io,
            _ if one_sided => MpiClass::OneSided,
            MpiTable::Other => MpiClass::Other,
            MpiTable::Nvtx if is_point_to_point(function) => MpiClass::PointToPoint,
            MpiTable::Nvtx if is_collective(function) => MpiClass::Collective,
            MpiTable::Nvtx => MpiClass::Other,
        }
    }

    /// `point_to_point`, `collective`, `other`, `one_sided` or `io`.
    pub fn name(self) -> &'static str {
        match self {
            MpiClass::PointToPoint => "point_to_point",
            MpiClass::Collective => "collective",
            MpiClass::Other => "other",
            MpiClass::OneSided => "one_sided",
            MpiClass::Io => "io",
        }
    }
}

/// Whether a function (lowercase, without `mpi_`) is a send, receive, wait, test, probe, start
/// or request call.
fn is_point_to_point(function: &str) -> bool {
    function.contains("send")
        || function.contains("recv")
        || [
            "wait", "test", "start", "probe", "iprobe", "mprobe", "improbe", "cancel", "request",
        ]
        .iter()
        .any(|p| function.starts_with(p))
}

/// Whether a function (lowercase, without `mpi_`) is a collective, blocking or not.
fn is_collective(function: &str) -> bool {
    const STEMS: [&str; 11] = [
        "barrier",
        "bcast",
        "reduce",
        "allreduce",
        "alltoall",
        "gather",
        "scatter",
        "allgather",
        "scan",
        "exscan",
        "neighbor_",
    ];
    let stem = |f: &str| STEMS.iter().any(|s| f.starts_with(s));
    stem(function) || function.strip_prefix('i').is_some_and(stem)
}

/// Which end of a message a point-to-point call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Send,
    Receive,
}

/// The end a point-to-point call is, if it is a plain send or receive (`MPI_Sendrecv`, which
/// is both, and persistent requests are neither).
fn end_of(name: &str) -> Option<End> {
    let lower = name.to_ascii_lowercase();
    let function = lower.strip_prefix("mpi_").unwrap_or(&lower);
    match function {
        "send" | "isend" | "bsend" | "ibsend" | "ssend" | "issend" | "rsend" | "irsend" => {
            Some(End::Send)
        }
        "recv" | "irecv" | "mrecv" | "imrecv" => Some(End::Receive),
        _ => None,
    }
}

/// A call, as the events that draw it know it: its thread and start.
pub type CallKey = (ThreadId, i64);

/// One message: a send and the receive that matched it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    /// The sending call.
    pub send: CallKey,
    /// The sending call's span.
    pub send_span: (i64, i64),
    /// The receiving call.
    pub recv: CallKey,
    /// The receiving call's span.
    pub recv_span: (i64, i64),
    /// When the receive completed: the end of the receive, or of the wait on its request.
    pub done: i64,
    /// Bytes sent.
    pub size: u64,
    /// The tag.
    pub tag: i32,
}

/// The messages of a timeline.
#[derive(Debug, Clone, Default)]
pub struct Messages {
    /// Every message, by send start.
    pub list: Vec<Message>,
    /// The sends and receives that make no message.
    pub left_over: LeftOver,
}

/// Sends and receives that make no message, by why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeftOver {
    /// Without a partner.
    pub unmatched: u64,
    /// Receives from any source or with any tag.
    pub wildcard: u64,
    /// Of processes without an MPI rank.
    pub unranked: u64,
}

impl LeftOver {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.unmatched + self.wildcard + self.unranked
    }
}

/// A send or receive waiting for its partner.
#[derive(Debug, Clone, Copy)]
struct Posted {
    key: CallKey,
    span: (i64, i64),
    size: u64,
}

/// (communicator, source rank, destination rank, tag).
type Channel = (u64, i32, i32, i32);

impl Messages {
    /// Matches the sends and receives of `timeline` (its MPI calls in start order).
    pub fn match_all(timeline: &Timeline) -> Messages {
        let mut out = Messages::default();
        let mut sends: BTreeMap<Channel, Vec<Posted>> = BTreeMap::new();
        let mut recvs: BTreeMap<Channel, Vec<Posted>> = BTreeMap::new();
        // A non-blocking receive's request: the receive's (channel, place) until its wait.
        let mut pending: FxHashMap<(u32, u64), (Channel, usize)> = FxHashMap::default();
        let mut done: FxHashMap<(Channel, usize), i64> = FxHashMap::default();
        for call in &timeline.mpi_calls {
            let process = timeline.thread(call.thread).process;
            let key = (process.0, call.request);
            if matches!(call.table, MpiTable::StartWait | MpiTable::Request) {
                if call.request != 0
                    && let Some(posted) = pending.remove(&key)
                {
                    done.insert(posted, call.end.0);
                }
                continue;
            }
            if call.table != MpiTable::PointToPoint {
                continue;
            }
            let Some(end) = end_of(timeline.text(call.name)) else {
                continue;
            };
            let Some(rank) = timeline.process(process).mpi_rank else {
                out.left_over.unranked += 1;
                continue;
            };
            let posted = posted(call);
            let rank = rank as i32;
            match end {
                End::Send => {
                    let channel = (call.comm, rank, call.peer, call.tag);
                    sends.entry(channel).or_default().push(posted);
                }
                End::Receive if call.peer < 0 || call.tag < 0 => out.left_over.wildcard += 1,
                End::Receive => {
                    let channel = (call.comm, call.peer, rank, call.tag);
                    let queue = recvs.entry(channel).or_default();
                    if call.request != 0 && is_non_blocking(timeline, call) {
                        pending.insert(key, (channel, queue.len()));
                    }
                    queue.push(posted);
                }
            }
        }
        for (channel, sent) in &sends {
            let received = recvs.remove(channel).unwrap_or_default();
            let pairs = sent.len().min(received.len());
            out.left_over.unmatched += (sent.len() + received.len() - 2 * pairs) as u64;
            for (place, (s, r)) in sent.iter().zip(&received).enumerate() {
                let completed = done.get(&(*channel, place)).copied();
                out.list.push(Message {
                    send: s.key,
                    send_span: s.span,
                    recv: r.key,
                    recv_span: r.span,
                    done: completed.unwrap_or(r.span.1).max(r.span.1),
                    size: s.size,
                    tag: channel.3,
                });
            }
        }
        out.left_over.unmatched += recvs.values().map(|r| r.len() as u64).sum::<u64>();
        out.list.sort_by_key(|m| (m.send_span.0, m.send, m.recv));
        out
    }
}

fn posted(call: &MpiCall) -> Posted {
    Posted {
        key: (call.thread, call.start.0),
        span: (call.start.0, call.end.0),
        size: call.size,
    }
}

/// Whether a receive returns before its message arrives (`MPI_Irecv`, `MPI_Imrecv`).
fn is_non_blocking(timeline: &Timeline, call: &MpiCall) -> bool {
    let name = timeline.text(call.name).to_ascii_lowercase();
    name.strip_prefix("mpi_").unwrap_or(&name).starts_with('i')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_nsys2prv_tables_and_names() {
        use MpiClass::*;
        use MpiTable as T;
        let cases = [
            (T::PointToPoint, "MPI_Isend", PointToPoint),
            (T::StartWait, "MPI_Waitall", PointToPoint),
            (T::Collective, "MPI_Allreduce", Collective),
            (T::Collective, "MPI_File_write_all", Io),
            (T::Other, "MPI_File_open", Io),
            (T::Other, "MPI_Win_fence", OneSided),
            (T::Other, "MPI_Put", OneSided),
            (T::Other, "MPI_Comm_split", Other),
            (T::Nvtx, "MPI_Send", PointToPoint),
            (T::Nvtx, "MPI_Waitall", PointToPoint),
            (T::Nvtx, "MPI_Ibcast", Collective),
            (T::Nvtx, "MPI_Reduce_scatter_block", Collective),
            (T::Nvtx, "MPI_Init", Other),
            (T::Nvtx, "MPI_Comm_rank", Other),
            (T::Nvtx, "MPI_Get", OneSided),
        ];
        for (table, name, class) in cases {
            assert_eq!(MpiClass::of(table, name), class, "{name}");
        }
    }

    #[test]
    fn ends_are_plain_sends_and_receives() {
        assert_eq!(end_of("MPI_Issend"), Some(End::Send));
        assert_eq!(end_of("MPI_Imrecv"), Some(End::Receive));
        assert_eq!(end_of("MPI_Sendrecv"), None);
        assert_eq!(end_of("MPI_Send_init"), None);
    }
}
