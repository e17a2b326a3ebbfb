//! The generator: fixtures regenerate from their documented commands, tables match real
//! 2025/2026 exports column for column, the reader sees what was asked for, and correlation ids
//! behave as in real multi-process exports.

use crate::util::{fixture, nsys_lens, real, root, texts};
use nsys_lens::model::Timeline;
use rusqlite::Connection;
use rusqlite::types::Value;
use std::collections::BTreeSet;
use std::path::Path;

fn open(path: &Path) -> Connection {
    Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

fn tables(conn: &Connection) -> Vec<String> {
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn rows(conn: &Connection, table: &str) -> Vec<Vec<Value>> {
    let mut stmt = conn
        .prepare(&format!("SELECT * FROM {table} ORDER BY rowid"))
        .unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// (name, declared type, NOT NULL) per column.
fn layout(conn: &Connection, table: &str) -> Vec<(String, String, bool)> {
    let mut stmt = conn
        .prepare(&format!("PRAGMA table_info({table})"))
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get::<_, i64>(3)? == 1)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn fixtures_regenerate_row_for_row_from_their_readme_commands() {
    let readme = std::fs::read_to_string(root().join("fixtures/README.md")).unwrap();
    let commands: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("nsys-lens synth "))
        .collect();
    assert_eq!(commands.len(), 4);
    for command in commands {
        let words: Vec<&str> = command.split_whitespace().skip(1).collect();
        let out_at = words.iter().position(|w| *w == "-o").unwrap() + 1;
        let committed = root().join(words[out_at]);
        let dir = tempfile::tempdir().unwrap();
        let mut args = words.clone();
        let fresh = dir.path().to_str().unwrap().to_string();
        args[out_at] = &fresh;
        let out = nsys_lens(&args);
        assert!(out.status.success(), "{command}: {}", texts(&out).1);
        for entry in std::fs::read_dir(&committed).unwrap() {
            let file = entry.unwrap().path();
            let fresh = dir.path().join(file.file_name().unwrap());
            if file.extension().is_some_and(|e| e == "json") {
                let read = |p: &Path| std::fs::read_to_string(p).unwrap();
                assert_eq!(
                    read(&file),
                    read(&fresh),
                    "{} drifted: rerun `{command}`",
                    file.display()
                );
                continue;
            }
            let (old, new) = (
                open(&file),
                open(&dir.path().join(file.file_name().unwrap())),
            );
            assert_eq!(tables(&old), tables(&new), "{}", file.display());
            for table in tables(&old) {
                assert!(
                    rows(&old, &table) == rows(&new, &table),
                    "{} table {table} drifted from `{command}`: rerun it",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn every_table_matches_the_newest_real_export_that_has_it() {
    let newest_first = [
        "nsysai_mfu_2gpu_before_2026.2.1.sqlite",
        "nsysai_h100_2gpu_1s_2026.2.1.sqlite",
        "testcuda_report1_2026.1.1.sqlite",
        "nsysai_mock_2026.1.1.sqlite",
        "fuser_report1_2025.1.1.sqlite",
    ];
    let Some(reals) = newest_first
        .iter()
        .map(|f| real(f))
        .collect::<Option<Vec<_>>>()
    else {
        return;
    };
    let reals: Vec<Connection> = reals.iter().map(|p| open(p)).collect();
    let ours = open(&fixture("pithtrain_pp2_ep2/node0.sqlite"));
    let mut compared = 0;
    for table in tables(&ours) {
        let theirs = reals.iter().find(|c| tables(c).contains(&table));
        let Some(theirs) = theirs else {
            panic!("{table}: no real 2025/2026 export has it to compare with");
        };
        assert_eq!(layout(&ours, &table), layout(theirs, &table), "{table}");
        compared += 1;
    }
    assert!(compared >= 25, "compared {compared} tables");
}

#[test]
fn info_sees_what_each_preset_was_asked_for() {
    let t = Timeline::load(&[
        fixture("pithtrain_pp2_ep2/node0.sqlite"),
        fixture("pithtrain_pp2_ep2/node1.sqlite"),
    ])
    .unwrap();
    let hosts: Vec<&str> = t.hosts.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(hosts, ["node0", "node1"]);
    let procs: Vec<(usize, u32)> = t
        .processes
        .iter()
        .map(|p| (p.host.index(), p.pid))
        .collect();
    assert_eq!(
        procs.len(),
        4,
        "two ranks per node, pids reused across nodes"
    );
    for host in 0..2 {
        let pids: BTreeSet<u32> = procs.iter().filter(|p| p.0 == host).map(|p| p.1).collect();
        assert_eq!(pids, BTreeSet::from([41207, 41220]));
    }
    let devices: BTreeSet<u32> = t.gpus.iter().map(|g| g.device).collect();
    assert_eq!(devices, BTreeSet::from([0, 1]));
    let stream_ids: BTreeSet<u32> = t.streams.iter().map(|s| s.stream).collect();
    assert_eq!(stream_ids, BTreeSet::from([7, 20, 24, 32, 36]));
    let labels = t
        .nvtx
        .iter()
        .filter(|n| t.text(n.text).starts_with("rank="))
        .count();
    assert_eq!(labels, 4);

    let megatron = Timeline::load(&[fixture("megatron_pp2/node0.sqlite")]).unwrap();
    assert_eq!(
        (
            megatron.hosts.len(),
            megatron.processes.len(),
            megatron.gpus.len()
        ),
        (1, 4, 4)
    );
    let ddp = Timeline::load(&[
        fixture("ddp_2node/node0.sqlite"),
        fixture("ddp_2node/node1.sqlite"),
    ])
    .unwrap();
    assert_eq!((ddp.hosts.len(), ddp.processes.len()), (2, 4));
    let steps = ddp
        .nvtx
        .iter()
        .filter(|n| ddp.text(n.text).starts_with("ProfilerStep#"))
        .count();
    assert_eq!(steps, 4, "one step per rank");
}

#[test]
fn correlation_ids_repeat_across_processes_and_join_within_their_process() {
    let conn = open(&fixture("pithtrain_pp2_ep2/node0.sqlite"));
    let shared: i64 = conn
        .query_row(
            "SELECT count(*) FROM (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL
             GROUP BY correlationId HAVING count(DISTINCT globalPid) > 1)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        shared > 10,
        "correlation ids repeat across processes ({shared})"
    );
    let mut stmt = conn
        .prepare(
            "SELECT (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r
                     WHERE r.correlationId = k.correlationId
                       AND (r.globalTid & -16777216) = k.globalPid)
             FROM CUPTI_ACTIVITY_KIND_KERNEL k",
        )
        .unwrap();
    let joins: Vec<i64> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(!joins.is_empty());
    assert!(
        joins.iter().all(|&n| n == 1),
        "every kernel joins exactly one API call of its process"
    );
    let naive: i64 = conn
        .query_row(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
             ON r.correlationId = k.correlationId",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        naive as usize > joins.len(),
        "a join on correlationId alone is wrong here"
    );
}

#[test]
fn a_receive_never_ends_before_its_send_ends() {
    // Megatron TP=2 PP=2, 4 micro-batches: rank 0 (stage 0, pid 41207) and rank 2 (stage 1,
    // pid 41233) exchange on one pipeline stream each, in 1F1B order:
    //   stage 0: send F0, send F1, recv B0, send F2, recv B1, send F3, recv B2, recv B3
    //   stage 1: recv F0, send B0, recv F1, send B1, recv F2, send B2, recv F3, send B3
    let t = Timeline::load(&[fixture("megatron_pp2/node0.sqlite")]).unwrap();
    let sendrecv = t.strings.lookup("ncclDevKernel_SendRecv").unwrap();
    let on = |pid: u32| -> Vec<(i64, i64)> {
        t.kernels
            .iter()
            .filter(|k| {
                k.short_name == sendrecv && t.process(t.stream(k.stream).process).pid == pid
            })
            .map(|k| (k.start.0, k.end.0))
            .collect()
    };
    let (stage0, stage1) = (on(41207), on(41233));
    assert_eq!((stage0.len(), stage1.len()), (8, 8));
    let forward = [(0, 0), (1, 2), (3, 4), (5, 6)];
    let backward = [(1, 2), (3, 4), (5, 6), (7, 7)];
    for (send, recv) in forward {
        assert!(
            stage1[recv].1 >= stage0[send].1,
            "F: {:?} {:?}",
            stage0[send],
            stage1[recv]
        );
    }
    for (send, recv) in backward {
        assert!(
            stage0[recv].1 >= stage1[send].1,
            "B: {:?} {:?}",
            stage1[send],
            stage0[recv]
        );
    }
}

#[test]
fn mixed_precision_switches_gemm_and_all_reduce_names() {
    let names = |extra: &[&str]| -> BTreeSet<String> {
        let dir = tempfile::tempdir().unwrap();
        let out_dir = dir.path().to_str().unwrap();
        let mut args = vec!["synth", "-o", out_dir, "--preset", "ddp", "--nodes", "1"];
        args.extend_from_slice(extra);
        assert!(nsys_lens(&args).status.success());
        let t = Timeline::load(&[dir.path().join("node0.sqlite")]).unwrap();
        t.kernels
            .iter()
            .map(|k| t.text(k.short_name).to_string())
            .collect()
    };
    let fp32 = names(&[]);
    let bf16 = names(&["--mixed-precision"]);
    assert!(fp32.contains("ampere_sgemm_128x64_tn"));
    assert!(fp32.contains("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
    assert!(bf16.iter().any(|n| n.contains("gemm_bf16")));
    assert!(bf16.contains("ncclDevKernel_AllReduce_Sum_bf16_RING_LL"));
    assert!(!bf16.contains("ampere_sgemm_128x64_tn"));
}

#[test]
fn push_pop_ranges_and_api_calls_of_a_thread_nest() {
    // On one thread, NVTX push/pop ranges and CUDA API calls are one call stack: a range cannot
    // end inside an API call, nor two ranges cross.
    let fixtures = [
        "pithtrain_pp2_ep2/node0.sqlite",
        "pithtrain_pp2_ep2/node1.sqlite",
        "ddp_2node/node0.sqlite",
        "megatron_pp1/node0.sqlite",
        "megatron_pp2/node0.sqlite",
    ];
    for name in fixtures {
        let conn = open(&fixture(name));
        let mut stmt = conn
            .prepare(
                "SELECT globalTid, start, end FROM NVTX_EVENTS WHERE eventType = 59 \
                 UNION ALL SELECT globalTid, start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME \
                 ORDER BY 1, 2, 3 DESC",
            )
            .unwrap();
        let spans: Vec<(i64, i64, i64)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let mut open: Vec<(i64, i64)> = Vec::new();
        let mut thread = None;
        for (tid, start, end) in spans {
            if thread != Some(tid) {
                (thread, open) = (Some(tid), Vec::new());
            }
            while open.last().is_some_and(|&(_, e)| e <= start) {
                open.pop();
            }
            if let Some(&(s, e)) = open.last() {
                assert!(end <= e, "{name}: [{start}, {end}] crosses [{s}, {e}]");
            }
            open.push((start, end));
        }
    }
}

/// Each family's kernel count and kernel time per rank, from `kernels --whole` (rank `all`
/// rows left out).
fn family_totals(dir: &Path) -> BTreeSet<(String, String, i64, i64)> {
    let export = dir.join("node0.sqlite");
    let json = crate::util::json(&["kernels", "--whole", export.to_str().unwrap()]);
    crate::util::rows(&json)
        .iter()
        .filter(|r| r["rank"].as_i64().is_some())
        .map(|r| {
            let (rank, family) = (r["rank"].to_string(), r["family"].to_string());
            (
                rank,
                family,
                r["kernels"].as_i64().unwrap(),
                r["time_ns"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// `--launch-ahead` and `--name-variety`, the benchmarks' second shape: every GPU operation
/// starts at least that long after its launch returned (SQL), the names vary as asked, and
/// the run is otherwise the same run: every family keeps its kernels and kernel time.
#[test]
fn a_deep_launch_queue_and_varied_names_keep_the_run() {
    let plain = crate::util::synth("--preset ddp --nodes 1");
    let deep = crate::util::synth("--preset ddp --nodes 1 --launch-ahead 20 --name-variety 5");
    let conn = open(&deep.path().join("node0.sqlite"));
    let lag: i64 = conn
        .query_row(
            "SELECT min(k.start - r.end) FROM CUPTI_ACTIVITY_KIND_KERNEL k \
             JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId \
             AND r.globalTid / 16777216 = k.globalPid / 16777216",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        lag >= 20_000_000,
        "a kernel started {lag} ns after its launch"
    );
    let names = |dir: &Path| -> BTreeSet<String> {
        let conn = open(&dir.join("node0.sqlite"));
        let mut stmt = conn
            .prepare("SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let (base, varied) = (names(plain.path()), names(deep.path()));
    assert!(
        varied.len() > 3 * base.len(),
        "{} names against {}",
        varied.len(),
        base.len()
    );
    for name in &varied {
        let stem = name
            .rsplit_once("_v")
            .map_or(name.as_str(), |(stem, _)| stem);
        assert!(
            base.contains(stem) || base.contains(name),
            "{name} varies no kernel"
        );
    }
    assert_eq!(family_totals(plain.path()), family_totals(deep.path()));
}
