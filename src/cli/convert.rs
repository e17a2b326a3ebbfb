//! `nsys-lens convert REPORT... [-o OUT] [--to perfetto] [WINDOW] [--ranks LIST]`

use super::Outcome;
use super::drawn::DrawnArgs;
use super::inputs::Inputs;
use nsys_lens::classify::{Activity, RoleRules};
use nsys_lens::export::conversion::{Request, Step, Target};
use nsys_lens::query::RankList;
use nsys_lens::spill::Budget;
use std::path::PathBuf;

/// Options of `convert`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens convert node0.sqlite node1.sqlite -o run     run.perfetto-trace (ui.perfetto.dev) and run.prv/.pcf/.row (Paraver)
  nsys-lens convert node*.sqlite --to paraver -o run     only the Paraver files
  nsys-lens convert node*.sqlite --compress              writes node0.perfetto-trace.gz and node0.prv.gz
  nsys-lens convert node*.sqlite -o run.gz               the same, named run.*.gz
  nsys-lens convert node*.sqlite --ranks 0,2-3 --steady  three ranks, each over its steady-state window
  nsys-lens convert run/ --collective-flows -o run       arrows from each collective's straggler to the others
  nsys-lens convert run/ --critical-path -o run          an `on the critical path` counter per rank
  nsys-lens convert run/ --to perfetto --max-size 200M   a trace a browser opens: steady window, ranks that fit
  nsys-lens convert run/ --split-by node -o run          run.<host>.* per node and run.index.html")]
pub struct Args {
    #[command(flatten)]
    inputs: Inputs,

    /// Output path without extension (default: the first report's stem, in the current directory).
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,

    /// Output formats.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "perfetto,paraver"
    )]
    to: Vec<Target>,

    /// Gzip the Perfetto trace and the Paraver .prv, streamed (both viewers read them
    /// directly); an `-o` name ending in `.gz` asks for it too.
    #[arg(long, visible_alias = "gzip")]
    compress: bool,

    #[command(flatten)]
    drawn: DrawnArgs,

    #[command(flatten)]
    size: super::sizing::SizeArgs,

    /// Only these global ranks: one (`3`), a list or ranges (`0,4-7`); other processes are left
    /// out too. `--rank` is the same.
    #[arg(long, visible_alias = "rank", value_name = "LIST", value_parser = RankList::parse)]
    ranks: Option<RankList>,

    /// TOML file of extra role rules for naming stream tracks (see `streams --help`).
    #[arg(long, value_name = "FILE")]
    roles: Option<PathBuf>,

    /// Export each rank's steady-state window (its median anchor range) instead of the whole
    /// capture.
    #[arg(long)]
    steady: bool,

    /// Regex on NVTX range text for --steady (default: PithTrain's overlapped chunk, then
    /// `ProfilerStep#N`).
    #[arg(long, value_name = "REGEX", requires = "steady")]
    anchor: Option<String>,

    /// Export only from this time, ns on the merged clock (with --end).
    #[arg(
        long,
        value_name = "NS",
        requires = "end",
        conflicts_with = "steady",
        allow_negative_numbers = true
    )]
    start: Option<i64>,

    /// Export only up to this time (with --start).
    #[arg(
        long,
        value_name = "NS",
        requires = "start",
        allow_negative_numbers = true
    )]
    end: Option<i64>,

    #[command(flatten)]
    cluster: super::part::ClusterSteps,

    /// Memory for the events being sorted (`512M`, `2G`, or bytes): beyond it they go to
    /// temporary files in $TMPDIR, so memory stays bounded however large the capture.
    #[arg(long, value_name = "SIZE", default_value = "128M", value_parser = super::inputs::parse_size)]
    memory_budget: usize,
}

/// Writes the requested exports: reports read with their events sorted under the memory budget,
/// the plan decided from what classification reads, then the library's conversion
/// ([`Request::write`]: both formats at once, or on a cluster one input's part, or the join).
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let request = args.request();
    args.inputs.check_outputs(&request.outputs())?;
    let rules = RoleRules::load(args.roles.as_deref())?;
    let budget = Budget::new(args.memory_budget);
    let (captures, inputs) = args.inputs.captures(budget)?;
    let (light, parts) = (&captures.light, &captures.parts);
    args.inputs.warn(light);
    let activity = Activity::new(light);
    let (start_end, anchor) = (args.start.zip(args.end), args.anchor.as_deref());
    let (window, ranks) = ((start_end, anchor, args.steady), args.ranks.as_ref());
    let drawn = &args.drawn;
    let light_plan = ((&activity, &rules), &captures);
    let plan = drawn.plan(light_plan, ranks, window)?;
    let steady = (args.size).fallback(drawn, light_plan, ranks, window)?;
    request.expect_progress(light, &plan, parts, &inputs);
    let progress = super::progress::Progress::writing("writing".to_string(), args.inputs.quiet);
    let lines = request.write((&plan, steady.as_ref()), parts, &inputs)?;
    drop(progress);
    if !args.inputs.quiet {
        lines.iter().for_each(|line| eprintln!("{line}"));
    }
    Ok(Outcome::Done)
}

impl Args {
    /// The conversion these flags ask for.
    fn request(&self) -> Request {
        let first = &self.inputs.reports[0];
        self.size.apply(Request {
            memory_budget: self.memory_budget,
            threads: self.inputs.threads(),
            step: Step::of(self.cluster.encode, self.cluster.merge),
            fingerprint: self.fingerprint(),
            ..Request::new(&self.to, self.output.as_deref(), first, self.compress)
        })
    }

    /// The options that decide what a conversion writes, which every cluster step must share.
    fn fingerprint(&self) -> String {
        let ranks = self.ranks.as_ref().map(|r| &r.0);
        let window = (self.start, self.end, self.steady, &self.anchor);
        let drawn = (&self.to, ranks, &self.roles, &self.drawn);
        format!(
            "window {window:?} drawn {drawn:?} align {:?}",
            self.inputs.align
        )
    }
}
