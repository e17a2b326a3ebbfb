//! A randomized harness, run in CI for a bounded number of cases (`NSYS_LENS_FUZZ_CASES`,
//! default 24 per target; set it higher, or `NSYS_LENS_FUZZ_SECONDS`, for a long run):
//!
//! * the reader on damaged bytes (flipped bytes, truncation, swapped pages) never panics;
//! * arbitrary rows within the real schema (reversed, negative, huge and overlapping times,
//!   unknown streams and pids, odd names, unclosed and crossing NVTX ranges) either load or
//!   are refused, and when they load every analysis runs and both exporters write traces that
//!   pass the project's own checkers.
//!
//! Cases are generated from seeds by a small deterministic generator, so a failure names its
//! seed; seeds that found bugs become fixed regression cases (`REGRESSIONS`).

use crate::scenario::PID;
use crate::util::damaged_copy;
use nsys_lens::analysis::{align, bubbles, collectives, idle, kernels, overlap};
use nsys_lens::classify::comm::is_comm;
use nsys_lens::classify::families::{Families, FamilyCache};
use nsys_lens::classify::{self, Activity, RoleRules, WindowSpec};
use nsys_lens::export::Plan;
use nsys_lens::export::prepare::prepare_all;
use nsys_lens::input::capture::Captures;
use nsys_lens::model::Timeline;
use nsys_lens::spill::Budget;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{Duration, Instant};

/// Seeds that once found a bug, kept as regression cases:
/// 3: a time of i64::MIN made the range check itself overflow (`abs()`);
/// 8: an empty kernel name gave a `.pcf` value line without a label;
/// 57: an XSpace whose only events are two empty ranges at time 0 was converted to a Paraver
/// trace of no task.
const REGRESSIONS: &[u64] = &[3, 8, 57];

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// A time: mostly ordinary, sometimes negative or at the edges.
    fn time(&mut self) -> i64 {
        match self.below(20) {
            0 => -(self.below(1 << 40) as i64),
            1 => *self.pick(&[i64::MIN, i64::MAX, 1 << 61, -(1 << 61), 0]),
            _ => self.below(50_000_000) as i64,
        }
    }
}

/// How many cases per target, and the time budget.
fn budget() -> (u64, Duration) {
    let cases = std::env::var("NSYS_LENS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let seconds = std::env::var("NSYS_LENS_FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX);
    (cases, Duration::from_secs(seconds))
}

/// Runs `case` for the regression seeds, then for seeds 1.. within the budget.
fn run(target: &str, case: impl Fn(u64)) {
    let (cases, seconds) = budget();
    let started = Instant::now();
    let seeds = REGRESSIONS.iter().copied().chain(1..=cases);
    for seed in seeds {
        if started.elapsed() > seconds {
            break;
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| case(seed)));
        assert!(
            outcome.is_ok(),
            "{target}: seed {seed} failed (see the panic above)"
        );
    }
}

#[test]
fn the_reader_never_panics_on_damaged_bytes() {
    run("damaged bytes", |seed| {
        let mut rng = Rng(seed);
        let (_dir, path) = damaged_copy("pithtrain_pp2_ep2/node0.sqlite", "");
        let mut bytes = std::fs::read(&path).unwrap();
        match rng.below(3) {
            0 => {
                for _ in 0..1 + rng.below(64) {
                    let at = rng.below(bytes.len() as u64) as usize;
                    bytes[at] = rng.next() as u8;
                }
            }
            1 => bytes.truncate(rng.below(bytes.len() as u64) as usize),
            _ => {
                let pages = bytes.len() / 4096;
                let (a, b) = (
                    rng.below(pages as u64) as usize,
                    rng.below(pages as u64) as usize,
                );
                for i in 0..4096 {
                    bytes.swap(a * 4096 + i, b * 4096 + i);
                }
            }
        }
        std::fs::write(&path, &bytes).unwrap();
        let _ = Timeline::load(&[&path]);
    });
}

/// Replaces the fixture's events with random rows.
fn random_export(seed: u64) -> (tempfile::TempDir, std::path::PathBuf) {
    let mut rng = Rng(seed);
    let clear = "DELETE FROM NVTX_EVENTS; DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL; \
                 DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME; \
                 DELETE FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION; \
                 DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY;";
    let (dir, path) = damaged_copy("pithtrain_pp2_ep2/node0.sqlite", clear);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let names = [
        "ncclDevKernel_SendRecv",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        "ampere_sgemm_128x64_tn",
        "flash_fwd_kernel",
        "forward chunk 1 (phase0) backward chunk 0 (phase1)",
        "rank=0; pp=0/2 dp=0/1 cp=0/1 ep=0/2; mbs=1 seq=8",
        "layer01.stage2_f",
        "pipeline send/recv",
        "ProfilerStep#0",
        "",
        "é\u{0}\u{7f}ü",
        "ncclGroupStart",
        "ncclGroupEnd",
        "ncclSend",
        "ncclRecv",
        "ncclAllReduce",
        "nccl:all_to_all, op_id = 7",
        "FSDP::all_gather (layers.0)",
    ];
    for (i, name) in names.iter().enumerate() {
        conn.execute(
            "INSERT INTO StringIds (id, value) VALUES (?1, ?2)",
            (20_000 + i as i64, name),
        )
        .unwrap();
    }
    let pids = [PID, PID + 13, 777];
    let insert = |sql: &str, values: &[&dyn rusqlite::ToSql]| {
        // Rows the schema refuses (NOT NULL) are simply not inserted.
        let _ = conn.execute(sql, values);
    };
    for _ in 0..rng.below(400) {
        let pid = i64::from(*rng.pick(&pids));
        let (start, end) = (rng.time(), rng.time());
        let (start, end) = if rng.below(30) == 0 {
            (end, start)
        } else {
            (start.min(end), start.max(end))
        };
        let name = 20_000 + rng.below(names.len() as u64) as i64;
        let correlation = rng.below(50) as i64;
        let stream = *rng.pick(&[7i64, 20, 24, 28]);
        let device = rng.below(2) as i64;
        insert(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, \
             correlationId, globalPid, demangledName, shortName, registersPerThread, gridX, gridY, \
             gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, \
             localMemoryPerThread, localMemoryTotal, gridId, tensorSizeMinusOneElements) VALUES \
             (?1, ?2, ?3, 1, ?4, ?5, ?6, ?7, ?7, 32, 1, 1, 1, 128, 1, 1, 0, 0, 0, 0, 1, '[]')",
            &[
                &start,
                &end,
                &device,
                &stream,
                &correlation,
                &(pid << 24),
                &name,
            ],
        );
        let tid = pid + rng.below(2) as i64 * 29;
        let launch = start.saturating_sub(rng.below(100_000) as i64);
        insert(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, \
             correlationId, nameId, returnValue) VALUES (?1, ?2, 0, ?3, ?4, ?5, 0)",
            &[
                &launch,
                &launch.saturating_add(5),
                &((1i64 << 48) | (pid << 24) | tid),
                &correlation,
                &name,
            ],
        );
    }
    for _ in 0..rng.below(200) {
        let pid = i64::from(*rng.pick(&pids));
        let tid = pid + rng.below(2) as i64 * 29;
        let (start, end) = (rng.time(), rng.time());
        let (start, end) = (start.min(end), start.max(end));
        let kind = *rng.pick(&[59i64, 59, 60, 34, 75, 33, 99]);
        let end: Option<i64> = if kind == 34 || rng.below(15) == 0 {
            None
        } else {
            Some(end)
        };
        let text = 20_000 + rng.below(names.len() as u64) as i64;
        insert(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, textId, domainId) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            &[
                &start,
                &end,
                &kind,
                &((1i64 << 48) | (pid << 24) | tid),
                &text,
                &(rng.below(2) as i64),
            ],
        );
    }
    (dir, path)
}

/// Loads, analyses and exports; the exports must pass the checkers.
fn analyse_and_export(path: &Path, check_perfetto: bool) {
    let Ok(timeline) = Timeline::load(&[path]) else {
        return;
    };
    let activity = Activity::new(&timeline);
    let rules = RoleRules::default();
    let ranks = classify::ranks::discover(&activity).unwrap_or_default();
    let families = Families::default();
    let mut cache = FamilyCache::new(&families, &timeline);
    for spec in [WindowSpec::Steady, WindowSpec::Whole] {
        for rank in &ranks {
            let w = classify::window::find(&activity, rank.process, &spec);
            let bounds = w.bounds(false);
            let streams = classify::streams::classify(&activity, rank.process, bounds, &rules);
            overlap::rank_exposure(&streams, &rules);
            let comm = (&streams, &rules);
            kernels::rank_kernels(&activity, (rank.process, bounds), comm, &mut cache);
            idle::rank_idle(&activity, rank.process, bounds, 10_000);
            let steps = classify::window::steps(&activity, rank.process, bounds, None);
            bubbles::rank_bubbles(&activity, rank.process, &steps, &streams, &rules);
        }
    }
    align::estimate(&timeline);
    let processes: Vec<_> = ranks.iter().map(|r| r.process).collect();
    let mut matched = collectives::match_instances(&activity, &processes, &rules);
    let transfers = classify::layout::rank_transfers(&activity, &ranks, &rules);
    collectives::add_transfers(&mut matched, &transfers);
    let instances: Vec<_> = matched.instances.iter().collect();
    collectives::by_rank(ranks.len(), &instances);
    classify::layout::pipeline_coords(&activity, &ranks, &rules);
    let report = nsys_lens::nsys::Report::open(path).unwrap();
    let captures = Captures::read(vec![report], 1, Budget::new(1 << 12), is_comm).unwrap();
    let activity = Activity::new(&captures.light);
    let ranks = classify::ranks::discover(&activity).unwrap_or_default();
    let plan = Plan::new(&activity, &rules, &ranks, (&WindowSpec::Whole, &[]), true)
        .with_collective_flows();
    if plan.exported.is_empty() {
        // `export::write` refuses it (nothing to export); the writers are not given it.
        return;
    }
    let prepared = prepare_all(&plan, &captures.parts, 1).unwrap();
    let out = tempfile::tempdir().unwrap();
    let base = out.path().join("out");
    let trace = crate::util::write_apart(&plan, &captures.parts, &prepared, &base, 1 << 12);
    crate::paraver::check(&crate::paraver::parse(&base.with_extension("prv")));
    if check_perfetto {
        crate::perfetto::check(&trace);
    }
}

#[test]
fn random_rows_load_or_are_refused_and_always_export_valid_traces() {
    run("random rows", |seed| {
        let (_dir, path) = random_export(seed);
        analyse_and_export(&path, seed % 4 == 0);
    });
}

/// One JSON value of `choices`, as text.
fn one_of(rng: &mut Rng, choices: &[&str]) -> String {
    rng.pick(choices).to_string()
}

/// A random torch.profiler (or JAX Chrome-JSON) trace: events of every phase and category,
/// times and ids from the ordinary to the absurd (exponents, 20 digits, negative, strings,
/// null), arguments of the wrong types, clock bases at the edges.
fn random_kineto(rng: &mut Rng) -> String {
    const TIMES: &[&str] = &[
        "0",
        "1.5",
        "10",
        "250.125",
        "-3",
        "1e300",
        "-1e300",
        "12345678901234567890",
        "9223372036854775.807",
        "-9223372036854775.808",
        "1.0000001",
        "\"12\"",
        "null",
        "1e-9",
    ];
    const IDS: &[&str] = &[
        "0",
        "1",
        "7",
        "4294967295",
        "4294967296",
        "-1",
        "\"x\"",
        "null",
        "1.5",
    ];
    const PHASES: &[&str] = &["X", "X", "X", "M", "i", "B", "E", "s", "f", "", "Z"];
    const CATS: &[&str] = &[
        "kernel",
        "gpu_memcpy",
        "gpu_memset",
        "cuda_runtime",
        "cuda_driver",
        "cuda_sync",
        "cpu_op",
        "user_annotation",
        "python_function",
        "",
        "Kernel",
        "ac2g",
    ];
    const NAMES: &[&str] = &[
        "ncclDevKernel_SendRecv",
        "nvjet_tst_1",
        "record_param_comms",
        "ProfilerStep#1",
        "train",
        "",
        "cudaLaunchKernel",
        "MemcpyD2H",
        "Memset",
        "process_name",
        "thread_name",
    ];
    const ARGS: &[&str] = &[
        "{}",
        "{\"device\": 0, \"stream\": 7, \"correlation\": 3}",
        "{\"device\": -1, \"stream\": 1e40, \"correlation\": \"x\"}",
        "{\"grid\": [1, 2, 3], \"block\": [-1, 10000000000, 0], \"registers per thread\": -5}",
        "{\"grid\": \"x\", \"shared memory\": 1e300}",
        "{\"name\": \"/device:GPU:0\"}",
        "{\"name\": \"/host:CPU\"}",
        "{\"name\": \"/device:GPU:99999999999\"}",
        "{\"Collective name\": \"allreduce\", \"In msg nelems\": 18446744073709551615, \"Group size\": -2, \"dtype\": \"Float\"}",
        "{\"correlation_id\": \"9\", \"kernel_details\": \"regs:-1 grid:a,b,c block:1\", \"step_num\": \"-3\"}",
        "{\"memset_details\": \"size:99999999999999999999\"}",
        "{\"step_num\": 1e300}",
        "[1, 2]",
        "null",
    ];
    let base = one_of(
        rng,
        &[
            "",
            "1779267600001000000",
            "9223372036854775807",
            "-1",
            "\"abc\"",
            "1e300",
        ],
    );
    let mut text = String::from("{");
    if !base.is_empty() {
        text += &format!("\"baseTimeNanoseconds\": {base}, ");
    }
    text += "\"traceEvents\": [";
    let events = rng.below(40);
    for i in 0..events {
        if i > 0 {
            text += ", ";
        }
        text += &format!(
            "{{\"ph\": \"{}\", \"cat\": \"{}\", \"name\": \"{}\", \"pid\": {}, \"tid\": {}, \
             \"ts\": {}, \"dur\": {}, \"args\": {}}}",
            one_of(rng, PHASES),
            one_of(rng, CATS),
            one_of(rng, NAMES),
            one_of(rng, IDS),
            one_of(rng, IDS),
            one_of(rng, TIMES),
            one_of(rng, TIMES),
            one_of(rng, ARGS),
        );
    }
    text + "]}"
}

/// Translates `bytes` as a trace of `format`; when it is taken, every analysis and both
/// exporters run on the translation.
fn translate_and_analyse(bytes: &[u8], name: &str, format: nsys_lens::input::Format) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let target = dir.path().join("translated.sqlite");
    if nsys_lens::input::translate(&path, format, &target).is_ok() {
        analyse_and_export(&target, false);
    }
}

#[test]
fn random_and_damaged_torch_profiler_traces_translate_or_are_refused() {
    run("Kineto", |seed| {
        let mut rng = Rng(seed);
        let text = random_kineto(&mut rng);
        translate_and_analyse(
            text.as_bytes(),
            "rank-0.json",
            nsys_lens::input::Format::Kineto,
        );
        // The same text cut short or with bytes changed.
        let mut bytes = text.into_bytes();
        match rng.below(2) {
            0 => bytes.truncate(rng.below(bytes.len() as u64) as usize),
            _ => {
                for _ in 0..1 + rng.below(8) {
                    let at = rng.below(bytes.len() as u64) as usize;
                    bytes[at] = rng.next() as u8;
                }
            }
        }
        translate_and_analyse(&bytes, "rank-0.json", nsys_lens::input::Format::Kineto);
    });
}

/// A random `XSpace`: GPU and host planes (and others), lines at the edges of time, events
/// with any offset and duration, stats of any type.
fn random_xspace(rng: &mut Rng) -> Vec<u8> {
    use nsys_lens::input::xplane::protos::{
        XEvent, XEventMetadata, XLine, XPlane, XSpace, XStat, XStatMetadata, x_event, x_stat,
    };
    use prost::Message;
    let stat_names = [
        "correlation_id",
        "kernel_details",
        "memset_details",
        "memcpy_details",
        "step_num",
    ];
    // Metadata ids from 1, in the names' order.
    let by_id = |names: &[&str]| -> Vec<(i64, String)> {
        (1..).zip(names.iter().map(|n| n.to_string())).collect()
    };
    let stat_metadata: std::collections::HashMap<i64, XStatMetadata> = by_id(&stat_names)
        .into_iter()
        .map(|(id, name)| {
            (
                id,
                XStatMetadata {
                    id,
                    name,
                    ..XStatMetadata::default()
                },
            )
        })
        .collect();
    let event_names = [
        "nvjet_tst_1",
        "Memset",
        "MemcpyH2D",
        "train",
        "cuLaunchKernel",
        "",
    ];
    let event_metadata: std::collections::HashMap<i64, XEventMetadata> = by_id(&event_names)
        .into_iter()
        .map(|(id, name)| {
            (
                id,
                XEventMetadata {
                    id,
                    name,
                    ..XEventMetadata::default()
                },
            )
        })
        .collect();
    let edge = [0, 1, -1, i64::MAX, i64::MIN, 1_735_689_600_000_000_000];
    let mut planes = Vec::new();
    for _ in 0..1 + rng.below(3) {
        let name = *rng.pick(&[
            "/device:GPU:0",
            "/device:GPU:4294967296",
            "/host:CPU",
            "/device:TPU:0",
        ]);
        let mut lines = Vec::new();
        for _ in 0..rng.below(3) {
            let mut events = Vec::new();
            for _ in 0..rng.below(6) {
                let value = match rng.below(4) {
                    0 => x_stat::Value::Int64Value(*rng.pick(&edge)),
                    1 => x_stat::Value::StrValue(
                        rng.pick(&["size:4096", "regs:1 grid:1,1,1", "x", ""])
                            .to_string(),
                    ),
                    2 => x_stat::Value::DoubleValue(*rng.pick(&[1e300, -1.0, f64::NAN])),
                    _ => x_stat::Value::RefValue(rng.next()),
                };
                events.push(XEvent {
                    metadata_id: 1 + rng.below(7) as i64,
                    data: Some(x_event::Data::OffsetPs(*rng.pick(&edge))),
                    duration_ps: *rng.pick(&edge),
                    stats: vec![XStat {
                        metadata_id: 1 + rng.below(6) as i64,
                        value: Some(value),
                    }],
                });
            }
            lines.push(XLine {
                id: rng.next() as i64,
                name: rng
                    .pick(&["Stream #7(Compute)", "Stream #x", "XLA Ops", "python3"])
                    .to_string(),
                timestamp_ns: *rng.pick(&edge),
                events,
                ..XLine::default()
            });
        }
        // Metadata present or missing, each half the time.
        let mut plane = XPlane {
            name: name.into(),
            lines,
            ..XPlane::default()
        };
        if rng.below(2) == 0 {
            plane.event_metadata = event_metadata.clone();
        }
        if rng.below(2) == 0 {
            plane.stat_metadata = stat_metadata.clone();
        }
        planes.push(plane);
    }
    XSpace {
        planes,
        ..XSpace::default()
    }
    .encode_to_vec()
}

#[test]
fn random_and_damaged_xspaces_translate_or_are_refused() {
    run("XSpace", |seed| {
        let mut rng = Rng(seed);
        let bytes = random_xspace(&mut rng);
        translate_and_analyse(&bytes, "host.xplane.pb", nsys_lens::input::Format::Xplane);
        let mut damaged = bytes;
        if !damaged.is_empty() {
            let at = rng.below(damaged.len() as u64) as usize;
            damaged[at] = rng.next() as u8;
            damaged.truncate(rng.below(damaged.len() as u64 + 1) as usize);
        }
        translate_and_analyse(&damaged, "host.xplane.pb", nsys_lens::input::Format::Xplane);
    });
}
