//! Issue 15: the role of every communication kernel against the generator's truth, for every
//! preset with and without framework NVTX and with communication on its own streams or on the
//! compute stream; and the pipeline wait and exposed communication those roles give.

use crate::util::{int, json, rows, synth};
use nsys_lens::classify::{self, Activity, RoleRules, WindowSpec};
use nsys_lens::model::Timeline;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One run of every preset (small, several ranks, every kind of communication it has).
const PRESETS: &[&str] = &[
    "--preset pithtrain --pp 2 --ep 2 --cp 2 --gpus-per-node 4",
    "--preset megatron --tp 2 --pp 2 --dp 2 --gpus-per-node 4 --chunks 4",
    "--preset ddp --nodes 2 --gpus-per-node 2 --layers 4 --steps 2",
    "--preset fsdp --nodes 1 --gpus-per-node 2 --steps 2",
];

/// How the capture looks: 2022's names with every placement of the communication, and today's
/// (DeepEP's all-to-alls, userbuffers' tensor-parallel all-reduces and NCCL's symmetric
/// kernels, which bypass NCCL's calls or replace its kernels) and ROCm's.
const VARIANTS: &[&str] = &[
    "",
    "--nccl-on-compute",
    "--no-framework-nvtx",
    "--nccl-on-compute --no-framework-nvtx",
    "--names 2026",
    "--names 2026 --nccl-on-compute --no-framework-nvtx",
    "--names rocm --no-framework-nvtx",
    "--renumber-streams --no-framework-nvtx",
];

fn exports(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sqlite"))
        .collect();
    files.sort();
    files
}

/// (rank, stream, start) -> role of every NCCL kernel, as nsys-lens classifies it over the
/// whole capture.
fn our_roles(files: &[PathBuf]) -> BTreeMap<(u64, u64, i64), String> {
    let timeline = Timeline::load(files).expect("loads");
    let activity = Activity::new(&timeline);
    let rules = RoleRules::default();
    let mut roles = BTreeMap::new();
    for rank in classify::ranks::discover(&activity).unwrap() {
        let window = classify::window::find(&activity, rank.process, &WindowSpec::Whole);
        let streams =
            classify::streams::classify(&activity, rank.process, window.bounds(false), &rules);
        for k in &streams.comm {
            let stream = u64::from(timeline.stream(k.stream).stream);
            let key = (u64::from(rank.rank), stream, k.start);
            roles.insert(key, k.role_name(&rules).to_string());
        }
    }
    roles
}

/// The row of `rank` with these (field, value) pairs.
fn row<'a>(v: &'a Value, rank: i64, fields: &[(&str, &str)]) -> &'a Value {
    let found: Vec<&Value> = rows(v)
        .iter()
        .filter(|r| r["rank"] == rank && fields.iter().all(|(k, x)| r[*k] == *x))
        .collect();
    assert_eq!(found.len(), 1, "rank {rank} {fields:?}");
    found[0]
}

#[test]
fn every_communication_kernel_gets_the_role_its_evidence_supports() {
    for preset in PRESETS {
        for variant in VARIANTS {
            let args = format!("{preset} {variant}");
            let dir = synth(&args);
            let truth: Value = crate::util::truth(dir.path());
            let files = exports(dir.path());
            let ours = our_roles(&files);
            // The confusion matrix: (truth, ours) -> kernels; only the diagonal may be filled.
            let mut confusion: BTreeMap<(String, String), usize> = BTreeMap::new();
            let kernels = truth["kernels"].as_array().unwrap();
            for k in kernels {
                let key = (
                    k["rank"].as_u64().unwrap(),
                    k["stream"].as_u64().unwrap(),
                    int(&k["start"]),
                );
                let got = ours
                    .get(&key)
                    .cloned()
                    .unwrap_or_else(|| "(missing)".into());
                let want = k["role"].as_str().unwrap().to_string();
                *confusion.entry((want, got)).or_default() += 1;
            }
            let off: Vec<_> = confusion.iter().filter(|((a, b), _)| a != b).collect();
            assert!(
                off.is_empty(),
                "{args}: off the diagonal {off:?} of {confusion:?}"
            );
            assert_eq!(ours.len(), kernels.len(), "{args}: kernels we saw");
            if variant.contains("2026") {
                assert!(
                    todays_comm_kernels(&files) > 0,
                    "{args}: no DeepEP, userbuffers or symmetric kernel"
                );
            }
            assert!(!confusion.is_empty(), "{args}: no communication kernel");
            check_wait_and_exposure(&files, &truth, &args);
        }
    }
}

/// How many kernels of the exports are DeepEP's, userbuffers' or NCCL's symmetric ones (SQL).
fn todays_comm_kernels(files: &[PathBuf]) -> i64 {
    let sql = "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k \
               JOIN StringIds s ON s.id = k.shortName JOIN StringIds d ON d.id = k.demangledName \
               WHERE s.value LIKE 'ncclSymk%' OR s.value LIKE 'userbuffers%' \
               OR d.value LIKE '%deep_ep::%'";
    files
        .iter()
        .map(|f| {
            let db = rusqlite::Connection::open(f).unwrap();
            db.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap()
        })
        .sum()
}

/// Per rank over the whole capture: pipeline wait and exposed communication equal the truth;
/// per step, the bubble within 0.5 percentage points.
fn check_wait_and_exposure(files: &[PathBuf], truth: &Value, args: &str) {
    let paths: Vec<&str> = files.iter().map(|p| p.to_str().unwrap()).collect();
    let bubbles = json(&[&["bubbles", "--whole"], paths.as_slice()].concat());
    let overlap = json(&[&["overlap", "--whole"], paths.as_slice()].concat());
    for t in truth["ranks"].as_array().unwrap() {
        let rank = int(&t["rank"]);
        let steps: Vec<&Value> = rows(&bubbles)
            .iter()
            .filter(|r| r["rank"] == rank)
            .collect();
        let pp_wait: i64 = steps.iter().map(|s| int(&s["pp_wait_ns"])).sum();
        let total = row(&overlap, rank, &[("stage", "all"), ("role", "all")]);
        let exposed = int(&total["exposed_wall_ns"]);
        let span: i64 = steps.iter().map(|s| int(&s["step_ns"])).sum();
        let close = |ours: i64, want: i64| (ours - want).abs() as f64 <= 0.005 * span as f64;
        let want_wait = int(&t["pp_wait_ns"]);
        let want_exposed = int(&t["exposed_comm_ns"]);
        if steps.len() == 1 {
            assert_eq!(pp_wait, want_wait, "{args}: rank {rank} pipeline wait");
        } else {
            assert!(
                close(pp_wait, want_wait),
                "{args}: rank {rank} {pp_wait} vs {want_wait}"
            );
        }
        assert_eq!(
            exposed, want_exposed,
            "{args}: rank {rank} exposed communication"
        );
    }
    if args.contains("--no-framework-nvtx") {
        return;
    }
    for t in truth["steps"].as_array().unwrap() {
        let (rank, step) = (int(&t["rank"]), int(&t["step"]));
        let ours = rows(&bubbles)
            .iter()
            .find(|r| r["rank"] == rank && r["step"] == step)
            .unwrap_or_else(|| panic!("{args}: rank {rank} step {step}"));
        let pct = |bubble: i64, span: i64| 100.0 * bubble as f64 / span as f64;
        let want = pct(int(&t["bubble_ns"]), int(&t["step_ns"]));
        let got = ours["bubble_pct"].as_f64().unwrap();
        assert!(
            (got - want).abs() <= 0.5,
            "{args}: rank {rank} step {step}: {got} vs {want}"
        );
        let wait = pct(int(&t["pp_wait_ns"]), int(&t["step_ns"]));
        let got = pct(int(&ours["pp_wait_ns"]), int(&ours["step_ns"]));
        assert!(
            (got - wait).abs() <= 0.5,
            "{args}: rank {rank} step {step} wait"
        );
    }
}

/// Issue 15: the pipeline layout from the transfers. Megatron's 1F1B (no rank label) gives each
/// rank's stage and the size, exactly as the mesh placed them (rank = stage x dp x tp + ...),
/// whatever the NVTX and streams; `bubbles` then shows the ideal without `--pp`.
#[test]
fn the_pipeline_layout_is_read_from_the_transfers() {
    for pp in [2, 4] {
        for variant in ["", "--nccl-on-compute --no-framework-nvtx"] {
            let args = format!(
                "--preset megatron --tp 2 --pp {pp} --dp 2 --gpus-per-node 4 --chunks 6 {variant}"
            );
            let dir = synth(&args);
            let ranks = json(&["ranks", dir.path().to_str().unwrap()]);
            for r in rows(&ranks) {
                let rank = int(&r["rank"]);
                assert_eq!(r["pp"], rank / 4, "{args}: rank {rank}");
                assert_eq!(r["pp_size"], pp, "{args}");
                assert_eq!(r["pp_source"], "p2p", "{args}");
            }
        }
    }
    let b = json(&["bubbles", "--whole", "fixtures/megatron_pp2"]);
    for r in rows(&b) {
        // 1F1B at pp 2 with 4 micro-batches: (2 - 1) / (4 + 2 - 1).
        assert_eq!(
            (r["pp"].clone(), r["ideal_bubble_pct"].clone()),
            (2.into(), 20.0.into())
        );
    }
}

/// DualPipeV sends both ways from both ends: the size is read, the stage order is not; with a
/// CP ring and EP all-to-alls beside it the matches are not consistent and nothing is guessed.
/// With PithTrain's label, the label gives the layout.
#[test]
fn unclear_pipelines_are_not_guessed() {
    let dir = synth("--preset pithtrain --pp 2 --ep 2 --gpus-per-node 2 --no-framework-nvtx");
    for r in rows(&json(&["ranks", dir.path().to_str().unwrap()])) {
        assert_eq!((&r["pp"], &r["pp_size"]), (&Value::Null, &Value::from(2)));
    }
    let dir = synth(
        "--preset pithtrain --pp 4 --ep 2 --cp 2 --gpus-per-node 4 --chunks 8 --no-framework-nvtx",
    );
    let ranks = json(&["ranks", dir.path().to_str().unwrap()]);
    assert!(rows(&ranks).iter().all(|r| r["pp_size"].is_null()));
    let notes = ranks["notes"].to_string();
    assert!(notes.contains("no consistent pipeline"), "{notes}");
    let b = json(&["bubbles", "--whole", dir.path().to_str().unwrap()]);
    assert!(b["notes"].to_string().contains("give --pp N"));
    let labelled = json(&["ranks", "fixtures/pithtrain_pp2_ep2"]);
    for r in rows(&labelled) {
        assert_eq!(r["pp_source"], "label");
    }
}

/// docs/roles.md lists every built-in rule as the code has it, and shows the example rules file
/// as it is.
#[test]
fn the_roles_page_lists_the_built_in_rules_and_the_example_file() {
    let root = crate::util::root();
    let page = std::fs::read_to_string(root.join("docs/roles.md")).unwrap();
    for rule in nsys_lens::classify::rules::BUILTIN {
        let pattern = rule.pattern.replace('|', "\\|");
        let row = format!("| {} | `{pattern}` | `{}` |", rule.framework, rule.role);
        assert!(page.contains(&row), "docs/roles.md lacks {row}");
    }
    let example = std::fs::read_to_string(root.join("docs/examples/megatron_roles.toml")).unwrap();
    assert!(
        page.contains(&format!("```toml\n{example}```")),
        "the example file differs"
    );
}

/// Issue 15: `ranks` lists the collective groups each rank belongs to, as the generator's mesh
/// made them: Megatron TP 2 x PP 2 x DP 2 (rank = stage x 4 + dp x 2 + tp) without any label.
#[test]
fn ranks_list_the_tensor_and_data_parallel_groups() {
    let dir =
        synth("--preset megatron --tp 2 --pp 2 --dp 2 --gpus-per-node 4 --chunks 4 --steps 3");
    let ranks = json(&["ranks", dir.path().to_str().unwrap()]);
    for r in rows(&ranks) {
        let rank = int(&r["rank"]);
        let mut groups: Vec<Vec<i64>> = r["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["members"].as_array().unwrap().iter().map(int).collect())
            .collect();
        groups.sort();
        let tp = vec![rank & !1, rank | 1];
        let dp = vec![rank & !2, rank | 2];
        let mut want = vec![tp, dp];
        want.sort();
        assert_eq!(groups, want, "rank {rank}");
    }
}
