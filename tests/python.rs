//! The Python package: `maturin build` makes one abi3 wheel, which installs into a fresh
//! virtual environment; there `python/tests` (pytest) checks every table against the CLI's
//! JSON, and every ```python block of `docs/python.md` runs as written, from the repository
//! root. Skipped, noted, without maturin, pytest or pyarrow (a failure under `NSYS_LENS_CI`,
//! where `.ci/run` installs them).

use crate::util::{root, texts};
use std::path::Path;
use std::process::Command;

/// Whether the build and test tools are here.
fn tools() -> bool {
    let maturin = Command::new("maturin").arg("--version").output().is_ok();
    let python = Command::new("python3")
        .args(["-c", "import pyarrow, pytest"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !(maturin && python) {
        assert!(
            std::env::var_os("NSYS_LENS_CI").is_none(),
            "CI must install maturin, pyarrow and pytest (see .ci/run)"
        );
        crate::util::skipped("the Python package: maturin, pyarrow or pytest is not installed");
    }
    maturin && python
}

/// Runs a command, which must succeed; its stdout.
fn run(command: &mut Command) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{command:?}:\n{stdout}{stderr}");
    stdout
}

/// The ```python blocks of a page.
fn python_blocks(page: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        if line.trim_end() == "```python" {
            let body: Vec<&str> = lines
                .by_ref()
                .take_while(|l| !l.starts_with("```"))
                .collect();
            blocks.push(body.join("\n"));
        }
    }
    blocks
}

#[test]
fn the_wheel_installs_and_its_tables_equal_the_cli() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let wheels = dir.path().join("wheels");
    run(Command::new("maturin")
        .args(["build", "--release", "--quiet", "-m"])
        .arg(root().join("python/Cargo.toml"))
        .arg("-o")
        .arg(&wheels));
    let wheel = std::fs::read_dir(&wheels)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .expect("a wheel");
    let name = wheel.file_name().unwrap().to_string_lossy().to_string();
    assert!(name.contains("-cp310-abi3-"), "not an abi3 wheel: {name}");
    // A fresh environment that sees the machine's pyarrow and pytest, but not the package.
    let venv = dir.path().join("venv");
    run(Command::new("python3")
        .args(["-m", "venv", "--system-site-packages"])
        .arg(&venv));
    let python = venv.join("bin/python");
    run(Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "--no-deps", "--no-index"])
        .arg(&wheel));
    run(Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(root().join("python/tests"))
        .env("NSYS_LENS_BIN", env!("CARGO_BIN_EXE_nsys-lens"))
        .current_dir(dir.path()));
    docs_run(&python);
}

/// Every ```python block of docs/python.md runs, from the repository root.
fn docs_run(python: &Path) {
    let page = std::fs::read_to_string(root().join("docs/python.md")).unwrap();
    let blocks = python_blocks(&page);
    assert!(blocks.len() >= 4, "{blocks:?}");
    for block in blocks {
        run(Command::new(python)
            .args(["-c", &block])
            .current_dir(root()));
    }
}
