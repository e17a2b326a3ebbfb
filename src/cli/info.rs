//! `nsys-lens info REPORT...`

use super::Outcome;
use super::inputs::Inputs;
use nsys_lens::report::{self, AlignmentSummary, Format, InfoOutput};
use nsys_lens::spill::Budget;
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

    /// Output format (no CSV: the output is nested).
    #[arg(long, value_enum, default_value_t)]
    format: InfoFormat,
}

/// `info`'s formats: its output is nested, so it has no CSV form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
enum InfoFormat {
    /// Aligned text for people.
    #[default]
    Table,
    /// JSON for scripts.
    Json,
}

/// Loads the reports and prints what they hold.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let format = match args.format {
        InfoFormat::Table => Format::Table,
        InfoFormat::Json => Format::Json,
    };
    // Read for streaming: memory stays bounded however many events the reports hold.
    let (mut captures, alignment) = args.inputs.captures_aligned(Budget::new(Budget::DEFAULT))?;
    captures.warn_repeated_gpu_ops()?;
    let timeline = &captures.light;
    let mut output = InfoOutput::new(timeline, &captures.copies_per_stream()?);
    output.alignment = alignment.map(|a| AlignmentSummary::new(timeline, &a));
    let mut stdout = std::io::stdout().lock();
    match format {
        Format::Json => report::write_json(&output, &mut stdout)?,
        _ => stdout.write_all(output.to_table(args.inputs.quiet).as_bytes())?,
    }
    stdout.flush()?;
    Ok(Outcome::Done)
}
