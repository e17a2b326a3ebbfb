//! `--align collectives`: injected clock skew is recovered on every preset at 2, 4 and 8 nodes;
//! on the real 3-node set the chosen offsets respect causality; converters shift each node's
//! events by its correction.

use crate::util::{convert_to, nsys_lens, real, sqlite_files, synth, texts};
use nsys_lens::analysis::align;
use nsys_lens::classify::rules::is_nccl;
use nsys_lens::model::Timeline;
use serde_json::Value;
use std::path::Path;

/// Node i's clock reads i x SKEW ahead.
const SKEW: i64 = 3_000_000;
/// How close the recovered corrections must be (synthetic collectives end exactly together).
const TOLERANCE_NS: i64 = 1_000;

/// Writes a skewed synthetic run; returns its directory.
fn skewed(preset_args: &str) -> tempfile::TempDir {
    synth(&format!("--clock-skew {SKEW} {preset_args}"))
}

/// `info --align collectives` as JSON.
fn alignment(dir: &Path) -> Value {
    let out = nsys_lens(&[
        "info",
        "-q",
        "--align",
        "collectives",
        "--format",
        "json",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", texts(&out).1);
    let info: Value = serde_json::from_slice(&out.stdout).unwrap();
    info["alignment"].clone()
}

#[test]
fn injected_skew_is_recovered_on_every_preset_for_2_4_8_nodes() {
    let runs = [
        (2, "--preset pithtrain --pp 2 --ep 2 --gpus-per-node 2"),
        (4, "--preset pithtrain --pp 2 --ep 2 --gpus-per-node 1"),
        (
            8,
            "--preset pithtrain --pp 2 --ep 2 --dp 2 --gpus-per-node 1",
        ),
        (2, "--preset ddp --nodes 2 --gpus-per-node 2"),
        (4, "--preset ddp --nodes 4 --gpus-per-node 1"),
        (8, "--preset ddp --nodes 8 --gpus-per-node 1"),
        (2, "--preset fsdp --nodes 2 --gpus-per-node 2"),
        (4, "--preset fsdp --nodes 4 --gpus-per-node 1"),
        (8, "--preset fsdp --nodes 8 --gpus-per-node 1"),
        (
            2,
            "--preset megatron --tp 2 --pp 1 --dp 2 --gpus-per-node 2",
        ),
        (
            4,
            "--preset megatron --tp 2 --pp 1 --dp 4 --gpus-per-node 2",
        ),
        (
            8,
            "--preset megatron --tp 2 --pp 1 --dp 8 --gpus-per-node 2",
        ),
    ];
    for (nodes, args) in runs {
        let dir = skewed(args);
        let a = alignment(dir.path());
        let rows = a["rows"].as_array().unwrap();
        assert_eq!(rows.len(), nodes, "{args:?}");
        for (i, row) in rows.iter().enumerate() {
            let got = row["collective_correction_ns"].as_i64().unwrap();
            let want = -(i as i64) * SKEW;
            assert!(
                (got - want).abs() <= TOLERANCE_NS,
                "{args:?} node {i}: correction {got}, injected {want}"
            );
            assert!(row["residual_after_ns"].as_i64().unwrap() <= TOLERANCE_NS);
        }
        // (The spread over all ranks can stay above zero: two DP groups of one node, e.g. one
        // per TP rank, share a kernel name and stream id but end at different times.)
        assert!(a["spread_after_ns"].as_i64().unwrap() < a["spread_before_ns"].as_i64().unwrap());
    }
}

#[test]
fn the_real_three_node_set_is_aligned_causally_on_its_one_collective() {
    let Some(dir) = real("fs24_nccl_allreduce_tree_3nodes_9gpus") else {
        return;
    };
    let files = sqlite_files(&dir);
    let mut timeline = Timeline::load(&files).unwrap();
    let estimate = align::estimate(&timeline);
    assert_eq!(estimate.instances, 1);
    assert!(
        estimate
            .notes
            .iter()
            .any(|n| n.contains("rests on one collective"))
    );
    assert_eq!(estimate.spread_before_ns, 11_002_754);
    assert!(estimate.spread_after_ns < estimate.spread_before_ns);
    let corrections: Vec<i64> = estimate.hosts.iter().map(|h| h.correction_ns).collect();
    timeline.shift_hosts(&corrections);
    // No rank ends the all-reduce before every rank started it.
    let collective: Vec<_> = timeline
        .kernels
        .iter()
        .filter(|k| is_nccl(timeline.text(k.short_name)))
        .collect();
    assert_eq!(collective.len(), 9);
    let latest_start = collective.iter().map(|k| k.start).max().unwrap();
    let earliest_end = collective.iter().map(|k| k.end).min().unwrap();
    assert!(
        earliest_end >= latest_start,
        "{earliest_end:?} < {latest_start:?}"
    );
    // The table says so too.
    let a = alignment(&dir);
    assert_eq!(a["instances"], 1);
    assert_eq!(a["spread_before_ns"], 11_002_754);
}

#[test]
fn converters_shift_each_node_by_its_correction() {
    let dir = skewed("--preset ddp --nodes 2 --gpus-per-node 1");
    let files = sqlite_files(dir.path());
    // Paraver: node 1's records move by -SKEW relative to node 0's.
    let (_a, plain) = convert_to("paraver", &files, &[]);
    let (_b, aligned) = convert_to("paraver", &files, &["--align", "collectives"]);
    let first_kernel = |base: &Path, task: u32| -> i64 {
        let text = std::fs::read_to_string(base.with_extension("prv")).unwrap();
        text.lines()
            .filter(|l| l.starts_with("2:"))
            .map(|l| {
                l.split(':')
                    .map(|f| f.parse::<i64>().unwrap())
                    .collect::<Vec<_>>()
            })
            .find(|f| f[3] == i64::from(task) && f[6] == 63_000_006 && f[7] != 0)
            .map(|f| f[5])
            .unwrap()
    };
    let shift0 = first_kernel(&aligned, 1) - first_kernel(&plain, 1);
    let shift1 = first_kernel(&aligned, 2) - first_kernel(&plain, 2);
    assert_eq!(
        shift1 - shift0,
        -SKEW,
        "node 1 moves by its correction relative to node 0"
    );
    let provenance = std::fs::read_to_string(aligned.with_extension("prv")).unwrap();
    assert!(provenance.contains(&format!("collective correction {:+} ns", -SKEW)));
    // Perfetto: the metadata names the correction; the trace still checks out.
    let (_c, perfetto) = convert_to("perfetto", &files, &["--align", "collectives"]);
    let bytes = std::fs::read(perfetto.with_extension("perfetto-trace")).unwrap();
    let needle = format!("collective correction {:+} ns", -SKEW);
    assert!(bytes.windows(needle.len()).any(|w| w == needle.as_bytes()));
}
