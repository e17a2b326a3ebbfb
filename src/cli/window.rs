//! `nsys-lens window REPORT... [--anchor REGEX]`

use super::Outcome;
use super::analysis::{self, Common, Compat, CompatArg, WindowArgs};
use nsys_lens::analysis::pithtrain;
use nsys_lens::classify::Activity;
use nsys_lens::report;

/// Options of `window`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens window node0.sqlite node1.sqlite                  each rank's median overlapped chunk
  nsys-lens window --anchor 'ProfilerStep#\\d+' trace.sqlite   the median profiler step instead
  nsys-lens window --compat pithtrain node0.sqlite            PithTrain's find_window table, exactly")]
pub struct Args {
    #[command(flatten)]
    c: CompatArg,

    #[command(flatten)]
    common: Common,

    #[command(flatten)]
    window: WindowArgs,
}

/// Prints each rank's steady-state window: CPU extent and GPU projection.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let timeline = args.common.load()?;
    let activity = Activity::new(&timeline);
    match args.c.compat {
        Some(Compat::Pithtrain) => {
            anyhow::ensure!(
                args.window.is_default(),
                "--compat pithtrain: find_window takes no window options"
            );
            let records = analysis::compat_setup(&activity)?;
            let windows = records
                .iter()
                .map(|r| {
                    Ok((
                        r.pid,
                        analysis::compat(pithtrain::find_window(&activity, r))?,
                    ))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            args.common
                .print_compat(report::pithtrain::window_table(&windows))
        }
        None => {
            let ranks = analysis::ranks(&activity)?;
            let windows = args.window.windows(&activity, &ranks)?;
            args.common
                .print(&report::window_output(&timeline, &windows))
        }
    }
}
