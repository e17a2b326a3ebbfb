//! Copies between GPUs (memcpy kind peer-to-peer: `cudaMemcpyPeerAsync`, CUDA IPC) are
//! communication, as a transfer kernel is: `p2p` unless a range around the launch names a
//! purpose, on their stream's role, in `overlap`, `kernels`, the critical path and both traces.
//! Every number here is worked out by hand from the scenario below.

use crate::scenario::{PID, Scenario};
use crate::util::{convert_to, int, json, json_in, nsys_lens, rows};
use serde_json::Value;
use std::path::Path;

/// One rank: a GEMM on stream 7 over [1000, 5000]; a peer copy on stream 9 over [4000, 6000]
/// (half of it under the GEMM); a host-to-device copy on stream 11; a peer copy on the compute
/// stream 7 over [6000, 6500], launched inside a pipeline range.
fn scenario() -> (tempfile::TempDir, std::path::PathBuf) {
    let main = (PID, PID);
    let gpu = |stream| (PID, 0, stream);
    Scenario::new()
        .kernel(
            gpu(7),
            (1000, 5000),
            "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN",
            1,
        )
        .launch(main, 900, 1)
        .copy(gpu(9), (4000, 6000), (10, 8 << 20), 2)
        .launch(main, 950, 2)
        .copy(gpu(11), (2000, 3000), (1, 4096), 3)
        .launch(main, 960, 3)
        .range(main, 965, 975, "p2p_communication.send_forward") // Megatron-LM: pp_p2p
        .copy(gpu(7), (6000, 6500), (10, 1 << 20), 4)
        .launch(main, 970, 4)
        .write()
}

/// The rows of `command --whole` on `report` whose `key` field equals `value`.
fn rows_where(command: &str, report: &Path, key: &str, value: &str) -> Vec<Value> {
    let v = json(&[command, "--whole", report.to_str().unwrap()]);
    rows(&v)
        .iter()
        .filter(|r| r[key] == value)
        .cloned()
        .collect()
}

#[test]
fn a_peer_copy_is_communication_on_its_stream_in_overlap_kernels_and_bubbles() {
    let (_dir, report) = scenario();
    let stream = |id: i64| {
        let v = json(&["streams", "--whole", report.to_str().unwrap()]);
        rows(&v).iter().find(|r| r["stream"] == id).unwrap().clone()
    };
    // Stream 9 runs only the peer copy: p2p, by its kind; stream 11 only a host copy.
    let s9 = stream(9);
    assert_eq!(
        (s9["role"].as_str(), int(&s9["n_comm"]), int(&s9["comm_ns"])),
        (Some("p2p"), 1, 2000)
    );
    assert_eq!(s9["comm_roles"][0]["evidence"], "copy_kind");
    assert_eq!(stream(11)["role"], "copy");
    // Stream 7 computes; its copy was launched inside Megatron's pipeline range.
    let s7 = stream(7);
    assert_eq!(
        (s7["role"].as_str(), int(&s7["comm_ns"])),
        (Some("compute"), 500)
    );
    assert_eq!(s7["comm_roles"][0]["role"], "pp_p2p");
    assert_eq!(s7["comm_roles"][0]["evidence"], "framework");

    // overlap: the p2p copy [4000, 6000] lies under the GEMM [1000, 5000] for 1000 ns; the
    // in-stream pp_p2p copy [6000, 6500] under nothing.
    let all = |role: &str| {
        rows_where("overlap", &report, "role", role)
            .into_iter()
            .find(|r| r["stage"] == "all")
            .unwrap()
    };
    let numbers = |r: &Value| ["comm_ns", "hidden_ns", "exposed_ns"].map(|k| int(&r[k]));
    assert_eq!(numbers(&all("p2p")), [2000, 1000, 1000]);
    assert_eq!(all("p2p")["in_stream"], false);
    assert_eq!(numbers(&all("pp_p2p")), [500, 0, 500]);
    assert_eq!(all("pp_p2p")["in_stream"], true);
    assert_eq!(numbers(&all("all")), [2500, 1000, 1500]);

    // kernels: a peer copy's family is its role; the host copy stays memcpy.
    let family = |name: &str| {
        let r = rows_where("kernels", &report, "family", name);
        (int(&r[0]["kernels"]), int(&r[0]["time_ns"]))
    };
    assert_eq!(family("p2p"), (1, 2000));
    assert_eq!(family("pp_p2p"), (1, 500));
    assert_eq!(family("memcpy"), (1, 1000));

    // bubbles: pipeline wait is pipeline traffic with no kernel running: [5000, 6500].
    let bubbles = json(&["bubbles", "--whole", report.to_str().unwrap()]);
    assert_eq!(int(&rows(&bubbles)[0]["pp_wait_ns"]), 1500);
}

#[test]
fn a_part_file_keeps_its_peer_copies_communication() {
    let (dir, report) = scenario();
    let part = dir.path().join("node0.lens-part");
    let made = nsys_lens(&[
        "part",
        "-o",
        part.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    for command in ["streams", "overlap", "kernels"] {
        let of =
            |input: &Path| json(&[command, "--whole", input.to_str().unwrap()])["rows"].clone();
        assert_eq!(of(&part), of(&report), "{command}");
    }
}

#[test]
fn both_traces_label_a_peer_copy_with_its_role() {
    let (_dir, report) = scenario();
    let reports = [report];
    // Perfetto: each copy between GPUs carries its role, the stream of copies is named by it.
    let (_out, base) = convert_to("perfetto", &reports, &[]);
    if let Some(summary) = crate::perfetto::check(&base.with_extension("perfetto-trace")) {
        assert_eq!(summary["comm_roles"]["p2p"], 1, "{}", summary["comm_roles"]);
        assert_eq!(
            summary["comm_roles"]["pp_p2p"], 1,
            "{}",
            summary["comm_roles"]
        );
        let names = summary["track_names"].as_array().unwrap();
        assert!(
            names
                .iter()
                .any(|n| n.as_str().unwrap().contains("stream 9 · p2p")),
            "{names:?}"
        );
        // The exposed-communication counter holds the copies' exposed time, as overlap does.
        let offset = summary["rebase_offset_ns"].as_i64().unwrap();
        let key = format!(
            "{} | exposed communication",
            summary["processes"][0].as_str().unwrap()
        );
        let steps = summary["counters"][&key]
            .as_array()
            .expect("counter present");
        let exposed = crate::perfetto::integrate(steps, -offset, 10_000 - offset);
        assert_eq!(exposed, 1500);
    }
    // Paraver: the communication role (63100004) and its evidence (63100005) on both copies.
    let (_out, base) = convert_to("paraver", &reports, &[]);
    let trace = crate::paraver::parse(&base.with_extension("prv"));
    let mut labelled: Vec<(String, String)> = Vec::new();
    for (.., pairs) in &trace.events {
        let value = |ty: u32| pairs.iter().find(|(t, v)| *t == ty && *v != 0).map(|p| p.1);
        if let (Some(role), Some(evidence)) = (value(63_100_004), value(63_100_005)) {
            let label = |ty: u32, v: u64| trace.pcf[&ty].1[&v].clone();
            labelled.push((label(63_100_004, role), label(63_100_005, evidence)));
        }
    }
    labelled.sort();
    let want = [("p2p", "copy_kind"), ("pp_p2p", "framework")]
        .map(|(r, e)| (r.to_string(), e.to_string()));
    assert_eq!(labelled, want);
}

/// torch.profiler names a copy between GPUs `Memcpy PtoP (Device -> Device)`: communication
/// there too. A GEMM on stream 7 over [10, 14] µs, a peer copy on stream 9 over [13, 17] µs.
#[test]
fn a_torch_profiler_peer_copy_is_communication() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rank0.json");
    let gpu = |cat: &str, name: &str, stream: u32, ts: u32, correlation: u32| {
        format!(
            r#"{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": 0, "tid": {stream},
            "ts": {ts}, "dur": 4, "args": {{"device": 0, "stream": {stream},
            "correlation": {correlation}, "bytes": 1048576}}}}"#
        )
    };
    let call = |name: &str, ts: u32, correlation: u32| {
        format!(
            r#"{{"ph": "X", "cat": "cuda_runtime", "name": "{name}", "pid": 1, "tid": 1,
            "ts": {ts}, "dur": 1, "args": {{"correlation": {correlation}}}}}"#
        )
    };
    let events = [
        call("cudaLaunchKernel", 1, 1),
        gpu(
            "kernel",
            "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN",
            7,
            10,
            1,
        ),
        call("cudaMemcpyPeerAsync", 2, 2),
        gpu("gpu_memcpy", "Memcpy PtoP (Device -> Device)", 9, 13, 2),
    ];
    let text = format!("{{\"traceEvents\": [{}]}}", events.join(", "));
    std::fs::write(&path, text).unwrap();
    let args = [
        "overlap",
        "--whole",
        "--format",
        "json",
        "-q",
        path.to_str().unwrap(),
    ];
    let v = json_in(&dir.path().join("cache"), &args);
    let p2p = rows(&v)
        .iter()
        .find(|r| r["role"] == "p2p")
        .expect("a p2p row");
    assert_eq!(
        ["comm_ns", "hidden_ns", "exposed_ns"].map(|k| int(&p2p[k])),
        [4000, 1000, 3000]
    );
}
