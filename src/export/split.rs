//! `convert --split-by node`: one set of traces per node, every one on the same clock (the
//! whole run's plan, its rebase kept), and an index page that links them and says so.

use super::{Exported, Plan};
use crate::model::HostId;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One node's traces, as the index lists them.
#[derive(Debug, Clone)]
pub struct Node {
    /// Its host name.
    pub host: String,
    /// Its ranks, in order.
    pub ranks: Vec<u32>,
    /// Its processes drawn.
    pub processes: usize,
    /// The files written for it.
    pub files: Vec<PathBuf>,
}

/// The hosts of the plan's exported processes, in host order.
pub fn hosts(plan: &Plan) -> Vec<HostId> {
    let mut hosts: Vec<HostId> = plan.exported.iter().map(|e| host_of(plan, e)).collect();
    hosts.sort_unstable();
    hosts.dedup();
    hosts
}

/// The host an exported process ran on.
pub fn host_of(plan: &Plan, exported: &Exported) -> HostId {
    plan.activity.timeline.process(exported.process).host
}

/// The node's part of the plan, on the whole plan's clock.
pub fn node_plan<'a, 't>(plan: &Plan<'a, 't>, host: HostId) -> Plan<'a, 't> {
    plan.select(|e| (host_of(plan, e) == host).then_some(e.slices))
}

/// What the index lists of a node's plan, whose traces went to `files`.
pub fn node(plan: &Plan, host: HostId, files: Vec<PathBuf>) -> Node {
    Node {
        host: plan.activity.timeline.host(host).name.clone(),
        ranks: plan
            .exported
            .iter()
            .filter_map(|e| e.rank.map(|r| r.rank))
            .collect(),
        processes: plan.exported.len(),
        files,
    }
}

/// `base.<host>`: a node's traces' base path (characters other than letters, digits, `-`, `_`
/// and `.` in the host name become `_`).
pub fn node_base(base: &Path, host: &str) -> PathBuf {
    let host: String = host
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() || "-_.".contains(c) {
            true => c,
            false => '_',
        })
        .collect();
    PathBuf::from(format!("{}.{host}", base.display()))
}

/// The index page's path: `base.index.html`.
pub fn index_path(base: &Path) -> PathBuf {
    PathBuf::from(format!("{}.index.html", base.display()))
}

/// Writes the index page of the nodes' traces (complete or not at all); the line that says so.
pub fn write_index(base: &Path, plan: &Plan, nodes: &[Node]) -> anyhow::Result<String> {
    let path = index_path(base);
    let mut output = crate::output::Output::create(&path)?;
    std::io::Write::write_all(&mut output, index_page(plan, nodes).as_bytes())?;
    output.commit()?;
    Ok(format!(
        "wrote {}: {} node(s), their traces on one clock",
        path.display(),
        nodes.len()
    ))
}

/// The index page: one row per node with links to its files, and the clock they share.
fn index_page(plan: &Plan, nodes: &[Node]) -> String {
    let esc = crate::output::html_escape;
    let mut rows = String::new();
    for node in nodes {
        let links: Vec<String> = node
            .files
            .iter()
            .map(|f| {
                let name = f
                    .file_name()
                    .map_or(String::new(), |n| esc(&n.to_string_lossy()));
                format!("<a href=\"{name}\">{name}</a>")
            })
            .collect();
        let ranks: Vec<String> = node.ranks.iter().map(u32::to_string).collect();
        let _ = writeln!(
            rows,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&node.host),
            ranks.join(", "),
            node.processes,
            links.join(" ")
        );
    }
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>nsys-lens: traces per \
         node</title></head>\n<body>\n<h1>Traces per node</h1>\n<p>Every trace here is on one \
         clock: time 0 is the earliest exported event of the whole run, {} ns after the merged \
         clock's zero (the first report's session start). The same time in two files is the same \
         instant, so the nodes line up when compared side by side. Open a .perfetto-trace in \
         <a href=\"https://ui.perfetto.dev\">ui.perfetto.dev</a> (drag it in), a .prv in \
         wxparaver.</p>\n<table>\n<tr><th>node</th><th>ranks</th><th>processes</th>\
         <th>files</th></tr>\n{rows}</table>\n</body></html>\n",
        plan.offset
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_stay_file_names() {
        let base = Path::new("out/run");
        assert_eq!(node_base(base, "ault43"), PathBuf::from("out/run.ault43"));
        assert_eq!(node_base(base, "gpu/7 a"), PathBuf::from("out/run.gpu_7_a"));
        assert_eq!(index_path(base), PathBuf::from("out/run.index.html"));
    }
}
