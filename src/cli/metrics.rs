//! `nsys-lens metrics REPORT... [WINDOW]`

use super::Outcome;
use super::analysis::RankArgs;
use nsys_lens::analysis::metrics::rank_metrics;
use nsys_lens::classify::Activity;
use nsys_lens::report::{self, RankMetrics};

/// Options of `metrics`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens metrics run/*.sqlite                    SM, tensor, DRAM, NVLink and PCIe per rank, steady state
  nsys-lens metrics --whole --format csv run/       every metric of every GPU over the whole capture")]
pub struct Args {
    #[command(flatten)]
    r: RankArgs,
}

/// Prints every GPU metric of every rank's GPUs over its window.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let timeline = args.r.common.load()?;
    let activity = Activity::new(&timeline);
    let (classified, _) = args.r.classified(&activity)?;
    let ranks: Vec<RankMetrics> = classified
        .into_iter()
        .map(|(window, _)| RankMetrics {
            metrics: rank_metrics(&activity, window.rank.process, window.bounds),
            window,
        })
        .collect();
    args.r
        .common
        .print(&report::metrics_output(&timeline, &ranks))
}
