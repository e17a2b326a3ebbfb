//! The ground truth of a simulated pipeline: per rank and `ProfilerStep#N`, the step's span, the
//! time the GPU was busy (compute kernels and collectives), the pipeline wait (only
//! point-to-point transfers in flight) and the bubble (span minus busy). Computed from what the
//! simulator placed ([`Schedule`]), independently of nsys-lens' analyses, so `bubbles` can be
//! tested against it. Written as `truth.json` beside the exports of the `megatron` preset.

use super::sim::{Schedule, Work};
use anyhow::{Context, Result};
use std::path::Path;

/// One step of one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct StepTruth {
    /// Global rank.
    pub rank: usize,
    /// Step index.
    pub step: usize,
    /// Step span (the `ProfilerStep#N` range), ns.
    pub step_ns: i64,
    /// Compute kernels and collectives running, ns.
    pub busy_ns: i64,
    /// Span minus busy, ns.
    pub bubble_ns: i64,
    /// Of the bubble, the time only point-to-point transfers ran, ns.
    pub pp_wait_ns: i64,
}

/// The truth of every rank's steps.
pub fn steps(schedules: &[Schedule]) -> Vec<StepTruth> {
    let mut out = Vec::new();
    for (rank, schedule) in schedules.iter().enumerate() {
        for (step, &(start, end)) in schedule.steps.iter().enumerate() {
            let inside = |work: &dyn Fn(Work) -> bool| {
                merged(
                    schedule
                        .kernels
                        .iter()
                        .filter(|k| work(k.2))
                        .map(|k| (k.0.max(start), k.1.min(end)))
                        .filter(|(s, e)| s < e)
                        .collect(),
                )
            };
            let busy = inside(&|w| w != Work::PointToPoint);
            let transfers = inside(&|w| w == Work::PointToPoint);
            let busy_ns: i64 = busy.iter().map(|(s, e)| e - s).sum();
            let pp_only: i64 = transfers
                .iter()
                .map(|&(s, e)| (e - s) - overlap_with(&busy, s, e))
                .sum();
            out.push(StepTruth {
                rank,
                step,
                step_ns: end - start,
                busy_ns,
                bubble_ns: end - start - busy_ns,
                pp_wait_ns: pp_only,
            });
        }
    }
    out
}

/// Writes `truth.json` into `dir`.
pub fn write(dir: &Path, schedules: &[Schedule]) -> Result<()> {
    let path = dir.join("truth.json");
    let text = serde_json::to_string_pretty(&serde_json::json!({ "steps": steps(schedules) }))?;
    std::fs::write(&path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}

/// Sorted, merged intervals.
fn merged(mut spans: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    spans.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::new();
    for (s, e) in spans {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// How much of [s, e) merged intervals cover.
fn overlap_with(merged: &[(i64, i64)], s: i64, e: i64) -> i64 {
    merged
        .iter()
        .map(|&(a, b)| (b.min(e) - a.max(s)).max(0))
        .sum()
}
