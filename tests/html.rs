//! `report`: the page is rendered by headless Chromium (Debian's `chromium`, installed by
//! `.ci/run`) without console errors, on the 2-node fixture and the real 3-node set; its numbers
//! are the analysis tables'. `NSYS_LENS_UPDATE_SCREENSHOT=1` refreshes `docs/img/report.png`,
//! the README's screenshot, from this test's rendering of the fixture.

use crate::util::{nsys_lens, pithtrain_nodes, real, root, texts};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes the report of `inputs`; returns its path (inside `dir`).
fn report(dir: &Path, inputs: &[PathBuf]) -> PathBuf {
    let page = dir.join("report.html");
    let mut args = vec!["report", "-q", "-o", page.to_str().unwrap()];
    args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    let out = nsys_lens(&args);
    assert!(out.status.success(), "{}", texts(&out).1);
    page
}

/// Headless Chromium: the DOM it built, its log, and a screenshot; None when it is absent.
fn render(page: &Path, screenshot: &Path) -> Option<(String, String)> {
    let profile = tempfile::tempdir().unwrap();
    let base = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1280,1400",
    ];
    let url = format!("file://{}", page.display());
    let run = |extra: &str| {
        Command::new("chromium")
            .args(base)
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(extra)
            .arg(&url)
            .output()
    };
    let dom = match run("--dump-dom") {
        Ok(out) => out,
        Err(_) => {
            assert!(
                std::env::var_os("NSYS_LENS_CI").is_none(),
                "CI must install chromium (see .ci/run)"
            );
            crate::util::skipped("the rendering check: chromium is not installed");
            return None;
        }
    };
    let shot = run(&format!("--screenshot={}", screenshot.display())).unwrap();
    let log =
        String::from_utf8_lossy(&dom.stderr).into_owned() + &String::from_utf8_lossy(&shot.stderr);
    Some((String::from_utf8_lossy(&dom.stdout).into_owned(), log))
}

/// Chromium's log must hold no console message from the page.
fn no_console_errors(log: &str) {
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
}

#[test]
fn the_fixture_report_renders_and_shows_the_analysis_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = pithtrain_nodes();
    let page = report(dir.path(), &nodes);
    let html = std::fs::read_to_string(&page).unwrap();
    // The stage2_f overlap of rank 0, as the overlap table computes it.
    let paths: Vec<&str> = nodes.iter().map(|p| p.to_str().unwrap()).collect();
    let out = nsys_lens(&[&["overlap", "-q", "--format", "json"], &paths[..]].concat());
    let overlap: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = overlap["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rank"] == 0 && r["stage"] == "stage2_f")
        .unwrap();
    let pct = format!("{:.1}%", row["overlap_pct"].as_f64().unwrap());
    assert!(html.contains(&pct), "{pct} missing");
    assert!(!html.contains("<script"), "no script");
    let screenshot = dir.path().join("report.png");
    let Some((dom, log)) = render(&page, &screenshot) else {
        return;
    };
    assert!(
        dom.contains("Where each rank") && dom.contains("Pipeline bubble"),
        "{dom}"
    );
    no_console_errors(&log);
    let png = std::fs::read(&screenshot).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    if std::env::var_os("NSYS_LENS_UPDATE_SCREENSHOT").is_some() {
        std::fs::write(root().join("docs/img/report.png"), &png).unwrap();
    }
}

#[test]
fn the_real_three_node_report_renders() {
    let Some(dir) = real("fs24_nccl_allreduce_tree_3nodes_9gpus") else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let page = report(out.path(), &[dir]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("3 host(s)") && html.contains("9 rank(s)"));
    if let Some((dom, log)) = render(&page, &out.path().join("shot.png")) {
        assert!(dom.contains("rank 8"));
        no_console_errors(&log);
    }
}

#[test]
fn two_runs_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("both.html");
    let nodes = pithtrain_nodes();
    let out = nsys_lens(&[
        "report",
        "-q",
        "-o",
        page.to_str().unwrap(),
        nodes[0].to_str().unwrap(),
        "--",
        nodes[1].to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", texts(&out).1);
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("class=\"run\"").count(), 2);
}
