//! Synchronization links (issue 36): each synchronization record linked from the GPU operation
//! it waited for, in the Perfetto trace as decoded by the independent checker, against the
//! same choice made with SQL on real exports.

use crate::util::{nsys_lens, real, texts};
use std::path::Path;

/// Links as pairs of their ends' times.
type Links = Vec<[i64; 2]>;

/// Every GPU operation of the export: `(pid, stream, start, end)`.
const OPS: &str = "ops AS (SELECT globalPid >> 24 AS pid, streamId AS stream, start, end FROM \
    CUPTI_ACTIVITY_KIND_KERNEL UNION ALL SELECT globalPid >> 24, streamId, start, end FROM \
    CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL SELECT globalPid >> 24, streamId, start, end FROM \
    CUPTI_ACTIVITY_KIND_MEMSET)";

/// Host waits from SQL: (`at`, the start or end, of the operation waited for, the call's
/// return), for each wait
/// whose operation is in the trace: on its stream for a stream sync, else on any stream of its
/// process, the one that ended last by the return.
fn sql_host_waits(export: &Path, at: &str) -> Vec<[i64; 2]> {
    let conn = rusqlite::Connection::open(export).unwrap();
    let sql = format!(
        "WITH {OPS} SELECT (SELECT o.{at} FROM ops o WHERE o.pid = s.globalPid >> 24 \
         AND (s.syncType != 3 OR o.stream = s.streamId) AND o.end <= s.end \
         ORDER BY o.end DESC, o.start DESC LIMIT 1) AS source, s.end \
         FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION s WHERE s.syncType IN (1, 3, 4)"
    );
    pairs(&conn, &sql)
}

/// Stream waits from SQL: (`at`, the start or end, of the operation of another stream that
/// ended last before the waiting stream's next operation, that operation's start).
fn sql_stream_waits(export: &Path, at: &str) -> Vec<[i64; 2]> {
    let conn = rusqlite::Connection::open(export).unwrap();
    let sql = format!(
        "WITH {OPS}, held AS (SELECT s.globalPid >> 24 AS pid, s.streamId AS stream, \
         (SELECT min(o.start) FROM ops o WHERE o.pid = s.globalPid >> 24 \
         AND o.stream = s.streamId AND o.start >= s.start) AS next \
         FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION s WHERE s.syncType = 2) \
         SELECT (SELECT o.{at} FROM ops o WHERE o.pid = h.pid AND o.stream != h.stream \
         AND o.end <= h.next ORDER BY o.end DESC, o.start DESC LIMIT 1), h.next FROM held h"
    );
    pairs(&conn, &sql)
}

/// The rows of `sql` with both columns set, sorted.
fn pairs(conn: &rusqlite::Connection, sql: &str) -> Vec<[i64; 2]> {
    let mut stmt = conn.prepare(sql).unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(1)?))
        })
        .unwrap();
    let mut pairs: Vec<[i64; 2]> = rows
        .map(Result::unwrap)
        .filter_map(|(a, b)| Some([a?, b?]))
        .collect();
    pairs.sort_unstable();
    pairs
}

/// Converts one export whole; the trace's host-wait links and links between GPU operations
/// (ends in trace time), its rebase offset, and the summary line.
fn traced(export: &Path) -> Option<(Links, Links, i64, String)> {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.perfetto-trace");
    let out = nsys_lens(&[
        "convert",
        "--to",
        "perfetto",
        "-o",
        trace.to_str().unwrap(),
        export.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{:?}", texts(&out));
    let summary = crate::perfetto::check(&trace)?;
    assert_eq!(summary["problems"], serde_json::json!([]));
    let list =
        |key: &str| -> Vec<[i64; 2]> { serde_json::from_value(summary[key].clone()).unwrap() };
    let offset = summary["rebase_offset_ns"].as_i64().unwrap();
    Some((list("sync_flows"), list("gpu_flows"), offset, texts(&out).1))
}

/// `pairs` moved by `-offset` (to trace time), sorted.
fn rebased(pairs: Vec<[i64; 2]>, offset: i64) -> Vec<[i64; 2]> {
    let mut moved: Vec<[i64; 2]> = pairs.into_iter().map(|p| p.map(|t| t - offset)).collect();
    moved.sort_unstable();
    moved
}

#[test]
fn host_waits_are_linked_from_the_operation_they_waited_for() {
    let Some(export) = real("nsysai_mfu_2gpu_before_2026.2.1.sqlite") else {
        return;
    };
    let Some((waits, held, offset, summary)) = traced(&export) else {
        return;
    };
    let expected = rebased(sql_host_waits(&export, "start"), offset);
    // 33 stream syncs and 133 event syncs (`cudaEventQuery`), every one after some work.
    assert_eq!(expected.len(), 166);
    assert_eq!(waits, expected);
    // No stream wait held work back: each waits on stream 7, the only one with work, for an
    // event of a stream without any.
    assert_eq!(held, rebased(sql_stream_waits(&export, "start"), offset));
    assert!(summary.contains("(166 from synchronizations)"), "{summary}");
}

#[test]
fn stream_waits_are_linked_to_the_operation_they_held_back() {
    for rank in ["ault42_pid337169", "ault43_pid493527", "ault44_pid744439"] {
        let name = format!("fs24_nccl_allreduce_tree_3nodes_9gpus/{rank}.sqlite");
        let Some(export) = real(&name) else { return };
        let Some((waits, held, offset, _)) = traced(&export) else {
            return;
        };
        let expected = rebased(sql_stream_waits(&export, "start"), offset);
        assert!(!expected.is_empty(), "{rank}");
        assert_eq!(held, expected, "{rank}");
        assert!(waits.is_empty());
    }
}

/// The Paraver trace draws the same links as communication records (tag 55003) from the
/// operation's end on its stream to the return on the calling thread, or to the start of the
/// operation held back.
#[test]
fn paraver_draws_the_same_links_as_communications() {
    for (name, stream_waits) in [
        ("nsysai_mfu_2gpu_before_2026.2.1.sqlite", false),
        (
            "fs24_nccl_allreduce_tree_3nodes_9gpus/ault42_pid337169.sqlite",
            true,
        ),
    ] {
        let Some(export) = real(name) else { return };
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("t");
        let out = nsys_lens(
            &["convert", "--to", "paraver", "-q", "-o"]
                .into_iter()
                .chain([base.to_str().unwrap(), export.to_str().unwrap()])
                .collect::<Vec<_>>(),
        );
        assert!(out.status.success(), "{:?}", texts(&out));
        let prv = base.with_extension("prv");
        let offset = crate::paraver::rebase_offset(&prv);
        let trace = crate::paraver::parse(&prv);
        let mut links: Vec<[i64; 2]> = (trace.comms.iter())
            .filter(|c| c[7] == 55_003)
            .map(|c| [c[0] as i64, c[3] as i64])
            .collect();
        links.sort_unstable();
        let expected = match stream_waits {
            true => sql_stream_waits(&export, "end"),
            false => sql_host_waits(&export, "end"),
        };
        assert!(!expected.is_empty(), "{name}");
        assert_eq!(links, rebased(expected, offset), "{name}");
    }
}
