//! A Perfetto trace a browser can open (`convert --max-size`): what to keep of a capture to stay
//! under a size, chosen from an estimate of each process's bytes before anything is written.
//!
//! ui.perfetto.dev holds a trace in the browser's memory and opens traces up to about 1 to 2 GB
//! (perfetto#99; its trace processor stops at 4 GB per blob, perfetto#3537). A conversion over
//! the size keeps, in this order: the steady window (each rank's median step) instead of the
//! whole capture; then the slices of a subset of ranks that represents every node and every
//! role (the first rank of each node, then the first rank of each set of stream roles, then the
//! others in rank order, while they fit); the ranks left out are drawn by their counters only
//! (compute, communication by role, exposed communication), so that none disappears.

use super::Plan;
use super::prepare::Prepared;
use crate::classify::streams::Role;
use std::collections::BTreeSet;

/// Bytes a GPU operation costs in a Perfetto trace: its slice, annotations, lane and the flow
/// from its launch, plus the counter changes it causes (measured on `cargo bench`'s exports:
/// 143 B per kernel with its launch, of which the launch is about 45 B).
const GPU_OP_BYTES: u64 = 100;

/// Bytes another event costs (an API call, an NVTX range, an OS call, a metric sample).
const EVENT_BYTES: u64 = 48;

/// Bytes the counters cost per GPU operation of a process drawn by its counters only (each
/// start and end may change them; a change is a few bytes per counter).
const COUNTER_BYTES: u64 = 24;

/// Beyond this a browser may fail to open a Perfetto trace: a conversion that writes more says so.
pub const BROWSER_LIMIT: u64 = 1 << 30;

/// What to draw of each exported process, by position in [`Plan::exported`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Whether each process is drawn whole (else by its counters only).
    pub slices: Vec<bool>,
    /// The bytes this selection is estimated at.
    pub estimate: u64,
}

impl Selection {
    /// Whether every process is drawn whole.
    pub fn is_whole(&self) -> bool {
        self.slices.iter().all(|&s| s)
    }
}

/// A process's estimated bytes: drawn whole, and by its counters only.
fn cost(prepared: Option<&Prepared>) -> (u64, u64) {
    let (gpu, other) = prepared.map_or((0, 0), |p| p.events);
    (
        gpu * GPU_OP_BYTES + other * EVENT_BYTES,
        gpu * COUNTER_BYTES,
    )
}

/// The plan's estimated bytes, every process drawn as the plan says.
pub fn estimate(plan: &Plan, prepared: &[Option<Prepared>]) -> u64 {
    plan.exported
        .iter()
        .zip(prepared)
        .map(|(e, p)| {
            let (whole, counters) = cost(p.as_ref());
            if e.slices { whole } else { counters }
        })
        .sum()
}

/// The processes in the order their slices are kept: the first rank of each node, then the
/// first rank of each set of stream roles not yet shown, then the other ranks in rank order,
/// then the processes that are no rank.
fn priority(plan: &Plan, prepared: &[Option<Prepared>]) -> Vec<usize> {
    let host = |i: usize| super::split::host_of(plan, &plan.exported[i]);
    let roles = |i: usize| -> BTreeSet<String> {
        let streams = prepared[i].iter().flat_map(|p| &p.streams.streams);
        streams
            .filter(|s| !matches!(s.role, Role::Compute | Role::Copy))
            .map(|s| s.role.name(plan.rules).to_string())
            .collect()
    };
    let ranks: Vec<usize> = (0..plan.exported.len())
        .filter(|&i| plan.exported[i].rank.is_some())
        .collect();
    let (mut order, mut hosts, mut shown) = (Vec::new(), BTreeSet::new(), BTreeSet::new());
    for &i in &ranks {
        if hosts.insert(host(i)) {
            shown.insert(roles(i));
            order.push(i);
        }
    }
    for &i in &ranks {
        if !order.contains(&i) && shown.insert(roles(i)) {
            order.push(i);
        }
    }
    let rest = (0..plan.exported.len()).filter(|i| !order.contains(i));
    let (ranked, others): (Vec<usize>, Vec<usize>) =
        rest.partition(|&i| plan.exported[i].rank.is_some());
    order.extend(ranked);
    order.extend(others);
    order
}

/// The processes to draw whole so that the trace stays within `max` bytes: every process by its
/// counters, then, in the order of the module doc, each whose slices still fit. None when even the
/// counters of every process exceed `max`.
pub fn choose(plan: &Plan, prepared: &[Option<Prepared>], max: u64) -> Option<Selection> {
    let costs: Vec<(u64, u64)> = (0..plan.exported.len())
        .map(|i| cost(prepared.get(i).and_then(Option::as_ref)))
        .collect();
    let mut total: u64 = costs.iter().map(|c| c.1).sum();
    if total > max {
        return None;
    }
    let mut slices = vec![false; costs.len()];
    for i in priority(plan, prepared) {
        let more = costs[i].0.saturating_sub(costs[i].1);
        if total + more <= max {
            slices[i] = true;
            total += more;
        }
    }
    Some(Selection {
        slices,
        estimate: total,
    })
}

/// What a fitted plan keeps, for people: `the whole trace was estimated at 3.1 GB; kept each
/// rank's steady window, the slices of ranks 0, 2 and the counters only of ranks 1, 3
/// (estimated 190 MB)`.
pub fn describe(fitted: &Plan, window: &str, selection: &Selection, whole: u64) -> String {
    let names = |slices: bool| -> String {
        let drawn = fitted.exported.iter().filter(|e| e.slices == slices);
        let ranks: Vec<String> = drawn
            .clone()
            .filter_map(|e| e.rank.map(|r| r.rank.to_string()))
            .collect();
        let others = drawn.filter(|e| e.rank.is_none()).count();
        let mut text = match ranks.len() {
            0 => "no rank".to_string(),
            1 => format!("rank {}", ranks[0]),
            _ => format!("ranks {}", ranks.join(", ")),
        };
        if others > 0 {
            text.push_str(&format!(" and {others} other process(es)"));
        }
        text
    };
    let counters = match selection.is_whole() {
        true => String::new(),
        false => format!(" and the counters only of {}", names(false)),
    };
    format!(
        "the whole trace was estimated at {}; kept {window}, the slices of {}{counters} \
         (estimated {})",
        human_bytes(whole),
        names(true),
        human_bytes(selection.estimate)
    )
}

/// `1.20 GB`, `2.33 MB`, `340 kB`: a size for people, to three significant digits (a limit
/// and an estimate near it must not print alike).
pub fn human_bytes(bytes: u64) -> String {
    let (value, unit) = match bytes as f64 {
        b if b >= f64::from(1u32 << 30) => (b / f64::from(1u32 << 30), "GB"),
        b if b >= f64::from(1u32 << 20) => (b / f64::from(1u32 << 20), "MB"),
        b => (b / 1024.0, "kB"),
    };
    let decimals = match value {
        v if v < 10.0 => 2,
        v if v < 100.0 => 1,
        _ => 0,
    };
    format!("{value:.decimals$} {unit}")
}

#[cfg(test)]
mod tests {
    use super::human_bytes;

    #[test]
    fn sizes_print_with_three_significant_digits() {
        assert_eq!(human_bytes(2_436_527), "2.32 MB");
        assert_eq!(human_bytes(2 << 20), "2.00 MB");
        assert_eq!(human_bytes(200 << 20), "200 MB");
        assert_eq!(human_bytes(37_437), "36.6 kB");
        assert_eq!(human_bytes(3 << 29), "1.50 GB");
    }
}
