//! Streaming reader for `NVTX_EVENTS` (nsys-sqlite.md §7): ranges and marks with their domain and
//! text resolved (`coalesce(text, StringIds[textId])`), domain names per process, NVTX thread names.

use super::error::Result;
use super::events::Clock;
use super::ids::GlobalId;
use super::report::Report;
use super::schema::{Column, Fields, opt, req};
use super::strings::{StringRef, StringResolver};
use super::warnings::{Warning, Warnings};
use crate::hash::FxHashMap;
use crate::model::{Ns, NvtxKind, StringId};

const NVTX: &str = "NVTX_EVENTS";

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
];

impl Report {
    /// Streams the rows of `NVTX_EVENTS` (ranges, marks and metadata: thread, category and domain
    /// names); returns the number of rows read (all event types, so it equals `count(*)`).
    pub fn read_nvtx(
        &self,
        strings: &mut StringResolver,
        warnings: &mut Warnings,
        clock: Clock,
        mut sink: impl FnMut(NvtxRow),
    ) -> Result<u64> {
        let mut domains = self.nvtx_domains(strings)?;
        self.for_each_row(NVTX, COLUMNS, "", |f| {
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
            let text = text(f, strings)?;
            let end = match (kind, end) {
                (NvtxKind::Mark | NvtxKind::Metadata, _) => None,
                (_, None) => {
                    warnings.add(Warning::UnclosedNvtxRange);
                    None
                }
                (_, Some(end)) => Some(clock.span(start, end, f)?.1),
            };
            let domain = if domain_id == 0 {
                StringId::EMPTY
            } else {
                *domains
                    .entry((thread.pid, domain_id))
                    .or_insert_with(|| strings.intern(&format!("domain {domain_id}")))
            };
            sink(NvtxRow {
                start: clock.map(start, f)?,
                end,
                kind,
                thread,
                end_thread,
                domain,
                text,
            });
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

/// Reads `text, textId` (the next two columns): inline text wins, else the registered string.
fn text(f: &mut Fields, strings: &mut StringResolver) -> Result<StringId> {
    if let Some(inline) = f.opt_bytes()? {
        f.opt_int()?;
        return Ok(strings.intern_bytes(inline));
    }
    match f.opt_int()? {
        Some(id) => strings.resolve(
            id,
            StringRef {
                table: NVTX,
                row: f.rowid,
                column: "textId",
            },
        ),
        None => Ok(StringId::EMPTY),
    }
}
