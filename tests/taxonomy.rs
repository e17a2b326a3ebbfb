//! The kernel taxonomy on every real capture we have: what falls to `other`, and GEMM and
//! family times against sums computed here from the files themselves (SQL, or the trace's own
//! JSON), not by the library.

use crate::util::{int, json, json_or_empty, real, real_capture, rows};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// Captures whose kernels are the application's own (no library names them): their `other`
/// is these kernels, and only these.
const APPLICATION: &[(&str, &[&str])] = &[
    // Rodinia's Gaussian elimination (rodinia/cuda/gaussian/gaussian.cu).
    (
        "rodinia_gaussian_report5_2022.4.2.sqlite",
        &["Fan1", "Fan2"],
    ),
    // Mordred's GPU hash join (a research database engine).
    (
        "mordred_report1_pre2022.sqlite",
        &["build_GPU2", "probe_group_by_GPU2"],
    ),
    // Trixi.jl's CUDA example kernel.
    ("trixicuda_report1_2023.1.2.sqlite", &["add_arrays_"]),
];

/// Every real nsys export, torch.profiler trace and JAX XSpace under `../shared/real-data`.
fn captures() -> Vec<std::path::PathBuf> {
    let Some(root) = real_capture("") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for dir in ["nsys", "kineto", "gpu"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let trace = name.ends_with(".sqlite")
                || name.ends_with(".xplane.pb")
                || (dir != "nsys" && name.ends_with(".json.gz") && !name.contains("jax"));
            if trace || path.is_dir() {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Per rank: (kernel time, `other` time), from `kernels --whole`.
fn other_shares(path: &Path, cache: &Path) -> BTreeMap<i64, (i64, i64)> {
    let args = ["kernels", "--whole", path.to_str().unwrap()];
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
        .args(args)
        .args(["--format", "json", "-q"])
        .env("NSYS_LENS_CACHE", cache)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{path:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut per_rank: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for row in rows(&v) {
        let (Some(rank), Some(family)) = (row["rank"].as_i64(), row["family"].as_str()) else {
            continue;
        };
        let entry = per_rank.entry(rank).or_default();
        match family {
            "all" => entry.0 = int(&row["time_ns"]),
            "other" => entry.1 = int(&row["time_ns"]),
            _ => {}
        }
    }
    per_rank
}

#[test]
fn other_is_at_most_five_percent_of_every_ranks_kernel_time_on_every_real_capture() {
    let cache = tempfile::tempdir().unwrap();
    let all = captures();
    if all.is_empty() {
        return;
    }
    assert!(all.len() >= 18, "{all:?}");
    for path in all {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if APPLICATION.iter().any(|(file, _)| *file == name) {
            continue;
        }
        for (rank, (kernel, other)) in other_shares(&path, cache.path()) {
            let share = 100.0 * other as f64 / kernel.max(1) as f64;
            assert!(share <= 5.0, "{name} rank {rank}: other is {share:.1}%");
        }
    }
}

/// Every command warns once per rank when `other` passes a tenth of its GPU time, with the
/// share SQL gives: the application's kernels over all kernels, copies and sets.
#[test]
fn every_command_warns_when_unnamed_kernels_dominate() {
    let Some(root) = real_capture("").map(|r| r.join("nsys")) else {
        return;
    };
    for (file, kernels) in APPLICATION {
        let path = root.join(file);
        let db = rusqlite::Connection::open(&path).unwrap();
        let sum = |sql: &str| -> i64 {
            db.query_row(sql, [], |r| r.get::<_, Option<i64>>(0))
                .ok()
                .flatten()
                .unwrap_or(0)
        };
        let names: Vec<String> = kernels.iter().map(|k| format!("'{k}'")).collect();
        let other = sum(&format!(
            "SELECT sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s \
             ON s.id = k.shortName WHERE s.value IN ({})",
            names.join(", ")
        ));
        let all = sum("SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
            + sum("SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
            + sum("SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_MEMSET");
        let share = format!("{:.1}%", 100.0 * other as f64 / all as f64);
        for command in [
            "overlap",
            "streams",
            "kernels",
            "idle",
            "bubbles",
            "collectives",
        ] {
            let v = json_or_empty(&[command, "--whole", path.to_str().unwrap()]);
            let warnings: Vec<&str> = v["notes"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|n| n.as_str().filter(|n| n.contains("no family names")))
                .collect();
            assert_eq!(warnings.len(), 1, "{file} {command}: {warnings:?}");
            assert!(
                warnings[0].starts_with(&format!("warning: rank 0: {share} of kernel time")),
                "{file} {command}: {warnings:?}, SQL says {share}"
            );
        }
    }
}

#[test]
fn application_kernels_are_the_only_other_of_application_captures() {
    let Some(root) = real_capture("").map(|r| r.join("nsys")) else {
        return;
    };
    for (file, kernels) in APPLICATION {
        let path = root.join(file);
        let v = json(&[
            "kernels",
            "--whole",
            "--unclassified",
            path.to_str().unwrap(),
        ]);
        let mut names: Vec<&str> = rows(&v)
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        names.sort();
        names.dedup();
        assert_eq!(names, *kernels, "{file}");
        // Each name's time is its SQL sum.
        let db = rusqlite::Connection::open(&path).unwrap();
        for row in rows(&v) {
            let sum: i64 = db
                .query_row(
                    "SELECT sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k \
                     JOIN StringIds s ON s.id = k.shortName WHERE s.value = ?1",
                    [row["name"].as_str().unwrap()],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(int(&row["time_ns"]), sum, "{file}: {row}");
        }
    }
}

#[test]
fn each_ranks_gemm_time_is_the_sql_sum_of_its_nvjet_kernels() {
    let Some(path) = real("nsysai_mfu_2gpu_before_2026.2.1.sqlite") else {
        return;
    };
    let v = json(&["kernels", "--whole", path.to_str().unwrap()]);
    let db = rusqlite::Connection::open(&path).unwrap();
    let mut checked = 0;
    for row in rows(&v) {
        let (Some(pid), Some(family)) = (row["pid"].as_i64(), row["family"].as_str()) else {
            continue;
        };
        if !family.starts_with("gemm_") {
            continue;
        }
        assert_eq!(
            family, "gemm_unknown",
            "nvjet names do not say the precision"
        );
        let (sum, count): (i64, i64) = db
            .query_row(
                "SELECT sum(k.end - k.start), count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k \
                 JOIN StringIds s ON s.id = k.shortName \
                 WHERE s.value LIKE 'nvjet%' AND (k.globalPid >> 24) & 16777215 = ?1",
                [pid],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(
            (int(&row["time_ns"]), int(&row["kernels"])),
            (sum, count),
            "pid {pid}"
        );
        checked += 1;
    }
    assert_eq!(checked, 2, "both ranks have GEMMs");
}

/// Kernel time by name prefix in a torch.profiler trace, from its own JSON.
fn kineto_kernel_time(path: &Path, prefix: &str) -> (i64, i64) {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut sum = 0.0;
    let mut count = 0;
    for e in v["traceEvents"].as_array().unwrap() {
        let kernel = e["cat"].as_str() == Some("kernel");
        if kernel && e["name"].as_str().unwrap_or("").starts_with(prefix) {
            sum += e["dur"].as_f64().unwrap() * 1000.0;
            count += 1;
        }
    }
    (sum.round() as i64, count)
}

/// The GEMM family of each `nvjet_*` kernel of a torch.profiler trace, from its own JSON: the
/// operator with the kernel's `External id` (the one that launched it), its `Input type`s, the
/// narrowest floating-point one (FP8, then BF16/FP16, then FP32); per family (time ns, count).
fn kineto_gemm_families(path: &Path) -> BTreeMap<String, (i64, i64)> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let types: BTreeMap<i64, Vec<String>> = events
        .iter()
        .filter(|e| e["cat"] == "cpu_op" && e["args"]["Input type"].is_array())
        .map(|e| {
            let types = e["args"]["Input type"].as_array().unwrap();
            let types = types.iter().filter_map(|t| Some(t.as_str()?.to_string()));
            (int(&e["args"]["External id"]), types.collect())
        })
        .collect();
    let mut out: BTreeMap<String, (f64, i64)> = BTreeMap::new();
    for e in events {
        let name = e["name"].as_str().unwrap_or("");
        if e["cat"] != "kernel" || !name.starts_with("nvjet_") {
            continue;
        }
        let inputs = &types[&int(&e["args"]["External id"])];
        let has = |f: &dyn Fn(&str) -> bool| inputs.iter().any(|t| f(t));
        let family = if has(&|t| t.contains("Float8")) {
            "gemm_fp8"
        } else if has(&|t| t == "c10::BFloat16" || t == "c10::Half") {
            "gemm_bf16_fp16"
        } else if has(&|t| t == "float") {
            "gemm_fp32_tf32"
        } else {
            "gemm_unknown"
        };
        let entry = out.entry(family.to_string()).or_default();
        entry.0 += e["dur"].as_f64().unwrap() * 1000.0;
        entry.1 += 1;
    }
    out.into_iter()
        .map(|(f, (t, n))| (f, (t.round() as i64, n)))
        .collect()
}

/// Issue 29: the real H200 torch captures. cuBLASLt's `nvjet_*` names do not say a precision;
/// the operator that launched each one does (`record_shapes=True`): every GEMM family's time
/// and count equal the trace's own External-id linkage. Inductor's reductions are reductions.
#[test]
fn real_h200_torch_captures_give_their_gemm_and_compiled_kernels_families() {
    let Some(gpu) = real_capture("").map(|r| r.join("gpu")) else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    for file in [
        "torch_mlp_eager_shapes_h200.json.gz",
        "torch_mlp_compiled_h200.json.gz",
    ] {
        let path = gpu.join(file);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
            .args(["kernels", "--whole", "--format", "json", "-q"])
            .arg(&path)
            .env("NSYS_LENS_CACHE", cache.path())
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let ours: BTreeMap<String, (i64, i64)> = rows(&v)
            .iter()
            .filter(|r| r["rank"].is_i64() && r["family"].as_str().unwrap().starts_with("gemm_"))
            .map(|r| {
                let family = r["family"].as_str().unwrap().to_string();
                (family, (int(&r["time_ns"]), int(&r["kernels"])))
            })
            .collect();
        let want = kineto_gemm_families(&path);
        assert_eq!(ours, want, "{file}");
        assert!(want.contains_key("gemm_bf16_fp16"), "{file}: {want:?}");
        if file.contains("compiled") {
            let row = rows(&v)
                .iter()
                .find(|r| r["family"] == "reduction" && r["rank"].is_i64())
                .unwrap();
            let (time, _) = kineto_kernel_time(&path, "triton_red_fused_sum");
            assert!(
                int(&row["time_ns"]) >= time,
                "{file}: reduction holds triton_red_*"
            );
        }
    }
}

/// A communication kernel has one name everywhere: its family in `kernels` is its role in
/// `overlap`, with the same kernels and time, on a real capture and on PithTrain's run.
#[test]
fn a_communication_kernels_family_is_its_role() {
    let mut inputs: Vec<Vec<String>> = vec![
        [
            "pithtrain_pp2_ep2/node0.sqlite",
            "pithtrain_pp2_ep2/node1.sqlite",
        ]
        .iter()
        .map(|f| crate::util::fixture(f).to_str().unwrap().to_string())
        .collect(),
    ];
    if let Some(path) = real("nsysai_mfu_2gpu_before_2026.2.1.sqlite") {
        inputs.push(vec![path.to_str().unwrap().to_string()]);
    }
    for files in inputs {
        let files: Vec<&str> = files.iter().map(String::as_str).collect();
        let kernels = json(&[&["kernels"][..], &files].concat());
        let overlap = json(&[&["overlap"][..], &files].concat());
        let mut roles = 0;
        for o in rows(&overlap) {
            let (Some(rank), Some(role)) = (o["rank"].as_i64(), o["role"].as_str()) else {
                continue;
            };
            // `barrier` is what collectives on a compute stream do to it, not a role of their
            // own: those kernels keep their collective as their family.
            if o["stage"] != "all" || role == "all" || role == "barrier" {
                continue;
            }
            let k = rows(&kernels)
                .iter()
                .find(|k| k["rank"].as_i64() == Some(rank) && k["family"] == role)
                .unwrap_or_else(|| panic!("{files:?} rank {rank}: no family {role}"));
            assert_eq!(
                (int(&k["kernels"]), int(&k["time_ns"])),
                (int(&o["kernels"]), int(&o["comm_ns"])),
                "{files:?} rank {rank} {role}"
            );
            roles += 1;
        }
        assert!(roles >= 2, "{files:?}: {roles} roles");
    }
}

/// Every synth preset under every name set: each rank's families in `kernels --whole` (kernel
/// count and time, exact) are the generator's own (truth.json), nothing is `other`, and the
/// exports hold the names of their set.
#[test]
fn synth_runs_under_every_name_set_give_truths_families() {
    let runs = [
        "--preset ddp --mixed-precision",
        "--preset fsdp",
        "--preset megatron",
        "--preset pithtrain",
        "--preset ddp --nccl-on-compute",
    ];
    for names in ["2022", "2026", "rocm"] {
        for run in runs {
            let dir = crate::util::synth(&format!("{run} --steps 2 --names {names}"));
            let truth: serde_json::Value = crate::util::truth(dir.path());
            let v = json(&["kernels", "--whole", dir.path().to_str().unwrap()]);
            for rank in truth["ranks"].as_array().unwrap() {
                let r = int(&rank["rank"]);
                let mut got: BTreeMap<String, (i64, i64)> = BTreeMap::new();
                for row in rows(&v)
                    .iter()
                    .filter(|row| row["rank"].as_i64() == Some(r))
                {
                    let family = row["family"].as_str().unwrap();
                    if !["all", "memcpy", "memset"].contains(&family) {
                        got.insert(family.into(), (int(&row["kernels"]), int(&row["time_ns"])));
                    }
                }
                let want: BTreeMap<String, (i64, i64)> = rank["families"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(f, t)| (f.clone(), (int(&t["kernels"]), int(&t["time_ns"]))))
                    .collect();
                assert_eq!(got, want, "{run} --names {names}, rank {r}");
            }
            let node0 = dir.path().join("node0.sqlite");
            let db = rusqlite::Connection::open(&node0).unwrap();
            let marker = match names {
                "2022" => "sm%_xmma_gemm%",
                "2026" => "triton_%",
                _ => "Cijk_%",
            };
            let found: i64 = db
                .query_row(
                    "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s \
                     ON s.id = k.shortName WHERE s.value LIKE ?1",
                    [marker],
                    |r| r.get(0),
                )
                .unwrap();
            let fp32 = names == "2022" && !run.contains("mixed") && !run.contains("pithtrain");
            assert!(
                found > 0 || fp32,
                "{run} --names {names}: no {marker} kernel"
            );
        }
    }
}
