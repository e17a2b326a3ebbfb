//! Command-line definitions: one file per subcommand, each converting its options into library
//! values, calling the library and printing through [`nsys_lens::report`].

mod analysis;
mod bubbles;
mod collectives;
mod compare;
mod completions;
mod convert;
mod critical_path;
mod drawn;
mod idle;
mod info;
mod inputs;
mod kernels;
mod metrics;
mod mfu;
mod nsys_reports;
mod overlap;
mod part;
mod progress;
mod ranks;
mod report;
mod sizing;
mod streams;
mod synth;
mod what_if;
mod window;

use clap::{CommandFactory, Parser, Subcommand};
pub use nsys_lens::query::NothingFound;
use std::ffi::OsString;

const EXAMPLES: &str = "\
Examples:
  nsys-lens info node0.sqlite node1.sqlite     what two nodes' exports hold, on one clock
  nsys-lens info run.nsys-rep                  exports the report with nsys first (cached)
  nsys-lens info --format json node*.sqlite    the same for scripts
  nsys-lens ranks node0.sqlite node1.sqlite    which process is which rank
  nsys-lens overlap node0.sqlite node1.sqlite  how much communication compute hides
  nsys-lens overlap --whole traces/            the same from torch.profiler or JAX traces
  nsys-lens kernels --whole run/               kernel families per GPU per step
  nsys-lens bubbles --whole --pp 2 run/        pipeline bubble per rank and step
  nsys-lens convert run/ -o run                run.perfetto-trace and run.prv/.pcf/.row";

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
    /// Time per kernel family per GPU per step, and step minus kernel time.
    Kernels(kernels::Args),
    /// GPU idle time per stream by cause (host wait, kernel wait, other), and the longest gaps.
    Idle(idle::Args),
    /// Pipeline bubbles per rank and step: pipeline wait and idle, beside the ideal 1F1B bubble.
    Bubbles(bubbles::Args),
    /// Every collective matched across its ranks: arrival skew, the last rank, the waits.
    Collectives(collectives::Args),
    /// Each step's critical path across ranks: compute, communication, launch-bound and idle
    /// time, and the ranks it crosses.
    CriticalPath(critical_path::Args),
    /// Each step's time predicted by replaying the run with changed durations (a faster rank,
    /// family or collective, no straggler, no launch gaps), beside the measured one.
    WhatIf(what_if::Args),
    /// FLOPs, achieved TFLOP/s and MFU per rank, step and kernel family, from the shapes
    /// torch.profiler records, beside each GPU's peak.
    Mfu(mfu::Args),
    /// GPU metrics per rank: mean SM and tensor activity, DRAM, NVLink and PCIe throughput.
    Metrics(metrics::Args),
    /// Two runs side by side: kernel families, step time, exposed communication, bubbles.
    Compare(compare::Args),
    /// One self-contained HTML page: ranks, where each step goes, overlap, families, bubbles.
    Report(report::Args),
    /// Write the merged timeline as a Perfetto trace (ui.perfetto.dev) and a Paraver trace.
    Convert(convert::Args),
    /// Read one node's reports into a part file, for converting a cluster's capture where it
    /// lies (then `convert --encode`, `convert --merge`).
    Part(part::Args),
    /// Write nsys-lens' analyses as report scripts for `nsys stats --report-dir DIR` and
    /// rules for `nsys analyze`.
    NsysReports(nsys_reports::Args),
    /// Write a synthetic multi-node export (one SQLite file per node) of a training workload.
    Synth(synth::Args),
    /// Print the shell completion script for bash, zsh, fish, elvish or PowerShell.
    Completions(completions::CompletionsArgs),
    /// Print the man page (roff).
    Man(completions::ManArgs),
}

/// The command line, with the options written after a `--` moved before it: `compare A -- B
/// --whole` and `report A -- B -o x.html` mean what they say. After `--` only the second run's
/// reports are positional; a token there that names one of the subcommand's options (with its
/// value) is that option. A report whose name starts with `-` can be given as `./-name`.
pub fn command_line() -> Vec<OsString> {
    reorder(help_of_help(std::env::args_os().collect()), &Cli::command())
}

/// `nsys-lens help --help` (or `-h`) asks for the help `help` alone gives: the top-level one
/// (clap's own `help` command takes no options).
fn help_of_help(args: Vec<OsString>) -> Vec<OsString> {
    let asks = |a: &OsString| a == "--help" || a == "-h";
    match args.get(1).is_some_and(|a| a == "help") && args[2..].iter().any(asks) {
        true => vec![args[0].clone(), "--help".into()],
        false => args,
    }
}

fn reorder(args: Vec<OsString>, cli: &clap::Command) -> Vec<OsString> {
    let Some(split) = args.iter().position(|a| a == "--") else {
        return args;
    };
    let Some(command) = args.get(1).and_then(|name| {
        let name = name.to_str()?;
        cli.get_subcommands().find(|c| c.get_name() == name)
    }) else {
        return args;
    };
    let (mut before, mut after) = (args[..split].to_vec(), Vec::new());
    let mut rest = args[split + 1..].iter();
    while let Some(token) = rest.next() {
        let text = token.to_string_lossy();
        let (flag, inline_value) = match text.split_once('=') {
            Some((flag, _)) => (flag.to_string(), true),
            None => (text.to_string(), false),
        };
        let option = command.get_arguments().find(|arg| {
            let long = arg.get_long().is_some_and(|l| flag == format!("--{l}"));
            let short = arg.get_short().is_some_and(|s| flag == format!("-{s}"));
            long || short
                || arg
                    .get_all_aliases()
                    .is_some_and(|a| a.iter().any(|l| flag == format!("--{l}")))
        });
        match option {
            Some(arg) => {
                before.push(token.clone());
                if arg.get_action().takes_values() && !inline_value {
                    before.extend(rest.next().cloned());
                }
            }
            None => after.push(token.clone()),
        }
    }
    before.push("--".into());
    before.extend(after);
    before
}

/// How a command ended when it did not fail.
pub enum Outcome {
    /// It printed what was asked.
    Done,
    /// It printed what was asked, and a `compare --fail-if` check failed (exit 1).
    ChecksFailed,
    /// It printed a table with no rows, its notes saying why (exit 1, as [`NothingFound`]).
    Empty,
}

/// Runs the chosen subcommand.
pub fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Info(args) => info::run(args),
        Command::Ranks(args) => ranks::run(args),
        Command::Window(args) => window::run(args),
        Command::Streams(args) => streams::run(args),
        Command::Overlap(args) => overlap::run(args),
        Command::Kernels(args) => kernels::run(args),
        Command::Idle(args) => idle::run(args),
        Command::Bubbles(args) => bubbles::run(args),
        Command::Collectives(args) => collectives::run(args),
        Command::CriticalPath(args) => critical_path::run(args),
        Command::WhatIf(args) => what_if::run(args),
        Command::Mfu(args) => mfu::run(args),
        Command::Metrics(args) => metrics::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Report(args) => report::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Part(args) => part::run(args),
        Command::Synth(args) => synth::run(args),
        Command::NsysReports(args) => nsys_reports::run(args),
        Command::Completions(args) => completions::completions(args),
        Command::Man(args) => completions::man(args),
    }
}

/// Prints one path a line on stdout; a failure to print (a full disk) is an error, not a panic
/// as `println!` would make it.
fn print_paths(paths: &[std::path::PathBuf]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for path in paths {
        writeln!(out, "{}", path.display())?;
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reordered(line: &str) -> String {
        let args = line.split(' ').map(OsString::from).collect();
        let out = reorder(args, &Cli::command());
        out.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn options_after_the_separator_move_before_it_with_their_values() {
        assert_eq!(
            reordered("nsys-lens report fp32/ -- bf16/ -o compare.html"),
            "nsys-lens report fp32/ -o compare.html -- bf16/"
        );
        assert_eq!(
            reordered("nsys-lens compare a -- b --whole --format=json c"),
            "nsys-lens compare a --whole --format=json -- b c"
        );
        assert_eq!(reordered("nsys-lens info a b"), "nsys-lens info a b");
        assert_eq!(
            reordered("nsys-lens compare a -- ./-odd"),
            "nsys-lens compare a -- ./-odd"
        );
    }
}
