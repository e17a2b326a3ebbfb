//! `nsys-lens overlap REPORT... [--rank N] [WINDOW]`

use super::Outcome;
use super::analysis::{self, Common, Compat, StreamArgs, WindowArgs};
use nsys_lens::analysis::{overlap, pithtrain};
use nsys_lens::classify::Activity;
use nsys_lens::report;

/// Options of `overlap`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens overlap node0.sqlite node1.sqlite          hidden/exposed communication per rank and stage
  nsys-lens overlap --format csv node*.sqlite          the same for a spreadsheet
  nsys-lens overlap --start 150000000 --end 160000000 node0.sqlite   one window for every rank
  nsys-lens overlap --compat pithtrain node0.sqlite    PithTrain's compute_overlap table, exactly")]
pub struct Args {
    #[command(flatten)]
    common: Common,

    #[command(flatten)]
    streams: StreamArgs,

    #[command(flatten)]
    window: WindowArgs,
}

/// Prints how much communication compute hides, per rank, stage and role.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let timeline = args.common.load()?;
    let activity = Activity::new(&timeline);
    match args.common.compat {
        Some(Compat::Pithtrain) => {
            anyhow::ensure!(
                args.streams.roles.is_none(),
                "--compat pithtrain uses PithTrain's own rules: drop --roles"
            );
            let mut rows = Vec::new();
            for record in analysis::compat_setup(&activity)? {
                if args.streams.rank.is_some_and(|r| r != record.label.rank) {
                    continue;
                }
                let window = args.window.pithtrain(&activity, &record)?;
                let stages = pithtrain::compute_overlap(&activity, &record, window);
                rows.extend(stages.into_iter().map(|s| (record.pid, s)));
            }
            args.common
                .print_compat(report::pithtrain::overlap_table(&rows))
        }
        None => {
            let rules = args.streams.rules()?;
            let ranks = args.streams.select(analysis::ranks(&activity)?)?;
            let windows = args.window.windows(&activity, &ranks)?;
            let measured = analysis::classify_streams(&activity, windows, &rules)
                .into_iter()
                .map(|(w, s)| {
                    let exposure = overlap::rank_exposure(&s, &rules);
                    (w, s, exposure)
                })
                .collect::<Vec<_>>();
            args.common
                .print(&report::overlap_output(&timeline, &measured))
        }
    }
}
