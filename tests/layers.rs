//! Issue 31: the library stands on floors and an import only goes down (`src/lib.rs`). Every
//! `crate::` path of every library source file (test modules and comments aside) names a module
//! of its own floor or a lower one: `model` imports nothing but leaves, and no library module
//! imports `synth`.

use crate::util::root;
use std::collections::BTreeSet;
use std::path::Path;

/// Each top-level module's floor, lowest first (`src/lib.rs`).
const FLOORS: &[(&str, u32)] = &[
    ("hash", 0),
    ("bits", 0),
    ("output", 0),
    ("intervals", 0),
    ("spill", 0),
    ("second_core", 0),
    ("time", 0),
    ("model", 1),
    ("nsys", 2),
    ("input", 2),
    ("classify", 3),
    ("analysis", 4),
    ("report", 5),
    ("export", 5),
    ("query", 6),
    ("load", 6),
    ("synth", 7),
];

fn floor(module: &str) -> Option<u32> {
    FLOORS.iter().find(|(m, _)| *m == module).map(|&(_, f)| f)
}

/// The code of a source file: up to its test module, without comments.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules a piece of code names: `crate::x::...`, and every first segment of a
/// `crate::{x::..., y}` group.
fn named_modules(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item = String::new();
            let mut items = Vec::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 1 => break,
                    '}' => depth -= 1,
                    ',' if depth == 1 => items.push(std::mem::take(&mut item)),
                    _ if depth == 1 => item.push(c),
                    _ => {}
                }
            }
            items.push(item);
            for item in items {
                let first: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !first.is_empty() {
                    found.insert(first);
                }
            }
        } else {
            let first: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.insert(first);
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_import_goes_down_a_floor_or_stays_on_its_own() {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut violations = Vec::new();
    let mut checked = 0;
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let top = relative.components().next().unwrap().as_os_str();
        let top = top.to_string_lossy();
        let top = top.trim_end_matches(".rs");
        // The binary (main.rs, cli/) imports the library as `nsys_lens::`, from above.
        if top == "main" || top == "cli" || top == "lib" {
            continue;
        }
        let own = floor(top).unwrap_or_else(|| panic!("{top}: a module with no floor"));
        let text = std::fs::read_to_string(file).unwrap();
        for module in named_modules(&code(&text)) {
            let Some(theirs) = floor(&module) else {
                panic!("{}: crate::{module} has no floor", relative.display());
            };
            if theirs > own {
                violations.push(format!("{} imports crate::{module}", relative.display()));
            }
        }
        checked += 1;
    }
    assert!(checked > 100, "{checked} files");
    assert!(violations.is_empty(), "{violations:#?}");
}

#[test]
fn the_checker_sees_grouped_and_plain_paths() {
    let code = code(
        "use crate::{model::{A, B}, nsys::Report};\nlet x = crate::synth::run(); // crate::cli\n",
    );
    let found: Vec<String> = named_modules(&code).into_iter().collect();
    assert_eq!(found, ["model", "nsys", "synth"]);
}

/// The CLI parses and prints: `convert` fits in 150 lines, and neither it nor `report` calls an
/// analysis or builds a plan itself (the library's `export::conversion` and `query` do).
#[test]
fn the_cli_only_parses_and_prints() {
    let cli = root().join("src/cli");
    let convert = std::fs::read_to_string(cli.join("convert.rs")).unwrap();
    assert!(
        convert.lines().count() <= 150,
        "convert.rs has {} lines",
        convert.lines().count()
    );
    for file in ["convert.rs", "report.rs"] {
        let text = code(&std::fs::read_to_string(cli.join(file)).unwrap());
        for deep in ["nsys_lens::analysis", "Plan::new", "encoded::", "layout::"] {
            assert!(!text.contains(deep), "cli/{file} uses {deep}");
        }
    }
}
