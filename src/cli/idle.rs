//! `nsys-lens idle REPORT... [WINDOW]`

use super::Outcome;
use super::analysis::RankArgs;
use nsys_lens::analysis::idle::{cpu_activity, os_call, rank_idle};
use nsys_lens::classify::Activity;
use nsys_lens::report::{self, GapContext, RankIdle};

/// How many of a rank's longest gaps are listed.
const LONGEST: usize = 3;

/// Options of `idle`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens idle --whole run/*.sqlite              idle time per stream by cause, whole capture
  nsys-lens idle --launch-gap 5000 run.sqlite      gaps under 5 us after a timely launch are kernel waits")]
pub struct Args {
    #[command(flatten)]
    r: RankArgs,

    /// A gap shorter than this after a launch that came in time is launch latency (ns).
    #[arg(long, value_name = "NS", default_value_t = 10_000)]
    launch_gap: i64,
}

/// Prints GPU idle time per stream, split by cause, and the longest gaps.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let timeline = args.r.common.load()?;
    let activity = Activity::new(&timeline);
    let (classified, rules) = args.r.classified(&activity)?;
    let idle: Vec<RankIdle> = classified
        .iter()
        .map(|(w, roles)| {
            let process = w.rank.process;
            let (streams, mut gaps) = rank_idle(&activity, process, w.bounds, args.launch_gap);
            gaps.sort_by_key(|g| std::cmp::Reverse(g.end - g.start));
            let longest = gaps
                .into_iter()
                .take(LONGEST)
                .map(|g| {
                    let middle = g.start + (g.end - g.start) / 2;
                    let context = g.launcher.map_or_else(GapContext::default, |t| GapContext {
                        cpu: cpu_activity(&activity, process, t, middle),
                        os_call: os_call(&activity, process, t, middle),
                    });
                    (g, context)
                })
                .collect();
            RankIdle {
                window: w.clone(),
                streams,
                roles,
                longest,
            }
        })
        .collect();
    args.r
        .common
        .print(&report::idle_output(&timeline, &idle, &rules))
}
