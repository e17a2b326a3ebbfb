//! MPI (`--trace=mpi`): every call of nsys's MPI tables (or, from nsys 2022.x, of the NVTX
//! domain `MPI`) reaches both traces, under Extrae's types and values as nsys2prv numbers them;
//! every send matched to its receive is one Paraver communication record (and one Perfetto
//! flow), equal to a matching done here with SQL; ranks come from MPI; and on a program run
//! under `mpirun` and captured by the real nsys, the calls per function and their total time
//! equal `nsys stats`.

use crate::paraver::{Trace, parse, pertalde, rebase_offset};
use crate::util::{convert_to, int, json, rows, sqlite_files, synth};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Extrae's MPI types (paraver.md §3.4) and the labels nsys2prv gives them.
const TYPES: [(u32, &str); 5] = [
    (50_000_001, "MPI Point-to-point"),
    (50_000_002, "MPI Collective Comm"),
    (50_000_003, "MPI Other"),
    (50_000_004, "MPI One-sided"),
    (50_000_005, "MPI I/O"),
];

/// A few of Extrae's function values (nsys2prv's `MPIVal`), and the collective size types.
const VALUES: [(u64, &str); 9] = [
    (1, "MPI_Send"),
    (2, "MPI_Recv"),
    (3, "MPI_Isend"),
    (4, "MPI_Irecv"),
    (6, "MPI_Waitall"),
    (8, "MPI_Barrier"),
    (10, "MPI_Allreduce"),
    (31, "MPI_Init"),
    (32, "MPI_Finalize"),
];
const SEND_SIZE: (u32, &str) = (50_100_001, "Send Size in MPI Global OP");
const RECV_SIZE: (u32, &str) = (50_100_002, "Recv Size in MPI Global OP");

/// The message tag of synth's exchange.
const TAG: u64 = 7;

/// One MPI call read with SQL, times on the merged clock.
#[derive(Debug, Clone)]
struct Call {
    table: &'static str,
    name: String,
    pid: u32,
    tid: u32,
    start: i64,
    end: i64,
    peer: i64,
    tag: i64,
    size: i64,
    recv_size: i64,
    request: i64,
    /// The export it came from (pids repeat across nodes).
    report: usize,
}

/// Every row of the four MPI tables of `reports`, each time moved by its report's offset (from
/// `info`); the rows a wait repeats for its other requests are kept.
fn sql_calls(reports: &[PathBuf]) -> Vec<Call> {
    let info = json(&["info", reports[0].parent().unwrap().to_str().unwrap()]);
    let mut calls = Vec::new();
    for (report, path) in reports.iter().enumerate() {
        let offset = int(&rows(&info)[report]["clock"]["offset_ns"]);
        let conn = rusqlite::Connection::open(path).unwrap();
        for (table, columns) in [
            ("MPI_P2P_EVENTS", "remoteRank, tag, size, 0, requestHandle"),
            ("MPI_COLLECTIVES_EVENTS", "-1, 0, size, recvSize, 0"),
            ("MPI_START_WAIT_EVENTS", "-1, 0, 0, 0, requestHandle"),
            ("MPI_OTHER_EVENTS", "-1, 0, 0, 0, 0"),
        ] {
            let sql = format!(
                "SELECT s.value, (e.globalTid >> 24) & 16777215, e.globalTid & 16777215, \
                 e.start, e.end, {columns} FROM {table} e JOIN StringIds s ON s.id = e.textId \
                 ORDER BY e.rowid"
            );
            let Ok(mut stmt) = conn.prepare(&sql) else {
                continue;
            };
            let read = stmt
                .query_map([], |r| {
                    Ok(Call {
                        table,
                        name: r.get(0)?,
                        pid: r.get(1)?,
                        tid: r.get(2)?,
                        start: r.get::<_, i64>(3)? + offset,
                        end: r.get::<_, i64>(4)? + offset,
                        peer: r.get(5)?,
                        tag: r.get(6)?,
                        size: r.get(7)?,
                        recv_size: r.get(8)?,
                        request: r.get(9)?,
                        report,
                    })
                })
                .unwrap();
            calls.extend(read.map(Result::unwrap));
        }
    }
    calls
}

/// The calls a trace draws: a wait's rows for its other requests (same thread, times and name)
/// are one call.
fn drawn(calls: &[Call]) -> Vec<&Call> {
    let mut seen = std::collections::HashSet::new();
    calls
        .iter()
        .filter(|c| {
            c.table != "MPI_START_WAIT_EVENTS"
                || seen.insert((c.report, c.pid, c.tid, c.start, c.end, c.name.clone()))
        })
        .collect()
}

/// `MPI_RANKS`: (report, pid) -> rank.
fn sql_ranks(reports: &[PathBuf]) -> BTreeMap<(usize, u32), u64> {
    let mut ranks = BTreeMap::new();
    for (report, path) in reports.iter().enumerate() {
        let conn = rusqlite::Connection::open(path).unwrap();
        let mut stmt = conn
            .prepare("SELECT (globalTid >> 24) & 16777215, rank FROM MPI_RANKS")
            .unwrap();
        for row in stmt
            .query_map([], |r| {
                Ok((r.get::<_, u32>(0)?, r.get::<_, i64>(1)? as u64))
            })
            .unwrap()
        {
            let (pid, rank) = row.unwrap();
            ranks.insert((report, pid), rank);
        }
    }
    ranks
}

/// The Paraver type nsys2prv files a call under: its table's (collectives and others by name
/// for I/O and one-sided calls, which synth does not make).
fn sql_type(call: &Call) -> u32 {
    match call.table {
        "MPI_P2P_EVENTS" | "MPI_START_WAIT_EVENTS" => TYPES[0].0,
        "MPI_COLLECTIVES_EVENTS" => TYPES[1].0,
        _ => TYPES[2].0,
    }
}

/// Calls per (type, function).
type Begins = BTreeMap<(u32, String), u64>;

/// Begins per (type, function) in a trace, and the (send, receive) sizes of each begin that
/// carries them (collectives from nsys's tables).
fn paraver_calls(trace: &Trace) -> (Begins, Vec<(u64, u64)>) {
    let mut begins = BTreeMap::new();
    let mut sizes = Vec::new();
    for (_, _, _, pairs) in &trace.events {
        for &(ty, value) in pairs {
            if TYPES.iter().any(|t| t.0 == ty) && value != 0 {
                let name = trace.pcf[&ty].1[&value].clone();
                *begins.entry((ty, name)).or_default() += 1;
                let size = |t: u32| pairs.iter().find(|p| p.0 == t).map(|p| p.1);
                if let (Some(send), Some(recv)) = (size(SEND_SIZE.0), size(RECV_SIZE.0)) {
                    sizes.push((send, recv));
                }
            }
        }
    }
    (begins, sizes)
}

/// The messages, matched here with SQL's rows: per (sender rank, receiver rank, tag), the n-th
/// send (by start) with the n-th receive; a non-blocking receive completes at the end of the
/// first wait of its process on its request after it. Each as (sender rank, send start,
/// receiver rank, receive start, completion, size, tag), rebased by `offset`.
fn sql_messages(calls: &[Call], ranks: &BTreeMap<(usize, u32), u64>, offset: i64) -> Vec<[u64; 7]> {
    type Channel = (u64, u64, i64);
    let mut sends: BTreeMap<Channel, Vec<&Call>> = BTreeMap::new();
    let mut recvs: BTreeMap<Channel, Vec<&Call>> = BTreeMap::new();
    for c in calls.iter().filter(|c| c.table == "MPI_P2P_EVENTS") {
        let me = ranks[&(c.report, c.pid)];
        match c.name.as_str() {
            "MPI_Isend" | "MPI_Send" => {
                sends.entry((me, c.peer as u64, c.tag)).or_default().push(c)
            }
            "MPI_Irecv" | "MPI_Recv" => {
                recvs.entry((c.peer as u64, me, c.tag)).or_default().push(c)
            }
            other => panic!("synth makes no {other}"),
        }
    }
    let done = |r: &Call| {
        calls
            .iter()
            .filter(|w| w.table == "MPI_START_WAIT_EVENTS")
            .filter(|w| (w.report, w.pid, w.request) == (r.report, r.pid, r.request))
            .filter(|w| w.start >= r.start)
            .map(|w| w.end)
            .min()
            .unwrap_or(r.end)
    };
    let at = |t: i64| (t - offset) as u64;
    let mut messages = Vec::new();
    for (channel, sent) in &mut sends {
        let received = recvs.get_mut(channel).expect("every send is received");
        sent.sort_by_key(|c| c.start);
        received.sort_by_key(|c| c.start);
        assert_eq!(sent.len(), received.len(), "{channel:?}");
        for (s, r) in sent.iter().zip(received.iter()) {
            let (src, dst, tag) = *channel;
            messages.push([
                src,
                at(s.start),
                dst,
                at(r.start),
                at(done(r)),
                s.size as u64,
                tag as u64,
            ]);
        }
    }
    messages.sort();
    messages
}

/// The trace's MPI communication records (tag [`TAG`]) as [`sql_messages`] gives them, tasks
/// named by rank.
fn paraver_messages(trace: &Trace) -> Vec<[u64; 7]> {
    let tasks = &trace.row["TASK"];
    let rank = |task: u64| -> u64 {
        tasks[task as usize - 1]
            .strip_prefix("rank ")
            .expect("messages join ranks")
            .parse()
            .unwrap()
    };
    let mut messages: Vec<[u64; 7]> = trace
        .comms
        .iter()
        .filter(|c| c[7] == TAG)
        .map(|c| [rank(c[1]), c[0], rank(c[4]), c[3], c[8], c[6], c[7]])
        .collect();
    messages.sort();
    messages
}

#[test]
fn mpi_tables_reach_both_traces_under_extrae_types_with_one_record_per_message() {
    let dir = synth("--preset ddp --nodes 2 --gpus-per-node 2 --steps 3 --mpi");
    let reports = sqlite_files(dir.path());
    let calls = sql_calls(&reports);
    let drawn = drawn(&calls);
    assert_eq!(
        calls.len(),
        4 * (2 + 3 * 5),
        "Init, 3 x (Isend, Irecv, 2 wait rows, Allreduce), Finalize"
    );
    let (_out, base) = convert_to("perfetto,paraver", &reports, &[]);
    let prv = base.with_extension("prv");
    pertalde(&prv);
    let trace = parse(&prv);

    // Types and labels as nsys2prv's.
    for (ty, label) in TYPES {
        let (got, values) = &trace.pcf[&ty];
        assert_eq!(got, label);
        for (value, name) in VALUES {
            assert_eq!(values[&value], name, "{label}");
        }
        assert_eq!(values[&0], "End");
    }
    assert_eq!(trace.pcf[&SEND_SIZE.0].0, SEND_SIZE.1);
    assert_eq!(trace.pcf[&RECV_SIZE.0].0, RECV_SIZE.1);

    // Every drawn call once, under its table's type and its function's value.
    let mut want: BTreeMap<(u32, String), u64> = BTreeMap::new();
    for c in &drawn {
        *want.entry((sql_type(c), c.name.clone())).or_default() += 1;
    }
    let (begins, sizes) = paraver_calls(&trace);
    assert_eq!(begins, want);
    let collective_sizes: Vec<(u64, u64)> = drawn
        .iter()
        .filter(|c| c.table == "MPI_COLLECTIVES_EVENTS")
        .map(|c| (c.size as u64, c.recv_size as u64))
        .collect();
    assert_eq!(sizes.len(), collective_sizes.len());
    assert!(
        sizes.iter().all(|s| collective_sizes.contains(s)),
        "{sizes:?}"
    );

    // One communication record per message, with its sizes and times.
    let messages = sql_messages(&calls, &sql_ranks(&reports), rebase_offset(&prv));
    assert_eq!(messages.len(), 4 * 3);
    assert_eq!(paraver_messages(&trace), messages);

    // Perfetto: every drawn call a slice; one flow per message beyond the launches' flows.
    if let Some(summary) = crate::perfetto::check(&base.with_extension("perfetto-trace")) {
        assert_eq!(summary["counts"]["mpi"], drawn.len() as u64);
        let plain_dir = synth("--preset ddp --nodes 2 --gpus-per-node 2 --steps 3");
        let (_o, plain) = convert_to("perfetto", &sqlite_files(plain_dir.path()), &[]);
        let plain = crate::perfetto::check(&plain.with_extension("perfetto-trace")).unwrap();
        let flows = |s: &serde_json::Value| s["flows"].as_u64().unwrap();
        assert_eq!(flows(&summary), flows(&plain) + messages.len() as u64);
    }

    // `info` counts every row; `ranks` takes the MPI ranks.
    let info = json(&["info", dir.path().to_str().unwrap()]);
    let counted: i64 = rows(&info).iter().map(|r| int(&r["rows"]["mpi"])).sum();
    assert_eq!(counted as usize, calls.len());
    let ranks = json(&["ranks", dir.path().to_str().unwrap()]);
    assert!(rows(&ranks).iter().all(|r| r["source"] == "mpi"), "{ranks}");
}

#[test]
fn a_part_per_node_draws_the_same_messages() {
    let dir = synth("--preset ddp --nodes 2 --gpus-per-node 2 --steps 2 --mpi");
    let reports = sqlite_files(dir.path());
    let (_direct_dir, direct) = convert_to("perfetto,paraver", &reports, &[]);
    let mut parts = Vec::new();
    for (i, report) in reports.iter().enumerate() {
        let part = dir.path().join(format!("node{i}.lens-part"));
        let out = crate::util::nsys_lens(&[
            "part",
            report.to_str().unwrap(),
            "-o",
            part.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{:?}", crate::util::texts(&out));
        parts.push(part);
    }
    let (_parts_dir, joined) = convert_to("perfetto,paraver", &parts, &[]);
    for ext in ["prv", "pcf", "row", "perfetto-trace"] {
        let read = |base: &Path| std::fs::read(base.with_extension(ext)).unwrap();
        assert!(read(&direct) == read(&joined), "{ext} differs");
    }
}

#[test]
fn nsys_2022_mpi_ranges_are_mpi_calls_with_their_ranks() {
    let dir = synth("--preset ddp --nodes 1 --gpus-per-node 2 --steps 2 --mpi nvtx");
    let report = dir.path().join("node0.sqlite");
    let conn = rusqlite::Connection::open(&report).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT s.value, count(*) FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId \
             WHERE n.eventType = 59 AND n.domainId = 2 GROUP BY s.value",
        )
        .unwrap();
    let want: BTreeMap<String, u64> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(want["MPI_Waitall"], 2 * 2);
    let (_out, base) = convert_to("perfetto,paraver", std::slice::from_ref(&report), &[]);
    let prv = base.with_extension("prv");
    pertalde(&prv);
    let (begins, _) = paraver_calls(&parse(&prv));
    let by_name: BTreeMap<String, u64> = begins.iter().map(|((_, n), c)| (n.clone(), *c)).collect();
    assert_eq!(by_name, want);
    // Classified by name: the wait is point-to-point, the all-reduce collective.
    assert!(begins.contains_key(&(TYPES[0].0, "MPI_Waitall".into())));
    assert!(begins.contains_key(&(TYPES[1].0, "MPI_Allreduce".into())));
    // No peers, so no messages; and the ranges are MPI calls, not NVTX events.
    assert!(parse(&prv).comms.iter().all(|c| c[7] != TAG));
    if let Some(summary) = crate::perfetto::check(&base.with_extension("perfetto-trace")) {
        let calls: u64 = want.values().sum();
        assert_eq!(summary["counts"]["mpi"], calls);
    }
    let ranks = json(&["ranks", report.to_str().unwrap()]);
    let sources: Vec<&str> = rows(&ranks)
        .iter()
        .map(|r| r["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources, ["mpi", "mpi"]);
}

/// A ring exchange in C: blocking and non-blocking sends and receives, a wait on both, an
/// all-reduce, a broadcast and a barrier, three times.
const RING: &str = r#"#include <mpi.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double *a = calloc(1024, sizeof(double)), *b = calloc(1024, sizeof(double));
  for (int it = 0; it < 3; it++) {
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    if (rank % 2 == 0) {
      MPI_Send(a, 1024, MPI_DOUBLE, next, 7, MPI_COMM_WORLD);
      MPI_Recv(b, 1024, MPI_DOUBLE, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(b, 1024, MPI_DOUBLE, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(a, 1024, MPI_DOUBLE, next, 7, MPI_COMM_WORLD);
    }
    MPI_Request r[2];
    MPI_Isend(a, 16, MPI_DOUBLE, prev, 9, MPI_COMM_WORLD, &r[0]);
    MPI_Irecv(b, 16, MPI_DOUBLE, next, 9, MPI_COMM_WORLD, &r[1]);
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    MPI_Allreduce(MPI_IN_PLACE, a, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Bcast(b, 32, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
"#;

/// Per MPI function, from a `.prv`: calls and total ns (each begin paired with the end that
/// closes it on its thread).
fn paraver_sums(trace: &Trace) -> BTreeMap<String, (u64, u64)> {
    let mut open: BTreeMap<(usize, usize), (u64, String)> = BTreeMap::new();
    let mut sums: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (time, task, thread, pairs) in &trace.events {
        for &(ty, value) in pairs.iter().filter(|p| TYPES.iter().any(|t| t.0 == p.0)) {
            if value != 0 {
                let name = trace.pcf[&ty].1[&value].clone();
                assert!(open.insert((*task, *thread), (*time, name)).is_none());
            } else {
                let (start, name) = open.remove(&(*task, *thread)).expect("an open call");
                let sum = sums.entry(name).or_default();
                sum.0 += 1;
                sum.1 += time - start;
            }
        }
    }
    sums
}

#[test]
fn a_program_run_under_mpirun_and_captured_by_nsys_matches_nsys_stats() {
    if crate::real_nsys::available(&["mpicc", "mpirun"]).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let here = dir.path();
    std::fs::write(here.join("ring.c"), RING).unwrap();
    crate::real_nsys::run(here, "mpicc", &["-O1", "-o", "ring", "ring.c"]);
    let mpirun = [
        "mpirun",
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
        "4",
        "./ring",
    ];
    let options = ["--trace=mpi,osrt", "--mpi-impl=openmpi"];
    crate::real_nsys::capture(here, "ring", &options, &mpirun);
    // nsys 2022.4 records MPI calls as NVTX ranges of the domain `MPI`; nvtxsum names them
    // `MPI:<function>`.
    let (header, stats) = crate::real_nsys::stats(here, "nvtxsum", "ring.sqlite");
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (range, instances, total) = (
        column("Range"),
        column("Instances"),
        column("Total Time (ns)"),
    );
    let want: BTreeMap<String, (u64, u64)> = stats
        .iter()
        .filter_map(|r| {
            let name = r[range].strip_prefix("MPI:")?;
            Some((
                name.to_string(),
                (r[instances].parse().unwrap(), r[total].parse().unwrap()),
            ))
        })
        .collect();
    assert_eq!(want["MPI_Send"].0, 12, "{want:?}");
    let sqlite = here.join("ring.sqlite");
    let (_out, base) = convert_to("perfetto,paraver", std::slice::from_ref(&sqlite), &[]);
    let prv = base.with_extension("prv");
    pertalde(&prv);
    assert_eq!(paraver_sums(&parse(&prv)), want);
    if let Some(summary) = crate::perfetto::check(&base.with_extension("perfetto-trace")) {
        let calls: u64 = want.values().map(|v| v.0).sum();
        assert_eq!(summary["counts"]["mpi"], calls);
    }
    let ranks = json(&["ranks", sqlite.to_str().unwrap()]);
    let ranks: Vec<(i64, &str)> = rows(&ranks)
        .iter()
        .map(|r| (int(&r["rank"]), r["source"].as_str().unwrap()))
        .collect();
    assert_eq!(ranks, [(0, "mpi"), (1, "mpi"), (2, "mpi"), (3, "mpi")]);
}

#[test]
fn sends_and_receives_without_a_message_are_counted_in_a_warning() {
    let dir = synth("--preset ddp --nodes 1 --gpus-per-node 4 --steps 2 --mpi");
    let report = dir.path().join("node0.sqlite");
    let conn = rusqlite::Connection::open(&report).unwrap();
    let irecv = "(SELECT id FROM StringIds WHERE value = 'MPI_Irecv')";
    // Rank 1's first receive was not captured; rank 2's first receives from any source.
    let first = |pid_rank: i64| {
        format!(
            "rowid = (SELECT e.rowid FROM MPI_P2P_EVENTS e JOIN MPI_RANKS r ON \
             r.globalTid >> 24 = e.globalTid >> 24 WHERE r.rank = {pid_rank} AND \
             e.textId = {irecv} ORDER BY e.start LIMIT 1)"
        )
    };
    let removed = conn
        .execute(
            &format!("DELETE FROM MPI_P2P_EVENTS WHERE {}", first(1)),
            [],
        )
        .unwrap();
    let wild = conn
        .execute(
            &format!(
                "UPDATE MPI_P2P_EVENTS SET remoteRank = -1 WHERE {}",
                first(2)
            ),
            [],
        )
        .unwrap();
    assert_eq!((removed, wild), (1, 1));
    drop(conn);
    let out_dir = tempfile::tempdir().unwrap();
    let base = out_dir.path().join("out");
    let run = crate::util::nsys_lens(&[
        "convert",
        "--to",
        "paraver",
        "-o",
        base.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    let (_, stderr) = crate::util::texts(&run);
    assert!(run.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "3 MPI send(s) and receive(s) not drawn as messages: 2 without a partner in the \
             capture, 1 receiving from any source or with any tag, 0 of processes without an \
             MPI rank"
        ),
        "{stderr}"
    );
    let trace = parse(&base.with_extension("prv"));
    assert_eq!(
        trace.comms.iter().filter(|c| c[7] == TAG).count(),
        4 * 2 - 2
    );
}
