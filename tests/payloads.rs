//! NVTX payloads: NCCL's extended payloads (`jsonText`) reach the NCCL kernel their range
//! launched, as nsys2prv's types 9501 + field (`NCCL Message size [bytes]`, `NCCL Reduction
//! operation` with its texts as values), equal to a SQL join; every payload, scalar ones
//! included, is the `payload` argument of its NVTX slice in Perfetto.

use crate::paraver::{parse, pertalde};
use crate::util::{convert_to, synth};
use std::collections::BTreeMap;

/// Per (pid, correlation id of the launch): the payload's message size and operation, from
/// SQL: the first `cuLaunchKernelEx` on the range's thread inside each NCCL range with JSON.
fn sql_payloads(report: &std::path::Path) -> BTreeMap<(i64, i64), (i64, Option<String>)> {
    let conn = rusqlite::Connection::open(report).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT n.globalTid >> 24 & 16777215, (SELECT r.correlationId FROM \
             CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId \
             WHERE r.globalTid = n.globalTid AND r.start >= n.start AND r.start < n.end \
             AND s.value LIKE '%LaunchKernel%' ORDER BY r.start LIMIT 1), \
             json_extract(n.jsonText, '$.\"Message size [bytes]\"'), \
             json_extract(n.jsonText, '$.\"Reduction operation\"') \
             FROM NVTX_EVENTS n WHERE n.jsonText IS NOT NULL",
        )
        .unwrap();
    stmt.query_map([], |r| Ok(((r.get(0)?, r.get(1)?), (r.get(2)?, r.get(3)?))))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn nccl_payload_fields_reach_their_kernels_and_every_payload_its_slice() {
    let dir = synth("--preset megatron --tp 2 --pp 2 --dp 1 --gpus-per-node 4 --nccl-payloads");
    let report = dir.path().join("node0.sqlite");
    // A scalar payload on a framework range too.
    let conn = rusqlite::Connection::open(&report).unwrap();
    let scalar = conn
        .execute(
            "UPDATE NVTX_EVENTS SET uint64Value = 42 WHERE rowid = (SELECT min(rowid) FROM \
             NVTX_EVENTS WHERE domainId = 0 AND eventType = 59)",
            [],
        )
        .unwrap();
    assert_eq!(scalar, 1);
    drop(conn);
    let want = sql_payloads(&report);
    assert!(want.len() > 10, "{want:?}");
    let (_out, base) = convert_to("perfetto,paraver", std::slice::from_ref(&report), &[]);
    let prv = base.with_extension("prv");
    pertalde(&prv);
    let trace = parse(&prv);
    // One type per field from 9501, in the payloads' order (NCCL's: its communicator first).
    let type_of = |name: &str| {
        let found = trace.pcf.iter().find(|(_, (n, _))| n == name);
        *found.unwrap_or_else(|| panic!("no type {name}")).0
    };
    assert_eq!(type_of("NCCL NCCL communicator ID"), 9501);
    let (size_type, op_type) = (
        type_of("NCCL Message size [bytes]"),
        type_of("NCCL Reduction operation"),
    );
    assert_eq!((size_type, op_type), (9502, 9503));
    let mut got = BTreeMap::new();
    for (_, task, _, pairs) in &trace.events {
        let value = |ty: u32| pairs.iter().find(|p| p.0 == ty).map(|p| p.1);
        let Some(size) = value(size_type).filter(|&v| v != 0) else {
            continue;
        };
        assert!(
            value(63_000_007).is_some_and(|v| v != 0),
            "on an NCCL kernel"
        );
        let op = value(op_type).map(|v| trace.pcf[&op_type].1[&v].clone());
        let pid = task_pid(&trace, *task);
        got.insert((pid, value(9200).unwrap() as i64), (size as i64, op));
    }
    assert_eq!(got, want);
    if let Some(summary) = crate::perfetto::check(&base.with_extension("perfetto-trace")) {
        assert_eq!(summary["args"]["payload"], want.len() as u64 + 1);
    }
}

/// The pid of a task: the tid of its first thread (the process's main thread), which the `.row`
/// names `THREAD 1.<task>.1 <name> [<tid>]`.
fn task_pid(trace: &crate::paraver::Trace, task: usize) -> i64 {
    let prefix = format!("THREAD 1.{task}.1 ");
    let name = trace.row["THREAD"]
        .iter()
        .find(|t| t.starts_with(&prefix))
        .unwrap();
    let tid = name.rsplit_once('[').unwrap().1.trim_end_matches(']');
    tid.parse().unwrap()
}
