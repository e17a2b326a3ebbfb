//! OS runtime calls (`OSRT_API`, `--trace=osrt`): every call of the real exports reaches both
//! traces, named as SQL names it, under nsys2prv 0.6's types and values; and on a program
//! captured here by the real `nsys`, the calls per function and their total time equal NVIDIA's
//! own `nsys stats -r osrtsum`.

use crate::util::real;
use std::collections::BTreeMap;
use std::path::Path;

/// nsys2prv 0.6: OS runtime calls and pthread calls.
const OSRT: u32 = 66_400_000;
const PTHREAD: u32 = 61_000_000;

/// Calls and total ns per function name.
type Sums = BTreeMap<String, (u64, u64)>;

/// The real exports recorded with `--trace=osrt`.
const WITH_OSRT: &[&str] = &[
    "mordred_report1_pre2022.sqlite",
    "rodinia_gaussian_report5_2022.4.2.sqlite",
    "trixicuda_report1_2023.1.2.sqlite",
    "testcuda_report1_2026.1.1.sqlite",
];

/// Per function, from SQL: the calls (event class 27; the profiler's start and finish markers
/// are not calls) and their total time.
fn sql_sums(report: &Path) -> Sums {
    let conn = rusqlite::Connection::open(report).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT s.value, count(*), sum(o.end - o.start) FROM OSRT_API o \
             JOIN StringIds s ON s.id = o.nameId WHERE o.eventClass = 27 GROUP BY s.value",
        )
        .unwrap();
    stmt.query_map([], |r| {
        let (calls, total): (i64, i64) = (r.get(1)?, r.get(2)?);
        Ok((r.get(0)?, (calls as u64, total as u64)))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// Per function, from a written `.prv`: each begin of the OSRT or pthread types paired with the
/// end that closes it (calls nest per thread), named by the `.pcf`.
fn paraver_sums(prv: &Path) -> Sums {
    let trace = crate::paraver::parse(prv);
    let mut open: BTreeMap<(usize, usize, u32), Vec<(u64, u64)>> = BTreeMap::new();
    let mut sums = Sums::new();
    for (time, task, thread, pairs) in &trace.events {
        for &(ty, value) in pairs.iter().filter(|(ty, _)| [OSRT, PTHREAD].contains(ty)) {
            let stack = open.entry((*task, *thread, ty)).or_default();
            if value > 0 {
                stack.push((*time, value));
                continue;
            }
            let (start, value) = stack.pop().expect("an end closes an open call");
            let name = trace.pcf[&ty].1[&value].clone();
            let entry = sums.entry(name).or_default();
            entry.0 += 1;
            entry.1 += time - start;
        }
    }
    assert!(open.values().all(Vec::is_empty), "calls left open");
    sums
}

#[test]
fn every_os_call_of_the_real_exports_reaches_both_traces() {
    for file in WITH_OSRT {
        let Some(path) = real(file) else { return };
        let want = sql_sums(&path);
        let calls: u64 = want.values().map(|v| v.0).sum();
        let (_dir, base) =
            crate::util::convert_to("perfetto,paraver", std::slice::from_ref(&path), &[]);
        assert_eq!(paraver_sums(&base.with_extension("prv")), want, "{file}");
        crate::paraver::pertalde(&base.with_extension("prv"));
        if let Some(summary) = crate::perfetto::check(&base.with_extension("perfetto-trace")) {
            assert_eq!(
                summary["counts"]["os_runtime"], calls,
                "{file}: Perfetto slices"
            );
        }
        let info = crate::util::json(&["info", path.to_str().unwrap()]);
        assert_eq!(info["rows"][0]["rows"]["osrt"], calls, "{file}: info");
    }
}

#[test]
fn os_call_values_follow_nsys2prv() {
    let Some(path) = real("testcuda_report1_2026.1.1.sqlite") else {
        return;
    };
    let (_dir, base) = crate::util::convert_to("paraver", &[path], &[]);
    let trace = crate::paraver::parse(&base.with_extension("prv"));
    let (label, values) = &trace.pcf[&OSRT];
    assert_eq!(label, "OS Runtime Calls");
    // Every other function in name order from 1; pthread calls under their own type with
    // nsys2prv's fixed values (pthread_create 2, pthread_join 3).
    let mut names: Vec<(u64, &str)> = values.iter().map(|(v, l)| (*v, l.as_str())).collect();
    names.sort();
    let sorted: Vec<&str> = {
        let mut n: Vec<&str> = names
            .iter()
            .map(|(_, l)| *l)
            .filter(|l| *l != "End")
            .collect();
        n.sort();
        n
    };
    let in_value_order: Vec<&str> = names.iter().skip(1).map(|(_, l)| *l).collect();
    assert_eq!(in_value_order, sorted);
    assert!(sorted.iter().all(|n| !n.contains("pthread")), "{sorted:?}");
    let (label, values) = &trace.pcf[&PTHREAD];
    assert_eq!(label, "Pthreads Calls");
    assert_eq!(values[&2], "pthread_create");
    assert_eq!(values[&3], "pthread_join");
}

/// `nsys stats -r osrtsum` as calls and total ns per function.
fn osrtsum(dir: &Path, sqlite: &str) -> Sums {
    let (header, rows) = crate::real_nsys::stats(dir, "osrtsum", sqlite);
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (total, calls, name) = (
        column("Total Time (ns)"),
        column("Num Calls"),
        column("Name"),
    );
    rows.iter()
        .map(|cells| {
            let number = |i: usize| cells[i].parse::<u64>().unwrap();
            (cells[name].clone(), (number(calls), number(total)))
        })
        .collect()
}

/// Captures a small Python program (file reads, sleeps, a second thread) with the real nsys
/// and `--trace=osrt` into `dir/<name>.nsys-rep`.
pub fn capture(dir: &Path, name: &str) {
    let program = "import os, time, threading\n\
                   def work():\n    \
                       for _ in range(5):\n        \
                           os.stat('/')\n        \
                           time.sleep(0.002)\n\
                   t = threading.Thread(target=work); t.start()\n\
                   for _ in range(10):\n    \
                       with open('/etc/hostname') as f: f.read()\n    \
                       time.sleep(0.005)\n\
                   t.join()\n";
    std::fs::write(dir.join("prog.py"), program).unwrap();
    crate::real_nsys::profile(dir, name, &["--trace=osrt"], &["python3", "prog.py"]);
}

#[test]
fn os_call_sums_equal_nsys_stats_on_a_program_captured_by_nsys() {
    if crate::real_nsys::available(&[]).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    capture(dir.path(), "run");
    crate::real_nsys::export(dir.path(), "run");
    let want = osrtsum(dir.path(), "run.sqlite");
    assert!(want.contains_key("clock_nanosleep"), "{want:?}");
    let sqlite = dir.path().join("run.sqlite");
    let (_out, base) = crate::util::convert_to("paraver", &[sqlite], &[]);
    assert_eq!(paraver_sums(&base.with_extension("prv")), want);
}

#[test]
fn synth_records_the_data_loader_wait_and_idle_names_it() {
    let dir = crate::util::synth(
        "--preset ddp --nodes 1 --gpus-per-node 2 --steps 3 --slow-dataloader --osrt",
    );
    let report = dir.path().join("node0.sqlite");
    let want = sql_sums(&report);
    // One wait per rank and step, and nothing else.
    assert_eq!(want.keys().collect::<Vec<_>>(), ["pthread_cond_wait"]);
    assert_eq!(want["pthread_cond_wait"].0, 2 * 3);
    let (_out, base) =
        crate::util::convert_to("perfetto,paraver", std::slice::from_ref(&report), &[]);
    assert_eq!(paraver_sums(&base.with_extension("prv")), want);
    if let Some(summary) = crate::perfetto::check(&base.with_extension("perfetto-trace")) {
        assert_eq!(summary["counts"]["os_runtime"], 6);
    }
    // The compute stream's longest gap on each rank is the data loader's: a host wait during
    // which the launching thread was in pthread_cond_wait.
    let idle = crate::util::json(&["idle", "--whole", report.to_str().unwrap()]);
    let gaps = idle["longest_gaps"].as_array().unwrap();
    for rank in [0, 1] {
        let longest = gaps
            .iter()
            .filter(|g| g["rank"] == rank && g["stream"] == 7)
            .max_by_key(|g| g["idle_ns"].as_i64())
            .unwrap();
        assert_eq!(longest["cause"], "host_wait", "{longest}");
        assert_eq!(longest["os_call"], "pthread_cond_wait", "{longest}");
    }
    // Without --osrt the export has no OSRT_API table and idle names no OS call.
    let plain =
        crate::util::synth("--preset ddp --nodes 1 --gpus-per-node 2 --steps 3 --slow-dataloader");
    let report = plain.path().join("node0.sqlite");
    let idle = crate::util::json(&["idle", "--whole", report.to_str().unwrap()]);
    assert!(
        idle["longest_gaps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["os_call"].is_null())
    );
}
