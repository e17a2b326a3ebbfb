//! `ranks`, `window`, `streams`, `overlap`: the worked example (expected numbers derived by hand
//! in the comments), PithTrain compatibility byte for byte, the committed 2-node fixture, and a
//! real 2-GPU export.

use crate::scenario::{self, AUTOGRAD, CHUNK, LABEL, PID, Scenario};
use crate::util::{fixture, merged, nsys_lens, real, texts, uncovered};
use serde_json::Value;
use std::path::Path;

/// Runs a command and returns (exit code, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let output = nsys_lens(args);
    let (out, err) = texts(&output);
    (output.status.code().unwrap_or(-1), out, err)
}

/// Runs a command that must succeed and parses its JSON.
fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    let (code, out, err) = run(&all);
    assert_eq!(code, 0, "{args:?} failed: {err}");
    serde_json::from_str(&out).expect("valid JSON")
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The rows whose `key` fields equal the given values.
fn find<'a>(rows: &'a Value, keys: &[(&str, &str)]) -> Vec<&'a Value> {
    rows["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| {
            keys.iter().all(|(k, v)| match &r[*k] {
                Value::String(s) => s == v,
                other => v.parse::<i64>().is_ok_and(|n| *other == n),
            })
        })
        .collect()
}

fn one<'a>(rows: &'a Value, keys: &[(&str, &str)]) -> &'a Value {
    let found = find(rows, keys);
    assert_eq!(found.len(), 1, "rows matching {keys:?}: {found:?}");
    found[0]
}

// ---- PithTrain compatibility, byte for byte ----

#[test]
fn compat_show_setup_prints_pid_and_label() {
    let (_dir, file) = scenario::worked_example().write();
    let (code, out, _) = run(&["ranks", "--compat", "pithtrain", path(&file)]);
    assert_eq!(code, 0);
    // Widths: pid 5 ("41207"), setup 48 (the label); every cell padded, the last one too.
    let expected = format!(
        "pid   setup{}\n----- {}\n41207 {LABEL}\n",
        " ".repeat(48 - 5),
        "-".repeat(48)
    );
    assert_eq!(LABEL.len(), 48);
    assert_eq!(out, expected);
}

#[test]
fn compat_find_window_takes_the_median_overlapped_chunk() {
    // Overlapped chunks start at 1000, 3000 and 10000 (the plain forward chunk does not count):
    // index 3 / 2 = 1 is [3000, 9000].
    let (_dir, file) = scenario::worked_example().write();
    let (code, out, _) = run(&["window", "--compat", "pithtrain", path(&file)]);
    assert_eq!(code, 0);
    let name_width = CHUNK.len();
    let expected = format!(
        "pid   start end  name{pad}\n----- ----- ---- {rule}\n41207 3000  9000 {CHUNK}\n",
        pad = " ".repeat(name_width - 4),
        rule = "-".repeat(name_width)
    );
    assert_eq!(out, expected);
}

#[test]
fn compat_classify_streams_follows_every_rule() {
    // Kernels wholly inside [3000, 9000] on the GPU clock (C4 and K9 straddle the end: dropped).
    // 7: B1 is NCCL (100 ns), C1 + C2 = 1500 ns: compute (one-sided purity).
    // 20: K1 (stage2_f) and K2 (stage4_b, launched from the autograd thread): ep_a2a.
    // 24: K6 (stage2_b) is ep_a2a, K7 has no runtime row and its GPU start 8000 lies only in the
    //     chunk range: unknown, so the stream is mixed.
    // 28: K3 in the fused `layer01_stage5_f_layer02_stage1_f`: cp_ring.
    // 32: K4 in `pipeline send/recv`. 36: K5 in `loss1.backward()`: unknown.
    // 40: K8's launch row starts at 0, so PithTrain uses its GPU start 6500: `layer03.stage2_f`.
    let (_dir, file) = scenario::worked_example().write();
    let (code, out, _) = run(&["streams", "--compat", "pithtrain", path(&file)]);
    assert_eq!(code, 0);
    let expected = "\
pid   stream n_comm n_comp comm_ns comp_ns purpose
----- ------ ------ ------ ------- ------- -------
41207 7      1      2      100     1500    compute
41207 8      0      1      0       400     compute
41207 20     2      0      1500    0       ep_a2a 
41207 24     2      0      1000    0       mixed  
41207 28     1      0      200     0       cp_ring
41207 32     1      0      500     0       pp_p2p 
41207 36     1      0      100     0       unknown
41207 40     1      0      100     0       ep_a2a 
";
    assert_eq!(out, expected);
}

#[test]
fn compat_classify_streams_with_a_custom_window_and_rank_filter() {
    // Wholly inside [4000, 6000]: C1, C2 (stream 7), C3 (8), K1 (20), K6 (24: now unanimous).
    let (_dir, file) = scenario::worked_example().write();
    let f = path(&file);
    let args = [
        "streams",
        "--compat",
        "pithtrain",
        "--start",
        "4000",
        "--end",
        "6000",
    ];
    let (code, out, _) = run(&[&args[..], &[f]].concat());
    assert_eq!(code, 0);
    let expected = "\
pid   stream n_comm n_comp comm_ns comp_ns purpose
----- ------ ------ ------ ------- ------- -------
41207 7      0      2      0       1500    compute
41207 8      0      1      0       400     compute
41207 20     1      0      1100    0       ep_a2a 
41207 24     1      0      800     0       ep_a2a 
";
    assert_eq!(out, expected);
    // No record has global rank 1: the table would be empty, so nothing to report (exit 1).
    let (code, out, err) = run(&["streams", "--compat", "pithtrain", "--rank", "1", f]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.contains("nothing to report"), "{err}");
}

#[test]
fn compat_compute_overlap_sums_per_stage() {
    // Compute union C = [4000, 5200] ∪ [5500, 6000] (C1, C3 overlapping, C2; B1 is NCCL).
    // stage1_f: K3 [3900, 4100] covered 100 of 200: exposed 100, 50%.
    // stage2_b: K6 [5000, 5800] covered 200 + 300 = 500 of 800: exposed 300, 62.5%.
    // stage2_f: K1 [4500, 5600] covered 700 + 100 = 800 of 1100 (72.727..%), K8 [6500, 6600]
    //           uncovered (0%): exposed 300 + 100 = 400, overlap 800 / 1200 = 66.67%.
    // stage4_b: K2 [6000, 6400] uncovered: 400, 0%. K4, K5, K7 have no stage: dropped.
    let (_dir, file) = scenario::worked_example().write();
    let (code, out, _) = run(&["overlap", "--compat", "pithtrain", path(&file)]);
    assert_eq!(code, 0);
    let expected = "\
pid   stage    exposed_ns overlap overlap_min overlap_max
----- -------- ---------- ------- ----------- -----------
41207 stage1_f 100        50.0%   50.0%       50.0%      
41207 stage2_b 300        62.5%   62.5%       62.5%      
41207 stage2_f 400        66.67%  0.0%        72.73%     
41207 stage4_b 400        0.0%    0.0%        0.0%       
";
    assert_eq!(out, expected);
}

#[test]
fn compat_setup_ties_repeat_a_pid_and_a_missing_label_is_reported() {
    // Two labels at the same earliest start: two records for one pid, as PithTrain's query gives.
    let mut s = Scenario::new();
    s.range((PID, PID), 50, 500, LABEL)
        .range((PID, AUTOGRAD), 50, 400, LABEL);
    let (_dir, file) = s.write();
    let (code, out, _) = run(&["ranks", "--compat", "pithtrain", path(&file)]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().filter(|l| l.starts_with("41207 ")).count(), 2);

    // The earliest event is not the label: PithTrain would crash; nsys-lens says why (exit 1),
    // while the default mode still finds the label.
    let mut s = Scenario::new();
    s.range((PID, AUTOGRAD), 10, 20, "aten::lift_fresh")
        .range((PID, PID), 50, 500, LABEL);
    let (_dir, file) = s.write();
    let (code, out, err) = run(&["ranks", "--compat", "pithtrain", path(&file)]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(
        err.contains("pid 41207") && err.contains("aten::lift_fresh"),
        "{err}"
    );
    let ranks = json(&["ranks", path(&file)]);
    assert_eq!(one(&ranks, &[("pid", "41207")])["source"], "label");
}

#[test]
fn compat_refuses_several_reports_and_non_pithtrain_profiles() {
    let n0 = fixture("pithtrain_pp2_ep2/node0.sqlite");
    let n1 = fixture("pithtrain_pp2_ep2/node1.sqlite");
    let (code, _, err) = run(&["overlap", "--compat", "pithtrain", path(&n0), path(&n1)]);
    assert_eq!(code, 2);
    assert!(err.contains("exactly one report"), "{err}");
    let ddp = fixture("ddp_2node/node0.sqlite");
    let (code, out, err) = run(&["window", "--compat", "pithtrain", path(&ddp)]);
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
}

// ---- nsys-lens' own answers on the worked example ----

#[test]
fn default_window_reports_cpu_extent_and_gpu_projection() {
    // GPU work launched inside [3000, 9000] on the CPU: first start K3 3900, last end C4 9100.
    let (_dir, file) = scenario::worked_example().write();
    let w = json(&["window", path(&file)]);
    let row = one(&w, &[("rank", "0")]);
    assert_eq!(
        (
            &row["start"],
            &row["end"],
            &row["gpu_start"],
            &row["gpu_end"]
        ),
        (
            &Value::from(3000),
            &Value::from(9000),
            &Value::from(3900),
            &Value::from(9100)
        )
    );
    assert_eq!(row["name"], CHUNK);
}

#[test]
fn default_streams_name_roles_and_clip_to_the_window() {
    // Kernels are clipped: C4 counts [8900, 9000] and K9 [8950, 9000]. K5 (in
    // `loss1.backward()`, matched by no rule) and K8 (launched at 0) fall back to their
    // collective. K7 has no runtime row (launched before the capture): it takes the role of
    // the other SendRecv kernel of stream 24 (K6, ep_a2a), so 24 is ep_a2a.
    let (_dir, file) = scenario::worked_example().write();
    let s = json(&["streams", path(&file)]);
    let role = |stream: &str| one(&s, &[("stream", stream)])["role"].clone();
    let roles: Vec<(&str, &str)> = vec![
        ("7", "compute"),
        ("8", "compute"),
        ("20", "ep_a2a"),
        ("24", "ep_a2a"),
        ("28", "cp_ring"),
        ("32", "pp_p2p"),
        ("36", "nccl:SendRecv"),
        ("40", "nccl:AllReduce"),
    ];
    for (stream, expected) in roles {
        assert_eq!(role(stream), expected, "stream {stream}");
    }
    let s7 = one(&s, &[("stream", "7")]);
    // C1 1000 + C2 500 + C4 clipped 100; busy = [4000,5000] + [5500,6100] + [8900,9000].
    assert_eq!(
        (&s7["n_comp"], &s7["comp_ns"]),
        (&Value::from(3), &Value::from(1600))
    );
    assert_eq!(
        (&s7["n_comm"], &s7["busy_ns"]),
        (&Value::from(1), &Value::from(1700))
    );
    let s20 = one(&s, &[("stream", "20")]);
    assert_eq!(
        (&s20["n_comm"], &s20["comm_ns"]),
        (&Value::from(3), &Value::from(1550))
    );
    // The evidence behind each role.
    let evidence = |stream: &str| {
        let groups = one(&s, &[("stream", stream)])["comm_roles"].clone();
        groups
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                let f = |k: &str| g[k].as_str().unwrap().to_string();
                (
                    f("role"),
                    f("evidence"),
                    f("example"),
                    g["kernels"].as_u64().unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    let e = |role: &str, evidence: &str, example: &str, n| {
        (
            role.to_string(),
            evidence.to_string(),
            example.to_string(),
            n,
        )
    };
    assert_eq!(
        evidence("24"),
        [
            e("ep_a2a", "framework", "layer00.stage2_b", 1),
            e(
                "ep_a2a",
                "stream",
                "launched before the capture; as its stream's other kernels",
                1
            ),
        ]
    );
    assert_eq!(
        evidence("36"),
        [e("nccl:SendRecv", "kernel_name", "kernel name", 1)]
    );
    assert_eq!(
        evidence("7"),
        [e("barrier", "kernel_name", "kernel name", 1)]
    );
    assert_eq!(
        evidence("28"),
        [e(
            "cp_ring",
            "framework",
            "layer01_stage5_f_layer02_stage1_f",
            1
        )]
    );
}

/// (kernels, comm, hidden, exposed, exposed_wall) of an overlap row.
fn numbers(row: &Value) -> [i64; 5] {
    [
        "kernels",
        "comm_ns",
        "hidden_ns",
        "exposed_ns",
        "exposed_wall_ns",
    ]
    .map(|k| row[k].as_i64().unwrap_or_else(|| panic!("{k} in {row}")))
}

#[test]
fn default_overlap_sums_and_wall_clock_differ_by_the_concurrent_exposed_time() {
    // Compute union C = [4000, 5200] ∪ [5500, 6000] ∪ [8900, 9000] (C4 clipped).
    let (_dir, file) = scenario::worked_example().write();
    let o = json(&["overlap", path(&file)]);
    let row = |stage: &str, role: &str| one(&o, &[("stage", stage), ("role", role)]);
    // K1 [4500, 5600] hides 800 of 1100; K9 [8950, 9000] is covered by C4: 850 of 1150; the
    // wall sees [5200, 5500] exposed.
    assert_eq!(numbers(row("stage2_f", "ep_a2a")), [2, 1150, 850, 300, 300]);
    assert_eq!(row("stage2_f", "ep_a2a")["overlap_max_pct"], 100.0);
    // PP point-to-point is kept, in its own bucket.
    assert_eq!(numbers(row("pp_p2p", "pp_p2p")), [1, 500, 0, 500, 500]);
    // Barrier: B1 on the compute stream, in stage1_f.
    // Barrier time is never exposed: its rows leave the exposed columns empty (issue 21).
    let barrier = row("stage1_f", "barrier");
    assert_eq!(
        (&barrier["kernels"], &barrier["comm_ns"]),
        (&Value::from(1), &Value::from(100))
    );
    assert_eq!(barrier["hidden_ns"], 0);
    assert!(barrier["exposed_ns"].is_null() && barrier["exposed_wall_ns"].is_null());
    assert_eq!(numbers(row("stage1_f", "cp_ring")), [1, 200, 100, 100, 100]);
    // Roles are the kernels' own: K6 [5000, 5800] (stage2_b) hides 500; K7 [8000, 8200], on
    // K6's stream with no launch record, is ep_a2a too and hides none. With K1, K2 [6000,
    // 6400] (400 exposed) and K9: 2550 of communication, 1350 hidden; on the wall
    // [5200, 5500] + [6000, 6400] + [8000, 8200] = 900 exposed.
    assert_eq!(numbers(row("stage2_b", "ep_a2a")), [1, 800, 500, 300, 300]);
    assert_eq!(numbers(row("all", "ep_a2a")), [5, 2550, 1350, 1200, 900]);
    assert!(find(&o, &[("role", "mixed")]).is_empty());
    assert_eq!(row("all", "ep_a2a")["in_stream"], false);
    assert_eq!(row("stage1_f", "barrier")["in_stream"], true);
    // Totals over nine communication kernels (barrier excluded): summed exposed 2000. On the
    // wall, K5 [7200, 7300] lies inside K4 [7000, 7500] (100) and K1 and K6 are both exposed
    // over [5200, 5500] (300): 2000 - 400 = 1600.
    let total = row("all", "all");
    assert_eq!(numbers(total), [9, 3450, 1450, 2000, 1600]);
    let pct = total["overlap_pct"].as_f64().unwrap();
    assert!((pct - 100.0 * 1450.0 / 3450.0).abs() < 1e-9, "{pct}");
    assert_eq!(o["windows"][0]["start"], 3000);
}

#[test]
fn gpu_window_clips_to_the_projection_instead() {
    // [3900, 9100]: K9 now counts whole (100 ns) and C4 covers it.
    let (_dir, file) = scenario::worked_example().write();
    let o = json(&["overlap", "--gpu-window", path(&file)]);
    let row = one(&o, &[("stage", "all"), ("role", "ep_a2a")]);
    assert_eq!(numbers(row), [5, 2600, 1400, 1200, 900]);
}

#[test]
fn roles_file_rules_come_first() {
    let (dir, file) = scenario::worked_example().write();
    let roles = dir.path().join("roles.toml");
    std::fs::write(
        &roles,
        "[[rule]]\npattern = 'loss\\d\\.backward'\nrole = 'loss_comm'\n",
    )
    .unwrap();
    let s = json(&["streams", "--roles", path(&roles), path(&file)]);
    assert_eq!(one(&s, &[("stream", "36")])["role"], "loss_comm");
    std::fs::write(&roles, "[[rule]]\npattern = '('\nrole = 'x'\n").unwrap();
    let (code, _, err) = run(&["streams", "--roles", path(&roles), path(&file)]);
    assert_eq!(code, 2);
    assert!(
        err.contains("roles.toml") && err.contains("bad pattern"),
        "{err}"
    );
}

#[test]
fn explicit_and_whole_windows_are_stated() {
    let (_dir, file) = scenario::worked_example().write();
    let f = path(&file);
    let w = json(&["overlap", "--start", "4000", "--end", "6000", f]);
    assert_eq!(w["windows"][0]["source"], "explicit");
    assert_eq!(w["windows"][0]["end"], 6000);
    let (code, out, _) = run(&["window", "--whole", f]);
    assert_eq!(code, 0);
    assert!(out.contains("(whole capture)"), "{out}");
    let (code, _, err) = run(&["overlap", "--start", "6000", "--end", "4000", f]);
    assert_eq!(code, 2);
    assert!(err.contains("not before"), "{err}");
}

/// A directory of exports is read in natural name order (`node2` before `node10`), so hosts,
/// and the ranks numbered in host order, follow the node numbers: ddp_2node carries no rank
/// labels, its node0 export named `node2.sqlite` and its node1 export `node10.sqlite`.
#[test]
fn a_directory_of_exports_numbers_its_hosts_in_natural_name_order() {
    let dir = tempfile::tempdir().unwrap();
    for (from, to) in [("node0", "node2"), ("node1", "node10")] {
        let source = fixture(&format!("ddp_2node/{from}.sqlite"));
        std::fs::copy(source, dir.path().join(format!("{to}.sqlite"))).unwrap();
    }
    let ranks = json(&["ranks", path(dir.path())]);
    let hosts: Vec<(i64, &str)> = (ranks["rows"].as_array().unwrap().iter())
        .map(|r| (r["rank"].as_i64().unwrap(), r["host"].as_str().unwrap()))
        .collect();
    assert_eq!(
        hosts,
        [(0, "node0"), (1, "node0"), (2, "node1"), (3, "node1")]
    );
    assert!(
        ranks["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["source"] == "order")
    );
}

// ---- the committed 2-node PithTrain fixture ----

#[test]
fn two_nodes_with_the_same_pids_give_four_distinct_ranks() {
    let n0 = fixture("pithtrain_pp2_ep2/node0.sqlite");
    let n1 = fixture("pithtrain_pp2_ep2/node1.sqlite");
    let ranks = json(&["ranks", path(&n0), path(&n1)]);
    let rows = ranks["rows"].as_array().unwrap();
    let got: Vec<(i64, &str, i64, i64)> = rows
        .iter()
        .map(|r| {
            (
                r["rank"].as_i64().unwrap(),
                r["host"].as_str().unwrap(),
                r["pid"].as_i64().unwrap(),
                r["pp"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (0, "node0", 41207, 0),
            (1, "node0", 41220, 0),
            (2, "node1", 41207, 1),
            (3, "node1", 41220, 1)
        ]
    );
    assert!(rows.iter().all(|r| r["source"] == "label"));

    let overlap = json(&["overlap", path(&n0), path(&n1)]);
    for rank in ["0", "1", "2", "3"] {
        let total = one(
            &overlap,
            &[("rank", rank), ("stage", "all"), ("role", "all")],
        );
        let [kernels, comm, hidden, exposed, wall] = numbers(total);
        assert!(kernels > 0 && comm > 0, "rank {rank}: {total}");
        assert_eq!(comm, hidden + exposed);
        assert!(
            wall <= exposed,
            "rank {rank}: wall {wall} > summed {exposed}"
        );
        assert!(!find(&overlap, &[("rank", rank), ("role", "ep_a2a")]).is_empty());
    }
    // The median row reads as no rank: host `median`, no pid; worst_rank names the rank of
    // least overlap, whose overlap_pct is the row's overlap_min_pct.
    let median = one(
        &overlap,
        &[("rank", "all"), ("stage", "all"), ("role", "all")],
    );
    assert_eq!(median["host"], "median");
    assert!(median["pid"].is_null(), "{median}");
    let worst = ["0", "1", "2", "3"]
        .map(|rank| {
            let row = one(
                &overlap,
                &[("rank", rank), ("stage", "all"), ("role", "all")],
            );
            (
                row["overlap_pct"].as_f64().unwrap(),
                row["rank"].as_i64().unwrap(),
            )
        })
        .into_iter()
        .min_by(|a, b| a.partial_cmp(b).unwrap())
        .unwrap();
    assert_eq!(median["worst_rank"].as_i64(), Some(worst.1));
    assert_eq!(median["overlap_min_pct"].as_f64(), Some(worst.0));
}

// ---- a real 2-GPU pipeline run: NCCL on the compute streams ----

/// (start, end) of one pid's kernels whose short name matches `like` (or does not, `negate`).
fn kernel_spans(db: &rusqlite::Connection, pid: i64, like: &str, negate: bool) -> Vec<(i64, i64)> {
    let sql = format!(
        "SELECT k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = \
         k.shortName WHERE (k.globalPid >> 24) & 0xFFFFFF = ?1 AND s.value {} LIKE ?2",
        if negate { "NOT" } else { "" }
    );
    let mut stmt = db.prepare(&sql).unwrap();
    stmt.query_map((pid, like), |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn real_two_gpu_all_to_all_on_the_compute_stream_is_exposed_in_stream_communication() {
    // The mfu capture's 66 SendRecv kernels run on the compute streams under PyTorch's
    // `c10d::alltoall_base_` > `nccl:all_to_all` ranges, each inside an NCCL group with one
    // send and one receive per peer: all-to-all (sequence-parallel), not pipeline traffic.
    let Some(file) = real("nsysai_mfu_2gpu_before_2026.2.1.sqlite") else {
        return;
    };
    let f = path(&file);
    let ranks = json(&["ranks", f]);
    let rows = ranks["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (&rows[0]["pid"], &rows[1]["pid"]),
        (&Value::from(144), &Value::from(145))
    );
    assert!(rows.iter().all(|r| r["source"] == "order"));

    let streams = json(&["streams", "--whole", f]);
    let rows = streams["rows"].as_array().unwrap();
    let got: Vec<(i64, &str)> = rows
        .iter()
        .map(|r| (r["stream"].as_i64().unwrap(), r["role"].as_str().unwrap()))
        .collect();
    assert_eq!(got, [(7, "compute"), (15, "compute")]);
    for r in rows {
        // 32 launches inside `nccl:all_to_all`; the first kernel of each rank was launched
        // before the slice began and takes its stream's role.
        let groups = r["comm_roles"].as_array().unwrap();
        let summary: Vec<(&str, &str, u64)> = groups
            .iter()
            .map(|g| {
                let s = |k: &str| g[k].as_str().unwrap();
                (s("role"), s("evidence"), g["kernels"].as_u64().unwrap())
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("nccl:AllToAll", "stream", 1),
                ("nccl:AllToAll", "torch", 32)
            ]
        );
    }

    let db = rusqlite::Connection::open(&file).unwrap();
    let overlap = json(&["overlap", "--whole", f]);
    let bubbles = json(&["bubbles", "--whole", f]);
    for (rank, pid) in [("0", 144), ("1", 145)] {
        let sendrecv = kernel_spans(&db, pid, "ncclDevKernel_SendRecv%", false);
        let compute = merged(kernel_spans(&db, pid, "nccl%", true));
        let comm_ns: i64 = sendrecv.iter().map(|(s, e)| e - s).sum();
        let exposed = uncovered(&merged(sendrecv.clone()), &compute);
        let row = one(
            &overlap,
            &[("rank", rank), ("stage", "all"), ("role", "nccl:AllToAll")],
        );
        assert_eq!(row["in_stream"], true);
        assert_eq!(
            numbers(row),
            [sendrecv.len() as i64, comm_ns, 0, comm_ns, exposed],
            "rank {rank}"
        );
        assert_eq!(sendrecv.len(), 33);
        let total = one(
            &overlap,
            &[("rank", rank), ("stage", "all"), ("role", "all")],
        );
        assert_eq!(numbers(total), numbers(row));
        assert!(find(&overlap, &[("rank", rank), ("role", "barrier")]).is_empty());
        // Not pipeline traffic: no pipeline wait; the all-to-all keeps the GPU busy.
        let b = one(&bubbles, &[("rank", rank)]);
        assert_eq!(b["pp_wait_ns"], 0);
        let all = merged([sendrecv, compute].concat());
        let busy: i64 = all.iter().map(|(s, e)| e - s).sum();
        assert_eq!(b["busy_ns"], busy, "rank {rank}");
    }
    // Rank 0 waits 17.2 ms in its all-to-alls, rank 1 8.2 ms (rank 0 arrives first).
    let exposed = |rank| {
        one(
            &overlap,
            &[("rank", rank), ("stage", "all"), ("role", "all")],
        )["exposed_wall_ns"]
            .as_i64()
            .unwrap()
    };
    assert_eq!((exposed("0"), exposed("1")), (17_172_652, 8_229_100));
    let notes = overlap["notes"].to_string();
    assert!(
        notes.contains("66 communication kernel(s) or peer copies ran in-stream"),
        "{notes}"
    );
    // No PithTrain label: compatibility mode has nothing to report.
    let (code, _, err) = run(&["ranks", "--compat", "pithtrain", f]);
    assert_eq!(code, 1, "{err}");
}

// ---- cross-check against an independent implementation (SQL + Python) ----

/// Output of `tests/pithtrain_reference.py`, or None (with a note) when python3 is absent.
fn reference(args: &[&str]) -> Option<String> {
    let script = crate::util::root().join("tests/pithtrain_reference.py");
    match std::process::Command::new("python3")
        .arg(&script)
        .args(args)
        .output()
    {
        Ok(out) => {
            assert!(
                out.status.success(),
                "reference failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            Some(String::from_utf8(out.stdout).expect("utf-8"))
        }
        Err(_) => {
            assert!(
                std::env::var_os("NSYS_LENS_CI").is_none(),
                "CI must install python3 (see .ci/run)"
            );
            crate::util::skipped("the cross-check: python3 is not installed");
            None
        }
    }
}

#[test]
fn compat_matches_an_independent_sql_implementation_on_whole_fixtures() {
    let (_dir, worked) = scenario::worked_example().write();
    let files = [
        fixture("pithtrain_pp2_ep2/node0.sqlite"),
        fixture("pithtrain_pp2_ep2/node1.sqlite"),
        worked,
    ];
    // The median chunk windows, and one wide window covering every step.
    let windows: [&[&str]; 2] = [&[], &["0", "400000000"]];
    for file in &files {
        for command in ["ranks", "window", "streams", "overlap"] {
            for window in windows {
                if !window.is_empty() && matches!(command, "ranks" | "window") {
                    continue;
                }
                let Some(expected) = reference(&[&[command, path(file)], window].concat()) else {
                    return;
                };
                let mut args = vec![command, "--compat", "pithtrain", path(file)];
                if let [start, end] = window {
                    args.extend(["--start", start, "--end", end]);
                }
                let (code, out, err) = run(&args);
                assert_eq!(code, 0, "{args:?}: {err}");
                assert_eq!(out, expected, "{args:?}");
            }
        }
    }
}
