//! `nsys-lens idle REPORT... [WINDOW]`

use super::Outcome;
use super::analysis::RankArgs;
use nsys_lens::query;

/// Options of `idle`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens idle --whole run/*.sqlite              idle time per stream by cause, whole capture
  nsys-lens idle --launch-gap 5000 run.sqlite      gaps under 5 us after a timely launch are kernel waits")]
pub struct Args {
    #[command(flatten)]
    r: RankArgs,

    /// A gap shorter than this after a launch that came in time is launch latency (ns).
    #[arg(long, value_name = "NS", default_value_t = 10_000)]
    launch_gap: i64,
}

/// Prints GPU idle time per stream, split by cause, and the longest gaps.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let launch_gap = args.launch_gap;
    args.r
        .print_query(|loaded, selection| query::idle(loaded, selection, launch_gap))
}
