//! Command-line definitions: one file per subcommand, each converting its options into library
//! values, calling the library and printing through [`nsys_lens::report`].

mod analysis;
mod convert;
mod info;
mod inputs;
mod overlap;
mod ranks;
mod streams;
mod synth;
mod window;

use clap::{Parser, Subcommand};

const EXAMPLES: &str = "\
Examples:
  nsys-lens info node0.sqlite node1.sqlite     what two nodes' exports hold, on one clock
  nsys-lens info run.nsys-rep                  exports the report with nsys first (cached)
  nsys-lens info --format json node*.sqlite    the same for scripts
  nsys-lens ranks node0.sqlite node1.sqlite    which process is which rank
  nsys-lens overlap node0.sqlite node1.sqlite  how much communication compute hides";

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
    /// Which process is which rank: host, pid, GPU, mesh coordinates.
    Ranks(ranks::Args),
    /// The steady-state window of each rank: median anchor range, CPU extent and GPU projection.
    Window(window::Args),
    /// The role of every CUDA stream: compute, copy, or what its communication is for.
    Streams(streams::Args),
    /// Hidden and exposed communication per rank, stage and role.
    Overlap(overlap::Args),
    /// Write the merged timeline as a Perfetto trace (ui.perfetto.dev) and a Paraver trace.
    Convert(convert::Args),
    /// Write a synthetic multi-node export (one SQLite file per node) of a training workload.
    Synth(synth::Args),
}

/// How a command ended when it did not fail.
pub enum Outcome {
    /// It printed what was asked.
    Done,
}

/// The analysis found nothing to report (exit code 1): no rank, no anchor, an empty table.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NothingFound(pub String);

/// Runs the chosen subcommand.
pub fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Info(args) => info::run(args),
        Command::Ranks(args) => ranks::run(args),
        Command::Window(args) => window::run(args),
        Command::Streams(args) => streams::run(args),
        Command::Overlap(args) => overlap::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Synth(args) => synth::run(args),
    }
}
