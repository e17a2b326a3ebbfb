//! `nsys-lens info REPORT...`

use super::Outcome;
use super::inputs::{FormatArg, Inputs};
use nsys_lens::report::{self, AlignmentSummary, Format, InfoOutput};
use std::io::Write;

/// Options of `info`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens info node0.sqlite node1.sqlite        two nodes on one clock
  nsys-lens info --format json run/*.sqlite       the same for scripts
  nsys-lens info run.nsys-rep --export-dir /tmp   export with nsys first (cached)
  nsys-lens info --align collectives node*.sqlite  correct each host's clock from the collectives")]
pub struct Args {
    #[command(flatten)]
    inputs: Inputs,

    /// Output format (table or json; info has no CSV form).
    #[arg(long, value_enum, default_value_t)]
    format: FormatArg,
}

/// Loads the reports and prints what they hold.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let format = Format::from(args.format);
    if format == Format::Csv {
        anyhow::bail!("info has no CSV form (its output is nested): use --format json");
    }
    let (timeline, alignment) = args.inputs.load_aligned()?;
    let mut output = InfoOutput::new(&timeline);
    output.alignment = alignment.map(|a| AlignmentSummary::new(&timeline, &a));
    let mut stdout = std::io::stdout().lock();
    match format {
        Format::Json => report::write_json(&output, &mut stdout)?,
        _ => stdout.write_all(output.to_table(args.inputs.quiet).as_bytes())?,
    }
    stdout.flush()?;
    Ok(Outcome::Done)
}
