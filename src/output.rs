//! Output files are written under a temporary name beside their destination and renamed into
//! place only when complete, so an error or an interrupt never leaves half a file behind.

use anyhow::Context as _;
use std::path::Path;
use tempfile::NamedTempFile;

/// A private temporary file in the directory of `path`.
pub fn temporary_beside(path: &Path) -> anyhow::Result<NamedTempFile> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    NamedTempFile::new_in(dir).with_context(|| format!("cannot create a file in {}", dir.display()))
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
    temp.persist(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
