//! Issue 17: reports are read on several threads at once; the outputs are byte for byte the
//! ones of reading them one after another.

use crate::util::{nsys_lens, real, root, texts};
use std::path::Path;

/// Every output of a command set, for one thread count.
fn outputs(input: &Path, threads: &str) -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("run");
    let input = input.to_str().unwrap();
    let mut out = Vec::new();
    for args in [
        vec!["info", "--format", "json"],
        vec!["overlap", "--whole", "--format", "json"],
        vec!["collectives", "--whole", "--format", "json"],
        vec!["convert", "-o", base.to_str().unwrap()],
    ] {
        let mut all = args.clone();
        all.extend([input, "--threads", threads, "-q"]);
        let run = nsys_lens(&all);
        assert!(run.status.success(), "{all:?}: {}", texts(&run).1);
        out.push(run.stdout);
    }
    for ext in ["perfetto-trace", "prv", "pcf", "row"] {
        out.push(std::fs::read(base.with_extension(ext)).unwrap());
    }
    out
}

#[test]
fn reading_reports_on_several_threads_changes_nothing() {
    let mut inputs = vec![root().join("fixtures/pithtrain_pp2_ep2")];
    inputs.extend(real("fs24_nccl_allreduce_tree_3nodes_9gpus"));
    for input in inputs {
        let one = outputs(&input, "1");
        for threads in ["2", "4"] {
            assert!(
                outputs(&input, threads) == one,
                "{}: {threads} threads",
                input.display()
            );
        }
    }
}

/// The timeline of `paths` read with `threads` threads and ranges of `chunk_rows` rows, or the
/// error, as text (the timeline's `Debug` form holds every entity, event, string and warning).
fn timeline_text(paths: &[std::path::PathBuf], threads: usize, chunk_rows: i64) -> String {
    let reports = paths
        .iter()
        .map(|p| nsys_lens::nsys::Report::open(p))
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    match nsys_lens::model::Timeline::from_reports_chunked(reports, threads, chunk_rows) {
        Ok(timeline) => format!("{timeline:?}"),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn one_report_read_in_rowid_ranges_on_several_connections_is_the_same_timeline() {
    let mut inputs: Vec<Vec<std::path::PathBuf>> = vec![
        vec![root().join("fixtures/megatron_pp2/node0.sqlite")],
        vec![root().join("fixtures/pithtrain_pp2_ep2/node0.sqlite")],
    ];
    // A real export with OS runtime calls (4,630) and one without.
    for file in [
        "nsysai_mfu_2gpu_before_2026.2.1.sqlite",
        "mordred_report1_pre2022.sqlite",
    ] {
        inputs.extend(real(file).map(|p| vec![p]));
    }
    // OS runtime calls and GPU metrics, read in ranges like the CUDA tables.
    let synthetic = crate::util::synth(
        "--preset ddp --nodes 1 --gpus-per-node 2 --steps 2 --slow-dataloader --osrt --gpu-metrics",
    );
    inputs.push(vec![synthetic.path().join("node0.sqlite")]);
    for paths in inputs {
        let sequential = timeline_text(&paths, 1, i64::MAX);
        assert!(!sequential.starts_with("error"), "{sequential}");
        // Ranges of 1, 7 and 1000 rows, read by 2 and 3 connections: many ranges, ranges that
        // end mid-table, and more ranges in flight than workers.
        for (threads, rows) in [(2, 1), (3, 7), (2, 1000)] {
            assert!(
                timeline_text(&paths, threads, rows) == sequential,
                "{}: {threads} threads, ranges of {rows} rows",
                paths[0].display()
            );
        }
    }
}

#[test]
fn read_in_ranges_the_first_bad_row_is_the_error_a_sequential_scan_gives() {
    // Row 40 names a string that does not exist and row 300 ends before it starts: a sequential
    // scan stops at row 40, and so must ranges of 16 rows read in any order.
    let (_dir, copy) = crate::util::damaged_copy(
        "megatron_pp2/node0.sqlite",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET shortName = 987654321 WHERE rowid = 40;
         UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = start - 1 WHERE rowid = 300;",
    );
    let sequential = timeline_text(std::slice::from_ref(&copy), 1, i64::MAX);
    assert!(
        sequential.contains("987654321") && sequential.contains("row 40"),
        "{sequential}"
    );
    assert_eq!(
        timeline_text(std::slice::from_ref(&copy), 3, 16),
        sequential
    );
    // Only the reversed interval: the error of row 300 either way.
    let (_dir, copy) = crate::util::damaged_copy(
        "megatron_pp2/node0.sqlite",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = start - 1 WHERE rowid = 300;",
    );
    let sequential = timeline_text(std::slice::from_ref(&copy), 1, i64::MAX);
    assert!(sequential.contains("300"), "{sequential}");
    assert_eq!(timeline_text(&[copy], 3, 16), sequential);
}

#[test]
fn nvtx_read_in_ranges_keeps_string_order_warnings_and_the_first_error() {
    // Invalid UTF-8 in inline texts of rows in different ranges (rows 2 and 150 the same
    // bytes), and one range's texts moved to another's: the strings, their order and the
    // non-UTF-8 count must be those of one scan.
    let (_dir, copy) = crate::util::damaged_copy(
        "megatron_pp2/node0.sqlite",
        "UPDATE NVTX_EVENTS SET text = CAST(X'66ff6f' AS TEXT), textId = NULL WHERE rowid IN (2, 150);
         UPDATE NVTX_EVENTS SET text = CAST(X'62fe61' AS TEXT), textId = NULL WHERE rowid = 60;
         UPDATE NVTX_EVENTS SET text = 'forward' WHERE rowid = 170;",
    );
    let sequential = timeline_text(std::slice::from_ref(&copy), 1, i64::MAX);
    assert!(sequential.contains("non_utf8: 3"), "{sequential}");
    for (threads, rows) in [(2, 1), (3, 7), (2, 50)] {
        assert!(
            timeline_text(std::slice::from_ref(&copy), threads, rows) == sequential,
            "{threads} threads, ranges of {rows} rows"
        );
    }
    // A text that does not resolve at row 30 and a range that ends before it starts at row
    // 90: the error is row 30's either way.
    let (_dir, copy) = crate::util::damaged_copy(
        "megatron_pp2/node0.sqlite",
        "UPDATE NVTX_EVENTS SET text = NULL, textId = 987654321 WHERE rowid = 30;
         UPDATE NVTX_EVENTS SET \"end\" = start - 1 WHERE rowid = 90;",
    );
    let sequential = timeline_text(std::slice::from_ref(&copy), 1, i64::MAX);
    assert!(sequential.contains("987654321"), "{sequential}");
    assert_eq!(
        timeline_text(std::slice::from_ref(&copy), 3, 16),
        sequential
    );
}
