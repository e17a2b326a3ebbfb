//! The real `nsys` (Debian's nsight-systems 2022.4, which `.ci/run` installs): capturing small
//! CPU-side programs, exporting them and asking `nsys stats` for NVIDIA's own sums. Captures run
//! one at a time ([`lock`]): nsys's daemon and importer are shared by every capture on a machine.

use crate::util::texts;
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

static NSYS: Mutex<()> = Mutex::new(());

/// Holds every other test's use of the real nsys off until dropped.
pub fn lock() -> MutexGuard<'static, ()> {
    NSYS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `Some` when `nsys` and the other `tools` (e.g. `mpicc`) run; else None, noted (a failure
/// under `NSYS_LENS_CI`, where `.ci/run` installs them all).
pub fn available(tools: &[&str]) -> Option<()> {
    let missing: Vec<&str> = std::iter::once("nsys")
        .chain(tools.iter().copied())
        .filter(|tool| Command::new(tool).arg("--version").output().is_err())
        .collect();
    if missing.is_empty() {
        return Some(());
    }
    assert!(
        std::env::var_os("NSYS_LENS_CI").is_none(),
        "CI must install {missing:?} (see .ci/run)"
    );
    crate::util::skipped(&format!("the nsys oracle: {missing:?} not installed"));
    None
}

/// Runs a command in `dir`, which must succeed; its stdout.
pub fn run(dir: &Path, program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{program} {args:?}: {stdout}{stderr}");
    stdout
}

/// [`profile`], then [`export`].
pub fn capture(dir: &Path, name: &str, options: &[&str], command: &[&str]) {
    profile(dir, name, options, command);
    export(dir, name);
}

/// `nsys export` of `dir/<name>.nsys-rep` into `dir/<name>.sqlite`.
pub fn export(dir: &Path, name: &str) {
    let _one_at_a_time = lock();
    let (rep, sqlite) = (format!("{name}.nsys-rep"), format!("{name}.sqlite"));
    let export = [
        "export",
        "--type=sqlite",
        "--force-overwrite=true",
        "-o",
        &sqlite,
        &rep,
    ];
    run(dir, "nsys", &export);
}

/// `nsys profile <options> -o name <command>` in `dir`, into `dir/<name>.nsys-rep` (imported by
/// hand when nsys 2022.4 leaves a `.qdstrm`). A capture that fails is tried once more (its
/// first error printed), as nsys sometimes stops at "End of file" on a busy machine.
pub fn profile(dir: &Path, name: &str, options: &[&str], command: &[&str]) {
    let _one_at_a_time = lock();
    let mut args = vec!["profile", "--sample=none", "--cpuctxsw=none", "-f", "true"];
    args.extend_from_slice(options);
    args.extend(["-o", name]);
    args.extend_from_slice(command);
    let first = Command::new("nsys").args(&args).current_dir(dir).output();
    let ok = first.as_ref().is_ok_and(|o| o.status.success());
    if !ok {
        if let Ok(out) = &first {
            let (stdout, stderr) = texts(out);
            eprintln!("nsys profile failed once, trying again: {stdout}{stderr}");
        }
        run(dir, "nsys", &args);
    }
    if !dir.join(format!("{name}.nsys-rep")).exists() {
        let importer = "/usr/lib/nsight-systems/host-linux-x64/QdstrmImporter";
        run(dir, importer, &["-i", &format!("{name}.qdstrm")]);
    }
}

/// `nsys stats -r <report> -f csv` of `dir/<sqlite>`: the header and the rows, split at commas.
pub fn stats(dir: &Path, report: &str, sqlite: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let _one_at_a_time = lock();
    run(
        dir,
        "nsys",
        &["stats", "-r", report, "-f", "csv", "-o", "stats", sqlite],
    );
    let csv = std::fs::read_to_string(dir.join(format!("stats_{report}.csv"))).unwrap();
    let mut lines = csv.lines();
    let split = |l: &str| l.split(',').map(str::to_string).collect::<Vec<_>>();
    let header = split(lines.next().unwrap());
    (header, lines.map(split).collect())
}
