//! Issue 17: a capture of many nodes converted where it lies. `part` per node, `convert
//! --encode N` per node, then `convert --merge`, each run as a separate process as a cluster's
//! scheduler would, write byte for byte what one `convert` of every export writes; the analyses
//! read part files as they read exports; broken parts and mismatched steps are clear errors.

use crate::util::{json, nsys_lens, real, root, rows, synth, texts};
use std::path::{Path, PathBuf};

/// Runs the binary, which must succeed.
fn ok(args: &[&str]) {
    let run = nsys_lens(args);
    assert!(run.status.success(), "{args:?}: {}", texts(&run).1);
}

/// Files by name, with their bytes.
type Files = Vec<(String, Vec<u8>)>;

/// The output files under `dir`, by name.
fn files(dir: &Path) -> Files {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.to_string_lossy().contains(".encoded-"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// Converts `nodes` (each a list of exports) directly and through parts; both outputs, with
/// `options` given to every step.
fn both_ways(nodes: &[Vec<PathBuf>], options: &[&str]) -> (Files, Files) {
    let work = tempfile::tempdir().unwrap();
    let direct = work.path().join("direct");
    let parts = work.path().join("parts");
    let merged = work.path().join("merged");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let mut args = vec![
        "convert".to_string(),
        "-q".into(),
        "-o".into(),
        s(&direct.join("run")),
    ];
    args.extend(options.iter().map(|o| o.to_string()));
    args.extend(nodes.iter().flatten().map(|p| s(p)));
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    for (i, exports) in nodes.iter().enumerate() {
        let part = s(&parts.join(format!("node{i:02}.lens-part")));
        let mut args = vec!["part".to_string(), "-q".into(), "-o".into(), part];
        args.extend(exports.iter().map(|p| s(p)));
        ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    }
    let step = |extra: Vec<String>| {
        let mut args = vec!["convert".to_string(), "-q".into(), s(&parts)];
        args.extend(["-o".into(), s(&merged.join("run"))]);
        args.extend(options.iter().map(|o| o.to_string()));
        args.extend(extra);
        ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    };
    for i in 0..nodes.len() {
        step(vec!["--encode".into(), i.to_string()]);
    }
    step(vec!["--merge".into()]);
    (files(&direct), files(&merged))
}

fn assert_same(nodes: &[Vec<PathBuf>], options: &[&str]) {
    let (direct, merged) = both_ways(nodes, options);
    assert!(direct.len() >= 3, "{options:?}");
    assert_eq!(direct.len(), merged.len(), "{options:?}");
    for ((name, a), (other, b)) in direct.iter().zip(&merged) {
        assert_eq!(name, other);
        assert!(a == b, "{nodes:?} {options:?}: {name} differs");
    }
}

/// Each `.sqlite` of `dir` as a node of its own.
fn one_per_node(dir: &Path) -> Vec<Vec<PathBuf>> {
    crate::util::sqlite_files(dir)
        .into_iter()
        .map(|p| vec![p])
        .collect()
}

#[test]
fn parts_encoded_apart_and_merged_equal_one_conversion() {
    let pithtrain = one_per_node(&root().join("fixtures/pithtrain_pp2_ep2"));
    assert_same(&pithtrain, &[]);
    assert_same(
        &pithtrain,
        &["--steady", "--ranks", "1-3", "--collective-flows"],
    );
    assert_same(&pithtrain, &["--compress", "--to", "paraver"]);
    let rich = synth(
        "--preset ddp --nodes 3 --gpus-per-node 2 --steps 2 --osrt --gpu-metrics \
         --memory-usage --cuda-graphs --session-gap 3000000",
    );
    assert_same(&one_per_node(rich.path()), &["--align", "collectives"]);
}

#[test]
fn the_real_three_node_run_converts_through_parts_of_three_reports_each() {
    let Some(dir) = real("fs24_nccl_allreduce_tree_3nodes_9gpus") else {
        return;
    };
    // Three reports per host, one part per host.
    let mut nodes: Vec<Vec<PathBuf>> = Vec::new();
    for file in crate::util::sqlite_files(&dir) {
        let host = file.file_name().unwrap().to_string_lossy()[..6].to_string();
        match nodes.last_mut() {
            Some(node)
                if node[0]
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&host) =>
            {
                node.push(file)
            }
            _ => nodes.push(vec![file]),
        }
    }
    assert_eq!(nodes.len(), 3);
    assert_same(&nodes, &["--align", "collectives"]);
}

/// `nsys-lens part -o part export`, which must succeed.
fn write_part(part: &Path, export: &Path) {
    ok(&[
        "part",
        "-q",
        "-o",
        part.to_str().unwrap(),
        export.to_str().unwrap(),
    ]);
}

#[test]
fn analyses_read_part_files_as_they_read_exports() {
    let exports = crate::util::sqlite_files(&root().join("fixtures/pithtrain_pp2_ep2"));
    let dir = tempfile::tempdir().unwrap();
    let mut parts = Vec::new();
    for (i, export) in exports.iter().enumerate() {
        let part = dir.path().join(format!("node{i}.lens-part"));
        write_part(&part, export);
        parts.push(part);
    }
    let s = |v: &[PathBuf]| {
        v.iter()
            .map(|p| p.to_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    for command in [
        vec!["overlap"],
        vec!["kernels", "--whole"],
        vec!["collectives", "--whole"],
        vec!["ranks"],
    ] {
        let run = |inputs: Vec<String>| {
            let mut args: Vec<&str> = command.clone();
            args.extend(inputs.iter().map(String::as_str));
            json(&args)
        };
        let from_exports = run(s(&exports));
        let from_parts = run(s(&parts));
        assert!(!rows(&from_exports).is_empty(), "{command:?}");
        assert_eq!(rows(&from_exports), rows(&from_parts), "{command:?}");
    }
}

/// Writes a sealed file's seal again for its changed bytes: a CRC-32 of the data and the
/// fingerprint (docs of `input::seal`).
fn reseal(bytes: &mut [u8]) {
    let data = bytes.len() - 20;
    let mut crc = flate2::Crc::new();
    crc.update(&bytes[..data]);
    crc.update(&bytes[data + 4..data + 12]);
    bytes[data..data + 4].copy_from_slice(&crc.sum().to_le_bytes());
}

#[test]
fn an_encoded_piece_of_another_run_or_a_flipped_bit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut parts = Vec::new();
    for fixture in ["megatron_pp2", "ddp_2node"] {
        let part = dir.path().join(format!("{fixture}.lens-part"));
        let export = root().join(format!("fixtures/{fixture}/node0.sqlite"));
        write_part(&part, &export);
        parts.push(part);
    }
    let [a, b] = [0, 1].map(|i| dir.path().join(format!("run{i}")));
    let (pa, pb) = (parts[0].to_str().unwrap(), parts[1].to_str().unwrap());
    let encode = |part: &str, base: &Path| {
        ok(&[
            "convert",
            "-q",
            part,
            "--encode",
            "0",
            "-o",
            base.to_str().unwrap(),
        ]);
    };
    encode(pa, &a);
    encode(pb, &b);
    // Run 1's piece put where run 0's join looks.
    let piece = |base: &Path| PathBuf::from(format!("{}.encoded-0", base.display()));
    std::fs::copy(piece(&b), piece(&a)).unwrap();
    let run = nsys_lens(&["convert", "-q", pa, "--merge", "-o", a.to_str().unwrap()]);
    let err = texts(&run).1;
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(
        err.contains("encoded from other inputs") && err.contains("encoded-0"),
        "{err}"
    );
    // Its own piece with one bit flipped.
    encode(pa, &a);
    let mut bytes = std::fs::read(piece(&a)).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(piece(&a), &bytes).unwrap();
    let run = nsys_lens(&["convert", "-q", pa, "--merge", "-o", a.to_str().unwrap()]);
    let err = texts(&run).1;
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(err.contains("checksum does not match"), "{err}");
    bytes[middle] ^= 1;
    std::fs::write(piece(&a), &bytes).unwrap();
    ok(&["convert", "-q", pa, "--merge", "-o", a.to_str().unwrap()]);
}

#[test]
fn broken_parts_and_mismatched_steps_are_clear_errors() {
    let export = root().join("fixtures/megatron_pp2/node0.sqlite");
    let dir = tempfile::tempdir().unwrap();
    let part = dir.path().join("node0.lens-part");
    write_part(&part, &export);
    let bytes = std::fs::read(&part).unwrap();
    // Cut at several places: the light section, the runs.
    for cut in [20, 100, bytes.len() / 2, bytes.len() - 10] {
        let broken = dir.path().join(format!("cut{cut}.lens-part"));
        std::fs::write(&broken, &bytes[..cut]).unwrap();
        let run = nsys_lens(&["overlap", broken.to_str().unwrap()]);
        let err = texts(&run).1;
        assert_eq!(run.status.code(), Some(2), "cut at {cut}: {err}");
        assert!(
            err.contains(broken.to_str().unwrap()),
            "cut at {cut}: {err}"
        );
        assert!(!err.contains("panicked"), "cut at {cut}: {err}");
    }
    // A kernel of the first run naming a stream the report does not have: the seal refuses
    // the changed file; sealed again (as a bug of ours could write it), the reader refuses
    // the impossible stream.
    let light = u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize;
    let mut damaged = bytes.clone();
    let stream = 24 + light + 16;
    damaged[stream..stream + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let flipped = dir.path().join("flipped.lens-part");
    std::fs::write(&flipped, &damaged).unwrap();
    let run = nsys_lens(&["overlap", flipped.to_str().unwrap()]);
    let err = texts(&run).1;
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(err.contains("checksum does not match"), "{err}");
    reseal(&mut damaged);
    let broken = dir.path().join("damaged.lens-part");
    std::fs::write(&broken, &damaged).unwrap();
    let out = dir.path().join("damaged");
    for args in [
        vec!["overlap", broken.to_str().unwrap()],
        vec![
            "convert",
            broken.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
    ] {
        let run = nsys_lens(&args);
        let err = texts(&run).1;
        assert_eq!(run.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("damaged part file"), "{args:?}: {err}");
        assert!(err.contains(broken.to_str().unwrap()), "{args:?}: {err}");
    }
    let base = dir.path().join("run");
    let b = base.to_str().unwrap();
    let p = part.to_str().unwrap();
    // The join needs every input encoded, with the options it is given.
    let run = nsys_lens(&["convert", "-q", p, "--merge", "-o", b]);
    assert_eq!(run.status.code(), Some(2));
    assert!(texts(&run).1.contains("encoded-0"), "{}", texts(&run).1);
    ok(&["convert", "-q", p, "--encode", "0", "-o", b]);
    let run = nsys_lens(&["convert", "-q", p, "--merge", "--steady", "-o", b]);
    assert_eq!(run.status.code(), Some(2));
    assert!(texts(&run).1.contains("other options"), "{}", texts(&run).1);
    let run = nsys_lens(&["convert", "-q", p, "--encode", "1", "-o", b]);
    assert_eq!(run.status.code(), Some(2));
    assert!(
        texts(&run).1.contains("there are 1 inputs"),
        "{}",
        texts(&run).1
    );
    ok(&["convert", "-q", p, "--merge", "-o", b]);
}

#[test]
fn the_documented_slurm_script_converts_as_one_conversion() {
    // The first ```bash block under "With Slurm" in docs/scale.md, run as Slurm would.
    let page = std::fs::read_to_string(root().join("docs/scale.md")).unwrap();
    let script: String = page
        .split("### With Slurm")
        .nth(1)
        .unwrap()
        .split("```bash\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap()
        .to_string();
    let run = tempfile::tempdir().unwrap();
    let fixtures = crate::util::sqlite_files(&root().join("fixtures/pithtrain_pp2_ep2"));
    let mut exports = Vec::new();
    for (i, export) in fixtures.iter().enumerate() {
        let node = run.path().join(format!("node{i:03}"));
        std::fs::create_dir_all(&node).unwrap();
        std::fs::copy(export, node.join("report.sqlite")).unwrap();
        exports.push(node.join("report.sqlite"));
    }
    let script_path = run.path().join("convert-run.sh");
    std::fs::write(&script_path, script).unwrap();
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_nsys-lens"));
    let path = format!(
        "{}:{}",
        binary.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let step = |step: &str, task: Option<usize>| {
        let mut command = std::process::Command::new("bash");
        command
            .arg(&script_path)
            .arg(step)
            .env("RUN", run.path())
            .env("PATH", &path);
        if let Some(task) = task {
            command.env("SLURM_ARRAY_TASK_ID", task.to_string());
        }
        let out = command.output().unwrap();
        assert!(out.status.success(), "{step}: {}", texts(&out).1);
    };
    for step_name in ["part", "encode"] {
        for task in 0..exports.len() {
            step(step_name, Some(task));
        }
    }
    step("merge", None);
    let direct = run.path().join("direct");
    let mut args = vec!["convert".to_string(), "-q".into(), "-o".into()];
    args.push(direct.join("run").to_str().unwrap().to_string());
    args.extend(exports.iter().map(|p| p.to_str().unwrap().to_string()));
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let merged = files(&run.path().join("traces"));
    assert_eq!(merged.len(), 4);
    assert_eq!(merged, files(&direct));
}
