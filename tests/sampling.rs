//! CPU samples and thread scheduling (issue 36): every sample's call stack and every thread's
//! running time in both traces, against `COMPOSITE_EVENTS`/`SAMPLING_CALLCHAINS` and
//! `SCHED_EVENTS` read with SQL on real exports (nsys 2022.4 to 2026.1).

use crate::util::{EVERY_TIME, convert_to, real, sqlite_files};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Per thread (`pid P · [TID]`): its samples in time order, each (time, frames innermost first
/// as `function|module`, the module's path without empty components).
type Stacks = BTreeMap<String, Vec<(i64, Vec<String>)>>;

/// Per thread (`pid P · [TID]`): (runs, ns running).
type Running = BTreeMap<String, (i64, i64)>;

/// The key of a thread: its process's pid and its tid.
fn key(pid: i64, tid: i64) -> String {
    format!("pid {pid} · [{tid}]")
}

/// A module path as the trace cuts it: components between `/`, empty ones left out.
fn module_path(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    parts.join("/")
}

/// Every sample of `export` from SQL, its frames by `stackDepth`.
fn sql_stacks(export: &Path, into: &mut Stacks) {
    let conn = rusqlite::Connection::open(export).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT c.globalTid, c.start, f.value, m.value FROM COMPOSITE_EVENTS c \
             JOIN SAMPLING_CALLCHAINS s ON s.id = c.id JOIN StringIds f ON f.id = s.symbol \
             JOIN StringIds m ON m.id = s.module ORDER BY c.start, c.id, s.stackDepth",
        )
        .unwrap();
    let mut rows = stmt.query([]).unwrap();
    let mut last: Option<(i64, i64)> = None;
    while let Some(r) = rows.next().unwrap() {
        let (tid, start): (i64, i64) = (r.get(0).unwrap(), r.get(1).unwrap());
        let frame = format!(
            "{}|{}",
            r.get::<_, String>(2).unwrap(),
            module_path(&r.get::<_, String>(3).unwrap())
        );
        let samples = into
            .entry(key((tid >> 24) & 0xFF_FFFF, tid & 0xFF_FFFF))
            .or_default();
        if last != Some((tid, start)) {
            samples.push((start, Vec::new()));
        }
        samples.last_mut().unwrap().1.push(frame);
        last = Some((tid, start));
    }
}

/// Per thread from SQL: scheduled-in events, and the sum of scheduled-out times minus the sum
/// of scheduled-in times (the running time, when every in has its out, which is checked).
fn sql_running(export: &Path, into: &mut Running) {
    let conn = rusqlite::Connection::open(export).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT globalTid, sum(isSchedIn != 0), sum(isSchedIn = 0), \
             sum(CASE WHEN isSchedIn != 0 THEN -start ELSE start END) \
             FROM SCHED_EVENTS GROUP BY globalTid",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .unwrap();
    for row in rows {
        let (tid, ins, outs, ns): (i64, i64, i64, i64) = row.unwrap();
        assert_eq!(
            ins,
            outs,
            "{}: thread {tid} is unbalanced",
            export.display()
        );
        into.insert(key((tid >> 24) & 0xFF_FFFF, tid & 0xFF_FFFF), (ins, ns));
    }
}

/// The checker's per-thread keys reduced to `pid P · [TID]`.
fn by_thread<T>(
    map: &serde_json::Map<String, serde_json::Value>,
    f: impl Fn(&serde_json::Value) -> T,
) -> BTreeMap<String, T> {
    map.iter()
        .map(|(k, v)| {
            let (pid, name) = k.split_once(" · ").unwrap();
            let tid = &name[name.rfind('[').unwrap()..];
            (format!("{pid} · {tid}"), f(v))
        })
        .collect()
}

/// Converts `inputs` (the whole capture) to Perfetto and returns its samples (times relative
/// to each thread's first) and running times, as the independent checker decodes them.
fn perfetto(inputs: &[&Path]) -> Option<(Stacks, Running)> {
    let inputs: Vec<PathBuf> = inputs.iter().map(|p| p.to_path_buf()).collect();
    let (_dir, base) = convert_to("perfetto", &inputs, &EVERY_TIME);
    let trace = base.with_extension("perfetto-trace");
    let summary = crate::perfetto::check(&trace)?;
    assert_eq!(summary["problems"], serde_json::json!([]));
    let samples = by_thread(summary["samples"].as_object().unwrap(), |v| {
        let list = v.as_array().unwrap();
        list.iter()
            .map(|s| {
                let frames = s[1].as_array().unwrap();
                let frames = frames.iter().map(|f| f.as_str().unwrap().to_string());
                (s[0].as_i64().unwrap(), frames.collect())
            })
            .collect()
    });
    let running = by_thread(summary["thread_states"].as_object().unwrap(), |v| {
        (v[0].as_i64().unwrap(), v[1].as_i64().unwrap())
    });
    Some((relative(samples), running))
}

/// Each thread's sample times made relative to its first sample.
fn relative(mut stacks: Stacks) -> Stacks {
    for samples in stacks.values_mut() {
        let first = samples.first().map_or(0, |s| s.0);
        samples.iter_mut().for_each(|s| s.0 -= first);
    }
    stacks
}

/// Every export with samples: each sample's stack frame by frame, and each thread's running
/// time, in the Perfetto trace equal SQL's.
fn check_perfetto(inputs: &[&Path]) {
    let (mut stacks, mut running) = (Stacks::new(), Running::new());
    for export in inputs {
        sql_stacks(export, &mut stacks);
        sql_running(export, &mut running);
    }
    let Some((traced, runs)) = perfetto(inputs) else {
        return;
    };
    let stacks = relative(stacks);
    assert_eq!(
        traced.keys().collect::<Vec<_>>(),
        stacks.keys().collect::<Vec<_>>()
    );
    for (thread, samples) in &stacks {
        assert_eq!(traced[thread], *samples, "{thread}: samples differ");
    }
    assert!(stacks.values().map(Vec::len).sum::<usize>() > 100);
    assert_eq!(runs, running);
}

#[test]
fn samples_and_thread_states_in_perfetto_equal_sql_on_one_process() {
    for name in [
        "testcuda_report1_2026.1.1.sqlite",
        "rodinia_gaussian_report5_2022.4.2.sqlite",
    ] {
        let Some(export) = real(name) else { return };
        check_perfetto(&[&export]);
    }
}

#[test]
fn samples_and_thread_states_in_perfetto_equal_sql_across_nine_ranks_on_three_nodes() {
    let Some(dir) = real("fs24_nccl_allreduce_tree_3nodes_9gpus") else {
        return;
    };
    let exports = sqlite_files(&dir);
    let inputs: Vec<&Path> = exports.iter().map(|p| p.as_path()).collect();
    check_perfetto(&inputs);
}

/// Per CPU thread of a one-process Paraver trace (`[TID]`): its running states (count, ns)
/// and its sample records.
fn paraver(export: &Path) -> (BTreeMap<String, (i64, i64)>, BTreeMap<String, i64>) {
    let (_dir, base) = convert_to("paraver", &[export.to_path_buf()], &EVERY_TIME);
    let row = std::fs::read_to_string(base.with_extension("row")).unwrap();
    let threads: Vec<String> = row
        .lines()
        .skip_while(|l| !l.starts_with("LEVEL THREAD"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| l.rsplit(' ').next().unwrap().to_string())
        .collect();
    let prv = std::fs::read_to_string(base.with_extension("prv")).unwrap();
    let (mut running, mut samples) = (BTreeMap::new(), BTreeMap::new());
    for line in prv.lines() {
        let f: Vec<&str> = line.split(':').collect();
        let thread = || threads[f[4].parse::<usize>().unwrap() - 1].clone();
        match f[0] {
            "1" => {
                assert_eq!(f[7], "1", "a state other than Running: {line}");
                let ns = f[6].parse::<i64>().unwrap() - f[5].parse::<i64>().unwrap();
                let r: &mut (i64, i64) = running.entry(thread()).or_default();
                *r = (r.0 + 1, r.1 + ns);
            }
            "2" if f[6] == "30000000" => *samples.entry(thread()).or_default() += 1,
            _ => {}
        }
    }
    let pcf = std::fs::read_to_string(base.with_extension("pcf")).unwrap();
    assert!(pcf.contains("30000000    Sampled functions") && pcf.contains("1    Running"));
    (running, samples)
}

#[test]
fn samples_and_thread_states_in_paraver_equal_sql() {
    for name in [
        "testcuda_report1_2026.1.1.sqlite",
        "mordred_report1_pre2022.sqlite",
        "fs24_nccl_allreduce_tree_3nodes_9gpus/ault42_pid337169.sqlite",
    ] {
        let Some(export) = real(name) else { return };
        let (mut stacks, mut running) = (Stacks::new(), Running::new());
        sql_stacks(&export, &mut stacks);
        sql_running(&export, &mut running);
        let tid = |k: &String| k[k.find('[').unwrap()..].to_string();
        let running: BTreeMap<String, (i64, i64)> =
            running.iter().map(|(k, v)| (tid(k), *v)).collect();
        let samples: BTreeMap<String, i64> = stacks
            .iter()
            .map(|(k, v)| (tid(k), v.len() as i64))
            .collect();
        assert_eq!(paraver(&export), (running, samples), "{name}");
    }
}

/// `idle`'s longest gaps name the function the launching thread's CPU samples hit most during
/// the gap: per sample its innermost frame with a name (not an address, nor nsys's
/// `[Broken backtraces]` marker, whose module is the marker too), else its innermost known
/// module in brackets (on this export `[kernel.kallsyms]`: samples in the kernel whose user
/// frames nsys could not name), else its innermost address; counted with SQL over the gap.
#[test]
fn idle_names_the_hottest_sampled_function_of_the_launching_thread() {
    let Some(export) = real("fs24_nccl_allreduce_tree_3nodes_9gpus/ault42_pid337169.sqlite") else {
        return;
    };
    let out = crate::util::json(&["idle", "--whole", export.to_str().unwrap()]);
    let gaps = out["longest_gaps"].as_array().unwrap();
    let conn = rusqlite::Connection::open(&export).unwrap();
    let (mut named, mut in_kernel) = (0, 0);
    for gap in gaps {
        let Some(tid) = gap["thread"].as_i64() else {
            continue;
        };
        let mut stmt = conn
            .prepare(
                "SELECT c.id, f.value, m.value FROM COMPOSITE_EVENTS c \
                 JOIN SAMPLING_CALLCHAINS s ON s.id = c.id JOIN StringIds f ON f.id = s.symbol \
                 JOIN StringIds m ON m.id = s.module \
                 WHERE c.globalTid & 16777215 = ?1 AND c.start >= ?2 AND c.start < ?3 \
                 ORDER BY c.id, s.stackDepth",
            )
            .unwrap();
        let (start, end) = (gap["start"].as_i64().unwrap(), gap["end"].as_i64().unwrap());
        let rows = stmt
            .query_map((tid, start, end), |r| {
                Ok((r.get::<_, i64>(0)?, (r.get(1)?, r.get(2)?)))
            })
            .unwrap();
        let mut stacks: BTreeMap<i64, Vec<(String, String)>> = BTreeMap::new();
        for row in rows {
            let (id, frame) = row.unwrap();
            stacks.entry(id).or_default().push(frame);
        }
        let mut hits: BTreeMap<String, usize> = BTreeMap::new();
        for frames in stacks.values() {
            let marker = |(symbol, module): &&(String, String)| {
                symbol == "[Broken backtraces]" && module == symbol
            };
            let named = frames.iter().find(|f| !marker(f) && !f.0.starts_with("0x"));
            let known = frames.iter().find(|f| !marker(f) && f.1 != "[Unknown]");
            let hit = match (named, known) {
                (Some((symbol, _)), _) => symbol.clone(),
                (None, Some((_, module))) if module.starts_with('[') => module.clone(),
                (None, Some((_, module))) => format!("[{}]", module.rsplit('/').next().unwrap()),
                (None, None) => frames[0].0.clone(),
            };
            *hits.entry(hit).or_default() += 1;
        }
        let best = hits.values().max().copied();
        let hot = &gap["hot_frame"];
        match best {
            None => assert!(hot.is_null(), "{gap}"),
            Some(most) => {
                let function = hot["function"].as_str().unwrap();
                assert_eq!(hits[function], most, "{gap}");
                assert_eq!(hot["hits"], most, "{gap}");
                assert_eq!(hot["samples"], stacks.len(), "{gap}");
                assert!(!function.contains("Broken backtraces"), "{gap}");
                named += 1;
                in_kernel += usize::from(function == "[kernel.kallsyms]");
            }
        }
    }
    assert!(named >= 2 && in_kernel >= 1, "{gaps:?}");
}

/// Every OS runtime call with a call stack in `OSRT_CALLCHAINS` carries it on its Perfetto
/// slice (`TrackEvent.callstack_iid`), frame by frame as SQL gives it.
#[test]
fn os_calls_carry_their_call_stacks() {
    for name in [
        "testcuda_report1_2026.1.1.sqlite",
        "rodinia_gaussian_report5_2022.4.2.sqlite",
    ] {
        let Some(export) = real(name) else { return };
        let conn = rusqlite::Connection::open(&export).unwrap();
        let mut stmt = conn
            .prepare(
                "SELECT o.rowid, n.value, f.value, m.value FROM OSRT_API o \
                 JOIN StringIds n ON n.id = o.nameId JOIN OSRT_CALLCHAINS c ON c.id = o.callchainId \
                 JOIN StringIds f ON f.id = c.symbol JOIN StringIds m ON m.id = c.module \
                 WHERE o.eventClass = 27 ORDER BY o.rowid, c.stackDepth",
            )
            .unwrap();
        let mut rows = stmt.query([]).unwrap();
        let mut calls: Vec<(i64, String, Vec<String>)> = Vec::new();
        while let Some(r) = rows.next().unwrap() {
            let row: i64 = r.get(0).unwrap();
            let frame = format!(
                "{}|{}",
                r.get::<_, String>(2).unwrap(),
                module_path(&r.get::<_, String>(3).unwrap())
            );
            if calls.last().is_none_or(|c| c.0 != row) {
                calls.push((row, r.get(1).unwrap(), Vec::new()));
            }
            calls.last_mut().unwrap().2.push(frame);
        }
        let mut expected: Vec<(String, Vec<String>)> =
            calls.into_iter().map(|(_, n, f)| (n, f)).collect();
        expected.sort();
        assert!(expected.len() > 100, "{name}: {}", expected.len());
        let export = [export];
        let (_dir, base) = convert_to("perfetto", &export, &EVERY_TIME);
        let trace = base.with_extension("perfetto-trace");
        let Some(summary) = crate::perfetto::check(&trace) else {
            return;
        };
        let traced: Vec<(String, Vec<String>)> =
            serde_json::from_value(summary["slice_stacks"].clone()).unwrap();
        assert_eq!(traced, expected, "{name}");
        // Paraver: Extrae's callers on the call's begin (70000000 + level), valued by function.
        let (_paraver, base) = convert_to("paraver", &export, &EVERY_TIME);
        let trace = crate::paraver::parse(&base.with_extension("prv"));
        let labels = &trace.pcf[&70_000_001].1;
        let mut callers: Vec<Vec<String>> = (trace.events.iter())
            .filter(|(.., pairs)| pairs.iter().any(|&(t, _)| t == 70_000_001))
            .map(|(.., pairs)| {
                let levels = pairs
                    .iter()
                    .filter(|(t, _)| (70_000_001..70_000_200).contains(t));
                levels
                    .map(|(_, v)| labels[v].split(" (").next().unwrap().to_string())
                    .collect()
            })
            .collect();
        callers.sort();
        let mut functions: Vec<Vec<String>> = (expected.iter())
            .map(|(_, frames)| {
                let names = frames
                    .iter()
                    .map(|f| f.split('|').next().unwrap().to_string());
                names.collect()
            })
            .collect();
        functions.sort();
        assert_eq!(callers, functions, "{name}");
    }
}
