//! torch.profiler (Kineto) traces as inputs: HTA's real traces (skipped with a note when
//! `../shared/real-data/kineto` is absent) against an independent parse done here with
//! serde_json's `Value` (not the streaming reader under test), and HTA's overlap formula
//! computed here from that parse.

use crate::util::{json_in as json, merged, root, run_in as run, skipped, texts, uncovered};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A real HTA trace, or None (with a note) when absent.
fn real(name: &str) -> Option<PathBuf> {
    let path = root().join("../shared/real-data/kineto").join(name);
    if path.exists() {
        Some(path)
    } else {
        skipped(&format!("{} is absent", path.display()));
        None
    }
}

/// The translation cache the tests of real traces share (translations are keyed by path, size
/// and time, so sharing one is safe and saves translating each trace once per test).
fn shared_cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kineto-cache")
}

/// The trace's events, parsed whole.
fn events(path: &Path) -> (Value, Vec<Value>) {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let mut trace: Value = serde_json::from_str(&text).unwrap();
    let events = trace["traceEvents"].as_array().unwrap().clone();
    trace["traceEvents"] = Value::Null;
    (trace, events)
}

fn category(e: &Value) -> &str {
    e["cat"].as_str().unwrap_or("")
}

/// A µs number in ns, from its shortest decimal form (which is the text Kineto wrote).
fn ns(v: &Value) -> i64 {
    let text = v.to_string();
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let fraction = format!("{fraction:0<3}");
    whole.parse::<i64>().unwrap() * 1000 + fraction[..3].parse::<i64>().unwrap()
}

fn span(e: &Value) -> (i64, i64) {
    let start = ns(&e["ts"]);
    (start, start + ns(&e["dur"]))
}

const TRACES: [&str; 5] = [
    "hta_sampled_rank-0.json.gz",
    "hta_sampled_rank-1.json.gz",
    "hta_nccl_data.json.gz",
    "hta_negative_queue_length_rank0.json.gz",
    "hta_trace_diff_control.json.gz",
];

#[test]
fn every_event_is_counted_once_and_times_are_exact() {
    let cache = shared_cache();
    for name in TRACES {
        let Some(path) = real(name) else { return };
        let (top, events) = events(&path);
        let count = |cats: &[&str]| {
            events
                .iter()
                .filter(|e| e["ph"] == "X" && cats.contains(&category(e)))
                .count() as u64
        };
        let info = json(
            &cache,
            &["info", "--format", "json", path.to_str().unwrap()],
        );
        let row = &info["rows"][0];
        assert_eq!(row["format"], "kineto", "{name}");
        let rows = &row["rows"];
        assert_eq!(rows["kernels"], count(&["kernel"]), "{name}");
        assert_eq!(rows["memcpy"], count(&["gpu_memcpy"]), "{name}");
        assert_eq!(rows["memset"], count(&["gpu_memset"]), "{name}");
        assert_eq!(
            rows["cuda_api"],
            count(&["cuda_runtime", "cuda_driver"]),
            "{name}"
        );
        // Ranges, and the record that names NCCL's domain when `record_param_comms` carries
        // a collective's arguments (its range goes there, with them as its payload).
        let comms = events
            .iter()
            .any(|e| e["name"] == "record_param_comms" && e["args"]["Collective name"].is_string());
        let ranges = count(&["user_annotation", "cpu_op"]) + u64::from(comms);
        assert_eq!(rows["nvtx"], ranges, "{name}");
        // The first translated event is the session start, on the trace's own epoch.
        let translated = [
            "kernel",
            "gpu_memcpy",
            "gpu_memset",
            "cuda_runtime",
            "cuda_driver",
        ];
        let translated: Vec<(i64, i64)> = events
            .iter()
            .filter(|e| e["ph"] == "X")
            .filter(|e| translated.contains(&category(e)) || is_range(e))
            .map(span)
            .collect();
        let first = translated.iter().map(|s| s.0).min().unwrap();
        let last = translated.iter().map(|s| s.1).max().unwrap();
        let base = top["baseTimeNanoseconds"].as_i64().unwrap_or(0);
        assert_eq!(row["session_start_utc_ns"], base + first, "{name}");
        assert_eq!(row["start_ns"], 0, "{name}");
        assert_eq!(row["end_ns"], last - first, "{name}");
        assert_eq!(
            row["processes"][0]["mpi_rank"],
            top["distributedInfo"]["rank"]
        );
    }
}

/// HTA's two sampled ranks of one job, when present.
fn sampled_pair() -> Option<(PathBuf, PathBuf)> {
    Some((
        real("hta_sampled_rank-0.json.gz")?,
        real("hta_sampled_rank-1.json.gz")?,
    ))
}

fn is_range(e: &Value) -> bool {
    matches!(category(e), "user_annotation" | "cpu_op")
}

/// From HTA's `get_comm_comp_overlap` (analyses.md §4), over the whole trace: the time
/// communication runs without compute, |⋃COMM| − |⋃COMM ∩ ⋃COMP|, with COMM the kernels named
/// `^nccl` or `ncclKernel` and COMP the other kernels.
fn hta_exposed(events: &[Value]) -> i64 {
    let kernels: Vec<&Value> = events.iter().filter(|e| category(e) == "kernel").collect();
    let is_comm = |e: &&&Value| {
        let n = e["name"].as_str().unwrap();
        n.starts_with("nccl") || n.contains("ncclKernel")
    };
    let comm = merged(kernels.iter().filter(is_comm).map(|e| span(e)).collect());
    let comp = merged(
        kernels
            .iter()
            .filter(|e| !is_comm(e))
            .map(|e| span(e))
            .collect(),
    );
    uncovered(&comm, &comp)
}

#[test]
fn exposed_communication_equals_htas_overlap_formula() {
    let cache = shared_cache();
    for name in TRACES {
        let Some(path) = real(name) else { return };
        let (_, events) = events(&path);
        let exposed = hta_exposed(&events);
        let args = [
            "overlap",
            "--whole",
            "--format",
            "json",
            path.to_str().unwrap(),
        ];
        let out = json(&cache, &args);
        let all = out["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["role"] == "all" && r["stage"] == "all" && r["rank"] != "all")
            .expect("an all-roles row");
        assert_eq!(all["exposed_wall_ns"], exposed, "{name}");
    }
}

/// The innermost `nccl:` annotation around each SendRecv kernel's launch, per rank.
fn sendrecv_purposes(events: &[Value]) -> Vec<String> {
    let ranges: Vec<&Value> = events
        .iter()
        .filter(|e| is_range(e) && e["name"].as_str().unwrap().starts_with("nccl:"))
        .collect();
    let launches: Vec<&Value> = events
        .iter()
        .filter(|e| category(e) == "cuda_runtime")
        .collect();
    let mut purposes = Vec::new();
    for k in events.iter().filter(|e| category(e) == "kernel") {
        if !k["name"].as_str().unwrap().contains("SendRecv") {
            continue;
        }
        let launch = launches
            .iter()
            .find(|l| l["args"]["correlation"] == k["args"]["correlation"])
            .expect("every SendRecv kernel's launch is in these traces");
        let (ls, le) = span(launch);
        let around = ranges
            .iter()
            .filter(|r| r["tid"] == launch["tid"])
            .filter(|r| span(r).0 <= ls && le <= span(r).1)
            .min_by_key(|r| span(r).1 - span(r).0)
            .expect("each sits under an nccl: annotation");
        purposes.push(around["name"].as_str().unwrap().to_string());
    }
    purposes
}

#[test]
fn two_sampled_ranks_merge_and_sendrecv_under_all_to_all_is_all_to_all() {
    let Some((r0, r1)) = sampled_pair() else {
        return;
    };
    let cache = shared_cache();
    let inputs = [r0.to_str().unwrap(), r1.to_str().unwrap()];
    let ranks = json(&cache, &["ranks", "--format", "json", inputs[0], inputs[1]]);
    let numbers: Vec<(i64, String)> = ranks["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rank"].as_i64().unwrap(),
                r["source"].as_str().unwrap().into(),
            )
        })
        .collect();
    let distributed = "distributed".to_string();
    assert_eq!(numbers, [(0, distributed.clone()), (1, distributed)]);
    let overlap = json(
        &cache,
        &[
            "overlap", "--whole", "--format", "json", inputs[0], inputs[1],
        ],
    );
    for (rank, path) in [(0, &r0), (1, &r1)] {
        let (_, events) = events(path);
        let purposes = sendrecv_purposes(&events);
        let expected = |pattern: &str| purposes.iter().filter(|p| *p == pattern).count() as i64;
        let kernels = |role: &str| {
            overlap["rows"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["rank"] == rank && r["stage"] == "all" && r["role"] == role)
                .map(|r| r["kernels"].as_i64().unwrap())
                .sum::<i64>()
        };
        assert!(expected("nccl:all_to_all") > 0);
        assert_eq!(
            kernels("nccl:AllToAll"),
            expected("nccl:all_to_all"),
            "rank {rank}"
        );
        assert_eq!(
            kernels("nccl:AllReduce"),
            expected("nccl:all_reduce"),
            "rank {rank}"
        );
        assert_eq!(kernels("p2p"), 0, "rank {rank}: no pipeline traffic here");
    }
}

#[test]
fn traces_mix_with_nsys_exports_and_nothing_is_written_beside_them() {
    let Some(trace) = real("hta_nccl_data.json.gz") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("rank1.json.gz");
    std::fs::copy(&trace, &copy).unwrap();
    let export = crate::util::fixture("megatron_pp2/node0.sqlite");
    let cache = tempfile::tempdir().unwrap();
    let args = [
        "info",
        "--format",
        "json",
        copy.to_str().unwrap(),
        export.to_str().unwrap(),
    ];
    let info = json(cache.path(), &args);
    let formats: Vec<&str> = info["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["format"].as_str().unwrap())
        .collect();
    assert_eq!(formats, ["kineto", "nsys"]);
    assert_eq!(info["rows"][0]["file"], copy.to_str().unwrap());
    let listed: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(listed.len(), 1, "only the trace itself beside it");
    // The second run reuses the translation.
    let cached: Vec<_> = std::fs::read_dir(cache.path()).unwrap().collect();
    assert_eq!(cached.len(), 1);
    json(cache.path(), &args);
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 1);
}

#[test]
fn broken_traces_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8], &str); 4] = [
        ("object.json", b"{\"a\": 1}", "without traceEvents"),
        ("cut.json", b"{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\"", "EOF"),
        (
            "no_stream.json",
            b"{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1, \"dur\": 2, \"pid\": \"x\", \"tid\": \"y\", \"args\": {}}]}",
            "traceEvents[0] (\"k\"): no device",
        ),
        (
            "bad_time.json",
            b"{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"op\", \"ts\": \"soon\", \"dur\": 2, \"pid\": 1, \"tid\": 1}]}",
            "ts \"soon\" is not a time",
        ),
    ];
    for (name, text, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = run(cache.path(), &["info", path.to_str().unwrap()]);
        let (_, stderr) = texts(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(name), "{name}: {stderr}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    assert_eq!(
        std::fs::read_dir(cache.path()).unwrap().count(),
        0,
        "no half-written translation is left in the cache"
    );
}

/// An output's rows without what names a host or a time on the clock (a trace's clock starts
/// at its first event, an export's at its session start) or the evidence only nsys has (NCCL's
/// own NVTX ranges, which torch.profiler does not record).
fn comparable(output: &Value) -> Vec<Value> {
    // The traces add PyTorch's record_param_comms (sizes, process groups), which the exports
    // lack: `collectives` tests those against the truth.
    const DROPPED: [&str; 9] = [
        "host",
        "last_host",
        "first_start_ns",
        "last_start_ns",
        "comm_roles",
        "evidence",
        "matched_by",
        "bytes",
        "busbw_gbps",
    ];
    let mut rows = output["rows"].as_array().unwrap().clone();
    for row in &mut rows {
        let object = row.as_object_mut().unwrap();
        for key in DROPPED {
            object.remove(key);
        }
    }
    rows
}

#[test]
fn every_preset_reads_the_same_as_an_export_and_as_torch_profiler_traces() {
    let cache = tempfile::tempdir().unwrap();
    let presets: [(&str, &[&str]); 4] = [
        ("ddp", &[]),
        ("megatron", &["--pp", "2"]),
        ("pithtrain", &[]),
        ("fsdp", &[]),
    ];
    for (preset, bubble_options) in presets {
        let dir = tempfile::tempdir().unwrap();
        let (nsys, kineto) = (dir.path().join("nsys"), dir.path().join("kineto"));
        for (out, format) in [(&nsys, "nsys"), (&kineto, "kineto")] {
            let args = [
                "synth",
                "-o",
                out.to_str().unwrap(),
                "--preset",
                preset,
                "--format",
            ];
            let status = run(cache.path(), &[&args[..], &[format]].concat());
            assert!(status.status.success(), "{preset} {format}");
        }
        let files = |dir: &Path, suffix: &str| -> Vec<String> {
            let mut files: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path().display().to_string())
                .filter(|p| p.ends_with(suffix))
                .collect();
            files.sort();
            files
        };
        let (exports, traces) = (files(&nsys, ".sqlite"), files(&kineto, ".json"));
        assert!(
            files(&kineto, ".sqlite").is_empty(),
            "only the traces are left"
        );
        assert!(traces.iter().any(|t| t.ends_with("truth.json")));
        // The directory itself: its traces are read, its truth.json is not.
        let traces = [kineto.display().to_string()];
        let commands: [(&str, &[&str]); 6] = [
            ("overlap", &[]),
            ("streams", &[]),
            ("kernels", &[]),
            ("idle", &[]),
            ("collectives", &[]),
            ("bubbles", bubble_options),
        ];
        for (command, options) in commands {
            let output = |inputs: &[String]| {
                let mut args: Vec<&str> = vec![command, "--format", "json"];
                args.extend(options.iter().copied());
                args.extend(inputs.iter().map(String::as_str));
                let out = run(cache.path(), &args);
                let json = serde_json::from_str(&texts(&out).0).expect("JSON output");
                (out.status.code(), comparable(&json))
            };
            assert_eq!(output(&exports), output(&traces), "{preset}: {command}");
        }
    }
}

#[test]
fn two_ranks_convert_to_both_traces_with_every_event() {
    let Some((r0, r1)) = sampled_pair() else {
        return;
    };
    let cache = shared_cache();
    let out = tempfile::tempdir().unwrap();
    let base = out.path().join("sampled");
    let args = [
        "convert",
        "-o",
        base.to_str().unwrap(),
        r0.to_str().unwrap(),
        r1.to_str().unwrap(),
    ];
    let result = run(&cache, &args);
    assert!(result.status.success(), "{}", texts(&result).1);
    assert!(base.with_extension("prv").is_file());
    let Some(summary) = crate::perfetto::check(&base.with_extension("perfetto-trace")) else {
        return;
    };
    let (mut kernels, mut api, mut ranges) = (0, 0, 0);
    for path in [&r0, &r1] {
        let (_, events) = events(path);
        let x = |cats: &[&str]| {
            events
                .iter()
                .filter(|e| e["ph"] == "X" && cats.contains(&category(e)))
                .count() as u64
        };
        kernels += x(&["kernel"]);
        api += x(&["cuda_runtime", "cuda_driver"]);
        ranges += x(&["user_annotation", "cpu_op"]);
    }
    let counts = &summary["counts"];
    assert_eq!(counts["kernel"], kernels);
    assert_eq!(counts["cuda_api"], api);
    assert_eq!(counts["nvtx"], ranges);
}

#[test]
fn events_of_unknown_kinds_are_counted_in_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let path = dir.path().join("rank0.json");
    let kernel = r#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.5,
        "dur": 2, "args": {"device": 0, "stream": 7, "correlation": 1}}"#;
    let counter = r#"{"ph": "C", "name": "Memory", "pid": 1, "tid": 1, "ts": 11}"#;
    let mystery = r#"{"ph": "X", "cat": "mystery", "name": "m", "pid": 1, "tid": 1, "ts": 11,
        "dur": 1}"#;
    let flow = r#"{"ph": "s", "cat": "ac2g", "id": 1, "pid": 1, "tid": 1, "ts": 11}"#;
    let text = format!("{{\"traceEvents\": [{kernel}, {counter}, {counter}, {mystery}, {flow}]}}");
    std::fs::write(&path, text).unwrap();
    // Twice: the second run reads the cached translation and still warns.
    for _ in 0..2 {
        let info = json(
            cache.path(),
            &["info", "--format", "json", path.to_str().unwrap()],
        );
        let warnings: Vec<&str> = info["rows"][0]["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect();
        assert!(
            warnings.contains(&"2 trace event(s) of kind ph C skipped (not modelled by nsys-lens)"),
            "{warnings:?}"
        );
        assert!(
            warnings
                .contains(&"1 trace event(s) of kind mystery skipped (not modelled by nsys-lens)"),
            "{warnings:?}"
        );
        assert_eq!(info["rows"][0]["rows"]["kernels"], 1);
        assert_eq!(info["rows"][0]["end_ns"], 2000, "10.5 µs to 12.5 µs");
    }
}

/// Per correlation id of an NCCL kernel launched inside a `record_param_comms` carrying its
/// collective's arguments: (collective, input elements), from the independent parse.
fn comms_of_nccl_kernels(events: &[Value]) -> std::collections::BTreeMap<i64, (String, i64)> {
    let comms: Vec<&Value> = events
        .iter()
        .filter(|e| e["name"] == "record_param_comms" && e["args"]["Collective name"].is_string())
        .collect();
    let launches: std::collections::HashMap<i64, &Value> = events
        .iter()
        .filter(|e| category(e) == "cuda_runtime")
        .map(|e| (e["args"]["correlation"].as_i64().unwrap(), e))
        .collect();
    let mut found = std::collections::BTreeMap::new();
    for k in events.iter().filter(|e| category(e) == "kernel") {
        if !k["name"].as_str().unwrap().starts_with("nccl") {
            continue;
        }
        let correlation = k["args"]["correlation"].as_i64().unwrap();
        let Some(launch) = launches.get(&correlation) else {
            continue;
        };
        let (ls, _) = span(launch);
        let around = comms
            .iter()
            .filter(|c| c["tid"] == launch["tid"] && span(c).0 <= ls && ls < span(c).1)
            .min_by_key(|c| span(c).1 - span(c).0);
        if let Some(c) = around {
            let args = &c["args"];
            let collective = args["Collective name"].as_str().unwrap().to_string();
            found.insert(
                correlation,
                (collective, args["In msg nelems"].as_i64().unwrap()),
            );
        }
    }
    found
}

#[test]
fn the_collective_record_param_comms_names_reaches_its_nccl_kernel_in_paraver() {
    let Some(path) = real("hta_nccl_data.json.gz") else {
        return;
    };
    let (_, events) = events(&path);
    let want = comms_of_nccl_kernels(&events);
    assert!(want.len() >= 20, "{want:?}");
    let out = tempfile::tempdir().unwrap();
    let base = out.path().join("nccl");
    let args = [
        "convert",
        "--to",
        "paraver",
        "-o",
        base.to_str().unwrap(),
        path.to_str().unwrap(),
    ];
    let result = run(&shared_cache(), &args);
    assert!(result.status.success(), "{}", texts(&result).1);
    let trace = crate::paraver::parse(&base.with_extension("prv"));
    assert_eq!(trace.pcf[&9501].0, "NCCL Collective name");
    assert_eq!(trace.pcf[&9502].0, "NCCL In msg nelems");
    let mut got = std::collections::BTreeMap::new();
    for (_, _, _, pairs) in &trace.events {
        let value = |ty: u32| pairs.iter().find(|p| p.0 == ty).map(|p| p.1);
        let Some(name) = value(9501).filter(|&v| v != 0) else {
            continue;
        };
        let collective = trace.pcf[&9501].1[&name].clone();
        let correlation = value(9200).expect("a kernel's correlation") as i64;
        got.insert(correlation, (collective, value(9502).unwrap() as i64));
    }
    assert_eq!(got, want);
}

/// Issue 30: one real rank of a 2-rank DDP run (HTA's `nccl_data`): nothing to match, and the
/// note says so, with the group size its `record_param_comms` records (read here from the JSON).
#[test]
fn one_real_rank_alone_is_told_to_bring_its_peers() {
    let Some(path) = real("hta_nccl_data.json.gz") else {
        return;
    };
    let (_, events) = events(&path);
    let group = events
        .iter()
        .filter(|e| {
            e["name"] == "record_param_comms" && e["args"]["Collective name"] == "allreduce"
        })
        .map(|e| e["args"]["Group size"].as_i64().unwrap())
        .max()
        .unwrap();
    assert_eq!(group, 2);
    let args = [
        "collectives",
        "--whole",
        "--format",
        "json",
        path.to_str().unwrap(),
    ];
    let out = run(&shared_cache(), &args);
    assert_eq!(out.status.code(), Some(1), "an empty table exits 1");
    let c: Value = serde_json::from_str(&texts(&out).0).unwrap();
    assert!(c["rows"].as_array().unwrap().is_empty());
    let notes: Vec<&str> = c["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let want = format!(
        "all on one rank: give the traces of their other members (their records say {group} ranks) too"
    );
    assert!(notes.iter().any(|n| n.contains(&want)), "{notes:?}");
}

/// Issue 30: HTA's two sampled ranks hold only part of their run's collectives: no instance
/// is matched, and one note says why, with how many of the run's ranks they are (their
/// `distributedInfo`, read here from the JSON).
#[test]
fn two_ranks_of_a_larger_run_are_told_how_many_they_are() {
    let Some((a, b)) = sampled_pair() else {
        return;
    };
    let (top, _) = events(&a);
    let world = top["distributedInfo"]["world_size"].as_i64().unwrap();
    assert_eq!(world, 128);
    let args = ["collectives", "--whole", "--format", "json"];
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = run(&shared_cache(), &[&args[..], &[a, b]].concat());
    assert_eq!(out.status.code(), Some(1), "an empty table exits 1");
    let c: Value = serde_json::from_str(&texts(&out).0).unwrap();
    assert!(c["rows"].as_array().unwrap().is_empty());
    let notes: Vec<&str> = (c["notes"].as_array().unwrap().iter())
        .map(|n| n.as_str().unwrap())
        .collect();
    let want = format!("these traces hold 2 of the run's {world} ranks");
    let why: Vec<&&str> = notes
        .iter()
        .filter(|n| n.starts_with("no instance"))
        .collect();
    assert_eq!(why.len(), 1, "{notes:?}");
    assert!(why[0].contains(&want), "{notes:?}");
}

/// Several traces are translated at once (half as many as `--threads`); the translations and
/// every table read from them are the same as one at a time.
#[test]
fn traces_translated_at_once_read_as_those_translated_one_at_a_time() {
    let run_dir =
        crate::util::synth("--preset ddp --nodes 1 --gpus-per-node 4 --steps 3 --format kineto");
    let mut traces: Vec<PathBuf> = std::fs::read_dir(run_dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".json") && !p.ends_with("truth.json"))
        .collect();
    traces.sort();
    assert_eq!(traces.len(), 4, "{traces:?}");
    let read = |threads: &str| {
        let cache = tempfile::tempdir().unwrap();
        let mut args = vec![
            "kernels",
            "--whole",
            "--format",
            "json",
            "--threads",
            threads,
        ];
        args.extend(traces.iter().map(|p| p.to_str().unwrap()));
        let kernels = json(cache.path(), &args);
        let mut files: Vec<PathBuf> = std::fs::read_dir(cache.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let tables: Vec<String> = files
            .iter()
            .map(|f| {
                let db = rusqlite::Connection::open(f).unwrap();
                let one = |sql: &str| db.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
                format!(
                    "{} kernels, {} calls, {} ranges, first {}",
                    one("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"),
                    one("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME"),
                    one("SELECT count(*) FROM NVTX_EVENTS"),
                    one("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL"),
                )
            })
            .collect();
        (kernels, tables)
    };
    let (alone, alone_tables) = read("1");
    let (together, together_tables) = read("8");
    assert_eq!(alone_tables.len(), 4);
    assert_eq!(alone_tables, together_tables);
    assert_eq!(alone["rows"], together["rows"]);
    assert!(alone["rows"].as_array().unwrap().len() > 4);
}
