//! Issue 32: `critical-path` and `what-if` on every synth preset, on synth runs with injected
//! faults (a slow rank, a straggler, a launch-bound CPU, scaled families and roles) against
//! the same run without them, and on the real 3-node export.

use crate::util::{damaged_copy, json, nsys_lens, real, rows, sql_gpu_ops, synth, texts};
use std::collections::BTreeMap;
use std::path::Path;

/// Per step: (step_ns, path_ns) and the path's time per (rank, category, name).
type Paths = BTreeMap<i64, ((i64, i64), BTreeMap<(i64, String, String), i64>)>;

fn paths(dir: &Path) -> Paths {
    let out = json(&["critical-path", "--whole", dir.to_str().unwrap()]);
    by_step(rows(&out), "path_ns")
}

/// The simulator's own paths (truth.json's `critical_paths`): what truly set each start.
fn truth_paths(dir: &Path) -> Paths {
    let truth = crate::util::truth(dir);
    by_step(truth["critical_paths"].as_array().unwrap(), "step_ns")
}

/// Path rows per step: (step_ns, the path's length from column `path`) and the time per
/// (rank, category, name).
fn by_step(rows: &[serde_json::Value], path: &str) -> Paths {
    let mut paths = Paths::new();
    for r in rows {
        let int = |k: &str| r[k].as_i64().unwrap();
        let text = |k: &str| r[k].as_str().unwrap().to_string();
        let step = paths.entry(int("step")).or_default();
        step.0 = (int("step_ns"), int(path));
        *step
            .1
            .entry((int("rank"), text("category"), text("name")))
            .or_default() += int("ns");
    }
    paths
}

/// The path `critical-path` finds on `dir` against the simulator's: the same steps, each as
/// long; per step, each rank's time in each category, and in each family and role, within 5 %
/// of the simulator's (or 0.1 % of the step). CPU time is compared by category only: the
/// analysis names it by NVTX range, which the simulator does not know.
fn assert_path_is_the_simulators(dir: &Path, run: &str) {
    let (found, truth) = (paths(dir), truth_paths(dir));
    assert_eq!(
        found.keys().collect::<Vec<_>>(),
        truth.keys().collect::<Vec<_>>(),
        "{run}"
    );
    for (step, ((step_ns, _), parts)) in &found {
        let ((true_ns, _), true_parts) = &truth[step];
        assert_eq!(step_ns, true_ns, "{run} step {step}");
        let by = |parts: &BTreeMap<(i64, String, String), i64>, named: bool| {
            let mut by: BTreeMap<(i64, String, String), i64> = BTreeMap::new();
            for ((rank, category, name), ns) in parts {
                let named = named && matches!(category.as_str(), "compute" | "comm");
                let name = if named { name.clone() } else { String::new() };
                *by.entry((*rank, category.clone(), name)).or_default() += ns;
            }
            by
        };
        for named in [false, true] {
            let (a, t) = (by(parts, named), by(true_parts, named));
            for key in a.keys().chain(t.keys()) {
                let (a, t) = (
                    a.get(key).copied().unwrap_or(0),
                    t.get(key).copied().unwrap_or(0),
                );
                let tolerance = (0.05 * t as f64).max(0.001 * *step_ns as f64);
                assert!(
                    (a - t).abs() as f64 <= tolerance,
                    "{run} step {step} {key:?}: found {a}, the simulator's {t}"
                );
            }
        }
    }
}

/// On every preset with steps, and with each way of capturing that changes the evidence
/// (streams numbered per process, no NVTX of NCCL's, communication on the compute stream,
/// CUDA graphs, a deep launch queue, torch.profiler's JSON, whose stream waits name no
/// stream and whose transfers' direction only PyTorch's ranges give), the path is the
/// simulator's.
#[test]
fn the_path_is_the_one_the_simulator_ran() {
    for run in [
        "--preset ddp --nodes 2 --gpus-per-node 2 --steps 2",
        "--preset fsdp --nodes 1 --gpus-per-node 4 --steps 2",
        "--preset fsdp --nodes 1 --gpus-per-node 4 --steps 2 --renumber-streams --no-overlap",
        "--preset megatron --tp 2 --pp 2 --nodes 1 --gpus-per-node 4 --steps 2",
        "--preset ddp --nodes 1 --gpus-per-node 2 --steps 2 --nccl-on-compute --cuda-graphs",
        "--preset ddp --nodes 1 --gpus-per-node 2 --steps 2 --launch-ahead 5 --grad-accum 2",
        "--preset fsdp --nodes 1 --gpus-per-node 2 --steps 2 --format kineto",
        "--preset megatron --pp 2 --nodes 1 --gpus-per-node 2 --steps 2 --format kineto",
    ] {
        let dir = synth(run);
        assert_path_is_the_simulators(dir.path(), run);
    }
}

/// A path's time on `rank` in `category` (any name; every rank with None).
fn time(parts: &BTreeMap<(i64, String, String), i64>, rank: Option<i64>, category: &str) -> i64 {
    parts
        .iter()
        .filter(|((r, c, _), _)| rank.is_none_or(|x| x == *r) && c == category)
        .map(|(_, ns)| ns)
        .sum()
}

/// The predicted and measured step times of `what-if CHANGES` on `dir`.
fn what_if(dir: &Path, changes: &[&str]) -> Vec<(i64, i64)> {
    let mut args = vec!["what-if", "--whole", dir.to_str().unwrap()];
    for change in changes {
        args.extend(["--change", change]);
    }
    let out = json(&args);
    rows(&out)
        .iter()
        .map(|r| {
            let int = |k: &str| r[k].as_i64().unwrap();
            (int("measured_ns"), int("predicted_ns"))
        })
        .collect()
}

/// Each step's measured time, from `critical-path`.
fn step_times(dir: &Path) -> Vec<i64> {
    paths(dir).values().map(|(t, _)| t.0).collect()
}

fn close(a: i64, b: i64, tolerance: f64) -> bool {
    (a - b).abs() as f64 <= tolerance * b.abs().max(1) as f64
}

/// The path accounts for every nanosecond of every step, on every preset: path = step. The
/// steps, independently: they run from the earliest `ProfilerStep#0` range start to the last
/// GPU operation's end (SQL on the export: one node, whose clock is the merged one), back to
/// back.
#[test]
fn every_steps_path_is_its_time_on_every_preset() {
    for preset in [
        "ddp --gpus-per-node 4",
        "fsdp --gpus-per-node 4",
        "megatron --pp 2 --gpus-per-node 2",
        "megatron --tp 2 --pp 2 --gpus-per-node 4",
        "pithtrain --pp 2 --ep 2 --gpus-per-node 4",
    ] {
        let dir = synth(&format!("--preset {preset} --nodes 1 --steps 3"));
        let paths = paths(dir.path());
        // PithTrain's profiled step is its rank label's range: one step.
        let pithtrain = preset.starts_with("pithtrain");
        assert_eq!(paths.len(), if pithtrain { 1 } else { 3 }, "{preset}");
        for (step, ((step_ns, path_ns), parts)) in &paths {
            assert_eq!(step_ns, path_ns, "{preset} step {step}");
            assert_eq!(
                parts.values().sum::<i64>(),
                *path_ns,
                "{preset} step {step}"
            );
        }
        if pithtrain {
            continue;
        }
        let files = crate::util::sqlite_files(dir.path());
        let last_end = files
            .iter()
            .flat_map(|f| sql_gpu_ops(f))
            .map(|op| op.4)
            .max()
            .unwrap();
        let first_start = files.iter().map(|f| first_step_start(f)).min().unwrap();
        let total: i64 = paths.values().map(|(t, _)| t.0).sum();
        assert_eq!(total, last_end - first_start, "{preset}");
    }
}

/// The start of the first `ProfilerStep#` range of an export, from SQL.
fn first_step_start(path: &Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row(
        "SELECT min(start) FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep#%'",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

/// The real 3-node NCCL run: one step (no step ranges: the capture), its path as long as it,
/// crossing from the rank that ends it to the one that arrived last at the all-reduce
/// (rank 3 on ault43, as `collectives` says).
#[test]
fn the_real_three_node_run_has_a_path_as_long_as_its_step() {
    let Some(dir) = real("fs24_nccl_allreduce_tree_3nodes_9gpus") else {
        return;
    };
    let paths = paths(&dir);
    assert_eq!(paths.len(), 1);
    let ((step_ns, path_ns), parts) = &paths[&0];
    assert_eq!(step_ns, path_ns);
    let collectives = json(&["collectives", "--whole", dir.to_str().unwrap()]);
    let last = rows(&collectives)[0]["last_rank"].as_i64().unwrap();
    assert!(time(parts, Some(last), "launch") > 0, "{parts:?}");
    assert!(time(parts, None, "comm") > 0, "{parts:?}");
}

/// `--slow-rank 1:1.3`: the path runs on rank 1's compute, 1.3 times the clean run's path
/// compute, per step within 5 %; `straggler=median` predicts the clean run's steps within 3 %.
#[test]
fn a_slow_rank_is_on_the_path_and_the_median_speed_predicts_the_clean_run() {
    let run = "--preset ddp --nodes 2 --gpus-per-node 2 --steps 4";
    let (clean, slow) = (synth(run), synth(&format!("{run} --slow-rank 1:1.3")));
    assert_path_is_the_simulators(slow.path(), "--slow-rank 1:1.3");
    let (clean_paths, slow_paths) = (paths(clean.path()), paths(slow.path()));
    for (step, (_, parts)) in &slow_paths {
        let clean_compute = time(&clean_paths[step].1, None, "compute");
        let on_rank = time(parts, Some(1), "compute");
        assert!(
            close(on_rank, (1.3 * clean_compute as f64) as i64, 0.05),
            "step {step}: {on_rank} vs 1.3 x {clean_compute}"
        );
        assert!(on_rank as f64 >= 0.95 * time(parts, None, "compute") as f64);
    }
    let measured = step_times(clean.path());
    for (k, (_, predicted)) in what_if(slow.path(), &["straggler=median"])
        .iter()
        .enumerate()
    {
        assert!(
            close(*predicted, measured[k], 0.03),
            "step {k}: {predicted} vs {}",
            measured[k]
        );
    }
}

/// `--straggler 1:5000000`: rank 1 starts its one all-reduce per step 5 ms late; the path
/// holds 5 ms of unexplained idle on rank 1 per step (within 5 %).
#[test]
fn a_straggler_s_delay_is_idle_on_its_rank() {
    let dir = synth("--preset ddp --nodes 2 --gpus-per-node 2 --steps 3 --straggler 1:5000000");
    assert_path_is_the_simulators(dir.path(), "--straggler 1:5000000");
    for (step, (_, parts)) in paths(dir.path()) {
        let idle = parts
            .get(&(1, "idle".to_string(), "unexplained".to_string()))
            .copied()
            .unwrap_or(0);
        assert!(close(idle, 5_000_000, 0.05), "step {step}: {idle}");
    }
}

/// `--launch-bound 2:400000`: rank 2's CPU works 0.4 ms more before each launch; the path
/// shows rank 2 launch-bound in every step, as long as the simulator's path has it (within
/// 5 %) and at least the time the step grew by; the clean run's path holds next to none of it;
/// `launch=0` brings the steps back to the clean run's (its CPU gaps gone too: at most as
/// long, within 3 %).
#[test]
fn a_launch_bound_rank_is_launch_time_on_the_path() {
    let run = "--preset ddp --nodes 2 --gpus-per-node 2 --steps 3";
    let (clean, bound) = (synth(run), synth(&format!("{run} --launch-bound 2:400000")));
    assert_path_is_the_simulators(bound.path(), "--launch-bound 2:400000");
    let (clean_paths, bound_paths) = (paths(clean.path()), paths(bound.path()));
    let truth = truth_paths(bound.path());
    for (step, ((step_ns, _), parts)) in &bound_paths {
        let grew = step_ns - clean_paths[step].0.0;
        let launch = time(parts, Some(2), "launch");
        let true_launch = time(&truth[step].1, Some(2), "launch");
        assert!(
            close(launch, true_launch, 0.05),
            "step {step}: {launch} vs {true_launch}"
        );
        assert!(
            grew > 0 && launch >= grew,
            "step {step}: {launch} vs +{grew}"
        );
        assert!(time(&clean_paths[step].1, Some(2), "launch") < launch / 4);
    }
    let measured = step_times(clean.path());
    for (k, (_, predicted)) in what_if(bound.path(), &["launch=0"]).iter().enumerate() {
        assert!(
            *predicted <= measured[k] && close(*predicted, measured[k], 0.03),
            "step {k}: {predicted} vs {}",
            measured[k]
        );
    }
}

/// What-if against runs made with the change: GEMMs twice as fast (`--scale-family gemm=0.5`),
/// free all-reduces (`--scale-family nccl:AllReduce=0`), within 5 %; and no change at all
/// gives back the measured times exactly.
#[test]
fn what_if_predicts_runs_made_with_the_change() {
    let run = "--preset ddp --nodes 2 --gpus-per-node 2 --steps 3";
    let clean = synth(run);
    for (change, fault) in [
        ("family=gemm*0.5", "gemm=0.5"),
        ("role=nccl:AllReduce*0", "nccl:AllReduce=0"),
    ] {
        let changed = synth(&format!("{run} --scale-family {fault}"));
        let measured = step_times(changed.path());
        for (k, (_, predicted)) in what_if(clean.path(), &[change]).iter().enumerate() {
            assert!(
                close(*predicted, measured[k], 0.05),
                "{change} step {k}: {predicted} vs {}",
                measured[k]
            );
        }
    }
    for preset in ["fsdp", "megatron --pp 2", "pithtrain --pp 2 --ep 2"] {
        let dir = synth(&format!("--preset {preset} --steps 2"));
        for (measured, predicted) in what_if(dir.path(), &["launch=1"]) {
            assert_eq!(measured, predicted, "{preset}");
        }
    }
}

/// Over one step in the middle of the run (the steady window), a change applies to that step
/// only: a replay that also sped up the steps before it started the step earlier and
/// predicted 2x-10x the gain. The step of a run made with the change is the oracle.
#[test]
fn what_if_over_a_later_step_predicts_that_step_alone() {
    let run = "--preset ddp --nodes 1 --gpus-per-node 1 --steps 4";
    let clean = synth(run);
    let changed = synth(&format!("{run} --scale-family gemm=0.5"));
    let steady = |dir: &Path, command: &str| {
        let mut args = vec![command, dir.to_str().unwrap()];
        if command == "what-if" {
            args.extend(["--change", "family=gemm*0.5"]);
        }
        json(&args)
    };
    let predicted = rows(&steady(clean.path(), "what-if"))[0]["predicted_ns"]
        .as_i64()
        .unwrap();
    let measured = rows(&steady(changed.path(), "critical-path"))[0]["step_ns"]
        .as_i64()
        .unwrap();
    assert!(
        close(predicted, measured, 0.05),
        "{predicted} vs {measured}"
    );
}

/// A change that does not parse is a usage error naming the forms; a capture without GPU work
/// has no path (exit 1, as an empty result, saying why).
#[test]
fn bad_changes_and_empty_captures_say_so() {
    let dir = synth("--preset ddp --nodes 1 --gpus-per-node 1");
    let path = dir.path().to_str().unwrap();
    let out = nsys_lens(&["what-if", "--change", "gemm*2", path]);
    assert_eq!(out.status.code(), Some(2));
    assert!(texts(&out).1.contains("family=NAME*F"), "{}", texts(&out).1);
    let (_dir, empty) = damaged_copy(
        "megatron_pp2/node0.sqlite",
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL; DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY;",
    );
    let empty = empty.to_str().unwrap();
    for args in [
        vec!["critical-path", "--whole", empty],
        vec!["what-if", "--whole", "--change", "launch=0", empty],
    ] {
        let out = nsys_lens(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", texts(&out).1);
        assert!(texts(&out).1.contains("no "), "{}", texts(&out).1);
    }
}

/// Both traces carry the path (`convert --critical-path`): the Paraver analysis thread's
/// on-path event (63100015) and the Perfetto counter `on the critical path`, integrated per
/// rank, equal `critical-path --whole`'s rows summed per rank; both validators pass.
#[test]
fn both_traces_draw_the_path_as_the_table_has_it() {
    let dir = synth("--preset ddp --nodes 2 --gpus-per-node 2 --steps 3 --slow-rank 1:1.3");
    let path = dir.path().to_str().unwrap();
    let mut table: BTreeMap<usize, i64> = BTreeMap::new();
    for r in rows(&json(&["critical-path", "--whole", path])) {
        *table
            .entry(r["rank"].as_u64().unwrap() as usize)
            .or_default() += r["ns"].as_i64().unwrap();
    }
    assert!(table[&1] > table.values().sum::<i64>() / 2, "{table:?}");
    let out = tempfile::tempdir().unwrap();
    let base = out.path().join("run");
    let base = base.to_str().unwrap();
    let converted = nsys_lens(&["convert", path, "-o", base, "--critical-path", "-q"]);
    assert!(converted.status.success(), "{}", texts(&converted).1);
    // Paraver: tasks are ranks + 1, in rank order.
    let prv = out.path().join("run.prv");
    crate::paraver::pertalde(&prv);
    let paraver = crate::paraver::integrate_type(&crate::paraver::parse(&prv), 63_100_015);
    for rank in 0..4 {
        let want = table.get(&rank).copied().unwrap_or(0) as u64;
        assert_eq!(
            paraver.get(&(rank + 1)).copied().unwrap_or(0),
            want,
            "rank {rank}"
        );
    }
    let Some(summary) = crate::perfetto::check(&out.path().join("run.perfetto-trace")) else {
        return;
    };
    let counters = summary["counters"].as_object().unwrap();
    for rank in 0..4 {
        let key = counters.keys().find(|k| {
            k.starts_with(&format!("rank {rank} ")) && k.ends_with("on the critical path")
        });
        let got = key.map_or(0, |k| {
            crate::perfetto::integrate(counters[k].as_array().unwrap(), 0, i64::MAX)
        });
        assert_eq!(got, table.get(&rank).copied().unwrap_or(0), "rank {rank}");
    }
}

/// Where the path crosses ranks (a pipeline's transfers), the Perfetto trace draws a flow from
/// the operation the path goes on from to the one it left: as many flows more as `crossings`.
#[test]
fn the_perfetto_trace_links_where_the_path_crosses_ranks() {
    let dir = synth("--preset megatron --pp 2 --steps 2");
    let path = dir.path().to_str().unwrap();
    let crossings = json(&["critical-path", "--whole", path])["crossings"]
        .as_array()
        .unwrap()
        .len() as u64;
    assert!(crossings >= 2, "{crossings}");
    let out = tempfile::tempdir().unwrap();
    let flows = |extra: &[&str]| {
        let base = out.path().join(format!("run{}", extra.len()));
        let base = base.to_str().unwrap();
        let mut args = vec!["convert", path, "-o", base, "--to", "perfetto", "-q"];
        args.extend(extra);
        let converted = nsys_lens(&args);
        assert!(converted.status.success(), "{}", texts(&converted).1);
        let trace = std::path::PathBuf::from(format!("{base}.perfetto-trace"));
        crate::perfetto::check(&trace).map(|s| s["flows"].as_u64().unwrap())
    };
    let (Some(plain), Some(with)) = (flows(&[]), flows(&["--critical-path"])) else {
        return;
    };
    assert_eq!(with, plain + crossings);
}

/// The report shows the critical path of the median and the longest step, as `critical-path`
/// has them.
#[test]
fn the_report_shows_the_median_and_the_longest_steps_path() {
    let dir = synth("--preset ddp --nodes 2 --gpus-per-node 2 --steps 3 --slow-rank 1:1.3");
    let path = dir.path().to_str().unwrap();
    let paths = paths(dir.path());
    let mut order: Vec<(i64, i64)> = paths.iter().map(|(k, (t, _))| (t.0, *k)).collect();
    order.sort();
    let (median, longest) = (order[order.len() / 2].1, order[order.len() - 1].1);
    let out = tempfile::tempdir().unwrap();
    let page = out.path().join("report.html");
    let made = nsys_lens(&[
        "report",
        "--whole",
        path,
        "-o",
        page.to_str().unwrap(),
        "-q",
    ]);
    assert!(made.status.success(), "{}", texts(&made).1);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<h3>Critical path</h3>"));
    assert!(
        html.contains(&format!("step {median} (median)")),
        "{median}"
    );
    if longest != median {
        assert!(
            html.contains(&format!("step {longest} (longest)")),
            "{longest}"
        );
    }
    assert!(html.contains("gemm_fp32_tf32") && html.contains("ranks on the path 1"));
}
