//! What is left behind, and who removes it.
//!
//! Every file nsys-lens writes under a temporary name is named `.nsys-lens-HOST-PID-XXXXXX.tmp`
//! (plus an extension where a tool insists on one) and registered here while it exists. A
//! terminating signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT: Ctrl-C, `kill`, `timeout`, Slurm's
//! `scancel` and time limit, Kubernetes) removes every registered file, stops the child processes
//! it started (`nsys export`), and exits with 128 + the signal's number. SIGKILL cannot be
//! handled: the files it leaves are recognised by their name, and the next run that writes into
//! the same directory on the same host removes those whose process is gone
//! ([`sweep_stale`]). Spill files are anonymous (unlinked at creation), so nothing is left of
//! them in any case.

use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// What is registered for removal: temporary files, and child processes to stop.
#[derive(Default)]
struct Pending {
    files: Vec<PathBuf>,
    children: Vec<u32>,
}

/// The files and children a signal cleans up. A signal's handler holds the lock until the
/// process exits, so whatever runs under it ([`Temporary::beside`], committing a set of outputs)
/// happens wholly before or not at all.
static PENDING: Mutex<Pending> = Mutex::new(Pending {
    files: Vec::new(),
    children: Vec::new(),
});

/// Directories already swept by this process.
static SWEPT: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// The registry held: what runs under it happens wholly before a signal's clean-up or not at
/// all.
pub(super) struct Lock(MutexGuard<'static, Pending>);

/// Takes the registry's lock, whatever a panicking holder left.
pub(super) fn lock() -> Lock {
    Lock(registry())
}

fn registry() -> MutexGuard<'static, Pending> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// The start of every temporary name this process gives: `.nsys-lens-HOST-PID-`.
fn prefix() -> String {
    format!(".nsys-lens-{}-{}-", host(), std::process::id())
}

/// This machine's host name, made safe for a file name.
fn host() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that much.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = if ok { &buf[..end] } else { b"localhost" };
    String::from_utf8_lossy(name)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The directory a file at `path` is in (`.` for a bare name).
pub fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A file being written under a temporary name: registered while it exists, removed when
/// dropped unless it was renamed into place (by [`super::Staged::commit`], or
/// [`Temporary::persist`]).
#[derive(Debug)]
pub struct Temporary {
    path: PathBuf,
}

impl Temporary {
    /// Creates `.nsys-lens-HOST-PID-XXXXXX.tmp{extension}` in the directory of `dest`
    /// ([`dir_of`], created when missing), readable by its owner only; first removes what
    /// killed runs left there.
    pub fn beside(dest: &Path, extension: &str) -> std::io::Result<(Temporary, File)> {
        let dir = dir_of(dest);
        std::fs::create_dir_all(dir)?;
        sweep_stale(dir);
        // Created and registered under the lock: a signal sees either no file or a registered
        // one, and once its handler holds the lock (until the process exits) none is created.
        let mut pending = registry();
        let suffix = format!(".tmp{extension}");
        let prefix = prefix();
        let temp = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(&suffix)
            .tempfile_in(dir)?;
        let (file, path) = temp.into_parts();
        let path = path.keep().map_err(|e| e.error)?;
        pending.files.push(path.clone());
        Ok((Temporary { path }, file))
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the file to `dest`, under the registry's lock. A file already at `dest` is first
    /// moved aside (beside this one, `.old` added): the path it returns then, for the caller to
    /// remove once every output is in place. It is put back if the rename fails.
    ///
    /// Why not rename over it: when a rename replaces a file, ext4 (`auto_da_alloc`, on by
    /// default) writes the new file's data back before the call returns, so that a crash does
    /// not leave it empty; for a trace of hundreds of megabytes that is a second or more of
    /// the run, while neither rename here replaces anything.
    pub(super) fn rename(self, dest: &Path, lock: &mut Lock) -> std::io::Result<Option<PathBuf>> {
        let mut aside = self.path.clone().into_os_string();
        aside.push(".old");
        let aside = PathBuf::from(aside);
        let moved = match std::fs::rename(dest, &aside) {
            Ok(()) => Some(aside),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let renamed = std::fs::rename(&self.path, dest);
        // Not dropped: its Drop would take the lock held here.
        let path = std::mem::take(&mut std::mem::ManuallyDrop::new(self).path);
        lock.0.files.retain(|p| *p != path);
        if let Err(e) = renamed {
            let _ = std::fs::remove_file(&path);
            if let Some(aside) = &moved {
                let _ = std::fs::rename(aside, dest);
            }
            return Err(e);
        }
        Ok(moved)
    }

    /// Renames the file, which another program wrote (`nsys export`), to `dest`.
    pub fn persist(self, dest: &Path) -> std::io::Result<()> {
        let mut lock = lock();
        let replaced = self.rename(dest, &mut lock)?;
        replaced.map_or(Ok(()), std::fs::remove_file)
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let path = &self.path;
        registry().files.retain(|p| p != path);
    }
}

/// Registers a child process to stop if a signal ends this one.
pub fn register_child(pid: u32) {
    registry().children.push(pid);
}

/// Forgets a child process that has ended.
pub fn forget_child(pid: u32) {
    registry().children.retain(|&p| p != pid);
}

/// Removes the temporary files that processes of this host which no longer run left in `dir`
/// (a SIGKILL, a power cut); once per directory per process. Files of other hosts (a shared
/// file system) and of running processes are left alone.
pub fn sweep_stale(dir: &Path) {
    let mut swept = SWEPT.lock().unwrap_or_else(|e| e.into_inner());
    if !swept
        .get_or_insert_with(HashSet::new)
        .insert(dir.to_path_buf())
    {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mine = format!(".nsys-lens-{}-", host());
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| stale_pid(n, &mine)) else {
            continue;
        };
        if pid != std::process::id() && !is_running(pid) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The process id in a temporary name of this host (`{mine}PID-XXXXXX.tmp...`).
fn stale_pid(name: &str, mine: &str) -> Option<u32> {
    let rest = name.strip_prefix(mine)?;
    let (pid, tail) = rest.split_once('-')?;
    tail.contains(".tmp").then_some(())?;
    pid.parse().ok()
}

/// Whether a process with this id runs on this machine.
fn is_running(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let alive = unsafe { libc::kill(pid, 0) } == 0;
    alive || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The signals that end a run, which a run cleans up after.
const TERMINATING: [i32; 4] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
    signal_hook::consts::SIGQUIT,
];

/// Installs the handler of every terminating signal: registered temporary files are removed,
/// registered children stopped, and the process exits with 128 + the signal's number.
pub fn clean_up_on_signals() {
    let signals = match signal_hook::iterator::Signals::new(TERMINATING) {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!(
                "nsys-lens: warning: cannot handle termination signals ({e}); an interrupted \
                 run may leave temporary files"
            );
            return;
        }
    };
    let thread = std::thread::Builder::new().name("signals".to_string());
    let started = thread.spawn(move || {
        let mut signals = signals;
        if let Some(signal) = signals.forever().next() {
            clean_up_and_exit(signal);
        }
    });
    if let Err(e) = started {
        eprintln!("nsys-lens: warning: cannot handle termination signals ({e})");
    }
}

/// Removes what is registered and exits with 128 + `signal`; the lock is held until the
/// process exits, so no new temporary appears and no set of outputs is half renamed.
fn clean_up_and_exit(signal: i32) -> ! {
    let pending = registry();
    for &child in &pending.children {
        if let Ok(pid) = libc::pid_t::try_from(child) {
            // SAFETY: sending a signal to a process id has no memory effects.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
    for path in &pending.files {
        let _ = std::fs::remove_file(path);
    }
    let name = signal_hook::low_level::signal_name(signal).unwrap_or("a signal");
    eprintln!("nsys-lens: {name} received; partial outputs removed");
    std::process::exit(128 + signal);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_say_whose_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let (temp, _file) = Temporary::beside(&dir.path().join("x.sqlite"), ".sqlite").unwrap();
        let name = temp
            .path()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let mine = format!(".nsys-lens-{}-", host());
        assert_eq!(stale_pid(&name, &mine), Some(std::process::id()), "{name}");
        assert!(name.ends_with(".tmp.sqlite"), "{name}");
        let path = temp.path().to_path_buf();
        drop(temp);
        assert!(!path.exists(), "dropped, the file is removed");
    }

    #[test]
    fn a_failed_rename_puts_the_replaced_file_back() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("run.prv");
        std::fs::write(&dest, b"old").unwrap();
        let (temp, _file) = Temporary::beside(&dest, "").unwrap();
        // Gone before its rename, which then fails after the old file was moved aside.
        std::fs::remove_file(temp.path()).unwrap();
        let error = temp.rename(&dest, &mut lock()).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "nothing aside"
        );
    }

    #[test]
    fn a_dead_processs_temporaries_are_swept_and_others_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mine = format!(".nsys-lens-{}-", host());
        // pid_max is at most 2^22 on Linux: this process cannot exist.
        let dead = dir.path().join(format!("{mine}99999999-abcdef.tmp"));
        let running = dir.path().join(format!("{mine}1-abcdef.tmp"));
        let other_host = dir.path().join(".nsys-lens-elsewhere-99999999-abcdef.tmp");
        let user = dir.path().join("run.prv");
        for path in [&dead, &running, &other_host, &user] {
            std::fs::write(path, b"x").unwrap();
        }
        sweep_stale(dir.path());
        assert!(!dead.exists());
        assert!(running.exists(), "process 1 runs");
        assert!(other_host.exists() && user.exists());
    }
}
