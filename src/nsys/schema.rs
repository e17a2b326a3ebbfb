//! Which tables and columns an export has, and reading a row's columns by name.
//!
//! nsys creates tables lazily and adds columns often (reference: nsys-sqlite.md §2.4, Appendix B), so
//! the reader probes `sqlite_master` and `PRAGMA table_info` once and builds every `SELECT` from the
//! columns it finds: an optional column that is missing is read as NULL, a required one is an error.

use super::error::{Error, Result};
use super::statement::Statement;
use crate::hash::FxHashMap;
use rusqlite::Connection;
use rusqlite::types::ValueRef;
use std::path::Path;

/// The tables of one export and their columns, in declared order.
#[derive(Debug, Default, Clone)]
pub struct Schema {
    tables: FxHashMap<String, Vec<String>>,
}

impl Schema {
    /// Probes every table of the database.
    pub(crate) fn probe(conn: &Connection, path: &Path) -> Result<Schema> {
        let sqlite = |source| Error::Sqlite {
            path: path.to_path_buf(),
            table: "sqlite_master".into(),
            cause: source,
        };
        let mut names = Vec::new();
        let mut stmt = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .map_err(sqlite)?;
        let mut rows = stmt.query([]).map_err(sqlite)?;
        while let Some(row) = rows.next().map_err(sqlite)? {
            names.push(row.get::<_, String>(0).map_err(sqlite)?);
        }
        let mut tables = FxHashMap::default();
        for name in names {
            let mut stmt = conn
                .prepare(&format!(
                    "PRAGMA table_info(\"{}\")",
                    name.replace('"', "\"\"")
                ))
                .map_err(sqlite)?;
            let columns = stmt
                .query_map([], |row| row.get::<_, String>(1))
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .map_err(sqlite)?;
            tables.insert(name, columns);
        }
        Ok(Schema { tables })
    }

    /// Whether the table exists.
    pub fn has_table(&self, table: &str) -> bool {
        self.tables.contains_key(table)
    }

    /// Whether the table exists and has the column.
    pub fn has_column(&self, table: &str, column: &str) -> bool {
        self.tables
            .get(table)
            .is_some_and(|cols| cols.iter().any(|c| c == column))
    }

    /// How many tables the export has.
    pub fn table_count(&self) -> usize {
        self.tables.len()
    }

    /// Builds `SELECT rowid, <columns> FROM <table> <tail>`, reading missing optional columns as NULL.
    /// A column may list alternative names (`"id|deviceId"`); the first present one is read.
    pub(crate) fn select(
        &self,
        path: &Path,
        table: &'static str,
        columns: &[Column],
        tail: &str,
    ) -> Result<String> {
        let mut sql = String::from("SELECT rowid");
        for column in columns {
            sql.push_str(", ");
            match column.names().find(|name| self.has_column(table, name)) {
                Some(name) => {
                    sql.push('"');
                    sql.push_str(name);
                    sql.push('"');
                }
                None if column.required => {
                    return Err(Error::MissingColumn {
                        path: path.to_path_buf(),
                        table,
                        column: column.name,
                    });
                }
                None => sql.push_str("NULL"),
            }
        }
        sql.push_str(" FROM \"");
        sql.push_str(table);
        sql.push_str("\" ");
        sql.push_str(tail);
        Ok(sql)
    }
}

/// A column a reader asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Column {
    /// Its name, or alternatives separated by `|`.
    pub name: &'static str,
    /// Whether the reader cannot do without it.
    pub required: bool,
}

impl Column {
    fn names(&self) -> impl Iterator<Item = &'static str> {
        self.name.split('|')
    }
}

/// A required column.
pub(crate) const fn req(name: &'static str) -> Column {
    Column {
        name,
        required: true,
    }
}

/// An optional column (NULL when absent).
pub(crate) const fn opt(name: &'static str) -> Column {
    Column {
        name,
        required: false,
    }
}

/// Reads the columns of one row in the order they were selected, with errors that name the file,
/// table, row and column. Column 0 is the rowid.
pub(crate) struct Fields<'a, 'r> {
    /// The statement, on the row being read.
    statement: &'a Statement<'r>,
    columns: &'static [Column],
    path: &'a Path,
    table: &'static str,
    /// The SQLite rowid of the row.
    pub rowid: i64,
    next: usize,
}

impl<'a, 'r> Fields<'a, 'r> {
    /// Starts reading the row `statement` (selected with [`Schema::select`]) is on.
    pub fn new(
        statement: &'a Statement<'r>,
        columns: &'static [Column],
        path: &'a Path,
        table: &'static str,
    ) -> Fields<'a, 'r> {
        let rowid = match statement.value(0) {
            ValueRef::Integer(id) => id,
            _ => -1,
        };
        Fields {
            statement,
            columns,
            path,
            table,
            rowid,
            next: 0,
        }
    }

    /// Moves to the next selected column; its index in the statement (after the rowid).
    fn next_column(&mut self) -> usize {
        assert!(
            self.next < self.columns.len(),
            "more columns read than selected"
        );
        self.next += 1;
        self.next
    }

    /// The next column's value.
    fn advance(&mut self) -> ValueRef<'a> {
        let column = self.next_column();
        self.statement.value(column)
    }

    /// An error about the column just read.
    pub fn bad(&self, problem: impl Into<String>) -> Error {
        Error::BadValue {
            path: self.path.to_path_buf(),
            table: self.table,
            row: self.rowid,
            column: self.columns[self.next - 1].name,
            problem: problem.into(),
        }
    }

    /// The next column as an integer, or None when NULL.
    pub fn opt_int(&mut self) -> Result<Option<i64>> {
        let column = self.next_column();
        match self.statement.integer(column) {
            Ok(v) => Ok(v),
            Err(ValueRef::Real(v)) if v.fract() == 0.0 && v.abs() < 9.0e18 => Ok(Some(v as i64)),
            Err(other) => Err(self.bad(format!(
                "holds {} where an integer is expected",
                type_name(other)
            ))),
        }
    }

    /// The next column as a real number (an integer reads as one), or None when NULL.
    pub fn opt_real(&mut self) -> Result<Option<f64>> {
        match self.advance() {
            ValueRef::Null => Ok(None),
            ValueRef::Integer(v) => Ok(Some(v as f64)),
            ValueRef::Real(v) => Ok(Some(v)),
            other => Err(self.bad(format!(
                "holds {} where a number is expected",
                type_name(other)
            ))),
        }
    }

    /// The next column as an integer that must not be NULL.
    pub fn int(&mut self) -> Result<i64> {
        self.opt_int()?.ok_or_else(|| self.bad("is NULL"))
    }

    /// The next column as an unsigned 32-bit value (NULL reads as `default`).
    pub fn u32_or(&mut self, default: u32) -> Result<u32> {
        match self.opt_int()? {
            None => Ok(default),
            Some(v) => u32::try_from(v).map_err(|_| self.bad(format!("value {v} is out of range"))),
        }
    }

    /// The next column as text bytes (TEXT or BLOB), or None when NULL.
    pub fn opt_bytes(&mut self) -> Result<Option<&'a [u8]>> {
        match self.advance() {
            ValueRef::Null => Ok(None),
            ValueRef::Text(bytes) | ValueRef::Blob(bytes) => Ok(Some(bytes)),
            other => Err(self.bad(format!("holds {} where text is expected", type_name(other)))),
        }
    }

    /// The name of the column that was read last.
    pub fn last_column(&self) -> &'static str {
        self.columns[self.next - 1].name
    }

    /// The file and table being read (for errors raised by callers).
    pub fn location(&self) -> (&'a Path, &'static str) {
        (self.path, self.table)
    }
}

fn type_name(value: ValueRef) -> &'static str {
    match value {
        ValueRef::Null => "NULL",
        ValueRef::Integer(_) => "an integer",
        ValueRef::Real(_) => "a real number",
        ValueRef::Text(_) => "text",
        ValueRef::Blob(_) => "a blob",
    }
}
