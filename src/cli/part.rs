//! `nsys-lens part REPORT... [-o FILE]`: one node's reports read into a part file, the first of
//! the three steps that convert a capture of many nodes on the cluster that holds it.

use super::Outcome;
use super::inputs::Inputs;
use nsys_lens::input::capture::Capture;
use nsys_lens::input::part::{self, PART_EXTENSION};
use nsys_lens::spill::Budget;
use std::path::PathBuf;

/// Options of `part`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "On a cluster (docs/scale.md): one task per node, then one per node \
again, then one task:
  nsys-lens part node$i/*.sqlite -o parts/node$i.lens-part
  nsys-lens convert parts/ --encode $i -o out/run
  nsys-lens convert parts/ --merge -o out/run
Every command reads part files where it reads exports, e.g. nsys-lens overlap parts/

Examples:
  nsys-lens part node0.sqlite -o node0.lens-part   one node's report
  nsys-lens part run/ -o parts/run.lens-part       every report of a directory"
)]
pub struct Args {
    #[command(flatten)]
    inputs: Inputs,

    /// The part file (default: the first report's stem with .lens-part, in the current
    /// directory).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,

    /// Memory for the events being sorted (`512M`, `2G`, or bytes): beyond it they go to
    /// temporary files in $TMPDIR.
    #[arg(long, value_name = "SIZE", default_value = "128M", value_parser = super::inputs::parse_size)]
    memory_budget: usize,
}

/// Reads the reports (events sorted under the budget) and writes them as one part file.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let path = args.output.clone().unwrap_or_else(|| {
        let stem = args.inputs.reports[0]
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "part".into());
        PathBuf::from(format!("{stem}.{PART_EXTENSION}"))
    });
    args.inputs.check_outputs(std::slice::from_ref(&path))?;
    let captures: Vec<Capture> = args
        .inputs
        .read_captures(Budget::new(args.memory_budget))?
        .into_iter()
        .map(|(_, capture)| capture)
        .collect();
    let events: u64 = captures.iter().map(|c| c.events.size().0).sum();
    part::write(&captures, &path)?;
    if !args.inputs.quiet {
        let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        eprintln!(
            "wrote {} ({bytes} bytes): {} report(s), {events} events",
            path.display(),
            captures.len()
        );
    }
    Ok(Outcome::Done)
}

/// `convert`'s cluster steps, 2 and 3 of 3 (after `part`).
#[derive(Debug, clap::Args)]
pub struct ClusterSteps {
    /// On a cluster, step 2 of 3 (after `nsys-lens part`, one per node): write only the
    /// processes of input N (from 0, in the order given; a directory's files in natural name
    /// order: `node2` before `node10`) into OUT.encoded-N. Every step takes the same inputs
    /// and options.
    #[arg(long, value_name = "N", conflicts_with = "merge")]
    pub encode: Option<usize>,

    /// On a cluster, step 3 of 3: join OUT.encoded-0 ... (one per input, from --encode) into
    /// the traces, copying their bytes.
    #[arg(long)]
    pub merge: bool,
}
