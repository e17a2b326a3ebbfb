//! `nsys-lens bubbles REPORT... [WINDOW] [--pp N] [--micro-batches M]`

use super::Outcome;
use super::analysis::RankArgs;
use nsys_lens::analysis::bubbles::{ideal_pct, micro_batches, rank_bubbles};
use nsys_lens::classify::{self, Activity};
use nsys_lens::report::{self, RankBubbles};

/// Options of `bubbles`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens bubbles --whole run/*.sqlite           bubble per rank and step over the capture
  nsys-lens bubbles --whole --pp 2 run.sqlite      with the ideal 1F1B bubble beside it")]
pub struct Args {
    #[command(flatten)]
    r: RankArgs,

    /// Pipeline-parallel size, when the rank label does not give it (for the ideal bubble).
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
    let bubbles: Vec<RankBubbles> = classified
        .into_iter()
        .map(|(w, streams)| {
            let process = w.rank.process;
            let mut steps = classify::window::steps(&activity, process, w.bounds, anchor.as_ref());
            if steps.is_empty() {
                steps.push(w.bounds);
            }
            let pp = w.rank.label.map(|l| l.pp.size).or(args.pp);
            let ideal = steps
                .iter()
                .map(|&step| {
                    let m = args
                        .micro_batches
                        .or_else(|| micro_batches(&activity, process, step));
                    ideal_pct(pp?, m?)
                })
                .collect();
            let steps = rank_bubbles(&activity, process, &steps, &streams, &rules);
            RankBubbles {
                window: w,
                pp,
                steps,
                ideal,
            }
        })
        .collect();
    args.r
        .common
        .print(&report::bubbles_output(&timeline, &bubbles))
}
