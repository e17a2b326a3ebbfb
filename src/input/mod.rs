//! The reading layer's inputs besides the nsys reader itself ([`crate::nsys`]): torch.profiler
//! (Kineto) JSON and JAX/XLA `XSpace` traces, translated; reports read for a streaming
//! conversion, their events sorted under a memory budget ([`capture`]); and part files, one
//! node's reports read where they lie ([`part`], sealed by [`seal`]).
//!
//! Each is recognised by its content, not its name ([`detect`]), and translated once into an
//! export in nsys's own SQLite schema ([`resolve`]), which the one reader
//! ([`crate::nsys::Report`]) then reads like any other: so every command, the streaming
//! conversion, parts and the Python package take these traces wherever they take an nsys
//! export, alone or mixed with exports of other ranks, and nothing after the reader knows which
//! format a rank came from. The translation names its source in `META_DATA_EXPORT`
//! ([`export::SOURCE_FORMAT`], [`export::SOURCE_PATH`]), which `info` shows.
//!
//! Translations are cached, never beside the input: in `--export-dir` when given, else in
//! `$NSYS_LENS_CACHE`, `$XDG_CACHE_HOME/nsys-lens` or `~/.cache/nsys-lens`, under a name keyed
//! by the input's content (a fast hash of every byte) and the translators' source, and reused
//! while those are unchanged.

pub mod capture;
pub(crate) mod codec;
pub mod export;
pub mod json;
pub mod kineto;
pub mod part;
pub mod seal;
pub mod xplane;

use crate::hash::FxHasher;
use anyhow::{Context, Result};
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// The translators' own source: part of every cache key, so that a build whose translation
/// differs never reuses an older build's cached translations.
const TRANSLATORS: [&str; 5] = [
    include_str!("mod.rs"),
    include_str!("export.rs"),
    include_str!("json.rs"),
    include_str!("kineto.rs"),
    include_str!("xplane.rs"),
];

pub use crate::model::Format;

/// What `path` holds, from its first bytes: SQLite, Kineto JSON (plain or gzip), or an
/// `XSpace`; when the bytes say none of these, the name decides (`.json`, `.json.gz` a Kineto
/// trace, `.pb` an `XSpace`, so that each is refused by its own reader with its own message),
/// and anything else goes to the SQLite reader, which says what it is not.
pub fn detect(path: &Path) -> Result<Format> {
    let mut head = Vec::with_capacity(64);
    let file =
        std::fs::File::open(path).with_context(|| format!("{}: cannot read", path.display()))?;
    file.take(64).read_to_end(&mut head)?;
    if head.starts_with(b"SQLite format 3\0") {
        return Ok(Format::Nsys);
    }
    if head.starts_with(&[0x1f, 0x8b]) || first_non_space(&head) == Some(b'{') {
        return Ok(Format::Kineto);
    }
    if xplane::looks_like_xspace(&head) {
        return Ok(Format::Xplane);
    }
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase());
    let name = name.unwrap_or_default();
    if name.ends_with(".json") || name.ends_with(".json.gz") {
        return Ok(Format::Kineto);
    }
    if name.ends_with(".pb") {
        return Ok(Format::Xplane);
    }
    Ok(Format::Nsys)
}

fn first_non_space(bytes: &[u8]) -> Option<u8> {
    let bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
    bytes.iter().copied().find(|b| !b.is_ascii_whitespace())
}

/// The SQLite file to read for `path`: the file itself when it is one, else its translation
/// (made now, or reused from the cache).
pub fn resolve(path: &Path, export_dir: Option<&Path>) -> Result<PathBuf> {
    let format = detect(path)?;
    if format == Format::Nsys {
        return Ok(path.to_path_buf());
    }
    let target = cache_path(path, export_dir)?;
    if target.is_file() {
        return Ok(target);
    }
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the cache directory {}", dir.display()))?;
    }
    translate(path, format, &target)
        .with_context(|| format!("{}: cannot read this {}", path.display(), format.describe()))
}

/// Translates `path`, a file of `format`, into an export at `target`; returns `target`.
pub fn translate(path: &Path, format: Format, target: &Path) -> Result<PathBuf> {
    match format {
        Format::Nsys => anyhow::bail!("an nsys export needs no translation"),
        Format::Kineto | Format::JaxJson => kineto::translate(open_text(path)?, path, target),
        Format::Xplane => xplane::translate(path, target),
    }
}

/// Whether a JSON file in a directory given as input is a torch.profiler trace: Kineto opens
/// with `schemaVersion` (or `traceEvents`), which other JSON beside the traces (a synth run's
/// `truth.json`, a config) does not have near its start.
pub fn is_kineto_trace(path: &Path) -> bool {
    const HEAD: u64 = 64 * 1024;
    let mut head = Vec::new();
    let read = open_text(path).and_then(|r| Ok(r.take(HEAD).read_to_end(&mut head)?));
    if read.is_err() {
        return false;
    }
    let text = String::from_utf8_lossy(&head);
    first_non_space(&head) == Some(b'{')
        && (text.contains("\"schemaVersion\"") || text.contains("\"traceEvents\""))
}

/// A reader of `path`'s text, decompressed when it is gzip, past a UTF-8 byte-order mark.
fn open_text(path: &Path) -> Result<Box<dyn BufRead>> {
    let mut file = BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
    let gzip = file.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    let mut text: Box<dyn BufRead> = if gzip {
        let decoder = flate2::bufread::MultiGzDecoder::new(file);
        Box::new(BufReader::with_capacity(1 << 20, decoder))
    } else {
        Box::new(file)
    };
    if text.fill_buf()?.starts_with(BOM) {
        text.consume(BOM.len());
    }
    Ok(text)
}

/// The UTF-8 byte-order mark some editors and Windows tools put before JSON.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The name a trace stands for: its file name without `.gz`, `.json`, `.pb`, `.xplane`
/// (`rank-0.json.gz` is `rank-0`).
pub fn trace_stem(path: &Path) -> String {
    let mut name = path
        .file_name()
        .map_or_else(|| "trace".into(), |n| n.to_string_lossy().into_owned());
    for suffix in [".gz", ".json", ".pb", ".xplane", ".trace"] {
        if let Some(stripped) = name.strip_suffix(suffix)
            && !stripped.is_empty()
        {
            name = stripped.to_string();
        }
    }
    name
}

/// Where the translation of `path` is cached.
fn cache_path(path: &Path, export_dir: Option<&Path>) -> Result<PathBuf> {
    let dir = match export_dir {
        Some(dir) => dir.to_path_buf(),
        None => cache_dir().context(
            "no cache directory for translated traces: set NSYS_LENS_CACHE or pass --export-dir",
        )?,
    };
    let mut hasher = FxHasher::default();
    hash_content(path, &mut hasher).with_context(|| format!("{}: cannot read", path.display()))?;
    TRANSLATORS.hash(&mut hasher);
    let name = format!("{}-{:016x}.sqlite", trace_stem(path), hasher.finish());
    Ok(dir.join(name))
}

/// Feeds every byte of `path`, and its length, to `hasher`: a trace edited in place keeps no
/// stale translation, whatever its size and modification time say, and a copy elsewhere reuses
/// its translation.
fn hash_content(path: &Path, hasher: &mut FxHasher) -> std::io::Result<()> {
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.write(&buf[..n]);
        len += n as u64;
    }
    hasher.write_u64(len);
    Ok(())
}

/// `$NSYS_LENS_CACHE`, else `$XDG_CACHE_HOME/nsys-lens`, else `~/.cache/nsys-lens`.
fn cache_dir() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("NSYS_LENS_CACHE")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("nsys-lens")))
        .or_else(|| var("HOME").map(|h| h.join(".cache").join("nsys-lens")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_stems_drop_the_format_suffixes() {
        assert_eq!(trace_stem(Path::new("a/rank-0.json.gz")), "rank-0");
        assert_eq!(trace_stem(Path::new("host.xplane.pb")), "host");
        assert_eq!(trace_stem(Path::new(".json")), ".json");
    }
}
