//! `nsys-lens overlap REPORT... [--ranks LIST] [WINDOW]`

use super::Outcome;
use super::analysis::{Compat, CompatArg, RankArgs};
use nsys_lens::analysis::pithtrain;
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
    match args.c.compat {
        Some(Compat::Pithtrain) => args
            .r
            .print_pithtrain(pithtrain::compute_overlap, report::pithtrain::overlap_table),
        None => args
            .r
            .print_query(|loaded, selection| query::overlap(loaded, selection)),
    }
}
