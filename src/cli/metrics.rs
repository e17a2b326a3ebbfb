//! `nsys-lens metrics REPORT... [WINDOW]`

use super::Outcome;
use super::analysis::RankArgs;
use nsys_lens::query;

/// Options of `metrics`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens metrics run/*.sqlite                    SM, tensor, DRAM, NVLink and PCIe per rank, steady state
  nsys-lens metrics --whole --format csv run/       every metric of every GPU over the whole capture")]
pub struct Args {
    #[command(flatten)]
    r: RankArgs,
}

/// Prints GPU metrics per rank over its window.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    args.r
        .print_query(|loaded, selection| query::metrics(loaded, selection))
}
