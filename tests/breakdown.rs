//! `kernels`, `idle`, `bubbles`, `compare`: a hand-worked step (numbers derived in the comments),
//! the Megatron preset against the simulator's own ground truth, DDP comparisons, and real
//! exports against sums computed in SQL.

use crate::scenario::{PID, Scenario};
use crate::util::{nsys_lens, real, sql_gpu_ops, sqlite_files, synth, texts, union_length};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json", "-q"]);
    let output = nsys_lens(&all);
    let (out, err) = texts(&output);
    assert!(output.status.success(), "{args:?}: {err}");
    serde_json::from_str(&out).expect("JSON")
}

fn rows(v: &Value) -> &Vec<Value> {
    v["rows"].as_array().expect("rows")
}

fn int(row: &Value, key: &str) -> i64 {
    row[key]
        .as_i64()
        .unwrap_or_else(|| panic!("{key} in {row}"))
}

/// One step `ProfilerStep#0` = [1000, 11000] with two `forward` ranges, a `data_wait` range,
/// compute on streams 7 and 8, a pipeline SendRecv on stream 20 and an all-reduce on 24.
fn worked_step() -> Scenario {
    let main = (PID, PID);
    let gpu = |stream| (PID, 0, stream);
    let mut s = Scenario::new();
    s.range(main, 1000, 11_000, "ProfilerStep#0")
        .range(main, 1100, 1200, "forward")
        .range(main, 1300, 1400, "forward")
        .range(main, 6000, 6500, "data_wait");
    s.kernel(gpu(7), (2000, 5000), "ampere_sgemm_128x64_tn", 1)
        .launch(main, 1500, 1)
        .kernel(gpu(8), (4000, 6000), "flash_fwd_kernel", 2)
        .launch(main, 1600, 2)
        .kernel(gpu(7), (5000, 5500), "vectorized_elementwise_kernel", 3)
        .launch(main, 1700, 3)
        .kernel(gpu(7), (7000, 8000), "vectorized_elementwise_kernel", 4)
        .launch(main, 6510, 4)
        .kernel(gpu(7), (8005, 8100), "reduce_kernel", 5)
        .launch(main, 6600, 5)
        .kernel(gpu(20), (6000, 6800), "ncclDevKernel_SendRecv", 6)
        .launch(main, 1800, 6)
        .kernel(
            gpu(24),
            (9000, 9500),
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            7,
        )
        .launch(main, 1900, 7);
    s
}

#[test]
fn kernels_split_the_step_into_families_idle_and_concurrency() {
    // Families: gemm_fp32_tf32 3000; attention_fwd 2000; elementwise 500 + 1000 = 1500 (2
    // kernels); reduction 95; nccl:SendRecv 800; nccl:AllReduce 500. Sum 7895. Union of everything:
    // [2000, 6800] 4800 + [7000, 8000] 1000 + [8005, 8100] 95 + [9000, 9500] 500 = 6395. So
    // idle = 10000 - 6395 = 3605, concurrency excess = 7895 - 6395 = 1500 (flash overlaps the
    // GEMM by 1000 and the elementwise kernel by 500), step - kernel = 2105 = 3605 - 1500.
    let (_dir, file) = worked_step().write();
    let k = json(&["kernels", file.to_str().unwrap()]);
    let family = |name: &str| {
        rows(&k)
            .iter()
            .find(|r| r["family"] == name)
            .unwrap_or_else(|| panic!("{name}"))
            .clone()
    };
    let expected = [
        ("gemm_fp32_tf32", 1, 3000),
        ("attention_fwd", 1, 2000),
        ("elementwise", 2, 1500),
        ("reduction", 1, 95),
        ("nccl:SendRecv", 1, 800),
        ("nccl:AllReduce", 1, 500),
    ];
    for (name, kernels, time) in expected {
        let row = family(name);
        assert_eq!(
            (int(&row, "kernels"), int(&row, "time_ns")),
            (kernels, time),
            "{name}"
        );
        assert_eq!(int(&row, "time_per_step_ns"), time);
    }
    let share = family("gemm_fp32_tf32")["share_pct"].as_f64().unwrap();
    assert!((share - 100.0 * 3000.0 / 7895.0).abs() < 1e-9);
    let all = family("all");
    let got = [
        "step_ns",
        "kernel_ns",
        "idle_ns",
        "concurrency_excess_ns",
        "step_minus_kernel_ns",
    ]
    .map(|key| int(&all, key));
    assert_eq!(got, [10_000, 7895, 3605, 1500, 2105]);
    assert_eq!(int(&all, "kernels"), 7);
}

#[test]
fn idle_splits_gaps_by_cause_and_names_what_the_cpu_did() {
    // Stream 7: [5500, 7000] is host wait (the kernel was launched at 6510, after 5500);
    // [8000, 8005] is kernel wait (launched at 6600, before 8000, and shorter than 10 us).
    // Its span is 2000 to 8100. At the first gap's middle (6250) the main thread is in
    // `data_wait`.
    let (_dir, file) = worked_step().write();
    let idle = json(&["idle", file.to_str().unwrap()]);
    let s7 = rows(&idle).iter().find(|r| r["stream"] == 7).unwrap();
    let got = [
        "ops",
        "span_ns",
        "idle_ns",
        "host_wait_ns",
        "kernel_wait_ns",
        "other_ns",
    ]
    .map(|key| int(s7, key));
    assert_eq!(got, [4, 6100, 1505, 1500, 5, 0]);
    let s8 = rows(&idle).iter().find(|r| r["stream"] == 8).unwrap();
    assert_eq!(int(s8, "idle_ns"), 0);
    let gap = &idle["longest_gaps"][0];
    assert_eq!((int(gap, "start"), int(gap, "end")), (5500, 7000));
    assert_eq!(
        (&gap["cause"], &gap["cpu"]),
        (&Value::from("host_wait"), &Value::from("data_wait"))
    );
}

#[test]
fn bubbles_split_into_pipeline_wait_and_idle() {
    // Busy = compute and the all-reduce: [2000, 6000] 4000 + [7000, 8000] 1000 + [8005, 8100]
    // 95 + [9000, 9500] 500 = 5595; bubble 10000 - 5595 = 4405, of which the SendRecv alone
    // [6000, 6800] is 800 (pp_wait) and the rest 3605 idle. Two forward ranges with pp 2:
    // ideal (2-1)/(2+2-1) = 33.3%.
    let (_dir, file) = worked_step().write();
    let b = json(&["bubbles", "--pp", "2", file.to_str().unwrap()]);
    let row = &rows(&b)[0];
    let got = ["step_ns", "busy_ns", "bubble_ns", "pp_wait_ns", "idle_ns"].map(|k| int(row, k));
    assert_eq!(got, [10_000, 5595, 4405, 800, 3605]);
    assert!((row["bubble_pct"].as_f64().unwrap() - 44.05).abs() < 1e-9);
    assert!((row["ideal_bubble_pct"].as_f64().unwrap() - 100.0 / 3.0).abs() < 1e-9);
    // Without --pp nothing says pp: no ideal; without backward ranges, no phases.
    let b = json(&["bubbles", file.to_str().unwrap()]);
    assert_eq!(rows(&b)[0]["ideal_bubble_pct"], Value::Null);
    assert_eq!(rows(&b)[0]["steady_bubble_ns"], Value::Null);
}

#[test]
fn concurrent_streams_make_kernel_time_exceed_the_step() {
    // Step [1000, 2000]; a GEMM on stream 7 and attention on stream 8 both run [1000, 2000]:
    // 2000 ns of kernels in a 1000 ns step. idle 0, excess 1000, step - kernel = -1000.
    let main = (PID, PID);
    let mut s = Scenario::new();
    s.range(main, 1000, 2000, "ProfilerStep#0")
        .kernel((PID, 0, 7), (1000, 2000), "ampere_sgemm_128x64_tn", 1)
        .launch(main, 1001, 1)
        .kernel((PID, 0, 8), (1000, 2000), "flash_fwd_kernel", 2)
        .launch(main, 1002, 2);
    let (_dir, file) = s.write();
    let k = json(&["kernels", file.to_str().unwrap()]);
    let all = rows(&k).iter().find(|r| r["family"] == "all").unwrap();
    let got = [
        "step_ns",
        "kernel_ns",
        "idle_ns",
        "concurrency_excess_ns",
        "step_minus_kernel_ns",
    ]
    .map(|key| int(all, key));
    assert_eq!(got, [1000, 2000, 0, 1000, -1000]);
}

/// Runs the megatron preset; returns the directory.
fn megatron(pp: usize) -> tempfile::TempDir {
    synth(&format!(
        "--preset megatron --tp 2 --pp {pp} --gpus-per-node {} --chunks 4 --steps 2 --mixed-precision",
        2 * pp
    ))
}

/// Per rank, bubble % of each step: from `bubbles` and from the simulator's truth.
fn bubbles_and_truth(dir: &Path, pp: usize) -> (Vec<Vec<f64>>, Vec<Vec<f64>>, Value) {
    let files: Vec<PathBuf> = sqlite_files(dir);
    let mut args: Vec<&str> = vec!["bubbles", "--whole", "--pp"];
    let pp = pp.to_string();
    args.push(&pp);
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let measured = json(&args);
    let mut ours: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for r in rows(&measured) {
        ours.entry(int(r, "rank"))
            .or_default()
            .push(r["bubble_pct"].as_f64().unwrap());
    }
    let truth: Value = crate::util::truth(dir);
    let mut expected: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for s in truth["steps"].as_array().unwrap() {
        let pct = 100.0 * int(s, "bubble_ns") as f64 / int(s, "step_ns") as f64;
        expected.entry(int(s, "rank")).or_default().push(pct);
    }
    (
        ours.into_values().collect(),
        expected.into_values().collect(),
        measured,
    )
}

#[test]
fn bubbles_match_the_simulated_schedule_for_pp_1_2_4() {
    let mut means = Vec::new();
    for pp in [1, 2, 4] {
        let dir = megatron(pp);
        let (ours, truth, measured) = bubbles_and_truth(dir.path(), pp);
        assert_eq!(ours.len(), truth.len(), "ranks at pp {pp}");
        for (rank, (o, t)) in ours.iter().zip(&truth).enumerate() {
            assert_eq!(o.len(), t.len(), "steps of rank {rank}");
            for (a, b) in o.iter().zip(t) {
                assert!(
                    (a - b).abs() <= 0.5,
                    "pp {pp} rank {rank}: {a:.2}% vs truth {b:.2}%"
                );
            }
        }
        assert!(
            rows(&measured)
                .iter()
                .all(|r| r["ideal_bubble_pct"].is_number())
        );
        let all: Vec<f64> = ours.into_iter().flatten().collect();
        means.push(all.iter().sum::<f64>() / all.len() as f64);
        if pp == 1 {
            assert!(all.iter().all(|&b| b < 2.0), "pp 1 bubbles {all:?}");
        }
    }
    assert!(
        means[1] >= 3.0 * means[0],
        "pp 2 mean {} vs pp 1 mean {}",
        means[1],
        means[0]
    );
}

/// Runs the ddp preset with extra options; returns the directory.
fn ddp(extra: &str) -> tempfile::TempDir {
    synth(&format!(
        "--preset ddp --nodes 1 --gpus-per-node 2 --steps 3 --mixed-precision {extra}"
    ))
}

#[test]
fn compare_shows_the_all_reduce_share_dropping_with_gradient_accumulation() {
    let (one, four) = (ddp("--grad-accum 1"), ddp("--grad-accum 4"));
    let (a, b) = (
        one.path().join("node0.sqlite"),
        four.path().join("node0.sqlite"),
    );
    let output = nsys_lens(&[
        "compare",
        "--format",
        "json",
        "-q",
        "--whole",
        a.to_str().unwrap(),
        "--",
        b.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", texts(&output).1);
    let c: Value = serde_json::from_slice(&output.stdout).unwrap();
    let metric = |name: &str| {
        rows(&c)
            .iter()
            .find(|r| r["metric"] == name)
            .unwrap()
            .clone()
    };
    let share = metric("family nccl:AllReduce share_of_step_pct");
    let (x, y) = (share["a"].as_f64().unwrap(), share["b"].as_f64().unwrap());
    assert!(y < x / 2.0, "all-reduce share {x}% -> {y}%");
    // Four micro-batches per step instead of one: the step is well over twice as long (the
    // optimizer and the all-reduce do not grow).
    let step = metric("step_ns");
    assert!(step["b"].as_i64().unwrap() > 2 * step["a"].as_i64().unwrap());
}

#[test]
fn a_slow_data_loader_shows_up_as_host_wait() {
    let (fast, slow) = (ddp(""), ddp("--slow-dataloader"));
    let host_wait = |dir: &Path| {
        let idle = json(&[
            "idle",
            "--whole",
            dir.join("node0.sqlite").to_str().unwrap(),
        ]);
        let s7 = rows(&idle)
            .iter()
            .find(|r| r["stream"] == 7 && r["rank"] == 0)
            .unwrap()
            .clone();
        (int(&s7, "host_wait_ns"), idle["longest_gaps"].to_string())
    };
    let (fast_wait, _) = host_wait(fast.path());
    let (slow_wait, gaps) = host_wait(slow.path());
    // Two 45 ms data-loading gaps between the three steps.
    assert!(
        slow_wait - fast_wait >= 2 * 40_000_000,
        "{fast_wait} -> {slow_wait}"
    );
    assert!(gaps.contains("DataLoader.__next__"), "{gaps}");
}

#[test]
fn real_exports_agree_with_sql_sums() {
    let Some(dir) = real("") else {
        return;
    };
    for file in sqlite_files(&dir) {
        let path = file.to_str().unwrap();
        // Per pid: summed duration of kernels, copies and sets; per stream: their intervals.
        let ops = sql_gpu_ops(&file);
        let mut sums: BTreeMap<u32, i64> = BTreeMap::new();
        let mut per_stream: BTreeMap<(u32, u32, u32), Vec<(i64, i64)>> = BTreeMap::new();
        for &(pid, device, stream, s, e, _) in &ops {
            *sums.entry(pid).or_default() += e - s;
            per_stream
                .entry((pid, device, stream))
                .or_default()
                .push((s, e));
        }
        if sums.is_empty() {
            continue;
        }
        let k = json(&["kernels", "--whole", "--steps", "1", path]);
        for row in rows(&k)
            .iter()
            .filter(|r| r["family"] == "all" && r["rank"].is_number())
        {
            let pid = row["pid"].as_u64().unwrap() as u32;
            assert_eq!(int(row, "kernel_ns"), sums[&pid], "{path} pid {pid}");
        }
        let idle = json(&["idle", "--whole", path]);
        let mut idle_total: BTreeMap<u32, i64> = BTreeMap::new();
        for row in rows(&idle) {
            assert_eq!(
                int(row, "idle_ns"),
                int(row, "host_wait_ns") + int(row, "kernel_wait_ns") + int(row, "other_ns")
            );
            *idle_total
                .entry(row["pid"].as_u64().unwrap() as u32)
                .or_default() += int(row, "idle_ns");
        }
        // Idle per stream = span minus the union of its operations, from SQL.
        let mut expected: BTreeMap<u32, i64> = BTreeMap::new();
        for ((pid, ..), spans) in per_stream {
            let first = spans.iter().map(|s| s.0).min().unwrap();
            let last = spans.iter().map(|s| s.1).max().unwrap();
            *expected.entry(pid).or_default() += (last - first) - union_length(spans);
        }
        assert_eq!(idle_total, expected, "{path}");
    }
}

/// Issue 35: `compare --fail-if` as a CI gate. A run whose rank 1 reaches every all-reduce
/// 8 ms late against the same run without: `step_time>+5%` fails (exit 1, the JSON names the
/// check and its change, equal to the two runs' `step_ns` rows), `+50%` passes (exit 0).
#[test]
fn compare_fail_if_gates_a_slower_run() {
    let run = "--preset ddp --nodes 2 --gpus-per-node 2 --layers 4 --steps 3";
    let (base, slow) = (synth(run), synth(&format!("{run} --straggler 1:8000000")));
    let (a, b) = (base.path().to_str().unwrap(), slow.path().to_str().unwrap());
    let gate = |check: &str| {
        let args = [
            "compare",
            "-q",
            "--format",
            "json",
            "--fail-if",
            check,
            a,
            "--",
            b,
        ];
        let output = nsys_lens(&args);
        let c: Value = serde_json::from_slice(&output.stdout).unwrap();
        (output.status.code(), c)
    };
    let (code, c) = gate("step_time>+5%");
    assert_eq!(code, Some(1), "{c}");
    let step = rows(&c).iter().find(|r| r["metric"] == "step_ns").unwrap();
    let (x, y) = (step["a"].as_f64().unwrap(), step["b"].as_f64().unwrap());
    let check = &c["checks"][0];
    assert_eq!(check["check"], "step_time>+5%");
    assert_eq!(check["failed"], true);
    let change = check["change"].as_f64().unwrap();
    assert!(
        (change - 100.0 * (y - x) / x).abs() < 1e-6,
        "{change} vs {x} -> {y}"
    );
    assert!(change > 5.0);
    let (code, c) = gate("step_time>+50%");
    assert_eq!(code, Some(0), "{c}");
    assert_eq!(c["checks"][0]["failed"], false);
    // The others wait for rank 1 in every all-reduce: exposed communication grows by points
    // of the window, the difference of the runs' `exposed_comm_pct all` rows.
    let (code, c) = gate("exposed_comm>+2pp");
    let share = rows(&c)
        .iter()
        .find(|r| r["metric"] == "exposed_comm_pct all")
        .map(|r| r["b"].as_f64().unwrap() - r["a"].as_f64().unwrap())
        .unwrap();
    assert_eq!(c["checks"][0]["unit"], "points");
    assert!((c["checks"][0]["change"].as_f64().unwrap() - share).abs() < 1e-9);
    assert_eq!(code, Some(if share > 2.0 { 1 } else { 0 }), "{c}");
    assert!(share > 2.0, "{share}");
    // A metric one run lacks is a usage error naming the metrics both have.
    let output = nsys_lens(&[
        "compare",
        "-q",
        "--fail-if",
        "family:mystery>+1%",
        a,
        "--",
        b,
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        texts(&output).1.contains("they have: "),
        "{}",
        texts(&output).1
    );
}

/// Issue 35: `compare` prints a share's difference in points (`+9.3 pp`, never `%`), and a
/// difference that rounds to nothing without a sign (`0.0%`, not `-0.0%`).
#[test]
fn compare_prints_points_for_shares_and_no_negative_zero() {
    let run = "--preset ddp --nodes 1 --gpus-per-node 2 --steps 2";
    let (base, slow) = (synth(run), synth(&format!("{run} --straggler 1:4000000")));
    let (a, b) = (base.path().to_str().unwrap(), slow.path().to_str().unwrap());
    let out = nsys_lens(&["compare", "--whole", "-q", a, "--", b]);
    let text = texts(&out).0;
    let bubble = text.lines().find(|l| l.starts_with("bubble_pct")).unwrap();
    let cells: Vec<&str> = bubble.split_whitespace().collect();
    assert_eq!(cells[4], "pp", "{bubble}");
    assert!(cells[3].starts_with('+'), "{bubble}");
    assert!(
        !text.contains("-0.0%") && !text.contains("-0.0 pp"),
        "{text}"
    );
    // The JSON keeps the difference as a number of points.
    let c = nsys_lens(&["compare", "--whole", "-q", "--format", "json", a, "--", b]);
    let c: Value = serde_json::from_slice(&c.stdout).unwrap();
    let row = rows(&c)
        .iter()
        .find(|r| r["metric"] == "bubble_pct")
        .unwrap();
    let (x, y) = (row["a"].as_f64().unwrap(), row["b"].as_f64().unwrap());
    assert!((row["diff"].as_f64().unwrap() - (y - x)).abs() < 1e-9);
}
