//! `nsys-lens collectives REPORT... [WINDOW] [--by rank] [--top N]`

use super::Outcome;
use super::analysis::{self, RankArgs};
use nsys_lens::analysis::collectives::{Instance, add_transfers, by_rank, match_instances};
use nsys_lens::classify::{Activity, layout};
use nsys_lens::report;

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

/// Prints every collective instance matched across ranks, or each rank's totals.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let timeline = args.r.common.load()?;
    let activity = Activity::new(&timeline);
    let ranks = analysis::ranks(&activity)?;
    let windows = args.r.window.windows(&activity, &ranks)?;
    let processes: Vec<_> = ranks.iter().map(|r| r.process).collect();
    let mut collectives = match_instances(&timeline, &processes);
    if args.p2p {
        let rules = args.r.streams.rules()?;
        let transfers = layout::rank_transfers(&activity, &ranks, &rules);
        add_transfers(&mut collectives, &transfers);
    }
    let wanted = args.r.streams.ranks.as_ref();
    let inside = |i: &&Instance| {
        let in_window = i.arrivals.iter().all(|a| {
            let (start, end) = windows[a.rank].bounds;
            start <= a.start && a.start < end
        });
        let has_rank = |r: u32| i.arrivals.iter().any(|a| ranks[a.rank].rank == r);
        in_window && wanted.is_none_or(|list| list.0.iter().any(|&r| has_rank(r)))
    };
    let mut instances: Vec<&Instance> = collectives.instances.iter().filter(inside).collect();
    if let Some(n) = args.top {
        instances.sort_by_key(|i| std::cmp::Reverse(i.skew()));
        instances.truncate(n);
    }
    let output = match args.by {
        Some(By::Rank) => {
            let waits = by_rank(ranks.len(), &instances);
            report::by_rank_output(&timeline, &windows, &waits)
        }
        None => report::instances_output(&timeline, &windows, &collectives, &instances),
    };
    args.r.common.print(&output)
}
