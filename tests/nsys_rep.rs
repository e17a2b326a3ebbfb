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

#[cfg(unix)]
#[test]
fn a_stand_in_nsys_exports_once_and_the_cache_is_reused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let calls = dir.path().join("calls");
    let script = format!(
        "#!/bin/sh\necho \"$@\" >> {calls}\nfor a in \"$@\"; do case \"$a\" in --output=*) cp {fixture} \"${{a#--output=}}\";; esac; done\n",
        calls = calls.display(),
        fixture = fixture("megatron_pp1/node0.sqlite").display()
    );
    let nsys = bin.join("nsys");
    std::fs::write(&nsys, script).unwrap();
    std::fs::set_permissions(&nsys, std::fs::Permissions::from_mode(0o755)).unwrap();
    let report = dir.path().join("run.nsys-rep");
    std::fs::write(&report, b"stand-in report").unwrap();
    let path_env = format!("{}:/usr/bin:/bin", bin.display());
    for _ in 0..2 {
        let out = info_with_path(&path_env, &report);
        let (stdout, stderr) = texts(&out);
        assert!(out.status.success(), "{stderr}");
        assert!(stdout.contains("run.sqlite"), "{stdout}");
    }
    assert!(dir.path().join("run.sqlite").is_file());
    let calls = std::fs::read_to_string(&calls).unwrap();
    assert_eq!(calls.lines().count(), 1, "exported once: {calls}");
    assert!(calls.starts_with("export --type=sqlite"), "{calls}");
}
