//! One table, three renderings: aligned text for people, `{"rows": [...]}` JSON and CSV for
//! scripts, with the same column names (snake_case) in all three.

use super::Format;
use crate::time::{TimeUnit, with_separators};
use serde_json::{Map, Value};
use std::io::{self, Write};

/// One cell.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// An integer (ns, counts, ids).
    Int(i64),
    /// A duration in ns in a column that is not all durations: in a table's time unit for
    /// people, an integer in JSON and CSV. (In a `…_ns` column, [`Cell::Int`] is one too.)
    Duration(i64),
    /// Text.
    Text(String),
    /// A percentage in 0..100: `58.4%` in tables, a number in JSON and CSV.
    Percent(f64),
    /// A difference of two percentages, in points: `+2.4 pp` in tables, a number in JSON and
    /// CSV.
    Points(f64),
    /// A measured number that is not an integer (a mean): two decimals in tables.
    Number(f64),
    /// A yes/no: `yes`/`no` in tables, `true`/`false` in JSON and CSV.
    Bool(bool),
    /// Structured detail: a short text in tables and CSV, the value itself in JSON.
    Detail(String, Value),
    /// No value: `-` in tables, empty in CSV, null in JSON.
    Empty,
}

impl Cell {
    /// Text cell.
    pub fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }

    /// An optional yes/no.
    pub fn opt_bool(v: Option<bool>) -> Cell {
        v.map_or(Cell::Empty, Cell::Bool)
    }

    /// An optional integer.
    pub fn opt_int(v: Option<impl Into<i64>>) -> Cell {
        v.map_or(Cell::Empty, |v| Cell::Int(v.into()))
    }

    fn for_people(&self) -> String {
        match self {
            Cell::Int(v) | Cell::Duration(v) => v.to_string(),
            Cell::Text(s) => s.clone(),
            Cell::Percent(p) => format!("{:.1}%", tenths(*p)),
            Cell::Points(p) => format!("{:+.1} pp", tenths(*p)),
            Cell::Number(x) => format!("{x:.2}"),
            Cell::Bool(b) => if *b { "yes" } else { "no" }.to_string(),
            Cell::Detail(text, _) if text.is_empty() => "-".to_string(),
            Cell::Detail(text, _) => text.clone(),
            Cell::Empty => "-".to_string(),
        }
    }

    fn for_csv(&self) -> String {
        match self {
            Cell::Int(v) | Cell::Duration(v) => v.to_string(),
            Cell::Text(s) | Cell::Detail(s, _) if s.contains([',', '"', '\n', '\r']) => {
                format!("\"{}\"", s.replace('"', "\"\""))
            }
            Cell::Text(s) | Cell::Detail(s, _) => s.clone(),
            Cell::Percent(p) | Cell::Points(p) | Cell::Number(p) => p.to_string(),
            Cell::Bool(b) => b.to_string(),
            Cell::Empty => String::new(),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Cell::Int(v) | Cell::Duration(v) => Value::from(*v),
            Cell::Text(s) => Value::from(s.as_str()),
            Cell::Percent(p) | Cell::Points(p) | Cell::Number(p) => Value::from(*p),
            Cell::Bool(b) => Value::from(*b),
            Cell::Detail(_, v) => v.clone(),
            Cell::Empty => Value::Null,
        }
    }

    fn is_numeric(&self) -> bool {
        matches!(
            self,
            Cell::Int(_) | Cell::Duration(_) | Cell::Percent(_) | Cell::Points(_) | Cell::Number(_)
        )
    }
}

/// `v` rounded to tenths as tables print it, a zero never signed (`-0.04` prints `0.0`).
fn tenths(v: f64) -> f64 {
    let r = (v * 10.0).round() / 10.0;
    if r == 0.0 { 0.0 } else { r }
}

/// Columns holding counts, shown with thousands separators in tables.
pub const COUNT_COLUMNS: &[&str] = &[
    "kernels",
    "n_comm",
    "n_comp",
    "ops",
    "samples",
    "instances",
    "times_last",
    "collectives_used",
    "bytes",
    "flops",
];

/// What a column holds, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Duration,
    Count,
    Other,
}

impl Kind {
    fn of(column: &str) -> Kind {
        if column.ends_with("_ns") {
            Kind::Duration
        } else if COUNT_COLUMNS.contains(&column) {
            Kind::Count
        } else {
            Kind::Other
        }
    }
}

/// Rows under named columns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    /// Column names (snake_case; the JSON field names).
    pub columns: Vec<&'static str>,
    /// Rows, each with one cell per column.
    pub rows: Vec<Vec<Cell>>,
}

/// A command's result: the table, lines for people around it, and context fields for JSON.
#[derive(Debug, Clone, Default)]
pub struct Output {
    /// The rows.
    pub table: Table,
    /// Lines printed above the table (what it covers: window, inputs).
    pub heading: Vec<String>,
    /// Lines printed below the table (findings and caveats); `notes` in JSON.
    pub notes: Vec<String>,
    /// Extra JSON fields beside `rows` and `notes`.
    pub context: Map<String, Value>,
}

impl Table {
    /// A table with these columns and no rows.
    pub fn new(columns: &[&'static str]) -> Table {
        Table {
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (one cell per column).
    pub fn push(&mut self, row: Vec<Cell>) {
        debug_assert_eq!(row.len(), self.columns.len());
        self.rows.push(row);
    }

    /// Aligned text: text left-aligned, numbers right-aligned, a rule under the header;
    /// durations with units that fit them and counts with thousands separators.
    pub fn to_text(&self) -> String {
        self.to_text_in(TimeUnit::Auto)
    }

    /// [`Table::to_text`] with durations in `unit`. A column's name says what it holds, as the
    /// JSON and CSV name it: `…_ns` columns are durations (or times) in ns, the columns of
    /// `COUNT_COLUMNS` are counts.
    pub fn to_text_in(&self, unit: TimeUnit) -> String {
        let kinds: Vec<Kind> = self.columns.iter().map(|c| Kind::of(c)).collect();
        let cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                r.iter()
                    .zip(&kinds)
                    .map(|(cell, kind)| match (cell, kind) {
                        (Cell::Int(ns), Kind::Duration) | (Cell::Duration(ns), _) => {
                            unit.format(*ns)
                        }
                        (Cell::Int(n), Kind::Count) => with_separators(*n),
                        _ => cell.for_people(),
                    })
                    .collect()
            })
            .collect();
        let headers: Vec<String> = self
            .columns
            .iter()
            .zip(&kinds)
            .map(|(c, kind)| match kind {
                // `step_ns` beside `step` (the step's index) is `step_time`, not a second `step`.
                Kind::Duration if self.columns.iter().any(|o| o != c && *o == unit.column(c)) => {
                    unit.column(&format!("{}_time_ns", c.trim_end_matches("_ns")))
                }
                Kind::Duration => unit.column(c),
                _ => c.to_string(),
            })
            .collect();
        let widths: Vec<usize> = (0..self.columns.len())
            .map(|c| {
                cells
                    .iter()
                    .map(|r| r[c].chars().count())
                    .chain([headers[c].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let numeric: Vec<bool> = (0..self.columns.len())
            .map(|c| self.rows.iter().any(|r| r[c].is_numeric()))
            .collect();
        let line = |texts: &mut dyn Iterator<Item = (usize, String)>| {
            let mut parts: Vec<String> = texts
                .map(|(c, t)| {
                    if numeric[c] {
                        format!("{t:>w$}", w = widths[c])
                    } else {
                        format!("{t:<w$}", w = widths[c])
                    }
                })
                .collect();
            if let Some(last) = parts.last_mut() {
                *last = last.trim_end().to_string();
            }
            parts.join("  ") + "\n"
        };
        let mut out = line(&mut headers.into_iter().enumerate());
        out += &line(&mut widths.iter().map(|&w| "-".repeat(w)).enumerate());
        for row in cells {
            out += &line(&mut row.into_iter().enumerate());
        }
        out
    }

    /// CSV with a header row.
    pub fn to_csv(&self) -> String {
        let mut out = self.columns.join(",") + "\n";
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(Cell::for_csv).collect();
            out += &(cells.join(",") + "\n");
        }
        out
    }

    /// One JSON object per row.
    pub fn to_json_rows(&self) -> Vec<Value> {
        self.rows
            .iter()
            .map(|row| {
                let fields = self
                    .columns
                    .iter()
                    .zip(row)
                    .map(|(c, v)| (c.to_string(), v.to_json()));
                Value::Object(fields.collect())
            })
            .collect()
    }
}

impl Output {
    /// Writes the output in `format` (tables with durations in units that fit).
    pub fn write(&self, format: Format, out: &mut dyn Write) -> io::Result<()> {
        self.write_in(format, TimeUnit::Auto, out)
    }

    /// Writes the output in `format`, a table's durations in `unit`.
    pub fn write_in(&self, format: Format, unit: TimeUnit, out: &mut dyn Write) -> io::Result<()> {
        match format {
            Format::Table => {
                for line in &self.heading {
                    writeln!(out, "{line}")?;
                }
                out.write_all(self.table.to_text_in(unit).as_bytes())?;
                for note in &self.notes {
                    writeln!(out, "note: {note}")?;
                }
                Ok(())
            }
            Format::Csv => out.write_all(self.table.to_csv().as_bytes()),
            Format::Json => {
                let mut doc = Map::new();
                doc.insert("rows".into(), Value::Array(self.table.to_json_rows()));
                doc.extend(self.context.clone());
                doc.insert("notes".into(), Value::from(self.notes.clone()));
                super::write_json(&doc, out)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(&["rank", "role", "overlap_pct"]);
        t.push(vec![
            Cell::Int(0),
            Cell::text("ep_a2a"),
            Cell::Percent(58.44),
        ]);
        t.push(vec![Cell::Int(12), Cell::text("a,\"b\""), Cell::Empty]);
        t
    }

    #[test]
    fn percentages_and_points_never_print_a_negative_zero() {
        assert_eq!(Cell::Percent(-0.04).for_people(), "0.0%");
        assert_eq!(Cell::Percent(58.44).for_people(), "58.4%");
        assert_eq!(Cell::Points(-0.04).for_people(), "+0.0 pp");
        assert_eq!(Cell::Points(-8.04).for_people(), "-8.0 pp");
        assert_eq!(Cell::Points(2.5).to_json(), serde_json::json!(2.5));
    }

    #[test]
    fn text_aligns_numbers_right_and_text_left() {
        assert_eq!(
            sample().to_text(),
            "rank  role    overlap_pct\n\
             ----  ------  -----------\n   \
             0  ep_a2a        58.4%\n  \
             12  a,\"b\"             -\n"
        );
    }

    /// `bubbles` printed two columns named `step`: the step's index and its duration.
    #[test]
    fn a_duration_column_never_takes_the_name_of_another() {
        let mut t = Table::new(&["step", "step_ns", "busy_ns"]);
        t.push(vec![Cell::Int(0), Cell::Int(1_500_000), Cell::Int(900)]);
        let header = |unit| t.to_text_in(unit).lines().next().unwrap().to_string();
        assert_eq!(header(TimeUnit::Auto), "step  step_time    busy");
        assert_eq!(header(TimeUnit::Ns), "step  step_ns  busy_ns");
        assert_eq!(header(TimeUnit::Ms), "step  step_ms  busy_ms");
    }

    #[test]
    fn csv_quotes_and_json_keeps_numbers() {
        assert_eq!(
            sample().to_csv(),
            "rank,role,overlap_pct\n0,ep_a2a,58.44\n12,\"a,\"\"b\"\"\",\n"
        );
        let rows = sample().to_json_rows();
        assert_eq!(rows[0]["overlap_pct"], 58.44);
        assert_eq!(rows[1]["overlap_pct"], Value::Null);
        assert_eq!(rows[1]["rank"], 12);
    }
}
