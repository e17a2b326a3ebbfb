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

/// The page's height in CSS pixels as Chromium lays it out 1280 px wide: a copy of the page
/// with a script that writes it into the DOM (the page itself has none); None without chromium.
fn page_height(page: &Path) -> Option<u64> {
    let probe = page.with_extension("height.html");
    let html = std::fs::read_to_string(page).unwrap().replace(
        "</body>",
        "<script>document.body.setAttribute('data-height', \
         document.documentElement.scrollHeight)</script></body>",
    );
    std::fs::write(&probe, html).unwrap();
    let (dom, _) = render(&probe, &page.with_extension("height.png"))?;
    let at = dom.find("data-height=\"").expect("the probe ran") + "data-height=\"".len();
    let digits: String = dom[at..].chars().take_while(char::is_ascii_digit).collect();
    Some(digits.parse().unwrap())
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
    every_section_names_its_command(&html);
    // The wait heatmap's columns: the instances of largest skew, as `collectives` lists them.
    let paths: Vec<&str> = nodes.iter().map(|p| p.to_str().unwrap()).collect();
    let collectives = crate::util::json(&[&["collectives"], &paths[..]].concat());
    let mut instances: Vec<(i64, String)> = (crate::util::rows(&collectives).iter())
        .map(|r| {
            let name = format!("{} #{}", r["communicator"].as_str().unwrap(), r["sequence"]);
            (-r["skew_ns"].as_i64().unwrap(), name)
        })
        .collect();
    instances.sort();
    // Each communicator's row: its collective, members, instances and median skew, as the
    // instances `collectives` lists.
    let mut per_communicator: std::collections::BTreeMap<String, Vec<&Value>> = Default::default();
    for row in crate::util::rows(&collectives) {
        let name = row["communicator"].as_str().unwrap().to_string();
        per_communicator.entry(name).or_default().push(row);
    }
    assert!(per_communicator.len() > 1);
    for (name, rows) in &per_communicator {
        let members: Vec<String> = (rows[0]["members"].as_array().unwrap().iter())
            .map(|m| m.to_string())
            .collect();
        let head = format!(
            "<td class=\"l\">{name}</td><td class=\"l\">{}</td><td class=\"l\">{}</td>\
             <td>{}</td><td>",
            rows[0]["op"].as_str().unwrap(),
            members.join(" "),
            rows.len()
        );
        let cell = html.split(&head).nth(1).unwrap_or_else(|| panic!("{head}"));
        let mut skews: Vec<i64> = rows
            .iter()
            .map(|r| r["skew_ns"].as_i64().unwrap())
            .collect();
        skews.sort_unstable();
        let median = skews[skews.len() / 2] as f64;
        let shown = duration_ns(&cell[..cell.find("</td>").unwrap()]);
        assert!(
            (shown - median).abs() <= median * 1e-3 + 1.0,
            "{name}: {shown} vs {median}"
        );
    }
    let section = text_after(&html, "Who waited in the collectives of largest skew");
    for (_, name) in instances.iter().take(24) {
        assert!(section.contains(name.as_str()), "{name} not in {section}");
    }
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
    let page = report(out.path(), std::slice::from_ref(&dir));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("3 host(s)") && html.contains("9 rank(s)"));
    // No pipeline: its bubble is GPU idle, and said so; no internal words.
    assert!(!html.contains("Pipeline bubble") && html.contains("<h3>GPU idle</h3>"));
    assert!(!html.contains("noanchor"));
    // Every rank on the timeline.
    for rank in 0..9 {
        assert!(html.contains(&format!("rank {rank} · GPU")), "rank {rank}");
    }
    // Who arrived last and the skew, as `collectives` says.
    let json = crate::util::json(&["collectives", dir.to_str().unwrap()]);
    let row = &crate::util::rows(&json)[0];
    let section = text_after(&html, "Collectives and stragglers");
    let host = row["last_host"].as_str().unwrap();
    assert!(
        section.contains(&format!("arrived last most often: rank 3 · node {host}")),
        "{section}"
    );
    let median = duration_ns(section.split("median ").nth(1).unwrap());
    let skew = row["skew_ns"].as_f64().unwrap();
    assert!((median - skew).abs() <= skew * 1e-3, "{median} vs {skew}");
    if let Some((dom, log)) = render(&page, &out.path().join("shot.png")) {
        assert!(dom.contains("rank 8"));
        no_console_errors(&log);
    }
}

/// The page's text (tags left out) after `heading`, up to the next heading.
fn text_after(html: &str, heading: &str) -> String {
    let from = html.find(heading).expect(heading) + heading.len();
    let rest = &html[from..];
    let body = &rest[..rest.find("<h3>").unwrap_or(rest.len())];
    let mut text = String::new();
    let mut in_tag = false;
    for c in body.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text
}

/// `23.85 ms` (at the start of `text`) in ns.
fn duration_ns(text: &str) -> f64 {
    let mut words = text.split_whitespace();
    let number: f64 = words.next().unwrap().parse().unwrap();
    let unit = words.next().unwrap().trim_end_matches([',', ';', '.']);
    number
        * match unit {
            "ns" => 1.0,
            "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            other => panic!("unit {other}"),
        }
}

/// Every section of `html` names the command that prints it in full.
fn every_section_names_its_command(html: &str) {
    let headings: Vec<&str> = html
        .split("<h3>")
        .skip(1)
        .map(|rest| &rest[..rest.find("</h3>").unwrap()])
        .collect();
    assert!(!headings.is_empty());
    for heading in headings {
        let section = text_after(html, &format!("<h3>{heading}</h3>"));
        assert!(section.contains("nsys-lens "), "{heading}: {section}");
    }
}

/// The line at the top: the median step and the median rank's bubble, as `bubbles` gives
/// them (the upper median over every rank's steps, and over the ranks' mean bubbles).
#[test]
fn the_verdict_line_takes_its_numbers_from_the_tables() {
    let dir = tempfile::tempdir().unwrap();
    let run = crate::util::synth("--preset megatron --pp 2 --steps 3");
    let page = report(dir.path(), &[run.path().to_path_buf()]);
    let html = std::fs::read_to_string(&page).unwrap();
    let verdict = text_after(&html, "In short:");
    let bubbles = crate::util::json(&["bubbles", run.path().to_str().unwrap()]);
    let rows: Vec<&Value> = (crate::util::rows(&bubbles).iter())
        .filter(|r| r["rank"].is_u64())
        .collect();
    let mut steps: Vec<i64> = rows
        .iter()
        .map(|r| r["step_ns"].as_i64().unwrap())
        .collect();
    steps.sort_unstable();
    let step = duration_ns(verdict.split("median step ").nth(1).unwrap());
    let median = steps[steps.len() / 2] as f64;
    assert!((step - median).abs() <= median * 1e-3, "{step} vs {median}");
    let mut per_rank: std::collections::BTreeMap<u64, Vec<f64>> = Default::default();
    for r in &rows {
        let rank = r["rank"].as_u64().unwrap();
        per_rank
            .entry(rank)
            .or_default()
            .push(r["bubble_pct"].as_f64().unwrap());
    }
    let mut means: Vec<f64> = (per_rank.values())
        .map(|v| v.iter().sum::<f64>() / v.len() as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let bubble = format!("pipeline bubble {:.1}%", means[means.len() / 2]);
    assert!(verdict.contains(&bubble), "{bubble} not in {verdict}");
}

/// The page's FLOPs per family are `mfu`'s: per step, and TFLOP/s while the kernels ran.
#[test]
fn flops_per_family_are_the_mfu_tables() {
    let dir = tempfile::tempdir().unwrap();
    let run = crate::util::synth("--preset ddp --nodes 1 --steps 3 --format kineto");
    let page = report(dir.path(), &[run.path().to_path_buf()]);
    let section = text_after(&std::fs::read_to_string(&page).unwrap(), "<h3>MFU</h3>");
    let mfu = crate::util::json(&["mfu", run.path().to_str().unwrap()]);
    let mut totals: std::collections::BTreeMap<(u64, String), (f64, f64, u64)> = Default::default();
    for row in crate::util::rows(&mfu) {
        let (Some(rank), Some(family)) = (row["rank"].as_u64(), row["family"].as_str()) else {
            continue;
        };
        // Families without counted FLOPs are not listed.
        let Some(flops) = row["flops"].as_f64().filter(|_| family != "all") else {
            continue;
        };
        let total = totals.entry((rank, family.to_string())).or_default();
        total.0 += flops;
        total.1 += row["time_ns"].as_f64().unwrap();
        total.2 += 1;
    }
    assert!(!totals.is_empty());
    for ((rank, family), (flops, time, steps)) in totals {
        let line = format!(
            "rank {rank}{family}{:.3e}{:.1}",
            flops / steps as f64,
            flops / time / 1e3
        );
        assert!(section.contains(&line), "{line} not in {section}");
    }
}

/// A pipeline's page says "pipeline bubble"; a run without one says "GPU idle" for the same
/// measure, and the bubble's numbers are the `bubbles` table's.
#[test]
fn the_bubble_is_called_so_only_where_there_is_a_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = crate::util::synth("--preset megatron --pp 2");
    let page = report(dir.path(), &[pipeline.path().to_path_buf()]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<h3>Pipeline bubble</h3>") && !html.contains("GPU idle"));
    let bubbles = crate::util::json(&["bubbles", pipeline.path().to_str().unwrap()]);
    let section = text_after(&html, "<h3>Pipeline bubble</h3>");
    for row in crate::util::rows(&bubbles)
        .iter()
        .filter(|r| r["rank"].is_u64())
    {
        let pct = format!("{:.1}%", row["bubble_pct"].as_f64().unwrap());
        assert!(section.contains(&pct), "{pct} not in {section}");
    }
    let flat = crate::util::synth("--preset ddp --nodes 1");
    let page = report(dir.path(), &[flat.path().to_path_buf()]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<h3>GPU idle</h3>") && !html.contains("Pipeline bubble"));
}

#[test]
fn two_runs_side_by_side_share_one_scale_and_a_difference_table() {
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
    assert!(html.contains("Differences (median over ranks)"));
    // Every drawing scales into its column.
    assert_eq!(
        html.matches("<svg").count(),
        html.matches("<svg viewBox=").count()
    );
    // One time axis for both strips: the same last tick on each side.
    let last_tick = |run: &str| {
        let strip = run.split("aria-label=\"timeline\"").nth(1).unwrap();
        let strip = strip.split("</svg>").next().unwrap();
        strip
            .rsplit("text-anchor=\"middle\">")
            .next()
            .unwrap()
            .split('<')
            .next()
            .unwrap()
            .to_string()
    };
    let runs: Vec<&str> = html.split("class=\"run\"").skip(1).collect();
    assert_eq!(last_tick(runs[0]), last_tick(runs[1]));
    if let Some((_, log)) = render(&page, &dir.path().join("both.png")) {
        no_console_errors(&log);
    }
}

#[test]
fn a_report_of_512_ranks_shows_distributions_and_heatmaps_and_stays_small() {
    let run = crate::util::synth("--preset megatron --tp 8 --pp 4 --dp 16 --gpus-per-node 8");
    let out = tempfile::tempdir().unwrap();
    let page = report(out.path(), &[run.path().to_path_buf()]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.len() <= 1 << 20, "{} bytes", html.len());
    every_section_names_its_command(&html);
    for part in [
        "512 rank(s)",
        "Where the ranks' windows go",
        "Exposed communication % per rank and stage",
        // `ranks` finds no pipeline coordinates in this mesh: its bubble is called GPU idle.
        "GPU idle % per rank and step",
        "Who waited in the collectives of largest skew",
        "<details><summary>Per-rank overlap per stage</summary>",
        "and 56 more",
    ] {
        assert!(html.contains(part), "{part} missing");
    }
    // The per-rank rows are there, folded: one row per rank in the overlap grid.
    let grid = html.split("Per-rank overlap per stage").nth(1).unwrap();
    let grid = grid.split("</table>").next().unwrap();
    assert_eq!(grid.matches("<tr>").count(), 513);
    let screenshot = out.path().join("512.png");
    if let Some((dom, log)) = render(&page, &screenshot) {
        assert!(dom.contains("Where the ranks"));
        no_console_errors(&log);
    }
    if let Some(height) = page_height(&page) {
        assert!((2_000..20_000).contains(&height), "{height} px");
    }
}

/// The fixes the page weighs are `what-if`'s: on a run with a rank 1.5 times slower, removing
/// the straggler is among the three, with the gain `what-if --change straggler=median` prints.
#[test]
fn the_page_weighs_the_top_fixes_as_what_if_predicts_them() {
    let dir = tempfile::tempdir().unwrap();
    let run = crate::util::synth("--preset ddp --nodes 2 --gpus-per-node 2 --slow-rank 1:1.5");
    let page = report(dir.path(), &[run.path().to_path_buf()]);
    let html = std::fs::read_to_string(&page).unwrap();
    let fixes = text_after(&html, "What a fix would buy");
    let rows: Vec<&str> = html
        .split("What a fix would buy")
        .nth(1)
        .unwrap()
        .split("</table>")
        .next()
        .unwrap()
        .split("<tr>")
        .skip(2)
        .collect();
    assert!((1..=3).contains(&rows.len()), "{fixes}");
    let gains: Vec<f64> = rows
        .iter()
        .map(|r| {
            let cell = r.rsplit("<td>").next().unwrap();
            cell.split('%').next().unwrap().parse().unwrap()
        })
        .collect();
    assert!(
        gains.windows(2).all(|w| w[0] >= w[1]),
        "best first: {gains:?}"
    );
    let straggler = rows
        .iter()
        .find(|r| r.contains("<code>straggler=median</code>"))
        .expect("the straggler fix is among the top three");
    let cells: Vec<&str> = (straggler.split("<td>").skip(1))
        .map(|c| c.split('<').next().unwrap())
        .collect();
    let (now, predicted) = (duration_ns(cells[0]), duration_ns(cells[1]));
    let what_if = crate::util::json(&[
        "what-if",
        "--change",
        "straggler=median",
        run.path().to_str().unwrap(),
    ]);
    let sum = |column: &str| -> f64 {
        (crate::util::rows(&what_if).iter())
            .map(|r| r[column].as_i64().unwrap() as f64)
            .sum()
    };
    for (page, cli) in [(now, sum("measured_ns")), (predicted, sum("predicted_ns"))] {
        assert!((page - cli).abs() <= cli * 1e-3, "{page} vs {cli}");
    }
    assert!(
        predicted < now * 0.9,
        "a 1.5x slower rank costs more than 10 %"
    );
    // The verdict names the best of them, with its gain.
    let cell = |row: &str, at: usize| -> String {
        let cells: Vec<&str> = row.split("<td").skip(1).collect();
        let text = cells[at].split_once('>').unwrap().1;
        text.split("</td>").next().unwrap().to_string()
    };
    let best = format!(
        "best fix: {} ({} shorter steps)",
        cell(rows[0], 1),
        cell(rows[0], 4)
    );
    let verdict = text_after(&html, "In short:");
    assert!(verdict.contains(&best), "{best} not in {verdict}");
}

#[test]
fn the_page_title_names_inputs_relative_to_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let page = report(dir.path(), &pithtrain_nodes());
    let html = std::fs::read_to_string(&page).unwrap();
    let title = html
        .split("<h2>")
        .nth(1)
        .unwrap()
        .split("</h2>")
        .next()
        .unwrap();
    assert_eq!(
        title,
        "fixtures/pithtrain_pp2_ep2/node0.sqlite fixtures/pithtrain_pp2_ep2/node1.sqlite"
    );
    // PithTrain's DualPipeV chunk window is no 1F1B step: the ideal is absent, and said why.
    assert!(html.contains("<td>–</td>") && html.contains("1F1B's ideal"));
}

/// Every role had its colour only if it was one of a few; any other (`fsdp_ag`, `fsdp_grad`,
/// `tp_comm`) was one shared green. Now each legend entry has its own colour, and the timeline
/// strip draws a role's stream in the legend's colour of that role.
#[test]
fn every_role_has_its_own_colour_on_the_whole_page() {
    let dir = tempfile::tempdir().unwrap();
    let run = crate::util::synth("--preset fsdp --nodes 1 --gpus-per-node 2");
    let page = report(dir.path(), &[run.path().to_path_buf()]);
    let html = std::fs::read_to_string(&page).unwrap();
    let legend: std::collections::BTreeMap<String, String> = html
        .split("<i class=\"sw\" style=\"background:")
        .skip(1)
        .map(|rest| {
            let (colour, rest) = rest.split_once('"').unwrap();
            let label = rest
                .split_once("</i>")
                .unwrap()
                .1
                .split('<')
                .next()
                .unwrap();
            (label.to_string(), colour.to_string())
        })
        .collect();
    for role in ["exposed fsdp_ag", "exposed fsdp_grad", "compute"] {
        assert!(legend.contains_key(role), "{role}: {legend:?}");
    }
    let colours: std::collections::BTreeSet<&String> = legend.values().collect();
    assert_eq!(colours.len(), legend.len(), "{legend:?}");
    // The strip: a row's label, then its rectangles in its role's colour.
    let strip = html.split("Timeline of the window").nth(1).unwrap();
    let mut checked = 0;
    for row in strip.split("<text").skip(1) {
        let name = row.split_once('>').unwrap().1.split('<').next().unwrap();
        let role = name.rsplit(" · ").next().unwrap();
        let Some(colour) = legend.get(&format!("exposed {role}")).or(legend.get(role)) else {
            continue;
        };
        if let Some(fill) = row.split("fill=\"").nth(1) {
            assert!(
                fill.starts_with(colour.as_str()),
                "{name}: {fill:.10} vs {colour}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 3, "{checked} strip rows checked");
}

/// A real single-GPU torch.profiler trace (torch 2.11 on an H200): one rank, no pipeline
/// section (its idle is "GPU idle"), and Chromium renders it without a console message.
#[test]
fn a_single_gpu_torch_trace_has_no_pipeline_section() {
    let Some(trace) = crate::util::real_capture("gpu/torch_mlp_eager_shapes_h200.json.gz") else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let mut args = vec!["report", "-q", "--export-dir"];
    let cache = out.path().join("cache");
    args.push(cache.to_str().unwrap());
    let page = out.path().join("report.html");
    args.extend(["-o", page.to_str().unwrap(), trace.to_str().unwrap()]);
    let run = nsys_lens(&args);
    assert!(run.status.success(), "{}", texts(&run).1);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("1 rank(s)"));
    assert!(!html.contains("Pipeline bubble") && !html.contains("pipeline bubble"));
    assert!(html.contains("<h3>GPU idle</h3>"));
    if let Some((dom, log)) = render(&page, &out.path().join("shot.png")) {
        assert!(dom.contains("GPU idle"));
        no_console_errors(&log);
    }
}

/// `report` says what the readers warn of, as every command does (it printed nothing): a
/// pre-2021.3 export has no session start and no host name.
#[test]
fn the_report_prints_the_readers_warnings() {
    let Some(export) = real("mordred_report1_pre2022.sqlite") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let out = nsys_lens(&[
        "report",
        "-o",
        page.to_str().unwrap(),
        export.to_str().unwrap(),
    ]);
    let (_, err) = texts(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning:") && err.contains("no session start time"),
        "{err}"
    );
    let quiet = nsys_lens(&[
        "report",
        "-q",
        "-o",
        page.to_str().unwrap(),
        export.to_str().unwrap(),
    ]);
    assert_eq!(texts(&quiet).1, "");
}
