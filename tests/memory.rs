//! Device memory (`CUDA_GPU_MEMORY_USAGE_EVENTS`, `--cuda-memory-usage=true`): each GPU's
//! allocated bytes, drawn in both traces, equal the running sum SQL computes.

use crate::util::synth;
use std::collections::BTreeMap;
use std::path::Path;

/// Per (pid, device): the allocated bytes after the last event at each time, from SQL alone.
fn sql_steps(report: &Path) -> BTreeMap<(i64, i64), Vec<(i64, i64)>> {
    let conn = rusqlite::Connection::open(report).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT (globalPid >> 24) & 16777215, deviceId, start,
                    sum(CASE memoryOperationType WHEN 1 THEN -bytes ELSE bytes END)
                        OVER (PARTITION BY globalPid, deviceId ORDER BY start, rowid)
             FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memKind = 2 ORDER BY start, rowid",
        )
        .unwrap();
    let mut steps: BTreeMap<(i64, i64), Vec<(i64, i64)>> = BTreeMap::new();
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap();
    for row in rows {
        let (pid, device, time, total): (i64, i64, i64, i64) = row.unwrap();
        let series = steps.entry((pid, device)).or_default();
        match series.last_mut() {
            Some(last) if last.0 == time => last.1 = total,
            _ => series.push((time, total)),
        }
    }
    steps
}

#[test]
fn allocated_memory_per_gpu_equals_the_running_sum_in_both_traces() {
    let dir = synth("--preset ddp --nodes 1 --gpus-per-node 2 --steps 3 --memory-usage");
    let report = dir.path().join("node0.sqlite");
    let want = sql_steps(&report);
    assert_eq!(want.len(), 2);
    for steps in want.values() {
        // The model stays allocated; each step's activations come and go.
        assert_eq!(steps.last().unwrap().1, 8 << 30);
        assert_eq!(steps.iter().map(|s| s.1).max(), Some(10 << 30));
    }
    let (_out, base) =
        crate::util::convert_to("perfetto,paraver", std::slice::from_ref(&report), &[]);
    let ranks = crate::util::json(&["ranks", report.to_str().unwrap()]);
    let device_of = |rank: u64| -> (i64, i64) {
        let r = crate::util::rows(&ranks)
            .iter()
            .find(|r| r["rank"] == rank)
            .unwrap();
        (crate::util::int(&r["pid"]), crate::util::int(&r["device"]))
    };
    // Paraver: the `Memory GPU<d>` thread of each task carries the steps, rebased.
    let prv = base.with_extension("prv");
    crate::paraver::pertalde(&prv);
    let trace = crate::paraver::parse(&prv);
    let rebase = crate::paraver::rebase_offset(&prv);
    for task in 1..=2 {
        let got: Vec<(i64, i64)> = trace
            .events
            .iter()
            .filter(|(_, t, _, _)| *t == task)
            .flat_map(|(time, _, _, pairs)| {
                pairs
                    .iter()
                    .filter(|(ty, _)| *ty == 63_100_020)
                    .map(move |&(_, v)| (*time as i64 + rebase, v as i64))
            })
            .collect();
        assert_eq!(got, want[&device_of(task as u64 - 1)], "task {task}");
    }
    // Perfetto: one counter track per GPU under its rank.
    if let Some(summary) = crate::perfetto::check(&base.with_extension("perfetto-trace")) {
        let rebase = summary["rebase_offset_ns"].as_i64().unwrap();
        let mut tracks = 0;
        for (track, values) in summary["counters"].as_object().unwrap() {
            if !track.ends_with("memory allocated (bytes)") {
                continue;
            }
            let rank: u64 = track["rank ".len()..]
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let got: Vec<(i64, i64)> = values
                .as_array()
                .unwrap()
                .iter()
                .map(|v| (v[0].as_i64().unwrap() + rebase, v[1].as_i64().unwrap()))
                .collect();
            assert_eq!(got, want[&device_of(rank)], "{track}");
            tracks += 1;
        }
        assert_eq!(tracks, 2);
    }
}
