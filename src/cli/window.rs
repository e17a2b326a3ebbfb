//! `nsys-lens window REPORT... [--anchor REGEX]`

use super::Outcome;
use super::analysis::{self, Common, Compat, CompatArg, WindowArgs};
use nsys_lens::analysis::pithtrain;
use nsys_lens::classify::Activity;
use nsys_lens::{query, report};

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

/// Prints each rank's window.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let timeline = args.common.load()?;
    match args.c.compat {
        Some(Compat::Pithtrain) => {
            anyhow::ensure!(
                args.window.is_default(),
                "--compat pithtrain: find_window takes no window options"
            );
            let activity = Activity::new(&timeline);
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
            let output = query::windows(&timeline, &args.window.options())?;
            args.common.print(&output)
        }
    }
}
