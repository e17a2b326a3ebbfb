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
    let bubbles: Vec<RankBubbles> = classified
        .into_iter()
        .zip(coords)
        .map(|((w, streams), coord)| {
            let process = w.rank.process;
            let mut steps = classify::window::steps(&activity, process, w.bounds, anchor.as_ref());
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
    let mut output = report::bubbles_output(&timeline, &bubbles);
    output
        .notes
        .extend(missing_ideal(&bubbles, pipeline.unread.as_deref()));
    args.r.common.print(&output)
}

/// Says what the ideal bubble lacks where it is absent, and how to give it.
fn missing_ideal(bubbles: &[RankBubbles], why_no_pp: Option<&str>) -> Option<String> {
    let absent = |b: &&RankBubbles| b.ideal.iter().any(Option::is_none);
    let no_pp = bubbles.iter().filter(absent).any(|b| b.pp.is_none());
    let no_m = bubbles
        .iter()
        .filter(absent)
        .any(|b| b.pp.is_some() || b.ideal.len() > 1);
    let mut missing = Vec::new();
    if no_pp {
        let why = why_no_pp.map_or(String::new(), |w| format!(": {w}"));
        missing.push(format!(
            "the pipeline size (no rank label; give --pp N{why})"
        ));
    }
    if no_m {
        missing.push(
            "the micro-batches per step (no `forward...` ranges in the step; give \
             --micro-batches M)"
                .to_string(),
        );
    }
    (!missing.is_empty()).then(|| {
        format!(
            "ideal_bubble_pct is absent where nsys-lens lacks {}",
            missing.join(" and ")
        )
    })
}
