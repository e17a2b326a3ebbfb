//! OpenACC (`--trace=openacc`): every event of the three OpenACC tables reaches both traces
//! (Perfetto slices of category `openacc`; Paraver nsys2prv's types 66000000-66300001, with its
//! labels and numbering), and `info` counts them, all equal to SQL.

use crate::paraver::{parse, pertalde};
use crate::util::{convert_to, int, json, rows, synth};
use std::collections::BTreeMap;

/// nsys2prv's OpenACC types per table: (table, event kind, region source, function name).
const TYPES: [(&str, [(u32, &str); 3]); 3] = [
    (
        "CUPTI_ACTIVITY_KIND_OPENACC_DATA",
        [
            (66_000_001, "OpenACC Data Events"),
            (66_100_001, "OpenACC data region source"),
            (66_200_001, "OpenACC data function name"),
        ],
    ),
    (
        "CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH",
        [
            (66_000_002, "OpenACC Launch Events"),
            (66_100_002, "OpenACC launch region source"),
            (66_200_002, "OpenACC launch function name"),
        ],
    ),
    (
        "CUPTI_ACTIVITY_KIND_OPENACC_OTHER",
        [
            (66_000_000, "OpenACC Other Events"),
            (66_100_000, "OpenACC other region source"),
            (66_200_000, "OpenACC other function name"),
        ],
    ),
];
const DATA_BYTES: u32 = 66_300_001;

/// Per (table, `name@file:line`, event kind label): events and, for data, total bytes, from SQL.
type Events = BTreeMap<(String, String, String), (u64, u64)>;

fn sql_events(report: &std::path::Path) -> Events {
    let conn = rusqlite::Connection::open(report).unwrap();
    let mut events = Events::new();
    for (table, _) in TYPES {
        let bytes = if table.ends_with("DATA") {
            "e.bytes"
        } else {
            "0"
        };
        let sql = format!(
            "SELECT n.value || '@' || f.value || ':' || e.lineNo, k.label, {bytes} FROM {table} e \
             JOIN StringIds n ON n.id = e.nameId JOIN StringIds f ON f.id = e.srcFile \
             JOIN ENUM_OPENACC_EVENT_KIND k ON k.id = e.eventKind"
        );
        let mut stmt = conn.prepare(&sql).unwrap();
        let found = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .unwrap();
        for row in found {
            let (source, kind, bytes) = row.unwrap();
            let entry = events.entry((table.to_string(), source, kind)).or_default();
            entry.0 += 1;
            entry.1 += bytes as u64;
        }
    }
    events
}

#[test]
fn openacc_events_reach_both_traces_under_nsys2prv_types() {
    let dir = synth("--preset ddp --nodes 1 --gpus-per-node 2 --steps 2 --openacc");
    let report = dir.path().join("node0.sqlite");
    let want = sql_events(&report);
    let total: u64 = want.values().map(|v| v.0).sum();
    assert!(
        want.keys().any(|k| k.0.ends_with("DATA")) && total > 100,
        "{want:?}"
    );
    let (_out, base) = convert_to("perfetto,paraver", std::slice::from_ref(&report), &[]);
    let prv = base.with_extension("prv");
    pertalde(&prv);
    let trace = parse(&prv);
    let mut got = Events::new();
    for (_, _, _, pairs) in &trace.events {
        for (table, [(kind_type, _), (source_type, _), _]) in TYPES {
            let Some(&(_, kind)) = pairs.iter().find(|p| p.0 == kind_type && p.1 != 0) else {
                continue;
            };
            let source = pairs.iter().find(|p| p.0 == source_type).unwrap().1;
            let bytes = pairs.iter().find(|p| p.0 == DATA_BYTES).map_or(0, |p| p.1);
            let label = |ty: u32, v: u64| trace.pcf[&ty].1[&v].clone();
            let key = (
                table.to_string(),
                label(source_type, source),
                label(kind_type, kind),
            );
            let entry = got.entry(key).or_default();
            entry.0 += 1;
            entry.1 += bytes;
        }
    }
    assert_eq!(got, want);
    // nsys2prv's labels; event kinds are ENUM_OPENACC_EVENT_KIND ids + 1; sources and functions
    // are numbered across the tables, data's first.
    for (_, types) in TYPES {
        for (ty, label) in types {
            assert_eq!(trace.pcf[&ty].0, label);
        }
    }
    assert_eq!(trace.pcf[&66_000_002].1[&5], "Enqueue launch");
    assert_eq!(trace.pcf[&66_000_001].1[&6], "Enqueue upload");
    assert_eq!(trace.pcf[&66_200_001].1[&1], "main_loop");
    assert_eq!(trace.pcf[&66_200_002].1[&2], "main_loop");
    assert_eq!(trace.pcf[&66_200_000].1[&3], "main_loop");
    if let Some(summary) = crate::perfetto::check(&base.with_extension("perfetto-trace")) {
        assert_eq!(summary["counts"]["openacc"], total);
    }
    let info = json(&["info", report.to_str().unwrap()]);
    assert_eq!(int(&rows(&info)[0]["rows"]["openacc"]) as u64, total);
}
