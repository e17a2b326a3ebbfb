//! `nsys-lens bubbles REPORT... [WINDOW] [--pp N] [--micro-batches M]`

use super::Outcome;
use super::analysis::RankArgs;
use nsys_lens::analysis::bubbles::{ideal_pct, micro_batches, rank_bubbles};
use nsys_lens::classify::layout::{self, PipelineLayout};
use nsys_lens::classify::{self, Activity, Rank};
use nsys_lens::report::{self, RankBubbles};

/// Options of `bubbles`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens bubbles --whole run/*.sqlite           bubble per rank and step over the capture
  nsys-lens bubbles --whole --pp 2 run.sqlite      with the ideal 1F1B bubble beside it")]
pub struct Args {
    #[command(flatten)]
    r: RankArgs,

    /// Pipeline-parallel size for the ideal bubble (default: the rank label's, else what the
    /// point-to-point transfers show; see `ranks`).
    #[arg(long, value_name = "N")]
    pp: Option<u32>,

    /// Micro-batches per step (default: the `forward...` NVTX ranges of each step).
    #[arg(long, value_name = "M")]
    micro_batches: Option<u32>,
}

/// Prints the pipeline bubble of every rank and step.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let timeline = args.r.common.load()?;
    let activity = Activity::new(&timeline);
    let anchor = args.r.window.anchor_regex()?;
    let (classified, rules) = args.r.classified(&activity)?;
    let ranks: Vec<Rank> = classified.iter().map(|(w, _)| w.rank).collect();
    let pipeline = match args.pp {
        Some(_) => PipelineLayout::default(),
        None => layout::pipeline_coords(&activity, &ranks, &rules),
    };
    let coords = pipeline
        .coords
        .iter()
        .copied()
        .chain(std::iter::repeat(None));
    let (bubbles, whole_steps): (Vec<RankBubbles>, Vec<bool>) = classified
        .into_iter()
        .zip(coords)
        .map(|((w, streams), coord)| {
            let process = w.rank.process;
            let mut steps = classify::window::steps(&activity, process, w.bounds, anchor.as_ref());
            // 1F1B's formula describes whole steps of a one-directional schedule: not a window
            // that is no step (a PithTrain chunk), nor PithTrain's DualPipeV.
            let whole_steps = !steps.is_empty();
            let formula_applies = whole_steps && w.rank.label.is_none();
            if steps.is_empty() {
                steps.push(w.bounds);
            }
            let pp = args.pp.or(coord.map(|(c, _)| c.size));
            let ideal = steps
                .iter()
                .map(|&step| {
                    let m = args
                        .micro_batches
                        .or_else(|| micro_batches(&activity, process, step));
                    ideal_pct(pp?, m?).filter(|_| formula_applies)
                })
                .collect();
            let steps = rank_bubbles(&activity, process, &steps, &streams, &rules);
            let bubbles = RankBubbles {
                window: w,
                pp,
                steps,
                ideal,
            };
            (bubbles, whole_steps)
        })
        .unzip();
    let mut output = report::bubbles_output(&timeline, &bubbles);
    output.notes.extend(missing_ideal(
        &bubbles,
        &whole_steps,
        pipeline.unread.as_deref(),
    ));
    args.r.common.print(&output)
}

/// Says why the ideal bubble is absent where it is: 1F1B's formula does not apply (a PithTrain
/// rank runs DualPipeV; a window that is not whole steps), or an input is missing (and how to
/// give it).
fn missing_ideal(
    bubbles: &[RankBubbles],
    whole_steps: &[bool],
    why_no_pp: Option<&str>,
) -> Vec<String> {
    let mut notes = Vec::new();
    if bubbles.iter().any(|b| b.window.rank.label.is_some()) {
        notes.push(
            "ideal_bubble_pct is not shown for PithTrain ranks: 1F1B's (pp-1)/(m+pp-1) does not \
             describe its DualPipeV schedule"
                .to_string(),
        );
    }
    // Ranks where the formula would apply, but the window holds no whole step.
    let candidates = || {
        bubbles
            .iter()
            .zip(whole_steps)
            .filter(|(b, _)| b.window.rank.label.is_none())
    };
    if candidates().any(|(_, &whole)| !whole) {
        notes.push(
            "ideal_bubble_pct needs whole steps: no step range lies in the window \
             (`ProfilerStep#N`, or the range --anchor names)"
                .to_string(),
        );
    }
    let absent: Vec<(&RankBubbles, bool)> = candidates()
        .filter(|(b, _)| b.ideal.iter().any(Option::is_none))
        .map(|(b, &whole)| (b, whole))
        .collect();
    let mut missing = Vec::new();
    if absent.iter().any(|(b, _)| b.pp.is_none()) {
        let why = why_no_pp.map_or(String::new(), |w| format!(": {w}"));
        missing.push(format!(
            "the pipeline size (no rank label; give --pp N{why})"
        ));
    }
    if absent.iter().any(|(b, whole)| *whole && b.pp.is_some()) {
        missing.push(
            "the micro-batches per step (no `forward...` ranges in the step; give \
             --micro-batches M)"
                .to_string(),
        );
    }
    if !missing.is_empty() {
        notes.push(format!(
            "ideal_bubble_pct is absent where nsys-lens lacks {}",
            missing.join(" and ")
        ));
    }
    notes
}
