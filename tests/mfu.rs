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

/// synth's torch.profiler traces carry `aten::mm` with the shapes of each GEMM: FLOPs per
/// step equal what the JSON's shapes give (Python's count), and MFU is them over the
/// `ProfilerStep` range's recorded length at the synthetic H100's TF32 peak (494.7), to 1e-9.
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
        let all = rows(&out)
            .iter()
            .filter(|r| r["rank"] == rank && r["family"] == "all");
        for ((r, step_ns), flops) in all.zip(&steps).zip(&python) {
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
}
