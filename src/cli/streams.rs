//! `nsys-lens streams REPORT... [--rank N] [WINDOW]`

use super::Outcome;
use super::analysis::{self, Compat, RankArgs};
use nsys_lens::analysis::pithtrain;
use nsys_lens::classify::Activity;
use nsys_lens::report;

/// Options of `streams`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens streams node0.sqlite node1.sqlite           role of every stream in each rank's window
  nsys-lens streams --rank 3 --whole node*.sqlite       one rank, whole capture
  nsys-lens streams --roles roles.toml run.sqlite       with your own NVTX -> role rules
  nsys-lens streams --compat pithtrain node0.sqlite     PithTrain's classify_streams table, exactly")]
pub struct Args {
    #[command(flatten)]
    r: RankArgs,
}

/// Prints the role of every CUDA stream of each rank.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let timeline = args.r.common.load()?;
    let activity = Activity::new(&timeline);
    match args.r.common.compat {
        Some(Compat::Pithtrain) => {
            anyhow::ensure!(
                args.r.streams.roles.is_none(),
                "--compat pithtrain uses PithTrain's own rules: drop --roles"
            );
            let mut rows = Vec::new();
            for record in analysis::compat_setup(&activity)? {
                if args.r.streams.rank.is_some_and(|r| r != record.label.rank) {
                    continue;
                }
                let window = args.r.window.pithtrain(&activity, &record)?;
                let streams = pithtrain::classify_streams(&activity, &record, window);
                rows.extend(streams.into_iter().map(|s| (record.pid, s)));
            }
            args.r
                .common
                .print_compat(report::pithtrain::streams_table(&rows))
        }
        None => {
            let (classified, rules) = args.r.classified(&activity)?;
            args.r
                .common
                .print(&report::streams_output(&timeline, &classified, &rules))
        }
    }
}
