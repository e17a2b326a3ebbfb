//! `mfu`: FLOPs, achieved TFLOP/s and MFU per rank, step and kernel family, beside each GPU's
//! peak.

use super::{NothingFound, Selection};
use crate::analysis::mfu::{FamilyWork, RankWork, arithmetic, rank_work};
use crate::classify::families::{Families, FamilyCache};
use crate::classify::peaks::{self, Peaks, Precision};
use crate::classify::{self, Activity, Rank};
use crate::model::Timeline;
use crate::report::{Cell, Output, Table};
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
pub fn mfu(
    timeline: &Timeline,
    selection: &Selection,
    options: MfuOptions,
) -> anyhow::Result<Output> {
    let activity = Activity::new(timeline);
    let windows = selection.windows(&activity)?;
    let anchor = selection.window.anchor_regex()?;
    let families = Families::default();
    let mut cache = FamilyCache::new(&families, timeline);
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
    ]);
    let mut notes = Vec::new();
    let (mut uncounted, mut counted_flops) = ((0u64, 0i64), 0.0);
    let mut lost = (0u64, 0.0);
    for w in &windows {
        let process = w.rank.process;
        let mut steps = classify::window::steps(&activity, process, w.bounds, anchor.as_ref());
        if steps.is_empty() {
            steps.push(w.bounds);
        }
        let whole = (i64::MIN, i64::MAX);
        let comm = classify::streams::classify(&activity, process, whole, &selection.rules);
        let work = rank_work(
            &activity,
            (process, &steps),
            (&comm, &selection.rules),
            &mut cache,
        );
        let (peaks, device) = peaks_of(timeline, &w.rank, options.peak_tflops);
        notes.push(peak_note(
            &w.rank,
            &device,
            peaks.as_ref(),
            options.peak_tflops,
        ));
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
        ],
        notes,
        ..Output::default()
    })
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
    let peaks = peaks_of(timeline, rank, None).0?;
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
    }
}

/// The peaks of `rank`'s GPU and its name as the trace gives it.
fn peaks_of(timeline: &Timeline, rank: &Rank, given: Option<f64>) -> (Option<Peaks>, String) {
    let device = timeline
        .gpus
        .iter()
        .find(|g| g.process == rank.process && rank.device.is_none_or(|d| d == g.device))
        .map(|g| timeline.text(g.name).to_string())
        .unwrap_or_default();
    match given {
        Some(_) => (None, device),
        None => (peaks::of_device(&device), device),
    }
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
