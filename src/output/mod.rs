//! The one output policy every writer follows: what nsys-lens promises about your files.
//!
//! - **An input is never replaced.** Every file a run reads is noted ([`note_input`]); an output
//!   that is, or resolves to, one of them (the same device and inode, whatever the name: a `./`
//!   path, a symbolic or a hard link) is refused before anything is written.
//! - **Only a regular file or a missing path is ever replaced.** A character or block
//!   device, a FIFO or a socket is written in place (`-o /dev/null` discards, `-o /dev/stdout`
//!   streams); `-` is standard output; a symbolic link is followed, so the file it names is
//!   replaced and the link stays.
//! - **Half a file is never left.** A regular output is written under a temporary name beside
//!   its destination ([`cleanup::Temporary`]) and renamed into place only when complete; the
//!   files of one result (a Paraver trace's three, both formats of a conversion) are renamed
//!   together ([`Staged`]), all or none. An error, a terminating signal and, after a SIGKILL,
//!   the next run remove the temporary files ([`cleanup`]). The file an output replaces is
//!   moved aside just before, and removed once all are in place (put back if the rename
//!   fails): renaming over it would make ext4 write the whole new file to disk first.

mod background;
pub mod cleanup;

pub use background::Background;
pub use cleanup::clean_up_on_signals;

use anyhow::{Context as _, bail};
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The files this process reads, with the identity they had when first read.
static INPUTS: Mutex<Vec<(PathBuf, FileId)>> = Mutex::new(Vec::new());

/// A file's identity: its device and inode.
type FileId = (u64, u64);

fn file_id(meta: &std::fs::Metadata) -> FileId {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// Notes that the run reads `path`, so that no output may replace it. A path that cannot be
/// read is not noted (reading it fails elsewhere, with its own message).
pub fn note_input(path: &Path) {
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    let mut inputs = INPUTS.lock().unwrap_or_else(|e| e.into_inner());
    let id = file_id(&meta);
    if !inputs.iter().any(|(_, known)| *known == id) {
        inputs.push((path.to_path_buf(), id));
    }
}

/// The input that `meta` is, if any: the same identity, and the input still has it (an input
/// removed since, whose inode was reused, does not count).
fn input_with(meta: &std::fs::Metadata) -> Option<PathBuf> {
    let id = file_id(meta);
    let inputs = INPUTS.lock().unwrap_or_else(|e| e.into_inner());
    inputs
        .iter()
        .find(|(path, known)| {
            *known == id && std::fs::metadata(path).is_ok_and(|m| file_id(&m) == id)
        })
        .map(|(path, _)| path.clone())
}

/// What an output path is, under the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// `-`: standard output.
    Stdout,
    /// An existing device, FIFO or socket: written in place.
    InPlace(PathBuf),
    /// A regular file, or a missing path (the real path, symbolic links followed): written
    /// beside it and renamed over it.
    Replace(PathBuf),
}

impl Destination {
    /// What `path` is as an output; an error when it is an input of this run or a directory.
    pub fn of(path: &Path) -> anyhow::Result<Destination> {
        if path.as_os_str() == "-" {
            return Ok(Destination::Stdout);
        }
        let meta = match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Destination::Replace(missing_target(path)));
            }
            Err(e) => return Err(e).with_context(|| format!("{}: cannot write", path.display())),
        };
        if let Some(input) = input_with(&meta) {
            let same = if input == path {
                String::new()
            } else {
                format!(" (it is {})", input.display())
            };
            bail!(
                "{}: this is an input of this run{same}; writing there would destroy it, choose \
                 another output",
                path.display()
            );
        }
        if meta.is_dir() {
            bail!("{}: is a directory; name a file", path.display());
        }
        if !meta.is_file() {
            return Ok(Destination::InPlace(path.to_path_buf()));
        }
        let real = std::fs::canonicalize(path)
            .with_context(|| format!("{}: cannot resolve", path.display()))?;
        Ok(Destination::Replace(real))
    }

    /// Whether this is the null device (`/dev/null`, or a node of the same device made
    /// elsewhere), where any number of outputs may go.
    pub fn is_null(&self) -> bool {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let Destination::InPlace(path) = self else {
            return false;
        };
        let device = |p: &Path| {
            let meta = std::fs::metadata(p).ok()?;
            meta.file_type().is_char_device().then(|| meta.rdev())
        };
        device(path).is_some_and(|d| Some(d) == device(Path::new("/dev/null")))
    }
}

/// The file a missing path names: the path itself, or where a dangling symbolic link points.
fn missing_target(path: &Path) -> PathBuf {
    match std::fs::read_link(path) {
        Ok(target) => path.parent().unwrap_or(Path::new("")).join(target),
        Err(_) => path.to_path_buf(),
    }
}

/// Whether outputs at `path` are written in place rather than named after it: `-` (standard
/// output), or an existing device, FIFO or socket.
pub fn is_stream(path: &Path) -> bool {
    path.as_os_str() == "-" || std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// Fails unless every path of `outputs` may be written ([`Destination::of`]): what a command
/// checks before its work, so that a refused output costs nothing. Several outputs may share
/// only the null device; `-` and other devices take one output.
pub fn check(outputs: &[PathBuf]) -> anyhow::Result<()> {
    for path in outputs {
        let destination = Destination::of(path)?;
        let shared = outputs.len() > 1;
        if shared && matches!(destination, Destination::Stdout | Destination::InPlace(_)) {
            if destination.is_null() {
                continue;
            }
            bail!(
                "{}: this command writes {} files, which cannot share one stream; give a \
                 file name (or ask for one format)",
                path.display(),
                outputs.len()
            );
        }
    }
    Ok(())
}

/// Text escaped for HTML (`&`, `<`, `>` and `"`), for the pages the tool writes.
pub fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An output being written: a temporary file beside its destination, or the destination itself
/// when that is a device, a FIFO, a socket or standard output.
#[derive(Debug)]
pub struct Output {
    file: File,
    /// The name the user gave, for messages.
    shown: PathBuf,
    /// The temporary file and where it goes; none when written in place.
    beside: Option<(cleanup::Temporary, PathBuf)>,
}

impl Output {
    /// Starts writing `path`, under the policy ([`Destination::of`]).
    pub fn create(path: &Path) -> anyhow::Result<Output> {
        Output::create_with(path, "")
    }

    /// As [`Output::create`], the temporary file's name ending in `extension` (`.sqlite`), for
    /// tools that insist on one.
    pub fn create_with(path: &Path, extension: &str) -> anyhow::Result<Output> {
        let shown = path.to_path_buf();
        let cannot = || format!("{}: cannot write", path.display());
        let (file, beside) = match Destination::of(path)? {
            Destination::Stdout => {
                use std::os::fd::AsFd;
                let fd = io::stdout().as_fd().try_clone_to_owned();
                (
                    File::from(fd.context("cannot write to standard output")?),
                    None,
                )
            }
            Destination::InPlace(path) => {
                let file = std::fs::OpenOptions::new().write(true).open(&path);
                (file.with_context(cannot)?, None)
            }
            Destination::Replace(dest) => {
                let (temp, file) =
                    cleanup::Temporary::beside(&dest, extension).with_context(|| {
                        let dir = cleanup::dir_of(&dest);
                        format!("cannot create a file in {}", dir.display())
                    })?;
                (file, Some((temp, dest)))
            }
        };
        Ok(Output {
            file,
            shown,
            beside,
        })
    }

    /// The file to write.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The path being written: the temporary file, or the destination written in place.
    pub fn path(&self) -> &Path {
        match &self.beside {
            Some((temp, _)) => temp.path(),
            None => &self.shown,
        }
    }

    /// Whether the output is a regular file renamed into place (else a device, FIFO, socket or
    /// standard output, written in place).
    pub fn is_file(&self) -> bool {
        self.beside.is_some()
    }

    /// Renames the complete output into place now.
    pub fn commit(self) -> anyhow::Result<()> {
        let staged = Staged::default();
        staged.add(self)?;
        staged.commit()
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Complete outputs waiting to be renamed into place together: all or none appear.
#[derive(Debug, Default)]
pub struct Staged {
    ready: Mutex<Vec<Output>>,
}

impl Staged {
    /// Adds a complete output: an ordinary file's permissions are set (those of the file it
    /// replaces, else 0644; temporary files are 0600).
    pub fn add(&self, output: Output) -> anyhow::Result<()> {
        if let Some((_, dest)) = &output.beside {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dest).map_or(0o644, |m| m.permissions().mode());
            let permissions = std::fs::Permissions::from_mode(mode);
            output
                .file
                .set_permissions(permissions)
                .with_context(|| format!("{}: cannot write", output.shown.display()))?;
        }
        self.ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(output);
        Ok(())
    }

    /// Renames every output into place, under the clean-up's lock so that a signal finds all
    /// of them renamed or none.
    pub fn commit(self) -> anyhow::Result<()> {
        let ready = self.ready.into_inner().unwrap_or_else(|e| e.into_inner());
        let mut replaced = Vec::new();
        let mut renamed = Ok(());
        // Those left after a failure are dropped (their files removed) once the lock is
        // released: a temporary file's drop takes it.
        let mut outputs = ready.into_iter();
        let mut lock = cleanup::lock();
        for output in outputs.by_ref() {
            let Some((temp, dest)) = output.beside else {
                continue;
            };
            match temp.rename(&dest, &mut lock) {
                Ok(old) => replaced.extend(old),
                Err(e) => {
                    let shown = output.shown.display();
                    renamed = Err(e).with_context(|| format!("cannot write {shown}"));
                    break;
                }
            }
        }
        // Still under the lock: a signal finds the replaced files gone, or their outputs not
        // yet in place.
        for old in replaced {
            if let Err(e) = std::fs::remove_file(&old) {
                eprintln!(
                    "nsys-lens: warning: cannot remove {}, the file this run replaced ({e})",
                    old.display()
                );
            }
        }
        drop(lock);
        drop(outputs);
        renamed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_is_refused_under_every_name() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("run.sqlite");
        std::fs::write(&input, b"capture").unwrap();
        note_input(&input);
        let link = dir.path().join("link.sqlite");
        std::os::unix::fs::symlink(&input, &link).unwrap();
        let hard = dir.path().join("hard.sqlite");
        std::fs::hard_link(&input, &hard).unwrap();
        let dotted = dir.path().join(".").join("run.sqlite");
        for name in [&input, &link, &hard, &dotted] {
            let error = Output::create(name).unwrap_err().to_string();
            assert!(error.contains("input of this run"), "{error}");
        }
        assert_eq!(std::fs::read(&input).unwrap(), b"capture");
    }

    #[test]
    fn a_symbolic_link_is_followed_and_stays() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.html");
        std::fs::write(&target, b"old").unwrap();
        let link = dir.path().join("link.html");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut out = Output::create(&link).unwrap();
        out.write_all(b"new").unwrap();
        out.commit().unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn a_set_appears_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let names = ["a.prv", "a.pcf", "a.row"].map(|n| dir.path().join(n));
        let staged = Staged::default();
        for (i, name) in names.iter().enumerate() {
            let mut out = Output::create(name).unwrap();
            out.write_all(b"x").unwrap();
            if i < 2 {
                staged.add(out).unwrap();
            }
        }
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            2,
            "one dropped"
        );
        assert!(
            names.iter().all(|n| !n.exists()),
            "none in place before the commit"
        );
        drop(staged);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "dropped");
        let staged = Staged::default();
        for name in &names {
            staged.add(Output::create(name).unwrap()).unwrap();
        }
        staged.commit().unwrap();
        assert!(names.iter().all(|n| n.is_file()));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
    }

    #[test]
    fn a_replaced_file_is_not_written_to_and_leaves_nothing_behind() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("run.prv");
        std::fs::write(&dest, b"old").unwrap();
        std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o640)).unwrap();
        let kept = dir.path().join("kept.prv");
        std::fs::hard_link(&dest, &kept).unwrap();
        let mut out = Output::create(&dest).unwrap();
        out.write_all(b"new").unwrap();
        out.commit().unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"new");
        assert_eq!(
            std::fs::read(&kept).unwrap(),
            b"old",
            "a new file, not rewritten"
        );
        let mode = std::fs::metadata(&dest).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640, "the replaced file's permissions");
        let mut left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["kept.prv", "run.prv"], "nothing moved aside is left");
    }

    #[test]
    fn a_failed_rename_is_an_error_and_the_rest_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let names = ["a.prv", "a.pcf", "a.row"].map(|n| dir.path().join(n));
        std::fs::write(&names[1], b"old").unwrap();
        let staged = Staged::default();
        for name in &names {
            let out = Output::create(name).unwrap();
            if name == &names[1] {
                // Its rename fails: the file is gone.
                std::fs::remove_file(out.path()).unwrap();
            }
            staged.add(out).unwrap();
        }
        let error = format!("{:#}", staged.commit().unwrap_err());
        assert!(
            error.contains("cannot write") && error.contains("a.pcf"),
            "{error}"
        );
        assert_eq!(std::fs::read(&names[1]).unwrap(), b"old", "put back");
        let mut left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["a.pcf", "a.prv"],
            "the first renamed, the last removed"
        );
    }

    #[test]
    fn the_null_device_takes_any_number_of_outputs_and_stays_a_device() {
        let null = PathBuf::from("/dev/null");
        assert!(Destination::of(&null).unwrap().is_null());
        check(&[null.clone(), null.clone()]).unwrap();
        let mut out = Output::create(&null).unwrap();
        out.write_all(b"discarded").unwrap();
        out.commit().unwrap();
        assert!(!std::fs::metadata(&null).unwrap().is_file());
        let error = check(&["-".into(), "x".into()]).unwrap_err().to_string();
        assert!(error.contains("cannot share one stream"), "{error}");
    }
}
