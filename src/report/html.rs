//! `report`: one self-contained HTML page (inline CSS and SVG, no script) that presents what the
//! analyses compute: the run, each rank's step as a stacked bar, the overlap per stage with the
//! worst cells marked, kernel families per GPU per step, the pipeline bubble, and a timeline
//! strip of the steady-state window. The numbers come from the same analysis code as the CLI
//! tables; this module only draws them.

use crate::analysis::collectives::RankWaits;
use crate::output::html_escape as esc;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One segment of a rank's bar.
#[derive(Debug, Clone)]
pub struct Segment {
    /// What it is (`compute`, `exposed ep_a2a`, `barrier`, `idle`).
    pub label: String,
    /// Its colour key (a role, `compute`, `barrier`, `idle`).
    pub key: String,
    /// Length, ns.
    pub ns: i64,
}

/// One row of the timeline strip: a stream's operations inside the window.
#[derive(Debug, Clone)]
pub struct StripRow {
    /// `rank 0 · GPU 0 · stream 20 · ep_a2a`.
    pub name: String,
    /// Colour key (the stream role).
    pub key: String,
    /// Operations, ns relative to the window start.
    pub spans: Vec<(i64, i64)>,
}

/// One rank as the page shows it.
#[derive(Debug, Clone)]
pub struct RankView {
    /// `rank 3 · node n1 · pid 42`.
    pub name: String,
    /// The window: start, end (ns on the merged clock) and how it was chosen.
    pub window: (i64, i64, String),
    /// The bar: segments adding up to the window.
    pub bar: Vec<Segment>,
    /// Hidden communication (inside the compute segment), ns.
    pub hidden_ns: i64,
    /// Overlap rows: stage, role, communication ns, exposed (wall) ns, overlap %.
    pub overlap: Vec<(String, String, i64, i64, f64)>,
    /// Kernel families: family, time per step ns.
    pub families: Vec<(String, i64)>,
    /// Mean bubble % over the steps, and the ideal 1F1B % when it applies.
    pub bubble: Option<(f64, Option<f64>)>,
    /// Each step of the window: its span (ns) and bubble %.
    pub steps: Vec<(i64, f64)>,
    /// FLOPs per step and the MFU (None without a known peak), when its kernels have FLOPs.
    pub mfu: Option<(f64, Option<f64>)>,
    /// The families its FLOPs went to, with their FLOPs per step, achieved TFLOP/s, MFU and
    /// roofline bound.
    pub flops_by_family: Vec<FamilySummary>,
    /// Whether it is a stage of a pipeline (else its bubble is idle time, and said so).
    pub pipeline: bool,
    /// Its collectives inside its window, as `collectives --by rank` counts them.
    pub waits: RankWaits,
    /// Its wait in each of [`CollectivesView::columns`], % of the instance's skew (100: it
    /// arrived first; 0: last), when it took part.
    pub instance_waits: Vec<Option<f64>>,
}

impl RankView {
    /// `rank 3`.
    fn short(&self) -> &str {
        self.name.split(" · ").next().unwrap_or(&self.name)
    }

    fn window_ns(&self) -> i64 {
        self.window.1 - self.window.0
    }
}

/// One step's critical path as the page shows it.
#[derive(Debug, Clone)]
pub struct PathView {
    /// `step 3 (median)`.
    pub title: String,
    /// The step's time, ns.
    pub step_ns: i64,
    /// The ranks on the path, from the step's end back.
    pub ranks: Vec<u32>,
    /// The longest parts: rank, category, name, ns.
    pub parts: Vec<(u32, String, String, i64)>,
}

/// A fix the page weighs: a `what-if` change and the steps' time a replay with it predicts.
#[derive(Debug, Clone, PartialEq)]
pub struct FixView {
    /// The change as `--change` spells it (`straggler=median`).
    pub change: String,
    /// What it changes, in words.
    pub meaning: String,
    /// The steps' measured time, summed, ns.
    pub measured_ns: i64,
    /// The steps' time the replay predicts with the change, summed, ns.
    pub predicted_ns: i64,
}

/// One run.
#[derive(Debug, Clone)]
pub struct RunView {
    /// What was read (files, as given or relative to the working directory).
    pub title: String,
    /// Lines about hosts, ranks, clock alignment.
    pub summary: Vec<String>,
    /// Ranks, in rank order.
    pub ranks: Vec<RankView>,
    /// Timeline strip of the ranks' steady-state windows (every rank up to [`MANY_RANKS`], else
    /// one per node).
    pub strip: Vec<StripRow>,
    /// Length of the strip's window, ns.
    pub strip_ns: i64,
    /// The critical path of the median and the longest step.
    pub paths: Vec<PathView>,
    /// The fixes that would buy the most, best first (at most three).
    pub fixes: Vec<FixView>,
    /// The collectives matched across its ranks inside their windows.
    pub collectives: CollectivesView,
}

/// One communicator's skews, as the page lists them.
#[derive(Debug, Clone, Default)]
pub struct CommunicatorSkew {
    /// `c0`, as `collectives` names it.
    pub name: String,
    /// Its collective (`nccl:AllReduce`).
    pub op: String,
    /// Its members' ranks.
    pub members: Vec<u32>,
    /// Its instances inside the windows.
    pub instances: usize,
    /// Skew median and largest, ns.
    pub skew: (i64, i64),
}

/// A run's collectives as the page shows them (each rank's share is in [`RankView::waits`]).
#[derive(Debug, Clone, Default)]
pub struct CollectivesView {
    /// Instances matched inside the ranks' windows.
    pub instances: usize,
    /// Their communicators.
    pub communicators: usize,
    /// The skew (last minus first arrival) of the instances: median and largest, ns.
    pub skew: Option<(i64, i64)>,
    /// Per communicator with instances inside the windows: its name (`c0`), collective,
    /// members' ranks, instances, and skew median and largest, ns.
    pub communicator_skews: Vec<CommunicatorSkew>,
    /// The instances of largest skew, in time order, as the wait heatmap's columns
    /// (`c0 #3`: communicator 0, its fourth instance); each rank's cells are its
    /// [`RankView::instance_waits`].
    pub columns: Vec<String>,
}

/// Above this many ranks, distributions and heatmaps replace the per-rank rows, which move
/// into collapsible sections.
pub const MANY_RANKS: usize = 16;

/// What every run of the page is drawn to, so that two runs side by side compare: lengths and
/// colours.
#[derive(Debug, Clone, Copy)]
struct Scale<'c> {
    /// The longest rank window, ns.
    window_ns: i64,
    /// The longest strip, ns.
    strip_ns: i64,
    /// Each role's colour.
    colours: &'c Colours,
}

/// Colours of the roles and segment keys everyone knows.
const FIXED_COLOURS: [(&str, &str); 8] = [
    ("compute", "#4c78a8"),
    ("ep_a2a", "#f58518"),
    ("cp_ring", "#e45756"),
    ("pp_p2p", "#72b7b2"),
    ("barrier", "#b279a2"),
    ("copy", "#9d755d"),
    ("idle", "#d9d9d9"),
    ("mixed", "#eeca3b"),
];

/// Colours for every other role (`tp_comm`, `fsdp_ag`, `nccl:AllReduce`, a rule file's own),
/// none of them a fixed one.
const PALETTE: [&str; 12] = [
    "#54a24b", "#ff9da6", "#17becf", "#bcbd22", "#9467bd", "#8c6d31", "#637939", "#e7969c",
    "#393b79", "#ad494a", "#7b4173", "#3182bd",
];

/// One colour per role or segment key across the page: the usual ones fixed, every other one
/// its own from [`PALETTE`], in the order of their names (the palette repeats only past twelve
/// such roles).
#[derive(Debug, Clone, Default)]
struct Colours(BTreeMap<String, &'static str>);

impl Colours {
    /// The colours of the keys `runs` draw.
    fn new(runs: &[RunView]) -> Colours {
        let keys: std::collections::BTreeSet<&str> = (runs.iter())
            .flat_map(|run| {
                let bars = run
                    .ranks
                    .iter()
                    .flat_map(|r| r.bar.iter().map(|s| s.key.as_str()));
                bars.chain(run.strip.iter().map(|r| r.key.as_str()))
            })
            .collect();
        let mut palette = PALETTE.iter().cycle();
        let colours = (keys.into_iter())
            .map(|key| {
                let fixed = FIXED_COLOURS.iter().find(|(k, _)| *k == key);
                let colour = fixed.map_or_else(|| *palette.next().expect("cycles"), |f| f.1);
                (key.to_string(), colour)
            })
            .collect();
        Colours(colours)
    }

    /// The colour of `key`.
    fn of(&self, key: &str) -> &'static str {
        self.0.get(key).copied().unwrap_or(PALETTE[0])
    }
}

fn ms(ns: i64) -> String {
    super::human_duration(ns)
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}\
h1{font-size:22px}h2{font-size:18px;margin-top:28px}h3{font-size:15px}\
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}\
th{background:#f3f3f3}td.l,th.l{text-align:left}.worst{background:#f8d0d0;font-weight:bold}\
.runs{display:flex;gap:32px;align-items:flex-start}.run{flex:1;min-width:0}\
svg{max-width:100%;height:auto}details{margin:8px 0}summary{cursor:pointer;color:#335}\
.note{color:#555;font-size:13px}.verdict{font-size:15px}\
.legend span{display:inline-block;margin-right:12px}.sw{display:inline-block;width:12px;height:12px;vertical-align:middle;margin-right:4px}\
footer{margin-top:32px;color:#777;font-size:12px}";

/// The whole page for one run, or two runs side by side (drawn to one scale, with a table
/// of their differences).
pub fn page(runs: &[RunView]) -> String {
    let mut out = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = write!(
        out,
        "<title>nsys-lens report: {}</title><style>{STYLE}</style></head><body>",
        esc(&runs
            .iter()
            .map(|r| r.title.as_str())
            .collect::<Vec<_>>()
            .join(" vs "))
    );
    out += "<h1>nsys-lens report</h1>";
    let colours = Colours::new(runs);
    let scale = Scale {
        colours: &colours,
        window_ns: runs
            .iter()
            .flat_map(|r| r.ranks.iter().map(RankView::window_ns))
            .max()
            .unwrap_or(1)
            .max(1),
        strip_ns: runs.iter().map(|r| r.strip_ns).max().unwrap_or(1).max(1),
    };
    if let [a, b] = runs {
        differences(&mut out, a, b);
    }
    out += "<div class=\"runs\">";
    for run in runs {
        out += "<div class=\"run\">";
        run_section(&mut out, run, scale);
        out += "</div>";
    }
    out += "</div><footer>Generated by nsys-lens. Every number on this page is computed by the \
            same code as the <code>overlap</code>, <code>kernels</code> and <code>bubbles</code> \
            tables (<code>nsys-lens --help</code>).</footer></body></html>\n";
    out
}

fn run_section(out: &mut String, run: &RunView, scale: Scale) {
    let _ = write!(out, "<h2>{}</h2><ul>", esc(&run.title));
    for line in &run.summary {
        let _ = write!(out, "<li>{}</li>", esc(line));
    }
    out.push_str("</ul>");
    verdict(out, run);
    collectives(out, run);
    if run.ranks.len() > MANY_RANKS {
        windows_summary(out, run);
        distribution(out, run);
        heatmaps(out, run);
        collapsed(out, "Per-rank windows", |out| windows_list(out, run));
        collapsed(out, "Per-rank bars", |out| bars(out, run, scale));
        collapsed(out, "Per-rank overlap per stage", |out| {
            overlap_grid(out, run)
        });
        collapsed(out, "Per-rank kernel families", |out| {
            families_by_rank(out, run)
        });
        collapsed(out, &format!("Per-rank {}", bubble_title(run)), |out| {
            bubbles(out, run)
        });
        collapsed(out, "Per-rank MFU", |out| mfu(out, run));
    } else {
        windows_list(out, run);
        bars(out, run, scale);
        overlap_tables(out, run);
        families(out, run);
        mfu(out, run);
        bubbles(out, run);
        step_view(out, run);
    }
    critical_paths(out, run);
    strip(out, run, scale);
}

/// A rank's share of its window in the segments `keep` picks, %.
fn share(rank: &RankView, keep: impl Fn(&Segment) -> bool) -> f64 {
    let ns: i64 = rank.bar.iter().filter(|s| keep(s)).map(|s| s.ns).sum();
    100.0 * ns as f64 / rank.window_ns().max(1) as f64
}

/// The upper median of some shares, %.
fn median_share(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

/// The run in one line, each number from the sections below: the median step, the mean MFU,
/// the median rank's exposed communication and bubble (or GPU idle), the rank whose window
/// went least to compute, with what took most of the rest, and the fix that would buy most.
fn verdict(out: &mut String, run: &RunView) {
    let mut parts = Vec::new();
    let mut steps: Vec<i64> = (run.ranks.iter())
        .flat_map(|r| r.steps.iter().map(|s| s.0))
        .collect();
    if let Some(step) = crate::analysis::upper_median(&mut steps) {
        parts.push(format!("median step {}", ms(step)));
    }
    let mfus: Vec<f64> = run.ranks.iter().filter_map(|r| r.mfu?.1).collect();
    if !mfus.is_empty() {
        parts.push(format!(
            "MFU {:.1}%",
            mfus.iter().sum::<f64>() / mfus.len() as f64
        ));
    }
    let exposed = run
        .ranks
        .iter()
        .map(|r| share(r, |s| s.label.starts_with("exposed ")));
    if let Some(e) = median_share(exposed.collect()) {
        parts.push(format!("exposed communication {e:.1}% of the window"));
    }
    if let Some(b) = median_share(run.ranks.iter().filter_map(|r| Some(r.bubble?.0)).collect()) {
        parts.push(format!("{} {b:.1}%", bubble_title(run)));
    }
    let compute = |r: &RankView| share(r, |s| s.key == "compute");
    let worst = run
        .ranks
        .iter()
        .min_by(|a, b| compute(a).total_cmp(&compute(b)));
    let lost = worst.and_then(|r| {
        let most = r
            .bar
            .iter()
            .filter(|s| s.key != "compute")
            .max_by_key(|s| s.ns)?;
        Some((r, most))
    });
    if let Some((r, most)) = lost.filter(|(r, _)| run.ranks.len() > 1 && compute(r) < 100.0) {
        let whole = 100.0 * most.ns as f64 / r.window_ns().max(1) as f64;
        parts.push(format!(
            "least compute: {} ({:.1}% of its window; {} {whole:.1}%)",
            r.short(),
            compute(r),
            most.label
        ));
    }
    if let Some(fix) = run.fixes.first() {
        let gain = 100.0 * (fix.measured_ns - fix.predicted_ns) as f64 / fix.measured_ns as f64;
        parts.push(format!(
            "best fix: {} ({gain:.1}% shorter steps)",
            fix.meaning
        ));
    }
    if parts.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<p class=\"verdict\"><b>In short:</b> {} (medians over the ranks, each over its \
         window).</p>",
        esc(&parts.join("; "))
    );
}

/// The collectives and who kept the others waiting: a line naming the rank (and host) last
/// most often and the skew, and each rank's instances, times last, time waited and time it
/// made the others wait.
fn collectives(out: &mut String, run: &RunView) {
    let c = &run.collectives;
    let Some((median, max)) = c.skew else {
        return;
    };
    let _ = write!(
        out,
        "<h3>Collectives and stragglers</h3><p>{} collective instance(s) in {} communicator(s) \
         inside the windows; skew (last minus first arrival) median {}, largest {}",
        c.instances,
        c.communicators,
        ms(median),
        ms(max)
    );
    let last = run
        .ranks
        .iter()
        .max_by_key(|r| (r.waits.times_last, r.waits.caused_ns));
    if let Some(r) = last.filter(|r| r.waits.times_last > 0) {
        let _ = write!(
            out,
            "; arrived last most often: {} ({} of {} instances, the others waited {} for it)",
            esc(&r.name),
            r.waits.times_last,
            c.instances,
            ms(r.waits.caused_ns)
        );
    }
    out.push_str(
        ". Every instance: <code>nsys-lens collectives</code>; per rank: <code>nsys-lens \
         collectives --by rank</code>.</p>",
    );
    if c.communicator_skews.len() > 1 {
        communicator_skews(out, &c.communicator_skews);
    }
    heatmap(
        out,
        (
            "Who waited in the collectives of largest skew",
            "collectives",
        ),
        &c.columns,
        run,
        |r, column| r.instance_waits.get(column).copied().flatten(),
    );
    out.push_str(
        "<p class=\"note\">Each cell: the rank's wait as a share of the instance's skew (red: \
         it arrived first and waited it all; white: it arrived last).</p>",
    );
    if run.ranks.len() > MANY_RANKS {
        return;
    }
    out.push_str(
        "<table><tr><th class=\"l\">rank</th><th>instances</th><th>last</th><th>waited</th>\
         <th>others waited for it</th></tr>",
    );
    for r in &run.ranks {
        let w = &r.waits;
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(r.short()),
            w.instances,
            w.times_last,
            ms(w.waited_ns),
            ms(w.caused_ns)
        );
    }
    out.push_str("</table>");
}

/// The skew of each communicator's instances: where the waiting happens.
fn communicator_skews(out: &mut String, skews: &[CommunicatorSkew]) {
    out.push_str(
        "<table><tr><th class=\"l\">communicator</th><th class=\"l\">collective</th>\
         <th class=\"l\">ranks</th><th>instances</th><th>median skew</th><th>largest skew</th>\
         </tr>",
    );
    for c in skews {
        let ranks: Vec<String> = c.members.iter().map(u32::to_string).collect();
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.name),
            esc(&c.op),
            esc(&ranks.join(" ")),
            c.instances,
            ms(c.skew.0),
            ms(c.skew.1)
        );
    }
    out.push_str("</table>");
}

/// One family's work over a rank's steps, as the report shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct FamilySummary {
    /// The family.
    pub family: String,
    /// FLOPs per step.
    pub flops_per_step: f64,
    /// TFLOP/s while its kernels ran.
    pub tflops: f64,
    /// Its FLOPs over the steps' time at its precision's peak, %, when the GPU is known.
    pub mfu_pct: Option<f64>,
    /// Its roofline bound, when its bytes and the GPU are known.
    pub bound: Option<&'static str>,
}

/// FLOPs per step and MFU per rank, where its kernels have FLOPs.
fn mfu(out: &mut String, run: &RunView) {
    if run.ranks.iter().all(|r| r.mfu.is_none()) {
        return;
    }
    out.push_str(
        "<h3>MFU</h3><p>FLOPs from the shapes torch.profiler records, over each step and the \
         GPU's peak (per step and family: <code>nsys-lens mfu</code>).</p><table><tr>\
         <th class=\"l\">rank</th><th>FLOPs per step</th><th>MFU</th></tr>",
    );
    for r in &run.ranks {
        let Some((flops, mfu)) = r.mfu else { continue };
        let mfu = mfu.map_or("-".to_string(), |m| format!("{m:.1}%"));
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td>{flops:.3e}</td><td>{mfu}</td></tr>",
            esc(r.short())
        );
    }
    out.push_str(
        "</table><table><tr><th class=\"l\">rank</th><th class=\"l\">family</th>\
         <th>FLOPs per step</th><th>TFLOP/s while it ran</th><th>MFU</th>\
         <th class=\"l\">bound</th></tr>",
    );
    for r in &run.ranks {
        for f in &r.flops_by_family {
            let mfu = f.mfu_pct.map_or("-".to_string(), |m| format!("{m:.1}%"));
            let _ = write!(
                out,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{:.3e}</td>\
                 <td>{:.1}</td><td>{mfu}</td><td class=\"l\">{}</td></tr>",
                esc(r.short()),
                esc(&f.family),
                f.flops_per_step,
                f.tflops,
                f.bound.unwrap_or("-")
            );
        }
    }
    out.push_str("</table>");
}

/// The critical path of the median and the longest step: their longest parts.
fn critical_paths(out: &mut String, run: &RunView) {
    if run.paths.is_empty() {
        return;
    }
    out.push_str(
        "<h3>Critical path</h3><p>What set the step's time, across ranks (every step in full: \
         <code>nsys-lens critical-path</code>; what a fix would buy: \
         <code>nsys-lens what-if</code>).</p>",
    );
    for path in &run.paths {
        let ranks: Vec<String> = path.ranks.iter().map(u32::to_string).collect();
        let _ = write!(
            out,
            "<p>{}: {}; ranks on the path {}</p><table><tr><th>rank</th>\
             <th class=\"l\">category</th><th class=\"l\">name</th><th>time</th><th>share</th>\
             </tr>",
            esc(&path.title),
            ms(path.step_ns),
            esc(&ranks.join(" ← "))
        );
        for (rank, category, name, ns) in &path.parts {
            let share = 100.0 * *ns as f64 / path.step_ns.max(1) as f64;
            let _ = write!(
                out,
                "<tr><td>{rank}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td>\
                 <td>{share:.1}%</td></tr>",
                esc(category),
                esc(name),
                ms(*ns)
            );
        }
        out.push_str("</table>");
    }
    fixes(out, &run.fixes);
}

/// The fixes that would buy the most, as `what-if` predicts them.
fn fixes(out: &mut String, fixes: &[FixView]) {
    if fixes.is_empty() {
        return;
    }
    out.push_str(
        "<p>What a fix would buy, as a replay of the run predicts it (each in full: \
         <code>nsys-lens what-if --change CHANGE</code>):</p><table><tr>\
         <th class=\"l\">change</th><th class=\"l\">what it changes</th><th>steps now</th>\
         <th>predicted</th><th>gain</th></tr>",
    );
    for fix in fixes {
        let gain = 100.0 * (fix.measured_ns - fix.predicted_ns) as f64 / fix.measured_ns as f64;
        let _ = write!(
            out,
            "<tr><td class=\"l\"><code>{}</code></td><td class=\"l\">{}</td><td>{}</td>\
             <td>{}</td><td>{gain:.1}%</td></tr>",
            esc(&fix.change),
            esc(&fix.meaning),
            ms(fix.measured_ns),
            ms(fix.predicted_ns)
        );
    }
    out.push_str("</table>");
}

/// A collapsible section.
fn collapsed(out: &mut String, title: &str, body: impl FnOnce(&mut String)) {
    let _ = write!(out, "<details><summary>{}</summary>", esc(title));
    body(out);
    out.push_str("</details>");
}

/// The median (upper) of some values, with the smallest and the largest.
fn spread<T: Copy + Ord>(values: &mut [T]) -> Option<(T, T, T)> {
    let median = crate::analysis::upper_median(values)?;
    Some((*values.first()?, median, *values.last()?))
}

/// Each rank's window, one line each.
fn windows_list(out: &mut String, run: &RunView) {
    out.push_str("<ul>");
    for r in &run.ranks {
        let _ = write!(
            out,
            "<li>{}: window {} ({})</li>",
            esc(r.short()),
            esc(&r.window.2),
            ms(r.window_ns())
        );
    }
    out.push_str("</ul>");
}

/// The windows' lengths over the ranks.
fn windows_summary(out: &mut String, run: &RunView) {
    let mut lengths: Vec<i64> = run.ranks.iter().map(RankView::window_ns).collect();
    if let Some((min, median, max)) = spread(&mut lengths) {
        let _ = write!(
            out,
            "<p>{} ranks; windows {} median ({} to {})</p>",
            run.ranks.len(),
            ms(median),
            ms(min),
            ms(max)
        );
    }
}

/// Where the windows go over all ranks: per bar segment, min, median and max, and the rank
/// that has the most of it (the least, for compute).
fn distribution(out: &mut String, run: &RunView) {
    out.push_str(
        "<h3>Where the ranks' windows go</h3><p class=\"note\">In full: <code>nsys-lens \
         overlap</code>, <code>nsys-lens idle</code>.</p><table><tr><th class=\"l\">segment</th>\
         <th>min</th><th>median</th><th>max</th><th class=\"l\">worst rank</th></tr>",
    );
    let mut labels: Vec<&str> = Vec::new();
    for r in &run.ranks {
        for s in &r.bar {
            if !labels.contains(&s.label.as_str()) {
                labels.push(&s.label);
            }
        }
    }
    for label in labels {
        let mut values: Vec<(i64, &str)> = run
            .ranks
            .iter()
            .map(|r| {
                let ns = r
                    .bar
                    .iter()
                    .filter(|s| s.label == label)
                    .map(|s| s.ns)
                    .sum();
                (ns, r.short())
            })
            .collect();
        let Some(((min, low), (median, _), (max, high))) = spread(&mut values) else {
            continue;
        };
        // No rank is worst when they are all alike.
        let worst = match label {
            _ if min == max => "–",
            "compute" => low,
            _ => high,
        };
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            esc(label),
            ms(min),
            ms(median),
            ms(max),
            esc(worst)
        );
    }
    out.push_str("</table>");
}

/// Colour of a share in 0..=100 from white to red.
fn heat(pct: f64) -> String {
    let t = (pct / 100.0).clamp(0.0, 1.0);
    let g = (255.0 - 170.0 * t) as u8;
    format!("#ff{g:02x}{g:02x}")
}

/// A rank × column grid of percentages, with a legend; `cell` gives a rank's value in a
/// column (None: no such cell).
fn heatmap(
    out: &mut String,
    (title, command): (&str, &str),
    columns: &[String],
    run: &RunView,
    cell: impl Fn(&RankView, usize) -> Option<f64>,
) {
    if columns.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<h3>{}</h3><p class=\"note\">In full: <code>nsys-lens {command}</code>.</p>",
        esc(title)
    );
    let (label_w, col_w) = (70, 90);
    let row_h = (600 / run.ranks.len().max(1)).clamp(2, 14);
    let width = label_w + col_w * columns.len();
    let height = 20 + row_h * run.ranks.len();
    let _ = write!(
        out,
        "<svg viewBox=\"0 0 {width} {height}\" width=\"{width}\" role=\"img\" aria-label=\"{}\">",
        esc(title)
    );
    for (c, name) in columns.iter().enumerate() {
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"12\" font-size=\"10\">{}</text>",
            label_w + c * col_w,
            esc(name)
        );
    }
    let label_every = (12 / row_h).max(1) * if run.ranks.len() > 64 { 8 } else { 1 };
    for (i, r) in run.ranks.iter().enumerate() {
        let y = 18 + i * row_h;
        if i % label_every == 0 {
            let _ = write!(
                out,
                "<text x=\"0\" y=\"{}\" font-size=\"9\">{}</text>",
                y + row_h.min(10),
                esc(r.short())
            );
        }
        for c in 0..columns.len() {
            if let Some(pct) = cell(r, c) {
                let _ = write!(
                    out,
                    "<rect x=\"{}\" y=\"{y}\" width=\"{}\" height=\"{row_h}\" fill=\"{}\"/>",
                    label_w + c * col_w,
                    col_w - 2,
                    heat(pct)
                );
            }
        }
    }
    out.push_str("</svg><p class=\"note\">White 0 %, red 100 %.</p>");
}

/// The (stage, role) pairs whose overlap the ranks report: each role per stage, and a role
/// over `all` stages only when no stage has it (barrier and the `all` role aside).
fn stage_roles(run: &RunView) -> Vec<(String, String)> {
    let pairs = run
        .ranks
        .iter()
        .flat_map(|r| r.overlap.iter())
        .filter(|o| o.1 != "all" && o.1 != "barrier");
    let mut keys: Vec<(String, String)> = pairs.map(|o| (o.0.clone(), o.1.clone())).collect();
    keys.sort();
    keys.dedup();
    let staged: Vec<String> = keys
        .iter()
        .filter(|(stage, _)| stage != "all")
        .map(|(_, role)| role.clone())
        .collect();
    keys.retain(|(stage, role)| stage != "all" || !staged.contains(role));
    keys
}

/// A (stage, role) pair as a column heading: the role alone where the stage says nothing more.
fn stage_role_name((stage, role): &(String, String)) -> String {
    if stage == "all" || stage == role {
        role.clone()
    } else {
        format!("{stage} {role}")
    }
}

/// Rank × stage exposed communication %, and rank × step bubble %.
fn heatmaps(out: &mut String, run: &RunView) {
    let keys = stage_roles(run);
    let names: Vec<String> = keys.iter().map(stage_role_name).collect();
    heatmap(
        out,
        ("Exposed communication % per rank and stage", "overlap"),
        &names,
        run,
        |r, c| {
            let (stage, role) = &keys[c];
            r.overlap
                .iter()
                .find(|o| &o.0 == stage && &o.1 == role)
                .map(|o| 100.0 - o.4)
        },
    );
    let steps = run.ranks.iter().map(|r| r.steps.len()).max().unwrap_or(0);
    let names: Vec<String> = (0..steps).map(|i| format!("step {i}")).collect();
    let mut title = format!("{} % per rank and step", bubble_title(run));
    title[..1].make_ascii_uppercase();
    heatmap(out, (&title, "bubbles"), &names, run, |r, c| {
        r.steps.get(c).map(|s| s.1)
    });
}

/// One row per rank, one column per (stage, role): its overlap %.
fn overlap_grid(out: &mut String, run: &RunView) {
    let keys = stage_roles(run);
    out.push_str("<table><tr><th class=\"l\">rank</th>");
    for key in &keys {
        let _ = write!(out, "<th>{}</th>", esc(&stage_role_name(key)));
    }
    out.push_str("</tr>");
    for r in &run.ranks {
        let _ = write!(out, "<tr><td class=\"l\">{}</td>", esc(r.short()));
        for (stage, role) in &keys {
            match r.overlap.iter().find(|o| &o.0 == stage && &o.1 == role) {
                Some(o) => {
                    let _ = write!(out, "<td>{:.1}%</td>", o.4);
                }
                None => out.push_str("<td>–</td>"),
            }
        }
        out.push_str("</tr>");
    }
    out.push_str(
        "</table><p class=\"note\">Overlap %: the share of each stage's \
                  communication that compute hides.</p>",
    );
}

/// One row per rank, one column per kernel family: its time per step.
fn families_by_rank(out: &mut String, run: &RunView) {
    let names = family_names(run);
    out.push_str("<table><tr><th class=\"l\">rank</th>");
    for name in &names {
        let _ = write!(out, "<th>{}</th>", esc(name));
    }
    out.push_str("</tr>");
    for r in &run.ranks {
        let _ = write!(out, "<tr><td class=\"l\">{}</td>", esc(r.short()));
        for name in &names {
            let value = r.families.iter().find(|f| &f.0 == *name).map_or(0, |f| f.1);
            let _ = write!(out, "<td>{}</td>", ms(value));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

fn family_names(run: &RunView) -> Vec<&String> {
    let mut names: Vec<&String> = run
        .ranks
        .iter()
        .flat_map(|r| r.families.iter().map(|f| &f.0))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Per step of each rank whose window holds several: span and bubble.
fn step_view(out: &mut String, run: &RunView) {
    if run.ranks.iter().all(|r| r.steps.len() < 2) {
        return;
    }
    out.push_str(
        "<h3>Steps</h3><p class=\"note\">In full: <code>nsys-lens bubbles</code>.</p><table><tr><th class=\"l\">rank</th><th>step</th><th>span</th>\
         <th>bubble</th></tr>",
    );
    for r in run.ranks.iter().filter(|r| r.steps.len() > 1) {
        for (i, (span, bubble)) in r.steps.iter().enumerate() {
            let _ = write!(
                out,
                "<tr><td class=\"l\">{}</td><td>{i}</td><td>{}</td><td>{bubble:.1}%</td></tr>",
                esc(r.short()),
                ms(*span)
            );
        }
    }
    out.push_str("</table>");
}

/// The medians over ranks of two runs side by side: window, each bar segment, hidden
/// communication, bubble.
fn differences(out: &mut String, a: &RunView, b: &RunView) {
    let median = |run: &RunView, f: &dyn Fn(&RankView) -> i64| {
        let mut values: Vec<i64> = run.ranks.iter().map(f).collect();
        spread(&mut values).map(|(_, m, _)| m)
    };
    let mut labels: Vec<String> = Vec::new();
    for r in a.ranks.iter().chain(&b.ranks) {
        for s in &r.bar {
            if !labels.contains(&s.label) {
                labels.push(s.label.clone());
            }
        }
    }
    out.push_str(
        "<h2>Differences (median over ranks)</h2><table><tr><th class=\"l\">what</th>\
         <th>a</th><th>b</th><th>b − a</th><th>change</th></tr>",
    );
    let mut row = |what: &str, x: Option<i64>, y: Option<i64>| {
        let cell = |v: Option<i64>| v.map_or("–".to_string(), ms);
        let diff = x.zip(y).map(|(x, y)| y - x);
        let change = x
            .zip(diff)
            .filter(|(x, _)| *x != 0)
            .map_or("–".to_string(), |(x, d)| {
                format!("{:+.1}%", 100.0 * d as f64 / x as f64)
            });
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{change}</td></tr>",
            esc(what),
            cell(x),
            cell(y),
            diff.map_or("–".to_string(), |d| if d < 0 {
                format!("−{}", ms(-d))
            } else {
                format!("+{}", ms(d))
            })
        );
    };
    row(
        "window",
        median(a, &RankView::window_ns),
        median(b, &RankView::window_ns),
    );
    for label in &labels {
        let of = |r: &RankView| {
            r.bar
                .iter()
                .filter(|s| &s.label == label)
                .map(|s| s.ns)
                .sum()
        };
        row(label, median(a, &of), median(b, &of));
    }
    row(
        "hidden communication",
        median(a, &|r| r.hidden_ns),
        median(b, &|r| r.hidden_ns),
    );
    out.push_str("</table>");
}

/// One stacked bar per rank: compute, exposed communication by role, barrier, idle; each
/// as long as the rank's window on the page's one scale.
fn bars(out: &mut String, run: &RunView, scale: Scale) {
    out.push_str(
        "<h3>Where each rank's window goes</h3><p class=\"note\">In full: <code>nsys-lens \
         overlap</code>, <code>nsys-lens idle</code>.</p><div class=\"legend\">",
    );
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for r in &run.ranks {
        for s in &r.bar {
            if !keys.iter().any(|(k, _)| *k == s.label) {
                keys.push((&s.label, &s.key));
            }
        }
    }
    for (label, key) in &keys {
        let _ = write!(
            out,
            "<span><i class=\"sw\" style=\"background:{}\"></i>{}</span>",
            scale.colours.of(key),
            esc(label)
        );
    }
    out.push_str("</div>");
    let many = run.ranks.len() > MANY_RANKS;
    let (width, row) = (640.0, if many { 12 } else { 22 });
    let height = run.ranks.len() * row + 4;
    let full = width as usize + 380;
    let _ = write!(
        out,
        "<svg viewBox=\"0 0 {full} {height}\" width=\"{full}\" role=\"img\" \
         aria-label=\"time per rank\">"
    );
    let per_ns = width / scale.window_ns as f64;
    for (i, r) in run.ranks.iter().enumerate() {
        let y = i * row + 2;
        let _ = write!(
            out,
            "<text x=\"0\" y=\"{}\" font-size=\"11\">{}</text>",
            y + row - 6,
            esc(r.short())
        );
        let mut x = 70.0;
        for s in &r.bar {
            let w = per_ns * s.ns as f64;
            if many {
                // No tooltip per segment: the page stays small at hundreds of ranks.
                let _ = write!(
                    out,
                    "<rect x=\"{x:.0}\" y=\"{y}\" width=\"{w:.1}\" height=\"{}\" fill=\"{}\"/>",
                    row - 3,
                    scale.colours.of(&s.key)
                );
            } else {
                let _ = write!(
                    out,
                    "<rect x=\"{x:.1}\" y=\"{y}\" width=\"{w:.1}\" height=\"{}\" fill=\"{}\">\
                     <title>{}: {}</title></rect>",
                    row - 4,
                    scale.colours.of(&s.key),
                    esc(&s.label),
                    ms(s.ns)
                );
            }
            x += w;
        }
        if !many {
            let _ = write!(
                out,
                "<text x=\"{:.0}\" y=\"{}\" font-size=\"11\">{} window, {} hidden comm</text>",
                x + 6.0,
                y + 14,
                ms(r.window_ns()),
                ms(r.hidden_ns)
            );
        }
    }
    out.push_str("</svg>");
}

/// The overlap table of every rank, the lowest overlap of each rank marked.
fn overlap_tables(out: &mut String, run: &RunView) {
    out.push_str(
        "<h3>Hidden communication per stage</h3><p class=\"note\">In full: <code>nsys-lens \
         overlap</code>.</p><table><tr><th class=\"l\">rank</th>\
                  <th class=\"l\">stage</th><th class=\"l\">role</th><th>comm</th>\
                  <th>exposed (wall)</th><th>overlap</th></tr>",
    );
    for r in &run.ranks {
        // The least hidden stage of the rank's communication (barrier is never hidden by design).
        let marked = |o: &(String, String, i64, i64, f64)| o.0 != "all" && o.1 != "barrier";
        let worst = r
            .overlap
            .iter()
            .filter(|o| marked(o))
            .map(|o| o.4)
            .fold(f64::INFINITY, f64::min);
        for row in &r.overlap {
            let (stage, role, comm, exposed, pct) = row;
            let class = if marked(row) && *pct == worst {
                " class=\"worst\""
            } else {
                ""
            };
            let _ = write!(
                out,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td>\
                 <td>{}</td><td>{}</td><td{class}>{pct:.1}%</td></tr>",
                esc(r.short()),
                esc(stage),
                esc(role),
                ms(*comm),
                ms(*exposed)
            );
        }
    }
    out.push_str("</table>");
}

fn families(out: &mut String, run: &RunView) {
    out.push_str(
        "<h3>Kernel families per GPU per step</h3><p class=\"note\">In full: <code>nsys-lens \
         kernels</code>.</p><table><tr><th class=\"l\">family</th>",
    );
    for r in &run.ranks {
        let _ = write!(out, "<th>{}</th>", esc(r.short()));
    }
    out.push_str("</tr>");
    for name in family_names(run) {
        let _ = write!(out, "<tr><td class=\"l\">{}</td>", esc(name));
        for r in &run.ranks {
            let value = r.families.iter().find(|f| &f.0 == name).map_or(0, |f| f.1);
            let _ = write!(out, "<td>{}</td>", ms(value));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

/// `pipeline bubble` where a rank is a pipeline stage, else `GPU idle` (the same measure: the
/// share of each step no stream of the rank's GPU works).
fn bubble_title(run: &RunView) -> &'static str {
    match run.ranks.iter().any(|r| r.pipeline) {
        true => "pipeline bubble",
        false => "GPU idle",
    }
}

fn bubbles(out: &mut String, run: &RunView) {
    let title = bubble_title(run);
    let mut heading = title.to_string();
    heading[..1].make_ascii_uppercase();
    let pipeline = run.ranks.iter().any(|r| r.pipeline);
    let _ = write!(
        out,
        "<h3>{heading}</h3><p class=\"note\">In full: <code>nsys-lens bubbles</code>.</p>\
         <table><tr><th class=\"l\">rank</th><th>{}</th>{}</tr>",
        title.rsplit(' ').next().unwrap_or(title),
        if pipeline { "<th>ideal 1F1B</th>" } else { "" }
    );
    let mut absent = false;
    for r in &run.ranks {
        let Some((pct, ideal)) = r.bubble else {
            continue;
        };
        absent |= ideal.is_none();
        let ideal = match (pipeline, ideal) {
            (false, _) => String::new(),
            (true, None) => "<td>–</td>".to_string(),
            (true, Some(i)) => format!("<td>{i:.1}%</td>"),
        };
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td>{pct:.1}%</td>{ideal}</tr>",
            esc(r.short())
        );
    }
    out.push_str("</table>");
    if absent && pipeline {
        out.push_str(
            "<p class=\"note\">– : 1F1B's ideal (pp−1)/(m+pp−1) is shown only where the window \
             is whole steps of a one-directional pipeline schedule whose size and micro-batches \
             the trace gives (not PithTrain's DualPipeV chunk windows); see \
             <code>nsys-lens bubbles</code>.</p>",
        );
    }
}

/// Tick spacing for an axis of `span` ns: 1, 2 or 5 times a power of ten, at most 8 ticks.
fn tick(span: i64) -> i64 {
    let mut step = 1i64;
    loop {
        for m in [1, 2, 5] {
            if span / (step * m) <= 8 {
                return step * m;
            }
        }
        step *= 10;
    }
}

/// Streams of a few ranks over their steady-state windows, coloured by role, on the page's
/// one time scale, with a time axis.
fn strip(out: &mut String, run: &RunView, scale: Scale) {
    if run.strip.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<h3>Timeline of the window ({})</h3><p class=\"note\">Every event: <code>nsys-lens \
         convert</code> (Perfetto and Paraver).</p>",
        ms(run.strip_ns)
    );
    let (width, row, left) = (640.0, 16, 280.0);
    let height = run.strip.len() * row + 24;
    let full = width as usize + 300;
    let _ = write!(
        out,
        "<svg viewBox=\"0 0 {full} {height}\" width=\"{full}\" role=\"img\" aria-label=\"timeline\">"
    );
    let per_ns = width / scale.strip_ns as f64;
    for (i, r) in run.strip.iter().enumerate() {
        let y = i * row + 2;
        let _ = write!(
            out,
            "<text x=\"0\" y=\"{}\" font-size=\"10\">{}</text>",
            y + 11,
            esc(&r.name)
        );
        // Operations closer than half a pixel are drawn as one rectangle, so a row holds at
        // most one rectangle per pixel however many kernels the window has.
        let mut pending: Option<(f64, f64)> = None;
        let draw = |out: &mut String, (x0, x1): (f64, f64)| {
            let _ = write!(
                out,
                "<rect x=\"{:.1}\" y=\"{y}\" width=\"{:.1}\" height=\"12\" fill=\"{}\"/>",
                left + x0,
                (x1 - x0).max(0.5),
                scale.colours.of(&r.key)
            );
        };
        for &(s, e) in &r.spans {
            let (x0, x1) = (s as f64 * per_ns, e as f64 * per_ns);
            pending = match pending {
                Some((a, b)) if x0 <= b + 0.5 => Some((a, b.max(x1))),
                Some(done) => {
                    draw(out, done);
                    Some((x0, x1))
                }
                None => Some((x0, x1)),
            };
        }
        if let Some(done) = pending {
            draw(out, done);
        }
    }
    let axis = run.strip.len() * row + 4;
    let _ = write!(
        out,
        "<line x1=\"{left}\" y1=\"{axis}\" x2=\"{}\" y2=\"{axis}\" stroke=\"#888\"/>",
        left + width
    );
    let step = tick(scale.strip_ns);
    for t in (0..=scale.strip_ns).step_by(step as usize) {
        let x = left + t as f64 * per_ns;
        let _ = write!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{axis}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#888\"/>\
             <text x=\"{x:.1}\" y=\"{}\" font-size=\"9\" text-anchor=\"middle\">{}</text>",
            axis + 4,
            axis + 14,
            ms(t)
        );
    }
    out.push_str("</svg>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dense_strip_row_draws_at_most_one_rectangle_per_pixel() {
        // 100,000 kernels of 5 ns every 10 ns: far below a pixel each.
        let spans: Vec<(i64, i64)> = (0..100_000).map(|i| (i * 10, i * 10 + 5)).collect();
        let run = RunView {
            title: "t".into(),
            summary: vec![],
            ranks: vec![],
            strip: vec![StripRow {
                name: "rank 0 · GPU 0 · stream 7 · compute".into(),
                key: "compute".into(),
                spans,
            }],
            strip_ns: 1_000_000,
            paths: vec![],
            fixes: vec![],
            collectives: CollectivesView::default(),
        };
        let html = page(&[run]);
        let rects = html.matches("<rect").count();
        assert!(html.contains("<line"), "a time axis");
        assert!((1..=640).contains(&rects), "{rects} rectangles");
    }

    #[test]
    fn ticks_are_round_and_few() {
        assert_eq!(tick(1_000_000), 200_000);
        assert_eq!(tick(7), 1);
        assert_eq!(tick(35_000_000), 5_000_000);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            esc("<a href=\"x\">&</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
        );
    }
}
