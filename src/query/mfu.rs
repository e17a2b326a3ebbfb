//! `mfu`: FLOPs, achieved TFLOP/s and MFU per rank, step and kernel family, beside each GPU's
//! peak.

use super::{Loaded, NothingFound, Selection, captured};
use crate::analysis::mfu::{FamilyWork, RankWork, arithmetic};
use crate::classify::families::Families;
use crate::classify::peaks::{self, Peaks, Precision};
use crate::classify::window::MeasuredSteps;
use crate::classify::{Activity, Rank, RoleRules};
use crate::model::Timeline;
use crate::report::html::FamilySummary;
use crate::report::{Cell, Output, RankWindow, Table};
use crate::time::human_duration;

/// What `mfu` takes beyond the selection.
#[derive(Debug, Clone, Copy, Default)]
pub struct MfuOptions {
    /// A peak TFLOP/s for every GPU and precision, instead of the table's.
    pub peak_tflops: Option<f64>,
    /// The model's FLOPs per step (6 x parameters x tokens), for a model-level MFU.
    pub model_flops_per_step: Option<f64>,
}

/// `mfu`: per rank, step and arithmetic family (and every family with counted FLOPs), its
/// FLOPs, time, achieved TFLOP/s (while it ran and over the step), the peak of its precision
/// and the MFU; a row `all` per rank and step.
pub fn mfu<'a>(
    loaded: impl Into<Loaded<'a>>,
    selection: &Selection,
    options: MfuOptions,
) -> anyhow::Result<Output> {
    let loaded = loaded.into();
    let timeline = loaded.timeline();
    let activity = Activity::new(timeline);
    let windows = selection.windows_in(loaded, &activity)?;
    let anchor = selection.window.anchor_regex()?;
    let found = loaded.measured_steps(&activity, windows.iter(), anchor.as_ref())?;
    let found: Vec<MeasuredSteps> = (found.into_iter().zip(&windows))
        .map(|(found, w)| found.or_window(w.bounds))
        .collect();
    let works = rank_works(loaded, &activity, (&windows, &found), &selection.rules)?;
    let mut table = Table::new(&[
        "rank",
        "step",
        "family",
        "kernels",
        "flops",
        "time_ns",
        "step_ns",
        "achieved_tflops",
        "step_tflops",
        "precision",
        "peak_tflops",
        "mfu_pct",
        "bytes",
        "intensity",
        "bound",
    ]);
    let mut notes = Vec::new();
    let (mut uncounted, mut counted_flops) = ((0u64, 0i64), 0.0);
    let mut lost = (0u64, 0.0);
    for ((w, found), work) in windows.iter().zip(&found).zip(works) {
        let steps = &found.measured;
        let (peaks, device) = peaks_of(timeline, &w.rank);
        notes.push(peak_note(
            &w.rank,
            &device,
            peaks.as_ref(),
            options.peak_tflops,
        ));
        let hbm_tbps = peaks.map(|p| p.hbm_tbps);
        let peak = |precision: Precision| match options.peak_tflops {
            Some(p) => Some(p),
            None => peaks.map(|p| p.tflops(precision)),
        };
        lost.0 += work.without_arithmetic.0;
        lost.1 += work.without_arithmetic.1;
        for (k, (step, families)) in steps.iter().zip(&work.steps).enumerate() {
            let step_ns = step.1 - step.0;
            let mut all = FamilyWork::default();
            let mut by_precision: Vec<(Precision, f64)> = Vec::new();
            for (family, f) in families {
                uncounted.0 += f.uncounted.0;
                uncounted.1 += f.uncounted.1;
                counted_flops += f.flops;
                all.kernels += f.kernels;
                all.flops += f.flops;
                all.bytes += f.bytes;
                all.without_bytes += f.without_bytes;
                all.time_ns += f.time_ns;
                if f.flops == 0.0 && !arithmetic(family) {
                    continue;
                }
                let precision = Precision::of_family(family);
                by_precision.push((precision, f.flops));
                let row = Row {
                    family,
                    work: f,
                    step_ns,
                    precision,
                    peak: peak(precision),
                    hbm_tbps,
                };
                table.push(row.cells(w.rank.rank, k));
            }
            let precision = main_precision(by_precision);
            let row = Row {
                family: "all",
                work: &all,
                step_ns,
                precision,
                peak: peak(precision),
                hbm_tbps,
            };
            table.push(row.cells(w.rank.rank, k));
            if let (Some(model), Some(peak)) = (options.model_flops_per_step, peak(precision)) {
                notes.push(format!(
                    "rank {} step {k}: model MFU {:.2} % ({model:e} FLOPs in {} at {peak} TFLOP/s)",
                    w.rank.rank,
                    100.0 * model / (step_ns.max(1) as f64 * peak * 1e3),
                    human_duration(step_ns)
                ));
            }
        }
    }
    if counted_flops == 0.0 {
        return Err(NothingFound(
            "no kernel has FLOPs: no counted operator with recorded shapes launched one \
             (torch.profiler with record_shapes=True records them)"
                .into(),
        )
        .into());
    }
    if uncounted.0 > 0 {
        notes.push(format!(
            "{} GEMM or attention kernel(s) ({}) ran with no counted operator around them: \
             their FLOPs are not counted (see docs/mfu.md)",
            uncounted.0,
            human_duration(uncounted.1)
        ));
    }
    if lost.0 > 0 {
        notes.push(format!(
            "{} counted operator(s) ({:e} FLOPs) launched no GEMM or attention kernel that the \
             trace holds: left out",
            lost.0, lost.1
        ));
    }
    Ok(Output {
        table,
        heading: vec![
            "FLOPs from each kernel's launching operator and its recorded shapes; achieved = \
             FLOPs / time_ns (while the family ran), step = FLOPs / step_ns; mfu_pct = FLOPs / \
             (step_ns x peak of the family's precision)"
                .into(),
            "bytes: what the operators read and write at least (each tensor once, where the \
             trace records their types); intensity = FLOPs / bytes; bound = memory below the \
             GPU's ridge point (peak TFLOP/s / HBM TB/s), else compute"
                .into(),
        ],
        notes,
        ..Output::default()
    })
}

/// Each window's work per step of `found` (its step ranges), its streams classified over the
/// whole capture.
fn rank_works(
    loaded: Loaded,
    activity: &Activity,
    (windows, found): (&[RankWindow], &[MeasuredSteps]),
    rules: &RoleRules,
) -> anyhow::Result<Vec<RankWork>> {
    let whole = (i64::MIN, i64::MAX);
    let spans: Vec<captured::Span> = windows.iter().map(|w| (w.rank.process, whole)).collect();
    let classified = loaded.classify(activity, &spans, rules)?;
    let processes: Vec<_> = spans.iter().map(|&(p, _)| p).collect();
    let both = (found, &classified[..]);
    Ok(loaded.work(activity, &processes, both, rules, &Families::default())?)
}

/// A step's own precision: the one most of its FLOPs (`by_precision`) ran at; BF16 without.
fn main_precision(mut by_precision: Vec<(Precision, f64)>) -> Precision {
    by_precision.sort_by(|a, b| b.1.total_cmp(&a.1));
    by_precision.first().map_or(Precision::Bf16, |p| p.0)
}

/// `compare`'s MFU of one rank: the mean over `steps` of each step's FLOPs (`work`) against
/// the peak of its main precision on the rank's GPU; None without FLOPs or a known peak.
pub(super) fn mean_mfu(
    timeline: &Timeline,
    rank: &Rank,
    steps: &[(i64, i64)],
    work: &RankWork,
) -> Option<f64> {
    let peaks = peaks_of(timeline, rank).0?;
    let mut total = 0.0;
    for (step, families) in steps.iter().zip(&work.steps) {
        let flops: f64 = families.values().map(|f| f.flops).sum();
        let by_precision = families
            .iter()
            .map(|(family, f)| (Precision::of_family(family), f.flops))
            .collect();
        let peak = peaks.tflops(main_precision(by_precision));
        total += 100.0 * flops / ((step.1 - step.0).max(1) as f64 * peak * 1e3);
    }
    let counted = work
        .steps
        .iter()
        .flat_map(|f| f.values())
        .any(|f| f.flops > 0.0);
    (counted && !steps.is_empty()).then(|| total / steps.len() as f64)
}

/// One row: a family's (or the step's) work against its precision's peak.
struct Row<'a> {
    family: &'a str,
    work: &'a FamilyWork,
    step_ns: i64,
    precision: Precision,
    peak: Option<f64>,
    /// The GPU's HBM bandwidth, TB/s, when the table knows the GPU.
    hbm_tbps: Option<f64>,
}

impl Row<'_> {
    /// Its cells; a family none of whose kernels has counted FLOPs shows none (unknown, not 0).
    fn cells(&self, rank: u32, step: usize) -> Vec<Cell> {
        let known = self.work.flops > 0.0 || self.work.uncounted.0 < self.work.kernels;
        let tflops = |ns: i64| match ns > 0 && known {
            true => Cell::Number(self.work.flops / ns as f64 / 1e3),
            false => Cell::Empty,
        };
        let peak = self.peak.filter(|&p| p > 0.0 && self.step_ns > 0 && known);
        let mfu = peak.map_or(Cell::Empty, |p| {
            Cell::Percent(100.0 * self.work.flops / (self.step_ns as f64 * p * 1e3))
        });
        let flops = match known {
            true => Cell::Int(self.work.flops.round() as i64),
            false => Cell::Empty,
        };
        vec![
            Cell::Int(i64::from(rank)),
            Cell::Int(step as i64),
            Cell::text(self.family),
            Cell::Int(self.work.kernels as i64),
            flops,
            Cell::Duration(self.work.time_ns),
            Cell::Duration(self.step_ns),
            tflops(self.work.time_ns),
            tflops(self.step_ns),
            Cell::text(self.precision.name()),
            self.peak.map_or(Cell::Empty, Cell::Number),
            mfu,
        ]
        .into_iter()
        .chain(self.roofline())
        .collect()
    }

    /// Its bytes, arithmetic intensity (FLOP per byte) and roofline bound, when every kernel
    /// with FLOPs has its operator's bytes.
    fn roofline(&self) -> [Cell; 3] {
        let Some(intensity) = intensity(self.work) else {
            return [Cell::Empty, Cell::Empty, Cell::Empty];
        };
        let bound = bound(intensity, self.peak, self.hbm_tbps);
        [
            Cell::Int(self.work.bytes.round() as i64),
            Cell::Number(intensity),
            bound.map_or(Cell::Empty, Cell::text),
        ]
    }
}

/// A family's FLOPs per byte, when every kernel with FLOPs has its operator's bytes.
fn intensity(work: &FamilyWork) -> Option<f64> {
    (work.flops > 0.0 && work.bytes > 0.0 && work.without_bytes == 0)
        .then(|| work.flops / work.bytes)
}

/// The roofline's bound at `intensity` FLOP/byte: `memory` below the ridge point (peak TFLOP/s
/// over HBM TB/s), else `compute`; None without both.
fn bound(intensity: f64, peak: Option<f64>, hbm_tbps: Option<f64>) -> Option<&'static str> {
    let (peak, hbm) = (peak?, hbm_tbps.filter(|&h| h > 0.0)?);
    Some(match intensity < peak / hbm {
        true => "memory",
        false => "compute",
    })
}

/// The families with FLOPs of `rank` over `steps` (their work in `work`), as `mfu` gives them
/// summed over the steps.
pub(super) fn family_summaries(
    timeline: &Timeline,
    rank: &Rank,
    steps: &[(i64, i64)],
    work: &RankWork,
) -> Vec<FamilySummary> {
    let peaks = peaks_of(timeline, rank).0;
    let step_ns: i64 = steps.iter().map(|s| s.1 - s.0).sum();
    let mut totals: std::collections::BTreeMap<&str, FamilyWork> = Default::default();
    for (family, w) in work.steps.iter().flatten() {
        let total = totals.entry(family).or_default();
        total.flops += w.flops;
        total.bytes += w.bytes;
        total.without_bytes += w.without_bytes;
        total.time_ns += w.time_ns;
    }
    totals
        .into_iter()
        .filter(|(_, w)| w.flops > 0.0 && w.time_ns > 0)
        .map(|(family, w)| {
            let peak = peaks.map(|p| p.tflops(Precision::of_family(family)));
            FamilySummary {
                family: family.to_string(),
                flops_per_step: w.flops / steps.len().max(1) as f64,
                tflops: w.flops / w.time_ns as f64 / 1e3,
                mfu_pct: peak.map(|p| 100.0 * w.flops / (step_ns.max(1) as f64 * p * 1e3)),
                bound: intensity(&w).and_then(|i| bound(i, peak, peaks.map(|p| p.hbm_tbps))),
            }
        })
        .collect()
}

/// The peaks of `rank`'s GPU and its name as the trace gives it.
fn peaks_of(timeline: &Timeline, rank: &Rank) -> (Option<Peaks>, String) {
    let device = timeline
        .gpus
        .iter()
        .find(|g| g.process == rank.process && rank.device.is_none_or(|d| d == g.device))
        .map(|g| timeline.text(g.name).to_string())
        .unwrap_or_default();
    (peaks::of_device(&device), device)
}

/// What peak a rank is measured against.
fn peak_note(rank: &Rank, device: &str, peaks: Option<&Peaks>, given: Option<f64>) -> String {
    let device = match device {
        "" => "a GPU the trace does not name",
        name => name,
    };
    match (given, peaks) {
        (Some(p), _) => format!(
            "rank {}: {device}, peak {p} TFLOP/s (--peak-tflops)",
            rank.rank
        ),
        (None, Some(p)) => format!(
            "rank {}: {device} = {} (dense TFLOP/s fp8 {}, bf16 {}, tf32 {}, fp32 {}; \
             datasheet, see docs/mfu.md)",
            rank.rank, p.name, p.tflops[0], p.tflops[1], p.tflops[2], p.tflops[3]
        ),
        (None, None) => format!(
            "rank {}: {device} is not in the peak table: no MFU (give --peak-tflops)",
            rank.rank
        ),
    }
}
