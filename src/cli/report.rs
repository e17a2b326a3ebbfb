//! `nsys-lens report REPORT... [-- B...] [-o FILE] [WINDOW]`

use super::Outcome;
use super::analysis::WindowArgs;
use super::inputs::{Align, Inputs};
use nsys_lens::analysis::IntervalSet;
use nsys_lens::analysis::bubbles::{ideal_pct, micro_batches, rank_bubbles};
use nsys_lens::analysis::kernels::rank_kernels;
use nsys_lens::analysis::overlap::rank_exposure;
use nsys_lens::classify::families::{Families, FamilyCache};
use nsys_lens::classify::{self, Activity, Rank, RankStreams, Role, RoleRules, layout};
use nsys_lens::model::Timeline;
use nsys_lens::query::Selection;
use nsys_lens::report::RankWindow;
use nsys_lens::report::html::{RankView, RunView, Segment, StripRow, page};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

/// Ranks drawn in the timeline strip.
const STRIP_RANKS: usize = 4;

/// Options of `report`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens report node0.sqlite node1.sqlite -o run.html    one page: ranks, overlap, families, bubbles
  nsys-lens report fp32/ -- bf16/ -o compare.html           two runs side by side")]
pub struct Args {
    /// The run's reports (one per node), or directories of them.
    #[arg(required = true, value_name = "REPORT")]
    a: Vec<PathBuf>,

    /// A second run to show beside the first, after `--`.
    #[arg(last = true, value_name = "B")]
    b: Vec<PathBuf>,

    /// The HTML file to write (default: the first report's stem, `.html`).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,

    /// Where .nsys-rep inputs are exported to (default: beside each report).
    #[arg(long, value_name = "DIR")]
    export_dir: Option<PathBuf>,

    /// Print nothing but errors.
    #[arg(short, long)]
    quiet: bool,

    /// How hosts' clocks are put together (see `info --help`).
    #[arg(long, value_enum, default_value_t)]
    align: Align,

    #[command(flatten)]
    window: WindowArgs,
}

/// Writes the page.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let path = args.output.clone().unwrap_or_else(|| {
        let stem = args.a[0].file_stem().unwrap_or_default().to_os_string();
        PathBuf::from(stem).with_extension("html")
    });
    let outputs = [path.clone()];
    args.inputs(&args.b).check_outputs(&outputs)?;
    args.inputs(&args.a).check_outputs(&outputs)?;
    let mut runs = vec![args.view(&args.a)?];
    if !args.b.is_empty() {
        runs.push(args.view(&args.b)?);
    }
    let mut output = nsys_lens::output::Output::create(&path)?;
    output.write_all(page(&runs).as_bytes())?;
    output.commit()?;
    if !args.quiet {
        eprintln!("wrote {}", path.display());
    }
    Ok(Outcome::Done)
}

impl Args {
    /// The inputs of one run.
    fn inputs(&self, reports: &[PathBuf]) -> Inputs {
        Inputs {
            reports: reports.to_vec(),
            export_dir: self.export_dir.clone(),
            quiet: self.quiet,
            align: self.align,
            threads: None,
        }
    }

    /// One run, computed by the analysis code.
    fn view(&self, reports: &[PathBuf]) -> anyhow::Result<RunView> {
        let (timeline, alignment) = self.inputs(reports).load_aligned()?;
        let activity = Activity::new(&timeline);
        let selection = Selection {
            window: self.window.options(),
            ..Selection::default()
        };
        let rules = &selection.rules;
        let classified = selection.classified(&activity)?;
        let ranks: Vec<Rank> = classified.iter().map(|(w, _)| w.rank).collect();
        let families = Families::default();
        let mut cache = FamilyCache::new(&families, &timeline);
        let pipeline = layout::pipeline_coords(&activity, &ranks, rules);
        let mut views = Vec::new();
        for ((w, streams), coord) in classified.iter().zip(&pipeline.coords) {
            let pp = coord.map(|(c, _)| c.size);
            views.push(rank_view(&activity, (w, streams, pp), rules, &mut cache));
        }
        let mut summary = vec![
            hosts_line(&timeline),
            format!("{} rank(s); each measured over its own window", ranks.len()),
        ];
        summary.push(match alignment {
            Some(a) => format!(
                "clocks aligned from {} collective(s); end spread {} ns before, {} ns after",
                a.instances, a.spread_before_ns, a.spread_after_ns
            ),
            None => "clocks: session starts (use --align collectives to correct them)".to_string(),
        });
        let (strip, strip_ns) = strip(&timeline, &classified, rules);
        Ok(RunView {
            title: reports
                .iter()
                .map(|p| relative(p).display().to_string())
                .collect::<Vec<_>>()
                .join(" "),
            summary,
            ranks: views,
            strip,
            strip_ns,
        })
    }
}

/// `2 host(s): node0, node1`, the list cut after a few hosts.
fn hosts_line(timeline: &Timeline) -> String {
    const SHOWN: usize = 8;
    let names: Vec<&str> = timeline.hosts.iter().map(|h| h.name.as_str()).collect();
    let more = names.len().saturating_sub(SHOWN);
    let mut line = format!(
        "{} host(s): {}",
        names.len(),
        names[..names.len().min(SHOWN)].join(", ")
    );
    if more > 0 {
        line += &format!(" and {more} more");
    }
    line
}

/// A path relative to the working directory when it lies under it (a page's title should not
/// show where the user's home is).
fn relative(path: &std::path::Path) -> PathBuf {
    let cwd = std::env::current_dir().ok();
    let absolute = std::fs::canonicalize(path).ok();
    match (cwd, absolute) {
        (Some(cwd), Some(abs)) => abs
            .strip_prefix(&cwd)
            .map_or_else(|_| path.to_path_buf(), std::path::Path::to_path_buf),
        _ => path.to_path_buf(),
    }
}

fn window_name(w: &RankWindow) -> String {
    if w.window.name.is_empty() {
        format!("{:?}", w.window.source).to_lowercase()
    } else {
        format!("`{}`", w.window.name)
    }
}

/// A rank's bar, overlap rows, families and bubble.
fn rank_view(
    activity: &Activity,
    (w, streams, pp): (&RankWindow, &RankStreams, Option<u32>),
    rules: &RoleRules,
    cache: &mut FamilyCache,
) -> RankView {
    let timeline = activity.timeline;
    let process = timeline.process(w.rank.process);
    let name = format!(
        "rank {} · node {} · pid {}",
        w.rank.rank,
        timeline.host(process.host).name,
        process.pid
    );
    let (bar, hidden_ns) = bar(w, streams, rules);
    let overlap = rank_exposure(streams, rules)
        .into_iter()
        .map(|((stage, role), e)| {
            let role = role.label();
            (
                stage.to_string(),
                role,
                e.comm_ns,
                e.exposed_wall_ns,
                e.overlap_pct,
            )
        })
        .collect();
    let mut steps = classify::window::steps(activity, w.rank.process, w.bounds, None);
    // 1F1B's ideal describes whole steps of a one-directional schedule (not PithTrain's
    // DualPipeV, whose ranks carry the label), as in `bubbles`.
    let formula_applies = !steps.is_empty() && w.rank.label.is_none();
    if steps.is_empty() {
        steps.push(w.bounds);
    }
    let n = steps.len() as i64;
    let at = (w.rank.process, w.bounds);
    let kernels = rank_kernels(activity, at, (streams, rules), cache);
    let families = kernels
        .families
        .iter()
        .map(|f| (f.family.clone(), f.time_ns / n))
        .collect();
    let bubbles = rank_bubbles(activity, w.rank.process, &steps, streams, rules);
    let mean = bubbles.iter().map(|b| b.bubble_pct()).sum::<f64>() / bubbles.len().max(1) as f64;
    let ideal = formula_applies
        .then(|| ideal_pct(pp?, micro_batches(activity, w.rank.process, steps[0])?))
        .flatten();
    RankView {
        name,
        window: (w.bounds.0, w.bounds.1, window_name(w)),
        bar,
        hidden_ns,
        overlap,
        families,
        bubble: Some((mean, ideal)),
        steps: bubbles
            .iter()
            .map(|b| (b.step_ns, b.bubble_pct()))
            .collect(),
    }
}

/// Compute, exposed communication per role (each exposed moment counted once, for the first
/// role in name order), barrier communication, and idle; they add up to the window.
fn bar(w: &RankWindow, streams: &RankStreams, rules: &RoleRules) -> (Vec<Segment>, i64) {
    let compute = &streams.compute;
    let mut by_role: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    let mut barrier = Vec::new();
    for k in &streams.comm {
        if k.is_barrier() {
            barrier.push((k.start, k.end));
        } else {
            by_role
                .entry(k.role_name(rules).to_string())
                .or_default()
                .push((k.start, k.end));
        }
    }
    let comm = IntervalSet::from_intervals(by_role.values().flatten().copied());
    let hidden = comm.intersection(compute).measure();
    let mut covered = compute.clone();
    let mut segments = vec![Segment {
        label: "compute".into(),
        key: "compute".into(),
        ns: compute.measure(),
    }];
    for (role, spans) in by_role {
        let set = IntervalSet::from_intervals(spans);
        let exposed = set.difference(&covered).measure();
        covered = covered.union(&set);
        segments.push(Segment {
            label: format!("exposed {role}"),
            key: role,
            ns: exposed,
        });
    }
    let barrier = IntervalSet::from_intervals(barrier);
    segments.push(Segment {
        label: "barrier".into(),
        key: "barrier".into(),
        ns: barrier.difference(&covered).measure(),
    });
    covered = covered.union(&barrier);
    let span = w.bounds.1 - w.bounds.0;
    segments.push(Segment {
        label: "idle".into(),
        key: "idle".into(),
        ns: span - covered.measure(),
    });
    (segments, hidden)
}

/// The streams of the first ranks over their windows.
fn strip(
    timeline: &Timeline,
    classified: &[(RankWindow, RankStreams)],
    rules: &RoleRules,
) -> (Vec<StripRow>, i64) {
    let mut rows = Vec::new();
    let mut longest = 0;
    for (w, streams) in classified.iter().take(STRIP_RANKS) {
        let (start, end) = w.bounds;
        longest = longest.max(end - start);
        for s in &streams.streams {
            let stream = timeline.stream(s.stream);
            let spans = timeline
                .kernels
                .iter()
                .filter(|k| k.stream == s.stream && k.end.0 > start && k.start.0 < end)
                .map(|k| (k.start.0.max(start) - start, k.end.0.min(end) - start))
                .collect();
            let role = s.role.name(rules).to_string();
            let key = if s.role == Role::Compute {
                "compute".to_string()
            } else {
                role.clone()
            };
            rows.push(StripRow {
                name: format!(
                    "rank {} · GPU {} · stream {} · {role}",
                    w.rank.rank,
                    timeline.gpu(stream.gpu).device,
                    stream.stream
                ),
                key,
                spans,
            });
        }
    }
    (rows, longest)
}
