//! `convert --to perfetto`: every written trace is decoded by an independent checker
//! (`tests/perfetto_check.py`, with the upstream schema from the PyPI package `perfetto`) that
//! checks trace_processor's invariants; slice counts must equal the input's row counts, and the
//! exposed-communication counter must agree with `overlap`.

use crate::util::{
    convert_to, count, fixture, nsys_lens, pithtrain_nodes, real, root, sqlite_files,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The checker's summary of a trace, or None when the `perfetto` Python package is missing
/// (outside CI, which installs it: there a missing checker fails the test).
pub fn check(trace: &Path) -> Option<Value> {
    let out = Command::new("python3")
        .arg(root().join("tests/perfetto_check.py"))
        .arg(trace)
        .output();
    let missing = match &out {
        Ok(o) => o.status.code() == Some(3),
        Err(_) => true,
    };
    if missing {
        assert!(
            std::env::var_os("NSYS_LENS_CI").is_none(),
            "CI must install python3 and the perfetto package (see .ci/run)"
        );
        crate::util::skipped(
            "the trace check: python3 with the `perfetto` package is not installed",
        );
        return None;
    }
    let out = out.expect("checked above");
    assert!(
        out.status.success(),
        "checker failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).expect("checker prints JSON");
    assert_eq!(
        summary["problems"],
        Value::Array(vec![]),
        "{}",
        trace.display()
    );
    Some(summary)
}

/// Converts `reports` into a fresh directory; returns it and the trace path.
fn convert(reports: &[PathBuf], extra: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let (dir, base) = convert_to("perfetto", reports, extra);
    let ext = if extra.contains(&"--gzip") {
        "perfetto-trace.gz"
    } else {
        "perfetto-trace"
    };
    let trace = base.with_extension(ext);
    assert!(trace.exists());
    (dir, trace)
}

/// Row counts of the inputs, read with SQL: (kernels, memcpy, memset, api, nvtx ranges+marks).
fn input_counts(reports: &[PathBuf]) -> [u64; 5] {
    let mut total = [0; 5];
    for r in reports {
        let nvtx = {
            let conn = rusqlite::Connection::open_with_flags(
                r,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .unwrap();
            conn.query_row(
                "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (34, 59, 60, 70, 71)",
                [],
                |row| row.get::<_, i64>(0),
            )
            .map_or(0, |n| n as u64)
        };
        let counts = [
            count(r, "CUPTI_ACTIVITY_KIND_KERNEL"),
            count(r, "CUPTI_ACTIVITY_KIND_MEMCPY"),
            count(r, "CUPTI_ACTIVITY_KIND_MEMSET"),
            count(r, "CUPTI_ACTIVITY_KIND_RUNTIME"),
            nvtx,
        ];
        for (t, c) in total.iter_mut().zip(counts) {
            *t += c;
        }
    }
    total
}

/// The checker's slice counts in the order of [`input_counts`].
fn trace_counts(summary: &Value) -> [u64; 5] {
    ["kernel", "memcpy", "memset", "cuda_api", "nvtx"]
        .map(|c| summary["counts"][c].as_u64().unwrap_or(0))
}

fn converts_completely(reports: &[PathBuf]) -> Option<Value> {
    let (_dir, trace) = convert(reports, &[]);
    let summary = check(&trace)?;
    assert_eq!(trace_counts(&summary), input_counts(reports), "{reports:?}");
    assert_eq!(summary["process_ordering"], 1);
    Some(summary)
}

#[test]
fn two_nodes_with_the_same_pids_give_four_rank_tracks_in_rank_order() {
    let reports = pithtrain_nodes();
    let Some(summary) = converts_completely(&reports) else {
        return;
    };
    let names: Vec<&str> = summary["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "rank 0 · pp 0/2 ep 0/2 · node node0 · pid 41207 · GPU 0 (NVIDIA H100 80GB HBM3)",
            "rank 1 · pp 0/2 ep 1/2 · node node0 · pid 41220 · GPU 1 (NVIDIA H100 80GB HBM3)",
            "rank 2 · pp 1/2 ep 0/2 · node node1 · pid 41207 · GPU 0 (NVIDIA H100 80GB HBM3)",
            "rank 3 · pp 1/2 ep 1/2 · node node1 · pid 41220 · GPU 1 (NVIDIA H100 80GB HBM3)",
        ]
    );
    let tracks = summary["track_names"].to_string();
    for name in [
        "GPU 0 · stream 20 · ep_a2a",
        "GPU 1 · stream 32 · pp_p2p",
        "GPU 0 · stream 7 · compute",
        "exposed communication",
    ] {
        assert!(tracks.contains(name), "{name} missing from {tracks}");
    }
    // Every launch of the fixture has its GPU operation: one flow per kernel, copy and set;
    // the others link synchronizations.
    let [kernels, memcpy, memset, ..] = input_counts(&reports);
    let syncs = summary["sync_flows"].as_array().unwrap().len() as u64;
    let held = summary["gpu_flows"].as_array().unwrap().len() as u64;
    assert!(syncs > 0);
    assert_eq!(
        summary["flows"].as_u64(),
        Some(kernels + memcpy + memset + syncs + held)
    );
}

#[test]
fn exposed_counter_integrates_to_the_overlap_tables_wall_clock_exposure() {
    let reports = pithtrain_nodes();
    let (_dir, trace) = convert(&reports, &[]);
    let Some(summary) = check(&trace) else {
        return;
    };
    let offset = summary["rebase_offset_ns"]
        .as_i64()
        .expect("rebase offset recorded");
    let paths: Vec<&str> = reports.iter().map(|p| p.to_str().unwrap()).collect();
    let overlap = nsys_lens(&[&["overlap", "--format", "json"], &paths[..]].concat());
    let overlap: Value = serde_json::from_slice(&overlap.stdout).unwrap();
    let processes = summary["processes"].as_array().unwrap();
    for (rank, window) in overlap["windows"].as_array().unwrap().iter().enumerate() {
        let (start, end) = (
            window["start"].as_i64().unwrap() - offset,
            window["end"].as_i64().unwrap() - offset,
        );
        let key = format!(
            "{} | exposed communication",
            processes[rank].as_str().unwrap()
        );
        let steps = summary["counters"][&key]
            .as_array()
            .expect("counter present");
        let integral = integrate(steps, start, end);
        let row = overlap["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rank"] == rank && r["stage"] == "all" && r["role"] == "all")
            .unwrap();
        assert_eq!(
            integral,
            row["exposed_wall_ns"].as_i64().unwrap(),
            "rank {rank}"
        );
        assert!(
            integral > 0,
            "rank {rank}: the fixture has exposed communication"
        );
    }
}

/// ∫ value dt over [start, end) of a step function given as (time, value) samples.
pub fn integrate(steps: &[Value], start: i64, end: i64) -> i64 {
    let samples: Vec<(i64, i64)> = steps
        .iter()
        .map(|s| (s[0].as_i64().unwrap(), s[1].as_i64().unwrap()))
        .collect();
    let mut total = 0;
    for (i, &(t, v)) in samples.iter().enumerate() {
        let next = samples.get(i + 1).map_or(i64::MAX, |s| s.0);
        let (a, b) = (t.max(start), next.min(end));
        if a < b {
            total += v * (b - a);
        }
    }
    total
}

#[test]
fn the_three_node_nccl_run_converts_completely() {
    let Some(dir) = real("fs24_nccl_allreduce_tree_3nodes_9gpus") else {
        return;
    };
    let reports = sqlite_files(&dir);
    assert_eq!(reports.len(), 9);
    if let Some(summary) = converts_completely(&reports) {
        assert_eq!(summary["processes"].as_array().unwrap().len(), 9);
    }
}

#[test]
fn every_real_export_converts_completely() {
    let Some(dir) = real("") else {
        return;
    };
    let files = sqlite_files(&dir);
    assert!(files.len() >= 8);
    for file in files {
        if converts_completely(std::slice::from_ref(&file)).is_none() {
            return;
        }
    }
}

#[test]
fn overlapping_kernels_on_one_stream_go_on_lanes() {
    // Two kernels of pid 144 on stream 7 overlap by 12,442 ns (perfetto.md §8): one stream, two
    // same-named lane tracks; the checker verifies nesting on each.
    let Some(file) = real("nsysai_mfu_2gpu_before_2026.2.1.sqlite") else {
        return;
    };
    let (_dir, trace) = convert(&[file], &[]);
    if let Some(summary) = check(&trace) {
        assert!(summary["tracks"].as_u64().unwrap() > 0);
    }
}

#[test]
fn gzip_ranks_and_windows_export_part_of_a_run() {
    let reports = pithtrain_nodes();
    let (_dir, trace) = convert(&reports, &["--gzip", "--ranks", "1-2", "--steady"]);
    let bytes = std::fs::read(&trace).unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b]);
    let Some(summary) = check(&trace) else {
        return;
    };
    let names = summary["processes"].to_string();
    assert!(
        names.contains("rank 1 ") && names.contains("rank 2 "),
        "{names}"
    );
    assert!(
        !names.contains("rank 0 ") && !names.contains("rank 3 "),
        "{names}"
    );
    let [kernels, ..] = trace_counts(&summary);
    assert!(
        kernels > 0 && kernels < input_counts(&reports)[0] / 4,
        "{kernels}"
    );
}

#[test]
fn a_failed_conversion_leaves_no_file() {
    // The output directory would have to be created under a regular file: refused.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plain"), b"x").unwrap();
    let target = dir.path().join("plain/sub/out");
    let report = fixture("pithtrain_pp2_ep2/node0.sqlite");
    let output = nsys_lens(&[
        "convert",
        "-o",
        target.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "only the file itself"
    );
    // A missing directory is created.
    let made = dir.path().join("new/dir/out");
    let output = nsys_lens(&[
        "convert",
        "-q",
        "-o",
        made.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(output.status.success());
    assert!(made.with_extension("prv").exists());
    let output = nsys_lens(&["convert", "--ranks", "9", report.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
}

/// Issue 15: every NCCL kernel slice carries its own role (`comm_role`), with the same counts
/// per role as `streams` gives; on the real mfu capture, 66 in-stream all-to-alls.
#[test]
fn nccl_kernel_slices_carry_their_role() {
    let reports = pithtrain_nodes();
    let (_dir, trace) = convert(&reports, &[]);
    let Some(summary) = check(&trace) else {
        return;
    };
    let paths: Vec<&str> = reports.iter().map(|p| p.to_str().unwrap()).collect();
    let want = crate::util::comm_roles(&paths);
    let got: std::collections::BTreeMap<String, u64> =
        serde_json::from_value(summary["comm_roles"].clone()).unwrap();
    assert_eq!(got, want);
    let Some(file) = real("nsysai_mfu_2gpu_before_2026.2.1.sqlite") else {
        return;
    };
    let (_dir, trace) = convert(&[file], &[]);
    let summary = check(&trace).expect("checked above");
    assert_eq!(
        summary["comm_roles"],
        serde_json::json!({"nccl:AllToAll": 66})
    );
}

/// Issue 17: `--compress`, or an `-o` name ending in `.gz`, gzips both traces (named without a
/// doubled `.gz`), and the checkers read them.
#[test]
fn an_output_name_ending_in_gz_compresses_both_traces() {
    let dir = tempfile::tempdir().unwrap();
    let reports = pithtrain_nodes();
    let mut args = vec!["convert", "-q", "-o"];
    let out = dir.path().join("run.gz");
    args.push(out.to_str().unwrap());
    args.extend(reports.iter().map(|p| p.to_str().unwrap()));
    let run = nsys_lens(&args);
    assert!(run.status.success());
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["run.pcf", "run.perfetto-trace.gz", "run.prv.gz", "run.row"]
    );
    for gz in ["run.perfetto-trace.gz", "run.prv.gz"] {
        let bytes = std::fs::read(dir.path().join(gz)).unwrap();
        assert_eq!(&bytes[..2], &[0x1f, 0x8b], "{gz}");
    }
    crate::paraver::pertalde(&dir.path().join("run.prv.gz"));
    check(&dir.path().join("run.perfetto-trace.gz"));
}

/// CUPTI records `cudaLaunchKernel_v7000`; Nsight and nsys2prv show `cudaLaunchKernel`. The
/// slices are named so, and the suffix is each slice's `cupti_version` argument.
#[test]
fn cuda_api_slices_are_named_as_nsight_shows_them_with_the_version_an_argument() {
    let report = fixture("megatron_pp2/node0.sqlite");
    let (_dir, trace) = convert(std::slice::from_ref(&report), &[]);
    let Some(summary) = check(&trace) else {
        return;
    };
    let db = rusqlite::Connection::open(&report).unwrap();
    let mut by_name: std::collections::BTreeMap<String, u64> = Default::default();
    let mut versioned = 0;
    let mut rows = db
        .prepare(
            "SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r \
             JOIN StringIds s ON s.id = r.nameId GROUP BY s.value",
        )
        .unwrap();
    let rows = rows
        .query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
        })
        .unwrap();
    for row in rows {
        let (name, n) = row.unwrap();
        let base = match name.rfind("_v") {
            Some(at) if name[at + 2..].chars().all(|c| c.is_ascii_digit()) => {
                versioned += n;
                name[..at].to_string()
            }
            _ => name,
        };
        *by_name.entry(base).or_default() += n;
    }
    assert!(versioned > 0 && by_name.contains_key("cudaLaunchKernel"));
    let got: std::collections::BTreeMap<String, u64> =
        serde_json::from_value(summary["api_names"].clone()).unwrap();
    assert_eq!(got, by_name);
    assert_eq!(summary["args"]["cupti_version"].as_u64(), Some(versioned));
}

/// Issue 36: a stream whose kernels overlap drew two tracks named `GPU 0 · stream 7 · compute`.
/// The second lane is now `... · lane 2`, and the checker fails any trace with two sibling
/// tracks of one name (the real 2xH100 export had one such pair).
#[test]
fn overlap_lanes_have_names_of_their_own() {
    let Some(report) = real("nsysai_mfu_2gpu_before_2026.2.1.sqlite") else {
        return;
    };
    let (_dir, trace) = convert(&[report], &[]);
    let Some(summary) = check(&trace) else {
        return;
    };
    let names = summary["track_names"].to_string();
    assert!(
        names.contains("\"GPU 0 · stream 7 · compute · lane 2\""),
        "{names}"
    );
    assert!(names.contains("\"GPU 0 · stream 7 · compute\""), "{names}");
}

/// Issue 36: copies and sets carry Nsight's throughput, `throughput_mb_s` = bytes x 1000 / ns
/// (rounded down), computed here in SQL from the export's rows; an operation of no duration
/// has none.
#[test]
fn copies_and_sets_carry_their_throughput() {
    let Some(report) = real("nsysai_mfu_2gpu_before_2026.2.1.sqlite") else {
        return;
    };
    let (_dir, trace) = convert(std::slice::from_ref(&report), &[]);
    let Some(summary) = check(&trace) else {
        return;
    };
    let db = rusqlite::Connection::open(&report).unwrap();
    let (mut count, mut sum) = (0u64, 0u64);
    for table in ["CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"] {
        let (n, s): (i64, i64) = db
            .query_row(
                &format!(
                    "SELECT count(*), coalesce(sum(bytes * 1000 / (end - start)), 0) FROM {table} \
                     WHERE end > start"
                ),
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        count += n as u64;
        sum += s as u64;
    }
    assert!(count > 0);
    assert_eq!(summary["args"]["throughput_mb_s"].as_u64(), Some(count));
    assert_eq!(summary["arg_sums"]["throughput_mb_s"].as_u64(), Some(sum));
    // Memory kinds, as Nsight names ENUM_CUDA_MEM_KIND (ids spelled out here, from SQL): a
    // copy's source and destination, a set's memory as its destination.
    let names = ["pageable", "pinned", "device", "array", "managed"];
    let memset = "SELECT memKind, count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET GROUP BY 1";
    for (column, arg, also) in [
        ("srcKind", "src_memory", None),
        ("dstKind", "dst_memory", Some(memset)),
    ] {
        let mut by_kind: std::collections::BTreeMap<String, u64> = Default::default();
        let sql = format!("SELECT {column}, count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1");
        for sql in std::iter::once(sql.as_str()).chain(also) {
            let mut query = db.prepare(sql).unwrap();
            let rows = query
                .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
                .unwrap();
            for row in rows {
                let (kind, n) = row.unwrap();
                *by_kind.entry(names[kind as usize].to_string()).or_default() += n as u64;
            }
        }
        let got: std::collections::BTreeMap<String, u64> =
            serde_json::from_value(summary["arg_texts"][arg].clone()).unwrap();
        assert_eq!(got, by_kind, "{arg}");
    }
}

/// Issue 36: a CUDA call that failed (non-zero `returnValue`) carries its code as the slice's
/// `return_value`, and an instant `CUDA call failed` (category `cuda_error`) marks it on its
/// thread; calls that succeeded carry nothing more.
#[test]
fn a_failed_cuda_call_stands_out() {
    use crate::scenario::{PID, Scenario};
    let (_dir, report) = Scenario::new()
        .launch((PID, PID), 1000, 1)
        .kernel((PID, 0, 7), (1100, 1500), "gemm_kernel", 1)
        .launch_returning((PID, PID), 2000, 2, 700)
        .launch((PID, PID), 3000, 3)
        .kernel((PID, 0, 7), (3100, 3500), "gemm_kernel", 3)
        .write();
    let (_out, trace) = convert(&[report], &[]);
    let Some(summary) = check(&trace) else {
        return;
    };
    assert_eq!(summary["counts"]["cuda_api"], 3);
    assert_eq!(summary["counts"]["cuda_error"], 1);
    // The failed call's slice and its instant.
    assert_eq!(summary["args"]["return_value"], 2);
    assert_eq!(summary["arg_sums"]["return_value"], 1400);
}
