//! The corruption matrix: damaged and hostile inputs through `info`, `overlap` and `convert`.
//! Every case ends with the documented exit code, no panic, one error line naming the file and
//! the problem when refused, and no output file (nor temporary file) left behind by a failure.

use crate::util::{damaged_copy, fixture, nsys_lens, synth, texts};
use std::path::PathBuf;
use std::process::Command;

const NODE0: &str = "pithtrain_pp2_ep2/node0.sqlite";

/// What a case must give.
enum Expect {
    /// Every command succeeds (`overlap` may find nothing: exit 1).
    Accepted,
    /// Every command exits 2 with one line naming the file and saying this.
    Refused(&'static str),
}

/// Runs `info`, `overlap` and `convert` on `inputs` and checks the outcome of each.
fn check(case: &str, inputs: &[PathBuf], expect: Expect) {
    let out_dir = tempfile::tempdir().unwrap();
    let base = out_dir.path().join("out");
    let paths: Vec<&str> = inputs.iter().map(|p| p.to_str().unwrap()).collect();
    let commands: Vec<Vec<&str>> = vec![
        [&["info", "-q"][..], &paths].concat(),
        [&["overlap", "-q"][..], &paths].concat(),
        [&["convert", "-q", "-o", base.to_str().unwrap()][..], &paths].concat(),
    ];
    for args in commands {
        let output = nsys_lens(&args);
        let (_, err) = texts(&output);
        let code = output.status.code();
        assert!(
            !err.contains("panicked"),
            "{case}: {args:?} panicked: {err}"
        );
        match expect {
            Expect::Accepted => {
                let ok = code == Some(0) || (args[0] == "overlap" && code == Some(1));
                assert!(ok, "{case}: {args:?} exited {code:?}: {err}");
            }
            Expect::Refused(problem) => {
                assert_eq!(code, Some(2), "{case}: {args:?}: {err}");
                assert!(err.contains(problem), "{case}: says {problem:?}: {err}");
                let named = inputs
                    .iter()
                    .any(|p| err.contains(&p.display().to_string()));
                assert!(named, "{case}: names the file: {err}");
                assert_eq!(err.trim_end().lines().count(), 1, "{case}: one line: {err}");
            }
        }
    }
    let left: Vec<String> = std::fs::read_dir(out_dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    match expect {
        Expect::Accepted => {
            let mut expected = ["out.perfetto-trace", "out.prv", "out.pcf", "out.row"].to_vec();
            expected.sort();
            let mut got = left.clone();
            got.sort();
            assert_eq!(got, expected, "{case}: outputs (no temporary files)");
        }
        Expect::Refused(_) => assert!(left.is_empty(), "{case}: left {left:?}"),
    }
}

/// A damaged copy of the fixture's first node.
fn damaged(sql: &str) -> (tempfile::TempDir, PathBuf) {
    damaged_copy(NODE0, sql)
}

#[test]
fn truncated_and_overwritten_files_are_refused() {
    let len = std::fs::metadata(fixture(NODE0)).unwrap().len();
    for at in [512, 4096, len / 2, len - 4096] {
        let (_dir, path) = damaged("");
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(at).unwrap();
        check(
            &format!("truncated at {at}"),
            &[path],
            Expect::Refused("malformed"),
        );
    }
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..4 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let (_dir, path) = damaged("");
        let mut bytes = std::fs::read(&path).unwrap();
        // Damage a whole page's worth somewhere past the header and schema pages.
        let at = 8192 + (x as usize % (bytes.len() - 12_288));
        for (i, b) in bytes[at..at + 4096].iter_mut().enumerate() {
            *b = (x >> (i % 56)) as u8;
        }
        std::fs::write(&path, bytes).unwrap();
        // Overwritten pages are found when read: refused, or (when they held free space or
        // data the commands do not need) accepted; never a panic.
        let out = nsys_lens(&["info", "-q", path.to_str().unwrap()]);
        let (_, err) = texts(&out);
        assert!(!err.contains("panicked"), "{err}");
        assert!(matches!(out.status.code(), Some(0) | Some(2)), "{err}");
        if out.status.code() == Some(2) {
            assert!(err.contains(&path.display().to_string()), "{err}");
        }
    }
}

#[test]
fn missing_or_altered_tables_and_columns() {
    let (_a, no_strings) = damaged("DROP TABLE StringIds;");
    check(
        "StringIds dropped",
        &[no_strings],
        Expect::Refused("StringIds"),
    );
    let (_b, no_kernels) = damaged("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;");
    check(
        "kernel table dropped (tables are created lazily)",
        &[no_kernels],
        Expect::Accepted,
    );
    let (_c, renamed) =
        damaged("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME COLUMN shortName TO shortNameOld;");
    check("column renamed", &[renamed], Expect::Refused("shortName"));
    let (_d, nulls) = damaged(
        "CREATE TABLE k2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL; \
         DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; \
         ALTER TABLE k2 RENAME TO CUPTI_ACTIVITY_KIND_KERNEL; \
         UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = NULL WHERE rowid = 3;",
    );
    check(
        "NULL in a NOT NULL column",
        &[nulls],
        Expect::Refused("end"),
    );
    let (_e, text) =
        damaged("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'soon' WHERE rowid = 2;");
    check(
        "TEXT where INTEGER belongs",
        &[text],
        Expect::Refused("start"),
    );
}

#[test]
fn odd_but_valid_rows_are_accepted() {
    let cases = [
        (
            "duplicate rows",
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL;",
        ),
        (
            "a kernel of a process nsys never listed",
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = 99999 * 16777216 WHERE rowid = 5;",
        ),
        (
            "names with NUL bytes",
            "UPDATE StringIds SET value = 'gemm' || char(0) || 'kernel' \
             WHERE id = (SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1);",
        ),
        (
            "a 1 MB name",
            "UPDATE StringIds SET value = hex(zeroblob(500000)) \
             WHERE id = (SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1);",
        ),
        (
            "negative times (opened before the capture)",
            "UPDATE NVTX_EVENTS SET start = -5000000000 WHERE rowid = 3;",
        ),
        (
            "NVTX ranges that never end",
            "UPDATE NVTX_EVENTS SET end = NULL WHERE rowid IN (4, 5, 6);",
        ),
    ];
    for (case, sql) in cases {
        let (_dir, path) = damaged(sql);
        check(case, &[path], Expect::Accepted);
    }
}

#[test]
fn reversed_intervals_and_times_at_the_edge_of_i64() {
    let (_a, reversed) =
        damaged("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET end = start - 10 WHERE rowid = 7;");
    check(
        "an API call ending before it starts",
        &[reversed],
        Expect::Refused("before"),
    );
    // Times beyond ±2^61 ns would make differences overflow: refused, alone or merged.
    let near = "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 9223372036854775000, \
                end = 9223372036854775800 WHERE rowid = 1;";
    let (_b, edge) = damaged(near);
    check(
        "a time near i64::MAX",
        std::slice::from_ref(&edge),
        Expect::Refused("out of range"),
    );
    let (_c, late) = damaged_copy("pithtrain_pp2_ep2/node1.sqlite", near);
    check(
        "a time that overflows the merged clock",
        &[fixture(NODE0), late],
        Expect::Refused("out of range"),
    );
    let lowest =
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -9223372036854775807 WHERE rowid = 1;";
    let (_d, low) = damaged(lowest);
    check(
        "a time near i64::MIN",
        &[low],
        Expect::Refused("out of range"),
    );
}

#[test]
fn a_hundred_thousand_nested_nvtx_ranges() {
    // Nested ranges [i, 10^7 - i] on the main thread: lanes keep every track under
    // trace_processor's depth limit, and Paraver's stacked values balance.
    let sql = format!(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99999) \
         INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) \
         SELECT 1000 + i, 10000000 - i, 59, 'level', {} FROM n;",
        (1i64 << 48) | (41_207 << 24) | 41_207
    );
    let (_dir, path) = damaged(&sql);
    check(
        "100 000 nested NVTX ranges",
        std::slice::from_ref(&path),
        Expect::Accepted,
    );
}

#[test]
fn outputs_that_cannot_be_written() {
    let input = fixture(NODE0);
    let dir = tempfile::tempdir().unwrap();
    // A "directory" that is a file.
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let target = file.join("out");
    let out = nsys_lens(&[
        "convert",
        "-q",
        "-o",
        target.to_str().unwrap(),
        input.to_str().unwrap(),
    ]);
    let (_, err) = texts(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("plain-file"), "{err}");
    // An output that would replace an input.
    let as_prv = dir.path().join("run.prv");
    std::fs::copy(&input, &as_prv).unwrap();
    let before = std::fs::read(&as_prv).unwrap();
    let base = dir.path().join("run");
    let out = nsys_lens(&[
        "convert",
        "--to",
        "paraver",
        "-o",
        base.to_str().unwrap(),
        as_prv.to_str().unwrap(),
    ]);
    let (_, err) = texts(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("input of this run"), "{err}");
    assert_eq!(
        std::fs::read(&as_prv).unwrap(),
        before,
        "the input is intact"
    );
    // A rank filter that matches nothing.
    let out = nsys_lens(&["convert", "--ranks", "7", input.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn an_interrupt_removes_partial_outputs() {
    // A run big enough that the conversion is still writing when interrupted.
    let dir = synth("--preset ddp --nodes 1 --gpus-per-node 1 --layers 8 --steps 150");
    let out_dir = tempfile::tempdir().unwrap();
    let base = out_dir.path().join("out");
    let mut child = Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
        .args(["convert", "-q", "-o", base.to_str().unwrap()])
        .arg(dir.path().join("node0.sqlite"))
        .spawn()
        .unwrap();
    // Wait until a temporary output exists, then interrupt.
    let started = std::time::Instant::now();
    while std::fs::read_dir(out_dir.path()).unwrap().count() == 0 {
        assert!(started.elapsed().as_secs() < 60, "no output appeared");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();
    let left: Vec<String> = std::fs::read_dir(out_dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    // Whatever remains is a finished output (Perfetto may complete before the interrupt);
    // no temporary file survives.
    let finished = ["out.perfetto-trace", "out.prv", "out.pcf", "out.row"];
    assert!(
        left.iter().all(|f| finished.contains(&f.as_str())),
        "left {left:?}"
    );
    if !status.success() {
        assert_eq!(status.code(), Some(130));
        assert!(
            left.len() < finished.len(),
            "interrupted, yet every output exists: {left:?}"
        );
    }
}
