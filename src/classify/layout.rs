//! The pipeline layout read from the trace when no rank label gives it: which ranks exchange
//! pipeline transfers with which, hence the pipeline size and each rank's stage.
//!
//! A pipeline transfer completes on both sides at once: a receive that was waiting ends when the
//! data of its send has arrived, so the two kernels end within a few microseconds of each other
//! (on one clock: give `--align collectives` across nodes). Each receive (NCCL's `ncclRecv` call
//! around its launch, or PyTorch's `nccl:recv 1<-0` range in a torch.profiler trace, says which
//! kernels receive and which send) votes for the rank of the send
//! that ended closest to it, within [`TOLERANCE_NS`] and with no tie; two ranks are pipeline
//! neighbours when a clear share of their transfers matched. The neighbour graph must then be
//! chains of one length: that length is the pipeline size, and each chain is ordered from the
//! end that sent first (stage 0 starts the first micro-batch). Anything less clean (most matches
//! between ranks that are not neighbours, a rank with three neighbours, cycles, chains of
//! different lengths) is reported as inconclusive, never guessed.

use super::nccl_calls::Pattern;
use super::ranks::Rank;
use super::rules::RoleRules;
use super::streams::RankStreams;
use crate::model::StreamId;
use std::collections::{BTreeMap, BTreeSet};

/// How close a send's end and its receive's end must be, ns.
pub const TOLERANCE_NS: i64 = 5_000;

/// The share of the transfers of the less busy of two ranks that must match for them to be
/// neighbours.
const NEIGHBOUR_SHARE: f64 = 0.25;

/// The share of all matched transfers that must run between neighbours.
const CONSISTENT_SHARE: f64 = 0.75;

/// A rank's place in the pipeline, read from its transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipelineCoord {
    /// The stage, from 0 (None when the transfers do not show which end is stage 0, as in a
    /// bidirectional schedule such as DualPipeV).
    pub stage: Option<u32>,
    /// The pipeline size.
    pub size: u32,
}

/// One pipeline transfer of a rank: when it ran, and whether it sends or receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    /// Its stream.
    pub stream: StreamId,
    /// Start, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// It sends (else it receives).
    pub sends: bool,
    /// Its launch's correlation id.
    pub correlation: u32,
    /// What it moves, bytes, when its call's record says (NCCL's payload, PyTorch's
    /// `record_param_comms`); set apart from finding it.
    pub bytes: Option<u64>,
}

/// Every rank's pipeline transfers over the whole capture ([`transfers`]).
pub fn rank_transfers(
    activity: &super::Activity,
    ranks: &[Rank],
    rules: &RoleRules,
) -> Vec<Vec<Transfer>> {
    ranks
        .iter()
        .map(|r| {
            let bounds = transfer_window(activity, r);
            let streams = super::streams::classify(activity, r.process, bounds, rules);
            transfers(&streams, rules)
        })
        .collect()
}

/// The window a rank's transfers are found over: its whole capture.
pub fn transfer_window(activity: &super::Activity, rank: &Rank) -> (i64, i64) {
    super::window::find(activity, rank.process, &super::WindowSpec::Whole).bounds(false)
}

/// The pipeline transfers of a rank's classified streams that NCCL's calls show as a lone send
/// or a lone receive (a group that both sends and receives, such as a ring step, does not say
/// which way its data went).
pub fn transfers(streams: &RankStreams, rules: &RoleRules) -> Vec<Transfer> {
    streams
        .comm
        .iter()
        .filter(|k| k.is_pipeline(rules))
        .filter_map(|k| match k.call? {
            Pattern::PointToPoint { sends, recvs } if (sends == 0) != (recvs == 0) => {
                Some(Transfer {
                    stream: k.stream,
                    start: k.start,
                    end: k.end,
                    sends: sends > 0,
                    correlation: k.correlation,
                    bytes: None,
                })
            }
            _ => None,
        })
        .collect()
}

/// Each rank's stage and the pipeline size, from every rank's transfers (same order as
/// `ranks`); Err says why the transfers do not show a pipeline.
pub fn pipeline(ranks: &[Rank], transfers: &[Vec<Transfer>]) -> Result<Vec<PipelineCoord>, String> {
    if transfers.iter().all(Vec::is_empty) {
        return Err(
            "no pipeline transfer with NCCL's send/receive calls (or PyTorch's \
                    nccl:send/nccl:recv range) around its launch"
                .into(),
        );
    }
    let votes = votes(transfers);
    let neighbours = neighbours(ranks, transfers, &votes)?;
    let between: u32 = votes
        .iter()
        .filter(|((a, b), _)| neighbours[*a].contains(b))
        .map(|(_, n)| n)
        .sum();
    let all: u32 = votes.values().sum();
    if f64::from(between) < CONSISTENT_SHARE * f64::from(all) {
        return Err(format!(
            "only {between} of {all} matched transfers run between the ranks that would be \
             neighbours: no consistent pipeline"
        ));
    }
    let chains = chains(ranks, &neighbours)?;
    let size = chains[0].len();
    if chains.iter().any(|c| c.len() != size) || size < 2 {
        let lengths: Vec<usize> = chains.iter().map(Vec::len).collect();
        return Err(format!(
            "pipeline chains of unequal or unit length {lengths:?}"
        ));
    }
    let mut coords = vec![None; ranks.len()];
    for chain in chains {
        let (chain, known) = oriented(chain, transfers);
        for (stage, &r) in chain.iter().enumerate() {
            coords[r] = Some(PipelineCoord {
                stage: known.then_some(stage as u32),
                size: size as u32,
            });
        }
    }
    coords
        .into_iter()
        .enumerate()
        .map(|(r, c)| c.ok_or_else(|| format!("rank {} is in no chain", ranks[r].rank)))
        .collect()
}

/// Votes per (sender, receiver): sends whose end a receive of the receiver matches.
type Votes = BTreeMap<(usize, usize), u32>;

fn votes(transfers: &[Vec<Transfer>]) -> Votes {
    let mut votes = Votes::new();
    for p in pairs(transfers) {
        *votes.entry((p.sender.0, p.receiver.0)).or_default() += 1;
    }
    votes
}

/// A send and the receive that waited for it: (rank, index into its transfers) of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// The sending rank and its transfer.
    pub sender: (usize, usize),
    /// The receiving rank and its transfer.
    pub receiver: (usize, usize),
}

/// Receives matched one to one with sends of other ranks that ran while they waited, closest
/// end first: a receive that waited ends when its data arrives, so its send ends within
/// [`TOLERANCE_NS`] of it; a receive that came late ends on its own and finds no send, or loses
/// it to a closer one. Equal gaps to two ranks' sends leave the receive unmatched.
pub fn pairs(transfers: &[Vec<Transfer>]) -> Vec<Pair> {
    let mut sends: Vec<(i64, usize, usize)> = transfers
        .iter()
        .enumerate()
        .flat_map(|(r, ts)| {
            ts.iter()
                .enumerate()
                .filter(|(_, t)| t.sends)
                .map(move |(i, t)| (t.end, r, i))
        })
        .collect();
    sends.sort_unstable();
    // (gap, receive, send) of every candidate; a transfer is (rank, index into its transfers).
    type At = (usize, usize);
    let mut candidates: Vec<(i64, At, At)> = Vec::new();
    for (receiver, ts) in transfers.iter().enumerate() {
        for (j, t) in ts.iter().enumerate().filter(|(_, t)| !t.sends) {
            let from = sends.partition_point(|&(end, ..)| end < t.end - TOLERANCE_NS);
            let near = sends[from..]
                .iter()
                .take_while(|&&(end, ..)| end <= t.end + TOLERANCE_NS)
                .filter(|&&(end, sender, i)| {
                    let send_start = transfers[sender][i].start;
                    sender != receiver && send_start <= t.end && t.start <= end
                });
            for &(end, sender, i) in near {
                candidates.push(((end - t.end).abs(), (receiver, j), (sender, i)));
            }
        }
    }
    candidates.sort_unstable();
    let mut taken: BTreeSet<(usize, usize)> = BTreeSet::new();
    let mut out = Vec::new();
    for (k, &(gap, receive, send)) in candidates.iter().enumerate() {
        if taken.contains(&receive) || taken.contains(&send) {
            continue;
        }
        // Another free send of another rank exactly as close: ambiguous.
        let tied = candidates[k + 1..]
            .iter()
            .take_while(|c| c.0 == gap)
            .any(|c| c.1 == receive && c.2.0 != send.0 && !taken.contains(&c.2));
        taken.insert(receive);
        if !tied {
            taken.insert(send);
            out.push(Pair {
                sender: send,
                receiver: receive,
            });
        }
    }
    out
}

/// Each rank's one or two neighbours: the ranks it exchanged a clear share of its transfers
/// with (matched in either direction).
fn neighbours(
    ranks: &[Rank],
    transfers: &[Vec<Transfer>],
    votes: &Votes,
) -> Result<Vec<Vec<usize>>, String> {
    let mut neighbours = vec![Vec::new(); ranks.len()];
    for &(a, b) in votes.keys() {
        let matched = votes[&(a, b)] + votes.get(&(b, a)).copied().unwrap_or(0);
        let fewer = transfers[a].len().min(transfers[b].len());
        if f64::from(matched) >= NEIGHBOUR_SHARE * fewer as f64 && !neighbours[a].contains(&b) {
            neighbours[a].push(b);
            neighbours[b].push(a);
        }
    }
    for (r, n) in neighbours.iter().enumerate() {
        if n.len() > 2 {
            return Err(format!(
                "rank {} exchanges transfers with {} ranks (a pipeline neighbour has at most 2)",
                ranks[r].rank,
                n.len()
            ));
        }
    }
    Ok(neighbours)
}

/// The connected chains of the neighbour graph, each from one end; Err when one is a cycle.
fn chains(ranks: &[Rank], neighbours: &[Vec<usize>]) -> Result<Vec<Vec<usize>>, String> {
    let mut seen = vec![false; ranks.len()];
    let mut chains = Vec::new();
    for start in 0..ranks.len() {
        if seen[start] || neighbours[start].len() > 1 {
            continue;
        }
        let mut chain = vec![start];
        seen[start] = true;
        while let Some(&next) = neighbours[*chain.last().expect("non-empty")]
            .iter()
            .find(|&&n| !seen[n])
        {
            seen[next] = true;
            chain.push(next);
        }
        chains.push(chain);
    }
    match seen.iter().position(|s| !s) {
        Some(r) => Err(format!("rank {} is on a cycle of transfers", ranks[r].rank)),
        None => Ok(chains),
    }
}

/// A chain ordered from stage 0, and whether that order is known: in a one-directional
/// schedule (1F1B, GPipe) stage 0's first transfer is a send (the first activations) while the
/// last stage's is a receive; when the two ends do not differ so, the order is unknown.
fn oriented(mut chain: Vec<usize>, transfers: &[Vec<Transfer>]) -> (Vec<usize>, bool) {
    let first_sends = |r: usize| transfers[r].iter().min_by_key(|t| t.start).map(|t| t.sends);
    let ends = (first_sends(chain[0]), first_sends(chain[chain.len() - 1]));
    match ends {
        (Some(true), Some(false)) => (chain, true),
        (Some(false), Some(true)) => {
            chain.reverse();
            (chain, true)
        }
        _ => (chain, false),
    }
}

/// Where a rank's pipeline coordinate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PipelineSource {
    /// Its rank label.
    Label,
    /// Its point-to-point transfers ([`pipeline`]).
    Transfers,
}

impl PipelineSource {
    /// `label` or `p2p`.
    pub fn as_str(self) -> &'static str {
        match self {
            PipelineSource::Label => "label",
            PipelineSource::Transfers => "p2p",
        }
    }
}

/// Every rank's pipeline coordinate and where it came from, and why the transfers gave none
/// when they were needed.
#[derive(Debug, Clone, Default)]
pub struct PipelineLayout {
    /// Per rank (in the order given), its coordinate and source.
    pub coords: Vec<Option<(PipelineCoord, PipelineSource)>>,
    /// Why the transfers showed no pipeline, when some rank had no label.
    pub unread: Option<String>,
}

/// Each rank's pipeline coordinate: from its label, else from every rank's transfers over the
/// whole capture.
pub fn pipeline_coords(
    activity: &super::Activity,
    ranks: &[Rank],
    rules: &RoleRules,
) -> PipelineLayout {
    let transfers = || Ok::<_, std::convert::Infallible>(rank_transfers(activity, ranks, rules));
    let Ok(layout) = pipeline_layout(ranks, transfers);
    layout
}

/// [`pipeline_coords`] with every rank's transfers from `transfers` (asked only when some rank
/// has no label).
pub fn pipeline_layout<E>(
    ranks: &[Rank],
    transfers: impl FnOnce() -> Result<Vec<Vec<Transfer>>, E>,
) -> Result<PipelineLayout, E> {
    let labelled = |r: &Rank| {
        r.label.map(|l| {
            let coord = PipelineCoord {
                stage: Some(l.pp.rank),
                size: l.pp.size,
            };
            (coord, PipelineSource::Label)
        })
    };
    let mut coords: Vec<_> = ranks.iter().map(labelled).collect();
    if coords.iter().all(Option::is_some) {
        return Ok(PipelineLayout {
            coords,
            unread: None,
        });
    }
    let unread = match pipeline(ranks, &transfers()?) {
        Ok(found) => {
            for (c, f) in coords.iter_mut().zip(found) {
                c.get_or_insert((f, PipelineSource::Transfers));
            }
            None
        }
        Err(why) => Some(why),
    };
    Ok(PipelineLayout { coords, unread })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::RankSource;
    use crate::model::ProcessId;

    fn ranks(n: u32) -> Vec<Rank> {
        (0..n)
            .map(|r| Rank {
                rank: r,
                process: ProcessId(r),
                device: None,
                label: None,
                source: RankSource::Order,
            })
            .collect()
    }

    /// A send on `from` and the receive on `to` that waited for it, ending together at `end`.
    fn exchange(t: &mut [Vec<Transfer>], from: usize, to: usize, end: i64) {
        t[from].push(Transfer {
            stream: StreamId(0),
            start: end - 100_000,
            end,
            sends: true,
            correlation: 0,
            bytes: None,
        });
        t[to].push(Transfer {
            stream: StreamId(0),
            start: end - 300_000,
            end,
            sends: false,
            correlation: 0,
            bytes: None,
        });
    }

    /// 1F1B over ranks `order` (stage 0 first) with 4 micro-batches: forwards then backwards.
    fn one_f_one_b(n: usize, order: &[usize]) -> Vec<Vec<Transfer>> {
        let mut t = vec![Vec::new(); n];
        let mut clock = 1_000_000;
        for _ in 0..4 {
            for w in order.windows(2) {
                clock += 1_000_000;
                exchange(&mut t, w[0], w[1], clock);
            }
        }
        for _ in 0..4 {
            for w in order.windows(2).rev() {
                clock += 1_000_000;
                exchange(&mut t, w[1], w[0], clock);
            }
        }
        t
    }

    fn stages(coords: &[PipelineCoord]) -> Vec<(Option<u32>, u32)> {
        coords.iter().map(|c| (c.stage, c.size)).collect()
    }

    #[test]
    fn chains_give_the_size_and_the_first_sender_is_stage_0() {
        // Two pipelines of 3 stages: ranks 4 -> 0 -> 2 and 1 -> 5 -> 3.
        let mut t = one_f_one_b(6, &[4, 0, 2]);
        let other = one_f_one_b(6, &[1, 5, 3]);
        for (mine, theirs) in t.iter_mut().zip(other) {
            mine.extend(theirs.into_iter().map(|x| Transfer {
                start: x.start + 7_000,
                end: x.end + 7_000,
                ..x
            }));
        }
        let coords = pipeline(&ranks(6), &t).unwrap();
        let s = |stage| (Some(stage), 3);
        assert_eq!(stages(&coords), [s(1), s(0), s(2), s(2), s(0), s(1)]);
    }

    #[test]
    fn a_bidirectional_schedule_gives_the_size_but_not_the_order() {
        // Both ends start by sending (DualPipeV), each receive waiting for the other's send.
        let x = |start, end, sends| Transfer {
            stream: StreamId(0),
            start,
            end,
            sends,
            correlation: 0,
            bytes: None,
        };
        let t = vec![
            vec![x(0, 1_000_000, true), x(500_000, 1_050_000, false)],
            vec![x(100_000, 1_050_000, true), x(600_000, 1_000_000, false)],
        ];
        let coords = pipeline(&ranks(2), &t).unwrap();
        assert_eq!(stages(&coords), [(None, 2), (None, 2)]);
    }

    #[test]
    fn unclear_structures_are_refused() {
        // No transfer at all.
        assert!(pipeline(&ranks(2), &[vec![], vec![]]).is_err());
        // A ring of three: every rank has two neighbours and no chain has an end.
        let mut t = vec![Vec::new(); 3];
        for (i, (a, b)) in [(0, 1), (1, 2), (2, 0)].into_iter().enumerate() {
            for k in 0..4 {
                exchange(&mut t, a, b, 1_000_000 * (4 * i as i64 + k + 1));
            }
        }
        assert!(pipeline(&ranks(3), &t).unwrap_err().contains("cycle"));
        // A hub talking to three ranks.
        let mut t = vec![Vec::new(); 4];
        for (i, peer) in [1, 2, 3].into_iter().enumerate() {
            for k in 0..4 {
                exchange(&mut t, 0, peer, 1_000_000 * (4 * i as i64 + k + 1));
            }
        }
        assert!(pipeline(&ranks(4), &t).unwrap_err().contains("3 ranks"));
        // Sends whose ends match no receive: nothing to read.
        let lonely = vec![
            vec![Transfer {
                stream: StreamId(0),
                start: 0,
                end: 10,
                sends: true,
                correlation: 0,
                bytes: None,
            }],
            vec![],
        ];
        assert!(pipeline(&ranks(2), &lonely).is_err());
    }
}
