//! Collective instances matched across their member ranks: who arrived last at each one, by
//! how much, and how long every other member waited for it.
//!
//! A family of collectives is one kernel name on one stream id (PyTorch gives every process
//! group its own stream, created in the same order on every rank); its k-th kernel on each rank
//! is one instance, the NCCL sequence number within that communicator. One family can still
//! hold several communicators across hosts (each node's own tensor-parallel all-reduce has the
//! same name and stream id everywhere), and one host can hold several (one tensor-parallel
//! group per pipeline stage). On one host, ranks whose k-th kernels are often disjoint in time
//! are apart: the members of one collective are all inside it at once. Across hosts, groups join
//! only when their instances' end times keep a constant distance (one clock offset; members
//! leave a collective nearly together), as `--align collectives` requires too. Two groups that
//! run their collectives at the same moments on one host (the tensor-parallel groups of two
//! data-parallel replicas on one node) cannot be told apart this way: NCCL's payloads would.
//! Point-to-point kernels are not collectives here.
//!
//! An instance's arrival of a member is its kernel's start: the last to arrive is the
//! straggler, the skew is last minus first arrival, and each member waited `last - own`.

use crate::classify::comm::comm_kind;
use crate::classify::layout::{self, Transfer};
use crate::classify::rules::RoleRules;
use crate::hash::FxHashMap;
use crate::model::{ProcessId, StreamId, StringId, Timeline};
use std::collections::{BTreeMap, BTreeSet};

/// Two hosts' instances of one family whose end-time distances spread wider than this belong to
/// different communicators.
pub const AGREEMENT_NS: i64 = 5_000;

/// A communicator: one family on a set of hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Communicator {
    /// The kernel name (short) the family runs.
    pub kernel: StringId,
    /// The stream id it runs on.
    pub stream: u32,
    /// `nccl:AllReduce`, ... from the kernel name.
    pub op: String,
    /// Members (indices into the processes given), ascending.
    pub members: Vec<usize>,
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
}

/// Every communicator and instance of a run.
#[derive(Debug, Clone, Default)]
pub struct Collectives {
    /// Communicators, by family then first member.
    pub communicators: Vec<Communicator>,
    /// Instances with two members or more, by first arrival.
    pub instances: Vec<Instance>,
}

/// One family's kernels per member: (start, end) in start order, and their stream.
type PerRank = BTreeMap<usize, Vec<(i64, i64, StreamId)>>;

/// Matches every collective instance of `processes` (members are indices into it) over the
/// whole capture.
pub fn match_instances(timeline: &Timeline, processes: &[ProcessId]) -> Collectives {
    let rules = RoleRules::default();
    let rank_of: FxHashMap<ProcessId, usize> =
        processes.iter().enumerate().map(|(i, &p)| (p, i)).collect();
    // Per family, per member rank: its kernels in start order (the kernels are sorted).
    let mut families: BTreeMap<(StringId, u32), PerRank> = BTreeMap::new();
    let mut collective: FxHashMap<(StringId, StringId), bool> = FxHashMap::default();
    let mut names: FxHashMap<StringId, StringId> = FxHashMap::default();
    for k in &timeline.kernels {
        let key = (k.short_name, k.name);
        let is_collective = *collective.entry(key).or_insert_with(|| {
            comm_kind(timeline.text(k.short_name), timeline.text(k.name))
                .is_some_and(|c| !c.point_to_point)
        });
        let stream = timeline.stream(k.stream);
        let Some(&rank) = rank_of.get(&stream.process).filter(|_| is_collective) else {
            continue;
        };
        names.entry(k.short_name).or_insert(k.name);
        families
            .entry((k.short_name, stream.stream))
            .or_default()
            .entry(rank)
            .or_default()
            .push((k.start.0, k.end.0, k.stream));
    }
    let host_of = |rank: usize| timeline.process(processes[rank]).host.index();
    let mut out = Collectives::default();
    for ((kernel, stream), per_rank) in families {
        let op = rules
            .label(rules.by_name(timeline.text(kernel), timeline.text(names[&kernel])))
            .to_string();
        for members in communicators(&per_rank, &host_of) {
            let id = out.communicators.len();
            let kernels: Vec<&Vec<(i64, i64, StreamId)>> =
                members.iter().map(|m| &per_rank[m]).collect();
            let count = kernels.iter().map(|k| k.len()).min().unwrap_or(0);
            for sequence in 0..count {
                let arrivals = members
                    .iter()
                    .zip(&kernels)
                    .map(|(&rank, k)| {
                        let (start, end, stream) = k[sequence];
                        Arrival {
                            rank,
                            stream,
                            start,
                            end,
                        }
                    })
                    .collect();
                out.instances.push(Instance {
                    communicator: id,
                    sequence: sequence as u32,
                    arrivals,
                });
            }
            out.communicators.push(Communicator {
                kernel,
                stream,
                op: op.clone(),
                members,
            });
        }
    }
    out.instances.retain(|i| i.arrivals.len() >= 2);
    out.instances
        .sort_by_key(|i| (i.first_last().0.start, i.communicator));
    out
}

/// A family's communicators: on each host (one clock), ranks whose k-th kernels never overlap
/// in a share of instances are apart (the members of one collective are all inside it at once);
/// then groups of different hosts join when the distance between their instances' median ends
/// stays within [`AGREEMENT_NS`] (one clock offset).
fn communicators(per_rank: &PerRank, host_of: &dyn Fn(usize) -> usize) -> Vec<Vec<usize>> {
    let mut by_host: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &rank in per_rank.keys() {
        by_host.entry(host_of(rank)).or_default().push(rank);
    }
    let units: Vec<(usize, Vec<usize>)> = by_host
        .into_iter()
        .flat_map(|(host, ranks)| {
            local_groups(per_rank, &ranks)
                .into_iter()
                .map(move |g| (host, g))
        })
        .collect();
    let ends: Vec<Vec<i64>> = units
        .iter()
        .map(|(_, g)| median_ends(per_rank, g))
        .collect();
    // Union of groups of different hosts; a joined set never holds two groups of one host.
    let mut joined_to: Vec<usize> = (0..units.len()).collect();
    let mut hosts: Vec<BTreeSet<usize>> = units.iter().map(|(h, _)| BTreeSet::from([*h])).collect();
    for a in 0..units.len() {
        for b in a + 1..units.len() {
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
    let mut joined: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (u, (_, ranks)) in units.into_iter().enumerate() {
        joined.entry(joined_to[u]).or_default().extend(ranks);
    }
    joined
        .into_values()
        .map(|mut members| {
            members.sort_unstable();
            members
        })
        .collect()
}

/// The share of instances in which two ranks' kernels may be disjoint and the ranks still be
/// one communicator's (slack for kernels cut at the capture's edges).
const DISJOINT_SHARE: f64 = 0.1;

/// With this many instances or more, two ranks of one host are one communicator's only when
/// their kernels end within [`AGREEMENT_NS`] of each other in at least half of them (on one
/// node the members of a collective leave it together; two groups running side by side do
/// not). With fewer, overlapping in time is all the evidence there is.
const CO_ENDING_EVIDENCE: usize = 3;

/// One host's ranks of a family, grouped: a rank joins the first group all of whose members it
/// runs its collectives with ([`DISJOINT_SHARE`], [`CO_ENDING_EVIDENCE`]), else starts a group.
fn local_groups(per_rank: &PerRank, ranks: &[usize]) -> Vec<Vec<usize>> {
    let together = |p: usize, q: usize| {
        let (a, b) = (&per_rank[&p], &per_rank[&q]);
        let n = a.len().min(b.len());
        let pairs = || a.iter().zip(b);
        let disjoint = pairs()
            .filter(|((s1, e1, _), (s2, e2, _))| e1 < s2 || e2 < s1)
            .count();
        let co_ending = pairs()
            .filter(|((_, e1, _), (_, e2, _))| (e1 - e2).abs() <= AGREEMENT_NS)
            .count();
        disjoint as f64 <= DISJOINT_SHARE * n as f64
            && (n < CO_ENDING_EVIDENCE || 2 * co_ending >= n)
    };
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &r in ranks {
        match groups
            .iter_mut()
            .find(|g| g.iter().all(|&m| together(m, r)))
        {
            Some(g) => g.push(r),
            None => groups.push(vec![r]),
        }
    }
    groups
}

/// The median end of a group's k-th instance, for every k all its ranks have.
fn median_ends(per_rank: &PerRank, ranks: &[usize]) -> Vec<i64> {
    let count = ranks.iter().map(|r| per_rank[r].len()).min().unwrap_or(0);
    (0..count)
        .map(|k| {
            let mut e: Vec<i64> = ranks.iter().map(|r| per_rank[r][k].1).collect();
            super::upper_median(&mut e).expect("a group has ranks")
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
/// order; `transfers` holds each member's (same order as the processes matched).
pub fn add_transfers(collectives: &mut Collectives, transfers: &[Vec<Transfer>]) {
    let mut by_pair: BTreeMap<(usize, usize), Vec<[Arrival; 2]>> = BTreeMap::new();
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
        by_pair
            .entry((p.sender.0, p.receiver.0))
            .or_default()
            .push(pair);
    }
    for ((sender, receiver), mut exchanges) in by_pair {
        let id = collectives.communicators.len();
        collectives.communicators.push(Communicator {
            kernel: StringId::EMPTY,
            stream: 0,
            op: P2P_OP.to_string(),
            members: vec![sender, receiver],
        });
        exchanges.sort_by_key(|[send, _]| send.start);
        for (sequence, arrivals) in exchanges.into_iter().enumerate() {
            collectives.instances.push(Instance {
                communicator: id,
                sequence: sequence as u32,
                arrivals: arrivals.to_vec(),
            });
        }
    }
    collectives
        .instances
        .sort_by_key(|i| (i.first_last().0.start, i.communicator));
}

/// One rank's totals over instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RankWaits {
    /// Instances it took part in.
    pub instances: u64,
    /// Time it waited for the last member, summed, ns.
    pub waited_ns: i64,
    /// Time the others waited for it when it was last, summed over them, ns.
    pub caused_ns: i64,
    /// Instances it was last at.
    pub times_last: u64,
}

/// Per member (index into the processes given), its totals over `instances`.
pub fn by_rank(ranks: usize, instances: &[&Instance]) -> Vec<RankWaits> {
    let mut out = vec![RankWaits::default(); ranks];
    for i in instances {
        let (_, last) = i.first_last();
        for a in &i.arrivals {
            let w = &mut out[a.rank];
            w.instances += 1;
            w.waited_ns += last.start - a.start;
        }
        let caused: i64 = i.arrivals.iter().map(|a| last.start - a.start).sum();
        out[last.rank].caused_ns += caused;
        out[last.rank].times_last += 1;
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
        let per_rank: PerRank = ends
            .iter()
            .enumerate()
            .map(|(r, e)| {
                let kernels = e.iter().map(|&end| (end - 100, end, StreamId(0)));
                (r, kernels.collect())
            })
            .collect();
        let groups = communicators(&per_rank, &|r| r);
        assert_eq!(groups, [vec![0, 1], vec![2]]);
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
        };
        let (first, last) = i.first_last();
        assert_eq!(
            (first.rank, last.rank, i.skew(), i.duration()),
            (0, 1, 300, 600)
        );
        let w = by_rank(4, &[&i]);
        assert_eq!(w[1].times_last, 1);
        assert_eq!(w[1].caused_ns, 300 + 150);
        assert_eq!(
            (w[0].waited_ns, w[2].waited_ns, w[3].waited_ns),
            (300, 150, 0)
        );
    }
}
