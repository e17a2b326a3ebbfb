//! The one string interner of a [`Timeline`](super::Timeline).
//!
//! Text enters the model exactly once, here: kernel names, API names, NVTX texts, thread and process
//! names become [`StringId`]s, and everything downstream compares ids. Exporters turn an id back into
//! text with a `Vec` lookup ([`StringTable::get`]).

use crate::hash::FxBuildHasher;
use indexmap::IndexSet;

/// An interned string of one [`StringTable`]. Created by [`StringTable::intern`]; valid only for the
/// table (and so the timeline) that created it. The same text always gets the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StringId(pub(crate) u32);

impl StringId {
    /// The empty string, interned first by every table.
    pub const EMPTY: StringId = StringId(0);

    /// The id as an index (dense, from 0), for tables indexed by string.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Deduplicated, append-only storage of every string of a timeline.
#[derive(Debug, Clone)]
pub struct StringTable {
    set: IndexSet<Box<str>, FxBuildHasher>,
    non_utf8: u64,
    /// Texts cut to [`MAX_TEXT`] bytes.
    cut: u64,
}

/// The longest text kept, bytes: a name or NVTX text is short, so a longer one is damage or
/// hostility, and is cut ([`StringTable::cut_count`]).
pub const MAX_TEXT: usize = 1 << 20;

impl Default for StringTable {
    fn default() -> Self {
        let mut table = StringTable {
            set: IndexSet::default(),
            non_utf8: 0,
            cut: 0,
        };
        table.intern("");
        table
    }
}

impl StringTable {
    /// Returns the id of `text`, adding it when new.
    pub fn intern(&mut self, text: &str) -> StringId {
        if let Some(index) = self.set.get_index_of(text) {
            return StringId(index as u32);
        }
        let (index, _) = self.set.insert_full(text.into());
        StringId(u32::try_from(index).expect("more than 4 billion distinct strings"))
    }

    /// Interns raw bytes from an export: valid UTF-8 is taken as it is, anything else is decoded
    /// lossily (invalid sequences become U+FFFD) and counted in [`StringTable::non_utf8_count`];
    /// past [`MAX_TEXT`] bytes the text is cut (at a character's start) and counted in
    /// [`StringTable::cut_count`].
    pub fn intern_bytes(&mut self, bytes: &[u8]) -> StringId {
        let bytes = if bytes.len() > MAX_TEXT {
            self.cut += 1;
            let head = &bytes[..MAX_TEXT];
            match std::str::from_utf8(head) {
                Err(e) if e.error_len().is_none() => &head[..e.valid_up_to()],
                _ => head,
            }
        } else {
            bytes
        };
        match std::str::from_utf8(bytes) {
            Ok(text) => self.intern(text),
            Err(_) => {
                self.non_utf8 += 1;
                self.intern(&String::from_utf8_lossy(bytes))
            }
        }
    }

    /// Interns every string of `other`, in its order, and adds its count of non-UTF-8 text;
    /// returns the new id of each of its ids.
    pub(crate) fn absorb(&mut self, other: &StringTable) -> Vec<StringId> {
        self.non_utf8 += other.non_utf8;
        other.set.iter().map(|text| self.intern(text)).collect()
    }

    /// Adds `n` to the count of non-UTF-8 text (interned through another table first).
    pub(crate) fn add_non_utf8(&mut self, n: u64) {
        self.non_utf8 += n;
    }

    /// The text of an id.
    pub fn get(&self, id: StringId) -> &str {
        self.set.get_index(id.index()).map_or("", |s| s)
    }

    /// The id of `text` if it was interned.
    pub fn lookup(&self, text: &str) -> Option<StringId> {
        self.set.get_index_of(text).map(|i| StringId(i as u32))
    }

    /// How many distinct strings the table holds (the empty string included).
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether the table holds only the empty string.
    pub fn is_empty(&self) -> bool {
        self.set.len() <= 1
    }

    /// How many interned texts were cut to [`MAX_TEXT`] bytes.
    pub fn cut_count(&self) -> u64 {
        self.cut
    }

    /// How many interned byte strings were not valid UTF-8.
    pub fn non_utf8_count(&self) -> u64 {
        self.non_utf8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_text_same_id_and_empty_first() {
        let mut t = StringTable::default();
        assert_eq!(t.intern(""), StringId::EMPTY);
        let a = t.intern("ncclDevKernel_SendRecv");
        let b = t.intern("elementwise_kernel");
        assert_ne!(a, b);
        assert_eq!(t.intern("ncclDevKernel_SendRecv"), a);
        assert_eq!(t.get(b), "elementwise_kernel");
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily_and_counted() {
        let mut t = StringTable::default();
        let id = t.intern_bytes(b"gpu\xff\xfeinfo");
        assert_eq!(t.get(id), "gpu\u{fffd}\u{fffd}info");
        assert_eq!(t.non_utf8_count(), 1);
        let nul = t.intern_bytes(b"A=1\0B=2");
        assert_eq!(t.get(nul), "A=1\0B=2");
        assert_eq!(t.non_utf8_count(), 1);
    }
}
