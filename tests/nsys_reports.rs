//! nsys-lens inside nsys: the report scripts `nsys-lens nsys-reports` writes make the real
//! `nsys stats --report-dir` print exactly our CSV, line for line, its cells as the CLI's table
//! shows them (`yes`, `-`); the rules make `nsys analyze` flag exactly the rows their
//! thresholds select from our CSV.

use crate::util::{fixture, nsys_lens, texts};
use std::path::Path;

/// `nsys-lens <args> --format csv -q <report>`.
fn ours(args: &[&str], report: &Path) -> String {
    let mut all = args.to_vec();
    all.extend(["--format", "csv", "-q", report.to_str().unwrap()]);
    let out = nsys_lens(&all);
    assert!(out.status.success(), "{:?}", texts(&out));
    texts(&out).0
}

/// Our CSV with its cells as the table for people shows them: `yes`/`no` for `true`/`false`,
/// `-` for an empty cell.
fn as_the_cli_shows(csv: &str) -> String {
    let mut lines = csv.lines();
    let mut out = format!("{}\n", lines.next().unwrap());
    for line in lines {
        assert!(
            !line.contains('"'),
            "no quoted cell in the fixtures' tables: {line}"
        );
        let cells: Vec<&str> = line
            .split(',')
            .map(|c| match c {
                "true" => "yes",
                "false" => "no",
                "" => "-",
                other => other,
            })
            .collect();
        out += &cells.join(",");
        out.push('\n');
    }
    out
}

/// What nsys wrote for `-r <report>` in `-f csv` (its output file), or its `analyze` output.
fn nsys_csv(dir: &Path, verb: &str, report: &str, sqlite: &Path, extra: &[&str]) -> String {
    let _one_at_a_time = crate::real_nsys::lock();
    let mut args = vec![verb];
    args.extend_from_slice(extra);
    args.extend([
        "-r",
        report,
        "-f",
        "csv",
        "-o",
        "out",
        "--force-overwrite",
        "true",
    ]);
    args.push(sqlite.to_str().unwrap());
    crate::real_nsys::run(dir, "nsys", &args);
    let written = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("out_"))
        .expect("nsys wrote its CSV");
    let text = std::fs::read_to_string(&written).unwrap();
    std::fs::remove_file(written).unwrap();
    text
}

#[test]
fn nsys_stats_prints_our_rows_and_nsys_analyze_flags_our_rows() {
    if crate::real_nsys::available(&[]).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let scripts = dir.path().join("lens");
    let out = nsys_lens(&["nsys-reports", scripts.to_str().unwrap()]);
    assert!(out.status.success(), "{:?}", texts(&out));
    let report_dir = scripts.to_str().unwrap();
    for name in ["megatron_pp2/node0.sqlite", "ddp_2node/node1.sqlite"] {
        // nsys writes a temporary next to its input: work on a copy.
        let sqlite = dir.path().join("run.sqlite");
        std::fs::copy(fixture(name), &sqlite).unwrap();
        for (report, args) in [
            ("lens_overlap", vec!["overlap"]),
            ("lens_streams:ranks=0-1", vec!["streams", "--ranks", "0-1"]),
            (
                "lens_bubbles:whole:pp=2",
                vec!["bubbles", "--whole", "--pp", "2"],
            ),
            (
                "lens_collectives:whole:by=rank",
                vec!["collectives", "--whole", "--by", "rank"],
            ),
            (
                "lens_collectives:whole:top=3",
                vec!["collectives", "--whole", "--top", "3"],
            ),
            (
                "lens_overlap:anchor=ProfilerStep",
                vec!["overlap", "--anchor", "ProfilerStep"],
            ),
        ] {
            let printed = nsys_csv(
                dir.path(),
                "stats",
                report,
                &sqlite,
                &["--report-dir", report_dir],
            );
            assert_eq!(
                printed,
                as_the_cli_shows(&ours(&args, &sqlite)),
                "{name}: {report}"
            );
        }
        // Rules: nsys 2022.4's analyze loads rules from the current directory.
        let flagged = nsys_csv(
            &scripts,
            "analyze",
            "lens_exposed_comm:threshold=30",
            &sqlite,
            &[],
        );
        assert_eq!(
            flagged,
            exposed_rows(&ours(&["overlap", "--whole"], &sqlite), 30.0)
        );
        let flagged = nsys_csv(
            &scripts,
            "analyze",
            "lens_bubble_excess:threshold=1",
            &sqlite,
            &[],
        );
        assert_eq!(
            flagged,
            excess_rows(&ours(&["bubbles", "--whole"], &sqlite), 1.0)
        );
    }
}

/// Our CSV's rows as maps of column to cell.
fn rows(csv: &str) -> Vec<std::collections::HashMap<String, String>> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            header
                .iter()
                .zip(l.split(','))
                .map(|(h, c)| (h.to_string(), c.to_string()))
                .collect()
        })
        .collect()
}

/// The CSV of `columns` of the rows `keep` selects; nothing when it selects none (nsys then
/// prints the rule's no-result message instead of a table).
fn select(
    csv: &str,
    columns: &[&str],
    keep: impl Fn(&std::collections::HashMap<String, String>) -> bool,
) -> String {
    let kept: Vec<_> = rows(csv).into_iter().filter(|r| keep(r)).collect();
    if kept.is_empty() {
        return String::new();
    }
    let mut out = columns.join(",") + "\n";
    for row in kept {
        let cells: Vec<&str> = columns.iter().map(|c| row[*c].as_str()).collect();
        out += &(cells.join(",") + "\n");
    }
    out
}

/// A rank's roles exposing at least `threshold`% of their communication.
fn exposed_rows(csv: &str, threshold: f64) -> String {
    let columns = [
        "rank",
        "host",
        "pid",
        "role",
        "comm_ns",
        "exposed_ns",
        "overlap_pct",
    ];
    select(csv, &columns, |r| {
        let comm: f64 = r["comm_ns"].parse().unwrap_or(0.0);
        r["rank"] != "all"
            && r["stage"] == "all"
            && r["role"] != "all"
            && comm > 0.0
            && 100.0 * r["exposed_ns"].parse::<f64>().unwrap() / comm >= threshold
    })
}

/// Steps whose bubble is `threshold` points or more above 1F1B's.
fn excess_rows(csv: &str, threshold: f64) -> String {
    let columns = [
        "rank",
        "host",
        "pid",
        "pp",
        "step",
        "bubble_pct",
        "ideal_bubble_pct",
    ];
    select(csv, &columns, |r| {
        let ideal: Option<f64> = r["ideal_bubble_pct"].parse().ok();
        r["rank"] != "all"
            && ideal.is_some_and(|i| r["bubble_pct"].parse::<f64>().unwrap() - i >= threshold)
    })
}
