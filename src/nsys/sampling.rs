//! Streaming readers for what the CPU sampler and the scheduler trace record (nsys-sqlite.md
//! §8.20): `COMPOSITE_EVENTS` with their call stacks in `SAMPLING_CALLCHAINS` (one sample per
//! row, its frames one row each, innermost at `stackDepth` 0), and `SCHED_EVENTS` (a thread
//! scheduled in or out of a core), paired into the times each thread ran.

use super::error::Result;
use super::events::Clock;
use super::ids::GlobalId;
use super::report::Report;
use super::schema::{Column, Fields, opt, req};
use super::statement::Statement;
use super::strings::{StringRef, StringResolver};
use crate::model::{Frame, NO_CPU, Ns, StringId, Warning, Warnings};

const SAMPLES: &str = "COMPOSITE_EVENTS";
const CALLCHAINS: &str = "SAMPLING_CALLCHAINS";
const SCHED: &str = "SCHED_EVENTS";

/// One CPU sample, its stack's names resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleRow<'f> {
    /// When, on the merged clock.
    pub time: Ns,
    /// The thread sampled.
    pub thread: GlobalId,
    /// The core it ran on ([`NO_CPU`] when not recorded).
    pub cpu: u16,
    /// Its call stack, innermost frame first.
    pub frames: &'f [Frame],
}

/// One time a thread ran on a core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunRow {
    /// Scheduled in, on the merged clock.
    pub start: Ns,
    /// Scheduled out.
    pub end: Ns,
    /// The thread.
    pub thread: GlobalId,
    /// The core ([`NO_CPU`] beyond 16 bits).
    pub cpu: u16,
    /// `ENUM_SAMPLING_THREAD_STATE` when scheduled out (0 when not recorded).
    pub left_as: u8,
}

/// A core number as the model keeps it.
fn core(cpu: Option<i64>) -> u16 {
    cpu.and_then(|c| u16::try_from(c).ok())
        .filter(|&c| c != NO_CPU)
        .unwrap_or(NO_CPU)
}

/// The next two columns of a call-chain row of `table` (`symbol`, `module`) as a frame, their
/// names resolved.
pub(super) fn frame(
    f: &mut Fields,
    strings: &mut StringResolver,
    table: &'static str,
) -> Result<Frame> {
    let mut name = |column| -> Result<StringId> {
        let at = StringRef {
            table,
            row: f.rowid,
            column,
        };
        let id = f.int()?;
        strings.resolve(id, at)
    };
    let symbol = name("symbol")?;
    let module = name("module")?;
    Ok(Frame { symbol, module })
}

impl Report {
    /// Reads every CPU sample with its call stack, in sample order; samples without a stack
    /// are counted in `warnings` and skipped. Returns the number of samples read.
    pub fn read_samples(
        &self,
        strings: &mut StringResolver,
        warnings: &mut Warnings,
        clock: Clock,
        mut sink: impl FnMut(SampleRow),
    ) -> Result<u64> {
        if !self.schema.has_table(SAMPLES) || !self.schema.has_table(CALLCHAINS) {
            return Ok(0);
        }
        const COLUMNS: &[Column] = &[
            req("id"),
            req("start"),
            req("globalTid"),
            opt("cpu"),
            req("symbol"),
            req("module"),
        ];
        let cpu = match self.schema.has_column(SAMPLES, "cpu") {
            true => "c.cpu",
            false => "NULL",
        };
        let sql = format!(
            "SELECT s.rowid, c.id, c.start, c.globalTid, {cpu}, s.symbol, s.module \
             FROM {SAMPLES} c JOIN {CALLCHAINS} s ON s.id = c.id ORDER BY c.id, s.stackDepth"
        );
        let sql_error = |e| self.sqlite_error(CALLCHAINS, e);
        let mut stmt = Statement::prepare(&self.conn, &sql).map_err(sql_error)?;
        let mut frames = Vec::new();
        let mut current: Option<(i64, Ns, GlobalId, u16)> = None;
        let mut samples = 0;
        let mut emit = |sample: Option<(i64, Ns, GlobalId, u16)>, frames: &mut Vec<Frame>| {
            if let Some((_, time, thread, cpu)) = sample {
                sink(SampleRow {
                    time,
                    thread,
                    cpu,
                    frames,
                });
                samples += 1;
            }
            frames.clear();
        };
        while stmt.step().map_err(sql_error)? {
            let f = &mut Fields::new(&stmt, COLUMNS, self.path(), CALLCHAINS);
            let id = f.int()?;
            let time = clock.map(f.int()?, f)?;
            let thread = GlobalId::decode(f.int()?);
            let cpu = core(f.opt_int()?);
            if current.is_none_or(|(c, ..)| c != id) {
                emit(current.take(), &mut frames);
                current = Some((id, time, thread, cpu));
            }
            frames.push(frame(f, strings, CALLCHAINS)?);
        }
        emit(current, &mut frames);
        let sampled = self.count(SAMPLES)?;
        warnings.add_n(Warning::SampleWithoutStack, sampled.saturating_sub(samples));
        Ok(samples)
    }

    /// How many rows `table` has.
    fn count(&self, table: &'static str) -> Result<u64> {
        let sql = format!("SELECT count(*) FROM {table}");
        self.conn
            .query_row(&sql, [], |row| row.get::<_, i64>(0))
            .map(|n| n.max(0) as u64)
            .map_err(|e| self.sqlite_error(table, e))
    }

    /// Reads `SCHED_EVENTS` thread by thread, each scheduled-in event paired with the
    /// scheduled-out one after it into one run; an event without its pair (a thread already
    /// running when the capture began, or still running at its end) is counted in `warnings`.
    /// Returns the number of runs.
    pub fn read_thread_runs(
        &self,
        warnings: &mut Warnings,
        clock: Clock,
        mut sink: impl FnMut(RunRow),
    ) -> Result<u64> {
        const COLUMNS: &[Column] = &[
            req("globalTid"),
            req("start"),
            req("cpu"),
            req("isSchedIn"),
            opt("threadState"),
        ];
        let mut open: Option<(i64, Ns, u16)> = None;
        let mut unpaired = 0;
        let mut runs = 0;
        let tail = "WHERE globalTid IS NOT NULL ORDER BY globalTid, start, rowid";
        self.for_each_row(SCHED, COLUMNS, tail, |f| {
            let thread = f.int()?;
            let time = clock.map(f.int()?, f)?;
            let cpu = core(f.opt_int()?);
            let scheduled_in = f.int()? != 0;
            let state = f.opt_int()?.unwrap_or(0).clamp(0, 255) as u8;
            let same_thread = open.filter(|&(t, ..)| t == thread);
            if open.is_some() && same_thread.is_none() {
                unpaired += 1;
            }
            open = None;
            match (scheduled_in, same_thread) {
                (true, running) => {
                    unpaired += u64::from(running.is_some());
                    open = Some((thread, time, cpu));
                }
                (false, Some((_, start, cpu))) => {
                    sink(RunRow {
                        start,
                        end: time.max(start),
                        thread: GlobalId::decode(thread),
                        cpu,
                        left_as: state,
                    });
                    runs += 1;
                }
                (false, None) => unpaired += 1,
            }
            Ok(())
        })?;
        unpaired += u64::from(open.is_some());
        warnings.add_n(Warning::UnpairedSchedEvent, unpaired);
        Ok(runs)
    }
}
