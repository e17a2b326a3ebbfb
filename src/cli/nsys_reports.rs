//! `nsys-lens nsys-reports DIR`: writes nsys-lens' analyses as report scripts for `nsys stats`
//! (`--report-dir DIR -r lens_overlap`) and rules for `nsys analyze` (which loads rules from the
//! current directory). Each script calls this binary on the SQLite export nsys hands it and
//! gives nsys our rows, so every nsys output format works on them.

use super::Outcome;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

/// The report script, with `{name}` fields (`{name!r}`: a Python literal).
const REPORT: &str = include_str!("nsys_reports/report.py");
/// The rule script.
const RULE: &str = include_str!("nsys_reports/rule.py");

/// Options of `nsys-reports`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens nsys-reports lens/
  nsys stats --report-dir lens -r lens_overlap run.sqlite         our overlap table, the nsys way
  nsys stats --report-dir lens -r lens_bubbles:whole:pp=2 -f csv run.sqlite
  cd lens && nsys analyze -r lens_exposed_comm:threshold=30 ../run.sqlite")]
pub struct Args {
    /// Where the scripts go (created when missing).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

/// A report argument and the option it becomes: (name, flag, Python `_arg_opts` options, help).
type Argument = (&'static str, &'static str, &'static str, &'static str);

/// The window and rank arguments every per-rank report takes.
const WINDOW: &[Argument] = &[
    (
        "whole",
        "--whole",
        "'action': 'store_true'",
        "the whole capture",
    ),
    (
        "anchor",
        "--anchor",
        "'type': str",
        "NVTX regex: its median range is the window",
    ),
    (
        "start",
        "--start",
        "'type': int",
        "window start, merged-clock ns (with end)",
    ),
    (
        "end",
        "--end",
        "'type': int",
        "window end, merged-clock ns (with start)",
    ),
    (
        "gpu_window",
        "--gpu-window",
        "'action': 'store_true'",
        "the window's GPU projection",
    ),
    (
        "ranks",
        "--ranks",
        "'type': str",
        "only these ranks (0-3; `,` separates reports)",
    ),
    (
        "roles",
        "--roles",
        "'type': str",
        "TOML file of extra role rules",
    ),
];

/// One report: its name, the command it runs, what it shows, and its own arguments.
struct Report {
    name: &'static str,
    command: &'static str,
    display: &'static str,
    extra: &'static [Argument],
}

const REPORTS: [Report; 4] = [
    Report {
        name: "lens_streams",
        command: "streams",
        display: "nsys-lens: the role of every CUDA stream",
        extra: &[],
    },
    Report {
        name: "lens_overlap",
        command: "overlap",
        display: "nsys-lens: hidden and exposed communication per rank, stage and role",
        extra: &[],
    },
    Report {
        name: "lens_bubbles",
        command: "bubbles",
        display: "nsys-lens: pipeline bubble per rank and step",
        extra: &[
            ("pp", "--pp", "'type': int", "pipeline-parallel size"),
            (
                "micro_batches",
                "--micro-batches",
                "'type': int",
                "micro-batches per step",
            ),
        ],
    },
    Report {
        name: "lens_collectives",
        command: "collectives",
        display: "nsys-lens: collectives matched across ranks, arrival skew and waits",
        extra: &[
            ("by", "--by", "'type': str", "`rank`: totals per rank"),
            ("top", "--top", "'type': int", "only the N largest skews"),
            (
                "p2p",
                "--p2p",
                "'action': 'store_true'",
                "point-to-point transfers too",
            ),
        ],
    },
];

/// One rule: its name, the command whose rows it flags, the columns it shows, the Python
/// condition a row (`row`, with `number()` and `threshold`) meets to be flagged, and its texts.
struct Rule {
    name: &'static str,
    argv: &'static [&'static str],
    columns: &'static [&'static str],
    condition: &'static str,
    threshold: f64,
    display: &'static str,
    threshold_help: &'static str,
    advice: &'static str,
    noresult: &'static str,
}

const RULES: [Rule; 2] = [
    Rule {
        name: "lens_exposed_comm",
        argv: &["overlap", "--whole"],
        columns: &[
            "rank",
            "host",
            "pid",
            "role",
            "comm_ns",
            "exposed_ns",
            "overlap_pct",
        ],
        condition: "row['rank'] != 'all' and row['stage'] == 'all' and row['role'] != 'all' \
                    and (number(row['comm_ns']) or 0) > 0 \
                    and 100.0 * number(row['exposed_ns']) / number(row['comm_ns']) >= threshold",
        threshold: 20.0,
        display: "nsys-lens: exposed communication",
        threshold_help: "flag a rank's role exposing at least this % of its communication",
        advice: "These ranks leave at least {THRESHOLD}% of a communication role's time \
                 exposed (no compute runs beside it), over the whole capture. Overlap it with \
                 compute (prefetch, bucket sizes, a communication stream), or shrink it; \
                 `nsys-lens overlap` gives the per-stage view.",
        noresult: "No rank leaves {THRESHOLD}% or more of a communication role's time \
                   exposed.",
    },
    Rule {
        name: "lens_bubble_excess",
        argv: &["bubbles", "--whole"],
        columns: &[
            "rank",
            "host",
            "pid",
            "pp",
            "step",
            "bubble_pct",
            "ideal_bubble_pct",
        ],
        condition: "row['rank'] != 'all' and number(row['ideal_bubble_pct']) is not None \
                    and number(row['bubble_pct']) - number(row['ideal_bubble_pct']) >= threshold",
        threshold: 5.0,
        display: "nsys-lens: pipeline bubble above 1F1B's",
        threshold_help: "flag a step whose bubble is this many points above 1F1B's ideal",
        advice: "These steps spend at least {THRESHOLD} points more of their time in the \
                 pipeline bubble than 1F1B's (pp-1)/(m+pp-1). More micro-batches, an \
                 interleaved schedule, or a balanced stage split shrink it; `nsys-lens \
                 bubbles` splits it into pipeline wait and idle.",
        noresult: "No step's bubble is {THRESHOLD} points or more above 1F1B's ideal.",
    },
];

/// Writes every report and rule script into the directory.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let binary = std::env::current_exe()?.display().to_string();
    std::fs::create_dir_all(&args.dir)?;
    let mut written = Vec::new();
    for report in &REPORTS {
        written.push((report.name, report_script(report, &binary)));
    }
    for rule in &RULES {
        written.push((rule.name, rule_script(rule, &binary)));
    }
    let staged = nsys_lens::output::Staged::default();
    let mut paths = Vec::new();
    for (name, text) in written {
        let path = args.dir.join(format!("{name}.py"));
        let mut output = nsys_lens::output::Output::create(&path)?;
        output.write_all(text.as_bytes())?;
        staged.add(output)?;
        paths.push(path);
    }
    staged.commit()?;
    super::print_paths(&paths)?;
    Ok(Outcome::Done)
}

/// A report's script.
fn report_script(report: &Report, binary: &str) -> String {
    let arguments: Vec<&Argument> = WINDOW.iter().chain(report.extra).collect();
    let flags: Vec<String> = arguments
        .iter()
        .map(|(name, flag, ..)| format!("{}: {}", python(name), python(flag)))
        .collect();
    let opts: Vec<String> = arguments
        .iter()
        .map(|(name, _, kind, help)| {
            format!("[[{}], {{{kind}, 'help': {}}}]", python(name), python(help))
        })
        .collect();
    let mut usage = format!(
        "{{SCRIPT}}[:options...] -- {}\n\n    Options:\n",
        report.display
    );
    for (name, _, kind, help) in &arguments {
        let form = if kind.contains("store_true") {
            name.to_string()
        } else {
            format!("{name}=<value>")
        };
        let _ = writeln!(usage, "        {form} - {help}");
    }
    let _ = write!(
        usage,
        "\n    The rows of `nsys-lens {} --format csv`, computed by nsys-lens.\n",
        report.command
    );
    fill(
        REPORT,
        &[
            ("binary", python(binary)),
            ("command", python(report.command)),
            ("flags", format!("{{{}}}", flags.join(", "))),
            ("class_name", class_name(report.name)),
            ("display", python(report.display)),
            ("usage", python(&usage)),
            ("arg_opts", format!("[{}]", opts.join(", "))),
        ],
    )
}

/// A rule's script.
fn rule_script(rule: &Rule, binary: &str) -> String {
    let usage = format!(
        "{{SCRIPT}}[:threshold=<value>] -- {}\n\n    threshold=<value> - {} (default {})\n",
        rule.display, rule.threshold_help, rule.threshold
    );
    let argv: Vec<String> = rule.argv.iter().map(|a| python(a)).collect();
    let columns: Vec<String> = rule.columns.iter().map(|c| python(c)).collect();
    fill(
        RULE,
        &[
            ("binary", python(binary)),
            ("command", rule.argv[0].to_string()),
            ("class_name", class_name(rule.name)),
            ("display", python(rule.display)),
            ("usage", python(&usage)),
            ("advice", python(rule.advice)),
            ("noresult", python(rule.noresult)),
            ("threshold_help", python(rule.threshold_help)),
            ("threshold", format!("{:?}", rule.threshold)),
            ("argv", format!("[{}]", argv.join(", "))),
            ("columns", format!("[{}]", columns.join(", "))),
            (
                "condition",
                rule.condition
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
        ],
    )
}

/// `lens_overlap` -> `LensOverlap`.
fn class_name(name: &str) -> String {
    name.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next().map_or(String::new(), |f| {
                f.to_ascii_uppercase().to_string() + c.as_str()
            })
        })
        .collect()
}

/// A Python string literal.
fn python(text: &str) -> String {
    let mut out = String::from("'");
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// The template with its `{name}` and `{name!r}` fields filled (`{{` and `}}` are braces).
fn fill(template: &str, fields: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find(['{', '}']) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if rest.starts_with("{{") || rest.starts_with("}}") {
            out.push_str(&rest[..1]);
            rest = &rest[2..];
            continue;
        }
        let close = rest.find('}').expect("a field closes");
        let field = rest[1..close].trim_end_matches("!r");
        let value = fields
            .iter()
            .find(|(name, _)| *name == field)
            .unwrap_or_else(|| panic!("template field {field} has no value"));
        out.push_str(&value.1);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}
