//! `nsys-lens kernels REPORT... [--steps N] [--families FILE] [WINDOW]`

use super::Outcome;
use super::analysis::{self, RankArgs};
use nsys_lens::analysis::kernels::rank_kernels;
use nsys_lens::classify::families::{Families, FamilyCache};
use nsys_lens::classify::{self, Activity};
use nsys_lens::report::{self, RankBreakdown, RankWindow};
use std::path::PathBuf;

/// Options of `kernels`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens kernels run/*.sqlite                   kernel families per GPU per step, steady-state window
  nsys-lens kernels --whole --steps 3 run.sqlite   the whole capture, which holds 3 steps
  nsys-lens kernels --families mine.toml run.sqlite    your own families first")]
pub struct Args {
    #[command(flatten)]
    r: RankArgs,

    /// How many steps the window holds (default: counted from the step NVTX ranges in it).
    #[arg(long, value_name = "N")]
    steps: Option<usize>,

    /// TOML file of extra kernel families (`[[family]]` with `name` and `pattern`).
    #[arg(long, value_name = "FILE")]
    families: Option<PathBuf>,
}

/// Prints time per kernel family per GPU per step, and step minus kernel time.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let families = match &args.families {
        Some(path) => Families::from_file(path)?,
        None => Families::default(),
    };
    let timeline = args.r.common.load()?;
    let activity = Activity::new(&timeline);
    let ranks = args.r.streams.select(analysis::ranks(&activity)?)?;
    let windows = args.r.window.windows(&activity, &ranks)?;
    let anchor = args.r.window.anchor_regex()?;
    let mut cache = FamilyCache::new(&families, &timeline);
    let breakdowns: Vec<RankBreakdown> = windows
        .into_iter()
        .map(|mut w: RankWindow| {
            let found = classify::window::steps(&activity, w.rank.process, w.bounds, anchor.as_ref());
            let (steps, steps_source) = match (args.steps, found.first(), found.last()) {
                (Some(n), ..) => (n.max(1), "given with --steps".to_string()),
                (None, Some(first), Some(last)) => {
                    // Measure over the steps themselves, not what the window holds around them.
                    w.bounds = (first.0, last.1);
                    (found.len(), "step NVTX ranges inside the window, measured from the first's start to the last's end".to_string())
                }
                _ => (1, "no step NVTX range inside the window: the window is taken as one step".to_string()),
            };
            let kernels = rank_kernels(&activity, w.rank.process, w.bounds, &mut cache);
            RankBreakdown { window: w, kernels, steps, steps_source }
        })
        .collect();
    args.r
        .common
        .print(&report::kernels_output(&timeline, &breakdowns))
}
