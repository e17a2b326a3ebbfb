//! `nsys-lens report REPORT... [-- B...] [-o FILE] [WINDOW]`

use super::Outcome;
use super::analysis::WindowArgs;
use super::inputs::{Align, Inputs};
use nsys_lens::query::Selection;
use nsys_lens::query::page::run_view;
use nsys_lens::report::html::{RunView, page};
use nsys_lens::spill::Budget;
use std::io::Write;
use std::path::PathBuf;

/// Options of `report`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens report node0.sqlite node1.sqlite -o run.html    one page: ranks, overlap, families, bubbles
  nsys-lens report fp32/ -- bf16/ -o compare.html           two runs side by side")]
pub struct Args {
    /// The run's reports: nsys exports or .nsys-rep reports (one per node), torch.profiler
    /// or JAX traces, part files, or directories of them.
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

    /// One run, computed by the library from its reports read for streaming: their events
    /// sorted under the default memory budget, every measure taken in passes over them.
    fn view(&self, reports: &[PathBuf]) -> anyhow::Result<RunView> {
        let budget = Budget::new(Budget::DEFAULT);
        let inputs = self.inputs(reports);
        let (mut captures, alignment) = inputs.captures_aligned(budget)?;
        captures.warn_repeated_gpu_ops()?;
        inputs.warn(&captures.light);
        let selection = Selection {
            window: self.window.options(),
            ..Selection::default()
        };
        let title: Vec<String> = reports
            .iter()
            .map(|p| relative(p).display().to_string())
            .collect();
        run_view(&captures, alignment.as_ref(), &selection, title.join(" "))
    }
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
