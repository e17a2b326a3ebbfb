//! `nsys_lens._native`: the Python binding of nsys-lens. It only translates: a session holds a
//! loaded timeline, each query calls `nsys_lens::query` (the code behind the CLI's commands)
//! with the GIL released, and hands the command's table back as Arrow buffers (validity
//! bitmaps, values, offsets) that the Python layer wraps into a pyarrow Table without a Python
//! object per value.

use anyhow::Context as _;
use nsys_lens::analysis::what_if::Change;
use nsys_lens::classify::families::Families;
use nsys_lens::classify::{Activity, RoleRules};
use nsys_lens::export::conversion::{Request, Target};
use nsys_lens::export::{self, Targets};
use nsys_lens::load::{Align, Inputs};
use nsys_lens::model::Timeline;
use nsys_lens::query::mfu::MfuOptions;
use nsys_lens::query::{self, CollectiveOptions, NothingFound, RankList, Selection, WindowOptions};
use nsys_lens::report::{Cell, Output};
use nsys_lens::spill::Budget;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::path::{Path, PathBuf};

create_exception!(
    _native,
    Error,
    PyException,
    "nsys-lens could not do what was asked (the CLI's exit code 2)."
);
create_exception!(
    _native,
    NothingFoundError,
    Error,
    "The analysis found nothing to report (the CLI's exit code 1)."
);

/// A failure as Python sees it: the CLI's message, as [`NothingFoundError`] or [`Error`].
fn to_py(err: anyhow::Error) -> PyErr {
    let message = format!("{err:#}");
    match err.downcast_ref::<NothingFound>() {
        Some(_) => NothingFoundError::new_err(message),
        None => Error::new_err(message),
    }
}

/// The options of a query, as the Python layer passes them (JSON, the CLI's names).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Options {
    ranks: Option<String>,
    anchor: Option<String>,
    start: Option<i64>,
    end: Option<i64>,
    whole: bool,
    gpu_window: bool,
    roles: Option<PathBuf>,
    steps: Option<usize>,
    families: Option<PathBuf>,
    launch_gap: Option<i64>,
    pp: Option<u32>,
    micro_batches: Option<u32>,
    p2p: bool,
    by: Option<String>,
    top: Option<usize>,
    output: Option<PathBuf>,
    to: Vec<String>,
    compress: bool,
    perfetto: Option<PathBuf>,
    paraver: Option<PathBuf>,
    unclassified: bool,
    steady: bool,
    collective_flows: bool,
    memory_budget: Option<usize>,
    changes: Vec<String>,
    peak_tflops: Option<f64>,
    model_flops_per_step: Option<f64>,
}

impl Options {
    fn window(&self) -> anyhow::Result<WindowOptions> {
        let start_end = match (self.start, self.end) {
            (Some(s), Some(e)) => Some((s, e)),
            (None, None) => None,
            _ => anyhow::bail!("give start and end together"),
        };
        Ok(WindowOptions {
            anchor: self.anchor.clone(),
            start_end,
            whole: self.whole,
            gpu_window: self.gpu_window,
        })
    }

    fn rules(&self) -> anyhow::Result<RoleRules> {
        Ok(RoleRules::load(self.roles.as_deref())?)
    }

    fn ranks(&self) -> anyhow::Result<Option<RankList>> {
        self.ranks
            .as_deref()
            .map(RankList::parse)
            .transpose()
            .map_err(|e| anyhow::anyhow!("ranks: {e}"))
    }

    /// `by` as the CLI's `--by`: `rank`, or nothing.
    fn by_rank(&self) -> anyhow::Result<bool> {
        match self.by.as_deref() {
            None => Ok(false),
            Some("rank") => Ok(true),
            Some(other) => anyhow::bail!("by must be \"rank\", not {other:?}"),
        }
    }

    /// The traces to write: the CLI's `-o`, `--to` and `--compress` (the output named after the
    /// first input when not given), or the explicit paths of the deprecated `perfetto=` and
    /// `paraver=`.
    fn targets(&self, first_input: &Path, threads: usize) -> anyhow::Result<Targets> {
        let memory = self.memory_budget.unwrap_or(128 << 20);
        if self.perfetto.is_some() || self.paraver.is_some() {
            return Ok(Targets {
                perfetto: self.perfetto.clone(),
                paraver: self.paraver.clone(),
                gzip: self.compress,
                memory: memory / 4,
                threads,
            });
        }
        let to = match self.to.is_empty() {
            true => vec![Target::Perfetto, Target::Paraver],
            false => (self.to.iter())
                .map(|t| match t.as_str() {
                    "perfetto" => Ok(Target::Perfetto),
                    "paraver" => Ok(Target::Paraver),
                    other => anyhow::bail!("to: {other:?} is not \"perfetto\" or \"paraver\""),
                })
                .collect::<anyhow::Result<_>>()?,
        };
        let request = Request {
            memory_budget: memory,
            threads,
            ..Request::new(&to, self.output.as_deref(), first_input, self.compress)
        };
        Ok(request.targets())
    }

    fn selection(&self) -> anyhow::Result<Selection> {
        Ok(Selection {
            ranks: self.ranks()?,
            window: self.window()?,
            rules: self.rules()?,
        })
    }
}

/// Runs `command` on a loaded timeline.
fn run(timeline: &Timeline, command: &str, o: &Options) -> anyhow::Result<Output> {
    match command {
        "ranks" => query::rank_table(timeline),
        "windows" => query::windows(timeline, &o.window()?),
        "streams" => query::streams(timeline, &o.selection()?),
        "overlap" => query::overlap(timeline, &o.selection()?),
        "kernels" => {
            let families = match &o.families {
                Some(path) => Families::from_file(path)?,
                None => Families::default(),
            };
            match o.unclassified {
                true => query::unclassified(timeline, &o.selection()?, &families),
                false => query::kernels(timeline, &o.selection()?, &families, o.steps),
            }
        }
        "idle" => query::idle(timeline, &o.selection()?, o.launch_gap.unwrap_or(10_000)),
        "bubbles" => query::bubbles(timeline, &o.selection()?, o.pp, o.micro_batches),
        "collectives" => {
            let options = CollectiveOptions {
                p2p: o.p2p,
                by_rank: o.by_rank()?,
                top: o.top,
            };
            query::collectives(timeline, &o.selection()?, options)
        }
        "metrics" => query::metrics(timeline, &o.selection()?),
        "mfu" => {
            let options = MfuOptions {
                peak_tflops: o.peak_tflops,
                model_flops_per_step: o.model_flops_per_step,
            };
            query::mfu::mfu(timeline, &o.selection()?, options)
        }
        "critical_path" => query::critical::critical_path(timeline, &o.selection()?),
        "what_if" => {
            let changes = o
                .changes
                .iter()
                .map(|c| Change::parse(c).map_err(anyhow::Error::msg))
                .collect::<anyhow::Result<Vec<_>>>()?;
            anyhow::ensure!(!changes.is_empty(), "what_if needs at least one change");
            query::critical::what_if(timeline, &o.selection()?, &changes)
        }
        other => anyhow::bail!("no analysis `{other}`"),
    }
}

/// One column as Arrow buffers.
#[derive(Debug, Default)]
struct Column {
    name: &'static str,
    /// `int64`, `float64`, `bool` or `large_string`.
    kind: &'static str,
    validity: Option<Vec<u8>>,
    values: Vec<u8>,
    offsets: Option<Vec<u8>>,
}

/// A column's Arrow type: integers, numbers or yes/no when every present cell is one, else text.
fn kind(cells: &[&Cell]) -> &'static str {
    let present = || cells.iter().filter(|c| !matches!(c, Cell::Empty));
    if present().all(|c| matches!(c, Cell::Int(_) | Cell::Duration(_)))
        && present().next().is_some()
    {
        "int64"
    } else if present().all(|c| {
        matches!(
            c,
            Cell::Int(_) | Cell::Duration(_) | Cell::Percent(_) | Cell::Points(_) | Cell::Number(_)
        )
    }) && present().next().is_some()
    {
        "float64"
    } else if present().all(|c| matches!(c, Cell::Bool(_))) && present().next().is_some() {
        "bool"
    } else {
        "large_string"
    }
}

/// A cell as text: numbers as JSON writes them, structured detail as its JSON.
fn text(cell: &Cell) -> String {
    match cell {
        Cell::Int(v) | Cell::Duration(v) => v.to_string(),
        Cell::Text(s) => s.clone(),
        Cell::Percent(x) | Cell::Points(x) | Cell::Number(x) => {
            serde_json::Value::from(*x).to_string()
        }
        Cell::Bool(b) => b.to_string(),
        Cell::Detail(_, v) => v.to_string(),
        Cell::Empty => String::new(),
    }
}

/// Sets bit `i` of a bitmap (LSB first, as Arrow lays them out).
fn set_bit(bits: &mut [u8], i: usize) {
    bits[i / 8] |= 1 << (i % 8);
}

/// The table's columns as Arrow buffers.
fn columns(output: &Output) -> Vec<Column> {
    let table = &output.table;
    let n = table.rows.len();
    (0..table.columns.len())
        .map(|c| {
            let cells: Vec<&Cell> = table.rows.iter().map(|r| &r[c]).collect();
            let kind = kind(&cells);
            let mut validity = vec![0u8; n.div_ceil(8)];
            let mut nulls = 0;
            for (i, cell) in cells.iter().enumerate() {
                match cell {
                    Cell::Empty => nulls += 1,
                    _ => set_bit(&mut validity, i),
                }
            }
            let mut column = Column {
                name: table.columns[c],
                kind,
                validity: (nulls > 0).then_some(validity),
                ..Column::default()
            };
            match kind {
                "int64" => {
                    for cell in &cells {
                        let v = match cell {
                            Cell::Int(v) | Cell::Duration(v) => *v,
                            _ => 0,
                        };
                        column.values.extend(v.to_le_bytes());
                    }
                }
                "float64" => {
                    for cell in &cells {
                        let v = match cell {
                            Cell::Int(v) | Cell::Duration(v) => *v as f64,
                            Cell::Percent(x) | Cell::Points(x) | Cell::Number(x) => *x,
                            _ => 0.0,
                        };
                        column.values.extend(v.to_le_bytes());
                    }
                }
                "bool" => {
                    column.values = vec![0u8; n.div_ceil(8)];
                    for (i, cell) in cells.iter().enumerate() {
                        if let Cell::Bool(true) = cell {
                            set_bit(&mut column.values, i);
                        }
                    }
                }
                _ => {
                    let mut offsets = Vec::with_capacity((n + 1) * 8);
                    offsets.extend(0i64.to_le_bytes());
                    for cell in &cells {
                        column.values.extend(text(cell).into_bytes());
                        offsets.extend((column.values.len() as i64).to_le_bytes());
                    }
                    column.offsets = Some(offsets);
                }
            }
            column
        })
        .collect()
}

/// (name, Arrow type, rows, validity, values, offsets) of one column, for the Python layer.
type PyColumn<'py> = (
    &'static str,
    &'static str,
    usize,
    Option<Bound<'py, PyBytes>>,
    Bound<'py, PyBytes>,
    Option<Bound<'py, PyBytes>>,
);

/// A loaded run.
#[pyclass(module = "nsys_lens._native", frozen)]
struct Session {
    timeline: Timeline,
    inputs: Inputs,
}

#[pymethods]
impl Session {
    /// Reads the reports (exports, `.nsys-rep` reports, part files, directories) into one
    /// timeline, on their session clocks or (`align="collectives"`) corrected from the
    /// collectives that span hosts.
    #[staticmethod]
    #[pyo3(signature = (paths, align = "session", threads = None, export_dir = None))]
    fn open(
        py: Python<'_>,
        paths: Vec<PathBuf>,
        align: &str,
        threads: Option<usize>,
        export_dir: Option<PathBuf>,
    ) -> PyResult<Session> {
        let align = match align {
            "session" => Align::Session,
            "collectives" => Align::Collectives,
            other => {
                return Err(Error::new_err(format!(
                    "align must be \"session\" or \"collectives\", not {other:?}"
                )));
            }
        };
        let mut inputs = Inputs::new(paths);
        inputs.align = align;
        inputs.export_dir = export_dir;
        if let Some(threads) = threads {
            inputs.threads = threads.max(1);
        }
        let timeline = py.detach(|| inputs.load()).map_err(to_py)?.0;
        Ok(Session { timeline, inputs })
    }

    /// Runs an analysis (`overlap`, ...) with its options (JSON, the CLI's names); returns its
    /// columns as Arrow buffers, its notes and its context (JSON).
    fn query<'py>(
        &self,
        py: Python<'py>,
        command: &str,
        options: &str,
    ) -> PyResult<(Vec<PyColumn<'py>>, String, String)> {
        let options: Options = serde_json::from_str(options)
            .map_err(|e| Error::new_err(format!("bad options: {e}")))?;
        let output = py
            .detach(|| run(&self.timeline, command, &options))
            .map_err(to_py)?;
        let rows = output.table.rows.len();
        if rows == 0 {
            return Err(empty(command, &output.notes));
        }
        let columns = py.detach(|| columns(&output));
        let bytes = |b: &[u8]| PyBytes::new(py, b);
        let columns = columns
            .iter()
            .map(|c| {
                (
                    c.name,
                    c.kind,
                    rows,
                    c.validity.as_deref().map(bytes),
                    bytes(&c.values),
                    c.offsets.as_deref().map(bytes),
                )
            })
            .collect();
        let notes = serde_json::Value::from(output.notes.clone()).to_string();
        let context = serde_json::Value::Object(output.context.clone()).to_string();
        Ok((columns, notes, context))
    }

    /// Writes the run's traces (`perfetto`, `paraver` paths; options as JSON, the CLI's names),
    /// reading the reports again as `convert` does; returns what was written (JSON).
    fn convert(&self, py: Python<'_>, options: &str) -> PyResult<String> {
        let options: Options = serde_json::from_str(options)
            .map_err(|e| Error::new_err(format!("bad options: {e}")))?;
        py.detach(|| convert(&self.inputs, &options)).map_err(to_py)
    }
}

/// An empty table, as the CLI's exit 1: [`NothingFoundError`] with the notes that say why.
fn empty(command: &str, notes: &[String]) -> PyErr {
    let mut message = format!("{command}: the table is empty: nothing to report");
    for note in notes {
        message.push('\n');
        message.push_str(note);
    }
    NothingFoundError::new_err(message)
}

/// `convert`'s direct path: the reports read under the memory budget, the plan, both traces.
fn convert(inputs: &Inputs, o: &Options) -> anyhow::Result<String> {
    let first = inputs.reports.first().context("no report given")?;
    let targets = o.targets(first, inputs.threads)?;
    inputs.check_outputs(&targets.outputs())?;
    let rules = o.rules()?;
    let budget = Budget::new(o.memory_budget.unwrap_or(128 << 20));
    let (captures, _) = inputs.captures(budget)?;
    let activity = Activity::new(&captures.light);
    let window = (o.start.zip(o.end), o.anchor.as_deref(), o.steady);
    let ranks = o.ranks()?;
    let plan = query::conversion_plan(
        (&activity, &rules),
        &captures,
        ranks.as_ref(),
        window,
        o.collective_flows,
    )?;
    let written = export::write(&plan, &captures.parts, &targets)?;
    let mut summary = serde_json::Map::new();
    if let Some(p) = written.perfetto {
        let counts = serde_json::to_value(p.counts)?;
        summary.insert(
            "perfetto".into(),
            serde_json::json!({"path": p.path, "bytes": p.bytes, "counts": counts}),
        );
    }
    if let Some(p) = written.paraver {
        let counts = serde_json::to_value(p.counts)?;
        summary.insert(
            "paraver".into(),
            serde_json::json!({"path": p.prv, "bytes": p.bytes, "counts": counts}),
        );
    }
    Ok(serde_json::Value::Object(summary).to_string())
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Session>()?;
    m.add("Error", m.py().get_type::<Error>())?;
    m.add("NothingFound", m.py().get_type::<NothingFoundError>())?;
    Ok(())
}
