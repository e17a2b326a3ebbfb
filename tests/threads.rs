//! Issue 17: reports are read on several threads at once; the outputs are byte for byte the
//! ones of reading them one after another.

use crate::util::{nsys_lens, real, root, texts};
use std::path::Path;

/// Every output of a command set, for one thread count.
fn outputs(input: &Path, threads: &str) -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("run");
    let input = input.to_str().unwrap();
    let mut out = Vec::new();
    for args in [
        vec!["info", "--format", "json"],
        vec!["overlap", "--whole", "--format", "json"],
        vec!["collectives", "--whole", "--format", "json"],
        vec!["convert", "-o", base.to_str().unwrap()],
    ] {
        let mut all = args.clone();
        all.extend([input, "--threads", threads, "-q"]);
        let run = nsys_lens(&all);
        assert!(run.status.success(), "{all:?}: {}", texts(&run).1);
        out.push(run.stdout);
    }
    for ext in ["perfetto-trace", "prv", "pcf", "row"] {
        out.push(std::fs::read(base.with_extension(ext)).unwrap());
    }
    out
}

#[test]
fn reading_reports_on_several_threads_changes_nothing() {
    let mut inputs = vec![root().join("fixtures/pithtrain_pp2_ep2")];
    inputs.extend(real("fs24_nccl_allreduce_tree_3nodes_9gpus"));
    for input in inputs {
        let one = outputs(&input, "1");
        for threads in ["2", "4"] {
            assert!(
                outputs(&input, threads) == one,
                "{}: {threads} threads",
                input.display()
            );
        }
    }
}
