//! JAX/XLA `XSpace` traces as inputs: a small trace built here from the prost messages (a
//! host thread launching three kernels inside a step marker, a compute and an NCCL stream, a
//! copy, a derived `XLA Ops` line) and what every command reads from it.

use crate::util::{json_in as json, texts};
use nsys_lens::input::xplane::protos::{
    XEvent, XEventMetadata, XLine, XPlane, XSpace, XStat, XStatMetadata, x_event, x_stat,
};
use prost::Message;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// Line start on the host's clock, ns since the epoch (2025-01-01).
const T0: i64 = 1_735_689_600_000_000_000;

/// Stat metadata ids.
const CORRELATION: i64 = 1;
const KERNEL_DETAILS: i64 = 2;
const MEMCPY_DETAILS: i64 = 3;

fn stat_metadata() -> HashMap<i64, XStatMetadata> {
    [
        (CORRELATION, "correlation_id"),
        (KERNEL_DETAILS, "kernel_details"),
        (MEMCPY_DETAILS, "memcpy_details"),
    ]
    .into_iter()
    .map(|(id, name)| {
        let m = XStatMetadata {
            id,
            name: name.into(),
            ..XStatMetadata::default()
        };
        (id, m)
    })
    .collect()
}

fn int_stat(id: i64, v: u64) -> XStat {
    XStat {
        metadata_id: id,
        value: Some(x_stat::Value::Uint64Value(v)),
    }
}

fn str_stat(id: i64, v: &str) -> XStat {
    XStat {
        metadata_id: id,
        value: Some(x_stat::Value::StrValue(v.into())),
    }
}

/// An event at `offset_ps` from its line's start lasting `duration_ps`.
fn event(metadata_id: i64, offset_ps: i64, duration_ps: i64, stats: Vec<XStat>) -> XEvent {
    XEvent {
        metadata_id,
        data: Some(x_event::Data::OffsetPs(offset_ps)),
        duration_ps,
        stats,
    }
}

fn names(names: &[(i64, &str)]) -> HashMap<i64, XEventMetadata> {
    names
        .iter()
        .map(|&(id, name)| {
            let m = XEventMetadata {
                id,
                name: name.into(),
                ..XEventMetadata::default()
            };
            (id, m)
        })
        .collect()
}

/// The trace: one step, three launches, two kernels on stream 7, one AllReduce on stream 13,
/// one device-to-host copy on stream 7; and a TPU plane, which is not read.
fn space() -> XSpace {
    let host = XPlane {
        id: 0,
        name: "/host:CPU".into(),
        lines: vec![XLine {
            id: 4242,
            name: "python3".into(),
            timestamp_ns: T0,
            events: vec![
                event(1, 0, 1_000_000_000, vec![]),
                event(2, 10_000_000, 5_000_000, vec![int_stat(CORRELATION, 1)]),
                event(2, 20_000_000, 5_000_000, vec![int_stat(CORRELATION, 2)]),
                event(2, 30_000_000, 5_000_000, vec![int_stat(CORRELATION, 3)]),
            ],
            ..XLine::default()
        }],
        event_metadata: names(&[(1, "train_step 1"), (2, "cuLaunchKernel")]),
        stat_metadata: stat_metadata(),
        ..XPlane::default()
    };
    let details = "regs:64 static_shared:0 dynamic_shared:1024 grid:132,1,1 block:256,1,1";
    let kernel = |meta, offset, duration, correlation| {
        let stats = vec![
            int_stat(CORRELATION, correlation),
            str_stat(KERNEL_DETAILS, details),
        ];
        event(meta, offset, duration, stats)
    };
    let device = XPlane {
        id: 1,
        name: "/device:GPU:0".into(),
        lines: vec![
            XLine {
                id: 7,
                name: "Stream #7(Compute)".into(),
                timestamp_ns: T0,
                events: vec![
                    kernel(1, 16_000_000, 200_000_499, 1),
                    kernel(1, 300_000_000, 100_000_000, 3),
                    event(
                        3,
                        500_000_000,
                        1_000_000,
                        vec![str_stat(
                            MEMCPY_DETAILS,
                            "kind_src:device kind_dst:host size:4096",
                        )],
                    ),
                ],
                ..XLine::default()
            },
            XLine {
                id: 13,
                name: "Stream #13(Compute)".into(),
                timestamp_ns: T0,
                events: vec![kernel(2, 150_000_000, 100_000_000, 2)],
                ..XLine::default()
            },
            XLine {
                id: 9_999,
                name: "XLA Ops".into(),
                timestamp_ns: T0,
                events: vec![event(4, 16_000_000, 200_000_000, vec![])],
                ..XLine::default()
            },
        ],
        event_metadata: names(&[
            (1, "sm90_xmma_gemm_bf16bf16_bf16f32"),
            (
                2,
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            ),
            (3, "MemcpyD2H"),
            (4, "dot.12"),
        ]),
        stat_metadata: stat_metadata(),
        ..XPlane::default()
    };
    let tpu = XPlane {
        id: 2,
        name: "/device:TPU:0".into(),
        lines: vec![XLine {
            timestamp_ns: T0,
            events: vec![event(1, 0, 1_000, vec![])],
            ..XLine::default()
        }],
        ..XPlane::default()
    };
    XSpace {
        planes: vec![host, device, tpu],
        hostnames: vec!["tpu-less-host".into()],
        ..XSpace::default()
    }
}

#[test]
fn an_xspace_reads_like_an_export() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host0.xplane.pb");
    std::fs::write(&path, space().encode_to_vec()).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let p = path.to_str().unwrap();
    let info = json(cache.path(), &["info", "--format", "json", p]);
    let row = &info["rows"][0];
    assert_eq!(row["format"], "xplane");
    assert_eq!(row["host"], "tpu-less-host");
    let rows = &row["rows"];
    assert_eq!(
        (
            &rows["kernels"],
            &rows["memcpy"],
            &rows["cuda_api"],
            &rows["nvtx"]
        ),
        (&3.into(), &1.into(), &3.into(), &1.into())
    );
    assert_eq!(
        row["warnings"],
        serde_json::json!([
            "1 trace event(s) of kind plane /device:TPU:0 skipped (not modelled by nsys-lens)"
        ])
    );
    // The step marker opens the trace: the session starts there.
    assert_eq!(row["session_start_utc_ns"], T0);
    // The last event is the step marker's end, 1 ms in; the first kernel ends at
    // 16 µs + 200,000,499 ps = 216,000,499 ps, rounded once to 216,000 ns.
    assert_eq!(row["end_ns"], 1_000_000);
    let kernels = json(cache.path(), &["kernels", "--whole", "--format", "json", p]);
    let family = |name: &str| {
        kernels["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["family"] == name)
            .unwrap_or_else(|| panic!("no {name} row in {kernels}"))
            .clone()
    };
    let gemm = family("gemm_bf16_fp16");
    assert_eq!(
        (&gemm["kernels"], &gemm["time_ns"]),
        (&2.into(), &300_000.into())
    );
    // MaxText's "step - total kernel time": 1 ms - (300 + 100 + 1) µs.
    let all = family("all");
    assert_eq!(
        (
            &all["step_ns"],
            &all["kernel_ns"],
            &all["step_minus_kernel_ns"]
        ),
        (&1_000_000.into(), &401_000.into(), &599_000.into())
    );
    let streams = json(cache.path(), &["streams", "--whole", "--format", "json", p]);
    let roles: Vec<(u64, &str)> = streams["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["stream"].as_u64().unwrap(), r["role"].as_str().unwrap()))
        .collect();
    assert_eq!(roles, [(7, "compute"), (13, "nccl:AllReduce")]);
    // The AllReduce [150, 250) µs meets the gemm [16, 216) µs for 66 µs.
    let overlap = json(cache.path(), &["overlap", "--whole", "--format", "json", p]);
    let all = &overlap["rows"][0];
    assert_eq!(
        (&all["comm_ns"], &all["hidden_ns"]),
        (&100_000.into(), &66_000.into())
    );
}

#[test]
fn a_damaged_xspace_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.xplane.pb");
    let bytes = space().encode_to_vec();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
        .args(["info", path.to_str().unwrap()])
        .env("NSYS_LENS_CACHE", cache.path())
        .output()
        .unwrap();
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cut.xplane.pb") && stderr.contains("not a valid XSpace"),
        "{stderr}"
    );
}

/// Stat metadata of JAX's step annotations.
const STEP_NUM: i64 = 4;

/// JAX's `StepTraceAnnotation("train", step_num=N)` twice, each dispatching a kernel, and an
/// XLA `Memset` with no details stat.
fn annotated_steps() -> XSpace {
    let mut stats = stat_metadata();
    stats.insert(
        STEP_NUM,
        XStatMetadata {
            id: STEP_NUM,
            name: "step_num".into(),
            ..XStatMetadata::default()
        },
    );
    let host = XPlane {
        name: "/host:CPU".into(),
        lines: vec![XLine {
            id: 7,
            timestamp_ns: T0,
            events: vec![
                event(1, 0, 100_000_000, vec![int_stat(STEP_NUM, 0)]),
                event(1, 200_000_000, 100_000_000, vec![int_stat(STEP_NUM, 1)]),
            ],
            ..XLine::default()
        }],
        event_metadata: names(&[(1, "train")]),
        stat_metadata: stats.clone(),
        ..XPlane::default()
    };
    let device = XPlane {
        name: "/device:GPU:0".into(),
        lines: vec![XLine {
            id: 14,
            name: "Stream #14(Compute)".into(),
            timestamp_ns: T0,
            events: vec![
                event(1, 10_000_000, 20_000_000, vec![]),
                event(2, 40_000_000, 1_000_000, vec![]),
                event(1, 210_000_000, 20_000_000, vec![]),
            ],
            ..XLine::default()
        }],
        event_metadata: names(&[(1, "loop_add_fusion"), (2, "Memset")]),
        stat_metadata: stats,
        ..XPlane::default()
    };
    XSpace {
        planes: vec![host, device],
        ..XSpace::default()
    }
}

#[test]
fn step_annotations_are_steps_and_memsets_without_details_are_memsets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("steps.xplane.pb");
    std::fs::write(&path, annotated_steps().encode_to_vec()).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let p = path.to_str().unwrap();
    let kernels = json(cache.path(), &["kernels", "--format", "json", p]);
    let anchor = &kernels["windows"][0]["name"];
    assert!(anchor == "train#0" || anchor == "train#1", "{kernels}");
    let whole = json(cache.path(), &["kernels", "--whole", "--format", "json", p]);
    let family = |name: &str| {
        whole["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["family"] == name)
            .unwrap_or_else(|| panic!("no {name} row in {whole}"))
            .clone()
    };
    // Two steps: from the first's start to the second's end, 300 µs, so 150 µs a step.
    let all = family("all");
    assert_eq!(all["step_ns"], 150_000, "{whole}");
    assert_eq!(
        (&family("memset")["kernels"], &family("memset")["time_ns"]),
        (&1.into(), &1_000.into())
    );
    assert_eq!(family("elementwise")["kernels"], 2);
}

/// The three files of one real JAX run (the `XSpace`, xprof's Chrome JSON and the Perfetto
/// JSON) read alike: 3 steps found without --anchor, every kernel, the same families.
#[test]
fn the_three_files_of_a_real_jax_run_read_alike() {
    let Some(gpu) = crate::util::real("").map(|n| n.parent().unwrap().join("gpu")) else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let mut families = Vec::new();
    for file in ["xplane.pb", "trace.json.gz", "perfetto_trace.json.gz"] {
        let path = gpu.join(format!("jax_mlp_3steps_h200.{file}"));
        let p = path.to_str().unwrap();
        let info = json(cache.path(), &["info", "--format", "json", p]);
        assert_eq!(info["rows"][0]["rows"]["kernels"], 42, "{file}");
        let table = Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
            .args(["kernels", "--whole", "-q", p])
            .env("NSYS_LENS_CACHE", cache.path())
            .output()
            .unwrap();
        let table = texts(&table).0;
        assert!(table.contains("steps rank 0: 3 "), "{file}: {table}");
        let out = json(cache.path(), &["kernels", "--whole", "--format", "json", p]);
        let mut rows: Vec<(String, i64, i64)> = out["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let family = r["family"].as_str().unwrap().to_string();
                (
                    family,
                    r["kernels"].as_i64().unwrap(),
                    r["time_ns"].as_i64().unwrap(),
                )
            })
            .collect();
        rows.sort();
        families.push(rows);
    }
    assert_eq!(families[0], families[1]);
    assert_eq!(families[0], families[2]);
    // Every GPU event of the JSON, counted here from the file itself.
    let mut text = String::new();
    let file = std::fs::File::open(gpu.join("jax_mlp_3steps_h200.trace.json.gz")).unwrap();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(file), &mut text).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let gpu_events = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == 1)
        .count();
    assert_eq!(gpu_events, 42);
}

/// A trace with nothing to draw (two empty ranges at its start: found by the fuzz harness,
/// seed 57) is refused by `convert` in one line, and no file is written.
#[test]
fn a_trace_with_nothing_to_draw_is_refused_by_convert() {
    let host = XPlane {
        name: "/host:CPU".into(),
        lines: vec![XLine {
            id: 1,
            timestamp_ns: T0,
            events: vec![event(1, 0, 0, vec![]), event(1, 0, 0, vec![])],
            ..XLine::default()
        }],
        event_metadata: names(&[(1, "train")]),
        ..XPlane::default()
    };
    let space = XSpace {
        planes: vec![host],
        ..XSpace::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.xplane.pb");
    std::fs::write(&path, space.encode_to_vec()).unwrap();
    let out = dir.path().join("out");
    let done = Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
        .args([
            "convert",
            "-q",
            "-o",
            out.to_str().unwrap(),
            path.to_str().unwrap(),
        ])
        .env("NSYS_LENS_CACHE", dir.path().join("cache"))
        .output()
        .unwrap();
    let (_, err) = texts(&done);
    assert_eq!(done.status.code(), Some(2), "{err}");
    assert!(err.contains("nothing to export"), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with("out"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The events of xprof's Chrome JSON, parsed here.
fn xprof_events(path: &Path) -> Vec<Value> {
    let mut text = String::new();
    let file = std::fs::File::open(path).unwrap();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(file), &mut text).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["traceEvents"].as_array().unwrap().clone()
}

/// Start and end (ns) of an xprof JSON event.
fn xprof_span(e: &Value) -> (i64, i64) {
    let ns = |key: &str| (e[key].as_f64().unwrap_or(0.0) * 1000.0).round() as i64;
    (ns("ts"), ns("ts") + ns("dur"))
}

/// JAX step `number`'s range, and its GPU projection: the GPU events whose correlation id is
/// a host event's inside the range, first start to last end (ns, the JSON's clock).
fn xprof_step(events: &[Value], number: u32) -> ((i64, i64), (i64, i64)) {
    let step = events
        .iter()
        .find(|e| {
            e["name"] == "step" && e["args"]["step_num"].as_str() == Some(&number.to_string())
        })
        .expect("the step");
    let (s, e) = xprof_span(step);
    let launched: Vec<&Value> = events
        .iter()
        .filter(|x| x["pid"] != 1 && x["args"]["correlation_id"].is_string())
        .filter(|x| (s..=e).contains(&xprof_span(x).0))
        .map(|x| &x["args"]["correlation_id"])
        .collect();
    let projected: Vec<(i64, i64)> = events
        .iter()
        .filter(|x| x["ph"] == "X" && x["pid"] == 1)
        .filter(|x| launched.contains(&&x["args"]["correlation_id"]))
        .map(xprof_span)
        .collect();
    let gpu_start = projected.iter().map(|p| p.0).min().unwrap();
    let gpu_end = projected.iter().map(|p| p.1).max().unwrap();
    ((s, e), (gpu_start, gpu_end))
}

/// Issue 29: over the whole capture too, a JAX step that only dispatches (holds less than half
/// of its GPU projection) is measured on the GPU, whatever the file: `bubbles --whole` gives
/// each step the length of its projection from xprof's JSON, step 0 (which compiles, and holds
/// its work) its range; `kernels --whole` counts every GPU event of the JSON.
#[test]
fn every_jax_step_that_only_dispatches_is_measured_on_the_gpu() {
    let Some(gpu) = crate::util::real("").map(|n| n.parent().unwrap().join("gpu")) else {
        return;
    };
    let events = xprof_events(&gpu.join("jax_mlp_3steps_h200.trace.json.gz"));
    let expected: Vec<i64> = (0..3)
        .map(|k| {
            let ((s, e), (gs, ge)) = xprof_step(&events, k);
            let held = e.min(ge) - s.max(gs);
            if 2 * held.max(0) < ge - gs {
                ge - gs
            } else {
                e - s
            }
        })
        .collect();
    assert!(
        expected[0] > 2 * expected[1],
        "step 0 compiles: {expected:?}"
    );
    let gpu_events = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == 1)
        .count();
    let cache = tempfile::tempdir().unwrap();
    for file in ["xplane.pb", "trace.json.gz", "perfetto_trace.json.gz"] {
        let path = gpu.join(format!("jax_mlp_3steps_h200.{file}"));
        let p = path.to_str().unwrap();
        let bubbles = json(cache.path(), &["bubbles", "--whole", "--format", "json", p]);
        let measured: Vec<i64> = (bubbles["rows"].as_array().unwrap().iter())
            .map(|r| r["step_ns"].as_i64().unwrap())
            .collect();
        assert_eq!(measured, expected, "{file}");
        let kernels = json(cache.path(), &["kernels", "--whole", "--format", "json", p]);
        let all = (kernels["rows"].as_array().unwrap().iter())
            .find(|r| r["family"] == "all")
            .unwrap();
        assert_eq!(all["kernels"], gpu_events, "{file}");
    }
}

/// Issue 29: JAX's step annotation returns once the jitted step is queued, so the step's range
/// holds its dispatch, not its GPU work. The default window is then the median step's GPU
/// projection: from xprof's own JSON, the GPU events whose correlation id is a launch inside
/// `step` number 1, first start to last end, and the 14 GPU operations that run in it; `kernels`
/// and `convert --steady` take that window.
#[test]
fn a_jax_step_that_only_dispatches_is_measured_on_the_gpu() {
    let Some(gpu) = crate::util::real("").map(|n| n.parent().unwrap().join("gpu")) else {
        return;
    };
    let path = gpu.join("jax_mlp_3steps_h200.trace.json.gz");
    let events = xprof_events(&path);
    let on_gpu = || events.iter().filter(|x| x["ph"] == "X" && x["pid"] == 1);
    let ((s, e), (gpu_start, gpu_end)) = xprof_step(&events, 1);
    assert!(
        e < gpu_end && 2 * (e - gpu_start) < gpu_end - gpu_start,
        "dispatch only"
    );
    let inside = on_gpu()
        .map(xprof_span)
        .filter(|&(a, b)| a < gpu_end && b > gpu_start)
        .count();
    assert_eq!(inside, 14);
    // Times relative to the step's start: the reader counts from the trace's first event.
    let cache = tempfile::tempdir().unwrap();
    let p = path.to_str().unwrap();
    let table = json(cache.path(), &["window", "--format", "json", p]);
    let cpu_start = table["rows"][0]["start"].as_i64().unwrap();
    let out = json(cache.path(), &["kernels", "--format", "json", p]);
    let window = &out["windows"][0];
    let relative = |key: &str| window[key].as_i64().unwrap() - cpu_start;
    assert_eq!(
        (relative("start"), relative("end")),
        (gpu_start - s, gpu_end - s)
    );
    let all = out["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["family"] == "all")
        .unwrap();
    assert_eq!(all["kernels"], inside);
    // XLA's module range (a host TraceMe) anchors the same step.
    let args = [
        "kernels",
        "--anchor",
        "XLA GPU module",
        "--format",
        "json",
        p,
    ];
    let by_module = json(cache.path(), &args);
    assert_eq!(by_module["windows"][0]["start"], window["start"]);
    assert_eq!(by_module["windows"][0]["name"], "jit_update:XLA GPU module");
    // `convert --steady` draws the same window: the 14 operations, in both traces.
    let base = cache.path().join("steady");
    let converted = Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
        .args(["convert", "--steady", p, "-o", base.to_str().unwrap()])
        .env("NSYS_LENS_CACHE", cache.path())
        .output()
        .unwrap();
    let (_, stderr) = texts(&converted);
    assert!(converted.status.success(), "{stderr}");
    let wrote: Vec<&str> = stderr.lines().filter(|l| l.starts_with("wrote")).collect();
    assert_eq!(wrote.len(), 2, "{stderr}");
    for line in wrote {
        assert!(line.contains(&format!(" {inside} kernels")), "{line}");
    }
}

/// Issue 30: XLA runs its collectives as NCCL kernels; across JAX hosts (one XSpace each, no
/// stream id in common needed) they are matched as an nsys export's are, by timing (an
/// XSpace records no communicator). Host 1's all-reduce starts 7 µs after host 0's, on another
/// stream: one instance of both ranks, host 1 last, skew 7 µs.
#[test]
fn xla_collectives_are_matched_across_jax_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for (host, shift_ns, stream) in [("jax-host-0", 0, 13), ("jax-host-1", 7_000, 21)] {
        let mut space = space();
        space.hostnames = vec![host.into()];
        space.planes.retain(|p| p.name != "/device:TPU:0");
        let device = &mut space.planes[1];
        let line = device.lines.iter_mut().find(|l| l.id == 13).unwrap();
        line.name = format!("Stream #{stream}(Compute)");
        line.id = stream;
        line.events[0].data = Some(x_event::Data::OffsetPs(150_000_000 + 1_000 * shift_ns));
        let path = dir.path().join(format!("{host}.xplane.pb"));
        std::fs::write(&path, space.encode_to_vec()).unwrap();
        paths.push(path.to_str().unwrap().to_string());
    }
    let cache = tempfile::tempdir().unwrap();
    let args = [
        "collectives",
        "--whole",
        "--format",
        "json",
        &paths[0],
        &paths[1],
    ];
    let out = json(cache.path(), &args);
    let rows = out["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{out}");
    let row = &rows[0];
    assert_eq!(row["op"], "nccl:AllReduce", "{row}");
    assert_eq!(row["members"], serde_json::json!([0, 1]), "{row}");
    assert_eq!(row["matched_by"], "timing", "{row}");
    assert_eq!(row["skew_ns"], 7_000, "{row}");
    assert_eq!(row["last_rank"], 1, "{row}");
}
