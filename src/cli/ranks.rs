//! `nsys-lens ranks REPORT...`

use super::Outcome;
use super::analysis::{self, Common, Compat, CompatArg};
use nsys_lens::classify::Activity;
use nsys_lens::{query, report};

/// Options of `ranks`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens ranks node0.sqlite node1.sqlite          rank, host, pid, GPU and mesh coordinates
  nsys-lens ranks --format csv node*.sqlite          the same for a spreadsheet
  nsys-lens ranks --compat pithtrain node0.sqlite    PithTrain's show_setup table, exactly")]
pub struct Args {
    #[command(flatten)]
    c: CompatArg,

    #[command(flatten)]
    common: Common,
}

/// Prints which process is which rank.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let timeline = args.common.load()?;
    match args.c.compat {
        Some(Compat::Pithtrain) => {
            let records = analysis::compat_setup(&Activity::new(&timeline))?;
            args.common
                .print_compat(report::pithtrain::setup_table(&records))
        }
        None => args.common.print(&query::rank_table(&timeline)?),
    }
}
