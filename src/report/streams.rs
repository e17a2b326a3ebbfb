//! `streams`: the role of every CUDA stream per rank, with its work inside the window.

use super::ranks::{RankWindow, key_cells, per_rank_output};
use super::table::{Cell, Output, Table};
use crate::classify::rules::P2P;
use crate::classify::{Evidence, RankStreams, RoleRules};
use crate::model::{StreamId, Timeline};
use indexmap::IndexMap;

/// The `streams` output: one row per (rank, stream with work in the window).
pub fn streams_output(
    timeline: &Timeline,
    ranks: &[(RankWindow, RankStreams)],
    rules: &RoleRules,
) -> Output {
    let mut table = Table::new(&[
        "rank",
        "host",
        "pid",
        "device",
        "stream",
        "role",
        "n_comm",
        "n_comp",
        "comm_ns",
        "comp_ns",
        "busy_ns",
        "comm_roles",
    ]);
    for (w, streams) in ranks {
        for s in &streams.streams {
            let stream = timeline.stream(s.stream);
            let mut row = key_cells(timeline, &w.rank);
            row.extend([
                Cell::Int(timeline.gpu(stream.gpu).device.into()),
                Cell::Int(stream.stream.into()),
                Cell::text(s.role.name(rules)),
                Cell::Int(s.n_comm as i64),
                Cell::Int(s.n_comp as i64),
                Cell::Int(s.comm_ns),
                Cell::Int(s.comp_ns),
                Cell::Int(s.busy_ns),
                comm_roles(timeline, streams, s.stream, rules),
            ]);
            table.push(row);
        }
    }
    let mut output = per_rank_output(timeline, table, ranks.iter().map(|(w, _)| w));
    output.notes.push(
        "comm_roles: the stream's communication kernels and peer copies by role, with the \
         evidence that decided it (rule, framework, torch, nccl_nvtx, stream, kernel_name, \
         copy_kind; see docs/roles.md)"
            .to_string(),
    );
    output
        .notes
        .extend(missing_evidence(ranks.iter().map(|(_, s)| s), rules));
    output
}

/// Says which evidence was missing where roles stop short of a purpose: transfers named only by
/// their NCCL pattern (no framework range around the launch), and kernels with no NVTX at all.
pub fn missing_evidence<'s>(
    ranks: impl Iterator<Item = &'s RankStreams>,
    rules: &RoleRules,
) -> Vec<String> {
    let (mut pattern, mut bare) = (0, 0);
    for k in ranks.flat_map(|s| &s.comm) {
        let role = rules.label(k.purpose);
        match k.evidence {
            Evidence::Nccl(_) if role == "nccl:AllToAll" || role == P2P => pattern += 1,
            Evidence::KernelName if k.point_to_point => bare += 1,
            _ => {}
        }
    }
    let mut notes = Vec::new();
    if pattern > 0 {
        notes.push(format!(
            "{pattern} transfer kernel(s) are named by NCCL's call pattern only (`nccl:AllToAll`, \
             `p2p`): no framework NVTX range around their launch says whether they serve expert, \
             context or pipeline parallelism; a --roles rule can (docs/roles.md)"
        ));
    }
    if bare > 0 {
        notes.push(format!(
            "{bare} point-to-point kernel(s) have no NVTX around their launch (neither framework \
             nor NCCL ranges: profile with --trace=nvtx and NCCL's NVTX on): named by the kernel \
             only"
        ));
    }
    notes
}

/// The stream's NCCL kernels grouped by (role, evidence kind): `ep_a2a 12 [framework]` for
/// people; in JSON a list of `{role, in_stream, evidence, example, kernels}`.
fn comm_roles(
    timeline: &Timeline,
    streams: &RankStreams,
    stream: StreamId,
    rules: &RoleRules,
) -> Cell {
    let mut groups: IndexMap<(&str, &str), (u64, String, bool)> = IndexMap::new();
    for k in streams.comm.iter().filter(|k| k.stream == stream) {
        let key = (k.role_name(rules), k.evidence.kind());
        let entry = groups
            .entry(key)
            .or_insert_with(|| (0, k.evidence.describe(timeline), k.in_stream));
        entry.0 += 1;
    }
    let text = groups
        .iter()
        .map(|((role, evidence), (n, ..))| format!("{role} {n} [{evidence}]"))
        .collect::<Vec<_>>()
        .join("; ");
    let json = groups
        .into_iter()
        .map(|((role, evidence), (kernels, example, in_stream))| {
            serde_json::json!({
                "role": role,
                "in_stream": in_stream,
                "evidence": evidence,
                "example": example,
                "kernels": kernels,
            })
        })
        .collect();
    Cell::Detail(text, serde_json::Value::Array(json))
}
