//! Opening one export: checks that it is an nsys SQLite export, probes its schema and reads what it
//! says about itself (versions, host, session start, GPUs, streams, process and thread names).

use super::error::{Error, Result};
use super::ids::GlobalId;
use super::schema::{Column, Fields, Schema, opt, req};
use super::statement::Statement;
use super::strings::{StringRef, StringResolver};
use crate::hash::{FxHashMap, FxHashSet};
use crate::input::export::{
    SOURCE_FORMAT, SOURCE_PATH, TIME_ORIGIN, UNTRANSLATED, WORLD_SIZE, parse_untranslated,
};
use crate::model::{ExportMeta, Format, HostGpu, StringId, StringTable, Warning, Warnings};
use rusqlite::{Connection, OpenFlags};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The highest export schema minor version this build was written against (2026.4 doc: 3.28.1).
const KNOWN_SCHEMA: (u32, u32) = (3, 28);

/// `TARGET_INFO_SYSTEM_ENV.nameEnum` of the `Hostname` row (every version 2022.4 to 2026.2).
const HOSTNAME_ENUM: i64 = 619;

/// Tables whose presence marks an nsys export.
const EXPORT_TABLES: &[&str] = &[
    "StringIds",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
    "TARGET_INFO_GPU",
];

/// The event tables a timeline reads, whose rows the progress line counts.
const EVENT_TABLES: &[&str] = &[
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    "NVTX_EVENTS",
    "OSRT_API",
    "GPU_METRICS",
    "CUDA_GPU_MEMORY_USAGE_EVENTS",
];

/// The name of an event table, as the reader spells it (None when it reads no such table).
pub fn table_name(name: &str) -> Option<&'static str> {
    EVENT_TABLES.iter().copied().find(|&t| t == name)
}

/// One open export, read-only.
pub struct Report {
    path: PathBuf,
    /// The trace this export was translated from, when it was.
    input: Option<PathBuf>,
    /// The raw time its events count from ([`TIME_ORIGIN`]; 0 in nsys's own exports).
    time_origin: i64,
    pub(crate) conn: Connection,
    pub(crate) schema: Schema,
    meta: ExportMeta,
    pub(crate) warnings: Warnings,
}

/// A CUDA stream as `TARGET_INFO_CUDA_STREAM` lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamInfo {
    /// Owning process.
    pub pid: u32,
    /// CUDA context.
    pub context: u32,
    /// Stream id within the context.
    pub stream: u32,
    /// Priority (stored unsigned 32-bit; cast back to i32).
    pub priority: i32,
    /// `ENUM_CUPTI_STREAM_TYPE`: 1 default, 2 non-blocking, 3 null.
    pub flag: u8,
}

impl Report {
    /// Opens an export read-only and reads its metadata. Fails with a message naming the file when
    /// it is missing, a directory, empty, not SQLite, or a SQLite database that is not an nsys export.
    ///
    /// Nothing is ever written beside the input: a file no other program is writing (no `-wal`
    /// or `-journal` beside it) is opened immutable, which takes no locks and creates no `-shm` or
    /// `-wal` file even for a WAL-mode database; one that is being written is opened read-only
    /// and waits up to two seconds (`BUSY_TIMEOUT`) for the writer's lock.
    pub fn open(path: &Path) -> Result<Report> {
        check_file(path)?;
        let conn = connect(path)?;
        let schema = Schema::probe(&conn, path)?;
        if !EXPORT_TABLES.iter().any(|t| schema.has_table(t)) {
            let reason = if schema.table_count() == 0 {
                "it has no tables".to_string()
            } else {
                format!("none of the tables {}", EXPORT_TABLES.join(", "))
            };
            return Err(Error::NotAnExport {
                path: path.to_path_buf(),
                reason,
            });
        }
        let mut report = Report {
            path: path.to_path_buf(),
            input: None,
            time_origin: 0,
            conn,
            schema,
            meta: ExportMeta::default(),
            warnings: Warnings::default(),
        };
        report.meta = report.read_meta()?;
        super::progress::expect(report.estimated_rows());
        Ok(report)
    }

    /// Another read-only connection to the same export, for a worker reading beside this one.
    pub(crate) fn reopen(&self) -> Result<Report> {
        Ok(Report {
            path: self.path.clone(),
            input: self.input.clone(),
            time_origin: self.time_origin,
            conn: connect(&self.path)?,
            schema: self.schema.clone(),
            meta: self.meta.clone(),
            warnings: Warnings::default(),
        })
    }

    /// About how many event rows the export holds: each event table's largest rowid (the end of
    /// its B-tree, read without a scan); 0 for a table that cannot say.
    fn estimated_rows(&self) -> u64 {
        EVENT_TABLES
            .iter()
            .filter(|t| self.schema.has_table(t))
            .filter_map(|t| {
                let sql = format!("SELECT max(rowid) FROM {t}");
                self.conn
                    .query_row(&sql, [], |r| r.get::<_, Option<i64>>(0))
                    .ok()
                    .flatten()
            })
            .map(|n| n.max(0) as u64)
            .sum()
    }

    /// The file this report was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file the user gave: the trace a translated export came from, else [`Report::path`].
    pub fn input_path(&self) -> &Path {
        self.input.as_deref().unwrap_or(&self.path)
    }

    /// The raw time the report's events count from: a translation keeps its trace's own times
    /// and names the first event's ([`TIME_ORIGIN`]), which the reader subtracts from every time;
    /// 0 for nsys's own exports.
    pub fn time_origin(&self) -> i64 {
        self.time_origin
    }

    /// What the export says about itself.
    pub fn meta(&self) -> &ExportMeta {
        &self.meta
    }

    /// The schema probe.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Warnings raised while reading this report so far.
    pub fn warnings(&self) -> &Warnings {
        &self.warnings
    }

    /// A resolver from this report's `StringIds` into `strings`.
    pub fn strings<'r>(&'r self, strings: &'r mut StringTable) -> Result<StringResolver<'r>> {
        StringResolver::new(
            &self.conn,
            self.schema.has_table("StringIds"),
            strings,
            &self.path,
        )
    }

    pub(crate) fn sqlite_error(&self, table: &str, source: rusqlite::Error) -> Error {
        Error::Sqlite {
            path: self.path.clone(),
            table: table.to_string(),
            cause: source,
        }
    }

    /// Runs `SELECT <columns> FROM <table> <tail>` and hands each row to `each`. Does nothing when
    /// the table is absent (nsys creates tables lazily). Returns the number of rows.
    pub(crate) fn for_each_row(
        &self,
        table: &'static str,
        columns: &'static [Column],
        tail: &str,
        mut each: impl FnMut(&mut Fields) -> Result<()>,
    ) -> Result<u64> {
        if !self.schema.has_table(table) {
            return Ok(0);
        }
        let sql = self.schema.select(&self.path, table, columns, tail)?;
        let mut stmt =
            Statement::prepare(&self.conn, &sql).map_err(|e| self.sqlite_error(table, e))?;
        let mut count = 0;
        while stmt.step().map_err(|e| self.sqlite_error(table, e))? {
            each(&mut Fields::new(&stmt, columns, &self.path, table))?;
            count += 1;
            if count % super::progress::BATCH == 0 {
                super::progress::advance(super::progress::BATCH);
            }
        }
        super::progress::advance(count % super::progress::BATCH);
        Ok(count)
    }

    fn key_values(&self, table: &'static str) -> Result<FxHashMap<String, String>> {
        const COLUMNS: &[Column] = &[req("name"), opt("value")];
        let mut map = FxHashMap::default();
        self.for_each_row(table, COLUMNS, "", |f| {
            let name = lossy(f.opt_bytes()?);
            let value = lossy(f.opt_bytes()?);
            map.entry(name).or_insert(value);
            Ok(())
        })?;
        Ok(map)
    }

    fn read_meta(&mut self) -> Result<ExportMeta> {
        let table = if self.schema.has_table("META_DATA_EXPORT") {
            "META_DATA_EXPORT"
        } else {
            "EXPORT_META_DATA"
        };
        let kv = self.key_values(table)?;
        if let Some(origin) = kv.get(TIME_ORIGIN) {
            self.time_origin = origin.parse().map_err(|_| Error::BadValue {
                path: self.path.clone(),
                table: "META_DATA_EXPORT",
                row: 0,
                column: TIME_ORIGIN,
                problem: format!("is {origin:?}, not a time in ns"),
            })?;
            let limit = super::events::TIME_LIMIT;
            if !(-limit..=limit).contains(&self.time_origin) {
                return Err(Error::OutOfRange {
                    path: self.path.clone(),
                    field: "META_DATA_EXPORT.NSYS_LENS_TIME_ORIGIN",
                    value: self.time_origin,
                    expected: "a time within ±2^61 ns",
                });
            }
        }
        let schema_version = kv.get("EXPORT_SCHEMA_VERSION").cloned();
        if let Some(version) = &schema_version
            && is_newer_schema(version)
        {
            self.warnings.add(Warning::NewerSchema(version.clone()));
        }
        let mut time_normalized = kv
            .get("EXPORT_PARAM_TIME_NORMALIZE")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        if !time_normalized && self.first_time_is_epoch()? {
            self.warnings.add(Warning::EpochTimesWithoutMetadata);
            time_normalized = true;
        }
        let (session_start_utc_ns, session_start_text) = self.session_start()?;
        if session_start_utc_ns.is_none() {
            let translated = kv.contains_key(SOURCE_FORMAT);
            self.warnings.add(match translated {
                true => Warning::NoClockBase,
                false => Warning::NoSessionStart,
            });
        }
        let hostname = match self.hostname()? {
            Some(host) => host,
            None => {
                self.warnings.add(Warning::NoHostname);
                self.path
                    .file_stem()
                    .map_or_else(|| "unknown".into(), |s| s.to_string_lossy().into_owned())
            }
        };
        self.input = kv.get(SOURCE_PATH).map(PathBuf::from);
        let untranslated = kv
            .get(UNTRANSLATED)
            .map_or_else(Vec::new, |t| parse_untranslated(t));
        for (kind, n) in untranslated {
            self.warnings.add_n(Warning::Untranslated(kind), n);
        }
        Ok(ExportMeta {
            source: kv.get(SOURCE_FORMAT).and_then(|f| Format::from_id(f)),
            product_version: kv.get("EXPORT_PRODUCT_VERSION").cloned(),
            schema_version,
            time_normalized,
            hostname,
            session_start_utc_ns,
            session_start_text,
            gpus: self.host_gpus()?,
            world_size: kv.get(WORLD_SIZE).and_then(|n| n.parse().ok()),
        })
    }

    /// Whether the first event time is a UTC epoch time (> 1e17 ns, i.e. after 1973) rather than
    /// session-relative: the fallback when the metadata does not record `--ts-normalize`.
    fn first_time_is_epoch(&self) -> Result<bool> {
        const COLUMNS: &[Column] = &[req("start")];
        for table in [
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            "NVTX_EVENTS",
        ] {
            let mut first = None;
            self.for_each_row(table, COLUMNS, "LIMIT 1", |f| {
                first = f.opt_int()?;
                Ok(())
            })?;
            if let Some(t) = first {
                return Ok(t.saturating_sub(self.time_origin) > 100_000_000_000_000_000);
            }
        }
        Ok(false)
    }

    /// The session start (UTC epoch ns) and its text: that of the report's time 0, or of its
    /// [`Report::time_origin`] where it names one. A start outside the merged clock's range
    /// (1970 to 2043, [`super::events::TIME_LIMIT`]) is refused, as every time of the report
    /// would be shifted by it.
    fn session_start(&self) -> Result<(Option<i64>, Option<String>)> {
        const COLUMNS: &[Column] = &[req("utcEpochNs"), opt("utcTime")];
        let mut found = (None, None);
        self.for_each_row("TARGET_INFO_SESSION_START_TIME", COLUMNS, "LIMIT 1", |f| {
            found = (f.opt_int()?, f.opt_bytes()?.map(|b| lossy(Some(b))));
            Ok(())
        })?;
        if self.time_origin != 0
            && let Some(start) = found.0
        {
            let start = start.saturating_add(self.time_origin);
            found = (
                Some(start),
                Some(crate::time::utc_iso(start)[..19].to_string()),
            );
        }
        if let Some(start) = found.0
            && !(0..super::events::TIME_LIMIT).contains(&start)
        {
            return Err(Error::OutOfRange {
                path: self.path.clone(),
                field: "TARGET_INFO_SESSION_START_TIME.utcEpochNs",
                value: start,
                expected: "UTC ns between 1970 and 2043",
            });
        }
        Ok(found)
    }

    fn hostname(&self) -> Result<Option<String>> {
        const COLUMNS: &[Column] = &[req("name"), opt("nameEnum"), req("value")];
        let mut host = None;
        self.for_each_row("TARGET_INFO_SYSTEM_ENV", COLUMNS, "", |f| {
            let name = f.opt_bytes()?;
            let name_enum = f.opt_int()?;
            let value = f.opt_bytes()?;
            if host.is_none() && (name == Some(b"Hostname") || name_enum == Some(HOSTNAME_ENUM)) {
                host = Some(lossy(value)).filter(|h| !h.is_empty());
            }
            Ok(())
        })?;
        Ok(host)
    }

    fn host_gpus(&self) -> Result<Vec<HostGpu>> {
        const COLUMNS: &[Column] = &[req("id|deviceId"), opt("name"), opt("busLocation")];
        let mut gpus = Vec::new();
        self.for_each_row("TARGET_INFO_GPU", COLUMNS, "", |f| {
            gpus.push(HostGpu {
                id: f.int()?,
                name: lossy(f.opt_bytes()?),
                bus_location: f.opt_bytes()?.map(|b| lossy(Some(b))),
            });
            Ok(())
        })?;
        gpus.sort_by_key(|g| g.id);
        gpus.dedup_by_key(|g| g.id);
        Ok(gpus)
    }

    /// `TARGET_INFO_CUDA_DEVICE` (2025.1+): (pid, CUDA ordinal) to the host GPU index.
    pub fn cuda_devices(&self) -> Result<FxHashMap<(u32, u32), i64>> {
        const COLUMNS: &[Column] = &[opt("gpuId"), req("cudaId"), req("pid")];
        let mut map = FxHashMap::default();
        self.for_each_row("TARGET_INFO_CUDA_DEVICE", COLUMNS, "", |f| {
            let gpu = f.opt_int()?;
            let cuda = f.u32_or(0)?;
            let pid = f.u32_or(0)?;
            if let Some(gpu) = gpu {
                map.insert((pid, cuda), gpu);
            }
            Ok(())
        })?;
        Ok(map)
    }

    /// `TARGET_INFO_CUDA_STREAM`: the streams the export lists (not always every stream used).
    pub fn stream_infos(&self) -> Result<Vec<StreamInfo>> {
        const COLUMNS: &[Column] = &[
            req("processId"),
            opt("contextId"),
            req("streamId"),
            opt("priority"),
            opt("flag"),
        ];
        let mut streams = Vec::new();
        self.for_each_row("TARGET_INFO_CUDA_STREAM", COLUMNS, "", |f| {
            streams.push(StreamInfo {
                pid: f.u32_or(0)?,
                context: f.u32_or(0)?,
                stream: f.u32_or(0)?,
                priority: f.opt_int()?.unwrap_or(0) as u32 as i32,
                flag: f.opt_int()?.unwrap_or(0).clamp(0, 255) as u8,
            });
            Ok(())
        })?;
        Ok(streams)
    }

    /// `PROCESSES`: executable name per pid (every process of the machine; absent before 2022.4).
    pub fn process_names(&self) -> Result<FxHashMap<u32, String>> {
        const COLUMNS: &[Column] = &[opt("globalPid"), opt("pid"), opt("name")];
        let mut names = FxHashMap::default();
        self.for_each_row("PROCESSES", COLUMNS, "", |f| {
            let global = f.opt_int()?.map(|g| GlobalId::decode(g).pid);
            let pid = f.opt_int()?.map(|p| p as u32).or(global);
            let name = lossy(f.opt_bytes()?);
            if let Some(pid) = pid {
                names.insert(pid, name);
            }
            Ok(())
        })?;
        Ok(names)
    }

    /// `ThreadNames` (every thread of the machine): the names of the `wanted` threads.
    pub fn thread_names(
        &self,
        strings: &mut StringResolver,
        wanted: &FxHashSet<GlobalId>,
    ) -> Result<FxHashMap<GlobalId, StringId>> {
        const COLUMNS: &[Column] = &[req("nameId"), req("globalTid")];
        let mut names = FxHashMap::default();
        self.for_each_row("ThreadNames", COLUMNS, "", |f| {
            let name = f.int()?;
            let thread = GlobalId::decode(f.int()?);
            if wanted.contains(&thread) {
                let at = StringRef {
                    table: "ThreadNames",
                    row: f.rowid,
                    column: "nameId",
                };
                names.insert(thread, strings.resolve(name, at)?);
            }
            Ok(())
        })?;
        Ok(names)
    }

    /// The pid to which rows without a `globalPid` are attributed: the first process that made a
    /// CUDA API call, else 0.
    pub(crate) fn main_pid(&self) -> Result<u32> {
        const COLUMNS: &[Column] = &[opt("globalTid")];
        let mut pid = 0;
        self.for_each_row(
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            COLUMNS,
            "WHERE globalTid IS NOT NULL LIMIT 1",
            |f| {
                pid = f.opt_int()?.map_or(0, |g| GlobalId::decode(g).pid);
                Ok(())
            },
        )?;
        Ok(pid)
    }
}

/// Cheap checks that give a better message than SQLite would.
/// How long a read waits for another program's write lock on the input.
pub const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// A read-only connection to an export: immutable when no `-wal` or `-journal` says another
/// program is writing it (see [`Report::open`]).
fn connect(path: &Path) -> Result<Connection> {
    open_connection(path).map_err(|source| Error::Sqlite {
        path: path.to_path_buf(),
        table: "the database header".into(),
        cause: source,
    })
}

/// [`connect`], with SQLite's own error.
fn open_connection(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let journal = |suffix: &str| {
        let mut name = path.as_os_str().to_os_string();
        name.push(suffix);
        Path::new(&name).exists()
    };
    let immutable = !journal("-wal") && !journal("-journal");
    let uri = format!(
        "file:{}?mode=ro{}",
        uri_path(path),
        if immutable { "&immutable=1" } else { "" }
    );
    let conn = Connection::open_with_flags(uri, flags)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

/// A path as the path part of a SQLite `file:` URI: `%`, `?`, `#` and every byte outside
/// ASCII percent-encoded, so that a name that is not UTF-8 reaches SQLite byte for byte.
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'%' | b'?' | b'#' | 0x80.. => out.push_str(&format!("%{b:02x}")),
            b => out.push(char::from(b)),
        }
    }
    out
}

fn check_file(path: &Path) -> Result<()> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        cause: source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_dir() {
        return Err(Error::IsDirectory {
            path: path.to_path_buf(),
        });
    }
    if meta.len() == 0 {
        return Err(Error::Empty {
            path: path.to_path_buf(),
        });
    }
    let mut header = [0u8; 16];
    let mut file = std::fs::File::open(path).map_err(io)?;
    let read = file.read(&mut header).map_err(io)?;
    if read < header.len() || &header != b"SQLite format 3\0" {
        return Err(Error::NotSqlite {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

fn is_newer_schema(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.trim().parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) > KNOWN_SCHEMA,
        _ => false,
    }
}

/// Metadata text for display (lossy; NULL reads as empty).
fn lossy(bytes: Option<&[u8]>) -> String {
    bytes.map_or_else(String::new, |b| String::from_utf8_lossy(b).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_schema_detection() {
        assert!(!is_newer_schema("3.25.0"));
        assert!(!is_newer_schema("3.28.1"));
        assert!(is_newer_schema("3.29.0"));
        assert!(is_newer_schema("4.0.0"));
        assert!(!is_newer_schema("garbage"));
    }
}
