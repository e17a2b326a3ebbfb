//! A conversion as people ask for it: which traces, named after what, written in one go or in
//! a cluster's steps (each input's part encoded on its own node, then the parts merged), and the
//! lines that say what was written. The CLI's `convert` parses its flags into a [`Request`] and
//! prints what [`Request::write`] returns.

use super::encoded::{self, Formats};
use super::{Plan, Targets, fit, paraver, perfetto, split};
use crate::input::capture::Joined;
use crate::model::Timeline;
use std::path::{Path, PathBuf};

/// A trace format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Target {
    /// Perfetto protobuf trace (`.perfetto-trace`).
    Perfetto,
    /// Paraver trace (`.prv`, `.pcf`, `.row`).
    Paraver,
}

/// Which part of the work this run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Every trace, whole.
    Whole,
    /// On a cluster, step 2 of 3: the processes of input N into `base.encoded-N`.
    Encode(usize),
    /// On a cluster, step 3 of 3: the encoded parts joined into the traces.
    Merge,
}

impl Step {
    /// The step `--encode N` or `--merge` asks for, else the whole conversion.
    pub fn of(encode: Option<usize>, merge: bool) -> Step {
        match (encode, merge) {
            (Some(n), _) => Step::Encode(n),
            (None, true) => Step::Merge,
            (None, false) => Step::Whole,
        }
    }
}

/// One conversion.
#[derive(Debug, Clone)]
pub struct Request {
    /// The formats, each once, in [`Target`] order.
    pub targets: Vec<Target>,
    /// The outputs' path without extension (named after `-o` or the first input).
    pub base: PathBuf,
    /// Gzip the Perfetto trace and the `.prv`.
    pub gzip: bool,
    /// Memory for the events being sorted, bytes.
    pub memory_budget: usize,
    /// Parts prepared and encoded at once.
    pub threads: usize,
    /// The step.
    pub step: Step,
    /// The options that decide what is written, which every cluster step must share.
    pub fingerprint: String,
    /// Keep the Perfetto trace within this many bytes (see [`super::fit`]).
    pub max_size: Option<u64>,
    /// One set of traces per node, and an index page (see [`super::split`]).
    pub split_by_node: bool,
}

impl Request {
    /// A whole conversion into `targets`, named after `output` or the first input (`base`),
    /// gzipped when `compress` or when `output` ends in `.gz`; one thread, 128 MiB of memory.
    pub fn new(
        targets: &[Target],
        output: Option<&Path>,
        first_input: &Path,
        compress: bool,
    ) -> Self {
        let mut targets = targets.to_vec();
        targets.sort();
        targets.dedup();
        Request {
            targets,
            base: base(output, first_input),
            gzip: compress || output.is_some_and(ends_with_gz),
            memory_budget: crate::spill::Budget::DEFAULT,
            threads: 1,
            step: Step::Whole,
            fingerprint: String::new(),
            max_size: None,
            split_by_node: false,
        }
    }

    /// Every file this step writes.
    pub fn outputs(&self) -> Vec<PathBuf> {
        match self.step {
            Step::Encode(n) => vec![encoded_path(&self.base, n)],
            Step::Whole if self.split_by_node => vec![split::index_path(&self.base)],
            Step::Whole | Step::Merge => self.targets_at(&self.base).outputs(),
        }
    }

    /// Tells the progress bar how much this step streams: [`Request::events`] times
    /// [`Request::passes`].
    pub fn expect_progress(
        &self,
        light: &Timeline,
        plan: &Plan,
        parts: &[Joined],
        inputs: &[usize],
    ) {
        let events = self.events(light, parts, inputs);
        super::stream::expect(events, self.passes(plan, parts));
    }

    /// How many passes over the events this step makes (for the progress bar): one to prepare,
    /// then one per format on a cluster, or what the writers share here; a join passes none.
    pub fn passes(&self, plan: &Plan, parts: &[Joined]) -> u64 {
        match self.step {
            Step::Merge => 0,
            Step::Encode(_) => 1 + self.targets.len() as u64,
            Step::Whole => super::passes(plan, parts, &self.targets_at(&self.base)),
        }
    }

    /// The events this step streams: every event of the parts it writes (NVTX ranges too).
    pub fn events(&self, light: &Timeline, parts: &[Joined], inputs: &[usize]) -> u64 {
        let mine = |input: usize| match self.step {
            Step::Encode(n) => n == input,
            Step::Whole | Step::Merge => true,
        };
        parts
            .iter()
            .zip(inputs)
            .filter(|&(_, &input)| mine(input))
            .map(|(part, _)| part.events.size().0 + light.report(part.report).counts.nvtx)
            .sum()
    }

    /// Writes this step's files; the lines that say what was written, and the plan's warnings.
    /// `inputs` gives each part's input (from 0, in the order given); `steady` is the same
    /// plan over each rank's steady window, which `max_size` falls back to (None when a window
    /// was asked for).
    pub fn write(
        &self,
        (plan, steady): (&Plan, Option<&Plan>),
        parts: &[Joined],
        inputs: &[usize],
    ) -> anyhow::Result<Vec<String>> {
        anyhow::ensure!(
            self.max_size.is_none() || !self.targets.contains(&Target::Paraver),
            "--max-size sizes the Perfetto trace and draws the ranks it leaves out by their \
             counters, which Paraver has no place for: add --to perfetto (a Paraver trace is \
             cut with --steady, --start/--end or --ranks)"
        );
        let mut lines = match self.step {
            Step::Encode(n) => self.encode(plan, parts, inputs, n)?,
            Step::Merge => self.merge(plan, parts, inputs)?,
            Step::Whole => self.whole(plan, steady, parts)?,
        };
        lines.extend(unmatched_messages(plan));
        Ok(lines)
    }

    /// A whole conversion: the traces of `plan` (under `max_size`, of what fits), or with
    /// `split_by_node` one set per node, each on the whole run's clock, and an index page.
    fn whole(
        &self,
        plan: &Plan,
        steady: Option<&Plan>,
        parts: &[Joined],
    ) -> anyhow::Result<Vec<String>> {
        if !self.split_by_node {
            return self.sized(plan, steady, parts, &self.base);
        }
        let (mut lines, mut nodes) = (Vec::new(), Vec::new());
        for host in split::hosts(plan) {
            let (mine, steady) = (
                split::node_plan(plan, host),
                steady.map(|s| split::node_plan(s, host)),
            );
            let name = &plan.activity.timeline.host(host).name;
            let base = split::node_base(&self.base, name);
            lines.extend(self.sized(&mine, steady.as_ref(), parts, &base)?);
            let files = self.targets_at(&base).outputs();
            nodes.push(split::node(&mine, host, files));
        }
        lines.push(split::write_index(&self.base, plan, &nodes)?);
        Ok(lines)
    }

    /// The traces of `plan` at `base`; under `max_size`, of what fits ([`Request::fitted`]),
    /// measured once written and chosen again smaller (at most twice) when over.
    fn sized(
        &self,
        plan: &Plan,
        steady: Option<&Plan>,
        parts: &[Joined],
        base: &Path,
    ) -> anyhow::Result<Vec<String>> {
        let targets = self.targets_at(base);
        let Some(max) = self.max_size else {
            return Ok(written_lines(&super::write(plan, parts, &targets)?));
        };
        let mut aim = max;
        for _ in 0..3 {
            let (fitted, kept) = self.fitted(plan, steady, parts, aim)?;
            let written = super::write(&fitted, parts, &targets)?;
            let bytes = written.perfetto.as_ref().map_or(0, |p| p.bytes);
            if bytes <= max {
                let mut lines = written_lines(&written);
                lines.push(format!("--max-size {}: {kept}", fit::human_bytes(max)));
                return Ok(lines);
            }
            aim = (aim as f64 * max as f64 / bytes as f64 * 0.95) as u64;
        }
        anyhow::bail!(
            "--max-size {}: the Perfetto trace stayed larger three times over; give a shorter \
             --start/--end window or fewer --ranks",
            fit::human_bytes(max)
        )
    }

    /// What of `plan` fits in `aim` bytes: all of it; else the steady window (`steady`, when
    /// no window was given); else there, the slices of the ranks [`fit::choose`] keeps and the
    /// counters of the others. The plan, and a sentence saying what was kept.
    fn fitted<'a, 't>(
        &self,
        plan: &Plan<'a, 't>,
        steady: Option<&Plan<'a, 't>>,
        parts: &[Joined],
        aim: u64,
    ) -> anyhow::Result<(Plan<'a, 't>, String)> {
        let human = fit::human_bytes;
        let prepared = super::prepare::prepare_all(plan, parts, self.threads)?;
        let whole = fit::estimate(plan, &prepared);
        if whole <= aim {
            let kept = format!("kept everything (estimated {})", human(whole));
            return Ok((plan.clone(), kept));
        }
        let (within, prepared, window) = match steady {
            Some(s) => (
                s,
                super::prepare::prepare_all(s, parts, self.threads)?,
                "each rank's steady window",
            ),
            None => (plan, prepared, "the window asked for"),
        };
        let selection = fit::choose(within, &prepared, aim).ok_or_else(|| {
            anyhow::anyhow!(
                "--max-size {}: the counters alone of every process over {window} are estimated \
                 above it (the whole trace at {}); give a shorter --start/--end window or fewer \
                 --ranks",
                human(aim),
                human(whole)
            )
        })?;
        let drawn = |e: &super::Exported| {
            let position = within.position(e.process)?;
            Some(selection.slices[position])
        };
        let fitted = within.select(drawn);
        let kept = fit::describe(&fitted, window, &selection, whole);
        Ok((fitted, kept))
    }

    /// What a whole conversion writes: the traces at [`Request::base`].
    pub fn targets(&self) -> Targets {
        self.targets_at(&self.base)
    }

    /// What a whole conversion writes at `base`.
    fn targets_at(&self, base: &Path) -> Targets {
        let asked = |target| self.targets.contains(&target);
        Targets {
            perfetto: asked(Target::Perfetto)
                .then(|| with_extension(base, perfetto_extension(self.gzip))),
            paraver: asked(Target::Paraver).then(|| base.to_path_buf()),
            gzip: self.gzip,
            memory: self.memory_budget / 4,
            threads: self.threads,
        }
    }

    /// Step 2 on a cluster: writes the processes of input `n` to `base.encoded-n`.
    fn encode(
        &self,
        plan: &Plan,
        parts: &[Joined],
        inputs: &[usize],
        n: usize,
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
            perfetto: self.targets.contains(&Target::Perfetto),
            paraver: self.targets.contains(&Target::Paraver),
        };
        let path = encoded_path(&self.base, n);
        let memory = self.memory_budget / 4;
        let step = (n, count);
        let options = &self.fingerprint;
        encoded::encode(plan, parts, &mine, step, formats, options, &path, memory)?;
        Ok(vec![format!(
            "wrote {} (input {n} of {count}); join with --merge once every input is encoded",
            path.display()
        )])
    }

    /// Step 3 on a cluster: joins `base.encoded-0` ... into the traces.
    fn merge(
        &self,
        plan: &Plan,
        parts: &[Joined],
        inputs: &[usize],
    ) -> anyhow::Result<Vec<String>> {
        let count = inputs.last().map_or(0, |&i| i + 1);
        let options = &self.fingerprint;
        let expected = encoded::fingerprint(plan, parts, options);
        let mut encoded = Vec::new();
        for n in 0..count {
            let path = encoded_path(&self.base, n);
            let part = encoded::read(&path, expected)?;
            anyhow::ensure!(
                part.part == (n as u64, count as u64) && &part.options == options,
                "{}: encoded as input {} of {} with other options or inputs ({}); encode every \
                 input with the options of the join",
                path.display(),
                part.part.0,
                part.part.1,
                part.options
            );
            encoded.push(part);
        }
        let (base, gzip) = (&self.base, self.gzip);
        let staged = crate::output::Staged::default();
        let lines = self.each_target(|target| match target {
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
                                "an encoded part lacks its Perfetto trace: encode with the same \
                                 --to"
                            )
                        })
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let path = with_extension(base, perfetto_extension(gzip));
                let options = perfetto::Options { gzip };
                Ok(perfetto_lines(&perfetto::write_chunks(
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
                Ok(paraver_lines(&paraver::write_merged(
                    plan, parts, bodies, base, options, &staged,
                )?))
            }
        })?;
        staged.commit()?;
        Ok(lines)
    }

    /// Runs `write` for each format at once (they only read the plan and the events); the
    /// lines that report them.
    fn each_target(
        &self,
        write: impl Fn(Target) -> anyhow::Result<Vec<String>> + Sync,
    ) -> anyhow::Result<Vec<String>> {
        let results: Vec<anyhow::Result<Vec<String>>> = std::thread::scope(|scoped| {
            let handles: Vec<_> = self
                .targets
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
}

/// The outputs' path without extension: `-o` (less a final `.gz`; a directory gets the first
/// input's stem inside it), else the first input's stem in the current directory.
fn base(output: Option<&Path>, first_input: &Path) -> PathBuf {
    let stem = || {
        first_input
            .file_stem()
            .map(PathBuf::from)
            .unwrap_or_else(|| "trace".into())
    };
    match output {
        None => stem(),
        Some(dir) if dir.is_dir() || dir.as_os_str().to_string_lossy().ends_with('/') => {
            dir.join(stem())
        }
        Some(output) if ends_with_gz(output) => output.with_extension(""),
        Some(output) => output.to_path_buf(),
    }
}

/// Whether a path's name ends in `.gz` (an `-o` name that asks for gzip).
fn ends_with_gz(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "gz")
}

/// The encoded part of input `n`: `base.encoded-n`.
fn encoded_path(base: &Path, n: usize) -> PathBuf {
    PathBuf::from(format!("{}.encoded-{n}", base.display()))
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
    if text.ends_with(&format!(".{ext}")) || crate::output::is_stream(base) {
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

/// The lines that report what a whole conversion wrote.
fn written_lines(written: &super::Written) -> Vec<String> {
    let perfetto = written.perfetto.iter().flat_map(perfetto_lines);
    perfetto
        .chain(written.paraver.iter().flat_map(paraver_lines))
        .collect()
}

/// The summary line of the Perfetto trace, and a warning when the UI may not open it.
fn perfetto_lines(summary: &perfetto::Summary) -> Vec<String> {
    let c = summary.counts;
    let mut lines = vec![format!(
        "wrote {} ({} bytes): {} kernels, {} memcpy, {} memset, {} CUDA API calls, {} NVTX \
         events{}, {} flows{}, {} tracks",
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
        match c.sync_links {
            0 => String::new(),
            n => format!(" ({n} from synchronizations)"),
        },
        c.tracks
    )];
    if summary.bytes > fit::BROWSER_LIMIT {
        lines.push(format!(
            "nsys-lens: warning: the Perfetto trace is {}, more than a browser opens reliably \
             (ui.perfetto.dev: about 1 to 2 GB); --max-size 1G keeps what fits (the steady \
             window, then a subset of ranks), --split-by node writes one trace per node",
            fit::human_bytes(summary.bytes)
        ));
    } else if c.slices() > perfetto::UI_SLICE_LIMIT {
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
fn paraver_lines(summary: &paraver::Summary) -> Vec<String> {
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
        [
            (c.mpi_comms, "MPI messages"),
            (c.sync_comms, "synchronization links")
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!(" and {n} {what}"))
        .collect::<String>()
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
    fn outputs_are_named_after_the_input_or_given_name() {
        assert_eq!(
            with_extension(Path::new("out/run"), "perfetto-trace"),
            PathBuf::from("out/run.perfetto-trace")
        );
        assert_eq!(
            with_extension(Path::new("a.perfetto-trace"), "perfetto-trace"),
            PathBuf::from("a.perfetto-trace")
        );
        let input = Path::new("data/node0.sqlite");
        assert_eq!(base(None, input), PathBuf::from("node0"));
        assert_eq!(base(Some(Path::new("run.gz")), input), PathBuf::from("run"));
        assert_eq!(base(Some(Path::new("x/")), input), PathBuf::from("x/node0"));
    }
}
