//! What the traces draw of the collectives matched across ranks
//! ([`crate::analysis::collectives`]): the time each process waited in them (from its own
//! arrival to the last member's), each member kernel's instance number, and, when asked, flow
//! arrows from the last arrival's kernel to every other member's.

use super::Exported;
use crate::analysis::collectives::match_instances;
use crate::classify::streams::clip;
use crate::classify::{Activity, RoleRules};
use crate::hash::FxHashMap;
use crate::model::{ProcessId, StreamId};

/// The collectives as drawn.
#[derive(Debug, Clone, Default)]
pub struct Drawn {
    /// Per process: `[own arrival, last arrival)` of every instance it waited in, clipped to its
    /// exported window, in time order.
    pub waits: FxHashMap<ProcessId, Vec<(i64, i64)>>,
    /// Per member kernel (stream, unclipped start): its instance number (from 1, the same on
    /// every member) and its flow ids.
    pub kernels: FxHashMap<(StreamId, i64), (u64, Vec<u64>)>,
    /// Flows drawn (each links two kernels).
    pub flows: u64,
}

/// Flow ids of collectives: the top bit set, so they never meet a launch flow's id.
const FLOW_BIT: u64 = 1 << 63;

impl Drawn {
    /// Matches the collectives of the exported parts; with `flows`, links each instance's last
    /// arrival to the other members whose kernels are exported too.
    pub fn new(
        (activity, rules): (&Activity, &RoleRules),
        parts: &[Exported],
        flows: bool,
    ) -> Drawn {
        let processes: Vec<ProcessId> = parts.iter().map(|p| p.process).collect();
        let matched = match_instances(activity, &processes, rules);
        let mut drawn = Drawn::default();
        for (n, instance) in matched.instances.iter().enumerate() {
            let number = n as u64 + 1;
            let (_, last) = instance.first_last();
            let exported = |rank: usize, (s, e)| clip((s, e), parts[rank].window).is_some();
            for (m, a) in instance.arrivals.iter().enumerate() {
                let window = parts[a.rank].window;
                if let Some(wait) = clip((a.start, last.start), window).filter(|(s, e)| s < e) {
                    drawn
                        .waits
                        .entry(parts[a.rank].process)
                        .or_default()
                        .push(wait);
                }
                drawn.kernels.entry((a.stream, a.start)).or_default().0 = number;
                let linked = a.rank != last.rank
                    && exported(a.rank, (a.start, a.end))
                    && exported(last.rank, (last.start, last.end));
                if flows && linked {
                    let id = FLOW_BIT | (number << 16) | m as u64;
                    for end in [(a.stream, a.start), (last.stream, last.start)] {
                        drawn.kernels.entry(end).or_default().1.push(id);
                    }
                    drawn.flows += 1;
                }
            }
        }
        for waits in drawn.waits.values_mut() {
            waits.sort_unstable();
        }
        drawn
    }
}
