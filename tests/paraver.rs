//! `convert --to paraver`: a parser of our own reads the `.prv/.pcf/.row` back and checks the
//! format rules Paraver's tools rely on (paraver.md §6), nsys2prv's exact labels, kernel counts
//! per stream against SQL, and GPU-active time per task against the union of GPU intervals
//! computed from the SQLite; BSC's `ptd comprovar` checks the syntax when installed.

use crate::util::{
    convert_to, nsys_lens, pithtrain_nodes, real, sql_gpu_ops, sqlite_files, union_length,
};
use regex::Regex;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

/// nsys2prv's labels for the types it defines (paraver.md §3.4), which presets resolve by.
const NSYS2PRV_LABELS: &[(u32, &str)] = &[
    (63000000, "CUDA library call"),
    (63000006, "CUDA kernel"),
    (63000007, "NCCL kernel"),
    (63000001, "CUDA memcpy kernel"),
    (63000002, "Memcopy size"),
    (9101, "Kernel GrdX"),
    (9102, "Kernel GrdY"),
    (9103, "Kernel GrdZ"),
    (9104, "Kernel BlkX"),
    (9105, "Kernel BlkY"),
    (9106, "Kernel BlkZ"),
    (9107, "Kernel Static Shared Memory"),
    (9108, "Kernel Dynamic Shared Memory"),
    (9110, "Kernel Registers/Thread"),
    (9200, "Correlation ID"),
    (9004, "NVTX startend ranges"),
];

/// Types whose non-zero values open an interval closed by a 0 (one at a time per thread).
const INTERVAL_TYPES: &[u32] = &[63000000, 63000006, 63000007, 63000001];

/// An event record: time, task, thread, type:value pairs.
type Event = (u64, usize, usize, Vec<(u32, u64)>);

/// (host, pid).
type Process = (String, u32);

/// Per (device, stream): kernels.
type KernelCounts = BTreeMap<(u32, u32), u64>;

/// A parsed trace (fields used by this module; the fuzz harness uses [`check`]).
pub struct Trace {
    /// The header's end time.
    pub end: u64,
    nodes: usize,
    /// Threads per task, and each task's node.
    pub tasks: Vec<(usize, usize)>,
    /// The `.row` names per level.
    pub row: BTreeMap<String, Vec<String>>,
    /// type -> (label, value labels).
    pub pcf: HashMap<u32, (String, HashMap<u64, String>)>,
    /// Event records in file order.
    pub events: Vec<Event>,
    /// (send time, task, thread, logical receive time, task, thread, size, tag, physical
    /// receive time).
    pub comms: Vec<[u64; 9]>,
}

/// What the trace subtracted from merged-clock times (its `# nsys-lens: times are ...` line).
pub fn rebase_offset(prv: &Path) -> i64 {
    std::fs::read_to_string(prv)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("# nsys-lens: times are merged-clock ns minus "))
        .and_then(|rest| rest.split(' ').next())
        .expect("the rebase line")
        .parse()
        .unwrap()
}

/// Reads a written `.prv` with its `.row` and `.pcf`, checking the record grammar as it goes.
pub fn parse(prv: &Path) -> Trace {
    let text = std::fs::read_to_string(prv).expect("prv");
    let mut lines = text.lines();
    let header = lines.next().expect("header");
    let re = Regex::new(r"^#Paraver \([^)]*\):(\d+)_ns:(\d+)\(([\d,]+)\):1:(\d+)\(([\d:,]+)\)$")
        .unwrap();
    let caps = re
        .captures(header)
        .unwrap_or_else(|| panic!("bad header {header}"));
    let nodes: usize = caps[2].parse().unwrap();
    assert_eq!(
        caps[3].split(',').count(),
        nodes,
        "one cpu list entry per node"
    );
    let tasks: Vec<(usize, usize)> = caps[5]
        .split(',')
        .map(|t| {
            let (threads, node) = t.split_once(':').unwrap();
            (threads.parse().unwrap(), node.parse().unwrap())
        })
        .collect();
    assert_eq!(tasks.len(), caps[4].parse::<usize>().unwrap());
    let mut trace = Trace {
        end: caps[1].parse().unwrap(),
        nodes,
        tasks,
        row: parse_row(&prv.with_extension("row")),
        pcf: parse_pcf(&prv.with_extension("pcf")),
        events: Vec::new(),
        comms: Vec::new(),
    };
    for line in lines.filter(|l| !l.starts_with('#')) {
        let f: Vec<u64> = line
            .split(':')
            .map(|x| x.parse().unwrap_or_else(|_| panic!("bad field in {line}")))
            .collect();
        match f[0] {
            2 => {
                assert!(f.len() >= 8 && f.len().is_multiple_of(2), "{line}");
                let pairs = f[6..].chunks(2).map(|p| (p[0] as u32, p[1])).collect();
                trace
                    .events
                    .push((f[5], f[3] as usize, f[4] as usize, pairs));
            }
            3 => {
                assert_eq!(f.len(), 15, "{line}");
                assert_eq!(f[5], f[6], "a send's logical time is its physical: {line}");
                assert!(f[12] >= f[11], "received before posted: {line}");
                trace
                    .comms
                    .push([f[5], f[3], f[4], f[11], f[9], f[10], f[13], f[14], f[12]]);
            }
            1 => {
                assert_eq!(f.len(), 8, "{line}");
                assert!(f[6] > f[5], "a state that ends before it begins: {line}");
                assert_eq!(f[7], 1, "a state other than Running: {line}");
            }
            _ => panic!("unexpected record {line}"),
        }
        assert_eq!((f[1], f[2]), (0, 1), "cpu 0, application 1: {line}");
    }
    trace
}

fn parse_row(path: &Path) -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(path).expect("row");
    let mut levels = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.is_empty() {
            continue;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        assert_eq!((parts[0], parts[2]), ("LEVEL", "SIZE"), "{line}");
        let n: usize = parts[3].parse().unwrap();
        let names: Vec<String> = lines.by_ref().take(n).map(str::to_string).collect();
        levels.insert(parts[1].to_string(), names);
    }
    levels
}

fn parse_pcf(path: &Path) -> HashMap<u32, (String, HashMap<u64, String>)> {
    let text = std::fs::read_to_string(path).expect("pcf");
    let mut types = HashMap::new();
    let mut current: Vec<u32> = Vec::new();
    let mut in_values = false;
    // Inside a section that is not an event type's (`STATES`, `STATES_COLOR`...).
    let mut other = false;
    for line in text.lines().map(str::trim) {
        if line == "EVENT_TYPE" {
            current.clear();
            in_values = false;
            other = false;
        } else if ["STATES", "STATES_COLOR", "GRADIENT_COLOR", "GRADIENT_NAMES"].contains(&line) {
            current.clear();
            in_values = false;
            other = true;
        } else if other {
            continue;
        } else if line == "VALUES" {
            in_values = true;
        } else if line.is_empty() || line.starts_with('#') {
            continue;
        } else if in_values {
            let (value, label) = line.split_once(char::is_whitespace).unwrap();
            for ty in &current {
                let entry: &mut (String, HashMap<u64, String>) = types.get_mut(ty).unwrap();
                entry
                    .1
                    .insert(value.parse().unwrap(), label.trim().to_string());
            }
        } else if !current.is_empty() || line.split_whitespace().count() >= 3 {
            let mut words = line.split_whitespace();
            let (Some(_), Some(ty)) = (words.next(), words.next()) else {
                continue;
            };
            if let Ok(ty) = ty.parse::<u32>() {
                let label = words.collect::<Vec<_>>().join(" ");
                assert!(
                    types.insert(ty, (label, HashMap::new())).is_none(),
                    "type {ty} labelled twice"
                );
                current.push(ty);
            }
        }
    }
    types
}

/// Checks every format rule; returns per (task, thread name) kernel begins and per task the
/// GPU-active time.
pub fn check(trace: &Trace) -> (BTreeMap<(usize, String), u64>, Vec<i64>) {
    assert_eq!(trace.row["NODE"].len(), trace.nodes);
    assert_eq!(trace.row["TASK"].len(), trace.tasks.len());
    let threads: usize = trace.tasks.iter().map(|t| t.0).sum();
    assert_eq!(trace.row["THREAD"].len(), threads);
    assert!(
        trace
            .tasks
            .iter()
            .all(|&(_, node)| (1..=trace.nodes).contains(&node))
    );
    // Labels: nsys2prv's exact, no label used twice.
    for (ty, label) in NSYS2PRV_LABELS {
        if let Some((got, _)) = trace.pcf.get(ty) {
            assert_eq!(got, label, "type {ty}");
        }
    }
    let mut labels: Vec<&String> = trace.pcf.values().map(|(l, _)| l).collect();
    labels.sort();
    let n = labels.len();
    labels.dedup();
    assert_eq!(labels.len(), n, "a label names two types");
    let first_thread: Vec<usize> = trace
        .tasks
        .iter()
        .scan(0, |acc, t| {
            let first = *acc;
            *acc += t.0;
            Some(first)
        })
        .collect();
    let name = |task: usize, thread: usize| {
        trace.row["THREAD"][first_thread[task - 1] + thread - 1].clone()
    };
    let mut last = 0;
    let mut open: HashMap<(usize, usize, u32), u64> = HashMap::new();
    let mut stacked: HashMap<(usize, usize, u32), i64> = HashMap::new();
    let mut kernels: BTreeMap<(usize, String), u64> = BTreeMap::new();
    let mut gpu_spans: Vec<Vec<(i64, i64)>> = vec![Vec::new(); trace.tasks.len()];
    let mut gpu_open: HashMap<(usize, usize), u64> = HashMap::new();
    for (time, task, thread, pairs) in &trace.events {
        assert!(*time >= last, "records not sorted at {time}");
        last = *time;
        assert!(
            *time <= trace.end,
            "record at {time} after the header end {}",
            trace.end
        );
        assert!((1..=trace.tasks.len()).contains(task));
        assert!((1..=trace.tasks[task - 1].0).contains(thread));
        for &(ty, value) in pairs {
            let (_, values) = trace
                .pcf
                .get(&ty)
                .unwrap_or_else(|| panic!("type {ty} unlabelled"));
            if !values.is_empty() {
                assert!(
                    values.contains_key(&value),
                    "type {ty} value {value} unlabelled"
                );
            }
            let key = (*task, *thread, ty);
            if INTERVAL_TYPES.contains(&ty) {
                if value != 0 {
                    assert!(!open.contains_key(&key), "{key:?} opened twice at {time}");
                    open.insert(key, value);
                    if ty != 63000000 {
                        gpu_open.insert((*task, *thread), *time);
                    }
                    if ty == 63000006 || ty == 63000007 {
                        *kernels.entry((*task, name(*task, *thread))).or_default() += 1;
                    }
                } else if open.remove(&key).is_some() && ty != 63000000 {
                    let start = gpu_open.remove(&(*task, *thread)).unwrap();
                    gpu_spans[task - 1].push((start as i64, *time as i64));
                }
            } else if ty == 9004 || (9500..10_000).contains(&ty) {
                *stacked.entry(key).or_default() += if value != 0 { 1 } else { -1 };
            }
        }
    }
    assert!(open.is_empty(), "intervals never closed: {open:?}");
    assert!(
        stacked.values().all(|&d| d == 0),
        "NVTX push/pop unbalanced"
    );
    for c in &trace.comms {
        let [send, task, thread, recv, rtask, rthread, _size, tag, _] = *c;
        assert!(send <= recv && recv <= trace.end, "{c:?}");
        assert_eq!(task, rtask, "communication leaves its task: {c:?}");
        let (from, to) = (
            name(task as usize, thread as usize),
            name(rtask as usize, rthread as usize),
        );
        match tag {
            // A launch: from the calling thread to the operation.
            55001 | 55002 => assert!(from.starts_with("THREAD") && to.starts_with("CUDA-D")),
            // A synchronization link: from the operation waited for to the thread that waited
            // or the operation held back.
            55003 => assert!(from.starts_with("CUDA-D"), "{c:?}"),
            _ => panic!("unknown tag: {c:?}"),
        }
    }
    let active = gpu_spans.into_iter().map(union_length).collect();
    (kernels, active)
}

/// Converts to Paraver into a fresh directory; returns it and the `.prv`.
fn convert(reports: &[PathBuf], extra: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let (dir, base) = convert_to("paraver", reports, extra);
    (dir, base.with_extension("prv"))
}

/// `ptd comprovar -e`, when pertalde is installed (in CI it must be).
pub fn pertalde(prv: &Path) {
    match Command::new("ptd")
        .args(["comprovar", "-e"])
        .arg(prv)
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "ptd comprovar: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(_) => {
            assert!(
                std::env::var_os("NSYS_LENS_CI").is_none(),
                "CI must install pertalde (see .ci/run)"
            );
            crate::util::skipped("ptd comprovar: pertalde is not installed");
        }
    }
}

/// Per (host, pid): kernels per (device, stream), and the union of GPU intervals, from SQL.
fn from_sql(reports: &[PathBuf]) -> HashMap<Process, (KernelCounts, i64)> {
    let mut out: HashMap<Process, (KernelCounts, Vec<(i64, i64)>)> = HashMap::new();
    for r in reports {
        let info = nsys_lens(&["info", "--format", "json", r.to_str().unwrap()]);
        let info: Value = serde_json::from_slice(&info.stdout).unwrap();
        let host = info["rows"][0]["host"].as_str().unwrap().to_string();
        for (pid, device, stream, start, end, kernel) in sql_gpu_ops(r) {
            let entry = out.entry((host.clone(), pid)).or_default();
            if kernel {
                *entry.0.entry((device, stream)).or_default() += 1;
            }
            entry.1.push((start, end));
        }
    }
    out.into_iter()
        .map(|(k, (kernels, spans))| (k, (kernels, union_length(spans))))
        .collect()
}

/// Converts and checks everything against SQL.
fn converts_exactly(reports: &[PathBuf]) -> Trace {
    let (_dir, prv) = convert(reports, &[]);
    pertalde(&prv);
    let trace = parse(&prv);
    let (kernels, active) = check(&trace);
    let paths: Vec<&str> = reports.iter().map(|p| p.to_str().unwrap()).collect();
    let ranks = nsys_lens(&[&["ranks", "--format", "json"], &paths[..]].concat());
    let ranks: Value = serde_json::from_slice(&ranks.stdout).unwrap_or(Value::Null);
    let sql = from_sql(reports);
    let stream = Regex::new(r"^CUDA-D(\d+)\.S(\d+) ").unwrap();
    let other = Regex::new(r"^node (.+) pid (\d+)$").unwrap();
    for (index, task) in trace.row["TASK"].iter().enumerate() {
        let key = match task.strip_prefix("rank ") {
            Some(rank) => {
                let row = ranks["rows"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| rank.parse::<u64>().is_ok_and(|n| r["rank"] == n))
                    .unwrap();
                (
                    row["host"].as_str().unwrap().to_string(),
                    row["pid"].as_u64().unwrap() as u32,
                )
            }
            None => {
                let caps = other.captures(task).unwrap();
                (caps[1].to_string(), caps[2].parse().unwrap())
            }
        };
        let (expected, union) = sql.get(&key).cloned().unwrap_or_default();
        let mut got: BTreeMap<(u32, u32), u64> = BTreeMap::new();
        for ((t, thread), n) in &kernels {
            if *t == index + 1
                && let Some(c) = stream.captures(thread)
            {
                *got.entry((c[1].parse().unwrap(), c[2].parse().unwrap()))
                    .or_default() += n;
            }
        }
        assert_eq!(got, expected, "kernels per stream of {task}");
        assert_eq!(active[index], union, "GPU-active time of {task}");
    }
    trace
}

#[test]
fn two_nodes_with_the_same_pids_give_four_tasks_on_two_nodes() {
    let reports = pithtrain_nodes();
    let trace = converts_exactly(&reports);
    assert_eq!(trace.row["TASK"], ["rank 0", "rank 1", "rank 2", "rank 3"]);
    assert_eq!(trace.row["NODE"], ["node0", "node1"]);
    assert_eq!(
        trace.tasks.iter().map(|t| t.1).collect::<Vec<_>>(),
        [1, 1, 2, 2]
    );
    let threads = trace.row["THREAD"].join("\n");
    assert!(threads.contains("CUDA-D0.S20 ep_a2a") && threads.contains("ANALYSIS rank 3"));
    assert!(!trace.comms.is_empty());
}

#[test]
fn the_three_node_nccl_run_has_three_nodes() {
    let Some(dir) = real("fs24_nccl_allreduce_tree_3nodes_9gpus") else {
        return;
    };
    let trace = converts_exactly(&sqlite_files(&dir));
    assert_eq!(trace.nodes, 3);
    assert_eq!(trace.row["TASK"].len(), 9);
}

#[test]
fn every_real_export_converts_exactly() {
    let Some(dir) = real("") else {
        return;
    };
    for file in sqlite_files(&dir) {
        converts_exactly(std::slice::from_ref(&file));
    }
}

#[test]
fn overlapping_kernels_go_on_a_lane_thread_and_output_is_deterministic() {
    let Some(file) = real("nsysai_mfu_2gpu_before_2026.2.1.sqlite") else {
        return;
    };
    let (_a, first) = convert(std::slice::from_ref(&file), &[]);
    let (_b, second) = convert(std::slice::from_ref(&file), &[]);
    for ext in ["prv", "pcf", "row"] {
        let read = |p: &Path| std::fs::read(p.with_extension(ext)).unwrap();
        let (a, b) = (read(&first), read(&second));
        if ext == "prv" {
            // The provenance comments name the input path, the same in both runs.
            assert_eq!(a, b, ".prv differs between runs");
        } else {
            assert_eq!(a, b, ".{ext} differs between runs");
        }
    }
    let trace = parse(&first);
    let lanes = trace.row["THREAD"]
        .iter()
        .filter(|t| t.contains("(lane 2)"))
        .count();
    assert!(lanes >= 1, "{:?}", trace.row["THREAD"]);
}

#[test]
fn presets_are_well_formed_and_name_types_the_trace_labels() {
    let reports = pithtrain_nodes();
    let (_dir, prv) = convert(&reports, &[]);
    let trace = parse(&prv);
    // The GPU-metric and MPI presets name types only captures with them have.
    let with_metrics = crate::util::synth(
        "--preset ddp --nodes 1 --gpus-per-node 1 --gpu-metrics --cuda-graphs --mpi",
    );
    let (_metrics_dir, metrics_prv) = convert(&[with_metrics.path().join("node0.sqlite")], &[]);
    let metrics_trace = parse(&metrics_prv);
    let labels: Vec<&String> = [&trace, &metrics_trace]
        .iter()
        .flat_map(|t| t.pcf.values().map(|(l, _)| l))
        .collect();
    let dir = crate::util::root().join("cfgs");
    let mut presets = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "cfg") {
            continue;
        }
        presets += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.display();
        assert!(
            text.starts_with("#ParaverCFG\nConfigFile.Version: 3.4\n"),
            "{name}"
        );
        assert!(
            text.contains("ConfigFile.BeginDescription")
                && text.contains("ConfigFile.EndDescription")
        );
        let declared: usize = text
            .lines()
            .find_map(|l| l.strip_prefix("ConfigFile.NumWindows: "))
            .unwrap()
            .parse()
            .unwrap();
        let windows = text.matches("< NEW DISPLAYING WINDOW ").count();
        assert_eq!(declared, windows, "{name}");
        let ids: Vec<u32> = (1..=windows as u32).collect();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("window_filter_module evt_type_label ") {
                for label in rest.split('"').skip(1).step_by(2) {
                    let pattern = format!("^{}$", regex::escape(label).replace(r"\*", ".*"));
                    let re = Regex::new(&pattern).unwrap();
                    assert!(
                        labels.iter().any(|l| re.is_match(l)),
                        "{name}: label {label:?} is not in the .pcf"
                    );
                }
            }
            for key in ["Analyzer2D.ControlWindow: ", "Analyzer2D.DataWindow: "] {
                if let Some(id) = line.strip_prefix(key) {
                    assert!(ids.contains(&id.parse().unwrap()), "{name}: {line}");
                }
            }
        }
    }
    assert_eq!(presets, 16);
}

/// Issue 15: each NCCL kernel's role and evidence are events on its begin record, with the same
/// counts per role as `streams` gives (one classification for tables and pictures).
#[test]
fn nccl_kernels_carry_their_role_and_evidence() {
    let reports = pithtrain_nodes();
    let (_dir, prv) = convert(&reports, &[]);
    let trace = parse(&prv);
    let mut ours: BTreeMap<String, u64> = BTreeMap::new();
    let mut evidence = 0;
    for (.., pairs) in &trace.events {
        for &(ty, value) in pairs {
            let label = |ty: u32| trace.pcf[&ty].1[&value].clone();
            match (ty, value) {
                (_, 0) => {}
                (63_100_004, _) => *ours.entry(label(ty)).or_default() += 1,
                (63_100_005, _) => {
                    assert!(["framework", "nccl_nvtx"].contains(&label(ty).as_str()));
                    evidence += 1;
                }
                _ => {}
            }
        }
    }
    assert_eq!(trace.pcf[&63_100_004].0, "nsys-lens communication role");
    let paths: Vec<&str> = reports.iter().map(|p| p.to_str().unwrap()).collect();
    let want = crate::util::comm_roles(&paths);
    assert_eq!(ours, want);
    assert_eq!(evidence, want.values().sum::<u64>());
    assert!(
        want.contains_key("ep_a2a") && want.contains_key("barrier"),
        "{want:?}"
    );
}

/// Per task (from 1), ∫ value dt of one event type's step function over the trace.
pub fn integrate_type(trace: &Trace, ty: u32) -> BTreeMap<usize, u64> {
    let mut open: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
    let mut total: BTreeMap<usize, u64> = BTreeMap::new();
    for (time, task, _, pairs) in &trace.events {
        for &(_, value) in pairs.iter().filter(|(t, _)| *t == ty) {
            if let Some((since, v)) = open.insert(*task, (*time, value)) {
                *total.entry(*task).or_default() += v * (time - since);
            }
        }
    }
    total
}

/// Issue 36: every NVTX type listed the whole NVTX name table, and every GPU type the kernel
/// names, so the real 2xH100 export's `.pcf` (18,500 NVTX names, four copies) was larger than
/// its `.prv`. Types that share values now share one table, each name written once; and a
/// PyTorch range (`aten::to, seq = 1828, op_id = 991315`, unique per call) is valued by its
/// operator (`aten::to`), its sequence number and op id in types of their own: the `.pcf` is
/// under a fifth of the `.prv`, and nothing is lost (counted here against SQL).
#[test]
fn value_tables_are_written_once_and_shared_by_their_types() {
    let Some(report) = real("nsysai_mfu_2gpu_before_2026.2.1.sqlite") else {
        return;
    };
    let (_dir, prv) = convert(std::slice::from_ref(&report), &[]);
    let pcf = std::fs::read_to_string(prv.with_extension("pcf")).unwrap();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for line in pcf.lines().filter(|l| l.contains(" :aten::")) {
        *seen.entry(line).or_default() += 1;
    }
    assert!(seen.len() > 40, "{} NVTX names", seen.len());
    assert!(seen.values().all(|&n| n == 1), "a name written twice");
    let trace = parse(&prv);
    let nvtx = |ty: u32| trace.pcf[&ty].1.len();
    assert_eq!(nvtx(9004), nvtx(9600), "NVTX types read one table");
    assert_eq!(trace.pcf[&63_000_006].1, trace.pcf[&63_000_007].1);
    let prv_bytes = std::fs::metadata(&prv).unwrap().len();
    assert!(
        (pcf.len() as u64) * 5 <= prv_bytes,
        ".pcf {} bytes, .prv {prv_bytes}",
        pcf.len()
    );
    // Per operator: its ranges, their sequence numbers and op ids, from the trace and SQL.
    let labels = &trace.pcf[&9600].1;
    let mut traced: BTreeMap<String, [u64; 4]> = BTreeMap::new();
    for (.., pairs) in &trace.events {
        let Some(&(_, value)) = pairs.iter().find(|(t, v)| *t == 9600 && *v != 0) else {
            continue;
        };
        let get = |ty: u32| pairs.iter().find(|(t, _)| *t == ty).map(|&(_, v)| v);
        let label = labels[&value].trim_start_matches(':').to_string();
        let row = traced.entry(label).or_default();
        row[0] += 1;
        row[1] += u64::from(get(63_100_040).is_some());
        row[2] += get(63_100_040).unwrap_or(0);
        row[3] += get(63_100_041).unwrap_or(0);
    }
    let db = rusqlite::Connection::open(&report).unwrap();
    let mut stmt = db
        .prepare(
            "WITH t AS (SELECT text, instr(text, ', seq = ') AS s, instr(text, ', op_id = ') AS o \
             FROM NVTX_EVENTS WHERE text IS NOT NULL AND eventType = 59) \
             SELECT substr(text, 1, CASE WHEN s > 0 THEN s ELSE o END - 1), count(*), \
             sum(s > 0), sum(CASE WHEN s > 0 THEN CAST(substr(text, s + 8, o - s - 8) AS INTEGER) \
             ELSE 0 END), sum(CAST(substr(text, o + 10) AS INTEGER)) FROM t GROUP BY 1",
        )
        .unwrap();
    let sql: BTreeMap<String, [u64; 4]> = stmt
        .query_map([], |r| {
            let n = |i| r.get::<_, i64>(i).map(|v| v as u64);
            Ok((r.get(0)?, [n(1)?, n(2)?, n(3)?, n(4)?]))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(sql.len() > 40);
    assert_eq!(traced, sql);
}

/// Issue 36: every copy carries its source and destination memory kinds, every set the memory
/// it wrote (`ENUM_CUDA_MEM_KIND` id + 1, counted here in SQL), and a failed CUDA call its return
/// code (zeroed with the call's end); calls that succeeded carry none.
#[test]
fn copies_carry_memory_kinds_and_failed_calls_their_code() {
    let Some(report) = real("nsysai_mfu_2gpu_before_2026.2.1.sqlite") else {
        return;
    };
    let (_dir, prv) = convert(std::slice::from_ref(&report), &[]);
    let trace = parse(&prv);
    let count = |ty: u32| {
        let mut by_value: BTreeMap<u64, u64> = BTreeMap::new();
        for (.., pairs) in &trace.events {
            for &(t, v) in pairs.iter().filter(|(t, v)| *t == ty && *v != 0) {
                assert_eq!(t, ty);
                *by_value.entry(v).or_default() += 1;
            }
        }
        by_value
    };
    let db = rusqlite::Connection::open(&report).unwrap();
    let sql = |query: &str| {
        let mut by_value: BTreeMap<u64, u64> = BTreeMap::new();
        let mut stmt = db.prepare(query).unwrap();
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
            .unwrap();
        for row in rows {
            let (kind, n) = row.unwrap();
            *by_value.entry(kind as u64 + 1).or_default() += n as u64;
        }
        by_value
    };
    let copies = "FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1";
    let sets = "SELECT memKind, count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET GROUP BY 1";
    assert_eq!(
        count(63_100_031),
        sql(&format!("SELECT srcKind, count(*) {copies}"))
    );
    let mut destinations = sql(&format!("SELECT dstKind, count(*) {copies}"));
    for (kind, n) in sql(sets) {
        *destinations.entry(kind).or_default() += n;
    }
    assert_eq!(count(63_100_032), destinations);
    assert!(
        count(63_100_030).is_empty(),
        "no call of this export failed"
    );
    let pcf = std::fs::read_to_string(prv.with_extension("pcf")).unwrap();
    assert!(pcf.contains("63100031    nsys-lens copy source memory"));
    assert!(pcf.contains("3      device"));

    use crate::scenario::{PID, Scenario};
    let (_dir, report) = Scenario::new()
        .launch((PID, PID), 1000, 1)
        .kernel((PID, 0, 7), (1100, 1500), "gemm_kernel", 1)
        .launch_returning((PID, PID), 2000, 2, 700)
        .write();
    let (_out, prv) = convert(&[report], &[]);
    let trace = parse(&prv);
    let codes: Vec<u64> = (trace.events.iter())
        .flat_map(|(.., pairs)| pairs.iter().filter(|(t, _)| *t == 63_100_030))
        .map(|&(_, v)| v)
        .collect();
    assert_eq!(codes, [700, 0], "the failed call's code, then its end");
}
