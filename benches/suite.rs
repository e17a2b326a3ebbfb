//! The benchmark suite: `cargo bench` (see docs/performance.md).
//!
//! A plain harness (no criterion or divan): each measurement is one run of the release binary
//! (or the median of several) on a synthetic export, and what matters is wall time, peak RSS
//! and output size of whole commands, which a statistics framework over in-process closures
//! would not measure. Exports are generated once into `target/bench-data/` by `nsys-lens synth`
//! at eight sizes (10 k, 100 k, 1 M and 4 M kernels on one node; `deep1M` and `deep4M`, the
//! same with the GPU 50 ms behind the CPU and 200 variants of every kernel's name, grid and
//! block, the shape of real training; 1 M GPU-metric samples; and 4 nodes x 250 k, on which
//! the cluster path runs too: `part`, `--encode`, `--merge`). The floor is the `sqlite3` shell summing
//! every column the reader reads, table by table (C speed, nothing done per row): every figure
//! is printed as a multiple of it (`x floor`). Each size's `write floor` row is `dd` writing
//! as many bytes as `convert` (both formats) wrote: what putting the output in the page cache
//! alone costs. Without `sqlite3` on PATH the floor is a bare
//! rusqlite scan of the same rows, and the output says so. `NSYS_LENS_BENCH_SIZES=10k,100k`
//! picks sizes; `NSYS_LENS_BENCH_RUNS=3` runs every command (and the floor) three times and
//! keeps the run of median wall time, for a machine whose speed varies.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_nsys-lens");

/// A benchmark input: name, and `synth --preset ddp` arguments (space-separated).
struct Size {
    name: &'static str,
    args: &'static str,
}

const SIZES: &[Size] = &[
    Size {
        name: "10k",
        args: "--nodes 1 --gpus-per-node 1 --layers 32 --steps 21",
    },
    Size {
        name: "100k",
        args: "--nodes 1 --gpus-per-node 1 --layers 32 --steps 207",
    },
    Size {
        name: "1M",
        args: "--nodes 1 --gpus-per-node 1 --layers 32 --steps 2070",
    },
    Size {
        name: "4M",
        args: "--nodes 1 --gpus-per-node 1 --layers 32 --steps 8280",
    },
    Size {
        name: "deep1M",
        args: "--nodes 1 --gpus-per-node 1 --layers 32 --steps 2070 --launch-ahead 50 --name-variety 200",
    },
    Size {
        name: "deep4M",
        args: "--nodes 1 --gpus-per-node 1 --layers 32 --steps 8280 --launch-ahead 50 --name-variety 200",
    },
    Size {
        name: "metrics1M",
        args: "--nodes 1 --gpus-per-node 1 --layers 32 --steps 50 --gpu-metrics",
    },
    Size {
        name: "4x250k",
        args: "--nodes 4 --gpus-per-node 1 --layers 32 --steps 518",
    },
];

/// One measured run.
struct Run {
    wall: f64,
    /// User and system CPU time.
    cpu: f64,
    peak_rss: u64,
    output_bytes: u64,
}

fn main() {
    let wanted: Option<Vec<String>> = std::env::var("NSYS_LENS_BENCH_SIZES")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect());
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data");
    println!(
        "{:<8} {:<18} {:>9} {:>10} {:>11} {:>12} {:>9} {:>9} {:>9}",
        "size",
        "command",
        "wall s",
        "peak MB",
        "output MB",
        "events/s",
        "B/event",
        "x floor",
        "cpu/wall"
    );
    for size in SIZES {
        if wanted
            .as_ref()
            .is_some_and(|w| !w.iter().any(|n| n == size.name))
        {
            continue;
        }
        let dir = data.join(size.name);
        let files = generate(&dir, size);
        let events: u64 = files.iter().map(|f| rows(f)).sum();
        let scan = bare_scan(&files);
        let floor = match sqlite3_floor(&files) {
            Some(floor) => {
                print_row(size.name, "sqlite3 floor", &floor, events, floor.wall);
                floor.wall
            }
            None => {
                eprintln!("no sqlite3 on PATH: the floor is the bare rusqlite scan");
                scan.wall
            }
        };
        print_row(size.name, "bare scan", &scan, events, floor);
        let out = tempfile::tempdir().expect("tempdir");
        let base = out.path().join("out");
        let base = base.to_str().expect("utf-8");
        let page = format!("{base}.html");
        let commands: [(&str, Vec<&str>); 10] = [
            ("info", vec!["info", "-q"]),
            ("overlap", vec!["overlap", "-q", "--whole"]),
            ("collectives", vec!["collectives", "-q", "--whole"]),
            ("critical-path", vec!["critical-path", "-q", "--whole"]),
            (
                "what-if",
                vec!["what-if", "-q", "--whole", "--change", "family=gemm*0.5"],
            ),
            ("kernels", vec!["kernels", "-q", "--whole"]),
            ("metrics", vec!["metrics", "-q", "--whole"]),
            ("report", vec!["report", "-q", "--whole", "-o", &page]),
            (
                "convert perfetto",
                vec!["convert", "-q", "--to", "perfetto", "-o", base],
            ),
            (
                "convert paraver",
                vec!["convert", "-q", "--to", "paraver", "-o", base],
            ),
        ];
        for (name, args) in commands {
            let mut run = measure(&args, &files);
            run.output_bytes = dir_size(out.path());
            print_row(size.name, name, &run, events, floor);
            for entry in std::fs::read_dir(out.path()).expect("list") {
                let _ = std::fs::remove_file(entry.expect("entry").path());
            }
        }
        let mut both = measure(&["convert", "-q", "-o", base], &files);
        both.output_bytes = dir_size(out.path());
        print_row(size.name, "convert both", &both, events, floor);
        let written = write_floor(out.path(), both.output_bytes);
        print_row(size.name, "write floor", &written, events, floor);
        if files.len() > 1 {
            parts(size.name, &files, events, floor);
        }
    }
    if wanted
        .as_ref()
        .is_none_or(|w| w.iter().any(|n| n == KINETO))
    {
        kineto(&data.join(KINETO));
    }
}

/// The torch.profiler trace's size name: 500 k kernels (`synth --format kineto`).
const KINETO: &str = "kineto500k";

/// A torch.profiler trace's first read (translated into the cache: `info` with an empty cache
/// each run) and a cached read, against a bare serde_json parse of the same file, streamed
/// from a reader as ours is (`floor`) and from the whole file in memory (`slice`).
fn kineto(dir: &Path) {
    let trace = dir.join("rank0.json");
    if !trace.exists() {
        let args = "synth --preset ddp --format kineto --nodes 1 --gpus-per-node 1 --layers 32 \
                    --steps 1035 -o";
        let status = Command::new(BIN)
            .args(args.split_whitespace())
            .arg(dir)
            .output();
        assert!(status.expect("synth runs").status.success(), "synth failed");
    }
    /// Counts the events of a trace, ignoring what they hold.
    #[derive(serde::Deserialize)]
    struct Events {
        #[serde(rename = "traceEvents")]
        events: Vec<serde::de::IgnoredAny>,
    }
    let parse = |slice: bool| {
        let started = Instant::now();
        let parsed: Events = match slice {
            true => serde_json::from_slice(&std::fs::read(&trace).expect("read")),
            false => serde_json::from_reader(std::io::BufReader::new(
                std::fs::File::open(&trace).expect("open"),
            )),
        }
        .expect("a JSON trace");
        let wall = started.elapsed().as_secs_f64();
        let run = Run {
            wall,
            cpu: wall,
            peak_rss: 0,
            output_bytes: 0,
        };
        (run, parsed.events.len() as u64)
    };
    let runs = std::env::var("NSYS_LENS_BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let cache = tempfile::tempdir().expect("tempdir");
    let info = |fresh: bool| {
        if fresh {
            let _ = std::fs::remove_dir_all(cache.path());
        }
        let mut command = Command::new(BIN);
        command.args(["info", "-q"]).arg(&trace);
        command.env("NSYS_LENS_CACHE", cache.path());
        Run::from(timed_once(&mut command))
    };
    // The reads run first: a child started after this process held the whole file would
    // count that memory in its peak.
    let mut first: Vec<Run> = (0..runs).map(|_| info(true)).collect();
    first.sort_by(|a, b| a.wall.total_cmp(&b.wall));
    let first = first.swap_remove(runs / 2);
    let cached = info(false);
    // Commands on the cached translation: the trace records every operator's shapes, so each
    // kernel's launching operator is looked up (precision, FLOPs, the traces' counters).
    let out = cache.path().join("out");
    let out = out.to_str().expect("utf-8");
    let commands: [(&str, &[&str]); 3] = [
        ("kernels", &["kernels", "--whole", "-q"]),
        ("mfu", &["mfu", "--whole", "-q"]),
        ("convert both", &["convert", "-q", "-o", out]),
    ];
    let analyses: Vec<(&str, Run)> = (commands.iter())
        .map(|(name, args)| {
            let mut command = Command::new(BIN);
            command.args(*args).arg(&trace);
            command.env("NSYS_LENS_CACHE", cache.path());
            (*name, Run::from(timed_once(&mut command)))
        })
        .collect();
    let (floor, events) = parse(false);
    let (slice, _) = parse(true);
    print_row(KINETO, "serde_json floor", &floor, events, floor.wall);
    print_row(KINETO, "serde_json slice", &slice, events, floor.wall);
    print_row(KINETO, "first read", &first, events, floor.wall);
    print_row(KINETO, "cached read", &cached, events, floor.wall);
    for (name, run) in &analyses {
        print_row(KINETO, name, run, events, floor.wall);
    }
}

/// The cluster path on a run of several nodes: `part` per node, `convert --encode` per node
/// (summed: on a cluster they run at once), `convert --merge`, and the merge against copying the
/// encoded parts' bytes into one file (`merge x copy`).
fn parts(size: &str, files: &[PathBuf], events: u64, floor: f64) {
    let work = tempfile::tempdir().expect("tempdir");
    let parts = work.path().join("parts");
    let out = work.path().join("out/run");
    let out = out.to_str().expect("utf-8");
    let sum = |runs: &[Run]| Run {
        wall: runs.iter().map(|r| r.wall).sum(),
        cpu: runs.iter().map(|r| r.cpu).sum(),
        peak_rss: runs.iter().map(|r| r.peak_rss).max().unwrap_or(0),
        output_bytes: 0,
    };
    let runs: Vec<Run> = files
        .iter()
        .enumerate()
        .map(|(i, file)| {
            let part = parts.join(format!("node{i:03}.lens-part"));
            let part = part.to_str().expect("utf-8");
            measure(&["part", "-q", "-o", part], std::slice::from_ref(file))
        })
        .collect();
    print_row(size, "part (each node)", &sum(&runs), events, floor);
    let inputs = [parts.clone()];
    let runs: Vec<Run> = (0..files.len())
        .map(|i| {
            let n = i.to_string();
            measure(&["convert", "-q", "--encode", &n, "-o", out], &inputs)
        })
        .collect();
    print_row(size, "encode (each node)", &sum(&runs), events, floor);
    let encoded: Vec<PathBuf> = (0..files.len())
        .map(|i| PathBuf::from(format!("{out}.encoded-{i}")))
        .collect();
    let started = Instant::now();
    let mut copy = std::fs::File::create(work.path().join("copy")).expect("creates");
    for file in &encoded {
        let mut from = std::fs::File::open(file).expect("opens");
        std::io::copy(&mut from, &mut copy).expect("copies");
    }
    copy.sync_data().expect("syncs");
    let copied = started.elapsed().as_secs_f64();
    drop(copy);
    let _ = std::fs::remove_file(work.path().join("copy"));
    let mut merge = measure(&["convert", "-q", "--merge", "-o", out], &inputs);
    merge.output_bytes = ["perfetto-trace", "prv", "pcf", "row"]
        .iter()
        .filter_map(|ext| std::fs::metadata(format!("{out}.{ext}")).ok())
        .map(|m| m.len())
        .sum();
    print_row(size, "merge", &merge, events, floor);
    println!(
        "{size:<8} merge x copy: {:.2} (copying the {} encoded parts' {:.0} MB: {copied:.2} s)",
        merge.wall / copied,
        encoded.len(),
        encoded
            .iter()
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.len())
            .sum::<u64>() as f64
            / 1e6
    );
}

/// The export of a size, generated once.
fn generate(dir: &Path, size: &Size) -> Vec<PathBuf> {
    if !dir.join("node0.sqlite").exists() {
        let mut args = vec![
            "synth",
            "-o",
            dir.to_str().expect("utf-8"),
            "--preset",
            "ddp",
        ];
        args.extend(size.args.split_whitespace());
        let status = Command::new(BIN).args(&args).output().expect("synth runs");
        assert!(status.status.success(), "synth failed");
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("bench data")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sqlite"))
        .collect();
    files.sort();
    files
}

const TABLES: &[(&str, &str)] = &[
    (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "start, end, deviceId, streamId, correlationId, globalPid, shortName, demangledName, \
         gridX, gridY, gridZ, blockX, blockY, blockZ, registersPerThread, staticSharedMemory, \
         dynamicSharedMemory",
    ),
    (
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "start, end, globalTid, correlationId, nameId, eventClass",
    ),
    (
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "start, end, deviceId, streamId, correlationId, globalPid, bytes, copyKind",
    ),
    (
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "start, end, deviceId, streamId, correlationId, globalPid, bytes, value",
    ),
    (
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        "start, end, deviceId, streamId, correlationId, globalPid, syncType",
    ),
    (
        "NVTX_EVENTS",
        "start, end, eventType, globalTid, endGlobalTid, domainId, text, textId",
    ),
    ("OSRT_API", "start, end, eventClass, globalTid, nameId"),
    ("GPU_METRICS", "timestamp, typeId, metricId, value"),
];

/// Rows of the event tables.
fn rows(file: &Path) -> u64 {
    let conn = rusqlite::Connection::open(file).expect("opens");
    TABLES
        .iter()
        .filter_map(|(t, _)| {
            conn.query_row(&format!("SELECT count(*) FROM {t}"), [], |r| {
                r.get::<_, i64>(0)
            })
            .ok()
        })
        .sum::<i64>() as u64
}

/// Reads the columns the reader reads, row by row, and discards them.
fn bare_scan(files: &[PathBuf]) -> Run {
    let started = Instant::now();
    let mut checksum = 0i64;
    for file in files {
        let conn =
            rusqlite::Connection::open_with_flags(file, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .expect("opens");
        for (table, columns) in TABLES {
            let Ok(mut stmt) = conn.prepare(&format!("SELECT {columns} FROM {table}")) else {
                continue;
            };
            let n = stmt.column_count();
            let mut rows = stmt.query([]).expect("query");
            while let Some(row) = rows.next().expect("row") {
                for i in 0..n {
                    if let Ok(rusqlite::types::ValueRef::Integer(v)) = row.get_ref(i) {
                        checksum = checksum.wrapping_add(v);
                    }
                }
            }
        }
    }
    std::hint::black_box(checksum);
    Run {
        wall: started.elapsed().as_secs_f64(),
        cpu: 0.0,
        peak_rss: 0,
        output_bytes: 0,
    }
}

/// The `sqlite3` shell summing every column the reader reads, one file after another (None
/// when it is not installed).
fn sqlite3_floor(files: &[PathBuf]) -> Option<Run> {
    Command::new("sqlite3").arg("--version").output().ok()?;
    let mut total = Run {
        wall: 0.0,
        cpu: 0.0,
        peak_rss: 0,
        output_bytes: 0,
    };
    for file in files {
        // Only the tables nsys created: the shell stops at the first missing one.
        let conn = rusqlite::Connection::open(file).expect("opens");
        let sql: String = TABLES
            .iter()
            .filter(|(table, _)| {
                conn.query_row(
                    &format!("SELECT 1 FROM \"{table}\" LIMIT 1"),
                    [],
                    |_| Ok(()),
                )
                .is_ok()
            })
            .map(|(table, columns)| {
                let sums: Vec<String> = columns
                    .split(',')
                    .map(|c| format!("total({})", c.trim()))
                    .collect();
                format!("SELECT {} FROM {table};", sums.join(" + "))
            })
            .collect::<Vec<_>>()
            .join("\n");
        let mut shell = Command::new("sqlite3");
        shell.arg("-readonly").arg(file).arg(&sql);
        let run = timed(shell);
        total.wall += run.wall;
        total.cpu += run.cpu;
        total.peak_rss = total.peak_rss.max(run.peak_rss);
    }
    Some(total)
}

/// Runs the binary once; wall time and the child's peak RSS.
fn measure(args: &[&str], files: &[PathBuf]) -> Run {
    let mut command = Command::new(BIN);
    command.args(args).args(files);
    let run = timed(command);
    assert!(run.succeeded, "{args:?} failed");
    run.into()
}

/// One child run: wall time, CPU time and peak RSS (from wait4), and whether it answered (exit
/// 0, or 1 for nothing to report).
struct Timed {
    wall: f64,
    cpu: f64,
    peak_rss: u64,
    succeeded: bool,
}

impl From<Timed> for Run {
    fn from(t: Timed) -> Run {
        Run {
            wall: t.wall,
            cpu: t.cpu,
            peak_rss: t.peak_rss,
            output_bytes: 0,
        }
    }
}

/// Runs a command to its end, its output discarded, `NSYS_LENS_BENCH_RUNS` times (default
/// once): the run of median wall time.
fn timed(mut command: Command) -> Timed {
    let runs = std::env::var("NSYS_LENS_BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let mut all: Vec<Timed> = (0..runs).map(|_| timed_once(&mut command)).collect();
    all.sort_by(|a, b| a.wall.total_cmp(&b.wall));
    all.swap_remove(all.len() / 2)
}

/// Runs `command` once.
// The child is reaped by wait4, which std's wait cannot replace: it also returns the rusage.
#[allow(clippy::zombie_processes)]
fn timed_once(command: &mut Command) -> Timed {
    let started = Instant::now();
    let child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("runs");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data filled in by wait4 for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child pid with valid pointers.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4");
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Timed {
        wall: started.elapsed().as_secs_f64(),
        cpu: seconds(usage.ru_utime) + seconds(usage.ru_stime),
        peak_rss: usage.ru_maxrss as u64 * 1024,
        // 1: an analysis found nothing to report (a one-rank export has no collective
        // instance), an answer as worth timing as any.
        succeeded: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) <= 1,
    }
}

/// The write floor: `dd` writing as many bytes as `bytes`, in 1 MiB blocks, to a new file in
/// `dir` (the copy into the page cache that every output pays, whatever wrote it).
fn write_floor(dir: &Path, bytes: u64) -> Run {
    let blocks = bytes.div_ceil(1 << 20);
    let script = format!("dd if=/dev/zero of=\"$1/floor-$$\" bs=1M count={blocks} status=none");
    let mut command = Command::new("sh");
    command.args(["-c", &script, "sh", dir.to_str().expect("utf-8")]);
    let mut run: Run = timed(command).into();
    run.output_bytes = bytes;
    for entry in std::fs::read_dir(dir).expect("list").flatten() {
        if entry.file_name().to_string_lossy().starts_with("floor-") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    run
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn print_row(size: &str, command: &str, run: &Run, events: u64, floor: f64) {
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "{size:<8} {command:<18} {:>9.2} {:>10.0} {:>11.1} {:>12.0} {:>9.1} {:>9.2} {:>9.2}",
        run.wall,
        mb(run.peak_rss),
        mb(run.output_bytes),
        events as f64 / run.wall,
        run.output_bytes as f64 / events as f64,
        run.wall / floor,
        run.cpu / run.wall,
    );
}
