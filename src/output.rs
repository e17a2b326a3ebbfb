//! Output files are written under a temporary name beside their destination and renamed into
//! place only when complete, so an error never leaves half a file behind. Temporary files still
//! being written are registered, and an interrupt (Ctrl-C) removes them before exiting
//! ([`remove_temporaries_on_interrupt`]).

use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tempfile::NamedTempFile;

/// Temporary outputs not yet renamed into place.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Exit status after an interrupt (128 + SIGINT), as shells report it.
pub const INTERRUPTED: i32 = 130;

/// Registers a partial output so that an interrupt removes it.
pub fn register(path: &Path) {
    if let Ok(mut pending) = PENDING.lock() {
        pending.push(path.to_path_buf());
    }
}

/// Forgets a partial output (renamed into place, or already removed).
pub fn unregister(path: &Path) {
    if let Ok(mut pending) = PENDING.lock() {
        pending.retain(|p| p != path);
    }
}

/// A private temporary file in the directory of `path` (created when missing), registered
/// until persisted.
pub fn temporary_beside(path: &Path) -> anyhow::Result<NamedTempFile> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // Created and registered under the lock: an interrupt sees either no file or a registered
    // one, and once its handler holds the lock (until the process exits) no file is created.
    let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    let temp = NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    pending.push(temp.path().to_path_buf());
    Ok(temp)
}

/// Makes the finished temporary file an ordinary file (0644; temporary files are 0600) and
/// renames it to `path`.
pub fn persist(temp: NamedTempFile, path: &Path) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        temp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    let temp_path = temp.path().to_path_buf();
    let persisted = temp.persist(path);
    unregister(&temp_path);
    persisted.with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Installs the Ctrl-C handler: every registered partial output is removed, then the process
/// exits with [`INTERRUPTED`].
pub fn remove_temporaries_on_interrupt() {
    let installed = ctrlc::set_handler(|| {
        // The lock is held until the process exits, so no new partial output appears.
        let pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
        for path in pending.iter() {
            let _ = std::fs::remove_file(path);
        }
        eprintln!("nsys-lens: interrupted; partial outputs removed");
        std::process::exit(INTERRUPTED);
    });
    if let Err(e) = installed {
        eprintln!(
            "nsys-lens: warning: cannot handle Ctrl-C ({e}); an interrupt may leave temporary files"
        );
    }
}
