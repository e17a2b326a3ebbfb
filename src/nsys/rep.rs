//! `.nsys-rep` inputs: exported once to SQLite with `nsys export`, then cached.
//!
//! The cache is `<stem>.sqlite` beside the report (or in `--export-dir`) and is reused while it is
//! newer than the report. Without `nsys` on `PATH` the error shows the exact command to run by hand.

use super::error::{Error, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether `path` names an Nsight Systems report rather than its SQLite export.
pub fn is_nsys_rep(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("nsys-rep") || e.eq_ignore_ascii_case("qdrep"))
}

/// Returns the SQLite file to read for an input: the input itself, or for a `.nsys-rep` its cached
/// export, running `nsys export --type=sqlite` when the cache is missing or older than the report.
pub fn resolve_input(path: &Path, export_dir: Option<&Path>) -> Result<PathBuf> {
    if !is_nsys_rep(path) {
        return Ok(path.to_path_buf());
    }
    let io = |cause| Error::Io {
        path: path.to_path_buf(),
        cause,
    };
    // Commands run at once on one report share one export: the first exports while the
    // others wait on this lock (advisory, on the report itself, which stays unchanged), then
    // find its export fresh.
    let report = std::fs::File::open(path).map_err(io)?;
    lock(&report).map_err(io)?;
    let rep_time = report.metadata().and_then(|m| m.modified()).map_err(io)?;
    let cache = cache_path(path, export_dir);
    let fresh = std::fs::metadata(&cache)
        .and_then(|m| m.modified())
        .is_ok_and(|t| t >= rep_time);
    if !fresh {
        export(path, &cache)?;
    }
    Ok(cache)
}

/// Holds an exclusive advisory lock on `file` until it is closed.
fn lock(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: the descriptor is open for the duration of the call.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// Runs `nsys export` of the report at `path` into `cache`, through a temporary file of a name
/// of its own (so that an interrupted export never leaves a cache that looks complete).
fn export(path: &Path, cache: &Path) -> Result<()> {
    let fail = |message: String| Error::Export {
        path: path.to_path_buf(),
        message,
    };
    let command = format!(
        "nsys export --type=sqlite --force-overwrite=true --output={} {}",
        cache.display(),
        path.display()
    );
    let Some(nsys) = find_on_path("nsys") else {
        return Err(fail(format!(
            "nsys is not on PATH, so the report cannot be exported here; export it where nsys is installed with:\n    {command}\nthen pass the .sqlite file"
        )));
    };
    let (partial, file) =
        crate::output::cleanup::Temporary::beside(cache, ".sqlite").map_err(|cause| Error::Io {
            path: crate::output::cleanup::dir_of(cache).to_path_buf(),
            cause,
        })?;
    drop(file);
    let child = Command::new(nsys)
        .arg("export")
        .arg("--type=sqlite")
        .arg("--force-overwrite=true")
        .arg(flag("--output=", partial.path()))
        .arg(path)
        .spawn();
    let mut child = child.map_err(|e| {
        fail(format!(
            "running nsys failed: {e}; run by hand:\n    {command}"
        ))
    })?;
    crate::output::cleanup::register_child(child.id());
    let status = child.wait();
    crate::output::cleanup::forget_child(child.id());
    let status = status.map_err(|e| fail(format!("nsys did not finish: {e}")))?;
    let exported = std::fs::metadata(partial.path()).is_ok_and(|m| m.len() > 0);
    if !status.success() || !exported {
        return Err(fail(format!(
            "`nsys export` failed ({status}); run by hand to see why:\n    {command}"
        )));
    }
    partial.persist(cache).map_err(|cause| Error::Io {
        path: cache.to_path_buf(),
        cause,
    })
}

/// `<dir>/<stem>.sqlite` where `<dir>` is `export_dir` or the report's own directory.
fn cache_path(path: &Path, export_dir: Option<&Path>) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default();
    let dir = export_dir
        .map(Path::to_path_buf)
        .or_else(|| path.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let mut name = stem.to_os_string();
    name.push(".sqlite");
    dir.join(name)
}

fn flag(prefix: &str, path: &Path) -> OsString {
    let mut arg = OsString::from(prefix);
    arg.push(path);
    arg
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sits_beside_the_report_or_in_the_export_dir() {
        assert_eq!(
            cache_path(Path::new("runs/node0.nsys-rep"), None),
            PathBuf::from("runs/node0.sqlite")
        );
        assert_eq!(
            cache_path(Path::new("runs/node0.nsys-rep"), Some(Path::new("/tmp/x"))),
            PathBuf::from("/tmp/x/node0.sqlite")
        );
        assert!(is_nsys_rep(Path::new("a.NSYS-REP")));
        assert!(!is_nsys_rep(Path::new("a.sqlite")));
    }
}
