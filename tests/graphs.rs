//! CUDA graphs traced as whole graphs (`CUPTI_ACTIVITY_KIND_GRAPH_TRACE`, nsys's default
//! `--cuda-graph-trace=graph`): a launch is GPU work on its stream, counted as compute, so a run
//! whose compute kernels are one-node graphs gives the analyses the same numbers as the run
//! that launched them as kernels; both traces draw every launch.

use crate::util::{json, rows, synth};
use std::path::Path;

const RUN: &str = "--preset megatron --pp 2 --dp 2 --gpus-per-node 4 --steps 2";

/// A command's rows as sorted JSON lines.
fn rows_of(args: &[&str], input: &Path) -> Vec<String> {
    let mut all = args.to_vec();
    all.push(input.to_str().unwrap());
    let mut lines: Vec<String> = rows(&json(&all)).iter().map(|r| r.to_string()).collect();
    lines.sort();
    lines
}

/// Graph launches in an export, from SQL.
fn sql_launches(report: &Path) -> i64 {
    let conn = rusqlite::Connection::open(report).unwrap();
    conn.query_row(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

#[test]
fn graph_launches_count_as_the_compute_they_replace() {
    let kernels = synth(RUN);
    let graphs = synth(&format!("{RUN} --cuda-graphs"));
    let launches = sql_launches(&graphs.path().join("node0.sqlite"));
    assert!(launches > 1000, "{launches}");
    for args in [
        &["overlap"][..],
        &["overlap", "--whole"],
        &["bubbles"],
        &["idle", "--whole"],
        &["streams", "--whole"],
        &["window"],
    ] {
        assert_eq!(
            rows_of(args, graphs.path()),
            rows_of(args, kernels.path()),
            "{args:?}"
        );
    }
    // `kernels` names them as their own family, with every launch in it.
    let families = json(&["kernels", "--whole", graphs.path().to_str().unwrap()]);
    let in_family: i64 = rows(&families)
        .iter()
        .filter(|r| r["family"] == "cuda_graph" && r["rank"].is_u64())
        .map(|r| r["kernels"].as_i64().unwrap())
        .sum();
    assert_eq!(in_family, launches);
}

#[test]
fn every_graph_launch_reaches_both_traces() {
    let dir = synth(&format!("{RUN} --cuda-graphs"));
    let report = dir.path().join("node0.sqlite");
    let launches = sql_launches(&report);
    let (_out, base) =
        crate::util::convert_to("perfetto,paraver", std::slice::from_ref(&report), &[]);
    let prv = base.with_extension("prv");
    crate::paraver::pertalde(&prv);
    let trace = crate::paraver::parse(&prv);
    let begins = trace
        .events
        .iter()
        .flat_map(|(_, _, _, pairs)| pairs)
        .filter(|&&(ty, value)| ty == 63_000_008 && value > 0)
        .count();
    assert_eq!(begins as i64, launches);
    let (label, values) = &trace.pcf[&63_000_008];
    assert_eq!(label, "CUDA Graphs Exec name");
    assert!(
        values.values().any(|v| v.starts_with("Graph Exec ")),
        "{values:?}"
    );
    // Each launch is a communication from its cudaGraphLaunch, as a kernel is from its launch.
    let from_launches = trace.comms.len() as i64;
    if let Some(summary) = crate::perfetto::check(&base.with_extension("perfetto-trace")) {
        assert_eq!(summary["counts"]["cuda_graph"], launches);
        assert_eq!(summary["flows"].as_i64().unwrap(), from_launches);
    }
}

#[test]
fn kernels_traced_as_graph_nodes_carry_their_node() {
    let dir = synth(&format!("{RUN} --cuda-graph-nodes"));
    let report = dir.path().join("node0.sqlite");
    let conn = rusqlite::Connection::open(&report).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT graphNodeId FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId IS NOT NULL \
             ORDER BY graphNodeId",
        )
        .unwrap();
    let want: Vec<u64> = stmt
        .query_map([], |r| r.get::<_, i64>(0))
        .unwrap()
        .map(|v| v.unwrap() as u64)
        .collect();
    assert!(want.len() > 1000, "{}", want.len());
    let (_out, base) = crate::util::convert_to("paraver", std::slice::from_ref(&report), &[]);
    let trace = crate::paraver::parse(&base.with_extension("prv"));
    let mut got: Vec<u64> = trace
        .events
        .iter()
        .flat_map(|(_, _, _, pairs)| pairs)
        .filter(|&&(ty, value)| ty == 63_000_102 && value > 0)
        .map(|&(_, value)| value)
        .collect();
    got.sort_unstable();
    assert_eq!(got, want);
    assert_eq!(trace.pcf[&63_000_102].0, "Graph Node ID");
    // Node-level tracing changes nothing the analyses see: the kernels are the same kernels.
    let kernels = synth(RUN);
    for args in [&["overlap"][..], &["kernels", "--whole"], &["bubbles"]] {
        assert_eq!(
            rows_of(args, dir.path()),
            rows_of(args, kernels.path()),
            "{args:?}"
        );
    }
}
