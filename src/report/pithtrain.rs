//! The four PithTrain tables (analyses.md §1), printed byte for byte as its scripts print them:
//! every cell left-justified to its column's width (in characters), one space between columns,
//! trailing spaces kept, a dashed rule under the header; percentages as Python's
//! `f"{round(x, 2)}%"`.

use super::table::{Cell, Table};
use crate::analysis::pithtrain::{ChunkWindow, OverlapRow, Setup, StreamRow};

/// `show_setup`: `pid | setup`.
pub fn setup_table(records: &[Setup]) -> Table {
    let mut t = Table::new(&["pid", "setup"]);
    for r in records {
        t.push(vec![Cell::Int(r.pid.into()), Cell::text(&r.text)]);
    }
    t
}

/// `find_window`: `pid | start | end | name`.
pub fn window_table(windows: &[(u32, ChunkWindow)]) -> Table {
    let mut t = Table::new(&["pid", "start", "end", "name"]);
    for (pid, w) in windows {
        t.push(vec![
            Cell::Int((*pid).into()),
            Cell::Int(w.start),
            Cell::Int(w.end),
            Cell::text(&w.name),
        ]);
    }
    t
}

/// `classify_streams`: `pid | stream | n_comm | n_comp | comm_ns | comp_ns | purpose`.
pub fn streams_table(rows: &[(u32, StreamRow)]) -> Table {
    let mut t = Table::new(&[
        "pid", "stream", "n_comm", "n_comp", "comm_ns", "comp_ns", "purpose",
    ]);
    for (pid, r) in rows {
        t.push(vec![
            Cell::Int((*pid).into()),
            Cell::Int(r.stream.into()),
            Cell::Int(r.n_comm as i64),
            Cell::Int(r.n_comp as i64),
            Cell::Int(r.comm_ns),
            Cell::Int(r.comp_ns),
            Cell::text(r.purpose),
        ]);
    }
    t
}

/// `compute_overlap`: `pid | stage | exposed_ns | overlap | overlap_min | overlap_max`, the
/// percentages as PithTrain's strings.
pub fn overlap_table(rows: &[(u32, OverlapRow)]) -> Table {
    let mut t = Table::new(&[
        "pid",
        "stage",
        "exposed_ns",
        "overlap",
        "overlap_min",
        "overlap_max",
    ]);
    for (pid, r) in rows {
        t.push(vec![
            Cell::Int((*pid).into()),
            Cell::text(r.stage.to_string()),
            Cell::Int(r.exposed_ns),
            Cell::text(python_percent(r.overlap)),
            Cell::text(python_percent(r.overlap_min)),
            Cell::text(python_percent(r.overlap_max)),
        ]);
    }
    t
}

/// The table as PithTrain's printer writes it.
pub fn python_text(table: &Table) -> String {
    let cells: Vec<Vec<String>> = table
        .rows
        .iter()
        .map(|r| r.iter().map(python_str).collect())
        .collect();
    let widths: Vec<usize> = (0..table.columns.len())
        .map(|c| {
            cells
                .iter()
                .map(|r| r[c].chars().count())
                .chain([table.columns[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |texts: Vec<String>| {
        let padded: Vec<String> = texts
            .iter()
            .zip(&widths)
            .map(|(t, &w)| format!("{t:<w$}"))
            .collect();
        padded.join(" ") + "\n"
    };
    let mut out = line(table.columns.iter().map(|c| c.to_string()).collect());
    out += &line(widths.iter().map(|&w| "-".repeat(w)).collect());
    for row in cells {
        out += &line(row);
    }
    out
}

/// Python's `str()` of the cell's value.
fn python_str(cell: &Cell) -> String {
    match cell {
        Cell::Int(v) | Cell::Duration(v) => v.to_string(),
        Cell::Text(s) | Cell::Detail(s, _) => s.clone(),
        Cell::Percent(p) => python_percent(*p),
        Cell::Points(x) | Cell::Number(x) => x.to_string(),
        Cell::Bool(b) => if *b { "True" } else { "False" }.to_string(),
        Cell::Empty => "None".to_string(),
    }
}

/// `f"{round(x, 2)}%"`: rounded half-to-even on the exact binary value, then the shortest
/// form with at least one decimal (`58.4%`, `100.0%`, `0.12%` for 0.125).
pub fn python_percent(x: f64) -> String {
    // `{:.2}` rounds the exact binary value, ties to even (Rust's exact formatting).
    let mut s = format!("{x:.2}");
    while s.ends_with('0') {
        s.pop();
    }
    if s.ends_with('.') {
        s.push('0');
    }
    s + "%"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_like_python() {
        // Python: round(0.125, 2) == 0.12, round(2.675, 2) == 2.67 (binary value below .675),
        // round(0.375, 2) == 0.38 (tie to even), round(100.0, 2) == 100.0.
        let cases = [
            (0.125, "0.12%"),
            (2.675, "2.67%"),
            (0.375, "0.38%"),
            (100.0, "100.0%"),
            (58.4, "58.4%"),
            (33.333333333, "33.33%"),
            (0.0, "0.0%"),
            (12.0049999, "12.0%"),
            (99.995, "100.0%"),
        ];
        for (x, want) in cases {
            assert_eq!(python_percent(x), want, "{x}");
        }
    }

    #[test]
    fn printer_pads_every_cell_including_the_last() {
        let mut t = Table::new(&["pid", "setup"]);
        t.push(vec![Cell::Int(7), Cell::text("rank=0")]);
        t.push(vec![Cell::Int(12345), Cell::text("é")]);
        assert_eq!(
            python_text(&t),
            "pid   setup \n----- ------\n7     rank=0\n12345 é     \n"
        );
    }
}
