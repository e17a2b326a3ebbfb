//! `nsys-lens streams REPORT... [--ranks LIST] [WINDOW]`

use super::Outcome;
use super::analysis::{Compat, CompatArg, RankArgs};
use nsys_lens::analysis::pithtrain;
use nsys_lens::{query, report};

/// Options of `streams`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens streams node0.sqlite node1.sqlite           role of every stream in each rank's window
  nsys-lens streams --ranks 3 --whole node*.sqlite      one rank, whole capture
  nsys-lens streams --roles roles.toml run.sqlite       with your own NVTX -> role rules
  nsys-lens streams --compat pithtrain node0.sqlite     PithTrain's classify_streams table, exactly")]
pub struct Args {
    #[command(flatten)]
    c: CompatArg,

    #[command(flatten)]
    r: RankArgs,
}

/// Prints the role of every stream.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    match args.c.compat {
        Some(Compat::Pithtrain) => args.r.print_pithtrain(
            pithtrain::classify_streams,
            report::pithtrain::streams_table,
        ),
        None => args
            .r
            .print_query(|loaded, selection| query::streams(loaded, selection)),
    }
}
