//! PithTrain compatibility: the four `analyze-nsys-profile` scripts (`show_setup`, `find_window`,
//! `classify_streams`, `compute_overlap`) re-implemented rule for rule on one node's export
//! (analyses.md §1), so `--compat pithtrain` prints exactly their tables. Where the scripts
//! would crash, these functions return a [`CompatError`] that says why.
//!
//! The rules differ from nsys-lens' own on purpose: the label must be a pid's first NVTX event,
//! NVTX rows with negative start are ignored and event types are not filtered, kernels count
//! only when wholly inside the window, the enclosing range is searched among 256 candidates,
//! and kernels without a stage are dropped.

use super::IntervalSet;
use super::overlap::percent;
use crate::classify::comm::is_comm_kernel;
use crate::classify::enclosing::{Candidate, innermost_scan};
use crate::classify::rules::Stage;
use crate::classify::{Activity, RankLabel};
use crate::model::{Kernel, ProcessId, StringId};
use std::collections::BTreeMap;

/// How far back PithTrain's innermost-range search looks.
pub const SCAN_LIMIT: usize = 256;

/// Why a PithTrain script would not produce its table.
#[derive(Debug, thiserror::Error)]
pub enum CompatError {
    /// The scripts read one node's export.
    #[error(
        "--compat pithtrain reads exactly one report (PithTrain's scripts take one node's export), \
         got {0}; run once per node, or drop --compat for the merged analysis"
    )]
    NotOneReport(usize),
    /// No NVTX event with a non-negative start.
    #[error("no NVTX event at or after the capture start: no PithTrain rank label to read")]
    NoNvtx,
    /// A pid's first NVTX event is not the rank label.
    #[error(
        "pid {pid}: its first NVTX event (at {start} ns) is `{text}`, not a PithTrain rank label \
         ({why}); show_setup needs the label first (without --compat, nsys-lens finds it anywhere)"
    )]
    NotALabel {
        /// The pid.
        pid: u32,
        /// The event's start.
        start: i64,
        /// Its text.
        text: String,
        /// What is missing.
        why: String,
    },
    /// No overlapped forward+backward chunk range on a rank.
    #[error(
        "pid {0}: no `forward chunk ... backward chunk ...` NVTX range, so no steady-state window \
         (give --start and --end, or drop --compat to fall back to the whole capture)"
    )]
    NoChunk(u32),
    /// The chosen chunk has no end.
    #[error("pid {0}: the median chunk range never ends, so it gives no window")]
    OpenChunk(u32),
    /// Nothing to print.
    #[error("{0}: nothing to report (PithTrain's printer would fail on an empty table)")]
    Empty(&'static str),
}

/// One `show_setup` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// The process.
    pub process: ProcessId,
    /// Its pid.
    pub pid: u32,
    /// The label's raw text.
    pub text: String,
    /// The parsed label.
    pub label: RankLabel,
}

/// `show_setup`: per pid (ascending), every NVTX event at the pid's earliest non-negative start,
/// each of which must be the rank label (ties give several records for one pid).
pub fn setup(activity: &Activity) -> Result<Vec<Setup>, CompatError> {
    let timeline = activity.timeline;
    one_report(activity)?;
    let mut processes: Vec<ProcessId> = (0..timeline.processes.len() as u32)
        .map(ProcessId)
        .collect();
    processes.sort_by_key(|&p| timeline.process(p).pid);
    let mut records = Vec::new();
    for process in processes {
        let pid = timeline.process(process).pid;
        let mut events = activity.nvtx(process).filter(|e| e.start.0 >= 0);
        let Some(first) = events.next() else {
            continue;
        };
        let earliest = std::iter::once(first).chain(events.take_while(|e| e.start == first.start));
        for e in earliest {
            let text = timeline.text(e.text).to_string();
            let label = RankLabel::parse_tokens(&text).map_err(|why| CompatError::NotALabel {
                pid,
                start: e.start.0,
                text: text.clone(),
                why,
            })?;
            records.push(Setup {
                process,
                pid,
                text,
                label,
            });
        }
    }
    if records.is_empty() {
        return Err(CompatError::NoNvtx);
    }
    Ok(records)
}

fn one_report(activity: &Activity) -> Result<(), CompatError> {
    match activity.timeline.reports.len() {
        1 => Ok(()),
        n => Err(CompatError::NotOneReport(n)),
    }
}

/// A `find_window` row: the median overlapped chunk of a pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkWindow {
    /// CPU start, ns.
    pub start: i64,
    /// CPU end, ns.
    pub end: i64,
    /// The range text.
    pub name: String,
}

/// `find_window`: the pid's NVTX events (non-negative start) whose text is `LIKE 'forward
/// chunk%backward chunk%'`, in start order; the one at index n/2.
pub fn find_window(activity: &Activity, setup: &Setup) -> Result<ChunkWindow, CompatError> {
    let timeline = activity.timeline;
    let chunks: Vec<_> = activity
        .nvtx(setup.process)
        .filter(|e| e.start.0 >= 0 && is_overlapped_chunk(timeline.text(e.text)))
        .collect();
    let chosen = chunks
        .get(chunks.len() / 2)
        .ok_or(CompatError::NoChunk(setup.pid))?;
    Ok(ChunkWindow {
        start: chosen.start.0,
        end: chosen.end.ok_or(CompatError::OpenChunk(setup.pid))?.0,
        name: timeline.text(chosen.text).to_string(),
    })
}

/// SQL `text LIKE 'forward chunk%backward chunk%'` (ASCII case-insensitive, `%` spans anything).
pub fn is_overlapped_chunk(text: &str) -> bool {
    const HEAD: &str = "forward chunk";
    const TAIL: &[u8] = b"backward chunk";
    let bytes = text.as_bytes();
    bytes.len() >= HEAD.len()
        && bytes[..HEAD.len()].eq_ignore_ascii_case(HEAD.as_bytes())
        && bytes[HEAD.len()..]
            .windows(TAIL.len())
            .any(|w| w.eq_ignore_ascii_case(TAIL))
}

/// A `classify_streams` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamRow {
    /// Stream id (streams of one id on several devices of the pid are one row, as in the SQL).
    pub stream: u32,
    /// Kernels `LIKE 'nccl%'`.
    pub n_comm: u64,
    /// Other kernels.
    pub n_comp: u64,
    /// Summed duration of the NCCL kernels.
    pub comm_ns: i64,
    /// Summed duration of the others.
    pub comp_ns: i64,
    /// `compute`, `ep_a2a`, `cp_ring`, `pp_p2p`, `unknown` or `mixed`.
    pub purpose: &'static str,
}

/// `classify_streams` for one record over `window` (`[start, end]`, kernels wholly inside).
pub fn classify_streams(activity: &Activity, setup: &Setup, window: (i64, i64)) -> Vec<StreamRow> {
    let view = PidView::new(activity, setup.process, window);
    view.stream_counts()
        .into_iter()
        .map(|(stream, mut row)| {
            if row.n_comp == 0 {
                let labels = view
                    .kernels_on(stream)
                    .flat_map(|k| view.launch_times(k))
                    .map(|t| purpose_of(view.enclosing_text(t)));
                row.purpose = unanimous(labels);
            }
            row
        })
        .collect()
}

/// A `compute_overlap` row.
#[derive(Debug, Clone, PartialEq)]
pub struct OverlapRow {
    /// The stage.
    pub stage: Stage,
    /// Summed uncovered time of its kernels, ns.
    pub exposed_ns: i64,
    /// Summed duration of its kernels, ns (not printed by PithTrain).
    pub comm_ns: i64,
    /// `100 * (comm_ns - exposed_ns) / comm_ns`.
    pub overlap: f64,
    /// Lowest per-kernel overlap % (0 when no kernel has a length).
    pub overlap_min: f64,
    /// Highest per-kernel overlap %.
    pub overlap_max: f64,
}

/// `compute_overlap` for one record over `window`, stages in order.
pub fn compute_overlap(activity: &Activity, setup: &Setup, window: (i64, i64)) -> Vec<OverlapRow> {
    let timeline = activity.timeline;
    let view = PidView::new(activity, setup.process, window);
    let counts = view.stream_counts();
    let compute_streams: Vec<u32> = counts
        .iter()
        .filter(|(_, r)| r.n_comp > 0)
        .map(|(&s, _)| s)
        .collect();
    let comm_streams: Vec<u32> = counts
        .iter()
        .filter(|(_, r)| r.n_comp == 0 && r.n_comm > 0)
        .map(|(&s, _)| s)
        .collect();
    let compute = IntervalSet::from_intervals(
        view.kernels
            .iter()
            .filter(|k| compute_streams.contains(&view.stream_id(k)))
            .filter(|k| !timeline.text(k.short_name).starts_with("nccl"))
            .map(|k| (k.start.0, k.end.0)),
    );
    let mut stages: BTreeMap<Stage, (i64, i64, Vec<f64>)> = BTreeMap::new();
    for k in view
        .kernels
        .iter()
        .filter(|k| comm_streams.contains(&view.stream_id(k)))
    {
        for t in view.launch_times(k) {
            let Some(stage) = view.enclosing_text(t).and_then(Stage::last_in) else {
                continue;
            };
            let (start, end) = (k.start.0, k.end.0);
            let (duration, covered) = (end - start, compute.covered(start, end));
            let (comm, exposed, per_kernel) = stages.entry(stage).or_default();
            *comm += duration;
            *exposed += (duration - covered).max(0);
            if duration > 0 {
                per_kernel.push(percent(covered, duration));
            }
        }
    }
    stages
        .into_iter()
        .map(|(stage, (comm_ns, exposed_ns, per_kernel))| OverlapRow {
            stage,
            exposed_ns,
            comm_ns,
            overlap: percent(comm_ns - exposed_ns, comm_ns),
            overlap_min: per_kernel.iter().copied().reduce(f64::min).unwrap_or(0.0),
            overlap_max: per_kernel.iter().copied().reduce(f64::max).unwrap_or(0.0),
        })
        .collect()
}

/// One pid's kernels inside a window and its candidate enclosing ranges.
struct PidView<'a, 't> {
    activity: &'a Activity<'t>,
    process: ProcessId,
    kernels: Vec<&'t Kernel>,
    candidates: Vec<Candidate>,
    texts: Vec<StringId>,
}

impl<'a, 't> PidView<'a, 't> {
    fn new(activity: &'a Activity<'t>, process: ProcessId, (ws, we): (i64, i64)) -> Self {
        let timeline = activity.timeline;
        let kernels = activity
            .kernels(process)
            .filter(|k| k.start.0 >= ws && k.end.0 <= we)
            .collect();
        let (candidates, texts) = activity
            .nvtx(process)
            .filter(|e| e.start.0 >= 0)
            .filter(|e| {
                let text = timeline.text(e.text);
                !text.is_empty() && !RankLabel::matches_exactly(text) && !text.starts_with("nccl")
            })
            .map(|e| {
                let start = e.start.0;
                let end = e.end.map_or(start, |t| t.0);
                (Candidate { start, end }, e.text)
            })
            .unzip();
        PidView {
            activity,
            process,
            kernels,
            candidates,
            texts,
        }
    }

    fn stream_id(&self, k: &Kernel) -> u32 {
        self.activity.timeline.stream(k.stream).stream
    }

    /// Step 1 of `classify_streams`: counts per stream id (purpose `compute` where any
    /// non-NCCL kernel ran, to be decided otherwise).
    fn stream_counts(&self) -> BTreeMap<u32, StreamRow> {
        let timeline = self.activity.timeline;
        let mut rows: BTreeMap<u32, StreamRow> = BTreeMap::new();
        for k in &self.kernels {
            let row = rows.entry(self.stream_id(k)).or_insert(StreamRow {
                stream: self.stream_id(k),
                n_comm: 0,
                n_comp: 0,
                comm_ns: 0,
                comp_ns: 0,
                purpose: "compute",
            });
            let duration = k.end.0 - k.start.0;
            if is_comm_kernel(timeline, k) {
                row.n_comm += 1;
                row.comm_ns += duration;
            } else {
                row.n_comp += 1;
                row.comp_ns += duration;
            }
        }
        rows
    }

    fn kernels_on(&self, stream: u32) -> impl Iterator<Item = &'t Kernel> + '_ {
        self.kernels
            .iter()
            .copied()
            .filter(move |k| self.stream_id(k) == stream)
    }

    /// `launch_start or start` for each joined runtime row (the SQL join repeats a kernel per
    /// matching row; a missing row or a launch at exactly 0 falls back to the kernel's start).
    fn launch_times(&self, k: &Kernel) -> Vec<i64> {
        let mut times: Vec<i64> = self
            .activity
            .launch_starts(self.process, k.correlation)
            .map(|t| if t.0 == 0 { k.start.0 } else { t.0 })
            .collect();
        if times.is_empty() {
            times.push(k.start.0);
        }
        times
    }

    /// The innermost candidate's text at `t`, by PithTrain's bounded scan.
    fn enclosing_text(&self, t: i64) -> Option<&'t str> {
        let i = innermost_scan(&self.candidates, t, SCAN_LIMIT)?;
        Some(self.activity.timeline.text(self.texts[i]))
    }
}

/// PithTrain's needles, first match wins; no range or no needle is `unknown`.
fn purpose_of(text: Option<&str>) -> &'static str {
    let Some(text) = text else {
        return "unknown";
    };
    let has = |needles: &[&str]| needles.iter().any(|n| text.contains(n));
    if has(&["stage2_f", "stage2_b", "stage4_f", "stage4_b"]) {
        "ep_a2a"
    } else if has(&["stage1_f", "stage1_b"]) {
        "cp_ring"
    } else if has(&["pipeline send/recv"]) {
        "pp_p2p"
    } else {
        "unknown"
    }
}

/// The common label, `mixed` when they differ, `unknown` when there are none.
fn unanimous(mut labels: impl Iterator<Item = &'static str>) -> &'static str {
    match labels.next() {
        None => "unknown",
        Some(first) if labels.all(|l| l == first) => first,
        Some(_) => "mixed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_pattern_is_sqls_like() {
        assert!(is_overlapped_chunk(
            "forward chunk 3 (phase0) backward chunk 1 (phase1)"
        ));
        assert!(is_overlapped_chunk("FORWARD CHUNKbackward Chunk"));
        assert!(!is_overlapped_chunk("forward chunk 3 (phase0)"));
        assert!(!is_overlapped_chunk(
            " forward chunk 3 (phase0) backward chunk 1"
        ));
        assert!(!is_overlapped_chunk("backward chunk 1 (phase1)"));
    }

    #[test]
    fn needles_and_unanimity() {
        assert_eq!(
            purpose_of(Some("layer05_stage5_f_layer06_stage1_f")),
            "cp_ring"
        );
        assert_eq!(purpose_of(Some("layer01.stage4_b")), "ep_a2a");
        assert_eq!(purpose_of(Some("pipeline send/recv")), "pp_p2p");
        assert_eq!(purpose_of(Some("loss1.backward()")), "unknown");
        assert_eq!(purpose_of(None), "unknown");
        assert_eq!(unanimous(["ep_a2a", "ep_a2a"].into_iter()), "ep_a2a");
        assert_eq!(unanimous(["ep_a2a", "unknown"].into_iter()), "mixed");
        assert_eq!(unanimous(std::iter::empty()), "unknown");
    }
}
