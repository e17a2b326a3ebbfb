//! Issue 33: FLOPs and MFU from the shapes torch.profiler records, against an independent count
//! (tests/gemm_flops.py reads the trace's own `Input Dims` with Python's `json`) and against the
//! analytic count of a real H200 capture's model.

use crate::util::{json, nsys_lens, real_capture as real, rows, skipped, texts};
use std::collections::BTreeMap;
use std::path::Path;

/// Per step: the FLOPs of the `gemm_*` families, from `mfu --whole`.
fn gemm_flops(trace: &Path) -> BTreeMap<i64, i64> {
    let out = json(&["mfu", "--whole", trace.to_str().unwrap()]);
    let mut per_step = BTreeMap::new();
    for r in rows(&out) {
        if r["family"].as_str().unwrap().starts_with("gemm") {
            *per_step.entry(r["step"].as_i64().unwrap()).or_default() +=
                r["flops"].as_i64().unwrap();
        }
    }
    per_step
}

/// The real H200 capture's bf16 MLP, x (4096, 2048): Linear(2048, 8192), Linear(8192, 2048),
/// Linear(2048, 2048). Forward 2·4096·(2048·8192 + 8192·2048 + 2048·2048); backward every
/// weight's gradient (the forward's count again) and the input gradients of the last two
/// layers (x needs none). MFU against the H200's dense bf16 peak (989.4 TFLOP/s) over each
/// `ProfilerStep` range as the trace records it (2182.824 µs and 2108.103 µs).
#[test]
fn the_h200_mlp_s_gemm_flops_are_its_analytic_count() {
    let Some(trace) = real("gpu/torch_mlp_eager_shapes_h200.json.gz") else {
        return;
    };
    let forward: i64 = 2 * 4096 * (2048 * 8192 + 8192 * 2048 + 2048 * 2048);
    let inputs: i64 = 2 * 4096 * (8192 * 2048 + 2048 * 2048);
    let per_step = gemm_flops(&trace);
    assert_eq!(per_step.len(), 2);
    for flops in per_step.values() {
        assert_eq!(*flops, 2 * forward + inputs);
    }
    let out = json(&["mfu", "--whole", trace.to_str().unwrap()]);
    for (r, step_ns) in rows(&out)
        .iter()
        .filter(|r| r["family"] == "all")
        .zip([2_182_824, 2_108_103])
    {
        assert_eq!(r["step_ns"].as_i64().unwrap(), step_ns);
        assert_eq!(r["peak_tflops"].as_f64().unwrap(), 989.4);
        let want = 100.0 * (2 * forward + inputs) as f64 / (step_ns as f64 * 989.4e3);
        let got = r["mfu_pct"].as_f64().unwrap();
        assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
        // Bytes: every bf16 operand and result of the step's products once (2 bytes each).
        // Forward addmm: bias, input, weight^T, output per layer; backward mm: the gradient,
        // the matrix it meets and the result, for the 3 weight and 2 input gradients.
        let (b, h, d) = (4096_i64, 8192_i64, 2048_i64);
        let forward_elements =
            (h + b * d + d * h + b * h) + (d + b * h + h * d + b * d) + (d + b * d + d * d + b * d);
        let backward_elements = 2 * (b * d + d * d + b * d) // layer 3: input and weight
            + 2 * (b * d + d * h + b * h) // layer 2: input and weight
            + (h * b + b * d + h * d); // layer 1: weight only
        let bytes = 2 * (forward_elements + backward_elements);
        assert_eq!(r["bytes"].as_i64().unwrap(), bytes);
        let intensity = (2 * forward + inputs) as f64 / bytes as f64;
        assert!((r["intensity"].as_f64().unwrap() - intensity).abs() < 1e-9 * intensity);
        assert_eq!(r["bound"], "compute", "{intensity} FLOP/byte");
    }
}

/// HTA's two real sampled ranks: GEMM FLOPs per step equal tests/gemm_flops.py's count from
/// the same JSON (the innermost matrix product around each cuBLAS/CUTLASS launch, once).
#[test]
fn hta_s_real_ranks_count_what_python_counts() {
    for rank in ["0", "1"] {
        let Some(trace) = real(&format!("kineto/hta_sampled_rank-{rank}.json.gz")) else {
            return;
        };
        let Some(python) = python_count(&trace) else {
            return;
        };
        let ours: Vec<i64> = gemm_flops(&trace).into_values().collect();
        assert_eq!(ours, python, "rank {rank}");
        assert!(ours.iter().all(|&f| f > 700_000_000_000));
    }
}

/// tests/gemm_flops.py's count of a torch.profiler trace, per step.
fn python_count(trace: &Path) -> Option<Vec<i64>> {
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        skipped("python3 is not installed");
        return None;
    }
    let script = crate::util::root().join("tests/gemm_flops.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// synth's torch.profiler traces carry `aten::mm` with the shapes of each GEMM: GEMM FLOPs per
/// step equal what the JSON's shapes give (Python's count), and the GEMMs' MFU is them over
/// the `ProfilerStep` range's recorded length at the synthetic H100's TF32 peak (494.7), to
/// 1e-9.
#[test]
fn synth_shapes_give_the_flops_the_json_says() {
    let dir =
        crate::util::synth("--preset ddp --nodes 1 --gpus-per-node 2 --steps 2 --format kineto");
    let path = dir.path().to_str().unwrap();
    let out = json(&["mfu", "--whole", path]);
    for rank in [0, 1] {
        let trace = dir.path().join(format!("rank{rank}.json"));
        let Some(python) = python_count(&trace) else {
            return;
        };
        let ours: Vec<i64> = rows(&out)
            .iter()
            .filter(|r| r["rank"] == rank && r["family"] == "gemm_fp32_tf32")
            .map(|r| r["flops"].as_i64().unwrap())
            .collect();
        assert_eq!(ours, python, "rank {rank}");
        let text = std::fs::read_to_string(&trace).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let steps: Vec<i64> = doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| {
                e["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("ProfilerStep#"))
            })
            .map(|e| (e["dur"].as_f64().unwrap() * 1000.0).round() as i64)
            .collect();
        let gemms = rows(&out)
            .iter()
            .filter(|r| r["rank"] == rank && r["family"] == "gemm_fp32_tf32");
        for ((r, step_ns), flops) in gemms.zip(&steps).zip(&python) {
            assert_eq!(r["step_ns"].as_i64().unwrap(), *step_ns);
            let want = 100.0 * *flops as f64 / (*step_ns as f64 * 494.7e3);
            let got = r["mfu_pct"].as_f64().unwrap();
            assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
        }
    }
}

/// Without shapes there are no FLOPs: a synth nsys export (no operator shapes) is an empty
/// result, exit 1, saying what records them; `--peak-tflops` replaces the table's peak.
#[test]
fn no_shapes_no_flops_and_a_given_peak_replaces_the_table() {
    let dir = crate::util::synth("--preset ddp --nodes 1 --gpus-per-node 1");
    let out = nsys_lens(&["mfu", "--whole", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", texts(&out).1);
    assert!(
        texts(&out).1.contains("record_shapes=True"),
        "{}",
        texts(&out).1
    );
    let Some(trace) = real("gpu/torch_mlp_eager_shapes_h200.json.gz") else {
        return;
    };
    let out = json(&[
        "mfu",
        "--whole",
        "--peak-tflops",
        "500",
        trace.to_str().unwrap(),
    ]);
    assert!(
        rows(&out)
            .iter()
            .all(|r| r["peak_tflops"].as_f64() == Some(500.0))
    );
}

/// `compare` gives each run's MFU (the mean over ranks and steps of `mfu`'s `all` rows), so a
/// nightly gate can say `mfu<-3pp`: a run whose rank 1 is 50 % slower loses more than 3 points.
#[test]
fn compare_gates_on_mfu() {
    let run = "--preset ddp --nodes 1 --gpus-per-node 2 --steps 2 --format kineto";
    let (a, b) = (
        crate::util::synth(run),
        crate::util::synth(&format!("{run} --slow-rank 1:1.5")),
    );
    let (a, b) = (a.path().to_str().unwrap(), b.path().to_str().unwrap());
    let steps = json(&["mfu", "--whole", a]);
    let all: Vec<f64> = rows(&steps)
        .iter()
        .filter(|r| r["family"] == "all")
        .map(|r| r["mfu_pct"].as_f64().unwrap())
        .collect();
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    let args = [
        "compare",
        "--whole",
        "-q",
        "--format",
        "json",
        "--fail-if",
        "mfu<-3pp",
        a,
        "--",
        b,
    ];
    let out = nsys_lens(&args);
    assert_eq!(out.status.code(), Some(1), "{}", texts(&out).1);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = rows(&doc)
        .iter()
        .find(|r| r["metric"] == "mfu_pct")
        .unwrap();
    assert!(
        (row["a"].as_f64().unwrap() - mean).abs() < 1e-9,
        "{row} vs {mean}"
    );
    assert_eq!(doc["checks"][0]["failed"], true);
}

/// The report (over the whole capture) shows each rank's FLOPs per step and its MFU, the mean
/// of `mfu`'s `all` rows.
#[test]
fn the_report_shows_mfu_per_rank() {
    let Some(trace) = real("gpu/torch_mlp_eager_shapes_h200.json.gz") else {
        return;
    };
    let out = json(&["mfu", "--whole", trace.to_str().unwrap()]);
    let all: Vec<f64> = rows(&out)
        .iter()
        .filter(|r| r["family"] == "all")
        .map(|r| r["mfu_pct"].as_f64().unwrap())
        .collect();
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let args = [
        "report",
        "--whole",
        "-q",
        trace.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ];
    let made = nsys_lens(&args);
    assert!(made.status.success(), "{}", texts(&made).1);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<h3>MFU</h3>"));
    assert!(html.contains(&format!("<td>{mean:.1}%</td>")), "{mean}");
    assert!(html.contains("<td>7.903e11</td>"));
    // Per family: its FLOPs over the steps' time at bf16's peak, and the roofline's bound
    // (its intensity, from `mfu`, against the H200's ridge point, 989.4 / 4.8 FLOP/byte).
    let gemm: Vec<&serde_json::Value> = rows(&out)
        .iter()
        .filter(|r| r["family"] == "gemm_bf16_fp16")
        .collect();
    let sum = |f: &str| gemm.iter().map(|r| r[f].as_f64().unwrap()).sum::<f64>();
    let mfu = 100.0 * sum("flops") / (sum("step_ns") * 989.4e3);
    let intensity = gemm[0]["intensity"].as_f64().unwrap();
    let bound = if intensity < 989.4 / 4.8 {
        "memory"
    } else {
        "compute"
    };
    let cells = format!("<td>{mfu:.1}%</td><td class=\"l\">{bound}</td>");
    assert!(html.contains(&cells), "{cells}");
}

/// The truth of a synth run: per (rank, correlation id), the FLOPs of each GEMM's and attention
/// kernel's operator; per (rank, step), its time and the FLOPs of the kernels launched in it.
struct FlopsTruth {
    kernels: BTreeMap<(u64, u64), i64>,
    steps: BTreeMap<(u64, u64), (i64, i64)>,
}

fn flops_truth(dir: &Path) -> FlopsTruth {
    let truth = crate::util::truth(dir);
    let key = |v: &serde_json::Value, second: &str| {
        (v["rank"].as_u64().unwrap(), v[second].as_u64().unwrap())
    };
    let field = |v: &serde_json::Value, f: &str| v[f].as_i64().unwrap();
    let list = |name: &str| truth[name].as_array().unwrap().clone();
    FlopsTruth {
        kernels: list("operators")
            .iter()
            .map(|g| (key(g, "correlation"), field(g, "flops")))
            .collect(),
        steps: list("steps")
            .iter()
            .map(|s| (key(s, "step"), (field(s, "step_ns"), field(s, "flops"))))
            .collect(),
    }
}

/// synth writes the shapes of each GEMM's `aten::mm` and each FlashAttention kernel's SDPA
/// operator in both formats (torch.profiler's `record_shapes`, and PyTorch's shape NVTX under
/// nsys with `--shape-nvtx`), from the work it scheduled, not from the kernel's faulted time:
/// FLOPs per kernel equal truth.json's exactly, on a run whose rank 1 computes 1.3× slower;
/// per rank and step, FLOPs equal truth's and MFU is them over truth's step time at the
/// H100's TF32 peak (494.7, the GEMMs' precision), to 1e-9.
#[test]
fn synth_flops_per_kernel_and_mfu_per_step_equal_truth_in_both_formats() {
    use nsys_lens::classify::{Activity, flops::LaunchFlops, ranks};
    let run = "--preset ddp --nodes 1 --gpus-per-node 2 --steps 2 --slow-rank 1:1.3";
    for format in ["--shape-nvtx", "--format kineto"] {
        let dir = crate::util::synth(&format!("{run} {format}"));
        let truth = flops_truth(dir.path());
        let cache = tempfile::tempdir().unwrap();
        let inputs = nsys_lens::load::Inputs {
            export_dir: Some(cache.path().to_path_buf()),
            ..nsys_lens::load::Inputs::new(vec![dir.path().to_path_buf()])
        };
        let (timeline, _) = inputs.load().unwrap();
        let activity = Activity::new(&timeline);
        let mut seen = 0;
        for rank in ranks::discover(&activity).unwrap() {
            let launched = LaunchFlops::new(&activity, rank.process);
            for k in activity.kernels(rank.process) {
                let want = truth
                    .kernels
                    .get(&(u64::from(rank.rank), u64::from(k.correlation)));
                let got = launched.of(k.correlation).map(|(_, w)| w.flops as i64);
                assert_eq!(got, want.copied(), "{format}: rank {}", rank.rank);
                seen += usize::from(want.is_some());
            }
        }
        assert_eq!(
            seen,
            truth.kernels.len(),
            "{format}: every operator of truth.json seen"
        );
        // Per rank and step: truth's FLOPs, and MFU = them over truth's step time.
        let out = json(&["mfu", "--whole", dir.path().to_str().unwrap()]);
        let all: Vec<&serde_json::Value> =
            rows(&out).iter().filter(|r| r["family"] == "all").collect();
        assert_eq!(all.len(), truth.steps.len(), "{format}");
        for r in all {
            let key = (r["rank"].as_u64().unwrap(), r["step"].as_u64().unwrap());
            let (step_ns, flops) = truth.steps[&key];
            assert_eq!(r["step_ns"].as_i64().unwrap(), step_ns, "{format} {key:?}");
            assert_eq!(r["flops"].as_i64().unwrap(), flops, "{format} {key:?}");
            let want = 100.0 * flops as f64 / (step_ns as f64 * 494.7e3);
            let got = r["mfu_pct"].as_f64().unwrap();
            assert!(
                (got - want).abs() <= 1e-9 * want,
                "{format} {key:?}: {got} vs {want}"
            );
        }
    }
}

/// Both traces draw the FLOP rate of each rank's kernels in flight (each kernel's FLOPs as
/// `mfu` shares them, over its time): integrated over the capture, Perfetto's `achieved
/// TFLOP/s` (TFLOP/s × ns = 1000 FLOPs) and Paraver's 63100016 (MFLOP/s × ns = FLOPs / 1000)
/// give each rank's FLOPs as `mfu --whole` sums them, to 1e-6; the validators pass. On a synth
/// run with PyTorch's shape NVTX (nsys) and on the real H200 capture (torch.profiler).
#[test]
fn both_traces_draw_the_achieved_flop_rate_that_mfu_counts() {
    let synth = crate::util::synth("--preset ddp --nodes 1 --gpus-per-node 2 --shape-nvtx");
    let mut inputs = vec![synth.path().to_path_buf()];
    inputs.extend(real("gpu/torch_mlp_eager_shapes_h200.json.gz"));
    for input in inputs {
        let path = input.to_str().unwrap();
        let mut flops: BTreeMap<u64, f64> = BTreeMap::new();
        for r in rows(&json(&["mfu", "--whole", path])) {
            if r["family"] == "all" {
                *flops.entry(r["rank"].as_u64().unwrap()).or_default() +=
                    r["flops"].as_f64().unwrap();
            }
        }
        let out = tempfile::tempdir().unwrap();
        let base = out.path().join("run");
        let converted = nsys_lens(&["convert", path, "-o", base.to_str().unwrap(), "-q"]);
        assert!(converted.status.success(), "{}", texts(&converted).1);
        let close = |got: f64, want: f64| (got - want).abs() <= 1e-6 * want;
        let prv = out.path().join("run.prv");
        crate::paraver::pertalde(&prv);
        let paraver = crate::paraver::integrate_type(&crate::paraver::parse(&prv), 63_100_016);
        for (&rank, &want) in &flops {
            // Tasks are ranks + 1, in rank order.
            let got = paraver[&(rank as usize + 1)] as f64 / 1e3;
            assert!(close(got, want), "{path} rank {rank}: {got} vs {want}");
        }
        let Some(summary) = crate::perfetto::check(&out.path().join("run.perfetto-trace")) else {
            continue;
        };
        let counters = summary["counters"].as_object().unwrap();
        for (&rank, &want) in &flops {
            let key = counters.keys().find(|k| {
                k.starts_with(&format!("rank {rank} ")) && k.ends_with("achieved TFLOP/s")
            });
            let samples = counters[key.expect("an achieved counter")]
                .as_array()
                .unwrap();
            let got: f64 = samples
                .windows(2)
                .map(|w| {
                    w[0][1].as_f64().unwrap()
                        * (w[1][0].as_f64().unwrap() - w[0][0].as_f64().unwrap())
                })
                .sum::<f64>()
                * 1e3;
            assert!(close(got, want), "{path} rank {rank}: {got} vs {want}");
        }
    }
}
