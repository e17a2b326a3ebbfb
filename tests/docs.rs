//! The documentation cannot rot: every command in a ```sh block of `docs/*.md` runs (in the
//! repository root, `nsys-lens` being the built binary), every line of the ```text block
//! after it appears in what the commands printed, and a table row shown comes with its table's
//! header. A block whose commands read a real capture from `../shared/real-data` is skipped,
//! with a note, where that directory is absent.

use crate::util::root;
use std::process::Command;

/// (commands, expected lines) of each ```sh block, in page order.
fn blocks(page: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let mut out: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        let kind = match line.trim_end() {
            "```sh" => "sh",
            "```text" => "text",
            _ => continue,
        };
        let body: Vec<String> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .map(str::to_string)
            .collect();
        match kind {
            "sh" => out.push((body, Vec::new())),
            _ => out.last_mut().expect("a text block follows a command").1 = body,
        }
    }
    out
}

/// Each table row of `printed` with its header: a table is a header line, a rule of dashes
/// under it, then rows up to a blank line or a note.
fn row_headers(printed: &str) -> std::collections::HashMap<&str, &str> {
    let lines: Vec<&str> = printed.lines().collect();
    let is_rule = |l: &str| l.contains("--") && l.chars().all(|c| c == '-' || c == ' ');
    let ends = |l: &str| {
        l.trim().is_empty()
            || ["note", "warning", "nsys-lens:", "window ", "steps "]
                .iter()
                .any(|p| l.starts_with(p))
    };
    let mut rows = std::collections::HashMap::new();
    for (i, pair) in lines.windows(2).enumerate() {
        if !is_rule(pair[1]) || pair[0].trim().is_empty() {
            continue;
        }
        for row in lines[i + 2..].iter().take_while(|l| !ends(l)) {
            rows.entry(*row).or_insert(pair[0]);
        }
    }
    rows
}

#[test]
fn every_documented_command_runs_and_prints_what_the_page_says() {
    let docs = root().join("docs");
    let mut paths: Vec<_> = std::fs::read_dir(&docs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    paths.sort();
    let mut pages = 0;
    for path in paths {
        let page = std::fs::read_to_string(&path).unwrap();
        for (commands, expected) in blocks(&page) {
            let shared = root().join("../shared/real-data");
            let reads_shared = commands.iter().any(|c| c.contains("../shared/real-data"));
            if reads_shared && !shared.exists() {
                crate::util::skipped(&format!("{}: a block reads ../shared", path.display()));
                continue;
            }
            let mut printed = String::new();
            for command in &commands {
                let words: Vec<&str> = command.split_whitespace().collect();
                assert_eq!(words[0], "nsys-lens", "{}: `{command}`", path.display());
                let out = Command::new(env!("CARGO_BIN_EXE_nsys-lens"))
                    .args(&words[1..])
                    .current_dir(root())
                    .output()
                    .unwrap();
                printed += &String::from_utf8_lossy(&out.stdout);
                printed += &String::from_utf8_lossy(&out.stderr);
                assert!(
                    out.status.success(),
                    "{}: `{command}` failed:\n{printed}",
                    path.display()
                );
            }
            for line in &expected {
                assert!(
                    printed.contains(line.as_str()),
                    "{}: the page says {line:?}, the commands printed:\n{printed}",
                    path.display()
                );
            }
            let headers = row_headers(&printed);
            for line in &expected {
                if let Some(header) = headers.get(line.as_str()) {
                    assert!(
                        expected.iter().any(|l| l == header),
                        "{}: the page shows the row {line:?} without its header {header:?}",
                        path.display()
                    );
                }
            }
        }
        pages += 1;
    }
    assert!(pages >= 5, "docs pages: {pages}");
}
