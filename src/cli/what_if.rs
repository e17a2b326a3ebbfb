//! `nsys-lens what-if REPORT... [WINDOW] --change SPEC...`

use super::Outcome;
use super::analysis::RankArgs;
use nsys_lens::analysis::what_if::Change;
use nsys_lens::query;

/// Options of `what-if`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens what-if --whole --change straggler=median run/     every rank at the median speed
  nsys-lens what-if --whole --change family=gemm*0.5 run/      GEMMs twice as fast
  nsys-lens what-if --whole --change 'role=nccl:AllReduce*0' run/   free all-reduces
  nsys-lens what-if --whole --change rank=1:compute*0.8 --change launch=0 run/")]
pub struct Args {
    #[command(flatten)]
    r: RankArgs,

    /// A change (repeatable; factors multiply): `rank=R:compute*F`, `family=NAME*F` (NAME a
    /// family or a group: `gemm`), `role=NAME*F` (a communication role's transfers),
    /// `straggler=median` (every rank's compute at the median rank's speed), `launch=F` (CPU
    /// time between a rank's calls).
    #[arg(long, value_name = "SPEC", required = true, value_parser = Change::parse)]
    change: Vec<Change>,
}

/// Prints each step's measured time beside the time the replay with the changes predicts.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    (args.r)
        .print_query(|loaded, selection| query::critical::what_if(loaded, selection, &args.change))
}
