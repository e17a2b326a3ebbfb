//! `nsys-lens critical-path REPORT... [WINDOW]`

use super::Outcome;
use super::analysis::RankArgs;
use nsys_lens::query;

/// Options of `critical-path`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens critical-path --whole run/*.sqlite         what set each step's time, across ranks
  nsys-lens critical-path --whole --format csv run/    one row per step, rank, category, name")]
pub struct Args {
    #[command(flatten)]
    r: RankArgs,
}

/// Prints each step's critical path: what it was, on which rank, for how long.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    (args.r).print_query(|loaded, selection| query::critical::critical_path(loaded, selection))
}
