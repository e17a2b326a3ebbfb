//! `nsys-lens convert REPORT... [-o OUT] [--to perfetto] [WINDOW] [--ranks LIST]`

use super::Outcome;
use super::inputs::Inputs;
use nsys_lens::classify::{Activity, RoleRules, WindowSpec};
use nsys_lens::export::capture::{Captures, Joined};
use nsys_lens::export::encoded::{self, Formats};
use nsys_lens::export::{Plan, Targets, paraver, perfetto};
use nsys_lens::query::{RankList, keep_ranks, window_spec};
use nsys_lens::spill::Budget;
use std::path::{Path, PathBuf};

/// Options of `convert`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens convert node0.sqlite node1.sqlite -o run     run.perfetto-trace (ui.perfetto.dev) and run.prv/.pcf/.row (Paraver)
  nsys-lens convert node*.sqlite --to paraver -o run     only the Paraver files
  nsys-lens convert node*.sqlite --compress              writes node0.perfetto-trace.gz and node0.prv.gz
  nsys-lens convert node*.sqlite -o run.gz               the same, named run.*.gz
  nsys-lens convert node*.sqlite --ranks 0,2-3 --steady  three ranks, each over its steady-state window
  nsys-lens convert run/ --collective-flows -o run       arrows from each collective's straggler to the others")]
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

    /// Perfetto: a flow arrow from each collective's last arrival to every other member's
    /// kernel (see `collectives`).
    #[arg(long)]
    collective_flows: bool,

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

    /// On a cluster, step 2 of 3 (after `nsys-lens part`, one per node): write only the
    /// processes of input N (from 0, in the order given; a directory's files in name order)
    /// into OUT.encoded-N. Every step takes the same inputs and options.
    #[arg(long, value_name = "N", conflicts_with = "merge")]
    encode: Option<usize>,

    /// On a cluster, step 3 of 3: join OUT.encoded-0 ... (one per input, from --encode) into
    /// the traces, copying their bytes.
    #[arg(long)]
    merge: bool,

    /// Memory for the events being sorted (`512M`, `2G`, or bytes): beyond it they go to
    /// temporary files in $TMPDIR, so memory stays bounded however large the capture.
    #[arg(long, value_name = "SIZE", default_value = "128M", value_parser = super::inputs::parse_size)]
    memory_budget: usize,
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
enum Target {
    /// Perfetto protobuf trace (`.perfetto-trace`).
    Perfetto,
    /// Paraver trace (`.prv`, `.pcf`, `.row`).
    Paraver,
}

/// Writes the requested exports: reports read with their events sorted under the memory budget,
/// the plan decided from what classification reads, one pass to prepare each report's
/// processes, then both formats at once (or, on a cluster, one input's part of them, or the
/// join of the parts).
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let spec = args.window()?;
    let base = args.base();
    let outputs = match (args.encode, args.merge) {
        (Some(n), _) => vec![encoded_path(&base, n)],
        _ => args.targets(&base).outputs(),
    };
    args.inputs.check_outputs(&outputs)?;
    let rules = match &args.roles {
        Some(path) => RoleRules::from_file(path)?,
        None => RoleRules::default(),
    };
    let (captures, inputs) = args.inputs.captures(Budget::new(args.memory_budget))?;
    let Captures { light, parts } = captures;
    let activity = Activity::new(&light);
    let ranks = nsys_lens::classify::ranks::discover(&activity)?;
    let ranks = keep_ranks(ranks, args.ranks.as_ref())?;
    let mut plan = Plan::new(&activity, &rules, &ranks, &spec, args.ranks.is_none());
    if args.collective_flows {
        plan = plan.with_collective_flows();
    }
    // Every pass streams every event it writes (NVTX ranges included): one to prepare, then
    // one per format on a cluster, or what the writers share here; a join passes none.
    let mine = |input: usize| args.encode.is_none_or(|n| n == input);
    let events: u64 = parts
        .iter()
        .zip(&inputs)
        .filter(|&(_, &input)| mine(input))
        .map(|(part, _)| part.events.size().0 + light.report(part.report).counts.nvtx)
        .sum();
    let passes = match (args.encode, args.merge) {
        (_, true) => 0,
        (Some(_), _) => 1 + args.to.len() as u64,
        (None, false) => nsys_lens::export::passes(&plan, &parts, &args.targets(&base)),
    };
    nsys_lens::export::stream::expect(events, passes);
    let progress = super::progress::Progress::writing("writing".to_string(), args.inputs.quiet);
    let lines = match (args.encode, args.merge) {
        (Some(n), _) => encode(&args, &plan, &parts, &inputs, n, &base)?,
        (None, true) => merge(&args, &plan, &parts, &inputs, &base)?,
        (None, false) => {
            let written = nsys_lens::export::write(&plan, &parts, &args.targets(&base))?;
            let perfetto = written.perfetto.iter().flat_map(report);
            perfetto
                .chain(written.paraver.iter().flat_map(report_paraver))
                .collect()
        }
    };
    drop(progress);
    if !args.inputs.quiet {
        for line in lines.into_iter().chain(unmatched_messages(&plan)) {
            eprintln!("{line}");
        }
    }
    Ok(Outcome::Done)
}

/// Runs `write` for each asked format at once (they only read the plan and the events); the
/// lines that report them.
fn each_target(
    args: &Args,
    write: impl Fn(Target) -> anyhow::Result<Vec<String>> + Sync,
) -> anyhow::Result<Vec<String>> {
    let mut targets = args.to.clone();
    targets.sort();
    targets.dedup();
    let results: Vec<anyhow::Result<Vec<String>>> = std::thread::scope(|scoped| {
        let handles: Vec<_> = targets
            .iter()
            .map(|&target| {
                let write = &write;
                scoped.spawn(move || write(target))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a writer thread panicked")))
            })
            .collect()
    });
    Ok(results
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?
        .concat())
}

/// The encoded part of input `n`: `base.encoded-n`.
fn encoded_path(base: &Path, n: usize) -> PathBuf {
    PathBuf::from(format!("{}.encoded-{n}", base.display()))
}

/// Step 2 on a cluster: writes the processes of input `n` to `base.encoded-n`.
fn encode(
    args: &Args,
    plan: &Plan,
    parts: &[Joined],
    inputs: &[usize],
    n: usize,
    base: &Path,
) -> anyhow::Result<Vec<String>> {
    let count = inputs.last().map_or(0, |&i| i + 1);
    anyhow::ensure!(
        n < count,
        "--encode {n}: there are {count} inputs, numbered from 0"
    );
    let mine: Vec<&Joined> = parts
        .iter()
        .zip(inputs)
        .filter(|&(_, &i)| i == n)
        .map(|(part, _)| part)
        .collect();
    let formats = Formats {
        perfetto: args.to.contains(&Target::Perfetto),
        paraver: args.to.contains(&Target::Paraver),
    };
    let path = encoded_path(base, n);
    let memory = args.memory_budget / 4;
    let step = (n, count);
    let options = args.fingerprint();
    encoded::encode(plan, parts, &mine, step, formats, &options, &path, memory)?;
    Ok(vec![format!(
        "wrote {} (input {n} of {count}); join with --merge once every input is encoded",
        path.display()
    )])
}

/// Step 3 on a cluster: joins `base.encoded-0` ... into the traces.
fn merge(
    args: &Args,
    plan: &Plan,
    parts: &[Joined],
    inputs: &[usize],
    base: &Path,
) -> anyhow::Result<Vec<String>> {
    let count = inputs.last().map_or(0, |&i| i + 1);
    let options = args.fingerprint();
    let expected = encoded::fingerprint(plan, parts, &options);
    let mut encoded = Vec::new();
    for n in 0..count {
        let path = encoded_path(base, n);
        let part = encoded::read(&path, expected)?;
        anyhow::ensure!(
            part.part == (n as u64, count as u64) && part.options == options,
            "{}: encoded as input {} of {} with other options or inputs ({}); encode every \
             input with the options of the join",
            path.display(),
            part.part.0,
            part.part.1,
            part.options
        );
        encoded.push(part);
    }
    let gzip = args.compressed();
    let staged = nsys_lens::output::Staged::default();
    let lines = each_target(args, |target| match target {
        Target::Perfetto => {
            let mut chunks: Vec<Option<perfetto::Chunk>> =
                (0..plan.exported.len()).map(|_| None).collect();
            for part in &encoded {
                for (position, chunk) in part.chunks()? {
                    chunks[position] = Some(chunk);
                }
            }
            let chunks = chunks
                .into_iter()
                .map(|c| {
                    c.ok_or_else(|| {
                        anyhow::anyhow!(
                            "an encoded part lacks its Perfetto trace: encode with the same --to"
                        )
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let path = with_extension(base, perfetto_extension(gzip));
            let options = perfetto::Options { gzip };
            Ok(report(&perfetto::write_chunks(
                plan, chunks, &path, options, &staged,
            )?))
        }
        Target::Paraver => {
            let bodies = encoded
                .iter()
                .map(|part| {
                    part.body()?.ok_or_else(|| {
                        anyhow::anyhow!(
                            "an encoded part lacks its Paraver body: encode with the same --to"
                        )
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let options = paraver::Options { gzip, memory: 0 };
            Ok(report_paraver(&paraver::write_merged(
                plan, parts, bodies, base, options, &staged,
            )?))
        }
    })?;
    staged.commit()?;
    Ok(lines)
}

impl Args {
    /// What a whole conversion writes.
    fn targets(&self, base: &Path) -> Targets {
        let gzip = self.compressed();
        let asked = |target| self.to.contains(&target);
        Targets {
            perfetto: asked(Target::Perfetto)
                .then(|| with_extension(base, perfetto_extension(gzip))),
            paraver: asked(Target::Paraver).then(|| base.to_path_buf()),
            gzip,
            memory: self.memory_budget / 4,
            threads: self.inputs.threads(),
        }
    }

    /// The options that decide what a conversion writes, which every cluster step must share.
    fn fingerprint(&self) -> String {
        let ranks = self.ranks.as_ref().map(|r| &r.0);
        format!(
            "to {:?} start {:?} end {:?} steady {} anchor {:?} ranks {ranks:?} roles {:?} \
             collective flows {} align {:?}",
            self.to,
            self.start,
            self.end,
            self.steady,
            self.anchor,
            self.roles,
            self.collective_flows,
            self.inputs.align
        )
    }

    fn window(&self) -> anyhow::Result<WindowSpec> {
        let otherwise = if self.steady {
            WindowSpec::Steady
        } else {
            WindowSpec::Whole
        };
        window_spec(self.start.zip(self.end), self.anchor.as_deref(), otherwise)
    }

    /// Whether the outputs are gzipped: `--compress`, or an `-o` name ending in `.gz`.
    fn compressed(&self) -> bool {
        self.compress || self.output.as_ref().is_some_and(|o| ends_with_gz(o))
    }

    /// `-o` (less a final `.gz`; a directory gets the first report's stem inside it), else the
    /// first report's stem in the current directory.
    fn base(&self) -> PathBuf {
        let stem = || {
            self.inputs.reports[0]
                .file_stem()
                .map(PathBuf::from)
                .unwrap_or_else(|| "trace".into())
        };
        match &self.output {
            None => stem(),
            Some(dir) if dir.is_dir() || dir.as_os_str().to_string_lossy().ends_with('/') => {
                dir.join(stem())
            }
            Some(output) if ends_with_gz(output) => output.with_extension(""),
            Some(output) => output.clone(),
        }
    }
}

/// Whether a path's name ends in `.gz`.
fn ends_with_gz(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "gz")
}

/// The Perfetto trace's extension.
fn perfetto_extension(gzip: bool) -> &'static str {
    if gzip {
        "perfetto-trace.gz"
    } else {
        "perfetto-trace"
    }
}

/// `base.ext`, unless `base` already ends with `.ext` or is written in place (`-`, a device).
fn with_extension(base: &Path, ext: &str) -> PathBuf {
    let text = base.as_os_str().to_string_lossy();
    if text.ends_with(&format!(".{ext}")) || nsys_lens::output::is_stream(base) {
        base.to_path_buf()
    } else {
        let mut name = base.as_os_str().to_os_string();
        name.push(".");
        name.push(ext);
        PathBuf::from(name)
    }
}

/// The warning for MPI sends and receives that make no message, when there are any.
fn unmatched_messages(plan: &Plan) -> Option<String> {
    let m = &plan.messages;
    (m.left_over.total() > 0).then(|| {
        format!(
            "nsys-lens: warning: {} MPI send(s) and receive(s) not drawn as messages: {} without \
             a partner in the capture, {} receiving from any source or with any tag, {} of \
             processes without an MPI rank",
            m.left_over.total(),
            m.left_over.unmatched,
            m.left_over.wildcard,
            m.left_over.unranked
        )
    })
}

/// What the optional counts of a summary line count, in order.
const OPTIONAL: [&str; 5] = [
    "CUDA graph launches",
    "OS runtime calls",
    "MPI calls",
    "OpenACC events",
    "GPU metric samples",
];

/// `, N CUDA graph launches, M OS runtime calls, ...` for a summary line: the [`OPTIONAL`]
/// parts the capture has.
fn optional_counts(counts: [u64; 5]) -> String {
    counts
        .iter()
        .zip(OPTIONAL)
        .filter(|(n, _)| **n > 0)
        .map(|(n, what)| format!(", {n} {what}"))
        .collect()
}

/// The summary line of the Perfetto trace, and a warning when the UI may not open it.
fn report(summary: &perfetto::Summary) -> Vec<String> {
    let c = summary.counts;
    let mut lines = vec![format!(
        "wrote {} ({} bytes): {} kernels, {} memcpy, {} memset, {} CUDA API calls, {} NVTX \
         events{}, {} flows, {} tracks",
        summary.path.display(),
        summary.bytes,
        c.kernels,
        c.memcpy,
        c.memset,
        c.api,
        c.nvtx,
        optional_counts([
            c.graphs,
            c.os_calls,
            c.mpi_calls,
            c.acc_events,
            c.metric_samples
        ]),
        c.flows,
        c.tracks
    )];
    if c.slices() > perfetto::UI_SLICE_LIMIT {
        lines.push(format!(
            "nsys-lens: warning: {} slices may be more than ui.perfetto.dev can hold in a \
             browser; export part of the run (--ranks, --steady, --start/--end) or open it with \
             `trace_processor server http {}`",
            c.slices(),
            summary.path.display()
        ));
    }
    lines
}

/// The summary line of the Paraver files, and their warnings.
fn report_paraver(summary: &paraver::Summary) -> Vec<String> {
    let c = summary.counts;
    let mut lines = vec![format!(
        "wrote {} ({} bytes; .pcf and .row beside it): {} tasks, {} threads, {} kernels, {} \
         memcpy/memset, {} CUDA API calls, {} NVTX events{}, {} communications{}",
        summary.prv.display(),
        summary.bytes,
        summary.tasks,
        summary.threads,
        c.kernels,
        c.memops,
        c.api,
        c.nvtx,
        optional_counts([
            c.graphs,
            c.os_calls,
            c.mpi_calls,
            c.acc_events,
            c.metric_samples
        ]),
        c.comms,
        match c.mpi_comms {
            0 => String::new(),
            n => format!(" and {n} MPI messages"),
        }
    )];
    for warning in &summary.warnings {
        lines.push(format!("nsys-lens: warning: {warning}"));
    }
    if c.comms_skipped > 0 {
        lines.push(format!(
            "nsys-lens: warning: {} launch(es) not drawn as communication: their GPU operation \
             starts before the API call (clock skew)",
            c.comms_skipped
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_lists_and_extensions() {
        assert_eq!(RankList::parse("0, 2-4,7").unwrap().0, [0, 2, 3, 4, 7]);
        assert_eq!(RankList::parse("3").unwrap().0, [3]);
        assert!(RankList::parse("x").is_err());
        assert!(RankList::parse(",").is_err());
        assert_eq!(
            with_extension(Path::new("out/run"), "perfetto-trace"),
            PathBuf::from("out/run.perfetto-trace")
        );
        assert_eq!(
            with_extension(Path::new("a.perfetto-trace"), "perfetto-trace"),
            PathBuf::from("a.perfetto-trace")
        );
    }
}
