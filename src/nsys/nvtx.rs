//! Streaming reader for `NVTX_EVENTS` (nsys-sqlite.md §7): ranges and marks with their domain and
//! text resolved (`coalesce(text, StringIds[textId])`), domain names per process, NVTX thread names.

use super::chunks::{Chunking, Rows, read_in_order};
use super::error::Result;
use super::events::Clock;
use super::ids::GlobalId;
use super::report::Report;
use super::schema::{Column, Fields, opt, req};
use super::strings::{Deferred, DeferredName, Names, StringRef, StringResolver};
use crate::hash::FxHashMap;
use crate::model::{Ns, NvtxKind, StringId, StringTable};
use crate::model::{Warning, Warnings};

use super::tables::NVTX;

/// The NVTX domain in which nsys 2022.x records MPI calls (`--trace=mpi`).
const MPI_DOMAIN: &str = "MPI";

/// `ENUM_NSYS_EVENT_TYPE` ids used by NVTX (identical 2022.4 to 2026.2; hard-coded because
/// pre-2022 exports have no ENUM tables).
mod event_type {
    pub const CATEGORY: i64 = 33;
    pub const MARK: i64 = 34;
    pub const THREAD_NAME: i64 = 39;
    pub const PUSH_POP: i64 = 59;
    pub const START_END: i64 = 60;
    pub const NVTXT_PUSH_POP: i64 = 70;
    pub const NVTXT_START_END: i64 = 71;
    pub const DOMAIN_CREATE: i64 = 75;
    pub const DOMAIN_DESTROY: i64 = 76;
}

/// One NVTX range or mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvtxRow {
    /// Start (or the mark's time) on the merged clock; may be negative.
    pub start: Ns,
    /// End on the merged clock; None for marks and for ranges that never close.
    pub end: Option<Ns>,
    /// Push/pop range, start/end range or mark.
    pub kind: NvtxKind,
    /// Thread that opened the range.
    pub thread: GlobalId,
    /// Thread that closed a start/end range, when another one.
    pub end_thread: Option<GlobalId>,
    /// Domain name; [`StringId::EMPTY`] for the default domain.
    pub domain: StringId,
    /// The range's text.
    pub text: StringId,
    /// Whether it is in the domain `MPI`: an MPI call as nsys 2022.x records them.
    pub mpi: bool,
    /// Its payload: the JSON of an extended payload (`jsonText`, with `nsys export
    /// --include-json=true`), or a scalar payload's value as text; [`StringId::EMPTY`] when none.
    pub payload: StringId,
}

/// The columns of the main pass, in reading order.
const COLUMNS: &[Column] = &[
    req("start"),
    opt("end"),
    req("eventType"),
    opt("globalTid"),
    opt("endGlobalTid"),
    opt("domainId"),
    opt("text"),
    opt("textId"),
    opt("jsonText"),
    opt("jsonTextId"),
    opt("uint64Value"),
    opt("int64Value"),
    opt("doubleValue"),
    opt("uint32Value"),
    opt("int32Value"),
    opt("floatValue"),
];

/// An NVTX row as a scan decodes it: the text as the scan's [`Texts`] gives it, the domain as
/// its raw id (named by the consumer, in row order).
#[derive(Debug, Clone, Copy)]
struct RawRow<T> {
    start: Ns,
    end: Option<Ns>,
    kind: NvtxKind,
    thread: GlobalId,
    end_thread: Option<GlobalId>,
    domain_id: i64,
    text: T,
    payload: T,
}

impl<T> RawRow<T> {
    /// The same row with its text and payload in another form.
    fn with_texts<U>(self, text: U, payload: U) -> RawRow<U> {
        RawRow {
            start: self.start,
            end: self.end,
            kind: self.kind,
            thread: self.thread,
            end_thread: self.end_thread,
            domain_id: self.domain_id,
            text,
            payload,
        }
    }
}

/// What a scan makes of a row's text: inline text or a `StringIds` reference.
trait Texts {
    /// The text field.
    type Text: Copy;
    /// Inline text.
    fn inline(&mut self, bytes: &[u8]) -> Self::Text;
    /// A `StringIds` reference.
    fn registered(&mut self, id: i64, at: StringRef) -> Result<Self::Text>;
    /// No text.
    fn none(&mut self) -> Self::Text;
    /// Whether a text field is [`Texts::none`].
    fn is_none(&self, text: &Self::Text) -> bool;
}

impl Texts for StringResolver<'_> {
    type Text = StringId;

    fn inline(&mut self, bytes: &[u8]) -> StringId {
        self.intern_bytes(bytes)
    }

    fn registered(&mut self, id: i64, at: StringRef) -> Result<StringId> {
        self.resolve(id, at)
    }

    fn none(&mut self) -> StringId {
        StringId::EMPTY
    }

    fn is_none(&self, text: &StringId) -> bool {
        *text == StringId::EMPTY
    }
}

/// The text of a row read on another connection: inline text interned in the range's own table,
/// or a reference resolved by the consumer.
#[derive(Debug, Clone, Copy)]
enum RangeText {
    Inline(StringId),
    Registered(DeferredName),
    None,
}

/// A range's own string table, for the inline texts of its rows.
#[derive(Default)]
struct RangeTexts(StringTable);

impl Texts for RangeTexts {
    type Text = RangeText;

    fn inline(&mut self, bytes: &[u8]) -> RangeText {
        RangeText::Inline(self.0.intern_bytes(bytes))
    }

    fn registered(&mut self, id: i64, at: StringRef) -> Result<RangeText> {
        Ok(RangeText::Registered(Deferred.name(id, at)?))
    }

    fn none(&mut self) -> RangeText {
        RangeText::None
    }

    fn is_none(&self, text: &RangeText) -> bool {
        matches!(text, RangeText::None)
    }
}

/// A range's rows with the table their inline texts are in.
struct Batch {
    rows: Vec<RawRow<RangeText>>,
    texts: StringTable,
}

impl Report {
    /// Streams the rows of `NVTX_EVENTS` (ranges, marks and metadata: thread, category and domain
    /// names) with `chunking`, in rowid order; returns the number of rows read (all event types,
    /// so it equals `count(*)`). Read in ranges, inline texts are interned into each range's own
    /// table and moved into the timeline's as the rows are taken, in row order, so the strings,
    /// warnings and first error are those of one scan.
    pub fn read_nvtx(
        &self,
        chunking: Chunking,
        strings: &mut StringResolver,
        warnings: &mut Warnings,
        clock: Clock,
        mut sink: impl FnMut(NvtxRow),
    ) -> Result<u64> {
        let mut domains = self.nvtx_domains(strings)?;
        let mpi: Vec<StringId> = domains
            .values()
            .copied()
            .filter(|&d| strings.text(d) == MPI_DOMAIN)
            .collect();
        let mut finish = |raw: RawRow<StringId>, strings: &mut StringResolver| {
            let domain = if raw.domain_id == 0 {
                StringId::EMPTY
            } else {
                *domains
                    .entry((raw.thread.pid, raw.domain_id))
                    .or_insert_with(|| strings.intern(&format!("domain {}", raw.domain_id)))
            };
            sink(NvtxRow {
                start: raw.start,
                end: raw.end,
                kind: raw.kind,
                thread: raw.thread,
                end_thread: raw.end_thread,
                domain,
                text: raw.text,
                mpi: mpi.contains(&domain),
                payload: raw.payload,
            });
        };
        let Some(ranges) = chunking.ranges(self, NVTX)? else {
            return self.scan_nvtx(Rows::ALL, strings, warnings, clock, &mut |raw, s| {
                finish(raw, s)
            });
        };
        let read = |r: &Report, rows, w: &mut Warnings, out: &mut dyn FnMut(Batch)| {
            let mut texts = RangeTexts::default();
            let mut batch = Vec::new();
            let count = r.scan_nvtx(rows, &mut texts, w, clock, &mut |raw, _| batch.push(raw));
            out(Batch {
                rows: batch,
                texts: texts.0,
            });
            count
        };
        read_in_order(self, chunking.workers, &ranges, warnings, read, |batch| {
            let mut moved: Vec<Option<StringId>> = vec![None; batch.texts.len()];
            for raw in batch.rows {
                let mut resolve = |t: RangeText| -> Result<StringId> {
                    Ok(match t {
                        RangeText::Inline(local) => *moved[local.index()]
                            .get_or_insert_with(|| strings.intern(batch.texts.get(local))),
                        RangeText::Registered(name) => name.resolve(strings)?,
                        RangeText::None => StringId::EMPTY,
                    })
                };
                let (text, payload) = (resolve(raw.text)?, resolve(raw.payload)?);
                finish(raw.with_texts(text, payload), strings);
            }
            strings.count_non_utf8(batch.texts.non_utf8_count());
            Ok(())
        })
    }

    /// Scans the `rows` of `NVTX_EVENTS`, handing each modelled row to `each` with `texts`.
    fn scan_nvtx<T: Texts>(
        &self,
        rows: Rows,
        texts: &mut T,
        warnings: &mut Warnings,
        clock: Clock,
        each: &mut dyn FnMut(RawRow<T::Text>, &mut T),
    ) -> Result<u64> {
        self.for_each_row(NVTX, COLUMNS, &rows.tail(), |f| {
            let start = f.int()?;
            let end = f.opt_int()?;
            let kind = match f.int()? {
                event_type::MARK => NvtxKind::Mark,
                event_type::PUSH_POP | event_type::NVTXT_PUSH_POP => NvtxKind::PushPop,
                event_type::START_END | event_type::NVTXT_START_END => NvtxKind::StartEnd,
                event_type::CATEGORY
                | event_type::THREAD_NAME
                | event_type::DOMAIN_CREATE
                | event_type::DOMAIN_DESTROY => NvtxKind::Metadata,
                other => {
                    warnings.add(Warning::UnknownNvtxType(other));
                    return Ok(());
                }
            };
            let thread = GlobalId::decode(f.opt_int()?.unwrap_or(0));
            let end_thread = f.opt_int()?.map(GlobalId::decode);
            let domain_id = f.opt_int()?.unwrap_or(0);
            let text = text(f, texts)?;
            let payload = payload(f, texts)?;
            let end = match (kind, end) {
                (NvtxKind::Mark | NvtxKind::Metadata, _) => None,
                (_, None) => {
                    warnings.add(Warning::UnclosedNvtxRange);
                    None
                }
                (_, Some(end)) => Some(clock.span(start, end, f)?.1),
            };
            let raw = RawRow {
                start: clock.map(start, f)?,
                end,
                kind,
                thread,
                end_thread,
                domain_id,
                text,
                payload,
            };
            each(raw, texts);
            Ok(())
        })
    }

    /// Domain names per (pid, domainId), from the NvtxDomainCreate rows (domain ids are per process).
    fn nvtx_domains(
        &self,
        strings: &mut StringResolver,
    ) -> Result<FxHashMap<(u32, i64), StringId>> {
        let mut domains = FxHashMap::default();
        self.for_each_named_row(event_type::DOMAIN_CREATE, strings, |tid, id, name| {
            domains.insert((tid.pid, id), name);
        })?;
        Ok(domains)
    }

    /// Thread names given with `nvtxNameOsThread` (NvtxThread rows), by thread.
    pub fn nvtx_thread_names(
        &self,
        strings: &mut StringResolver,
    ) -> Result<FxHashMap<GlobalId, StringId>> {
        let mut names = FxHashMap::default();
        self.for_each_named_row(event_type::THREAD_NAME, strings, |tid, _, name| {
            names.insert(tid, name);
        })?;
        Ok(names)
    }

    /// Reads the (thread, domainId, text) of every row of one NVTX metadata event type.
    fn for_each_named_row(
        &self,
        event_type: i64,
        strings: &mut StringResolver,
        mut each: impl FnMut(GlobalId, i64, StringId),
    ) -> Result<()> {
        const NAMED: &[Column] = &[
            opt("globalTid"),
            opt("domainId"),
            opt("text"),
            opt("textId"),
        ];
        let tail = format!("WHERE eventType = {event_type}");
        self.for_each_row(NVTX, NAMED, &tail, |f| {
            let thread = GlobalId::decode(f.opt_int()?.unwrap_or(0));
            let domain = f.opt_int()?.unwrap_or(0);
            each(thread, domain, text(f, strings)?);
            Ok(())
        })?;
        Ok(())
    }
}

/// Reads the payload columns (`jsonText, jsonTextId`, then the scalar values): the JSON text,
/// else the one scalar value set, as text.
fn payload<T: Texts>(f: &mut Fields, texts: &mut T) -> Result<T::Text> {
    let json = text(f, texts)?;
    let mut scalar = None;
    for real in [false, false, true, false, false, true] {
        let value = if real {
            f.opt_real()?.map(|v| v.to_string())
        } else {
            f.opt_int()?.map(|v| v.to_string())
        };
        scalar = scalar.or(value);
    }
    Ok(match scalar {
        Some(value) if texts.is_none(&json) => texts.inline(value.as_bytes()),
        _ => json,
    })
}

/// Reads `text, textId` (the next two columns): inline text wins, else the registered string.
fn text<T: Texts>(f: &mut Fields, texts: &mut T) -> Result<T::Text> {
    if let Some(inline) = f.opt_bytes()? {
        f.opt_int()?;
        return Ok(texts.inline(inline));
    }
    match f.opt_int()? {
        Some(id) => texts.registered(
            id,
            StringRef {
                table: NVTX,
                row: f.rowid,
                column: "textId",
            },
        ),
        None => Ok(texts.none()),
    }
}
