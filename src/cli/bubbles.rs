//! `nsys-lens bubbles REPORT... [WINDOW] [--pp N] [--micro-batches M]`

use super::Outcome;
use super::analysis::RankArgs;
use nsys_lens::query;

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
    let (pp, micro_batches) = (args.pp, args.micro_batches);
    args.r
        .print_query(|loaded, selection| query::bubbles(loaded, selection, pp, micro_batches))
}
