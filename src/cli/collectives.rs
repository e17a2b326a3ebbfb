//! `nsys-lens collectives REPORT... [WINDOW] [--by rank] [--top N]`

use super::Outcome;
use super::analysis::RankArgs;
use nsys_lens::query::{self, CollectiveOptions};

/// Options of `collectives`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens collectives --whole run/*.sqlite                 every instance: skew, last rank, waits
  nsys-lens collectives --whole --top 10 run/                the ten worst arrival skews
  nsys-lens collectives --whole --by rank run/               per rank: time waited, time caused
  nsys-lens collectives --whole --p2p run/                   pipeline transfers too, sender to receiver
  nsys-lens collectives --whole --align collectives run/     on clocks corrected across nodes")]
pub struct Args {
    #[command(flatten)]
    r: RankArgs,

    /// Totals per rank instead of one row per instance.
    #[arg(long, value_enum, value_name = "WHAT")]
    by: Option<By>,

    /// Only the N instances with the largest arrival skew, worst first.
    #[arg(long, value_name = "N")]
    top: Option<usize>,

    /// Also list point-to-point transfers (op `p2p`): each receive that waited, matched to the
    /// send of another rank that ended with it (by timing: see docs/stragglers.md).
    #[arg(long)]
    p2p: bool,
}

/// What `--by` totals over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum By {
    /// Each rank: instances, time waited, time others waited for it, times last.
    Rank,
}

/// Prints the collectives matched across ranks, or totals per rank.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let options = CollectiveOptions {
        p2p: args.p2p,
        by_rank: args.by == Some(By::Rank),
        top: args.top,
    };
    args.r
        .print_query(|loaded, selection| query::collectives(loaded, selection, options))
}
