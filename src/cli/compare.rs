//! `nsys-lens compare A... -- B... [WINDOW]`

use super::Outcome;
use super::analysis::{self, FormatArg, WindowArgs};
use super::inputs::{Align, Inputs, TimeUnitArg};
use nsys_lens::query;
use nsys_lens::query::gate::{self, Check, Verdict};
use nsys_lens::report::{Cell, Format, Output, Table};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Options of `compare`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens compare fp32/*.sqlite -- bf16/*.sqlite          two runs side by side
  nsys-lens compare --whole accum1.sqlite -- accum4.sqlite  over the whole captures
  nsys-lens compare --fail-if 'step_time>+5%' --fail-if 'exposed_comm>+2pp' fp32/*.sqlite -- bf16/*.sqlite
                                                            a CI gate: exit 1 when B is 5 % slower
                                                            or exposes 2 points more communication")]
pub struct Args {
    /// Run A: its reports (nsys exports or .nsys-rep reports, one per node; torch.profiler or
    /// JAX traces; part files; or directories of them).
    #[arg(required = true, value_name = "A")]
    a: Vec<PathBuf>,

    /// Run B, after `--`: its reports, of the same kinds as A's.
    #[arg(last = true, required = true, value_name = "B")]
    b: Vec<PathBuf>,

    /// Where .nsys-rep inputs are exported to (default: beside each report).
    #[arg(long, value_name = "DIR")]
    export_dir: Option<PathBuf>,

    /// Print nothing but errors and the requested output (no warnings).
    #[arg(short, long)]
    quiet: bool,

    /// How hosts' clocks are put together (see `info --help`).
    #[arg(long, value_enum, default_value_t)]
    align: Align,

    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: FormatArg,

    /// Unit of durations in tables (JSON and CSV always hold integer ns).
    #[arg(long, value_enum, default_value_t, value_name = "UNIT")]
    timeunit: TimeUnitArg,

    #[command(flatten)]
    window: WindowArgs,

    /// A check of B against A (repeatable): METRIC>LIMIT or METRIC<LIMIT, the limit a change
    /// in % of A, in percentage points (`pp`, for percentages) or in the metric's unit. METRIC:
    /// `step_time`, `exposed_comm`, `bubble`, `mfu`, `idle`, `kernel_time`, `family:NAME` (a family or
    /// a group: `family:gemm`), or a metric as the table names it. Exit 1 when one fails.
    #[arg(long, value_name = "CHECK", value_parser = Check::parse)]
    fail_if: Vec<Check>,
}

/// Prints the two runs' numbers side by side, with the differences.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let a = args.measure(&args.a)?;
    let b = args.measure(&args.b)?;
    let mut table = Table::new(&["metric", "a", "b", "diff", "diff_pct"]);
    let metrics: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for metric in metrics {
        let (x, y) = (a.get(metric).copied(), b.get(metric).copied());
        let cell = |v: Option<f64>| match v {
            None => Cell::Empty,
            Some(v) if gate::is_share(metric) => Cell::Percent(v),
            Some(v) if metric.contains("_ns") || metric.contains(" ns ") => {
                Cell::Duration(v.round() as i64)
            }
            Some(v) => Cell::Int(v.round() as i64),
        };
        let diff = x.zip(y).map(|(x, y)| y - x);
        let relative = x
            .zip(y)
            .and_then(|(x, y)| (x != 0.0).then(|| 100.0 * (y - x) / x.abs()));
        table.push(vec![
            Cell::text(metric.as_str()),
            cell(x),
            cell(y),
            // A share's difference is in points of it.
            match (diff, gate::is_share(metric)) {
                (Some(d), true) => Cell::Points(d),
                _ => cell(diff),
            },
            relative.map_or(Cell::Empty, Cell::Percent),
        ]);
    }
    let verdicts = args
        .fail_if
        .iter()
        .map(|check| check.evaluate(&a, &b))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    let output = Output {
        table,
        notes: verdicts.iter().map(Verdict::line).collect(),
        context: match verdicts.is_empty() {
            true => serde_json::Map::new(),
            false => serde_json::Map::from_iter([(
                "checks".to_string(),
                serde_json::to_value(&verdicts)?,
            )]),
        },
        heading: vec![format!(
            "a = {}; b = {}; values are per GPU (mean over ranks), per step where they say so, over \
             each rank's window ({})",
            list(&args.a),
            list(&args.b),
            if args.window.whole {
                "whole capture"
            } else {
                "steady state unless --whole/--start"
            }
        )],
    };
    let mut stdout = std::io::stdout().lock();
    output.write_in(Format::from(args.format), args.timeunit.into(), &mut stdout)?;
    match verdicts.iter().any(|v| v.failed) {
        true => Ok(Outcome::ChecksFailed),
        false => Ok(Outcome::Done),
    }
}

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

impl Args {
    /// One run's metrics, averaged over its ranks, from its reports read for streaming.
    fn measure(&self, reports: &[PathBuf]) -> anyhow::Result<BTreeMap<String, f64>> {
        let common = analysis::Common {
            inputs: Inputs {
                reports: reports.to_vec(),
                export_dir: self.export_dir.clone(),
                quiet: self.quiet,
                align: self.align,
                threads: None,
            },
            format: self.format,
            timeunit: self.timeunit,
        };
        let captures = common.captures()?;
        query::run_metrics(&captures, &self.window.options())
    }
}
