//! Every real export (nsys 2021 to 2026) loads, with the row counts `SELECT count(*)` gives and
//! the right host, pids, GPUs and streams; the 3-node run merges onto one clock exactly.

use crate::util::{count, nsys_lens, real, texts};
use nsys_lens::model::Timeline;
use std::collections::BTreeSet;

/// (pid, device, stream, kernels) of a stream that ran kernels.
type KernelStream = (u32, u32, u32, u64);

/// (file, host, streams with kernels, host GPU names), from `sqlite3` queries on each file.
const FILES: &[(&str, &str, &[KernelStream], &[&str])] = &[
    (
        "fuser_report1_2024.6.2.sqlite",
        "e9ce1d13d1dc",
        &[(30156, 0, 7, 19)],
        &["NVIDIA H200"],
    ),
    (
        "fuser_report1_2025.1.1.sqlite",
        "ipp2-0047.nvidia.com",
        &[(50556, 0, 7, 18)],
        &["NVIDIA H200"],
    ),
    (
        "mordred_report1_pre2022.sqlite",
        "mordred_report1_pre2022",
        &[(2142, 0, 7, 12)],
        &["Quadro RTX 6000"],
    ),
    (
        "nsysai_h100_2gpu_1s_2026.2.1.sqlite",
        "modal",
        &[(111, 0, 7, 1721), (112, 1, 15, 1721)],
        &[],
    ),
    (
        "nsysai_mfu_2gpu_before_2026.2.1.sqlite",
        "modal",
        &[(144, 0, 7, 1993), (145, 1, 15, 2017)],
        &[],
    ),
    (
        "nsysai_mock_2026.1.1.sqlite",
        "DESKTOP-KBEMEQS",
        &[(91186, 0, 7, 2)],
        &["NVIDIA GeForce RTX 3080"],
    ),
    (
        "rodinia_gaussian_report5_2022.4.2.sqlite",
        "gpu-1",
        &[(57315, 0, 7, 8190)],
        &["NVIDIA GeForce RTX 3090"; 7],
    ),
    (
        "testcuda_report1_2026.1.1.sqlite",
        "0x822a5b873",
        &[
            (17068, 0, 13, 1),
            (17068, 0, 14, 1),
            (17068, 0, 15, 1),
            (17068, 0, 16, 1),
        ],
        &["NVIDIA GeForce RTX 4060 Ti"],
    ),
    (
        "trixicuda_report1_2023.1.2.sqlite",
        "ip-172-31-7-163",
        &[(1965, 0, 13, 1)],
        &["Tesla V100-SXM2-16GB"],
    ),
];

const TABLES: [&str; 6] = [
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "NVTX_EVENTS",
];

fn kernel_streams(t: &Timeline) -> BTreeSet<KernelStream> {
    t.streams
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let n = t.kernels.iter().filter(|k| k.stream.index() == i).count() as u64;
            (n > 0).then(|| (t.process(s.process).pid, t.gpu(s.gpu).device, s.stream, n))
        })
        .collect()
}

#[test]
fn every_real_export_loads_with_exact_counts_hosts_pids_gpus_and_streams() {
    for &(file, host, streams, gpus) in FILES {
        let Some(path) = real(file) else { return };
        let t = Timeline::load(&[&path]).unwrap_or_else(|e| panic!("{file}: {e}"));
        let r = &t.reports[0];
        let c = r.counts;
        let got = [c.kernels, c.memcpy, c.memset, c.cuda_api, c.sync, c.nvtx];
        let want = TABLES.map(|table| count(&path, table));
        assert_eq!(got, want, "{file}: row counts");
        assert_eq!(t.kernels.len() as u64, want[0], "{file}: kernels kept");
        assert_eq!(t.host(r.host).name, host, "{file}: host");
        assert_eq!(
            kernel_streams(&t),
            streams.iter().copied().collect(),
            "{file}: streams"
        );
        let names: Vec<&str> = r.meta.gpus.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, gpus, "{file}: host GPUs");
    }
}

#[test]
fn info_json_reports_the_same_counts_as_sqlite() {
    let Some(path) = real("nsysai_mfu_2gpu_before_2026.2.1.sqlite") else {
        return;
    };
    let out = nsys_lens(&["info", "--format", "json", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", texts(&out).1);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let row = &json["rows"][0];
    assert_eq!(row["rows"]["kernels"], 4010);
    assert_eq!(row["rows"]["nvtx"], count(&path, "NVTX_EVENTS"));
    assert_eq!(row["rows"]["cuda_api"], 7466);
    assert_eq!(row["nsys_version"], "2026.2.1.210");
    assert_eq!(row["schema_version"], "3.25.0");
    let pids: Vec<u64> = row["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(pids, vec![144, 145]);
}

#[test]
fn old_exports_warn_about_what_they_lack() {
    let Some(path) = real("mordred_report1_pre2022.sqlite") else {
        return;
    };
    let out = nsys_lens(&["info", path.to_str().unwrap()]);
    let (stdout, _) = texts(&out);
    assert!(out.status.success());
    assert!(stdout.contains("no session start time"), "{stdout}");
    assert!(stdout.contains("no export metadata"), "{stdout}");
    assert!(stdout.contains("no Hostname"), "{stdout}");
}

fn fs24() -> Option<Vec<std::path::PathBuf>> {
    let dir = real("fs24_nccl_allreduce_tree_3nodes_9gpus")?;
    Some(crate::util::sqlite_files(&dir))
}

#[test]
fn three_nodes_merge_onto_one_clock_keeping_the_recorded_spacing() {
    let Some(files) = fs24() else { return };
    assert_eq!(files.len(), 9);
    let t = Timeline::load(&files).expect("loads");
    let hosts: Vec<&str> = t.hosts.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(
        hosts,
        ["ault42.cscs.ch", "ault43.cscs.ch", "ault44.cscs.ch"]
    );
    assert_eq!(t.processes.len(), 9);
    // ts-normalized: t_merged = t_utc - 1726751177708342731, never plus the session deltas.
    let ends: Vec<(i64, u32)> = t
        .kernels
        .iter()
        .map(|k| (k.end.0, t.process(t.stream(k.stream).process).pid))
        .collect();
    assert_eq!(ends.len(), 9);
    let earliest = ends.iter().min().unwrap();
    let latest = ends.iter().max().unwrap();
    assert_eq!(*earliest, (2_567_417_696, 337_171));
    assert_eq!(*latest, (2_578_420_450, 744_434));
    assert_eq!(latest.0 - earliest.0, 11_002_754);
    let utc_reference = t
        .reports
        .iter()
        .filter_map(|r| r.meta.session_start_utc_ns)
        .min();
    assert_eq!(utc_reference, Some(1_726_751_177_708_342_731));
}

#[test]
fn the_same_report_twice_is_refused() {
    let Some(path) = real("nsysai_mock_2026.1.1.sqlite") else {
        return;
    };
    let p = path.to_str().unwrap();
    let out = nsys_lens(&["info", p, p]);
    assert_eq!(out.status.code(), Some(2));
    let (_, stderr) = texts(&out);
    assert!(
        stderr.contains("pid 91186") && stderr.contains("the same report given twice"),
        "{stderr}"
    );
}

/// (input, pid, device, stream) and its kernels, copies and sets.
type StreamOps = BTreeSet<((usize, u64, u64, u64), [u64; 3])>;

/// Each stream's kernels, copies and sets by `SELECT ... GROUP BY` over each export.
fn sql_stream_ops(paths: &[std::path::PathBuf]) -> StreamOps {
    let mut ops: std::collections::BTreeMap<(usize, u64, u64, u64), [u64; 3]> = Default::default();
    for (input, path) in paths.iter().enumerate() {
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
        let conn = rusqlite::Connection::open_with_flags(path, flags).unwrap();
        for (i, table) in ["KERNEL", "MEMCPY", "MEMSET"].iter().enumerate() {
            let sql = format!(
                "SELECT (globalPid >> 24) & 16777215, deviceId, streamId, count(*) \
                 FROM CUPTI_ACTIVITY_KIND_{table} GROUP BY 1, 2, 3"
            );
            let Ok(mut statement) = conn.prepare(&sql) else {
                continue; // nsys creates tables lazily: none of this kind
            };
            let rows = statement.query_map([], |r| {
                let n = |i| r.get::<_, i64>(i).map(|v| v as u64);
                Ok(((input, n(0)?, n(1)?, n(2)?), n(3)?))
            });
            for row in rows.unwrap() {
                let (key, n) = row.unwrap();
                ops.entry(key).or_default()[i] += n;
            }
        }
    }
    ops.into_iter().collect()
}

/// Each stream's kernels, copies and sets in `info --format json` of the reports together.
fn info_stream_ops(paths: &[std::path::PathBuf]) -> StreamOps {
    let mut args = vec!["info", "--format", "json"];
    args.extend(paths.iter().map(|p| p.to_str().unwrap()));
    let out = nsys_lens(&args);
    assert!(out.status.success(), "{}", texts(&out).1);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    let mut ops = StreamOps::new();
    for (input, row) in json["rows"].as_array().unwrap().iter().enumerate() {
        for process in row["processes"].as_array().unwrap() {
            for s in process["streams"].as_array().unwrap() {
                let key = (input, n(&process["pid"]), n(&s["device"]), n(&s["stream"]));
                ops.insert((key, [n(&s["kernels"]), n(&s["memcpy"]), n(&s["memset"])]));
            }
        }
    }
    ops
}

/// `info` reads for streaming (its events counted, never held): each stream's kernels, copies
/// and sets still equal SQL's, on every real export alone and on the 3-node run's nine
/// together (streams numbered across reports).
#[test]
fn info_counts_each_streams_kernels_copies_and_sets_as_sqlite() {
    let mut runs: Vec<Vec<_>> = FILES
        .iter()
        .filter_map(|f| real(f.0))
        .map(|p| vec![p])
        .collect();
    runs.extend(fs24());
    for paths in runs {
        assert_eq!(
            info_stream_ops(&paths),
            sql_stream_ops(&paths),
            "{}",
            paths[0].display()
        );
    }
}
