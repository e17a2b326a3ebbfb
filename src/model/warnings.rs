//! Harmless oddities found while reading: they do not stop the run, they are counted and reported.

use crate::hash::FxBuildHasher;
use indexmap::IndexMap;
use std::fmt;

/// One kind of oddity. Identical warnings are counted, not repeated.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Warning {
    /// No `TARGET_INFO_SESSION_START_TIME` (exports before 2021.3): offset 0 on the merged clock.
    NoSessionStart,
    /// A translated trace (torch.profiler, JAX) that records no wall-clock base.
    NoClockBase,
    /// No `Hostname` row: the file stem names the host.
    NoHostname,
    /// The export schema is newer than any this build knows; read best-effort.
    NewerSchema(String),
    /// The metadata does not say `--ts-normalize`, but the times are UTC epoch ns.
    EpochTimesWithoutMetadata,
    /// An NVTX range without an end (runs to the end of the capture).
    UnclosedNvtxRange,
    /// An NVTX row of an event type this reader does not model.
    UnknownNvtxType(i64),
    /// Text that is not valid UTF-8 (decoded with U+FFFD).
    NonUtf8Text,
    /// Text over [`crate::model::MAX_TEXT`] bytes, cut.
    LongText,
    /// Kernels, copies or sets that repeat another row in every field.
    DuplicateGpuOps,
    /// Rows without a `globalPid`, attributed to the report's main process.
    MissingGlobalPid(&'static str),
    /// GPU metric series of a GPU no process of the report used: read, but on no rank.
    UnusedGpuMetrics,
    /// An MPI call without an end: drawn as an instant.
    UnendedMpiCall,
    /// Events of a translated trace (torch.profiler, JAX) of a kind nsys-lens does not model.
    Untranslated(String),
    /// CPU samples (`COMPOSITE_EVENTS`) without a call stack: skipped.
    SampleWithoutStack,
    /// Scheduling events without their pair (a thread scheduled in and never out, or out and
    /// never in, within the capture): skipped.
    UnpairedSchedEvent,
}

impl Warning {
    fn describe(&self, f: &mut fmt::Formatter, count: u64) -> fmt::Result {
        match self {
            Warning::NoSessionStart => write!(
                f,
                "no session start time (export older than 2021.3): clock offset 0, so times may not line up with other reports"
            ),
            Warning::NoClockBase => write!(
                f,
                "the trace records no wall-clock time (JAX traces carry none): clock offset 0, so its \
                 times may not line up with other inputs"
            ),
            Warning::NoHostname => write!(
                f,
                "no Hostname in TARGET_INFO_SYSTEM_ENV: the file name stands for the host"
            ),
            Warning::NewerSchema(v) => write!(
                f,
                "export schema {v} is newer than this build knows (up to 3.28): read best-effort"
            ),
            Warning::EpochTimesWithoutMetadata => write!(
                f,
                "times are UTC epoch ns although the metadata does not record --ts-normalize: read as UTC"
            ),
            Warning::UnclosedNvtxRange => write!(
                f,
                "{count} NVTX range(s) never close: they run to the end of the capture"
            ),
            Warning::UnknownNvtxType(t) => {
                write!(f, "{count} NVTX row(s) of unknown event type {t} skipped")
            }
            Warning::NonUtf8Text => write!(
                f,
                "{count} text value(s) are not valid UTF-8: shown with U+FFFD"
            ),
            Warning::DuplicateGpuOps => write!(
                f,
                "{count} kernel, copy or set row(s) repeat the row before them in every field (a \
                 damaged or twice-merged export): kept, so their time counts twice"
            ),
            Warning::LongText => write!(
                f,
                "{count} text value(s) over 1 MiB (a damaged export?): cut to their first MiB"
            ),
            Warning::UnusedGpuMetrics => write!(
                f,
                "{count} GPU metric series of GPUs no traced process used: not shown on any rank"
            ),
            Warning::UnendedMpiCall => {
                write!(f, "{count} MPI call(s) have no end: drawn as instants")
            }
            Warning::Untranslated(kind) => write!(
                f,
                "{count} trace event(s) of kind {kind} skipped (not modelled by nsys-lens)"
            ),
            Warning::SampleWithoutStack => write!(
                f,
                "{count} CPU sample(s) have no call stack in SAMPLING_CALLCHAINS: skipped"
            ),
            Warning::UnpairedSchedEvent => write!(
                f,
                "{count} thread scheduling event(s) have no pair (scheduled in and never out, or \
                 out and never in, within the capture): skipped"
            ),
            Warning::MissingGlobalPid(table) => write!(
                f,
                "{count} {table} row(s) have no globalPid: attributed to the report's main process"
            ),
        }
    }
}

/// Counted warnings, in the order they were first raised.
#[derive(Debug, Clone, Default)]
pub struct Warnings {
    counts: IndexMap<Warning, u64, FxBuildHasher>,
}

impl Warnings {
    /// Counts one occurrence.
    pub fn add(&mut self, warning: Warning) {
        self.add_n(warning, 1);
    }

    /// Counts `n` occurrences (nothing when `n` is 0).
    pub fn add_n(&mut self, warning: Warning, n: u64) {
        if n > 0 {
            *self.counts.entry(warning).or_insert(0) += n;
        }
    }

    /// Adds every count of `other`, in its order.
    pub fn extend(&mut self, other: &Warnings) {
        for (warning, n) in other.iter() {
            self.add_n(warning.clone(), n);
        }
    }

    /// Whether nothing was raised.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// The warnings with their counts.
    pub fn iter(&self) -> impl Iterator<Item = (&Warning, u64)> {
        self.counts.iter().map(|(w, n)| (w, *n))
    }

    /// How often a warning was raised.
    pub fn count(&self, warning: &Warning) -> u64 {
        self.counts.get(warning).copied().unwrap_or(0)
    }

    /// One line per warning, for people.
    pub fn messages(&self) -> Vec<String> {
        self.iter()
            .map(|(w, n)| Counted(w, n).to_string())
            .collect()
    }
}

/// A warning with its count, displayed as one sentence.
struct Counted<'a>(&'a Warning, u64);

impl fmt::Display for Counted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.0.describe(f, self.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_identical_warnings_once() {
        let mut w = Warnings::default();
        w.add(Warning::UnclosedNvtxRange);
        w.add(Warning::UnclosedNvtxRange);
        w.add_n(Warning::NonUtf8Text, 0);
        w.add(Warning::NoSessionStart);
        assert_eq!(w.count(&Warning::UnclosedNvtxRange), 2);
        let messages = w.messages();
        assert_eq!(messages.len(), 2);
        assert!(messages[0].starts_with("2 NVTX range(s) never close"));
    }
}
