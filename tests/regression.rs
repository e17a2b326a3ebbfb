//! Regression tests named after the issue that reported the defect.

use crate::util::{fixture, nsys_lens, texts};

/// Issue 21: an `--anchor` the user named that matches nothing is an error (exit 2) naming the
/// closest NVTX range names, not a silent fall-back to the whole capture.
#[test]
fn r21_an_anchor_matching_nothing_is_an_error_with_suggestions() {
    let run = nsys_lens(&[
        "overlap",
        "--anchor",
        "ProfilerStp",
        fixture("ddp_2node").to_str().unwrap(),
    ]);
    let (_, err) = texts(&run);
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--anchor `ProfilerStp` matches no NVTX range"),
        "{err}"
    );
    assert!(err.contains("ProfilerStep#0"), "{err}");
    let ok = nsys_lens(&[
        "overlap",
        "--anchor",
        "ProfilerStep",
        fixture("ddp_2node").to_str().unwrap(),
    ]);
    assert!(ok.status.success());
}

/// Issue 21: each cause is said once (`No such file or directory` appeared twice).
#[test]
fn r21_an_error_says_its_cause_once() {
    let run = nsys_lens(&["info", "/no/such/report.sqlite"]);
    let (_, err) = texts(&run);
    assert_eq!(run.status.code(), Some(2));
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// Issue 21: `convert -o DIR` writes `DIR/<stem>.*`, not hidden `DIR/.prv` files.
#[test]
fn r21_convert_into_a_directory_names_the_files_after_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("ddp_2node").join("node0.sqlite");
    for out in [dir.path().to_path_buf(), dir.path().join("new/")] {
        let out = out.to_str().unwrap().to_string();
        let run = nsys_lens(&["convert", "-q", input.to_str().unwrap(), "-o", &out]);
        assert!(run.status.success(), "{}", texts(&run).1);
        let mut names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("node0"))
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "node0.pcf",
                "node0.perfetto-trace",
                "node0.prv",
                "node0.row"
            ],
            "{out}"
        );
    }
}

/// Issue 21: `report fp32/ -- bf16/ -o compare.html` (the example in `report --help`) failed
/// with "-o: cannot read": options written after `--` are the command's, not reports.
#[test]
fn r21_options_after_the_separator_are_options() {
    let dir = tempfile::tempdir().unwrap();
    let run = fixture("ddp_2node");
    let run = run.to_str().unwrap();
    let page = dir.path().join("compare.html");
    let report = nsys_lens(&["report", run, "--", run, "-o", page.to_str().unwrap(), "-q"]);
    assert!(report.status.success(), "{}", texts(&report).1);
    assert!(std::fs::read_to_string(&page).unwrap().contains("<svg"));
    let compare = nsys_lens(&[
        "compare", run, "--", run, "--whole", "--format", "json", "-q",
    ]);
    assert!(compare.status.success(), "{}", texts(&compare).1);
    let json: serde_json::Value = serde_json::from_str(&texts(&compare).0).unwrap();
    assert!(!json["rows"].as_array().unwrap().is_empty());
}

/// Issue 21: `bubbles` on the PithTrain fixture printed a 50 % ideal beside a 1.6 % bubble: the
/// 1F1B formula applied to one DualPipeV chunk. No ideal there, and the output says why.
#[test]
fn r21_no_1f1b_ideal_for_dualpipev_or_a_window_that_is_no_step() {
    let json = crate::util::json(&["bubbles", fixture("pithtrain_pp2_ep2").to_str().unwrap()]);
    for row in crate::util::rows(&json) {
        assert!(row["ideal_bubble_pct"].is_null(), "{row}");
    }
    assert!(
        json["notes"].to_string().contains("DualPipeV"),
        "{}",
        json["notes"]
    );
    // Megatron's whole 1F1B steps keep theirs: (2 - 1) / (4 + 2 - 1).
    let megatron = crate::util::json(&[
        "bubbles",
        "--whole",
        fixture("megatron_pp2").to_str().unwrap(),
    ]);
    assert!(
        crate::util::rows(&megatron)
            .iter()
            .all(|r| r["ideal_bubble_pct"] == 20.0)
    );
}

/// Issue 21 and DESIGN.md: nothing is written beside an input. A WAL-mode export used to get
/// `-wal` and `-shm` files created next to it by a read.
#[test]
fn r21_reading_a_wal_export_leaves_its_directory_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("odd #name%.sqlite");
    std::fs::copy(fixture("ddp_2node").join("node0.sqlite"), &file).unwrap();
    let conn = rusqlite::Connection::open(&file).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    drop(conn);
    let listing = || {
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let before = listing();
    for command in ["info", "overlap", "streams", "collectives"] {
        let run = nsys_lens(&[command, file.to_str().unwrap(), "-q"]);
        assert!(run.status.success(), "{command}: {}", texts(&run).1);
    }
    assert_eq!(listing(), before);
}

/// Issue 21: a report another program is writing (it holds the write lock) is said to be
/// locked, after a short wait, not "truncated or corrupted".
#[test]
fn r21_a_locked_report_is_called_locked() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("node0.sqlite");
    std::fs::copy(fixture("ddp_2node").join("node0.sqlite"), &file).unwrap();
    let writer = rusqlite::Connection::open(&file).unwrap();
    writer
        .execute_batch(
            "BEGIN EXCLUSIVE; CREATE TABLE lock_probe (a); INSERT INTO lock_probe VALUES (1);",
        )
        .unwrap();
    let run = nsys_lens(&["info", file.to_str().unwrap()]);
    let (_, err) = texts(&run);
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(err.contains("another program is writing the file"), "{err}");
    assert!(!err.contains("corrupted"), "{err}");
    writer.execute_batch("ROLLBACK").unwrap();
}

/// Issue 21: no option is accepted and ignored: `--compat` only where a command reproduces
/// another tool's tables.
#[test]
fn r21_compat_is_refused_where_it_would_be_ignored() {
    let node = fixture("pithtrain_pp2_ep2").join("node0.sqlite");
    let node = node.to_str().unwrap();
    for command in ["kernels", "idle", "bubbles", "collectives"] {
        let run = nsys_lens(&[command, "--compat", "pithtrain", node]);
        assert_eq!(run.status.code(), Some(2), "{command}");
        assert!(
            texts(&run).1.contains("unexpected argument '--compat'"),
            "{command}"
        );
    }
    for command in ["ranks", "window", "streams", "overlap"] {
        let run = nsys_lens(&[command, "--compat", "pithtrain", node]);
        assert!(run.status.success(), "{command}: {}", texts(&run).1);
    }
}

/// Issue 21: shell completions and a man page from the same clap definitions as `--help`; the
/// bash script is valid bash and both know every subcommand.
#[test]
fn r21_completions_and_man_page_cover_every_subcommand() {
    let subcommands = [
        "info",
        "ranks",
        "window",
        "streams",
        "overlap",
        "kernels",
        "idle",
        "bubbles",
        "collectives",
        "compare",
        "report",
        "convert",
        "synth",
    ];
    let bash = nsys_lens(&["completions", "bash"]);
    assert!(bash.status.success());
    let script = texts(&bash).0;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nsys-lens.bash");
    std::fs::write(&path, &script).unwrap();
    let syntax = std::process::Command::new("bash")
        .arg("-n")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        syntax.status.success(),
        "{}",
        String::from_utf8_lossy(&syntax.stderr)
    );
    let man = nsys_lens(&["man"]);
    let page = texts(&man).0;
    assert!(page.contains(".TH nsys-lens 1"));
    for command in subcommands {
        assert!(script.contains(command), "completions lack {command}");
        assert!(page.contains(command), "the man page lacks {command}");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        assert!(
            nsys_lens(&["completions", shell]).status.success(),
            "{shell}"
        );
    }
}

/// Issue 21: `synth --preset megatron --pp 1` failed ("1 ranks do not fill nodes of 2 GPUs"):
/// every mesh gets a node size that fits unless one is given, and an impossible one names the
/// option to change.
#[test]
fn r21_synth_fits_any_mesh_to_its_nodes() {
    for args in [
        "--preset megatron --pp 1",
        "--preset megatron --pp 3 --tp 1",
        "--preset pithtrain --pp 1 --ep 3 --chunks 2",
    ] {
        crate::util::synth(args);
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let args = [
        "synth",
        "-o",
        out,
        "--preset",
        "megatron",
        "--pp",
        "3",
        "--gpus-per-node",
        "2",
    ];
    let run = nsys_lens(&args);
    assert_eq!(run.status.code(), Some(2));
    assert!(
        texts(&run).1.contains("change --gpus-per-node"),
        "{}",
        texts(&run).1
    );
}

/// Issue 21: one spelling for choosing ranks. `--ranks LIST` everywhere (one rank, a list or
/// ranges), `--rank` the same option; a rank that does not exist is an error naming it.
#[test]
fn ranks_are_chosen_the_same_way_in_every_command() {
    let input = crate::util::root().join("fixtures/megatron_pp2");
    let at = input.to_str().unwrap();
    let ranks_of = |args: &[&str]| -> Vec<i64> {
        let mut all = args.to_vec();
        all.push(at);
        let mut ranks: Vec<i64> = crate::util::rows(&crate::util::json(&all))
            .iter()
            .filter_map(|r| r["rank"].as_i64())
            .collect();
        ranks.dedup();
        ranks
    };
    for command in ["overlap", "streams", "kernels", "idle", "bubbles"] {
        assert_eq!(
            ranks_of(&[command, "--ranks", "0,2-3"]),
            [0, 2, 3],
            "{command}"
        );
        assert_eq!(
            ranks_of(&[command, "--rank", "1"]),
            ranks_of(&[command, "--ranks", "1"]),
            "{command}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("two");
    let run = crate::util::nsys_lens(&[
        "convert",
        "--rank",
        "0-1",
        "-q",
        "-o",
        out.to_str().unwrap(),
        at,
    ]);
    assert!(run.status.success(), "{}", crate::util::texts(&run).1);
    let rows = std::fs::read_to_string(out.with_extension("row")).unwrap();
    assert!(rows.contains("LEVEL TASK SIZE 2"), "{rows}");
    let missing = crate::util::nsys_lens(&["overlap", "--ranks", "1,9", at]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(crate::util::texts(&missing).1.contains("no rank 9"));
}

/// The `Examples:` lines of every subcommand's `--help`, as shell commands.
fn help_examples() -> Vec<String> {
    let top = crate::util::nsys_lens(&["--help"]);
    let commands: Vec<String> = crate::util::texts(&top)
        .0
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() > 10, "{commands:?}");
    let mut examples = Vec::new();
    for command in commands {
        let help = crate::util::nsys_lens(&[&command, "--help"]);
        let text = crate::util::texts(&help).0;
        for line in text
            .lines()
            .skip_while(|l| !l.starts_with("Examples:"))
            .skip(1)
        {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("nsys-lens ") {
                // The command is what comes before the aligned description (2+ spaces).
                let command = rest.split("  ").next().unwrap().trim();
                examples.push(format!("nsys-lens {command}"));
            }
        }
    }
    examples
}

/// Issue 21: every example in a `--help` runs, in a directory holding the files the examples
/// name (the fixtures and synthetic runs under those names), with the shell's own globbing,
/// quoting and redirection.
#[test]
fn every_help_example_runs() {
    use std::process::Command;
    let examples = help_examples();
    assert!(examples.len() > 40, "{examples:?}");
    let dir = tempfile::tempdir().unwrap();
    let here = dir.path();
    let fixture = |name: &str| crate::util::root().join("fixtures").join(name);
    let [node0, node1] = crate::util::pithtrain_nodes();
    std::fs::copy(node0, here.join("node0.sqlite")).unwrap();
    std::fs::copy(node1, here.join("node1.sqlite")).unwrap();
    let megatron = fixture("megatron_pp2/node0.sqlite");
    for name in ["run.sqlite", "trace.sqlite"] {
        std::fs::copy(&megatron, here.join(name)).unwrap();
    }
    let synth_into = |name: &str, args: &str| {
        let out = crate::util::nsys_lens(
            &["synth", "-o", here.join(name).to_str().unwrap()]
                .into_iter()
                .chain(args.split_whitespace())
                .collect::<Vec<_>>(),
        );
        assert!(
            out.status.success(),
            "{args}: {}",
            crate::util::texts(&out).1
        );
    };
    synth_into(
        "run",
        "--preset ddp --nodes 2 --gpus-per-node 1 --gpu-metrics",
    );
    synth_into("fp32", "--preset ddp --nodes 1 --gpus-per-node 1");
    synth_into(
        "traces",
        "--preset ddp --nodes 1 --gpus-per-node 1 --format kineto",
    );
    synth_into(
        "bf16",
        "--preset ddp --nodes 1 --gpus-per-node 1 --mixed-precision",
    );
    let one_node = "--preset ddp --nodes 1 --gpus-per-node 1";
    for (name, extra) in [
        ("accum1", "--grad-accum 1"),
        ("accum4", "--grad-accum 4"),
        ("train", "--shape-nvtx"),
    ] {
        synth_into(name, &format!("{one_node} {extra}"));
        std::fs::rename(
            here.join(name).join("node0.sqlite"),
            here.join(format!("{name}.sqlite")),
        )
        .unwrap();
    }
    // An application's own kernel, which no family names (Rodinia's `Fan2`).
    let (_app_dir, app) = crate::scenario::Scenario::new()
        .kernel((crate::scenario::PID, 0, 7), (1000, 5000), "Fan2", 1)
        .write();
    std::fs::copy(app, here.join("app.sqlite")).unwrap();
    std::fs::write(
        here.join("roles.toml"),
        "[[rule]]\npattern = \"forward\"\nrole = \"fwd\"\n",
    )
    .unwrap();
    std::fs::write(
        here.join("mine.toml"),
        "[[family]]\nname = \"gemms\"\npattern = \"gemm\"\n",
    )
    .unwrap();
    for shell_dir in [
        ".local/share/bash-completion/completions",
        ".zfunc",
        ".config/fish/completions",
        ".local/share/man/man1",
    ] {
        std::fs::create_dir_all(here.join(shell_dir)).unwrap();
    }
    // An .nsys-rep needs nsys to export it: made by the real nsys when it is here.
    let has_nsys = Command::new("nsys").arg("--version").output().is_ok();
    let binary = std::path::PathBuf::from(env!("CARGO_BIN_EXE_nsys-lens"));
    let path = format!(
        "{}:{}",
        binary.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for example in &examples {
        if example.contains(".nsys-rep") && !has_nsys {
            crate::util::skipped(&format!("`{example}`: nsys is not installed"));
            continue;
        }
        if example.contains(".nsys-rep") {
            crate::osrt::capture(here, "run");
        }
        let _nsys = example.contains(".nsys-rep").then(crate::real_nsys::lock);
        let run = Command::new("sh")
            .arg("-c")
            .arg(example)
            .current_dir(here)
            .env("PATH", &path)
            .env("HOME", here)
            .output()
            .unwrap();
        let (out, err) = crate::util::texts(&run);
        assert!(run.status.success(), "`{example}` failed: {out}{err}");
    }
}

/// Tables printed raw nanoseconds (`1432111`): durations now carry units that fit them
/// (`--timeunit auto`, the default) or the unit asked for, counts get thousands separators,
/// and JSON and CSV keep integer ns under the same column names.
#[test]
fn tables_print_durations_in_units_and_scripts_keep_nanoseconds() {
    let report = fixture("megatron_pp2/node0.sqlite");
    let report = report.to_str().unwrap();
    let run = |args: &[&str]| {
        let out = nsys_lens(args);
        assert!(out.status.success(), "{args:?}");
        texts(&out).0
    };
    let json: serde_json::Value =
        serde_json::from_str(&run(&["streams", "--format", "json", report])).unwrap();
    let row = &json["rows"][0];
    let comp = row["comp_ns"].as_i64().unwrap();
    assert!(comp > 1_000_000, "{row}");
    let auto = run(&["streams", report]);
    let header = auto.lines().find(|l| l.starts_with("rank")).unwrap();
    assert!(
        header.contains(" comp ") && !header.contains("comp_ns"),
        "{header}"
    );
    let ms = format!("{:.2} ms", comp as f64 / 1e6);
    assert!(auto.contains(&ms), "{ms} in\n{auto}");
    let micros = run(&["streams", "--timeunit", "us", report]);
    assert!(micros.contains("comp_us"), "{micros}");
    assert!(
        micros.contains(&format!("{:.3}", comp as f64 / 1e3)),
        "{micros}"
    );
    let nanos = run(&["streams", "--timeunit", "ns", report]);
    assert!(nanos.contains("comp_ns") && nanos.contains(&comp.to_string()));
    let csv = run(&["streams", "--format", "csv", "--timeunit", "ms", report]);
    assert!(csv.starts_with("rank,") && csv.contains("comp_ns") && csv.contains(&comp.to_string()));
}

/// Issue 35: `help --help` is the top-level help (clap's `help` took no options), and `man
/// --dir` writes every page the main page lists, each a man page, all at once.
#[test]
fn help_of_help_and_every_listed_man_page() {
    let out = crate::util::nsys_lens(&["help", "--help"]);
    assert!(out.status.success(), "{}", crate::util::texts(&out).1);
    assert!(
        crate::util::texts(&out)
            .0
            .contains("Usage: nsys-lens <COMMAND>")
    );
    let main = crate::util::texts(&crate::util::nsys_lens(&["man"])).0;
    let listed: std::collections::BTreeSet<String> = main
        .split("(1)")
        .filter_map(|s| s.rsplit(char::is_whitespace).next())
        .filter(|s| s.starts_with("nsys\\-lens\\-"))
        .map(|s| format!("{}.1", s.replace('\\', "")))
        .collect();
    assert!(listed.len() > 20, "{listed:?}");
    let dir = tempfile::tempdir().unwrap();
    let made = crate::util::nsys_lens(&["man", "--dir", dir.path().to_str().unwrap()]);
    assert!(made.status.success(), "{}", crate::util::texts(&made).1);
    for page in listed.iter().chain([&"nsys-lens.1".to_string()]) {
        let text = std::fs::read_to_string(dir.path().join(page))
            .unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.contains(".TH "), "{page}");
    }
}

/// Tables and notes named API calls as CUPTI records them (`cudaStreamSynchronize_v3020`);
/// they now name them as Nsight does (`cudaStreamSynchronize`), and idle gaps read in units.
#[test]
fn api_names_in_tables_carry_no_cupti_version_suffix() {
    let report = fixture("megatron_pp2/node0.sqlite");
    let report = report.to_str().unwrap();
    let idle = texts(&nsys_lens(&["idle", "--whole", report])).0;
    assert!(
        idle.contains(
            "idle 6.705 ms from 0.167857998 s (other); the launching thread was in: \
         cudaStreamSynchronize\n"
        ),
        "{idle}"
    );
    let json = texts(&nsys_lens(&["idle", "--whole", "--format", "json", report])).0;
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let cpu: Vec<&str> = json["longest_gaps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["cpu"].as_str())
        .collect();
    assert!(
        !cpu.is_empty() && cpu.iter().all(|c| !c.contains("_v")),
        "{cpu:?}"
    );
}

/// The median rows of `kernels` (rank `all`) read as no rank: host `median`, no pid.
#[test]
fn median_rows_name_no_host_or_pid() {
    let [n0, n1] = crate::util::pithtrain_nodes();
    let json = crate::util::json(&["kernels", n0.to_str().unwrap(), n1.to_str().unwrap()]);
    let median: Vec<&serde_json::Value> = crate::util::rows(&json)
        .iter()
        .filter(|r| r["rank"] == "all")
        .collect();
    assert!(!median.is_empty());
    for row in median {
        assert_eq!(row["host"], "median", "{row}");
        assert!(row["pid"].is_null(), "{row}");
    }
}

/// A report whose NVTX ranges began before its session start (8 in this fixture, from
/// -95 ms) printed windows from -0.095 s. The whole window now starts at the session start,
/// while a trace of the whole capture still draws those ranges (tests/perfetto.rs counts them).
#[test]
fn whole_windows_never_start_before_the_capture() {
    let report = fixture("megatron_pp2/node0.sqlite");
    let db = rusqlite::Connection::open(&report).unwrap();
    let early: i64 = db
        .query_row(
            "SELECT count(*) FROM NVTX_EVENTS WHERE start < 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(early > 0, "the fixture has ranges before its session start");
    let json = crate::util::json(&["window", "--whole", report.to_str().unwrap()]);
    for row in crate::util::rows(&json) {
        assert_eq!(row["start"], 0, "{row}");
    }
    let text = texts(&nsys_lens(&["idle", "--whole", report.to_str().unwrap()])).0;
    assert!(
        text.starts_with("window rank 0: 0.000000000 s to "),
        "{text}"
    );
}

/// `--help` of every command that reads captures named nsys exports, `.nsys-rep` reports,
/// part files and directories, never torch.profiler or JAX traces, which each reads as well.
#[test]
fn every_reading_command_s_help_names_every_kind_of_input() {
    let top = texts(&nsys_lens(&["--help"])).0;
    let listed = top
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap();
    let commands: Vec<&str> = listed
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| !["nsys-reports", "synth", "completions", "man", "help"].contains(c))
        .collect();
    assert!(commands.len() >= 17, "{commands:?}");
    for command in commands {
        let help = texts(&nsys_lens(&[command, "--help"])).0;
        for kind in [
            "nsys",
            ".nsys-rep",
            "torch.profiler",
            "JAX",
            "part files",
            "directories",
        ] {
            assert!(help.contains(kind), "{command} --help does not name {kind}");
        }
    }
}
