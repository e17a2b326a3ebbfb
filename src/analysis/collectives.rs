//! Collective instances matched across their member ranks: who arrived last at each one, by
//! how much, and how long every other member waited for it.
//!
//! A kernel's collective is what the trace says it is ([`CommKernel::op`]): NCCL's call around
//! its launch, else PyTorch's collective range (`nccl:all_to_all` around a `SendRecv` kernel is
//! an all-to-all), else its name. A family of collectives is one collective run as one kernel
//! name (which carries NCCL's algorithm and data type); on each member it runs on one stream,
//! whatever that stream's id (every process numbers its own streams). The k-th kernel of each
//! member's stream is one instance, the NCCL sequence number within that communicator.
//!
//! One family can hold several communicators: across hosts (each node's own tensor-parallel
//! all-reduce), on one host (one tensor-parallel group per pipeline stage), and on one rank
//! (its tensor- and data-parallel all-reduces, on two streams). On one host, streams whose k-th
//! kernels are often disjoint in time are apart: the members of one collective are all inside
//! it at once; a communicator holds one stream per rank. Across hosts, groups join only when
//! their instances' end times keep a constant distance (one clock offset; members leave a
//! collective nearly together), as `--align collectives` requires too. Two groups that run their
//! collectives at the same moments on one host (the tensor-parallel groups of two data-parallel
//! replicas on one node) cannot be told apart this way: NCCL's payloads would. Point-to-point
//! transfers are not collectives here ([`add_transfers`] matches them sender to receiver).
//!
//! A communicator the collective's own records name comes first: NCCL's communicator id (its
//! NVTX payloads) or PyTorch's process group (`record_param_comms`); a family is then one
//! collective run as one kernel name within one recorded communicator, and timing only splits
//! what the records leave together.
//!
//! An instance's arrival of a member is its kernel's start: the last to arrive is the
//! straggler, the skew is last minus first arrival, and each member waited `last - own`. Its
//! size is what the records say ([`Size`](crate::classify::payloads::Size)); its bus bandwidth is NCCL's (nccl-tests'
//! `PERFORMANCE.md`): the size over the collective proper (from the last arrival to the last
//! end) times a factor per collective ([`bus_factor`]).

use crate::classify::layout::{self, Transfer};
use crate::classify::payloads::{CallArgs, CommunicatorId, NcclPayloads};
use crate::classify::rules::{Purpose, RoleRules};
use crate::classify::{Activity, CommKernel, Evidence, RankStreams, streams};
use crate::model::{ProcessId, StreamId, StringId};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// Two hosts' instances of one family whose end-time distances spread wider than this belong to
/// different communicators.
pub const AGREEMENT_NS: i64 = 5_000;

/// A communicator: one family on one stream of each member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Communicator {
    /// The kernel name (short) the family runs.
    pub kernel: StringId,
    /// The collective (`nccl:AllReduce`, `nccl:AllToAll`, ...; [`CommKernel::op`]).
    pub op: String,
    /// Members (indices into the processes given), ascending.
    pub members: Vec<usize>,
    /// What tells its members apart from other communicators'.
    pub matched_by: MatchedBy,
}

/// The evidence a communicator rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MatchedBy {
    /// NCCL's communicator id, from its NVTX payloads.
    NcclId,
    /// PyTorch's process group, from `record_param_comms`.
    ProcessGroup,
    /// Timing alone: members inside their kernels at once, ends a constant distance apart
    /// across hosts.
    Timing,
    /// A point-to-point transfer matched sender to receiver.
    Transfer,
}

impl MatchedBy {
    /// Its name in the outputs.
    pub fn name(self) -> &'static str {
        match self {
            MatchedBy::NcclId => "nccl_id",
            MatchedBy::ProcessGroup => "process_group",
            MatchedBy::Timing => "timing",
            MatchedBy::Transfer => "transfer",
        }
    }
}

/// One member's part in an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// The member (index into the processes given).
    pub rank: usize,
    /// The stream its kernel ran on.
    pub stream: StreamId,
    /// Its kernel's start, ns.
    pub start: i64,
    /// Its kernel's end, ns.
    pub end: i64,
}

/// One collective instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// Its communicator (index into [`Collectives::communicators`]).
    pub communicator: usize,
    /// Its sequence number within the communicator, from 0.
    pub sequence: u32,
    /// Every member's arrival, in member order.
    pub arrivals: Vec<Arrival>,
    /// How many ranks its communicator has: as recorded, else its members here.
    pub ranks: u32,
    /// Its buffer size, bytes, when a record gives it ([`Size::buffer_bytes`](crate::classify::payloads::Size::buffer_bytes); the largest
    /// among the members).
    pub bytes: Option<u64>,
}

impl Instance {
    /// The first and the last arrival; the last is the lowest rank among equal starts.
    pub fn first_last(&self) -> (Arrival, Arrival) {
        let first = *self
            .arrivals
            .iter()
            .min_by_key(|a| a.start)
            .expect("members");
        let last = *self
            .arrivals
            .iter()
            .max_by_key(|a| (a.start, std::cmp::Reverse(a.rank)))
            .expect("members");
        (first, last)
    }

    /// Whether every member arrived inside its window (`window` of a member's index).
    pub fn within(&self, window: impl Fn(usize) -> (i64, i64)) -> bool {
        self.arrivals.iter().all(|a| {
            let (start, end) = window(a.rank);
            start <= a.start && a.start < end
        })
    }

    /// Last minus first arrival, ns.
    pub fn skew(&self) -> i64 {
        let (first, last) = self.first_last();
        last.start - first.start
    }

    /// From the last arrival to the last member's end: the collective proper, ns.
    pub fn duration(&self) -> i64 {
        let (_, last) = self.first_last();
        let end = self.arrivals.iter().map(|a| a.end).max().expect("members");
        end - last.start
    }

    /// Its bus bandwidth as collective `op`, GB/s: bytes over [`Instance::duration`] times
    /// [`bus_factor`]; None without a size, a factor or a duration.
    pub fn busbw_gbps(&self, op: &str) -> Option<f64> {
        let bytes = self.bytes? as f64;
        let duration = self.duration();
        (duration > 0).then_some(())?;
        Some(bytes / duration as f64 * bus_factor(op, self.ranks)?)
    }
}

/// NCCL's bus-bandwidth factor of collective `op` among `n` ranks (nccl-tests'
/// `PERFORMANCE.md`): 2(n−1)/n for an all-reduce, (n−1)/n for an all-gather, a reduce-scatter
/// and an all-to-all, 1 for a broadcast, a reduce and a send/receive; None for another.
pub fn bus_factor(op: &str, n: u32) -> Option<f64> {
    let share = f64::from(n.saturating_sub(1)) / f64::from(n.max(1));
    match op {
        "nccl:AllReduce" => Some(2.0 * share),
        "nccl:AllGather" | "nccl:ReduceScatter" | "nccl:AllToAll" => Some(share),
        "nccl:Broadcast" | "nccl:Reduce" | "nccl:SendRecv" | P2P_OP => Some(1.0),
        _ => None,
    }
}

/// Every communicator and instance of a run.
#[derive(Debug, Clone, Default)]
pub struct Collectives {
    /// Communicators, by family then first member.
    pub communicators: Vec<Communicator>,
    /// Instances with two members or more, by first arrival.
    pub instances: Vec<Instance>,
    /// Kernels that are part of a collective (by their evidence), matched or not.
    pub kernels: u64,
    /// Point-to-point kernels that nothing but their name describes: an all-to-all or a
    /// collective run as `SendRecv` looks like this when the capture has neither NCCL's NVTX
    /// nor PyTorch's collective ranges.
    pub unnamed_transfers: u64,
    /// Communication kernels launched before the capture began: their launch, which says which
    /// collective they carry, is not in it (their role comes from their stream's other
    /// kernels), so they are in no instance.
    pub unlaunched: u64,
    /// The processes matched.
    pub processes: usize,
    /// The largest communicator size the collectives' records give, when any.
    pub recorded_ranks: Option<u32>,
    /// The largest number of ranks a report says its run has (torch.profiler's
    /// `distributedInfo.world_size`), when any.
    pub world_size: Option<u32>,
}

/// One member's stream of a family: (member, stream).
type Unit = (usize, StreamId);

/// One member's kernel of a collective: its (start, end) and its call's records.
#[derive(Debug, Clone, Copy)]
struct Part {
    span: (i64, i64),
    args: CallArgs,
}

/// One family's kernels per unit, in start order.
type PerUnit = BTreeMap<Unit, Vec<Part>>;

/// A family: one collective, one kernel name, one recorded communicator (when any).
type Family = (Purpose, StringId, Option<CommunicatorId>);

/// The whole capture, as a classification window.
pub const WHOLE: (i64, i64) = (i64::MIN, i64::MAX);

/// Matches every collective instance of `processes` (members are indices into it) over the
/// whole capture, each kernel's collective from its evidence under `rules`.
pub fn match_instances(
    activity: &Activity,
    processes: &[ProcessId],
    rules: &RoleRules,
) -> Collectives {
    let classify =
        |rank: usize| Cow::Owned(streams::classify(activity, processes[rank], WHOLE, rules));
    match_each(activity, processes, rules, classify)
}

/// [`match_instances`] of processes already classified over the whole capture (`classified`,
/// one per process).
pub fn match_classified(
    activity: &Activity,
    processes: &[ProcessId],
    rules: &RoleRules,
    classified: &[RankStreams],
) -> Collectives {
    match_each(activity, processes, rules, |rank| {
        Cow::Borrowed(&classified[rank])
    })
}

/// Matches the collectives of `processes`, each classified (over the whole capture) when
/// `classify` gives its streams: one at a time, unless they are at hand.
fn match_each<'c>(
    activity: &Activity,
    processes: &[ProcessId],
    rules: &RoleRules,
    classify: impl Fn(usize) -> Cow<'c, RankStreams>,
) -> Collectives {
    let timeline = activity.timeline;
    let payloads = NcclPayloads::new(activity, processes);
    let world_size = (processes.iter())
        .filter_map(|&p| timeline.report(timeline.process(p).report).meta.world_size)
        .max();
    let mut out = Collectives {
        processes: processes.len(),
        world_size,
        ..Collectives::default()
    };
    // Per family, per member's stream: its kernels in start order; and whether the kernel is a
    // transfer (an all-to-all's `SendRecv`).
    let mut families: BTreeMap<Family, PerUnit> = BTreeMap::new();
    let mut transfers: BTreeSet<StringId> = BTreeSet::new();
    for (rank, &process) in processes.iter().enumerate() {
        let classified = classify(rank);
        for k in &classified.comm {
            let CommKernel { op: Some(op), .. } = k else {
                out.unnamed_transfers += u64::from(k.evidence == Evidence::KernelName);
                out.unlaunched += u64::from(k.evidence == Evidence::Stream);
                continue;
            };
            out.kernels += 1;
            if k.point_to_point {
                transfers.insert(k.name);
            }
            let args = payloads.args(process, k.correlation);
            out.recorded_ranks = out.recorded_ranks.max(args.ranks);
            families
                .entry((*op, k.name, args.communicator))
                .or_default()
                .entry((rank, k.stream))
                .or_default()
                .push(Part {
                    span: (k.start, k.end),
                    args,
                });
        }
    }
    let host_of = |rank: usize| timeline.process(processes[rank]).host.index();
    for ((op, kernel, recorded), per_unit) in families {
        let co_ending = !transfers.contains(&kernel);
        let op = rules.label(op);
        for members in communicators(&per_unit, &host_of, co_ending) {
            let id = out.communicators.len();
            out.instances.extend(instances(id, op, &members, &per_unit));
            out.communicators.push(Communicator {
                kernel,
                op: op.to_string(),
                members: members.iter().map(|&(rank, _)| rank).collect(),
                matched_by: match recorded {
                    Some(CommunicatorId::Nccl(_)) => MatchedBy::NcclId,
                    Some(CommunicatorId::ProcessGroup(_)) => MatchedBy::ProcessGroup,
                    None => MatchedBy::Timing,
                },
            });
        }
    }
    out.instances.retain(|i| i.arrivals.len() >= 2);
    out.instances
        .sort_by_key(|i| (i.first_last().0.start, i.communicator));
    out
}

/// The instances of communicator `id` (collective `op`): the k-th kernel of each member's
/// stream, for every k all of them have.
fn instances<'a>(
    id: usize,
    op: &'a str,
    members: &'a [Unit],
    per_unit: &'a PerUnit,
) -> impl Iterator<Item = Instance> + 'a {
    let kernels: Vec<&Vec<Part>> = members.iter().map(|u| &per_unit[u]).collect();
    let count = kernels.iter().map(|k| k.len()).min().unwrap_or(0);
    (0..count).map(move |sequence| {
        let parts = kernels.iter().map(|k| k[sequence]);
        let ranks = parts
            .clone()
            .filter_map(|p| p.args.ranks)
            .max()
            .unwrap_or(members.len() as u32);
        let bytes = parts
            .clone()
            .filter_map(|p| Some(p.args.size?.buffer_bytes(op, ranks)))
            .max();
        let arrivals = members
            .iter()
            .zip(parts)
            .map(|(&(rank, stream), p)| Arrival {
                rank,
                stream,
                start: p.span.0,
                end: p.span.1,
            })
            .collect();
        Instance {
            communicator: id,
            sequence: sequence as u32,
            arrivals,
            ranks,
            bytes,
        }
    })
}

/// A family's communicators, each its members' streams in member order: on each host (one
/// clock), streams whose k-th kernels never overlap in a share of instances are apart (the
/// members of one collective are all inside it at once), and a communicator holds one stream
/// per member; then groups of different hosts join when the distance between their instances'
/// median ends stays within [`AGREEMENT_NS`] (one clock offset). With `co_ending`, streams of
/// one host must also end their kernels together ([`CO_ENDING_EVIDENCE`]).
fn communicators(
    per_unit: &PerUnit,
    host_of: &dyn Fn(usize) -> usize,
    co_ending: bool,
) -> Vec<Vec<Unit>> {
    let mut by_host: BTreeMap<usize, Vec<Unit>> = BTreeMap::new();
    for &unit in per_unit.keys() {
        by_host.entry(host_of(unit.0)).or_default().push(unit);
    }
    let groups: Vec<(usize, Vec<Unit>)> = by_host
        .into_iter()
        .flat_map(|(host, units)| {
            local_groups(per_unit, &units, co_ending)
                .into_iter()
                .map(move |g| (host, g))
        })
        .collect();
    let ends: Vec<Vec<i64>> = groups
        .iter()
        .map(|(_, g)| median_ends(per_unit, g))
        .collect();
    // Union of groups of different hosts; a joined set never holds two groups of one host.
    let mut joined_to: Vec<usize> = (0..groups.len()).collect();
    let mut hosts: Vec<BTreeSet<usize>> =
        groups.iter().map(|(h, _)| BTreeSet::from([*h])).collect();
    for a in 0..groups.len() {
        for b in a + 1..groups.len() {
            let (x, y) = (joined_to[a], joined_to[b]);
            if x != y && hosts[x].is_disjoint(&hosts[y]) && agree(&ends[a], &ends[b]) {
                let moved = std::mem::take(&mut hosts[y]);
                hosts[x].extend(moved);
                joined_to
                    .iter_mut()
                    .filter(|g| **g == y)
                    .for_each(|g| *g = x);
            }
        }
    }
    let mut joined: BTreeMap<usize, Vec<Unit>> = BTreeMap::new();
    for (g, (_, units)) in groups.into_iter().enumerate() {
        joined.entry(joined_to[g]).or_default().extend(units);
    }
    joined
        .into_values()
        .map(|mut members| {
            members.sort_unstable();
            members
        })
        .collect()
}

/// The share of instances in which two streams' kernels may be disjoint and the streams still
/// be one communicator's (slack for kernels cut at the capture's edges).
const DISJOINT_SHARE: f64 = 0.1;

/// With this many instances or more, two streams of one host are one communicator's only when
/// their kernels end within [`AGREEMENT_NS`] of each other in at least half of them (on one
/// node the members of a collective kernel leave it together; two groups running side by side
/// do not). With fewer, overlapping in time is all the evidence there is. An all-to-all run as
/// point-to-point kernels has no such test: each member's kernel ends with its own transfers
/// (tens of µs apart on one H100 node), so two all-to-all groups that run side by side on one
/// host in lockstep are not told apart.
const CO_ENDING_EVIDENCE: usize = 3;

/// One host's streams of a family, grouped: a stream joins the first group that has no stream
/// of its rank and all of whose members it runs its collectives with ([`DISJOINT_SHARE`],
/// [`CO_ENDING_EVIDENCE`]), else starts a group.
fn local_groups(per_unit: &PerUnit, units: &[Unit], co_ending: bool) -> Vec<Vec<Unit>> {
    let together = |p: Unit, q: Unit| {
        let (a, b) = (&per_unit[&p], &per_unit[&q]);
        let n = a.len().min(b.len());
        let pairs = || a.iter().zip(b).map(|(x, y)| (x.span, y.span));
        let disjoint = pairs()
            .filter(|((s1, e1), (s2, e2))| e1 < s2 || e2 < s1)
            .count();
        let ended_together = pairs()
            .filter(|((_, e1), (_, e2))| (e1 - e2).abs() <= AGREEMENT_NS)
            .count();
        p.0 != q.0
            && disjoint as f64 <= DISJOINT_SHARE * n as f64
            && (!co_ending || n < CO_ENDING_EVIDENCE || 2 * ended_together >= n)
    };
    let mut groups: Vec<Vec<Unit>> = Vec::new();
    for &u in units {
        match groups
            .iter_mut()
            .find(|g| g.iter().all(|&m| together(m, u)))
        {
            Some(g) => g.push(u),
            None => groups.push(vec![u]),
        }
    }
    groups
}

/// The median end of a group's k-th instance, for every k all its streams have.
fn median_ends(per_unit: &PerUnit, units: &[Unit]) -> Vec<i64> {
    let count = units.iter().map(|u| per_unit[u].len()).min().unwrap_or(0);
    (0..count)
        .map(|k| {
            let mut e: Vec<i64> = units.iter().map(|u| per_unit[u][k].span.1).collect();
            super::upper_median(&mut e).expect("a group has streams")
        })
        .collect()
}

/// Whether two groups' ends keep one distance (within [`AGREEMENT_NS`]).
fn agree(a: &[i64], b: &[i64]) -> bool {
    let distances: Vec<i64> = a.iter().zip(b).map(|(x, y)| y - x).collect();
    let (lo, hi) = (distances.iter().min(), distances.iter().max());
    lo.zip(hi).is_some_and(|(lo, hi)| hi - lo <= AGREEMENT_NS)
}

/// The op of point-to-point instances.
pub const P2P_OP: &str = "p2p";

/// Adds the point-to-point transfers matched sender to receiver ([`layout::pairs`]) as
/// two-member instances, one communicator per (sender, receiver), sequence numbers in time
/// order, each the size its send's record gives (else its receive's); `transfers` holds each
/// member's (same order as the processes matched).
pub fn add_transfers(collectives: &mut Collectives, transfers: &[Vec<Transfer>]) {
    // Per (sender, receiver): each exchange's arrivals and size.
    type Exchanges = Vec<([Arrival; 2], Option<u64>)>;
    let mut by_pair: BTreeMap<(usize, usize), Exchanges> = BTreeMap::new();
    for p in layout::pairs(transfers) {
        let arrival = |(rank, i): (usize, usize)| {
            let t = transfers[rank][i];
            Arrival {
                rank,
                stream: t.stream,
                start: t.start,
                end: t.end,
            }
        };
        let pair = [arrival(p.sender), arrival(p.receiver)];
        let bytes = |(rank, i): (usize, usize)| transfers[rank][i].bytes;
        let size = bytes(p.sender).or(bytes(p.receiver));
        by_pair
            .entry((p.sender.0, p.receiver.0))
            .or_default()
            .push((pair, size));
    }
    for ((sender, receiver), mut exchanges) in by_pair {
        let id = collectives.communicators.len();
        collectives.communicators.push(Communicator {
            kernel: StringId::EMPTY,
            op: P2P_OP.to_string(),
            members: vec![sender, receiver],
            matched_by: MatchedBy::Transfer,
        });
        exchanges.sort_by_key(|([send, _], _)| send.start);
        for (sequence, (arrivals, bytes)) in exchanges.into_iter().enumerate() {
            collectives.instances.push(Instance {
                communicator: id,
                sequence: sequence as u32,
                arrivals: arrivals.to_vec(),
                ranks: 2,
                bytes,
            });
        }
    }
    collectives
        .instances
        .sort_by_key(|i| (i.first_last().0.start, i.communicator));
}

/// Gives each transfer of `transfers` (per rank, as `processes`) the size its call's record
/// says ([`NcclPayloads`]: NCCL's `Message size [bytes]`, PyTorch's element counts and type).
pub fn size_transfers(
    activity: &Activity,
    processes: &[ProcessId],
    transfers: &mut [Vec<Transfer>],
) {
    let payloads = NcclPayloads::new(activity, processes);
    for (&process, mine) in processes.iter().zip(transfers) {
        for t in mine {
            let size = payloads.args(process, t.correlation).size;
            t.bytes = size.map(|s| s.buffer_bytes(P2P_OP, 2));
        }
    }
}

/// One rank's totals over instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RankWaits {
    /// Instances it took part in.
    pub instances: u64,
    /// Time it waited for the last member, ns of wall time (instances on several streams at
    /// once count once, as the traces draw the waiting state).
    pub waited_ns: i64,
    /// Time the others waited for it when it was last, summed over them, ns.
    pub caused_ns: i64,
    /// Instances it was last at.
    pub times_last: u64,
}

/// Per member (index into the processes given), its totals over `instances`.
pub fn by_rank(ranks: usize, instances: &[&Instance]) -> Vec<RankWaits> {
    let mut out = vec![RankWaits::default(); ranks];
    let mut waits: Vec<Vec<(i64, i64)>> = vec![Vec::new(); ranks];
    for i in instances {
        let (_, last) = i.first_last();
        for a in &i.arrivals {
            out[a.rank].instances += 1;
            waits[a.rank].push((a.start, last.start));
        }
        let caused: i64 = i.arrivals.iter().map(|a| last.start - a.start).sum();
        out[last.rank].caused_ns += caused;
        out[last.rank].times_last += 1;
    }
    for (w, intervals) in out.iter_mut().zip(waits) {
        w.waited_ns = crate::intervals::IntervalSet::from_intervals(intervals).measure();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_join_when_their_ends_keep_one_distance() {
        // Hosts 0 and 1 run one communicator (a 3 ms clock offset, constant); host 2 its own
        // (its ends wander against both).
        let ends = [
            vec![1_000_000, 2_000_000, 3_000_000],
            vec![4_000_000, 5_000_000, 6_000_000],
            vec![1_200_000, 2_500_000, 3_100_000],
        ];
        let per_unit: PerUnit = ends
            .iter()
            .enumerate()
            .map(|(r, e)| {
                let kernels = e.iter().map(|&end| Part {
                    span: (end - 100, end),
                    args: CallArgs::default(),
                });
                ((r, StreamId(r as u32)), kernels.collect())
            })
            .collect();
        let groups = communicators(&per_unit, &|r| r, true);
        let ranks: Vec<Vec<usize>> = groups
            .iter()
            .map(|g| g.iter().map(|u| u.0).collect())
            .collect();
        assert_eq!(ranks, [vec![0, 1], vec![2]]);
    }

    #[test]
    fn the_last_arrival_waits_for_nobody() {
        let a = |rank, start| Arrival {
            stream: StreamId(0),
            rank,
            start,
            end: 1_000,
        };
        let i = Instance {
            communicator: 0,
            sequence: 0,
            arrivals: vec![a(0, 100), a(1, 400), a(2, 250), a(3, 400)],
            ranks: 4,
            bytes: Some(1_200_000),
        };
        let (first, last) = i.first_last();
        assert_eq!(
            (first.rank, last.rank, i.skew(), i.duration()),
            (0, 1, 300, 600)
        );
        // 1.2 MB in 600 ns is 2000 GB/s of algorithm bandwidth; an all-reduce of 4 moves 1.5×.
        assert_eq!(i.busbw_gbps("nccl:AllReduce"), Some(3000.0));
        assert_eq!(i.busbw_gbps("nccl:AllGather"), Some(1500.0));
        assert_eq!(i.busbw_gbps("tp_comm"), None);
        let w = by_rank(4, &[&i]);
        assert_eq!(w[1].times_last, 1);
        assert_eq!(w[1].caused_ns, 300 + 150);
        assert_eq!(
            (w[0].waited_ns, w[2].waited_ns, w[3].waited_ns),
            (300, 150, 0)
        );
    }
}
