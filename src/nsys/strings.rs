//! Mapping an export's `StringIds` onto the timeline's [`StringTable`].
//!
//! Only the ids that rows refer to are looked up (a primary-key query each, once per id), so the
//! large values a `StringIds` table also holds (environment blocks, file contents) never enter memory.
//! Values are read as bytes: they may contain NUL bytes or be invalid UTF-8 (nsys-sqlite.md §6).

use super::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::model::{StringId, StringTable};
use rusqlite::{CachedStatement, Connection, OptionalExtension};
use std::path::Path;

/// Resolves `StringIds` ids of one report to interned [`StringId`]s.
pub struct StringResolver<'r> {
    table: &'r mut StringTable,
    lookup: Option<CachedStatement<'r>>,
    map: FxHashMap<i64, StringId>,
    path: &'r Path,
}

/// Where a string id was found, for the error when it does not resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StringRef {
    pub table: &'static str,
    pub row: i64,
    pub column: &'static str,
}

/// What a reader makes of a `StringIds` reference in a row: the interned string
/// ([`StringResolver`]), or the reference itself, resolved later ([`Deferred`]).
pub(crate) trait Names {
    /// A row's name field.
    type Name: Copy;

    /// The name field for `StringIds` id `id`, found at `at`.
    fn name(&mut self, id: i64, at: StringRef) -> Result<Self::Name>;
}

impl Names for StringResolver<'_> {
    type Name = StringId;

    fn name(&mut self, id: i64, at: StringRef) -> Result<StringId> {
        self.resolve(id, at)
    }
}

/// Keeps `StringIds` references as they are, for rows read on another connection and resolved
/// in row order by the reader that consumes them (so strings are interned, and missing ones
/// reported, exactly as one sequential scan would).
pub(crate) struct Deferred;

/// A `StringIds` reference not yet resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeferredName {
    id: i64,
    at: StringRef,
}

impl Names for Deferred {
    type Name = DeferredName;

    fn name(&mut self, id: i64, at: StringRef) -> Result<DeferredName> {
        Ok(DeferredName { id, at })
    }
}

impl DeferredName {
    /// Resolves the reference.
    pub(crate) fn resolve(self, strings: &mut StringResolver) -> Result<StringId> {
        strings.resolve(self.id, self.at)
    }
}

/// One `StringIds` value, at most one byte past [`crate::model::MAX_TEXT`] (so that a huge value
/// never enters memory, and the interner still sees that it is too long).
const LOOKUP: &str = "SELECT substr(CAST(value AS BLOB), 1, 1048577) FROM StringIds WHERE id = ?1";

impl<'r> StringResolver<'r> {
    /// Prepares lookups into the report's `StringIds` (an export without one resolves nothing).
    pub(crate) fn new(
        conn: &'r Connection,
        has_string_ids: bool,
        table: &'r mut StringTable,
        path: &'r Path,
    ) -> Result<StringResolver<'r>> {
        let lookup = if has_string_ids {
            Some(
                conn.prepare_cached(LOOKUP)
                    .map_err(|source| Error::Sqlite {
                        path: path.to_path_buf(),
                        table: "StringIds".into(),
                        cause: source,
                    })?,
            )
        } else {
            None
        };
        Ok(StringResolver {
            table,
            lookup,
            map: FxHashMap::default(),
            path,
        })
    }

    /// The interned string of `StringIds` id `id`; an error names the row that referred to it.
    pub(crate) fn resolve(&mut self, id: i64, at: StringRef) -> Result<StringId> {
        if let Some(&found) = self.map.get(&id) {
            return Ok(found);
        }
        let missing = || Error::MissingString {
            path: self.path.to_path_buf(),
            table: at.table,
            row: at.row,
            column: at.column,
            id,
        };
        let Some(lookup) = self.lookup.as_mut() else {
            return Err(missing());
        };
        // substr() of an empty BLOB is NULL: the empty text (real exports have empty values).
        let bytes: Option<Option<Vec<u8>>> = lookup
            .query_row([id], |row| row.get(0))
            .optional()
            .map_err(|source| Error::Sqlite {
                path: self.path.to_path_buf(),
                table: "StringIds".into(),
                cause: source,
            })?;
        let bytes = bytes.ok_or_else(missing)?.unwrap_or_default();
        let interned = self.table.intern_bytes(&bytes);
        self.map.insert(id, interned);
        Ok(interned)
    }

    /// The text of an interned string.
    pub fn text(&self, id: StringId) -> &str {
        self.table.get(id)
    }

    /// Interns inline text (NVTX `text`) directly.
    pub(crate) fn intern_bytes(&mut self, bytes: &[u8]) -> StringId {
        self.table.intern_bytes(bytes)
    }

    /// Adds `n` non-UTF-8 texts interned elsewhere (a range's own table) to the count.
    pub(crate) fn count_non_utf8(&mut self, n: u64) {
        self.table.add_non_utf8(n);
    }

    /// Interns a string the reader makes up (such as `domain 3`).
    pub(crate) fn intern(&mut self, text: &str) -> StringId {
        self.table.intern(text)
    }
}
