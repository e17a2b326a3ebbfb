//! Paraver's own parser and analyzer on our traces: BSC's `paramedir` (built from
//! `../shared/tools/paraver-kernel` by `.ci/run`) loads every `.prv` written here, computes every
//! shipped preset, and each preset's number per rank equals what the CLI or SQL gives.

use crate::util::{int, json, root, rows, sql_gpu_ops, union_length};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The paramedir binary: `NSYS_LENS_PARAMEDIR`, else `paramedir` on the PATH, else where
/// `build-paramedir.sh` installs it. None (a skip, noted) when there is none; under
/// `NSYS_LENS_CI` that fails when `.ci/run` could have built it.
fn paramedir() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("NSYS_LENS_PARAMEDIR").map(PathBuf::from),
        Some(PathBuf::from("paramedir")),
        Some(PathBuf::from("/opt/paramedir/bin/paramedir")),
    ];
    let found = candidates.into_iter().flatten().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        let buildable = root()
            .join("../shared/tools/paraver-kernel/build-paramedir.sh")
            .exists();
        assert!(
            !(buildable && std::env::var_os("NSYS_LENS_CI").is_some()),
            "CI must build paramedir (see .ci/run)"
        );
        crate::util::skipped("paramedir checks: paramedir is not built (../shared/tools)");
    }
    found
}

/// Every shipped preset.
fn presets() -> Vec<PathBuf> {
    let mut cfgs: Vec<PathBuf> = std::fs::read_dir(root().join("cfgs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cfg"))
        .collect();
    cfgs.sort();
    cfgs
}

/// Converts `input` (whole capture) and computes every preset on it in one paramedir run;
/// returns each preset's CSV text by stem.
fn compute(paramedir: &Path, input: &Path) -> BTreeMap<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("run");
    let convert = crate::util::nsys_lens(&[
        "convert",
        "--critical-path",
        "--to",
        "paraver",
        "-q",
        "-o",
        base.to_str().unwrap(),
        input.to_str().unwrap(),
    ]);
    assert!(
        convert.status.success(),
        "{:?}",
        crate::util::texts(&convert)
    );
    let mut command = Command::new(paramedir);
    command.arg(base.with_extension("prv"));
    for cfg in presets() {
        let stem = cfg.file_stem().unwrap().to_str().unwrap().to_string();
        command
            .arg(&cfg)
            .arg(dir.path().join(format!("{stem}.csv")));
    }
    let run = command.output().unwrap();
    let (out, err) = crate::util::texts(&run);
    assert!(
        run.status.success() && !(out.clone() + &err).contains("Segmentation fault"),
        "paramedir failed on {}: {out}{err}",
        input.display()
    );
    // A preset whose event types the trace lacks (GPU metrics in a capture without them)
    // computes nothing and writes no file.
    presets()
        .iter()
        .filter_map(|cfg| {
            let stem = cfg.file_stem().unwrap().to_str().unwrap().to_string();
            let csv = dir.path().join(format!("{stem}.csv"));
            Some((stem, std::fs::read_to_string(&csv).ok()?))
        })
        .collect()
}

/// A one-column histogram's value per row label (`rank N`), in ns.
fn per_rank(csv: &str) -> BTreeMap<String, i64> {
    csv.lines()
        .filter(|l| l.starts_with("rank "))
        .map(|l| {
            let mut cells = l.split('\t');
            let rank = cells.next().unwrap().to_string();
            let value: f64 = cells.next().unwrap().trim().parse().unwrap();
            (rank, value.round() as i64)
        })
        .collect()
}

/// A CLI table's column per `rank N` row (rank rows only; for tables with stage and role
/// columns, the `all`/`all` row).
fn cli(args: &[&str], column: &str) -> BTreeMap<String, i64> {
    let out = json(args);
    let total = |r: &serde_json::Value, key: &str| r.get(key).is_none_or(|v| v == "all");
    rows(&out)
        .iter()
        .filter(|r| r["rank"].is_u64() && total(r, "stage") && total(r, "role"))
        .map(|r| (format!("rank {}", r["rank"]), int(&r[column])))
        .collect()
}

/// Per rank: the time on the critical path, summed over `critical-path --whole`'s rows.
fn on_path(input: &str) -> BTreeMap<String, i64> {
    let out = json(&["critical-path", "--whole", input]);
    let mut on = BTreeMap::new();
    for r in rows(&out) {
        *on.entry(format!("rank {}", r["rank"])).or_default() += int(&r["ns"]);
    }
    on
}

/// Per rank from SQL: the union of the rank's GPU operations, and of its compute (non-NCCL)
/// kernels. Each report is one host, named by its `Hostname`.
fn sql_per_rank(input: &Path) -> (BTreeMap<String, i64>, BTreeMap<String, i64>) {
    let ranks = json(&["ranks", input.to_str().unwrap()]);
    let reports = crate::util::sqlite_files(input);
    let mut active = BTreeMap::new();
    let mut computing = BTreeMap::new();
    for r in rows(&ranks) {
        let (host, pid) = (r["host"].as_str().unwrap(), int(&r["pid"]) as u32);
        let report = reports
            .iter()
            .find(|p| hostname(p) == host)
            .unwrap_or_else(|| panic!("no report of host {host}"));
        let spans = sql_gpu_ops(report).into_iter().filter(|o| o.0 == pid);
        let kernels = compute_kernels(report).into_iter().filter(|k| k.0 == pid);
        let rank = format!("rank {}", r["rank"]);
        active.insert(
            rank.clone(),
            union_length(spans.map(|o| (o.3, o.4)).collect()),
        );
        computing.insert(rank, union_length(kernels.map(|k| (k.1, k.2)).collect()));
    }
    (active, computing)
}

/// The `Hostname` an export records.
fn hostname(report: &Path) -> String {
    let conn = rusqlite::Connection::open(report).unwrap();
    conn.query_row(
        "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

/// (pid, start, end) of every kernel whose name does not start with `nccl`, from SQL.
fn compute_kernels(report: &Path) -> Vec<(u32, i64, i64)> {
    let conn = rusqlite::Connection::open(report).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT (k.globalPid >> 24) & 16777215, k.start, k.end FROM \
             CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName \
             WHERE lower(substr(s.value, 1, 4)) != 'nccl'",
        )
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn every_preset_computes_in_paramedir_and_equals_the_cli_and_sql() {
    let Some(paramedir) = paramedir() else {
        return;
    };
    for fixture in ["megatron_pp2", "ddp_2node", "pithtrain_pp2_ep2"] {
        let input = root().join("fixtures").join(fixture);
        let at = input.to_str().unwrap();
        let csv = compute(&paramedir, &input);
        let missing: Vec<PathBuf> = presets()
            .into_iter()
            .filter(|p| {
                let stem = p.file_stem().unwrap().to_str().unwrap();
                !["gpu_", "mpi_", "cpu_"].iter().any(|p| stem.starts_with(p))
            })
            .filter(|p| !csv.contains_key(p.file_stem().unwrap().to_str().unwrap()))
            .collect();
        assert!(missing.is_empty(), "{fixture}: no output from {missing:?}");
        let (active, compute_time) = sql_per_rank(&input);
        assert_eq!(
            per_rank(&csv["gpu_active"]),
            active,
            "{fixture}: GPU active"
        );
        assert_eq!(
            per_rank(&csv["compute_time"]),
            compute_time,
            "{fixture}: compute time"
        );
        let overlap = cli(&["overlap", "--whole", at], "exposed_wall_ns");
        assert_eq!(
            per_rank(&csv["exposed_communication"]),
            overlap,
            "{fixture}: exposed communication"
        );
        let waited = cli(&["collectives", "--whole", "--by", "rank", at], "waited_ns");
        assert_eq!(
            per_rank(&csv["collective_wait"]),
            waited,
            "{fixture}: waiting in collectives"
        );
        // A rank never on the path has no rows in the table, and a zero (or no row) in the
        // histogram.
        let nonzero = |m: BTreeMap<String, i64>| -> BTreeMap<String, i64> {
            m.into_iter().filter(|(_, v)| *v > 0).collect()
        };
        let on = nonzero(on_path(at));
        assert!(!on.is_empty(), "{fixture}: no critical path");
        assert_eq!(
            nonzero(per_rank(&csv["critical_path"])),
            on,
            "{fixture}: on the critical path"
        );
        roles_in_their_columns(&csv["communication_by_role"], fixture);
    }
    // The step is the outermost NVTX range of Megatron's ranks: the bubble preset's idle time
    // is `bubbles`' (it crashed paramedir until its composed window named its parents first).
    let input = root().join("fixtures/megatron_pp2");
    let csv = compute(&paramedir, &input);
    let idle = cli(&["bubbles", input.to_str().unwrap()], "idle_ns");
    assert!(idle.values().any(|&v| v > 100_000), "{idle:?}");
    assert_eq!(per_rank(&csv["pipeline_bubble"]), idle);
}

/// In the role histogram every stream's busy time sits in the column of the role its `.row`
/// name ends with, and nowhere else.
fn roles_in_their_columns(csv: &str, fixture: &str) {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let mut streams = 0;
    for line in lines.filter(|l| l.starts_with("CUDA-D")) {
        let cells: Vec<&str> = line.split('\t').collect();
        let role = cells[0].split(' ').nth(1).unwrap();
        for (column, value) in header.iter().zip(&cells).skip(1) {
            let value: f64 = value.trim().parse().unwrap_or(0.0);
            if column.trim() == role {
                assert!(value > 0.0, "{fixture}: {}: no time as {role}", cells[0]);
            } else {
                assert_eq!(value, 0.0, "{fixture}: {} has time as {column}", cells[0]);
            }
        }
        streams += 1;
    }
    assert!(streams > 0, "{fixture}: no stream rows in\n{csv}");
}

/// The `.row` name of every thread, by paramedir's object name `1.<task>.<thread>`.
fn thread_names(trace: &crate::paraver::Trace) -> BTreeMap<String, String> {
    let names = &trace.row["THREAD"];
    let mut objects = BTreeMap::new();
    let mut next = names.iter();
    for (task, (threads, _)) in trace.tasks.iter().enumerate() {
        for thread in 1..=*threads {
            let name = next.next().unwrap().clone();
            objects.insert(format!("1.{}.{thread}", task + 1), name);
        }
    }
    objects
}

/// The value a timeline CSV (object, begin, duration, value; segments in time order) gives
/// `object` at `t`: that of the last segment begun by then (the last one lasts to the end).
fn value_at(csv: &str, object: &str, t: i64) -> f64 {
    csv.lines()
        .rev()
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .find(|c| c[0] == object && c[1].parse::<f64>().unwrap() as i64 <= t)
        .map(|c| c[3].parse().unwrap())
        .unwrap_or_else(|| panic!("{object} has no value at {t}"))
}

#[test]
fn gpu_metric_presets_show_each_sample_of_each_gpu() {
    let Some(paramedir) = paramedir() else {
        return;
    };
    let dir =
        crate::util::synth("--preset ddp --nodes 1 --gpus-per-node 2 --steps 1 --gpu-metrics");
    let report = dir.path().join("node0.sqlite");
    let csv = compute(&paramedir, &report);
    let (_out, base) = crate::util::convert_to("paraver", std::slice::from_ref(&report), &[]);
    let prv = base.with_extension("prv");
    let trace = crate::paraver::parse(&prv);
    let objects = thread_names(&trace);
    // One node, clock offset 0: a sample's time in the trace is its timestamp minus the rebase.
    let rebase = crate::paraver::rebase_offset(&prv);
    let conn = rusqlite::Connection::open(&report).unwrap();
    let samples = |metric: &str, device: u32| -> Vec<(i64, i64)> {
        let mut stmt = conn
            .prepare(
                "SELECT m.timestamp, m.value FROM GPU_METRICS m JOIN TARGET_INFO_GPU_METRICS n \
                 ON n.metricId = m.metricId AND n.typeId = m.typeId \
                 WHERE n.metricName = ?1 AND (m.typeId & 255) = ?2 ORDER BY m.timestamp",
            )
            .unwrap();
        stmt.query_map(rusqlite::params![metric, device], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    let mut checked = 0;
    for (object, name) in &objects {
        let Some(device) = name.strip_prefix("Metrics GPU") else {
            continue;
        };
        let device: u32 = device.parse().unwrap();
        for (preset, metrics) in [
            ("gpu_sm_active", &["SMs Active"][..]),
            (
                "gpu_nvlink",
                &["NVLink RX Bandwidth", "NVLink TX Bandwidth"][..],
            ),
            ("gpu_pcie", &["PCIe RX Bandwidth", "PCIe TX Bandwidth"][..]),
        ] {
            let series: Vec<Vec<(i64, i64)>> = metrics.iter().map(|m| samples(m, device)).collect();
            assert!(
                series[0].len() > 100,
                "{preset}: {} samples",
                series[0].len()
            );
            for (i, &(t, _)) in series[0].iter().enumerate() {
                // A sample at the trace's end time lasts for nothing: no timeline shows it.
                if t - rebase >= trace.end as i64 {
                    continue;
                }
                let want: i64 = series.iter().map(|s| s[i].1).sum();
                let got = value_at(&csv[preset], object, t - rebase);
                assert_eq!(got, want as f64, "{preset} {name} at {t}");
                checked += 1;
            }
        }
    }
    assert!(checked > 0, "no Metrics thread in {objects:?}");
}

#[test]
fn mpi_presets_give_each_rank_its_time_in_mpi_and_each_function_its_time() {
    let Some(paramedir) = paramedir() else {
        return;
    };
    let dir = crate::util::synth("--preset ddp --nodes 1 --gpus-per-node 2 --steps 2 --mpi");
    let report = dir.path().join("node0.sqlite");
    let csv = compute(&paramedir, &report);
    // Per rank, the union of its MPI calls, and per function the time in it; from SQL.
    let conn = rusqlite::Connection::open(&report).unwrap();
    let calls: Vec<(i64, String, i64, i64)> = conn
        .prepare(
            "SELECT r.rank, s.value, e.start, e.end FROM (SELECT globalTid, textId, start, end \
             FROM MPI_P2P_EVENTS UNION SELECT globalTid, textId, start, end FROM \
             MPI_COLLECTIVES_EVENTS UNION SELECT globalTid, textId, start, end FROM \
             MPI_START_WAIT_EVENTS UNION SELECT globalTid, textId, start, end FROM \
             MPI_OTHER_EVENTS) e JOIN StringIds s ON s.id = e.textId \
             JOIN MPI_RANKS r ON r.globalTid >> 24 = e.globalTid >> 24",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut in_mpi = BTreeMap::new();
    for rank in [0, 1] {
        let spans = calls.iter().filter(|c| c.0 == rank).map(|c| (c.2, c.3));
        in_mpi.insert(format!("rank {rank}"), union_length(spans.collect()));
    }
    assert_eq!(per_rank(&csv["mpi_time"]), in_mpi);
    let mut lines = csv["mpi_calls"].lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let mut per_function: BTreeMap<String, i64> = BTreeMap::new();
    for line in lines.filter(|l| l.starts_with("THREAD")) {
        for (column, cell) in header.iter().zip(line.split('\t')).skip(1) {
            let ns: f64 = cell.trim().parse().unwrap_or(0.0);
            *per_function.entry(column.trim().to_string()).or_default() += ns as i64;
        }
    }
    let mut want: BTreeMap<String, i64> = BTreeMap::new();
    for (_, name, start, end) in &calls {
        *want.entry(name.clone()).or_default() += end - start;
    }
    per_function.retain(|name, _| !name.is_empty());
    assert_eq!(per_function, want);
}

/// nsys2prv 0.5.8's presets (its sdist's `cfgs/`, which `.ci/run` downloads from PyPI and names
/// in `NSYS_LENS_NSYS2PRV_CFGS`), or None, noted.
fn nsys2prv_presets() -> Option<Vec<PathBuf>> {
    let Some(dir) = std::env::var_os("NSYS_LENS_NSYS2PRV_CFGS").map(PathBuf::from) else {
        assert!(
            std::env::var_os("NSYS_LENS_CI").is_none(),
            "CI must download nsys2prv's presets (see .ci/run)"
        );
        crate::util::skipped("nsys2prv's presets: NSYS_LENS_NSYS2PRV_CFGS is not set");
        return None;
    };
    let mut cfgs = Vec::new();
    for group in std::fs::read_dir(&dir).unwrap() {
        let group = group.unwrap().path();
        if group.is_dir() {
            for cfg in std::fs::read_dir(&group).unwrap() {
                cfgs.push(cfg.unwrap().path());
            }
        }
    }
    cfgs.retain(|p| p.extension().is_some_and(|e| e == "cfg"));
    cfgs.sort();
    assert!(
        cfgs.len() > 40,
        "{} presets in {}",
        cfgs.len(),
        dir.display()
    );
    Some(cfgs)
}

#[test]
fn nsys2prv_presets_compute_on_our_traces() {
    let (Some(paramedir), Some(presets)) = (paramedir(), nsys2prv_presets()) else {
        return;
    };
    let input = root().join("fixtures/megatron_pp2");
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("run");
    let (_out, converted) =
        crate::util::convert_to("paraver", &crate::util::sqlite_files(&input), &[]);
    let prv = converted.with_extension("prv");
    let mut written = 0;
    for cfg in &presets {
        let csv = base.with_extension("csv");
        let _ = std::fs::remove_file(&csv);
        let run = Command::new(&paramedir)
            .arg(&prv)
            .arg(cfg)
            .arg(&csv)
            .output()
            .unwrap();
        let (out, err) = crate::util::texts(&run);
        let said = out + &err;
        // A preset may name types this capture lacks (graphs, OpenACC, GPU metrics, NCCL
        // payloads): paramedir says so and writes nothing. Anything else must compute.
        let lacks = said.contains("None of the events specified in the filter appear");
        assert!(
            run.status.success() && !said.contains("Segmentation fault"),
            "{}: {said}",
            cfg.display()
        );
        assert!(
            lacks || csv.exists(),
            "{}: no output: {said}",
            cfg.display()
        );
        written += usize::from(csv.exists());
        if cfg.ends_with("analysis/gpu_active.cfg") {
            // nsys2prv's own GPU-active time per task is ours: the union of each rank's GPU
            // operations computed with SQL.
            let text = std::fs::read_to_string(&csv).unwrap();
            assert_eq!(per_rank(&text), sql_per_rank(&input).0);
        }
    }
    assert!(
        written >= 30,
        "only {written} of nsys2prv's presets computed"
    );
}

#[test]
fn graph_launches_are_gpu_and_compute_time_in_the_presets() {
    let Some(paramedir) = paramedir() else {
        return;
    };
    let run = "--preset ddp --nodes 1 --gpus-per-node 2 --steps 2";
    let kernels = crate::util::synth(run);
    let graphs = crate::util::synth(&format!("{run} --cuda-graphs"));
    let (a, b) = (
        compute(&paramedir, &kernels.path().join("node0.sqlite")),
        compute(&paramedir, &graphs.path().join("node0.sqlite")),
    );
    for preset in ["gpu_active", "compute_time", "pipeline_bubble"] {
        let with_kernels = per_rank(&a[preset]);
        assert!(!with_kernels.is_empty(), "{preset}");
        assert_eq!(per_rank(&b[preset]), with_kernels, "{preset}");
    }
}

#[test]
fn running_time_per_thread_in_paramedir_equals_sched_events() {
    let Some(paramedir) = paramedir() else {
        return;
    };
    let Some(export) = crate::util::real("testcuda_report1_2026.1.1.sqlite") else {
        return;
    };
    let (dir, base) = crate::util::convert_to(
        "paraver",
        std::slice::from_ref(&export),
        &crate::util::EVERY_TIME,
    );
    let csv = dir.path().join("running.csv");
    let run = Command::new(&paramedir)
        .arg(base.with_extension("prv"))
        .arg(root().join("cfgs/cpu_running.cfg"))
        .arg(&csv)
        .output()
        .unwrap();
    assert!(run.status.success(), "{:?}", crate::util::texts(&run));
    let text = std::fs::read_to_string(&csv).unwrap();
    // Per thread (`THREAD 1.1.N name [TID]`): the time Running.
    let traced: BTreeMap<String, i64> = text
        .lines()
        .filter(|l| l.starts_with("THREAD "))
        .map(|l| {
            let (name, value) = l.split_once('\t').unwrap();
            let tid = name[name.rfind('[').unwrap()..].to_string();
            let ns: f64 = value.trim().trim_end_matches('\t').parse().unwrap();
            (tid, ns.round() as i64)
        })
        .collect();
    let conn = rusqlite::Connection::open(&export).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT globalTid & 16777215, sum(CASE WHEN isSchedIn != 0 THEN -start ELSE start END) \
             FROM SCHED_EVENTS GROUP BY globalTid",
        )
        .unwrap();
    let sql: BTreeMap<String, i64> = stmt
        .query_map([], |r| {
            Ok((format!("[{}]", r.get::<_, i64>(0)?), r.get(1)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(traced, sql);
}
