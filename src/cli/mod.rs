//! Command-line definitions: one file per subcommand, each converting its options into library
//! values, calling the library and printing through [`nsys_lens::report`].

mod info;
mod inputs;
mod synth;

use clap::{Parser, Subcommand};

const EXAMPLES: &str = "\
Examples:
  nsys-lens info node0.sqlite node1.sqlite     what two nodes' exports hold, on one clock
  nsys-lens info run.nsys-rep                  exports the report with nsys first (cached)
  nsys-lens info --format json node*.sqlite    the same for scripts";

/// Merge Nsight Systems exports of distributed GPU training into one timeline and answer what
/// it shows.
#[derive(Debug, Parser)]
#[command(name = "nsys-lens", version, about, after_help = EXAMPLES)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// What each report holds: versions, host, clock, processes, GPUs, streams, row counts.
    Info(info::Args),
    /// Write a synthetic multi-node export (one SQLite file per node) of a training workload.
    Synth(synth::Args),
}

/// How a command ended when it did not fail. (Analysis commands will add "found nothing to
/// report", exit code 1.)
pub enum Outcome {
    /// It printed what was asked.
    Done,
}

/// Runs the chosen subcommand.
pub fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Info(args) => info::run(args),
        Command::Synth(args) => synth::run(args),
    }
}
