//! `nsys-lens kernels REPORT... [--steps N] [--families FILE] [--unclassified] [WINDOW]`

use super::Outcome;
use super::analysis::RankArgs;
use nsys_lens::classify::families::Families;
use nsys_lens::query;
use std::path::PathBuf;

/// Options of `kernels`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens kernels run/*.sqlite                   kernel families per GPU per step, steady-state window
  nsys-lens kernels --whole --steps 3 run.sqlite   the whole capture, which holds 3 steps
  nsys-lens kernels --families mine.toml run.sqlite    your own families first
  nsys-lens kernels --whole --unclassified app.sqlite  the kernels no family names, longest first")]
pub struct Args {
    #[command(flatten)]
    r: RankArgs,

    /// How many steps the window holds (default: counted from the step NVTX ranges in it).
    #[arg(long, value_name = "N")]
    steps: Option<usize>,

    /// TOML file of extra kernel families (`[[family]]` with `name` and `pattern`).
    #[arg(long, value_name = "FILE")]
    families: Option<PathBuf>,

    /// List the kernels no family names (`other`), by name, with their share of each rank's
    /// kernel time, instead of the families.
    #[arg(long, conflicts_with = "steps")]
    unclassified: bool,
}

/// Prints time per kernel family per GPU per step, and step minus kernel time; or the kernels
/// no family names.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let families = match &args.families {
        Some(path) => Families::from_file(path)?,
        None => Families::default(),
    };
    args.r
        .print_query(|loaded, selection| match args.unclassified {
            true => query::unclassified(loaded, selection, &families),
            false => query::kernels(loaded, selection, &families, args.steps),
        })
}
