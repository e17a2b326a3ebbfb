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
use nsys_lens::classify::families::{Families, FamilyCache};
use nsys_lens::classify::{self, Activity, RoleRules, WindowSpec};
use nsys_lens::export::Plan;
use nsys_lens::export::capture::Captures;
use nsys_lens::export::prepare::prepare_all;
use nsys_lens::model::Timeline;
use nsys_lens::spill::Budget;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{Duration, Instant};

/// Seeds that once found a bug, kept as regression cases:
/// 3: a time of i64::MIN made the range check itself overflow (`abs()`);
/// 8: an empty kernel name gave a `.pcf` value line without a label.
const REGRESSIONS: &[u64] = &[3, 8];

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
    let mut matched = collectives::match_instances(&timeline, &processes);
    let transfers = classify::layout::rank_transfers(&activity, &ranks, &rules);
    collectives::add_transfers(&mut matched, &transfers);
    let instances: Vec<_> = matched.instances.iter().collect();
    collectives::by_rank(ranks.len(), &instances);
    classify::layout::pipeline_coords(&activity, &ranks, &rules);
    let report = nsys_lens::nsys::Report::open(path).unwrap();
    let captures = Captures::read(vec![report], 1, Budget::new(1 << 12)).unwrap();
    let activity = Activity::new(&captures.light);
    let ranks = classify::ranks::discover(&activity).unwrap_or_default();
    let plan =
        Plan::new(&activity, &rules, &ranks, &WindowSpec::Whole, true).with_collective_flows();
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
