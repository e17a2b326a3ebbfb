//! What the inputs were read into, and the measures the commands take from it: every event in
//! memory (the analyses' own functions over the whole timeline), or captures whose events stay
//! sorted under a memory budget (passes over their sorted events, [`captured`]). Both paths give
//! the same results; a command asks [`Loaded`] and does not care which it holds.

use super::captured::{self, BubbleRank, PageMeasures, Span, bubble_ranks};
use crate::analysis::bubbles::{self, StepBubble};
use crate::analysis::kernels::{RankKernels, rank_kernels};
use crate::analysis::mfu::{RankWork, rank_work};
use crate::classify::families::{Families, FamilyCache};
use crate::classify::layout::{self, PipelineLayout};
use crate::classify::window::MeasuredSteps;
use crate::classify::{self, Activity, Rank, RankStreams, RoleRules};
use crate::input::capture::Captures;
use crate::model::{ProcessId, StreamId, Timeline};
use crate::report::RankWindow;
use regex::Regex;

/// What the inputs were read into: every event in memory, or captures whose events stay
/// sorted under a memory budget ([`crate::load::Inputs::captures`]), which `streams`,
/// `overlap`, `collectives`, `kernels`, `idle`, `bubbles`, `metrics`, `mfu`, `critical-path`,
/// `what-if`, the report's page and `compare` read in a few passes ([`captured`]).
#[derive(Clone, Copy)]
pub enum Loaded<'a> {
    /// Every event.
    Whole(&'a Timeline),
    /// Captures read for streaming.
    Captures(&'a Captures),
}

impl<'a> From<&'a Timeline> for Loaded<'a> {
    fn from(timeline: &'a Timeline) -> Self {
        Loaded::Whole(timeline)
    }
}

impl<'a> From<&'a Captures> for Loaded<'a> {
    fn from(captures: &'a Captures) -> Self {
        Loaded::Captures(captures)
    }
}

impl<'a> Loaded<'a> {
    /// The timeline: every event, or the captures' light timeline.
    pub fn timeline(self) -> &'a Timeline {
        match self {
            Loaded::Whole(timeline) => timeline,
            Loaded::Captures(captures) => &captures.light,
        }
    }

    /// The streams of each span's process classified over its window
    /// ([`classify::streams::classify`]); `activity` indexes [`Loaded::timeline`], as in every
    /// method below.
    pub fn classify(
        self,
        activity: &Activity,
        spans: &[Span],
        rules: &RoleRules,
    ) -> crate::nsys::Result<Vec<RankStreams>> {
        Ok(match self {
            Loaded::Whole(_) => (spans.iter())
                .map(|&(process, window)| {
                    classify::streams::classify(activity, process, window, rules)
                })
                .collect(),
            Loaded::Captures(captures) => {
                captured::gather((captures, activity), spans, &[], rules)?.streams
            }
        })
    }

    /// Each window's step ranges ([`classify::window::steps`]; none when it holds none) and
    /// the steps as measured ([`classify::window::measured_steps`]).
    pub fn measured_steps<'w>(
        self,
        activity: &Activity,
        windows: impl Iterator<Item = &'w RankWindow>,
        anchor: Option<&Regex>,
    ) -> crate::nsys::Result<Vec<MeasuredSteps>> {
        let captures = match self {
            Loaded::Whole(_) => {
                let found = |w: &RankWindow| {
                    MeasuredSteps::in_window(activity, w.rank.process, w.bounds, anchor)
                };
                return Ok(windows.map(found).collect());
            }
            Loaded::Captures(captures) => captures,
        };
        let windows: Vec<&RankWindow> = windows.collect();
        let found: Vec<Vec<(i64, i64)>> = (windows.iter())
            .map(|w| classify::window::steps(activity, w.rank.process, w.bounds, anchor))
            .collect();
        // A step that is the window's own range has the window's projection, when known.
        let known = |w: &RankWindow, range: (i64, i64)| {
            let gpu = w.window.gpu.map(|(s, e)| (s.0, e.0));
            gpu.filter(|_| (w.window.start.0, w.window.end.0) == range)
        };
        let extents: Vec<Span> = (windows.iter().zip(&found))
            .flat_map(|(w, ranges)| {
                let unknown = ranges.iter().filter(move |&&r| known(w, r).is_none());
                unknown.map(move |&r| (w.rank.process, r))
            })
            .collect();
        let mut projected = captured::projections((captures, activity), &extents)?.into_iter();
        Ok((windows.iter().zip(found))
            .map(|(w, ranges)| {
                let gpu: Vec<Option<(i64, i64)>> = (ranges.iter())
                    .map(|&r| known(w, r).or_else(|| projected.next().flatten()))
                    .collect();
                MeasuredSteps {
                    measured: classify::window::measured_steps(&ranges, &gpu),
                    ranges,
                }
            })
            .collect())
    }

    /// Each span's kernel breakdown ([`rank_kernels`]), span `i` with its streams classified
    /// as `classified[i]`.
    pub fn kernels(
        self,
        activity: &Activity,
        spans: &[Span],
        (classified, rules): (&[RankStreams], &RoleRules),
        families: &Families,
    ) -> crate::nsys::Result<Vec<RankKernels>> {
        Ok(match self {
            Loaded::Whole(timeline) => {
                let mut cache = FamilyCache::new(families, timeline);
                (spans.iter().zip(classified))
                    .map(|(&at, comm)| rank_kernels(activity, at, (comm, rules), &mut cache))
                    .collect()
            }
            Loaded::Captures(captures) => {
                let both = (captures, activity);
                captured::rank_kernels(both, spans, (classified, rules), families)?
            }
        })
    }

    /// Each rank's bubble per step ([`bubbles::rank_bubbles`]): of `ranks[i]`, (process, its
    /// steps, its streams classified over a window that holds them).
    pub fn bubbles(
        self,
        activity: &Activity,
        ranks: &[BubbleRank],
        rules: &RoleRules,
    ) -> crate::nsys::Result<Vec<Vec<StepBubble>>> {
        Ok(match self {
            Loaded::Whole(_) => (ranks.iter())
                .map(|&(p, steps, streams)| {
                    bubbles::rank_bubbles(activity, p, steps, streams, rules)
                })
                .collect(),
            Loaded::Captures(captures) => captured::bubbles((captures, activity), ranks, rules)?,
        })
    }

    /// The work per step of each of `processes` ([`rank_work`]): process `i` over the step
    /// ranges of `found[i]`, its streams classified as `classified[i]`.
    pub fn work(
        self,
        activity: &Activity,
        processes: &[ProcessId],
        (found, classified): (&[MeasuredSteps], &[RankStreams]),
        rules: &RoleRules,
        families: &Families,
    ) -> crate::nsys::Result<Vec<RankWork>> {
        Ok(match self {
            Loaded::Whole(timeline) => {
                let mut cache = FamilyCache::new(families, timeline);
                (processes.iter().zip(found).zip(classified))
                    .map(|((&process, found), comm)| {
                        let steps = (process, &found.ranges[..]);
                        rank_work(activity, steps, (comm, rules), &mut cache)
                    })
                    .collect()
            }
            Loaded::Captures(captures) => {
                // The windows do not matter: each operation counts toward the step it was
                // launched in.
                let whole = (i64::MIN, i64::MAX);
                let spans: Vec<Span> = processes.iter().map(|&p| (p, whole)).collect();
                let both = (captures, activity);
                captured::rank_work(both, &spans, (found, classified), rules, families)?
            }
        })
    }

    /// What the report's page measures of each window's rank: its kernel breakdown over
    /// `windows[i]` ([`Loaded::kernels`], its streams classified as `classified[i]`), its
    /// bubble in each step of `found[i]` ([`Loaded::bubbles`]) and its work per step of
    /// `found[i]` ([`Loaded::work`]); from captures in one pass over the calls, one over the
    /// graph launches and one over the GPU operations.
    pub fn page_measures(
        self,
        activity: &Activity,
        windows: &[Span],
        (classified, found): (&[RankStreams], &[MeasuredSteps]),
        rules: &RoleRules,
        families: &Families,
    ) -> crate::nsys::Result<PageMeasures> {
        let Loaded::Captures(captures) = self else {
            let processes: Vec<ProcessId> = windows.iter().map(|&(p, _)| p).collect();
            let ranks = bubble_ranks(&processes, found, classified);
            return Ok(PageMeasures {
                kernels: self.kernels(activity, windows, (classified, rules), families)?,
                bubbles: self.bubbles(activity, &ranks, rules)?,
                work: self.work(activity, &processes, (found, classified), rules, families)?,
            });
        };
        let both = (captures, activity);
        captured::page_measures(both, windows, (classified, found), rules, families)
    }

    /// Each rank's pipeline coordinate ([`layout::pipeline_coords`]); `measured` holds the
    /// ranks' streams classified over their windows, reused where those are the whole transfer
    /// windows (`--whole`).
    pub fn pipeline(
        self,
        activity: &Activity,
        ranks: &[Rank],
        measured: &[(RankWindow, RankStreams)],
        rules: &RoleRules,
    ) -> crate::nsys::Result<PipelineLayout> {
        if let Loaded::Whole(_) = self {
            return Ok(layout::pipeline_coords(activity, ranks, rules));
        }
        layout::pipeline_layout(ranks, || {
            let spans: Vec<Span> = (ranks.iter())
                .map(|r| (r.process, layout::transfer_window(activity, r)))
                .collect();
            let windows = measured.iter().map(|(w, _)| (w.rank.process, w.bounds));
            if windows.eq(spans.iter().copied()) {
                let transfers = measured.iter().map(|(_, s)| layout::transfers(s, rules));
                return Ok(transfers.collect());
            }
            let streams = self.classify(activity, &spans, rules)?;
            Ok(streams
                .iter()
                .map(|s| layout::transfers(s, rules))
                .collect())
        })
    }

    /// The kernels of each of `streams` that meet its window, in start order, (start, end) ns.
    pub fn kernel_spans(
        self,
        activity: &Activity,
        streams: &[(StreamId, (i64, i64))],
    ) -> crate::nsys::Result<Vec<Vec<(i64, i64)>>> {
        let Loaded::Captures(captures) = self else {
            let meets = |k: &&crate::model::Kernel, &(stream, (start, end)): &(StreamId, _)| {
                k.stream == stream && k.end.0 > start && k.start.0 < end
            };
            let kernels = &activity.timeline.kernels;
            return Ok((streams.iter())
                .map(|s| {
                    (kernels.iter().filter(|k| meets(k, s)))
                        .map(|k| (k.start.0, k.end.0))
                        .collect()
                })
                .collect());
        };
        captured::kernel_spans((captures, activity), streams)
    }
}
