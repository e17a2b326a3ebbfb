//! Issue 16: `collectives` matches every collective instance across its ranks; the arrival
//! skew, the last rank and the waits are checked against SQL on the real 3-node run and against
//! the generator's truth with a straggler, with and without clock skew.

use crate::util::{int, json, nsys_lens, real, rows, sqlite_files, synth, texts};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

fn members(v: &Value) -> Vec<i64> {
    v.as_array().unwrap().iter().map(int).collect()
}

#[test]
fn the_three_node_all_reduce_is_one_instance_with_the_sql_skew_and_straggler() {
    let Some(dir) = real("fs24_nccl_allreduce_tree_3nodes_9gpus") else {
        return;
    };
    // Independently: every rank's NCCL kernel start (UTC ns), from SQL.
    let mut starts: Vec<(i64, i64)> = Vec::new();
    for file in sqlite_files(&dir) {
        let db = rusqlite::Connection::open(&file).unwrap();
        let (start, pid): (i64, i64) = db
            .query_row(
                "SELECT k.start, (k.globalPid >> 24) & 0xFFFFFF FROM CUPTI_ACTIVITY_KIND_KERNEL k \
                 JOIN StringIds s ON s.id = k.shortName WHERE s.value LIKE 'nccl%'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        starts.push((start, pid));
    }
    assert_eq!(starts.len(), 9);
    let first = starts.iter().min().unwrap();
    let last = starts.iter().max().unwrap();
    let c = json(&["collectives", "--whole", dir.to_str().unwrap()]);
    assert_eq!(rows(&c).len(), 1);
    let row = &rows(&c)[0];
    assert_eq!(members(&row["members"]).len(), 9);
    assert_eq!(int(&row["skew_ns"]), last.0 - first.0);
    assert_eq!(int(&row["last_pid"]), last.1);
    assert_eq!(row["op"], "nccl:AllReduce");
    // NCCL 2.17 records no payloads there: no size, matched by timing.
    assert!(row["bytes"].is_null() && row["busbw_gbps"].is_null());
    assert_eq!(row["matched_by"], "timing");
    // The waits add up to what the last rank caused.
    let waits: i64 = members(&row["waits_ns"]).iter().sum();
    let by_rank = json(&[
        "collectives",
        "--whole",
        "--by",
        "rank",
        dir.to_str().unwrap(),
    ]);
    let caused: i64 = rows(&by_rank).iter().map(|r| int(&r["caused_ns"])).sum();
    assert_eq!(waits, caused);
}

/// Issue 30: the real 2×H100 run's all-to-alls are `SendRecv` kernels (rank 0 launches them on
/// stream 7, rank 1 on stream 15) inside PyTorch's `nccl:all_to_all` ranges: each one whose
/// launch is in such a range is one instance of both ranks, with the skew and the last rank an
/// independent SQL pairing gives (the k-th such kernel of each rank). The kernels launched
/// before the capture began are counted in a note.
#[test]
fn the_real_all_to_alls_are_matched_across_streams_numbered_apart() {
    let Some(path) = real("nsysai_mfu_2gpu_before_2026.2.1.sqlite") else {
        return;
    };
    let db = rusqlite::Connection::open(&path).unwrap();
    // Per process, the start of every NCCL kernel whose launch lies inside an
    // `nccl:all_to_all` range of its thread.
    let sql = "SELECT (k.globalPid >> 24) & 0xFFFFFF, k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k \
               JOIN StringIds s ON s.id = k.shortName \
               JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId \
                 AND r.globalTid >> 24 = k.globalPid >> 24 \
               WHERE s.value LIKE 'nccl%' AND EXISTS (SELECT 1 FROM NVTX_EVENTS n \
                 LEFT JOIN StringIds t ON t.id = n.textId \
                 WHERE n.globalTid = r.globalTid AND n.start <= r.start AND r.end <= n.end \
                 AND coalesce(n.text, t.value) LIKE 'nccl:all_to_all%') \
               ORDER BY k.start";
    let mut per_pid: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    let mut stmt = db.prepare(sql).unwrap();
    let found = stmt
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
        .unwrap();
    for row in found {
        let (pid, start) = row.unwrap();
        per_pid.entry(pid).or_default().push(start);
    }
    let starts: Vec<&Vec<i64>> = per_pid.values().collect();
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[0].len(), starts[1].len());
    assert!(starts[0].len() >= 30, "{} all-to-alls", starts[0].len());
    let pids: Vec<i64> = per_pid.keys().copied().collect();
    let c = json(&["collectives", "--whole", path.to_str().unwrap()]);
    let instances: Vec<&Value> = rows(&c)
        .iter()
        .filter(|r| r["op"] == "nccl:AllToAll")
        .collect();
    assert_eq!(instances.len(), starts[0].len());
    for (k, row) in instances.iter().enumerate() {
        let (a, b) = (starts[0][k], starts[1][k]);
        assert_eq!(int(&row["skew_ns"]), (a - b).abs(), "instance {k}");
        let last = if b > a { pids[1] } else { pids[0] };
        assert_eq!(int(&row["last_pid"]), last, "instance {k}");
        // One export: its times are the merged clock's.
        assert_eq!(int(&row["first_start_ns"]), a.min(b), "instance {k}");
    }
    // The NCCL kernels whose launch is not in the export (launched before the capture began)
    // are said to be left out, by SQL.
    let unlaunched: i64 = db
        .query_row(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s \
             ON s.id = k.shortName WHERE s.value LIKE 'nccl%' AND NOT EXISTS (SELECT 1 FROM \
             CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId \
             AND r.globalTid >> 24 = k.globalPid >> 24)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(unlaunched > 0);
    let said = format!("{unlaunched} communication kernel(s) launched before the capture began");
    let notes = c["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n.as_str().unwrap().starts_with(&said)),
        "{notes:?}"
    );
}

/// Collective instances by (members, first arrival), each with (last rank, skew): two
/// collectives of one group may start together.
type ByArrival = BTreeMap<(Vec<i64>, i64), Vec<(i64, i64)>>;

/// The truth's collective instances (not point-to-point transfers).
fn truth_instances(dir: &Path) -> ByArrival {
    let truth: Value = crate::util::truth(dir);
    truth["collectives"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["point_to_point"] == false)
        .fold(BTreeMap::new(), |mut map, c| {
            let key = (members(&c["members"]), int(&c["first_start_ns"]));
            let value = (int(&c["last_rank"]), int(&c["skew_ns"]));
            map.entry(key).or_insert_with(Vec::new).push(value);
            map
        })
}

#[test]
fn a_straggler_is_named_with_the_true_skew_in_every_preset() {
    const STRAGGLER: i64 = 1;
    let presets = [
        "--preset ddp --nodes 2 --gpus-per-node 2 --layers 4 --steps 3",
        "--preset fsdp --nodes 2 --gpus-per-node 2 --steps 2",
        "--preset megatron --tp 2 --pp 1 --dp 2 --gpus-per-node 2 --chunks 4 --steps 3",
        // Userbuffers' tensor-parallel all-reduces and NCCL's symmetric kernels.
        "--preset megatron --tp 2 --pp 1 --dp 2 --gpus-per-node 2 --chunks 4 --steps 3 --names 2026",
        "--preset pithtrain --pp 2 --ep 2 --gpus-per-node 2",
    ];
    for preset in presets {
        // Skewed clocks, and processes that number their streams each its own way.
        for skew in ["", "--clock-skew 3000000", "--renumber-streams"] {
            let args = format!("{preset} --straggler {STRAGGLER}:2000000 {skew}");
            let dir = synth(&args);
            let mut truth = truth_instances(dir.path());
            let want: usize = truth.values().map(Vec::len).sum();
            let path = dir.path().to_str().unwrap();
            let c = json(&["collectives", "--whole", "--align", "collectives", path]);
            // With the clock skew undone, times are the generator's: join on them.
            let mut named = 0;
            let mut theirs = 0;
            for row in rows(&c) {
                let key = (members(&row["members"]), int(&row["first_start_ns"]));
                let skew = int(&row["skew_ns"]);
                let candidates = truth.get_mut(&key);
                let found = candidates.and_then(|c| {
                    let i = c.iter().position(|&(_, s)| (skew - s).abs() <= 1_000)?;
                    Some(c.remove(i))
                });
                let Some((last, _)) = found else {
                    panic!("{args}: instance {key:?} (skew {skew}) is not in the truth");
                };
                assert_eq!(int(&row["last_rank"]), last, "{args}: {key:?}");
                if key.0.contains(&STRAGGLER) {
                    theirs += 1;
                    named += usize::from(last == STRAGGLER);
                }
            }
            assert_eq!(rows(&c).len(), want, "{args}: instances matched");
            assert!(
                theirs > 0 && named * 100 >= theirs * 95,
                "{args}: {named} of {theirs}"
            );
        }
    }
}

/// NCCL's bus-bandwidth factor (nccl-tests' PERFORMANCE.md), written here from the document.
fn bus_factor(op: &str, n: f64) -> f64 {
    match op {
        "nccl:AllReduce" => 2.0 * (n - 1.0) / n,
        "nccl:AllGather" | "nccl:ReduceScatter" | "nccl:AllToAll" => (n - 1.0) / n,
        _ => 1.0,
    }
}

/// Issue 30: sizes from the framework's own records. In the Kineto form every collective has
/// PyTorch's `record_param_comms`; in the nsys form with `--nccl-payloads` NCCL's payloads
/// name the collectives it calls (an all-to-all's group end carries none). Each instance's
/// bytes, duration and bus bandwidth equal the generator's truth, its communicator is the
/// recorded one, and the k-th instance of each member set is the truth's k-th.
#[test]
fn bytes_and_bus_bandwidth_come_from_the_records_and_equal_the_truth() {
    let presets = [
        "--preset ddp --nodes 2 --gpus-per-node 2 --layers 4 --steps 2",
        "--preset fsdp --nodes 1 --gpus-per-node 4 --steps 2",
        "--preset pithtrain --pp 2 --ep 2 --gpus-per-node 2",
    ];
    for preset in presets {
        for form in ["--format kineto", "--nccl-payloads"] {
            let args = format!("{preset} {form}");
            let dir = synth(&args);
            let truth: Value = crate::util::truth(dir.path());
            let mut want: BTreeMap<Vec<i64>, Vec<&Value>> = BTreeMap::new();
            for c in truth["collectives"].as_array().unwrap() {
                if c["point_to_point"] == false {
                    want.entry(members(&c["members"])).or_default().push(c);
                }
            }
            let inputs: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.file_name().unwrap() != "truth.json")
                .map(|p| p.to_str().unwrap().to_string())
                .collect();
            let mut command = vec!["collectives", "--whole"];
            command.extend(inputs.iter().map(String::as_str));
            let c = json(&command);
            let mut got: BTreeMap<Vec<i64>, Vec<&Value>> = BTreeMap::new();
            for row in rows(&c) {
                got.entry(members(&row["members"])).or_default().push(row);
            }
            assert_eq!(
                got.keys().collect::<Vec<_>>(),
                want.keys().collect::<Vec<_>>(),
                "{args}"
            );
            let mut sized = 0;
            for (group, truths) in &want {
                let rows = &got[group];
                assert_eq!(rows.len(), truths.len(), "{args}: {group:?}");
                let mut rows = rows.clone();
                rows.sort_by_key(|r| int(&r["first_start_ns"]));
                for (row, t) in rows.iter().zip(truths) {
                    let op = row["op"].as_str().unwrap();
                    let duration = int(&t["duration_ns"]);
                    assert_eq!(int(&row["duration_ns"]), duration, "{args}: {row}");
                    let recorded = form == "--format kineto" || op != "nccl:AllToAll";
                    if !recorded {
                        assert!(row["bytes"].is_null(), "{args}: {row}");
                        assert_eq!(row["matched_by"], "timing", "{args}");
                        continue;
                    }
                    sized += 1;
                    let bytes = int(&t["bytes"]);
                    assert_eq!(int(&row["bytes"]), bytes, "{args}: {row}");
                    let n = group.len() as f64;
                    let busbw = bytes as f64 / duration as f64 * bus_factor(op, n);
                    let got = row["busbw_gbps"].as_f64().unwrap();
                    assert!(
                        (got - busbw).abs() < 1e-9 * busbw,
                        "{args}: {got} vs {busbw}"
                    );
                    let by = if form == "--nccl-payloads" {
                        "nccl_id"
                    } else {
                        "process_group"
                    };
                    assert_eq!(row["matched_by"], by, "{args}");
                }
            }
            assert!(sized > 0, "{args}: no sized instance");
        }
    }
}

#[test]
fn tensor_parallel_groups_of_two_nodes_are_never_matched_together() {
    // 2 nodes x TP 2: every node's TP all-reduce has the same kernel name and stream id.
    let dir =
        synth("--preset megatron --tp 2 --pp 1 --dp 2 --gpus-per-node 2 --chunks 4 --steps 3");
    let c = json(&["collectives", "--whole", dir.path().to_str().unwrap()]);
    let groups: std::collections::BTreeSet<Vec<i64>> =
        rows(&c).iter().map(|r| members(&r["members"])).collect();
    let want: std::collections::BTreeSet<Vec<i64>> =
        [vec![0, 1], vec![2, 3], vec![0, 2], vec![1, 3]].into();
    assert_eq!(groups, want);
}

/// Both traces draw what `collectives` measures: every rank's waiting counter integrates to its
/// `waited_ns`, each instance is one Paraver value on all its members, and with
/// `--collective-flows` every member but the last gets an arrow that passes the checker.
#[test]
fn the_traces_draw_the_waits_and_link_each_straggler_to_the_others() {
    let dir = synth(
        "--preset ddp --nodes 2 --gpus-per-node 2 --layers 4 --steps 3 --straggler 1:2000000",
    );
    let path = dir.path().to_str().unwrap();
    let by_rank = json(&["collectives", "--whole", "--by", "rank", path]);
    let waited: Vec<i64> = rows(&by_rank)
        .iter()
        .map(|r| int(&r["waited_ns"]))
        .collect();
    let instances = json(&["collectives", "--whole", path]);
    let links: usize = rows(&instances)
        .iter()
        .map(|r| members(&r["members"]).len() - 1)
        .sum();
    let out = tempfile::tempdir().unwrap();
    let base = out.path().join("run");
    let base = base.to_str().unwrap();
    let converted = nsys_lens(&["convert", path, "-o", base, "--collective-flows", "-q"]);
    assert!(converted.status.success(), "{}", texts(&converted).1);
    // Paraver: the analysis thread's wait counter, per task (= rank + 1, ranks in rank order).
    let prv = out.path().join("run.prv");
    crate::paraver::pertalde(&prv);
    let trace = crate::paraver::parse(&prv);
    let paraver = crate::paraver::integrate_type(&trace, 63_100_014);
    for (rank, &w) in waited.iter().enumerate() {
        assert_eq!(
            paraver.get(&(rank + 1)).copied().unwrap_or(0),
            w as u64,
            "rank {rank}"
        );
    }
    // Perfetto: the counter, and one flow per member that is not last.
    let Some(summary) = crate::perfetto::check(&out.path().join("run.perfetto-trace")) else {
        return;
    };
    let counters = summary["counters"].as_object().unwrap();
    for (rank, &w) in waited.iter().enumerate() {
        let key = counters.keys().find(|k| {
            k.starts_with(&format!("rank {rank} ")) && k.ends_with("waiting in collectives")
        });
        let got = key.map_or(0, |k| {
            crate::perfetto::integrate(counters[k].as_array().unwrap(), 0, i64::MAX)
        });
        assert_eq!(got, w, "rank {rank}");
    }
    let plain = nsys_lens(&[
        "convert",
        path,
        "-o",
        &format!("{base}-plain"),
        "--to",
        "perfetto",
        "-q",
    ]);
    assert!(plain.status.success());
    let plain = crate::perfetto::check(&out.path().join("run-plain.perfetto-trace")).unwrap();
    let flows = |s: &Value| s["flows"].as_u64().unwrap() as usize;
    assert_eq!(flows(&summary), flows(&plain) + links);
}

/// `--p2p`: pipeline transfers matched sender to receiver by timing. On Megatron's 1F1B (pp 2 and
/// 4, with and without NCCL on the compute stream) at least 95 % of the pairs listed are the
/// generator's true pairs, and at least half of the true pairs are found.
#[test]
fn pipeline_transfers_are_paired_sender_to_receiver() {
    for args in [
        "--preset megatron --tp 2 --pp 2 --gpus-per-node 4 --chunks 4",
        "--preset megatron --tp 2 --pp 4 --dp 2 --gpus-per-node 4 --chunks 6",
        "--preset megatron --tp 2 --pp 4 --dp 2 --gpus-per-node 4 --chunks 6 --nccl-on-compute",
        // Each process numbers its streams its own way, as real processes do.
        "--preset megatron --tp 2 --pp 4 --dp 2 --gpus-per-node 4 --chunks 6 --renumber-streams",
    ] {
        let dir = synth(args);
        let truth: Value = crate::util::truth(dir.path());
        let truth: std::collections::BTreeSet<(i64, i64, i64, i64)> = truth["transfers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let f = |k: &str| int(&t[k]);
                (f("sender"), f("receiver"), f("send_start"), f("recv_start"))
            })
            .collect();
        let path = dir.path().to_str().unwrap();
        let c = json(&["collectives", "--whole", "--p2p", path]);
        let ours: Vec<(i64, i64, i64, i64)> = rows(&c)
            .iter()
            .filter(|r| r["op"] == "p2p")
            .map(|r| {
                let m = members(&r["members"]);
                let (first, last) = (int(&r["first_start_ns"]), int(&r["last_start_ns"]));
                // The sender is members[0]: its start is the last arrival when it came last.
                let (send, recv) = if int(&r["last_rank"]) == m[0] {
                    (last, first)
                } else {
                    (first, last)
                };
                (m[0], m[1], send, recv)
            })
            .collect();
        let correct = ours.iter().filter(|p| truth.contains(p)).count();
        assert!(
            correct * 100 >= ours.len() * 95,
            "{args}: {correct} of {} right",
            ours.len()
        );
        assert!(
            correct * 2 >= truth.len(),
            "{args}: {correct} of {} found",
            truth.len()
        );
        let without = json(&["collectives", "--whole", path]);
        assert!(rows(&without).iter().all(|r| r["op"] != "p2p"));
    }
}

/// torch.profiler's JSON has no NCCL call ranges: PyTorch's own `nccl:send 0->1` and
/// `nccl:recv 1<-0` around the launches tell sends from receives, and its `record_param_comms`
/// (`Collective name` `send`/`recv`, element counts, dtype) gives their size. Every pair listed
/// is one of the generator's transfers, by direction and size (its clock starts elsewhere, so
/// not by time), at least half of them are found, each pair's bus bandwidth is bytes over its
/// duration, and `ranks` reads the pipeline from them.
#[test]
fn torch_profiler_transfers_are_paired_and_sized_by_pytorch_s_records() {
    let dir = synth("--preset megatron --tp 2 --pp 2 --gpus-per-node 4 --chunks 4 --format kineto");
    let truth: Value = crate::util::truth(dir.path());
    let mut left: BTreeMap<(i64, i64, i64), usize> = BTreeMap::new();
    for t in truth["transfers"].as_array().unwrap() {
        let f = |k: &str| int(&t[k]);
        *left
            .entry((f("sender"), f("receiver"), f("bytes")))
            .or_default() += 1;
    }
    let total: usize = left.values().sum();
    let path = dir.path().to_str().unwrap();
    let c = json(&["collectives", "--whole", "--p2p", path]);
    let pairs: Vec<&Value> = rows(&c).iter().filter(|r| r["op"] == "p2p").collect();
    for r in &pairs {
        let (m, bytes) = (members(&r["members"]), int(&r["bytes"]));
        let count = left.get_mut(&(m[0], m[1], bytes)).expect("a true transfer");
        *count = count.checked_sub(1).expect("no more pairs than truth");
        let busbw = r["busbw_gbps"].as_f64().unwrap();
        let want = bytes as f64 / int(&r["duration_ns"]) as f64;
        assert!((busbw - want).abs() <= 1e-9 * want, "{busbw} vs {want}");
    }
    assert!(pairs.len() * 2 >= total, "{} of {total}", pairs.len());
    let ranks = json(&["ranks", path]);
    for r in rows(&ranks) {
        assert_eq!(r["pp_source"], "p2p", "{r}");
        assert_eq!(int(&r["pp_size"]), 2, "{r}");
    }
}

/// `--p2p` with NCCL's payloads (`--nccl-payloads`: each `ncclSend`/`ncclRecv` records its
/// `Message size [bytes]`): every pair listed has its size, each true pair the size truth.json
/// gives its transfer, and its bus bandwidth is bytes over its duration (factor 1, as
/// nccl-tests gives send/receive).
#[test]
fn pipeline_transfers_carry_their_sizes() {
    let dir = synth("--preset megatron --tp 2 --pp 2 --gpus-per-node 4 --chunks 4 --nccl-payloads");
    let truth: Value = crate::util::truth(dir.path());
    let truth: std::collections::BTreeMap<(i64, i64, i64, i64), i64> = truth["transfers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let f = |k: &str| int(&t[k]);
            let key = (f("sender"), f("receiver"), f("send_start"), f("recv_start"));
            (key, f("bytes"))
        })
        .collect();
    let c = json(&[
        "collectives",
        "--whole",
        "--p2p",
        dir.path().to_str().unwrap(),
    ]);
    let pairs: Vec<&Value> = rows(&c).iter().filter(|r| r["op"] == "p2p").collect();
    assert!(!pairs.is_empty());
    let mut checked = 0;
    for r in pairs {
        let bytes = int(&r["bytes"]);
        let m = members(&r["members"]);
        let (first, last) = (int(&r["first_start_ns"]), int(&r["last_start_ns"]));
        let (send, recv) = match int(&r["last_rank"]) == m[0] {
            true => (last, first),
            false => (first, last),
        };
        if let Some(&want) = truth.get(&(m[0], m[1], send, recv)) {
            assert_eq!(bytes, want, "{r}");
            checked += 1;
        }
        let busbw = r["busbw_gbps"].as_f64().unwrap();
        let want = bytes as f64 / int(&r["duration_ns"]) as f64;
        assert!((busbw - want).abs() <= 1e-9 * want, "{busbw} vs {want}");
    }
    assert!(checked * 2 >= truth.len(), "{checked} of {}", truth.len());
}
