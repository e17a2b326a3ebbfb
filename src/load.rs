//! Inputs as people give them: exports, `.nsys-rep` reports (exported with nsys when needed),
//! part files and directories of them, read into one timeline on one clock, or, for a
//! streaming conversion, into captures. The CLI and the Python package read through this.

use crate::analysis::align::{self, Alignment};
use crate::classify::comm::is_comm;
use crate::input::capture::{Capture, Captures};
use crate::input::part::{self, PART_EXTENSION};
use crate::model::Timeline;
use crate::nsys;
use crate::spill::Budget;
use anyhow::Context as _;
use std::path::PathBuf;
use std::sync::Arc;

/// How hosts' clocks are put together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Align {
    /// Each report's session start (its host's system clock).
    #[default]
    Session,
    /// Session starts, then one correction per host from the collectives' end times.
    Collectives,
}

/// What to read, and how.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// Exports, `.nsys-rep` reports, part files, or directories of exports and part files.
    pub reports: Vec<PathBuf>,
    /// Where `.nsys-rep` inputs are exported to (default: beside each report).
    pub export_dir: Option<PathBuf>,
    /// How hosts' clocks are put together.
    pub align: Align,
    /// Threads that read (reports at once; a report's large tables shared when there are
    /// fewer reports than threads). The result is the same whatever the number.
    pub threads: usize,
}

impl Inputs {
    /// These reports, read on every core, on their session clocks.
    pub fn new(reports: Vec<PathBuf>) -> Inputs {
        Inputs {
            reports,
            export_dir: None,
            align: Align::Session,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// Every report in one timeline, with `Align::Collectives` each host's clock corrected;
    /// and the alignment estimate when one was made.
    pub fn load(&self) -> anyhow::Result<(Timeline, Option<Alignment>)> {
        let mut timeline = self.load_session()?;
        if self.align == Align::Session {
            return Ok((timeline, None));
        }
        let alignment = align::estimate(&timeline);
        timeline.shift_hosts(&alignment.corrections());
        Ok((timeline, Some(alignment)))
    }

    /// The reports on the session-start clock (part files' events loaded into memory too).
    fn load_session(&self) -> anyhow::Result<Timeline> {
        let paths = self.paths()?;
        if !paths.iter().any(|p| part::is_part(p)) {
            return Timeline::load_with_threads(&paths, self.threads)
                .context("cannot load the reports");
        }
        let captures = self.read_captures(Budget::new(usize::MAX / 2))?;
        let joined = Captures::join(captures.into_iter().map(|(_, c)| c).collect())?;
        Ok(joined.into_timeline()?)
    }

    /// Every input read for a streaming conversion, each with the position of the input it
    /// came from: exports read (their events sorted under `budget`), part files opened.
    pub fn read_captures(&self, budget: Arc<Budget>) -> anyhow::Result<Vec<(usize, Capture)>> {
        let paths = self.paths()?;
        let (parts, exports): (Vec<_>, Vec<_>) = paths
            .iter()
            .enumerate()
            .partition(|(_, p)| part::is_part(p));
        let reports = exports
            .iter()
            .map(|&(i, p)| Ok((i, nsys::Report::open(p)?)))
            .collect::<Result<Vec<_>, nsys::Error>>()?;
        let chunking = nsys::Chunking::shared(self.threads, reports.len(), nsys::CHUNK_ROWS);
        let read = |(i, report): (usize, nsys::Report)| {
            Capture::read(&report, chunking, budget.clone(), is_comm).map(|c| (i, c))
        };
        let mut captures = crate::nsys::read_all(reports, self.threads, read)
            .context("cannot load the reports")?;
        for (i, path) in parts {
            captures.extend(part::read(path)?.into_iter().map(|c| (i, c)));
        }
        // Input order; a part's reports in their order.
        captures.sort_by_key(|(i, _)| *i);
        Ok(captures)
    }

    /// Every input read for a streaming conversion (events sorted under `budget`), on one
    /// clock, with `Align::Collectives` each host's clock corrected; with the input each
    /// joined capture came from.
    pub fn captures(&self, budget: Arc<Budget>) -> anyhow::Result<(Captures, Vec<usize>)> {
        let (captures, inputs, _) = self.captures_aligned(budget)?;
        Ok((captures, inputs))
    }

    /// [`Inputs::captures`], and the alignment estimate when `--align collectives` asked for
    /// one.
    pub fn captures_aligned(
        &self,
        budget: Arc<Budget>,
    ) -> anyhow::Result<(Captures, Vec<usize>, Option<Alignment>)> {
        let (inputs, captures): (Vec<usize>, Vec<Capture>) =
            self.read_captures(budget)?.into_iter().unzip();
        let mut joined = Captures::join(captures).context("cannot load the reports")?;
        if self.align == Align::Session {
            return Ok((joined, inputs, None));
        }
        let alignment = align::estimate(&joined.light);
        joined.shift_hosts(&alignment.corrections());
        Ok((joined, inputs, Some(alignment)))
    }

    /// Fails unless every path of `outputs` may be written ([`crate::output::check`]): none is
    /// an input (each input noted now), and only the null device takes several.
    pub fn check_outputs(&self, outputs: &[PathBuf]) -> anyhow::Result<()> {
        self.expanded()?;
        crate::output::check(outputs)
    }

    /// The input files: directories expanded, `.nsys-rep` reports exported, torch.profiler and
    /// JAX traces translated (each once, then cached; several at once, each translation on two
    /// threads: one parsing, one writing).
    fn paths(&self) -> anyhow::Result<Vec<PathBuf>> {
        let export_dir = self.export_dir.as_deref();
        let resolve = |p: PathBuf| {
            if part::is_part(&p) {
                return Ok(p);
            }
            let export = nsys::resolve_input(&p, export_dir)?;
            let read = crate::input::resolve(&export, export_dir)?;
            crate::output::note_input(&export);
            crate::output::note_input(&read);
            Ok(read)
        };
        nsys::read_all(self.expanded()?, (self.threads / 2).max(1), resolve)
    }

    /// The reports, with each directory replaced by its exports, part files and traces
    /// (`.sqlite`, `.{PART_EXTENSION}`, `.json`, `.json.gz`, `.xplane.pb`) in natural name order
    /// ([`natural_order`]: `node2` before `node10`), which orders hosts and so unlabelled ranks.
    fn expanded(&self) -> anyhow::Result<Vec<PathBuf>> {
        let mut paths = Vec::new();
        for path in &self.reports {
            if !path.is_dir() {
                paths.push(path.clone());
                continue;
            }
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("cannot list {}", path.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| is_input_name(p))
                .collect();
            anyhow::ensure!(
                !found.is_empty(),
                "{}: no .sqlite or .{PART_EXTENSION} file in this directory, nor a torch.profiler \
                 trace (.json, .json.gz) or a JAX trace (.xplane.pb)",
                path.display()
            );
            found.sort_by(|a, b| natural_order(a.as_os_str(), b.as_os_str()));
            paths.extend(found);
        }
        for path in &paths {
            crate::output::note_input(path);
        }
        Ok(paths)
    }
}

/// Names compared as people number files: runs of digits by their value (`node2` before
/// `node10`, `rank007` beside `rank7` by the zeros after), everything else byte by byte.
fn natural_order(a: &std::ffi::OsStr, b: &std::ffi::OsStr) -> std::cmp::Ordering {
    let (mut a, mut b) = (a.as_encoded_bytes(), b.as_encoded_bytes());
    loop {
        let (x, y) = match (a.first(), b.first()) {
            (None, None) => return std::cmp::Ordering::Equal,
            (None, Some(_)) => return std::cmp::Ordering::Less,
            (Some(_), None) => return std::cmp::Ordering::Greater,
            (Some(x), Some(y)) => (x, y),
        };
        if !(x.is_ascii_digit() && y.is_ascii_digit()) {
            match x.cmp(y) {
                std::cmp::Ordering::Equal => (a, b) = (&a[1..], &b[1..]),
                other => return other,
            }
            continue;
        }
        let digits = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
        let (m, n) = (digits(a), digits(b));
        // Fewer significant digits is smaller; then the digits; then fewer leading zeros.
        match number(&a[..m]).cmp(&number(&b[..n])) {
            std::cmp::Ordering::Equal => (a, b) = (&a[m..], &b[n..]),
            other => return other,
        }
    }
}

/// A run of digits as [`natural_order`] compares it: its count of significant digits, those
/// digits, its count of leading zeros.
fn number(run: &[u8]) -> (usize, &[u8], usize) {
    let zeros = run.iter().take_while(|&&c| c == b'0').count();
    (run.len() - zeros, &run[zeros..], zeros)
}

/// Whether a file in a directory given as input is one to read: an export, a part file, an
/// XSpace, or a JSON file that is a torch.profiler trace.
fn is_input_name(path: &std::path::Path) -> bool {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let json = name.ends_with(".json") || name.ends_with(".json.gz");
    name.ends_with(".sqlite")
        || name.ends_with(".xplane.pb")
        || path.extension().is_some_and(|e| e == PART_EXTENSION)
        || (json && crate::input::is_kineto_trace(path))
}

#[cfg(test)]
mod tests {
    use super::natural_order;
    use std::ffi::OsStr;

    #[test]
    fn file_names_sort_as_people_number_them() {
        let mut names = [
            "node10.sqlite",
            "node2.sqlite",
            "node1.sqlite",
            "node02.sqlite",
            "node1b.sqlite",
            "Node3.sqlite",
            "node.sqlite",
            "rank-0-of-16.json",
            "rank-12-of-16.json",
        ];
        names.sort_by(|a, b| natural_order(OsStr::new(a), OsStr::new(b)));
        assert_eq!(
            names,
            [
                "Node3.sqlite",
                "node.sqlite",
                "node1.sqlite",
                "node1b.sqlite",
                "node2.sqlite",
                "node02.sqlite",
                "node10.sqlite",
                "rank-0-of-16.json",
                "rank-12-of-16.json",
            ]
        );
    }
}
