//! `nsys-lens overlap REPORT... [--ranks LIST] [WINDOW]`

use super::Outcome;
use super::analysis::{Compat, CompatArg, RankArgs};
use nsys_lens::analysis::pithtrain;
use nsys_lens::classify::Activity;
use nsys_lens::query;
use nsys_lens::report;

/// Options of `overlap`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens overlap node0.sqlite node1.sqlite          hidden/exposed communication per rank and stage
  nsys-lens overlap --format csv node*.sqlite          the same for a spreadsheet
  nsys-lens overlap --start 150000000 --end 160000000 node0.sqlite   one window for every rank
  nsys-lens overlap --compat pithtrain node0.sqlite    PithTrain's compute_overlap table, exactly")]
pub struct Args {
    #[command(flatten)]
    c: CompatArg,

    #[command(flatten)]
    r: RankArgs,
}

/// Prints how much communication compute hides, per rank, stage and role.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let timeline = args.r.common.load()?;
    match args.c.compat {
        Some(Compat::Pithtrain) => {
            let activity = Activity::new(&timeline);
            let rows = args.r.pithtrain_rows(&activity, |record, window| {
                pithtrain::compute_overlap(&activity, record, window)
            })?;
            args.r
                .common
                .print_compat(report::pithtrain::overlap_table(&rows))
        }
        None => {
            let output = query::overlap(&timeline, &args.r.selection()?)?;
            args.r.common.print(&output)
        }
    }
}
