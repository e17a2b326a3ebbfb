//! Clock alignment across hosts from the collectives themselves (`--align collectives`).
//!
//! Ranks leave a collective nearly together, so the same collective's end times on two hosts
//! differ by the hosts' clock offset. Instances are matched across ranks by
//! [`collectives`](super::collectives) (the k-th kernel of one communicator on each member, with
//! communicators that share a kernel name and stream kept apart). For every pair of hosts an
//! instance spans,
//! the difference of the hosts' median end times is one observation of their relative offset;
//! each host's offset is the median of the observations that link it to the reference host
//! (outliers beyond 3 MADs dropped), chained breadth-first through the best-linked hosts. The
//! corrections are then clamped so that no rank ends a collective before every participant
//! started it. One offset per host: ranks of one host share its clock.

use crate::model::{HostId, ProcessId, Timeline};
use std::collections::BTreeMap;

/// One host's estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct HostAlignment {
    /// The host.
    #[serde(skip)]
    pub host: HostId,
    /// Added to every time of the host's reports, ns.
    pub correction_ns: i64,
    /// Collective instances spanning hosts that it takes part in.
    pub collectives_used: usize,
    /// Median distance of its end times from each instance's consensus, before, ns.
    pub residual_before_ns: i64,
    /// The same after the correction, ns.
    pub residual_after_ns: i64,
}

/// The estimate for every host.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Alignment {
    /// Per host, in host order.
    pub hosts: Vec<HostAlignment>,
    /// Collective instances that span two hosts or more and whose family is one communicator's.
    pub instances: usize,
    /// Median end-time spread (max - min) of those instances, before, ns.
    pub spread_before_ns: i64,
    /// The same after the corrections, ns.
    pub spread_after_ns: i64,
    /// What the estimate rests on, and its limits.
    pub notes: Vec<String>,
}

impl Alignment {
    /// The correction of each host, in host order: what `Timeline::shift_hosts` takes.
    pub fn corrections(&self) -> Vec<i64> {
        self.hosts.iter().map(|h| h.correction_ns).collect()
    }
}

/// One member host of an instance: its latest start, and its earliest, median and latest end.
#[derive(Debug, Clone, Copy)]
struct Member {
    host: usize,
    latest_start: i64,
    earliest_end: i64,
    median_end: i64,
    latest_end: i64,
}

/// Observations of one family of collectives (kernel name, stream id) that agree within this
/// much are taken as one communicator's; more spread means the family mixes communicators
/// (e.g. each node's own TP all-reduce) and is not used for that pair of hosts.
const AGREEMENT_NS: i64 = 5_000;

/// Estimates every host's correction from the collectives that span hosts.
pub fn estimate(timeline: &Timeline) -> Alignment {
    let hosts = timeline.hosts.len();
    let families = instances(timeline);
    let mut by_pair: BTreeMap<(usize, usize), BTreeMap<Family, Vec<i64>>> = BTreeMap::new();
    for (family, members) in &families {
        for a in members {
            for b in members.iter().filter(|b| b.host > a.host) {
                by_pair
                    .entry((a.host, b.host))
                    .or_default()
                    .entry(*family)
                    .or_default()
                    .push(b.median_end - a.median_end);
            }
        }
    }
    // A family is one communicator's when its observations agree for every pair of hosts.
    let mixed: std::collections::BTreeSet<Family> = by_pair
        .values()
        .flat_map(|per_family| per_family.iter())
        .filter(|(_, obs)| !agree(obs))
        .map(|(family, _)| *family)
        .collect();
    let observations: BTreeMap<(usize, usize), Vec<i64>> = by_pair
        .into_iter()
        .map(|(pair, per_family)| {
            let obs = per_family
                .into_iter()
                .filter(|(family, _)| !mixed.contains(family))
                .flat_map(|(_, obs)| obs)
                .collect::<Vec<_>>();
            (pair, obs)
        })
        .filter(|(_, obs)| !obs.is_empty())
        .collect();
    let instances: Vec<Vec<Member>> = families
        .into_iter()
        .filter(|(family, _)| !mixed.contains(family))
        .map(|(_, m)| m)
        .collect();
    let offsets = solve(hosts, &observations);
    let mut corrections: Vec<i64> = offsets.iter().map(|o| o.map_or(0, |o| -o)).collect();
    clamp_causal(&mut corrections, &instances);
    let mut notes = Vec::new();
    if instances.is_empty() {
        notes.push("no collective spans two hosts: the session offsets are kept".to_string());
    } else if instances.len() == 1 {
        notes.push("the estimate rests on one collective".to_string());
    }
    for (h, offset) in offsets.iter().enumerate() {
        if offset.is_none() && hosts > 1 {
            notes.push(format!(
                "no collective links host {} to {}: its session offset is kept",
                timeline.hosts[h].name, timeline.hosts[0].name
            ));
        }
    }
    let zero = vec![0; hosts];
    Alignment {
        hosts: (0..hosts)
            .map(|h| HostAlignment {
                host: HostId(h as u32),
                correction_ns: corrections[h],
                collectives_used: instances
                    .iter()
                    .filter(|members| members.iter().any(|m| m.host == h))
                    .count(),
                residual_before_ns: residual(&instances, h, &zero),
                residual_after_ns: residual(&instances, h, &corrections),
            })
            .collect(),
        instances: instances.len(),
        spread_before_ns: spread(&instances, &zero),
        spread_after_ns: spread(&instances, &corrections),
        notes,
    }
}

/// A family of collectives: one communicator ([`collectives`](super::collectives)).
type Family = usize;

/// Whether observations agree within [`AGREEMENT_NS`].
fn agree(obs: &[i64]) -> bool {
    let (min, max) = (obs.iter().min(), obs.iter().max());
    min.zip(max).is_some_and(|(lo, hi)| hi - lo <= AGREEMENT_NS)
}

/// Every collective instance that spans two hosts or more (matched by
/// [`match_instances`](super::collectives::match_instances), which keeps communicators that
/// share a kernel name apart), with its communicator and its members per host.
fn instances(timeline: &Timeline) -> Vec<(Family, Vec<Member>)> {
    let processes: Vec<ProcessId> = (0..timeline.processes.len() as u32)
        .map(ProcessId)
        .collect();
    let activity = crate::classify::Activity::new(timeline);
    let rules = crate::classify::RoleRules::default();
    let matched = super::collectives::match_instances(&activity, &processes, &rules);
    matched
        .instances
        .into_iter()
        .filter_map(|instance| {
            let mut per_host: BTreeMap<usize, (Vec<i64>, Vec<i64>)> = BTreeMap::new();
            for a in &instance.arrivals {
                let host = timeline.process(processes[a.rank]).host.index();
                let entry = per_host.entry(host).or_default();
                entry.0.push(a.start);
                entry.1.push(a.end);
            }
            (per_host.len() >= 2).then(|| (instance.communicator, members(per_host)))
        })
        .collect()
}

/// Each host's latest start and earliest, median and latest end in one instance.
fn members(per_host: BTreeMap<usize, (Vec<i64>, Vec<i64>)>) -> Vec<Member> {
    per_host
        .into_iter()
        .map(|(host, (starts, mut ends))| {
            ends.sort_unstable();
            Member {
                host,
                latest_start: starts.into_iter().max().unwrap_or(0),
                earliest_end: ends[0],
                median_end: ends[ends.len() / 2],
                latest_end: ends[ends.len() - 1],
            }
        })
        .collect()
}

/// Each host's offset from host 0 (None when nothing links it).
fn solve(hosts: usize, observations: &BTreeMap<(usize, usize), Vec<i64>>) -> Vec<Option<i64>> {
    let mut offsets = vec![None; hosts];
    if hosts == 0 {
        return offsets;
    }
    offsets[0] = Some(0);
    loop {
        // The best-observed edge from a solved host to an unsolved one.
        let next = observations
            .iter()
            .filter_map(|(&(a, b), obs)| match (offsets[a], offsets[b]) {
                (Some(oa), None) => Some((obs.len(), b, oa, robust(obs))),
                (None, Some(ob)) => Some((obs.len(), a, ob, -robust(obs))),
                _ => None,
            })
            .max_by_key(|&(n, host, ..)| (n, std::cmp::Reverse(host)));
        let Some((_, host, from, delta)) = next else {
            break;
        };
        offsets[host] = Some(from + delta);
    }
    offsets
}

/// The median of the observations within 3 median absolute deviations (+1 µs) of the median.
fn robust(obs: &[i64]) -> i64 {
    let median = |v: &mut Vec<i64>| super::upper_median(v).expect("observations");
    let m = median(&mut obs.to_vec());
    let mad = median(&mut obs.iter().map(|o| (o - m).abs()).collect());
    let mut kept: Vec<i64> = obs
        .iter()
        .copied()
        .filter(|o| (o - m).abs() <= 3 * mad + 1_000)
        .collect();
    median(&mut kept)
}

/// Adjusts corrections (host 0 fixed) so that, in every instance, no host's earliest end comes
/// before another's latest start: each host is clamped into what the others allow.
fn clamp_causal(corrections: &mut [i64], instances: &[Vec<Member>]) {
    for _ in 0..corrections.len() {
        let mut changed = false;
        for h in 1..corrections.len() {
            let (mut lo, mut hi) = (i64::MIN, i64::MAX);
            for members in instances {
                let Some(me) = members.iter().find(|m| m.host == h) else {
                    continue;
                };
                for other in members.iter().filter(|m| m.host != h) {
                    let c = corrections[other.host];
                    lo = lo.max(other.latest_start + c - me.earliest_end);
                    hi = hi.min(other.earliest_end + c - me.latest_start);
                }
            }
            if lo <= hi {
                let clamped = corrections[h].clamp(lo, hi);
                changed |= clamped != corrections[h];
                corrections[h] = clamped;
            }
        }
        if !changed {
            break;
        }
    }
}

/// Median over the instances host `h` is in of |its median end - the instance's consensus|.
fn residual(instances: &[Vec<Member>], h: usize, corrections: &[i64]) -> i64 {
    let mut distances: Vec<i64> = instances
        .iter()
        .filter_map(|members| {
            let me = members.iter().find(|m| m.host == h)?;
            let mut ends: Vec<i64> = members
                .iter()
                .map(|m| m.median_end + corrections[m.host])
                .collect();
            ends.sort_unstable();
            Some((me.median_end + corrections[h] - ends[ends.len() / 2]).abs())
        })
        .collect();
    distances.sort_unstable();
    distances.get(distances.len() / 2).copied().unwrap_or(0)
}

/// Median over instances of the end-time spread (latest minus earliest end of any rank).
fn spread(instances: &[Vec<Member>], corrections: &[i64]) -> i64 {
    let mut spreads: Vec<i64> = instances
        .iter()
        .map(|members| {
            let latest = members
                .iter()
                .map(|m| m.latest_end + corrections[m.host])
                .max();
            let earliest = members
                .iter()
                .map(|m| m.earliest_end + corrections[m.host])
                .min();
            latest.unwrap_or(0) - earliest.unwrap_or(0)
        })
        .collect();
    spreads.sort_unstable();
    spreads.get(spreads.len() / 2).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(host: usize, start: i64, end: i64) -> Member {
        Member {
            host,
            latest_start: start,
            earliest_end: end,
            median_end: end,
            latest_end: end,
        }
    }

    #[test]
    fn offsets_come_from_end_differences_and_chain_through_hosts() {
        // Host 1 reads 5000 ahead of host 0; host 2 reads 2000 behind host 1 (3000 ahead of 0),
        // and only host 1 shares collectives with host 2.
        let mut obs = BTreeMap::new();
        obs.insert((0, 1), vec![5000, 5010, 4990, 90_000]);
        obs.insert((1, 2), vec![-2000, -2000]);
        // The 90 us outlier is dropped (else the median of four would be 5010).
        assert_eq!(solve(3, &obs), [Some(0), Some(5000), Some(3000)]);
    }

    #[test]
    fn causality_clamps_a_correction_minimally() {
        // Host 1's member ran [100, 200], host 0's [150, 400]. A correction of -100 would end
        // host 1's at 100, before host 0's started (150): the least change is -50.
        let instances = vec![vec![member(0, 150, 400), member(1, 100, 200)]];
        let mut corrections = vec![0, -100];
        clamp_causal(&mut corrections, &instances);
        assert_eq!(corrections, [0, -50]);
    }
}
