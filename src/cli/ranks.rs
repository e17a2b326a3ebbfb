//! `nsys-lens ranks REPORT...`

use super::Outcome;
use super::analysis::{self, Common, Compat, CompatArg};
use nsys_lens::analysis::collectives::match_instances;
use nsys_lens::classify::{Activity, RoleRules, layout};
use nsys_lens::report;

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
    let activity = Activity::new(&timeline);
    match args.c.compat {
        Some(Compat::Pithtrain) => {
            let records = analysis::compat_setup(&activity)?;
            args.common
                .print_compat(report::pithtrain::setup_table(&records))
        }
        None => {
            let ranks = analysis::ranks(&activity)?;
            let rules = RoleRules::default();
            let pipeline = layout::pipeline_coords(&activity, &ranks, &rules);
            let processes: Vec<_> = ranks.iter().map(|r| r.process).collect();
            let collectives = match_instances(&timeline, &processes);
            let output = report::ranks_output(&timeline, &ranks, &pipeline, &collectives);
            args.common.print(&output)
        }
    }
}
