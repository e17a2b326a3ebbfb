//! Issue 17: the conversion streams under a memory budget. However small the budget (events
//! spilled to sorted runs, records waiting for their launches spilled too) and however many
//! threads, the outputs are byte for byte the same; and no temporary file is left behind.

use crate::util::{nsys_lens, root, synth, texts};
use nsys_lens::classify::comm::is_comm;
use nsys_lens::classify::{self, Activity, RoleRules, WindowSpec};
use nsys_lens::export::Plan;
use nsys_lens::export::prepare::prepare_all;
use nsys_lens::input::capture::Captures;
use nsys_lens::spill::Budget;
use std::path::{Path, PathBuf};

/// Every file `convert` writes for `inputs` with `extra` options.
fn converted(inputs: &[PathBuf], extra: &[&str]) -> Vec<(String, Vec<u8>)> {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("run");
    let mut args = vec!["convert", "-q", "-o", base.to_str().unwrap()];
    args.extend(extra);
    args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    let run = nsys_lens(&args);
    assert!(run.status.success(), "{args:?}: {}", texts(&run).1);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(path).unwrap())
        })
        .collect();
    files.sort();
    assert_eq!(files.len(), 4, "{args:?}");
    files
}

/// The reports of a fixture or synthetic run directory.
fn reports(dir: &Path) -> Vec<PathBuf> {
    crate::util::sqlite_files(dir)
}

#[test]
fn a_tiny_memory_budget_and_any_thread_count_write_the_same_bytes() {
    // Every kind of event: OS calls, GPU metrics, device memory, CUDA graphs, a straggler.
    let rich = synth(
        "--preset ddp --nodes 2 --gpus-per-node 2 --steps 3 --slow-dataloader --osrt \
         --gpu-metrics --memory-usage --cuda-graphs",
    );
    let whole: &[&str] = &[];
    let mut runs: Vec<(Vec<PathBuf>, Vec<&[&str]>)> = ["pithtrain_pp2_ep2", "megatron_pp2"]
        .iter()
        .map(|f| (reports(&root().join("fixtures").join(f)), vec![whole]))
        .collect();
    let windows: Vec<&[&str]> = vec![whole, &["--steady"], &["--ranks", "1,2", "--steady"]];
    runs.push((reports(rich.path()), windows));
    for (inputs, windows) in runs {
        for window in windows {
            let mut plain = window.to_vec();
            plain.extend(["--threads", "1"]);
            let want = converted(&inputs, &plain);
            for (budget, threads) in [("2k", "1"), ("2k", "3"), ("1G", "4")] {
                let mut args = window.to_vec();
                args.extend(["--memory-budget", budget, "--threads", threads]);
                let got = converted(&inputs, &args);
                for ((name, a), (_, b)) in want.iter().zip(&got) {
                    assert!(a == b, "{inputs:?} {args:?}: {name} differs");
                }
            }
        }
    }
}

#[test]
fn a_small_budget_spills_the_events_and_the_waiting_records() {
    let path = root().join("fixtures/pithtrain_pp2_ep2/node0.sqlite");
    let out = tempfile::tempdir().unwrap();
    let write = |budget: usize, name: &str| -> Vec<u8> {
        let report = nsys_lens::nsys::Report::open(&path).unwrap();
        let captures = Captures::read(vec![report], 1, Budget::new(budget), is_comm).unwrap();
        let runs = captures.parts[0].events.size().1;
        let activity = Activity::new(&captures.light);
        let rules = RoleRules::default();
        let ranks = classify::ranks::discover(&activity).unwrap();
        let plan = Plan::new(&activity, &rules, &ranks, (&WindowSpec::Whole, &[]), true);
        let prepared = prepare_all(&plan, &captures.parts, 1).unwrap();
        let base = out.path().join(name);
        let trace = crate::util::write_apart(&plan, &captures.parts, &prepared, &base, budget);
        if budget < 4096 {
            assert!(runs > 0, "the events did not spill");
        } else {
            assert_eq!(runs, 0);
        }
        let mut bytes = std::fs::read(base.with_extension("prv")).unwrap();
        bytes.extend(std::fs::read(trace).unwrap());
        bytes
    };
    assert!(write(1024, "small") == write(1 << 30, "large"));
}

/// Conversion runs one stream of events on a thread of its own for both writers; each writer
/// given no share runs a stream of its own. Both give the same bytes, for one report (both
/// writers share) and two (Perfetto streams each report apart), with spilled events.
#[test]
fn writers_sharing_one_stream_write_what_a_stream_each_writes() {
    for fixture in ["pithtrain_pp2_ep2", "ddp_2node"] {
        let paths = reports(&root().join("fixtures").join(fixture));
        let out = tempfile::tempdir().unwrap();
        let budget = 4096;
        let reports = paths
            .iter()
            .map(|p| nsys_lens::nsys::Report::open(p).unwrap());
        let captures = Captures::read(reports.collect(), 1, Budget::new(budget), is_comm).unwrap();
        let activity = Activity::new(&captures.light);
        let rules = RoleRules::default();
        let ranks = classify::ranks::discover(&activity).unwrap();
        let plan = Plan::new(&activity, &rules, &ranks, (&WindowSpec::Whole, &[]), true);
        let own = out.path().join("own");
        let prepared = prepare_all(&plan, &captures.parts, 1).unwrap();
        crate::util::write_apart(&plan, &captures.parts, &prepared, &own, budget);
        let shared = out.path().join("shared");
        let targets = nsys_lens::export::Targets {
            perfetto: Some(shared.with_extension("perfetto-trace")),
            paraver: Some(shared.clone()),
            gzip: false,
            memory: budget,
            threads: 1,
        };
        nsys_lens::export::write(&plan, &captures.parts, &targets).unwrap();
        for ext in ["prv", "pcf", "row", "perfetto-trace"] {
            let a = std::fs::read(own.with_extension(ext)).unwrap();
            let b = std::fs::read(shared.with_extension(ext)).unwrap();
            assert!(a == b, "{fixture}: .{ext} differs");
        }
    }
}

#[test]
fn no_temporary_file_is_left_in_tmpdir_after_a_spilling_run_or_an_interrupt() {
    let run = synth("--preset ddp --nodes 1 --gpus-per-node 1 --layers 8 --steps 150");
    let input = run.path().join("node0.sqlite");
    let tmp = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let base = out.path().join("run");
    let convert = || {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_nsys-lens"));
        command
            .args(["convert", "-q", "--memory-budget", "64k", "-o"])
            .arg(&base)
            .arg(&input)
            .env("TMPDIR", tmp.path());
        command
    };
    let left = || std::fs::read_dir(tmp.path()).unwrap().count();
    assert!(convert().status().unwrap().success());
    assert_eq!(left(), 0, "a finished run left temporary files");
    let mut child = convert().spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let _ = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    child.wait().unwrap();
    assert_eq!(left(), 0, "an interrupted run left temporary files");
}

/// `overlap`, `idle`, `streams`, `collectives` (instances, per rank, with transfers), `kernels`
/// (steps counted and given, and `--unclassified`), `bubbles` (layout found and given),
/// `metrics`, `critical-path`, `what-if` (a family faster; no straggler and faster launches)
/// and `mfu` of `reports` over each of `windows` (some made from the whole-capture `overlap`
/// JSON), as JSON; the report's page (HTML) and `compare`'s metrics: from the whole timeline,
/// and from captures whose events are sorted under a tiny budget (spilled) and read in passes.
fn stream_level_outputs(
    reports: &[PathBuf],
    windows: &[&dyn Fn(&serde_json::Value) -> nsys_lens::query::WindowOptions],
) -> Vec<[Vec<String>; 2]> {
    use nsys_lens::query::{self, CollectiveOptions, Loaded, Selection, WindowOptions};
    let inputs = nsys_lens::load::Inputs::new(reports.to_vec());
    let (timeline, _) = inputs.load().unwrap();
    let (captures, _) = inputs.captures(Budget::new(2048)).unwrap();
    let families = nsys_lens::classify::families::Families::default();
    let change = |spec| nsys_lens::analysis::what_if::Change::parse(spec).unwrap();
    let faster = [change("family=gemm*0.5")];
    let balanced = [change("straggler=median"), change("launch=0.5")];
    let outputs = |loaded: Loaded, window: &WindowOptions| {
        let selection = Selection {
            window: window.clone(),
            ..Selection::default()
        };
        let json = |output: anyhow::Result<nsys_lens::report::Output>| match output {
            Ok(o) => {
                let mut bytes = Vec::new();
                let (format, unit) = (nsys_lens::report::Format::Json, Default::default());
                o.write_in(format, unit, &mut bytes).unwrap();
                String::from_utf8(bytes).unwrap()
            }
            Err(e) => format!("error: {e:#}"),
        };
        let page = |view: anyhow::Result<_>| match view {
            Ok(view) => nsys_lens::report::html::page(&[view]),
            Err(e) => format!("error: {e:#}"),
        };
        let collectives = |by_rank, p2p| CollectiveOptions {
            p2p,
            by_rank,
            top: None,
        };
        vec![
            json(query::overlap(loaded, &selection)),
            json(query::idle(loaded, &selection, 10_000)),
            json(query::idle(loaded, &selection, 1_000_000)),
            json(query::streams(loaded, &selection)),
            json(query::collectives(
                loaded,
                &selection,
                collectives(false, false),
            )),
            json(query::collectives(
                loaded,
                &selection,
                collectives(true, true),
            )),
            json(query::kernels(loaded, &selection, &families, None)),
            json(query::kernels(loaded, &selection, &families, Some(3))),
            json(query::unclassified(loaded, &selection, &families)),
            json(query::bubbles(loaded, &selection, None, None)),
            json(query::bubbles(loaded, &selection, Some(2), Some(4))),
            json(query::metrics(loaded, &selection)),
            json(query::critical::critical_path(loaded, &selection)),
            json(query::critical::what_if(loaded, &selection, &faster)),
            json(query::critical::what_if(loaded, &selection, &balanced)),
            json(query::mfu::mfu(loaded, &selection, Default::default())),
            page(query::page::run_view(
                loaded,
                None,
                &selection,
                "run".into(),
            )),
            format!(
                "{:?}",
                query::run_metrics(loaded, window).map_err(|e| e.to_string())
            ),
        ]
    };
    let whole = WindowOptions {
        whole: true,
        ..WindowOptions::default()
    };
    let first = outputs(Loaded::Whole(&timeline), &whole);
    let first = serde_json::from_str(&first[0]).unwrap_or_default();
    windows
        .iter()
        .map(|window| {
            let window = window(&first);
            let both = [Loaded::Whole(&timeline), Loaded::Captures(&captures)];
            both.map(|loaded| outputs(loaded, &window))
        })
        .collect()
}

#[test]
fn stream_level_analyses_read_in_passes_equal_those_of_the_whole_timeline() {
    // Issue 34: the same tables in bounded memory. Multi-rank synthetic runs (pipeline
    // transfers, expert all-to-all, a straggler, graphs, GPU metrics), and real captures:
    // nccl-tests on 9 GPUs of 3 nodes, 2 x H100 all-to-all, 2 x H100 whose stream waits
    // have synchronization records (the critical path reads them), a CUDA sample, two HTA
    // torch.profiler ranks, a JAX run whose steps only dispatch their work (its windows are GPU
    // projections), and torch 2.11 on an H200 (eager with shapes: GEMM precisions from
    // operators; compiled).
    use nsys_lens::query::WindowOptions;
    let rich = synth(
        "--preset ddp --nodes 2 --gpus-per-node 2 --steps 3 --slow-dataloader --cuda-graphs \
         --gpu-metrics",
    );
    let mut runs: Vec<Vec<PathBuf>> = ["pithtrain_pp2_ep2", "megatron_pp2"]
        .iter()
        .map(|f| reports(&root().join("fixtures").join(f)))
        .collect();
    runs.push(reports(rich.path()));
    let real = [
        crate::util::real("fs24_nccl_allreduce_tree_3nodes_9gpus"),
        crate::util::real("nsysai_mfu_2gpu_before_2026.2.1.sqlite"),
        crate::util::real("nsysai_h100_2gpu_1s_2026.2.1.sqlite"),
        crate::util::real("testcuda_report1_2026.1.1.sqlite"),
    ];
    runs.extend(real.into_iter().flatten().map(|p| match p.is_dir() {
        true => reports(&p),
        false => vec![p],
    }));
    let hta = [
        "kineto/hta_sampled_rank-0.json.gz",
        "kineto/hta_sampled_rank-1.json.gz",
    ];
    if let [Some(a), Some(b)] = hta.map(crate::util::real_capture) {
        runs.push(vec![a, b]);
    }
    let gpu = [
        "gpu/jax_mlp_3steps_h200.xplane.pb",
        "gpu/torch_mlp_eager_shapes_h200.json.gz",
        "gpu/torch_mlp_compiled_h200.json.gz",
    ];
    runs.extend(
        gpu.into_iter()
            .filter_map(crate::util::real_capture)
            .map(|p| vec![p]),
    );
    // The whole capture; the steady window (an anchor's median, its GPU projection where the
    // range only dispatches); both with --gpu-window; the first rank's middle half, given.
    let given = |gpu_window: bool| {
        move |first: &serde_json::Value| {
            let span = &first["windows"][0];
            let (s, e) = (
                span["start"].as_i64().unwrap(),
                span["end"].as_i64().unwrap(),
            );
            WindowOptions {
                start_end: Some((s + (e - s) / 4, e - (e - s) / 4)),
                gpu_window,
                ..WindowOptions::default()
            }
        }
    };
    let options = |whole: bool, gpu_window: bool| {
        move |_: &serde_json::Value| WindowOptions {
            whole,
            gpu_window,
            ..WindowOptions::default()
        }
    };
    let (whole, steady, steady_gpu) = (
        options(true, false),
        options(false, false),
        options(false, true),
    );
    let (middle, middle_gpu) = (given(false), given(true));
    let windows: [&dyn Fn(&serde_json::Value) -> WindowOptions; 5] =
        [&whole, &steady, &steady_gpu, &middle, &middle_gpu];
    let mut projected = 0;
    for inputs in runs {
        let outputs = stream_level_outputs(&inputs, &windows);
        for (i, [want, got]) in outputs.iter().enumerate() {
            assert_eq!(want, got, "{inputs:?}, window {i}");
            let some = want.iter().any(|o| !o.starts_with("error"));
            assert!(some, "{inputs:?}: {want:?}");
        }
        // The steady window's GPU projection differs from its CPU extent.
        projected += usize::from(outputs[1][0][0] != outputs[2][0][0]);
    }
    assert!(projected > 0, "no window was a GPU projection");
}
