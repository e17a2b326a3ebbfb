//! What nsys-lens promises about files: an output never replaces an input or a device, `-`
//! streams, failures and signals leave nothing behind, and a killed run's leftovers go with the
//! next run.

use crate::util::{fixture, nsys_lens, skipped, synth, texts};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The bundled export every case reads.
const NODE0: &str = "pithtrain_pp2_ep2/node0.sqlite";

/// Every command that writes one output, with that output's `-o` and the input after it.
fn writers(output: &str, input: &str) -> Vec<Vec<String>> {
    let commands: [&[&str]; 5] = [
        &["report", "-q", "--whole", "-o", output, input],
        &["part", "-q", "-o", output, input],
        &["convert", "-q", "--to", "perfetto", "-o", output, input],
        &["convert", "-q", "--to", "paraver", "-o", output, input],
        &["convert", "-q", "-o", output, input],
    ];
    commands
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect()
}

fn run(args: &[String]) -> std::process::Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    nsys_lens(&args)
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Each writer, with the input name it would write over and what `-o` names for it.
const SELF_WRITES: [(&[&str], &str, &str); 5] = [
    (&["report", "-q", "--whole"], ".sqlite", ""),
    (&["part", "-q"], ".sqlite", ""),
    (
        &["convert", "-q", "--to", "perfetto"],
        ".perfetto-trace",
        "",
    ),
    (&["convert", "-q", "--to", "paraver"], ".prv", ".prv"),
    (&["convert", "-q"], ".prv", ".prv"),
];

#[test]
fn an_output_that_is_an_input_is_refused_under_every_name() {
    for (command, extension, cut) in SELF_WRITES {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join(format!("run{extension}"));
        std::fs::copy(fixture(NODE0), &input).unwrap();
        let original = std::fs::read(&input).unwrap();
        let link = dir.path().join(format!("link{extension}"));
        std::os::unix::fs::symlink(&input, &link).unwrap();
        std::fs::hard_link(&input, dir.path().join(format!("hard{extension}"))).unwrap();
        let before = names(dir.path());
        for name in ["run", "./run", "link", "hard"] {
            let output = format!("{}/{name}{extension}", dir.path().display());
            let output = output.strip_suffix(cut).unwrap_or(&output).to_string();
            let args = [command, &["-o", &output, input.to_str().unwrap()]].concat();
            let done = nsys_lens(&args);
            let (_, err) = texts(&done);
            assert_eq!(done.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains("input of this run"), "{args:?}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
            assert!(
                std::fs::read(&input).unwrap() == original,
                "{args:?} changed the input"
            );
            assert_eq!(names(dir.path()), before, "{args:?} left files");
        }
    }
}

/// Whether this process may make device nodes (root).
fn make_null_device(path: &Path) -> bool {
    let made = Command::new("mknod")
        .arg(path)
        .args(["c", "1", "3"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        skipped("mknod failed (not root?): device outputs not checked");
    }
    made
}

#[test]
fn a_device_output_is_written_through_and_stays_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let device = dir.path().join("null");
    if !make_null_device(&device) {
        return;
    }
    let input = fixture(NODE0);
    for args in writers(device.to_str().unwrap(), input.to_str().unwrap()) {
        let done = run(&args);
        assert!(done.status.success(), "{args:?}: {}", texts(&done).1);
        let meta = std::fs::symlink_metadata(&device).unwrap();
        use std::os::unix::fs::FileTypeExt;
        assert!(
            meta.file_type().is_char_device(),
            "{args:?} replaced the device"
        );
        assert_eq!(
            names(dir.path()),
            ["null"],
            "{args:?} wrote beside the device"
        );
    }
    // /dev/null itself, for every format at once.
    let done = nsys_lens(&["convert", "-q", "-o", "/dev/null", input.to_str().unwrap()]);
    assert!(done.status.success(), "{}", texts(&done).1);
    let meta = std::fs::metadata("/dev/null").unwrap();
    assert!(!meta.is_file() && !Path::new("/dev/null.prv").exists());
}

#[test]
fn a_dash_streams_single_file_outputs_and_refuses_sets() {
    let input = fixture(NODE0);
    let input = input.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let in_dir = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let page = in_dir(&["report", "-q", "--whole", "-o", "-", input]);
    assert!(page.status.success(), "{}", texts(&page).1);
    assert!(texts(&page).0.contains("<html"), "the page on stdout");
    let trace = in_dir(&["convert", "-q", "--to", "perfetto", "-o", "-", input]);
    assert!(trace.status.success(), "{}", texts(&trace).1);
    let file = dir.path().join("t.perfetto-trace");
    let done = nsys_lens(&[
        "convert",
        "-q",
        "--to",
        "perfetto",
        "-o",
        file.to_str().unwrap(),
        input,
    ]);
    assert!(done.status.success());
    assert!(
        trace.stdout == std::fs::read(&file).unwrap(),
        "the same bytes"
    );
    std::fs::remove_file(&file).unwrap();
    let part = in_dir(&["part", "-q", "-o", "-", input]);
    assert!(part.status.success() && !part.stdout.is_empty());
    let both = in_dir(&["convert", "-q", "-o", "-", input]);
    assert_eq!(both.status.code(), Some(2));
    assert!(
        texts(&both).1.contains("cannot share one stream"),
        "{}",
        texts(&both).1
    );
    assert!(
        names(dir.path()).is_empty(),
        "no file named '-': {:?}",
        names(dir.path())
    );
}

/// A run that takes a debug build a few seconds to convert.
fn big_run() -> tempfile::TempDir {
    synth("--preset ddp --nodes 2 --gpus-per-node 2 --steps 400")
}

/// Converts `run` into `out` with a tiny budget and `tmpdir`; the outcome and how long it took.
fn convert_spilling(run: &Path, out: &Path, tmpdir: &Path) -> (std::process::Output, Duration) {
    let started = Instant::now();
    let done = Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
        .args(["convert", "-q", "--memory-budget", "64K", "-o"])
        .arg(out.join("trace"))
        .arg(run)
        .env("TMPDIR", tmpdir)
        .output()
        .unwrap();
    (done, started.elapsed())
}

#[test]
fn a_missing_or_full_tmpdir_ends_the_run_at_once_leaving_nothing() {
    let run = big_run();
    let out = tempfile::tempdir().unwrap();
    let (done, took) = convert_spilling(run.path(), out.path(), Path::new("/nonexistent"));
    let err = texts(&done).1;
    assert_eq!(done.status.code(), Some(2), "{err}");
    assert!(
        err.contains("/nonexistent ($TMPDIR)") && err.contains("--memory-budget"),
        "{err}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert!(names(out.path()).is_empty(), "{:?}", names(out.path()));

    let small = tempfile::tempdir().unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(small.path())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        skipped("cannot mount a small tmpfs (not root?): a full $TMPDIR not checked");
        return;
    }
    let (done, took) = convert_spilling(run.path(), out.path(), small.path());
    let left = names(small.path());
    let _ = Command::new("umount").arg(small.path()).status();
    let err = texts(&done).1;
    assert_eq!(done.status.code(), Some(2), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert!(names(out.path()).is_empty() && left.is_empty(), "{left:?}");
}

/// Starts a conversion of `run` into `out`, waits `after`, sends `signal`; its exit status and
/// what it printed.
fn interrupt(run: &Path, out: &Path, signal: i32, after: Duration) -> (Option<i32>, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
        .args(["convert", "-q", "--memory-budget", "256K", "-o"])
        .arg(out.join("trace"))
        .arg(run)
        .env("TMPDIR", out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    // SAFETY: signalling a child process of this test.
    unsafe { libc::kill(child.id() as i32, signal) };
    let done = child.wait_with_output().unwrap();
    (
        done.status.code(),
        String::from_utf8_lossy(&done.stderr).into(),
    )
}

#[test]
fn a_terminating_signal_removes_every_partial_file() {
    let run = big_run();
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        for after_ms in [150, 600, 1500] {
            let out = tempfile::tempdir().unwrap();
            let (code, err) = interrupt(
                run.path(),
                out.path(),
                signal,
                Duration::from_millis(after_ms),
            );
            let left = names(out.path());
            if code == Some(0) {
                // Finished before the signal: all four files, nothing else.
                assert_eq!(left.len(), 4, "{left:?}");
                continue;
            }
            assert_eq!(
                code,
                Some(128 + signal),
                "signal {signal} at {after_ms} ms: {err}"
            );
            assert!(
                left.is_empty(),
                "signal {signal} at {after_ms} ms left {left:?}"
            );
        }
    }
}

#[test]
fn a_killed_runs_temporary_files_go_with_the_next_run() {
    let run = big_run();
    let out = tempfile::tempdir().unwrap();
    let mut killed = false;
    for after_ms in [400, 800, 1600, 3200] {
        let (code, _) = interrupt(
            run.path(),
            out.path(),
            libc::SIGKILL,
            Duration::from_millis(after_ms),
        );
        let left = names(out.path());
        if code.is_none() && left.iter().any(|n| n.starts_with(".nsys-lens-")) {
            killed = true;
            break;
        }
    }
    if !killed {
        skipped("no SIGKILL caught a run while writing");
        return;
    }
    let done = nsys_lens(&[
        "convert",
        "-q",
        "-o",
        out.path().join("trace").to_str().unwrap(),
        run.path().to_str().unwrap(),
    ]);
    assert!(done.status.success(), "{}", texts(&done).1);
    let left = names(out.path());
    let expected = [
        "trace.pcf",
        "trace.perfetto-trace",
        "trace.prv",
        "trace.row",
    ];
    assert_eq!(left, expected, "the next run removed the leftovers");
}

/// Runs `args` with stdout on `/dev/full` and then into a pipe closed at once: a one-line
/// error, or a quiet exit, never a panic.
fn to_full_and_closed(args: &[&str]) {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
    let Ok(full) = full else {
        skipped("no /dev/full here");
        return;
    };
    let done = Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
        .args(args)
        .stdout(full)
        .output()
        .unwrap();
    let err = texts(&done).1;
    assert!(!err.contains("panicked"), "{args:?} into /dev/full: {err}");
    assert_eq!(
        done.status.code(),
        Some(2),
        "{args:?} into /dev/full: {err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");

    let mut child = Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let done = child.wait_with_output().unwrap();
    let err = texts(&done).1;
    assert!(
        !err.contains("panicked"),
        "{args:?} into a closed pipe: {err}"
    );
    assert!(done.status.code().is_some(), "{args:?}: killed by a signal");
}

#[test]
fn printing_into_a_full_disk_or_a_closed_pipe_never_panics() {
    let a = fixture(NODE0);
    let a = a.to_str().unwrap();
    let b = fixture("pithtrain_pp2_ep2/node1.sqlite");
    let b = b.to_str().unwrap();
    let scripts = tempfile::tempdir().unwrap();
    let scripts = scripts.path().to_str().unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["--help"],
        vec!["--version"],
        vec!["convert", "--help"],
        vec!["completions", "bash"],
        vec!["completions", "fish"],
        vec!["man"],
        vec!["info", a],
        vec!["ranks", a, b],
        vec!["window", a, b],
        vec!["streams", a, b],
        vec!["overlap", a, b],
        vec!["kernels", "--whole", "--format", "json", a],
        vec!["idle", "--whole", a],
        vec!["bubbles", "--whole", "--format", "csv", a, b],
        vec!["collectives", "--whole", a, b],
        vec!["compare", a, "--", b],
        vec!["report", "-q", "--whole", "-o", "-", a],
        vec!["part", "-q", "-o", "-", a],
        vec!["convert", "-q", "--to", "perfetto", "-o", "-", a],
        vec!["nsys-reports", scripts],
    ];
    for args in commands {
        to_full_and_closed(&args);
    }
}

#[test]
fn nsys_reports_and_synth_never_leave_partial_sets() {
    let dir = tempfile::tempdir().unwrap();
    let scripts = dir.path().join("scripts");
    let done = nsys_lens(&["nsys-reports", scripts.to_str().unwrap()]);
    assert!(done.status.success(), "{}", texts(&done).1);
    let written = names(&scripts);
    assert!(written.iter().all(|n| n.ends_with(".py")), "{written:?}");
    // A file where synth's directory should be: refused, nothing created.
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"keep").unwrap();
    let done = nsys_lens(&["synth", "-o", blocker.to_str().unwrap(), "--preset", "ddp"]);
    assert_eq!(done.status.code(), Some(2), "{}", texts(&done).1);
    assert_eq!(std::fs::read(&blocker).unwrap(), b"keep");
}
