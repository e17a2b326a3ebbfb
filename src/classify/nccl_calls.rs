//! What NCCL's own NVTX ranges say about a kernel: the NCCL API call its launch sits in
//! (reference nsys-sqlite.md §10). NCCL wraps each API call in a push/pop range of its own domain
//! (`ncclAllReduce`, `ncclSend`, `ncclGroupStart`, `ncclGroupEnd`, ...), and the kernel of a
//! grouped call is launched inside `ncclGroupEnd`: the calls since the matching `ncclGroupStart`
//! on the same thread tell a collective from point-to-point traffic, and one transfer per peer
//! (point-to-point) from transfers to several peers at once (an all-to-all pattern).

use crate::hash::FxHashMap;
use crate::model::{ApiCall, ProcessId, StringId, ThreadId};

use super::activity::Activity;

/// One NCCL API call, as its NVTX range names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    GroupStart,
    GroupEnd,
    Send,
    Recv,
    /// A collective call, by its kernel-style name (`AllReduce`, `AllGather`, ...).
    Collective(&'static str),
}

/// NCCL API names and the collective each runs (`ncclBcast` is the old name of broadcast).
const COLLECTIVE_CALLS: &[(&str, &str)] = &[
    ("ncclAllReduce", "AllReduce"),
    ("ncclAllGather", "AllGather"),
    ("ncclReduceScatter", "ReduceScatter"),
    ("ncclBroadcast", "Broadcast"),
    ("ncclBcast", "Broadcast"),
    ("ncclReduce", "Reduce"),
    ("ncclAllToAll", "AllToAll"),
    ("ncclAlltoAll", "AllToAll"),
];

/// How far back from a `ncclGroupEnd` the search for its `ncclGroupStart` goes.
const GROUP_SCAN_LIMIT: usize = 4096;

impl Call {
    fn parse(text: &str) -> Option<Call> {
        match text {
            "ncclGroupStart" => Some(Call::GroupStart),
            "ncclGroupEnd" => Some(Call::GroupEnd),
            "ncclSend" => Some(Call::Send),
            "ncclRecv" => Some(Call::Recv),
            _ => COLLECTIVE_CALLS
                .iter()
                .find(|(name, _)| *name == text)
                .map(|&(_, c)| Call::Collective(c)),
        }
    }
}

/// What the NCCL calls around a launch show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// A collective call (`AllReduce`, ...).
    Collective(&'static str),
    /// Point-to-point: at most one send and one receive in the call or group.
    PointToPoint {
        /// Sends in the group.
        sends: u16,
        /// Receives in the group.
        recvs: u16,
    },
    /// Several sends or receives in one group: transfers to several peers at once.
    AllToAll {
        /// Sends in the group.
        sends: u16,
        /// Receives in the group.
        recvs: u16,
    },
}

impl Pattern {
    /// The direction PyTorch's range around a point-to-point call shows: ProcessGroupNCCL
    /// names its `send` and `recv` `nccl:send <rank>-><peer>` and `nccl:recv <rank><-<peer>`
    /// (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp), its dispatcher ops are `c10d::send`
    /// and `c10d::recv_`.
    pub fn of_torch_range(text: &str) -> Option<Pattern> {
        let is = |prefix: &str| {
            text.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
        };
        if is("nccl:send") || is("c10d::send") {
            Some(Pattern::PointToPoint { sends: 1, recvs: 0 })
        } else if is("nccl:recv") || is("c10d::recv_") {
            Some(Pattern::PointToPoint { sends: 0, recvs: 1 })
        } else {
            None
        }
    }
}

/// The NCCL call a launch sat in, and what it shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NcclEvidence {
    /// The range the launch sat in (`ncclGroupEnd`, `ncclAllReduce`, ...).
    pub range: StringId,
    /// What it shows.
    pub pattern: Pattern,
}

/// One thread's NCCL calls, in start order.
type ThreadCalls = Vec<(i64, i64, Call, StringId)>;

/// A process's NCCL API ranges, per thread.
pub struct NcclCalls {
    threads: FxHashMap<ThreadId, ThreadCalls>,
}

impl NcclCalls {
    /// Collects the NCCL API ranges of `process` (push/pop ranges outside the default domain
    /// whose text is an NCCL API name).
    pub fn new(activity: &Activity, process: ProcessId) -> NcclCalls {
        let timeline = activity.timeline;
        let mut parsed: FxHashMap<StringId, Option<Call>> = FxHashMap::default();
        let mut threads: FxHashMap<ThreadId, ThreadCalls> = FxHashMap::default();
        for e in activity.nvtx(process) {
            let (true, Some(end)) = (e.kind.is_range() && e.domain != StringId::EMPTY, e.end)
            else {
                continue;
            };
            let call = *parsed
                .entry(e.text)
                .or_insert_with(|| Call::parse(timeline.text(e.text)));
            if let Some(call) = call {
                let calls = threads.entry(e.thread).or_default();
                calls.push((e.start.0, end.0, call, e.text));
            }
        }
        NcclCalls { threads }
    }

    /// Whether the process has any NCCL API range.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// What the NCCL call around `launch` shows (None when the launch is in no NCCL call, or
    /// its group mixes collectives with point-to-point calls).
    pub fn around(&self, launch: &ApiCall) -> Option<NcclEvidence> {
        let calls = self.threads.get(&launch.thread)?;
        let t = launch.start.0;
        let at = calls.partition_point(|c| c.0 <= t).checked_sub(1)?;
        let (_, end, call, range) = calls[at];
        if end < t {
            return None;
        }
        let pattern = match call {
            Call::Collective(c) => Pattern::Collective(c),
            Call::Send => Pattern::PointToPoint { sends: 1, recvs: 0 },
            Call::Recv => Pattern::PointToPoint { sends: 0, recvs: 1 },
            Call::GroupEnd => group_pattern(&calls[..at])?,
            Call::GroupStart => return None,
        };
        Some(NcclEvidence { range, pattern })
    }
}

/// The pattern of the group a `ncclGroupEnd` closes: `before` holds the thread's calls before
/// it, the group's own since its matching `ncclGroupStart` (groups nest). None when that start
/// is not there (it was before the capture): the calls before it belong to other groups.
fn group_pattern(before: &[(i64, i64, Call, StringId)]) -> Option<Pattern> {
    let (mut depth, mut sends, mut recvs) = (1u32, 0u16, 0u16);
    let mut collective = None;
    let mut calls = before.iter().rev().take(GROUP_SCAN_LIMIT);
    loop {
        match calls.next()?.2 {
            Call::GroupEnd => depth += 1,
            Call::GroupStart => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            Call::Send => sends = sends.saturating_add(1),
            Call::Recv => recvs = recvs.saturating_add(1),
            Call::Collective(c) => collective = Some(c),
        }
    }
    match (collective, sends + recvs) {
        (Some(c), 0) => Some(Pattern::Collective(c)),
        (None, n) if n > 0 && (sends >= 2 || recvs >= 2) => {
            Some(Pattern::AllToAll { sends, recvs })
        }
        (None, n) if n > 0 => Some(Pattern::PointToPoint { sends, recvs }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(list: &[Call]) -> Vec<(i64, i64, Call, StringId)> {
        list.iter()
            .enumerate()
            .map(|(i, &c)| (i as i64 * 10, i as i64 * 10 + 5, c, StringId::EMPTY))
            .collect()
    }

    #[test]
    fn groups_tell_collectives_point_to_point_and_all_to_all_apart() {
        use Call::*;
        // PyTorch's all_to_all_single over 2 ranks: a send and a receive per peer, self included.
        let a2a = calls(&[GroupStart, Send, Recv, Send, Recv]);
        assert_eq!(
            group_pattern(&a2a),
            Some(Pattern::AllToAll { sends: 2, recvs: 2 })
        );
        // A ring step or a 1F1B exchange: one send and one receive.
        let ring = calls(&[Send, GroupStart, Send, Recv]);
        assert_eq!(
            group_pattern(&ring),
            Some(Pattern::PointToPoint { sends: 1, recvs: 1 })
        );
        // Nested groups count as one; calls before the outer start do not count.
        let nested = calls(&[Recv, Recv, GroupStart, GroupStart, Send, GroupEnd]);
        assert_eq!(
            group_pattern(&nested),
            Some(Pattern::PointToPoint { sends: 1, recvs: 0 })
        );
        let coalesced = calls(&[GroupStart, Collective("AllGather"), Collective("AllGather")]);
        assert_eq!(
            group_pattern(&coalesced),
            Some(Pattern::Collective("AllGather"))
        );
        let mixed = calls(&[GroupStart, Collective("AllReduce"), Send]);
        assert_eq!(group_pattern(&mixed), None);
        assert_eq!(group_pattern(&calls(&[GroupStart])), None);
        // The group started before the capture: earlier calls are not its own.
        let cut = calls(&[Collective("AllReduce"), GroupEnd, Send]);
        assert_eq!(group_pattern(&cut), None);
    }

    #[test]
    fn nccl_api_names_parse() {
        assert_eq!(
            Call::parse("ncclBcast"),
            Some(Call::Collective("Broadcast"))
        );
        assert_eq!(Call::parse("ncclSend"), Some(Call::Send));
        assert_eq!(Call::parse("ncclCommCount"), None);
        assert_eq!(Call::parse("nccl:all_to_all"), None);
        // PyTorch's ranges, as ProcessGroupNCCL names them.
        let send = Pattern::PointToPoint { sends: 1, recvs: 0 };
        let recv = Pattern::PointToPoint { sends: 0, recvs: 1 };
        assert_eq!(Pattern::of_torch_range("nccl:send 0->1"), Some(send));
        assert_eq!(Pattern::of_torch_range("nccl:recv 1<-0"), Some(recv));
        assert_eq!(Pattern::of_torch_range("c10d::recv_"), Some(recv));
        assert_eq!(Pattern::of_torch_range("nccl:sendrecv"), None);
        assert_eq!(Pattern::of_torch_range("nccl:all_reduce"), None);
    }
}
