//! The benchmark suite: `cargo bench` (see docs/performance.md).
//!
//! A plain harness (no criterion or divan): each measurement is one run of the release binary
//! on a synthetic export, and what matters is wall time, peak RSS and output size of whole
//! commands, which a statistics framework over in-process closures would not measure. Exports
//! are generated once into `target/bench-data/` by `nsys-lens synth` at five sizes (10 k, 100 k
//! and 1 M kernels on one node, 1 M GPU-metric samples, and 4 nodes x 250 k). The floor is the `sqlite3` shell summing
//! every column the reader reads, table by table (C speed, nothing done per row): every figure
//! is printed as a multiple of it (`x floor`). Without `sqlite3` on PATH the floor is a bare
//! rusqlite scan of the same rows, and the output says so. `NSYS_LENS_BENCH_SIZES=10k,100k`
//! picks sizes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_nsys-lens");

/// A benchmark input: name, nodes, synth arguments.
struct Size {
    name: &'static str,
    args: &'static [&'static str],
}

const SIZES: &[Size] = &[
    Size {
        name: "10k",
        args: &[
            "--nodes",
            "1",
            "--gpus-per-node",
            "1",
            "--layers",
            "32",
            "--steps",
            "21",
        ],
    },
    Size {
        name: "100k",
        args: &[
            "--nodes",
            "1",
            "--gpus-per-node",
            "1",
            "--layers",
            "32",
            "--steps",
            "207",
        ],
    },
    Size {
        name: "1M",
        args: &[
            "--nodes",
            "1",
            "--gpus-per-node",
            "1",
            "--layers",
            "32",
            "--steps",
            "2070",
        ],
    },
    Size {
        name: "metrics1M",
        args: &[
            "--nodes",
            "1",
            "--gpus-per-node",
            "1",
            "--layers",
            "32",
            "--steps",
            "50",
            "--gpu-metrics",
        ],
    },
    Size {
        name: "4x250k",
        args: &[
            "--nodes",
            "4",
            "--gpus-per-node",
            "1",
            "--layers",
            "32",
            "--steps",
            "518",
        ],
    },
];

/// One measured run.
struct Run {
    wall: f64,
    peak_rss: u64,
    output_bytes: u64,
}

fn main() {
    let wanted: Option<Vec<String>> = std::env::var("NSYS_LENS_BENCH_SIZES")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect());
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data");
    println!(
        "{:<8} {:<18} {:>9} {:>10} {:>11} {:>12} {:>9} {:>9}",
        "size", "command", "wall s", "peak MB", "output MB", "events/s", "B/event", "x floor"
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
        let commands: [(&str, Vec<&str>); 6] = [
            ("info", vec!["info", "-q"]),
            ("overlap", vec!["overlap", "-q", "--whole"]),
            ("kernels", vec!["kernels", "-q", "--whole"]),
            ("metrics", vec!["metrics", "-q", "--whole"]),
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
    }
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
        args.extend(size.args);
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

/// One child run: wall time, peak RSS (from wait4) and whether it exited with 0.
struct Timed {
    wall: f64,
    peak_rss: u64,
    succeeded: bool,
}

impl From<Timed> for Run {
    fn from(t: Timed) -> Run {
        Run {
            wall: t.wall,
            peak_rss: t.peak_rss,
            output_bytes: 0,
        }
    }
}

/// Runs a command to its end, its output discarded.
// The child is reaped by wait4, which std's wait cannot replace: it also returns the rusage.
#[allow(clippy::zombie_processes)]
fn timed(mut command: Command) -> Timed {
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
    Timed {
        wall: started.elapsed().as_secs_f64(),
        peak_rss: usage.ru_maxrss as u64 * 1024,
        succeeded: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
    }
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
        "{size:<8} {command:<18} {:>9.2} {:>10.0} {:>11.1} {:>12.0} {:>9.1} {:>9.2}",
        run.wall,
        mb(run.peak_rss),
        mb(run.output_bytes),
        events as f64 / run.wall,
        run.output_bytes as f64 / events as f64,
        run.wall / floor,
    );
}
