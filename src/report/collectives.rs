//! `collectives`: every collective instance with its arrivals, or each rank's totals.

use super::ranks::{RankWindow, key_cells, per_rank_output};
use super::table::{Cell, Output, Table};
use crate::analysis::collectives::{Arrival, Collectives, Instance, RankWaits};
use crate::model::Timeline;
use serde_json::Value;

/// One row per instance, in the order given.
pub fn instances_output(
    timeline: &Timeline,
    windows: &[RankWindow],
    collectives: &Collectives,
    instances: &[&Instance],
) -> Output {
    let mut table = Table::new(&[
        "op",
        "communicator",
        "matched_by",
        "sequence",
        "members",
        "first_start_ns",
        "last_start_ns",
        "skew_ns",
        "last_rank",
        "last_host",
        "last_pid",
        "duration_ns",
        "waits_ns",
        "bytes",
        "busbw_gbps",
    ]);
    for i in instances {
        let c = &collectives.communicators[i.communicator];
        let (first, last) = i.first_last();
        let rank = &windows[last.rank].rank;
        let process = timeline.process(rank.process);
        // One number per member, in member order: a list in JSON, space-separated elsewhere.
        let per_member = |f: &dyn Fn(&Arrival) -> i64| {
            let values: Vec<i64> = i.arrivals.iter().map(f).collect();
            let text = values.iter().map(i64::to_string).collect::<Vec<_>>();
            Cell::Detail(text.join(" "), Value::from(values))
        };
        table.push(vec![
            Cell::text(&c.op),
            Cell::text(format!("c{}", i.communicator)),
            Cell::text(c.matched_by.name()),
            Cell::Int(i.sequence.into()),
            per_member(&|a| windows[a.rank].rank.rank.into()),
            Cell::Int(first.start),
            Cell::Int(last.start),
            Cell::Int(i.skew()),
            Cell::Int(rank.rank.into()),
            Cell::text(&timeline.host(process.host).name),
            Cell::Int(process.pid.into()),
            Cell::Int(i.duration()),
            per_member(&|a| last.start - a.start),
            i.bytes.map_or(Cell::Empty, |b| Cell::Int(b as i64)),
            i.busbw_gbps(&c.op).map_or(Cell::Empty, Cell::Number),
        ]);
    }
    let mut output = per_rank_output(timeline, Table::default(), windows.iter());
    output.table = table;
    output.notes.extend(notes(collectives, instances));
    output
}

/// One row per rank.
pub fn by_rank_output(timeline: &Timeline, windows: &[RankWindow], waits: &[RankWaits]) -> Output {
    let mut table = Table::new(&[
        "rank",
        "host",
        "pid",
        "instances",
        "waited_ns",
        "caused_ns",
        "times_last",
    ]);
    for (w, r) in windows.iter().zip(waits) {
        let mut row = key_cells(timeline, &w.rank);
        row.extend([
            Cell::Int(r.instances as i64),
            Cell::Int(r.waited_ns),
            Cell::Int(r.caused_ns),
            Cell::Int(r.times_last as i64),
        ]);
        table.push(row);
    }
    let mut output = per_rank_output(timeline, table, windows.iter());
    output.notes.push(
        "waited_ns: wall time the rank spent in collectives waiting for their last member \
         (waits on several streams at once count once); caused_ns: time the other members \
         waited for it when it was last, summed"
            .to_string(),
    );
    output
}

/// What the matching rests on, and why nothing matched when nothing did.
fn notes(collectives: &Collectives, instances: &[&Instance]) -> Vec<String> {
    let mut notes = vec![format!(
        "{} communicator(s): one collective (from NCCL's calls, PyTorch's collective ranges or \
         the kernel name) run as one kernel name, within the communicator its records name \
         (matched_by nccl_id, process_group) or else by timing alone: on one stream of each \
         member whatever its id, hosts joined where the instances' end times keep one \
         distance; an instance is the k-th kernel of each member; arrival = kernel start, \
         waits = last arrival - own arrival",
        collectives.communicators.len()
    )];
    if collectives.instances.is_empty() {
        notes.push(unmatched(collectives));
    } else {
        notes.extend(left_out(collectives));
    }
    notes.push(sizes_note(instances));
    notes
}

/// The communication kernels the instances leave out, when some matched.
fn left_out(collectives: &Collectives) -> Vec<String> {
    let matched: u64 = (collectives.instances.iter())
        .map(|i| i.arrivals.len() as u64)
        .sum();
    let mut notes = Vec::new();
    let alone = collectives.kernels.saturating_sub(matched);
    if alone > 0 {
        notes.push(format!(
            "{alone} of the {} collective kernel(s) are in no instance: no other member ran the \
             same collective at that point (traces that hold only some ranks, or some of each \
             rank's kernels)",
            collectives.kernels
        ));
    }
    let n = collectives.unlaunched;
    if n > 0 {
        notes.push(format!(
            "{n} communication kernel(s) launched before the capture began are in no instance: \
             their launch, which says which collective they carry, is not in the capture"
        ));
    }
    let n = collectives.unnamed_transfers;
    if n > 0 {
        notes.push(format!(
            "{n} point-to-point kernel(s) (SendRecv) are in no instance: nothing around their \
             launch says which collective they carry (no NCCL NVTX range or framework \
             collective range)"
        ));
    }
    notes
}

/// Where the sizes come from, or which capture would give them.
fn sizes_note(instances: &[&Instance]) -> String {
    let sized = instances.iter().filter(|i| i.bytes.is_some()).count();
    let missing = instances.len() - sized;
    let how = "bytes: the larger of the input and output buffers, from NCCL's payloads or \
               PyTorch's record_param_comms; busbw_gbps: bytes / (last end - last arrival) \
               x NCCL's factor (all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all \
               (n-1)/n; broadcast, reduce, send/recv 1), n the communicator's recorded size";
    match (sized, missing) {
        (_, 0) => how.to_string(),
        (0, n) => format!(
            "{how}; none of the {n} instance(s) has a size: record them with torch.profiler \
             (record_param_comms), or with NCCL 2.23+ under nsys and `nsys export \
             --include-json=true`"
        ),
        (_, n) => format!("{how}; {n} instance(s) have no size record"),
    }
}

/// Why no instance matched: which evidence was missing.
fn unmatched(collectives: &Collectives) -> String {
    match (collectives.kernels, collectives.unnamed_transfers) {
        (0, 0) => "no instance: no rank ran a collective kernel".to_string(),
        (0, n) => format!(
            "no instance: the {n} communication kernel(s) are point-to-point (SendRecv) with \
             nothing around their launch to say which collective they carry: capture NCCL's \
             NVTX (nsys --trace=nvtx) or PyTorch's collective names (torch.profiler, or nsys \
             --pytorch=autograd-nvtx)"
        ),
        (n, _) if collectives.processes == 1 => {
            let members = collectives
                .recorded_ranks
                .map_or(String::new(), |r| format!(" (their records say {r} ranks)"));
            format!(
                "no instance: {n} collective kernel(s), all on one rank: give the traces of \
                 their other members{members} too"
            )
        }
        (n, _) => {
            let some = match collectives.world_size {
                Some(world) if world as usize > collectives.processes => format!(
                    "; these traces hold {} of the run's {world} ranks (its world size)",
                    collectives.processes
                ),
                _ => String::new(),
            };
            format!(
                "no instance: {n} collective kernel(s), but no family ran on two ranks together: \
                 on one host their kernels do not overlap in time, across hosts their end times \
                 do not keep one distance (separate clocks, or traces that hold only some ranks \
                 or some of each rank's kernels){some}"
            )
        }
    }
}
