//! Bad input gets one clear error line naming the file and the problem, exit code 2, no panic;
//! harmless oddities become counted warnings.

use crate::util::{damaged_copy, fixture, nsys_lens, texts};
use std::path::Path;

const NODE0: &str = "pithtrain_pp2_ep2/node0.sqlite";

/// Runs `info` on `path` and checks exit code 2 and that stderr names the file and `problem`.
fn refused(path: &Path, problem: &str) {
    let out = nsys_lens(&["info", path.to_str().unwrap()]);
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains(&path.display().to_string()),
        "names the file: {stderr}"
    );
    assert!(stderr.contains(problem), "says {problem:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
}

/// Runs `info` on a damaged copy and returns its stdout, requiring success.
fn accepted(path: &Path) -> String {
    let out = nsys_lens(&["info", path.to_str().unwrap()]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    stdout
}

#[test]
fn missing_file() {
    let dir = tempfile::tempdir().unwrap();
    refused(&dir.path().join("absent.sqlite"), "cannot read");
}

#[test]
fn directory_without_exports() {
    // A directory stands for its .sqlite and part files (one per node); an empty one is refused.
    let dir = tempfile::tempdir().unwrap();
    refused(
        dir.path(),
        "no .sqlite or .lens-part file in this directory",
    );
    let out = nsys_lens(&["info", fixture("pithtrain_pp2_ep2").to_str().unwrap()]);
    let (stdout, _) = texts(&out);
    assert!(out.status.success());
    assert!(stdout.starts_with("2 report(s), 2 host(s)"), "{stdout}");
}

#[test]
fn empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.sqlite");
    std::fs::write(&path, b"").unwrap();
    refused(&path, "the file is empty");
}

#[test]
fn not_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.sqlite");
    std::fs::write(&path, "just some text, not a database\n").unwrap();
    refused(&path, "not a SQLite database");
}

#[test]
fn sqlite_but_not_an_export() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('x');")
        .unwrap();
    drop(conn);
    refused(&path, "not an nsys export");
}

#[test]
fn export_without_events() {
    let (_dir, path) = damaged_copy(
        NODE0,
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL; DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME;
         DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY; DELETE FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
         DELETE FROM NVTX_EVENTS;",
    );
    refused(&path, "holds no CUDA kernels");
}

#[test]
fn truncated_file() {
    let (_dir, path) = damaged_copy(NODE0, "");
    let bytes = std::fs::read(&path).unwrap();
    for keep in [bytes.len() / 2, bytes.len() / 5, 4096] {
        std::fs::write(&path, &bytes[..keep]).unwrap();
        refused(&path, "truncated or corrupted");
    }
}

#[test]
fn bytes_overwritten_in_the_middle() {
    let (_dir, path) = damaged_copy(NODE0, "");
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    for (i, b) in bytes[middle..middle + 8192].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(151).wrapping_add(7);
    }
    std::fs::write(&path, &bytes).unwrap();
    refused(&path, "truncated or corrupted");
}

#[test]
fn kernel_ending_before_it_starts() {
    let (_dir, path) = damaged_copy(
        NODE0,
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 10 WHERE rowid = 3;",
    );
    refused(&path, "CUPTI_ACTIVITY_KIND_KERNEL row 3: end");
}

#[test]
fn kernel_name_missing_from_string_ids() {
    let (_dir, path) = damaged_copy(
        NODE0,
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET shortName = 987654 WHERE rowid = 5;",
    );
    refused(&path, "refers to string id 987654, which StringIds lacks");
}

#[test]
fn text_where_an_integer_belongs() {
    let (_dir, path) = damaged_copy(
        NODE0,
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'soon' WHERE rowid = 2;",
    );
    refused(
        &path,
        "column start holds text where an integer is expected",
    );
}

#[test]
fn required_column_dropped() {
    let (_dir, path) = damaged_copy(
        NODE0,
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN shortName;",
    );
    refused(
        &path,
        "table CUPTI_ACTIVITY_KIND_KERNEL has no column shortName",
    );
}

#[test]
fn csv_is_a_usage_error_for_info() {
    let out = nsys_lens(&["info", "--format", "csv", fixture(NODE0).to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    // info's --format lists only what it takes (issue 21: it listed csv, then refused it).
    assert!(
        texts(&out).1.contains("[possible values: table, json]"),
        "{}",
        texts(&out).1
    );
}

#[test]
fn no_report_is_a_usage_error() {
    let out = nsys_lens(&["info"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn unclosed_nvtx_ranges_are_counted_warnings() {
    let (_dir, path) = damaged_copy(
        NODE0,
        "UPDATE NVTX_EVENTS SET end = NULL WHERE rowid IN (SELECT rowid FROM NVTX_EVENTS WHERE eventType = 59 LIMIT 3);",
    );
    let stdout = accepted(&path);
    assert!(
        stdout.contains("warning: 3 NVTX range(s) never close"),
        "{stdout}"
    );
}

#[test]
fn non_utf8_text_is_decoded_lossily_and_counted() {
    let (_dir, path) = damaged_copy(
        NODE0,
        "UPDATE NVTX_EVENTS SET text = CAST(X'6C61796572FFFE' AS TEXT) WHERE rowid IN (SELECT rowid FROM NVTX_EVENTS WHERE eventType = 59 AND text IS NOT NULL LIMIT 2);",
    );
    let stdout = accepted(&path);
    assert!(
        stdout.contains("warning: 2 text value(s) are not valid UTF-8"),
        "{stdout}"
    );
}

#[test]
fn a_newer_schema_is_read_with_a_warning() {
    let (_dir, path) = damaged_copy(
        NODE0,
        "UPDATE META_DATA_EXPORT SET value = '3.40.0' WHERE name = 'EXPORT_SCHEMA_VERSION';",
    );
    let stdout = accepted(&path);
    assert!(
        stdout.contains("export schema 3.40.0 is newer than this build knows"),
        "{stdout}"
    );
}

#[test]
fn unknown_nvtx_event_types_are_skipped_and_counted() {
    let (_dir, path) = damaged_copy(
        NODE0,
        "UPDATE NVTX_EVENTS SET eventType = 999 WHERE rowid IN (SELECT rowid FROM NVTX_EVENTS WHERE eventType = 59 LIMIT 4);",
    );
    let stdout = accepted(&path);
    assert!(
        stdout.contains("4 NVTX row(s) of unknown event type 999 skipped"),
        "{stdout}"
    );
}

#[test]
fn quiet_leaves_warnings_out_of_the_table() {
    let (_dir, path) = damaged_copy(
        NODE0,
        "UPDATE NVTX_EVENTS SET end = NULL WHERE rowid IN (SELECT rowid FROM NVTX_EVENTS WHERE eventType = 59 LIMIT 1);",
    );
    let out = nsys_lens(&["info", "-q", path.to_str().unwrap()]);
    let (stdout, _) = texts(&out);
    assert!(out.status.success());
    assert!(!stdout.contains("warning"), "{stdout}");
}

#[test]
fn rows_without_global_pid_go_to_the_main_process_with_a_warning() {
    let (_dir, path) = damaged_copy(
        NODE0,
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = NULL WHERE rowid IN (1, 2);",
    );
    let stdout = accepted(&path);
    assert!(
        stdout.contains("2 CUPTI_ACTIVITY_KIND_KERNEL row(s) have no globalPid"),
        "{stdout}"
    );
}
