//! `.nsys-rep` inputs: exported once with `nsys export` into a cached `.sqlite`, reused while newer
//! than the report; without `nsys` the error shows the command to run.

use crate::util::{fixture, texts};
use std::process::Command;

fn info_with_path(path_env: &str, report: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
        .args(["info", report.to_str().unwrap()])
        .env("PATH", path_env)
        .output()
        .unwrap()
}

#[test]
fn without_nsys_the_error_shows_the_export_command() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("run.nsys-rep");
    std::fs::write(&report, b"not really a report").unwrap();
    let empty = dir.path().join("bin");
    std::fs::create_dir(&empty).unwrap();
    let out = info_with_path(empty.to_str().unwrap(), &report);
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("nsys is not on PATH"), "{stderr}");
    assert!(stderr.contains("nsys export --type=sqlite"), "{stderr}");
    assert!(stderr.contains("run.nsys-rep"), "{stderr}");
}

/// A stand-in `nsys` in `dir/bin` that logs its arguments to `dir/calls`, waits `delay`
/// seconds (a real export takes time) and exports a fixture; the `PATH` that finds it.
#[cfg(unix)]
fn stand_in_nsys(dir: &std::path::Path, delay: u32) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\necho \"$@\" >> {calls}\nsleep {delay}\nfor a in \"$@\"; do case \"$a\" in \
         --output=*) cp {fixture} \"${{a#--output=}}\";; esac; done\n",
        calls = dir.join("calls").display(),
        fixture = fixture("megatron_pp1/node0.sqlite").display()
    );
    let nsys = bin.join("nsys");
    std::fs::write(&nsys, script).unwrap();
    std::fs::set_permissions(&nsys, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:/usr/bin:/bin", bin.display())
}

#[cfg(unix)]
#[test]
fn a_stand_in_nsys_exports_once_and_the_cache_is_reused() {
    let dir = tempfile::tempdir().unwrap();
    let path_env = stand_in_nsys(dir.path(), 0);
    let report = dir.path().join("run.nsys-rep");
    std::fs::write(&report, b"stand-in report").unwrap();
    for _ in 0..2 {
        let out = info_with_path(&path_env, &report);
        let (stdout, stderr) = texts(&out);
        assert!(out.status.success(), "{stderr}");
        assert!(stdout.contains("run.sqlite"), "{stdout}");
    }
    assert!(dir.path().join("run.sqlite").is_file());
    let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap();
    assert_eq!(calls.lines().count(), 1, "exported once: {calls}");
    assert!(calls.starts_with("export --type=sqlite"), "{calls}");
}

/// Three commands at once on one report: one export (the others wait on the report's lock,
/// then find it fresh), all succeed, no partial file is left.
#[cfg(unix)]
#[test]
fn commands_at_once_on_one_nsys_rep_share_one_export() {
    let dir = tempfile::tempdir().unwrap();
    let path_env = stand_in_nsys(dir.path(), 1);
    let report = dir.path().join("run.nsys-rep");
    std::fs::write(&report, b"stand-in report").unwrap();
    let start = || {
        Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
            .args(["info", "-q", report.to_str().unwrap()])
            .env("PATH", &path_env)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let children = [start(), start(), start()];
    for child in children {
        let done = child.wait_with_output().unwrap();
        assert!(done.status.success(), "{}", texts(&done).1);
    }
    let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap();
    assert_eq!(calls.lines().count(), 1, "one export: {calls}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".nsys-lens-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
