//! `convert --max-size` and `--split-by node` (issue 34): Perfetto traces a browser can open,
//! checked by the independent decoder (`tests/perfetto_check.py`).

use crate::perfetto::check;
use crate::util::{convert_to, nsys_lens, sqlite_files, synth, texts};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The ranks a `--max-size` note lists after `what` (`the slices of ranks 0, 2`), up to the
/// next ` and` or ` (`.
fn ranks_after(note: &str, what: &str) -> Vec<u32> {
    let Some((_, rest)) = note.split_once(what) else {
        return Vec::new();
    };
    let list = rest
        .split([' ', '('])
        .take_while(|w| !w.is_empty() && *w != "and");
    list.filter_map(|w| w.trim_end_matches(',').parse().ok())
        .collect()
}

/// The checker's slice counts, by category.
fn counts(summary: &Value) -> Vec<(String, u64)> {
    let map = summary["counts"].as_object().expect("counts");
    map.iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

#[test]
fn max_size_keeps_the_trace_within_it_and_says_what_it_kept() {
    let run = synth("--preset ddp --nodes 4 --steps 3");
    let reports = sqlite_files(run.path());
    let (dir, base) = convert_to("perfetto", &reports, &["--max-size", "30K"]);
    let trace = base.with_extension("perfetto-trace");
    let size = std::fs::metadata(&trace).unwrap().len();
    assert!(size <= 30 * 1024, "{size} bytes");
    // What it kept, said again by a run that prints its lines.
    let out = nsys_lens(&[
        "convert",
        run.path().to_str().unwrap(),
        "--to",
        "perfetto",
        "--max-size",
        "30K",
        "-o",
        dir.path().join("again").to_str().unwrap(),
    ]);
    let (_, err) = texts(&out);
    let note = err
        .lines()
        .find(|l| l.starts_with("--max-size"))
        .expect(&err);
    assert!(note.contains("kept each rank's steady window"), "{note}");
    let sliced = ranks_after(note, "the slices of ranks ");
    let counted = ranks_after(note, "the counters only of ranks ");
    assert_eq!(sliced.first(), Some(&0), "{note}");
    assert!(!counted.is_empty(), "{note}");
    let mut all: Vec<u32> = sliced.iter().chain(&counted).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..8).collect::<Vec<u32>>(), "{note}");
    let Some(summary) = check(&trace) else {
        return;
    };
    // The sliced ranks draw what they draw alone over their steady windows.
    let list: Vec<String> = sliced.iter().map(u32::to_string).collect();
    let ranks = list.join(",");
    let (_alone_dir, alone) = convert_to("perfetto", &reports, &["--steady", "--ranks", &ranks]);
    let alone = check(&alone.with_extension("perfetto-trace")).unwrap();
    assert_eq!(counts(&summary), counts(&alone));
    // Every rank left out is still there, by its counters.
    let counters = summary["counters"].as_object().unwrap();
    for rank in counted {
        let compute = counters.keys().any(|k| {
            k.starts_with(&format!("rank {rank} ·")) && k.ends_with("| compute kernels in flight")
        });
        assert!(compute, "rank {rank} has no counters");
    }
}

#[test]
fn max_size_sizes_perfetto_only() {
    let run = synth("--preset ddp --nodes 2");
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("out");
    let out = nsys_lens(&[
        "convert",
        run.path().to_str().unwrap(),
        "--max-size",
        "30K",
        "-o",
        base.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(
        texts(&out).1.contains("add --to perfetto"),
        "{}",
        texts(&out).1
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // A size not even the counters fit in is refused, saying what to do, and writes nothing.
    let out = nsys_lens(&[
        "convert",
        run.path().to_str().unwrap(),
        "--to",
        "perfetto",
        "--max-size",
        "1",
        "-o",
        base.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = texts(&out).1;
    assert!(
        err.contains("are estimated above it") && err.contains("give a shorter --start/--end"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Files of `dir` whose names start with `prefix`.
fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    found.sort();
    found
}

#[test]
fn split_by_node_writes_one_trace_per_node_on_one_clock() {
    let run = synth("--preset ddp --nodes 4 --steps 2");
    let reports = sqlite_files(run.path());
    let (dir, base) = convert_to("perfetto,paraver", &reports, &["--split-by", "node"]);
    let index = std::fs::read_to_string(dir.path().join("out.index.html")).unwrap();
    for n in 0..4 {
        let node = format!("out.node{n}");
        for ext in ["perfetto-trace", "prv", "pcf", "row"] {
            let file = format!("{node}.{ext}");
            assert!(dir.path().join(&file).exists(), "{file}");
        }
        assert!(
            index.contains(&format!("href=\"{node}.perfetto-trace\"")),
            "{index}"
        );
    }
    assert!(!base.with_extension("perfetto-trace").exists());
    let (_whole_dir, whole) = convert_to("perfetto", &reports, &[]);
    let Some(whole) = check(&whole.with_extension("perfetto-trace")) else {
        return;
    };
    let mut sum: std::collections::BTreeMap<String, u64> = Default::default();
    let mut processes = Vec::new();
    for trace in files(dir.path(), "out.node")
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "perfetto-trace"))
    {
        let node = check(trace).unwrap();
        // One clock: every node's trace is rebased as the whole run's.
        assert_eq!(node["rebase_offset_ns"], whole["rebase_offset_ns"]);
        for (category, n) in counts(&node) {
            *sum.entry(category).or_default() += n;
        }
        processes.extend(node["processes"].as_array().unwrap().clone());
    }
    let whole_counts: std::collections::BTreeMap<String, u64> =
        counts(&whole).into_iter().collect();
    assert_eq!(sum.get("kernel"), whole_counts.get("kernel"));
    for category in ["cuda_api", "nvtx", "memcpy", "memset"] {
        assert_eq!(sum.get(category), whole_counts.get(category), "{category}");
    }
    assert_eq!(Value::Array(processes), whole["processes"]);
}
