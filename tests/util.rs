//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A committed fixture file.
pub fn fixture(path: &str) -> PathBuf {
    root().join("fixtures").join(path)
}

/// A real export under `../shared/real-data/nsys/`, or None (with a note) when absent.
pub fn real(path: &str) -> Option<PathBuf> {
    let p = root().join("../shared/real-data/nsys").join(path);
    if p.exists() {
        Some(p)
    } else {
        skipped(&format!(
            "{} is absent (../shared/real-data is not beside the repository)",
            p.display()
        ));
        None
    }
}

/// A real capture under `../shared/real-data/` (`gpu/...`, `kineto/...`), or None (with a
/// note).
pub fn real_capture(path: &str) -> Option<PathBuf> {
    let p = root().join("../shared/real-data").join(path);
    if p.exists() {
        return Some(p);
    }
    skipped(&format!("{} is absent", p.display()));
    None
}

/// Runs the built binary.
pub fn nsys_lens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// stdout and stderr as text.
pub fn texts(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `SELECT count(*)` straight from SQLite (independent of the reader under test); 0 when the
/// table is absent.
pub fn count(path: &Path, table: &str) -> u64 {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("opens");
    conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n as u64)
    .unwrap_or(0)
}

/// Copies a fixture into a fresh temporary directory and applies `sql` to the copy.
pub fn damaged_copy(fixture_path: &str, sql: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join("damaged.sqlite");
    std::fs::copy(fixture(fixture_path), &copy).expect("copy");
    if !sql.is_empty() {
        let conn = rusqlite::Connection::open(&copy).expect("opens");
        conn.execute_batch(sql).expect("damage applies");
    }
    (dir, copy)
}

/// The `.sqlite` files of a directory, sorted.
pub fn sqlite_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("readable directory")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sqlite"))
        .collect();
    files.sort();
    files
}

/// The two nodes of the committed PithTrain fixture (same pids on both).
pub fn pithtrain_nodes() -> [PathBuf; 2] {
    [
        fixture("pithtrain_pp2_ep2/node0.sqlite"),
        fixture("pithtrain_pp2_ep2/node1.sqlite"),
    ]
}

/// `convert` options that keep every event, whatever the clock (session-relative or UTC): the
/// window from 0 to far beyond any capture.
pub const EVERY_TIME: [&str; 4] = ["--start", "0", "--end", "9000000000000000000"];

/// Runs `convert --to <target> -o <dir>/out REPORTS EXTRA` in a fresh directory; returns the
/// directory and the output base path (`<dir>/out`).
pub fn convert_to(
    target: &str,
    reports: &[PathBuf],
    extra: &[&str],
) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().join("out");
    let mut args: Vec<String> = vec![
        "convert".into(),
        "--to".into(),
        target.into(),
        "-o".into(),
        base.display().to_string(),
    ];
    args.extend(reports.iter().map(|r| r.display().to_string()));
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = nsys_lens(&args);
    let (_, err) = texts(&output);
    assert!(output.status.success(), "{args:?}: {err}");
    (dir, base)
}

/// One GPU operation read straight from SQL: pid, device, stream, start, end, and whether it is a
/// kernel.
pub type SqlOp = (u32, u32, u32, i64, i64, bool);

/// Every kernel, copy and set of an export, read with SQL (independently of the reader).
pub fn sql_gpu_ops(path: &Path) -> Vec<SqlOp> {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("opens");
    let mut ops = Vec::new();
    for table in [
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
    ] {
        let sql = format!(
            "SELECT (globalPid >> 24) & 16777215, deviceId, streamId, start, end FROM {table}"
        );
        let Ok(mut stmt) = conn.prepare(&sql) else {
            continue;
        };
        let kernel = table.ends_with("KERNEL");
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    kernel,
                ))
            })
            .expect("query runs");
        ops.extend(rows.map(|r| r.expect("row")));
    }
    ops
}

/// Length of the union of intervals.
pub fn union_length(mut spans: Vec<(i64, i64)>) -> i64 {
    spans.sort_unstable();
    let (mut total, mut reach) = (0, i64::MIN);
    for (s, e) in spans {
        if e > reach {
            total += e - s.max(reach);
            reach = e;
        }
    }
    total
}

/// `[start, end)` intervals merged, sorted.
pub fn merged(mut spans: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    spans.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::new();
    for (s, e) in spans {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Length of `a` not covered by `b` (both merged).
pub fn uncovered(a: &[(i64, i64)], b: &[(i64, i64)]) -> i64 {
    a.iter()
        .map(|&(s, e)| {
            let covered: i64 = b.iter().map(|&(x, y)| (y.min(e) - x.max(s)).max(0)).sum();
            (e - s) - covered
        })
        .sum()
}

/// Runs `nsys-lens synth -o <fresh temp dir> ARGS` (ARGS space-separated) and returns the
/// directory holding the exports.
pub fn synth(args: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut all = vec!["synth", "-o", dir.path().to_str().expect("utf-8")];
    all.extend(args.split_whitespace());
    let out = nsys_lens(&all);
    assert!(out.status.success(), "synth {args}: {}", texts(&out).1);
    dir
}

/// The `truth.json` a synth run wrote into `dir`: the simulator's own ground truth.
pub fn truth(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("truth.json")).expect("truth.json");
    serde_json::from_str(&text).expect("valid JSON")
}

/// NCCL kernels per role over the whole capture, from `streams --whole --format json`'s
/// `comm_roles`.
pub fn comm_roles(reports: &[&str]) -> std::collections::BTreeMap<String, u64> {
    let mut args = vec!["streams", "--whole", "--format", "json"];
    args.extend(reports);
    let out = nsys_lens(&args);
    assert!(out.status.success(), "{}", texts(&out).1);
    let json: serde_json::Value = serde_json::from_str(&texts(&out).0).unwrap();
    let mut roles = std::collections::BTreeMap::new();
    for row in json["rows"].as_array().unwrap() {
        for group in row["comm_roles"].as_array().unwrap() {
            let role = group["role"].as_str().unwrap().to_string();
            *roles.entry(role).or_default() += group["kernels"].as_u64().unwrap();
        }
    }
    roles
}

/// Runs a command with `--format json -q`.
fn run_json(args: &[&str]) -> Output {
    let mut all = args.to_vec();
    all.extend(["--format", "json", "-q"]);
    nsys_lens(&all)
}

/// Runs a command that must succeed with `--format json -q` and parses what it prints.
pub fn json(args: &[&str]) -> serde_json::Value {
    let out = run_json(args);
    assert!(out.status.success(), "{args:?}: {}", texts(&out).1);
    serde_json::from_str(&texts(&out).0).expect("valid JSON")
}

/// Runs a command that succeeds, or prints an empty table and exits 1 (as every command does
/// when it finds nothing, its notes saying why), with `--format json -q`; what it prints.
pub fn json_or_empty(args: &[&str]) -> serde_json::Value {
    let out = run_json(args);
    let json: serde_json::Value = serde_json::from_str(&texts(&out).0).expect("valid JSON");
    let empty = json["rows"].as_array().is_some_and(Vec::is_empty);
    let expected = if empty { Some(1) } else { Some(0) };
    assert_eq!(out.status.code(), expected, "{args:?}: {}", texts(&out).1);
    json
}

/// The `rows` of a command's JSON.
pub fn rows(v: &serde_json::Value) -> &Vec<serde_json::Value> {
    v["rows"].as_array().expect("rows")
}

/// An integer field.
pub fn int(v: &serde_json::Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// Says that a test skipped part of its work, and why, where `cargo test` shows it: on the
/// process's stderr directly (libtest captures `eprintln!`, so a note there would be seen only
/// with `--nocapture`, and the test would just print `ok`).
pub fn skipped(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED (part of a test): {why}");
}

/// Writes the Paraver trace (`base.prv`, `.pcf`, `.row`; its writer holding `memory` bytes) and
/// the Perfetto trace (`base.perfetto-trace`, returned) of `plan`, each writer with its own
/// stream of events.
pub fn write_apart(
    plan: &nsys_lens::export::Plan,
    parts: &[nsys_lens::input::capture::Joined],
    prepared: &[Option<nsys_lens::export::prepare::Prepared>],
    base: &Path,
    memory: usize,
) -> PathBuf {
    use nsys_lens::export::{paraver, perfetto};
    let staged = nsys_lens::output::Staged::default();
    let options = paraver::Options {
        gzip: false,
        memory,
    };
    paraver::write(plan, parts, prepared, base, options, None, &staged).unwrap();
    let trace = base.with_extension("perfetto-trace");
    let options = (perfetto::Options::default(), 1);
    perfetto::write(plan, parts, prepared, &trace, options, None, &staged).unwrap();
    staged.commit().unwrap();
    trace
}

/// Runs the binary with its translation cache (of torch.profiler and JAX traces) in `cache`.
pub fn run_in(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
        .args(args)
        .env("NSYS_LENS_CACHE", cache)
        .output()
        .expect("the binary runs")
}

/// As [`run_in`], a command that must succeed; its stdout as JSON.
pub fn json_in(cache: &Path, args: &[&str]) -> serde_json::Value {
    let out = run_in(cache, args);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{args:?}: {stderr}");
    serde_json::from_str(&stdout).expect("JSON output")
}
