//! `kernels`, `idle` and `bubbles`: where each rank's step goes.

use super::format_seconds;
use super::ranks::{RankWindow, key_cells, per_rank_output};
use super::table::{Cell, Output, Table};
use crate::analysis::bubbles::StepBubble;
pub use crate::analysis::idle::GapContext;
use crate::analysis::idle::{Gap, StreamIdle};
use crate::analysis::kernels::RankKernels;
use crate::analysis::overlap::percent;
use crate::analysis::upper_median;
use crate::classify::{RankStreams, Role, RoleRules};
use crate::model::Timeline;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// One rank's kernel breakdown and how many steps its window holds.
pub struct RankBreakdown {
    /// Rank and window.
    pub window: RankWindow,
    /// The breakdown.
    pub kernels: RankKernels,
    /// Steps in the window (times per step are divided by it).
    pub steps: usize,
    /// Where the step count came from.
    pub steps_source: String,
}

/// The `kernels` output.
pub fn kernels_output(timeline: &Timeline, ranks: &[RankBreakdown]) -> Output {
    let mut table = Table::new(&[
        "rank",
        "host",
        "pid",
        "family",
        "kernels",
        "time_ns",
        "time_per_step_ns",
        "share_pct",
        "step_ns",
        "kernel_ns",
        "idle_ns",
        "concurrency_excess_ns",
        "step_minus_kernel_ns",
    ]);
    let mut per_family: BTreeMap<String, Vec<(u64, i64)>> = BTreeMap::new();
    for r in ranks {
        let k = &r.kernels;
        let steps = r.steps.max(1) as i64;
        for f in &k.families {
            let mut row = key_cells(timeline, &r.window.rank);
            row.extend([
                Cell::text(&f.family),
                Cell::Int(f.kernels as i64),
                Cell::Int(f.time_ns),
                Cell::Int(f.time_ns / steps),
                Cell::Percent(percent(f.time_ns, k.kernel_ns)),
            ]);
            row.extend([
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
            ]);
            table.push(row);
            per_family
                .entry(f.family.clone())
                .or_default()
                .push((f.kernels, f.time_ns / steps));
        }
        let mut row = key_cells(timeline, &r.window.rank);
        let total: u64 = k.families.iter().map(|f| f.kernels).sum();
        row.extend([
            Cell::text("all"),
            Cell::Int(total as i64),
            Cell::Int(k.kernel_ns),
            Cell::Int(k.kernel_ns / steps),
            Cell::Percent(if k.kernel_ns > 0 { 100.0 } else { 0.0 }),
            Cell::Int(k.span_ns / steps),
            Cell::Int(k.kernel_ns / steps),
            Cell::Int(k.idle_ns / steps),
            Cell::Int(k.concurrency_excess_ns / steps),
            Cell::Int(k.step_minus_kernel_ns() / steps),
        ]);
        table.push(row);
    }
    if ranks.len() > 1 {
        for (family, values) in per_family {
            let median = |mut v: Vec<i64>| upper_median(&mut v).expect("a family has ranks");
            let mut row = vec![
                Cell::text("all"),
                Cell::text("median"),
                Cell::Empty,
                Cell::text(family),
            ];
            row.extend([
                Cell::Int(median(values.iter().map(|v| v.0 as i64).collect())),
                Cell::Empty,
                Cell::Int(median(values.iter().map(|v| v.1).collect())),
            ]);
            row.extend((0..6).map(|_| Cell::Empty));
            table.push(row);
        }
    }
    let mut output = per_rank_output(timeline, table, ranks.iter().map(|r| &r.window));
    for r in ranks {
        output.heading.push(format!(
            "steps rank {}: {} ({})",
            r.window.rank.rank, r.steps, r.steps_source
        ));
    }
    output.notes.push(
        "step_minus_kernel_ns = idle_ns - concurrency_excess_ns (per step): positive means the \
         GPU sat idle (or a blocked main stream), negative means streams overlapped; rows with \
         rank `all` (host `median`) hold the median across ranks of kernels and \
         time_per_step_ns"
            .to_string(),
    );
    output.notes.extend(unclassified_warnings(ranks));
    output
}

/// The share of a rank's kernel time no family names above which every command says so,
/// percent.
const UNCLASSIFIED_WARNING_PCT: f64 = 10.0;

/// The warnings of [`unclassified_warning`] for the ranks of a breakdown.
fn unclassified_warnings(ranks: &[RankBreakdown]) -> Vec<String> {
    ranks
        .iter()
        .filter_map(|r| {
            let k = &r.kernels;
            let other: i64 = k.unclassified.iter().map(|u| u.time_ns).sum();
            unclassified_warning(r.window.rank.rank, other, k.kernel_ns)
        })
        .collect()
}

/// A warning when rank `rank`'s kernels no family names (`other_ns` of its `kernel_ns`) take
/// over a tenth of its kernel time.
pub fn unclassified_warning(rank: u32, other_ns: i64, kernel_ns: i64) -> Option<String> {
    let share = percent(other_ns, kernel_ns);
    (share > UNCLASSIFIED_WARNING_PCT).then(|| {
        format!(
            "warning: rank {rank}: {share:.1}% of kernel time is in kernels no family names \
             (`other`); `kernels --unclassified` lists them, and a `--families` rule names them \
             (docs/kernels.md)"
        )
    })
}

/// The `kernels --unclassified` output: per rank, each kernel name no family names, with its
/// count, time and share of the rank's kernel time.
pub fn unclassified_output(timeline: &Timeline, ranks: &[RankBreakdown]) -> Output {
    let mut table = Table::new(&[
        "rank",
        "host",
        "pid",
        "name",
        "kernels",
        "time_ns",
        "share_pct",
    ]);
    for r in ranks {
        for u in &r.kernels.unclassified {
            let mut row = key_cells(timeline, &r.window.rank);
            row.extend([
                Cell::text(&u.name),
                Cell::Int(u.kernels as i64),
                Cell::Int(u.time_ns),
                Cell::Percent(percent(u.time_ns, r.kernels.kernel_ns)),
            ]);
            table.push(row);
        }
    }
    let mut output = per_rank_output(timeline, table, ranks.iter().map(|r| &r.window));
    output.notes.push(
        "share_pct is of the rank's kernel time (memcpy and memset included) in its window; \
         name a kernel with `kernels --families FILE` (docs/kernels.md)"
            .to_string(),
    );
    output
}

/// One rank's idle streams and gaps.
pub struct RankIdle<'a> {
    /// Rank and window.
    pub window: RankWindow,
    /// Per stream.
    pub streams: Vec<StreamIdle>,
    /// Roles of its streams over the window.
    pub roles: &'a RankStreams,
    /// The longest gaps, with what the launching thread was doing then.
    pub longest: Vec<(Gap, GapContext)>,
}

/// The `idle` output.
pub fn idle_output(timeline: &Timeline, ranks: &[RankIdle], rules: &RoleRules) -> Output {
    let mut table = Table::new(&[
        "rank",
        "host",
        "pid",
        "device",
        "stream",
        "role",
        "ops",
        "span_ns",
        "idle_ns",
        "host_wait_ns",
        "kernel_wait_ns",
        "other_ns",
    ]);
    let mut gaps = Vec::new();
    let mut notes = Vec::new();
    for r in ranks {
        for s in &r.streams {
            let stream = timeline.stream(s.stream);
            let role = r.roles.role(s.stream).unwrap_or(Role::Copy);
            let mut row = key_cells(timeline, &r.window.rank);
            row.extend([
                Cell::Int(timeline.gpu(stream.gpu).device.into()),
                Cell::Int(stream.stream.into()),
                Cell::text(role.name(rules)),
                Cell::Int(s.ops as i64),
                Cell::Int(s.span_ns),
                Cell::Int(s.idle_ns),
                Cell::Int(s.host_wait_ns),
                Cell::Int(s.kernel_wait_ns),
                Cell::Int(s.other_ns),
            ]);
            table.push(row);
        }
        for (gap, context) in &r.longest {
            let stream = timeline.stream(gap.stream);
            let mut cpu_text = context
                .cpu
                .clone()
                .unwrap_or_else(|| "nothing recorded".to_string());
            if let Some(call) = &context.os_call {
                cpu_text.push_str(&format!(" (OS call {call})"));
            }
            if let Some(hot) = &context.hot_frame {
                cpu_text.push_str(&format!(
                    "; its CPU samples hit {} most ({} of {})",
                    hot.function, hot.hits, hot.samples
                ));
            }
            notes.push(format!(
                "rank {} GPU {} stream {}: idle {} from {} ({}); the launching thread was in: \
                 {cpu_text}",
                r.window.rank.rank,
                timeline.gpu(stream.gpu).device,
                stream.stream,
                super::human_duration(gap.end - gap.start),
                format_seconds(gap.start),
                gap.cause.name(),
            ));
            gaps.push(json!({
                "rank": r.window.rank.rank,
                "device": timeline.gpu(stream.gpu).device,
                "stream": stream.stream,
                "start": gap.start,
                "end": gap.end,
                "idle_ns": gap.end - gap.start,
                "cause": gap.cause,
                "cpu": context.cpu,
                "os_call": context.os_call,
                "hot_frame": context.hot_frame,
                "thread": gap.launcher.map(|t| timeline.thread(t).tid),
            }));
        }
    }
    let mut output = per_rank_output(timeline, table, ranks.iter().map(|r| &r.window));
    output.notes.extend(notes);
    output
        .context
        .insert("longest_gaps".into(), Value::Array(gaps));
    output
}

/// One rank's steps.
pub struct RankBubbles {
    /// Rank and window.
    pub window: RankWindow,
    /// Pipeline-parallel size, when known.
    pub pp: Option<u32>,
    /// Per step.
    pub steps: Vec<StepBubble>,
    /// The ideal 1F1B bubble of each step, %, when pp and the micro-batch count are known.
    pub ideal: Vec<Option<f64>>,
}

/// The `bubbles` output.
pub fn bubbles_output(timeline: &Timeline, ranks: &[RankBubbles]) -> Output {
    let mut table = Table::new(&[
        "rank",
        "host",
        "pid",
        "pp",
        "step",
        "step_ns",
        "busy_ns",
        "bubble_ns",
        "pp_wait_ns",
        "idle_ns",
        "bubble_pct",
        "ideal_bubble_pct",
        "warmup_bubble_ns",
        "steady_bubble_ns",
        "cooldown_bubble_ns",
    ]);
    for r in ranks {
        for (i, (s, ideal)) in r.steps.iter().zip(&r.ideal).enumerate() {
            let mut row = key_cells(timeline, &r.window.rank);
            row.extend([
                Cell::opt_int(r.pp),
                Cell::Int(i as i64),
                Cell::Int(s.step_ns),
                Cell::Int(s.busy_ns),
                Cell::Int(s.bubble_ns),
                Cell::Int(s.pp_wait_ns),
                Cell::Int(s.idle_ns),
                Cell::Percent(s.bubble_pct()),
                ideal.map_or(Cell::Empty, Cell::Percent),
            ]);
            let phases = s.phases.map_or([None; 3], |p| p.map(Some));
            row.extend(phases.map(Cell::opt_int));
            table.push(row);
        }
    }
    let mut output = per_rank_output(timeline, table, ranks.iter().map(|r| &r.window));
    output.notes.push(
        "busy = compute kernels and non-pipeline communication; pp_wait = only pipeline \
         point-to-point (kernel roles pp_p2p, p2p or nccl:SendRecv, on any stream) in flight; idle = no kernel running (copies and sets are not kernels); \
         ideal = 1F1B's (pp-1)/(m+pp-1) with m the forward micro-batch ranges of the step"
            .to_string(),
    );
    output
}
