//! What `convert` does to keep its traces ones a browser can open: a size limit, and one trace
//! per node.

use super::drawn::DrawnArgs;
use nsys_lens::classify::{Activity, RoleRules};
use nsys_lens::export::Plan;
use nsys_lens::export::conversion::Request;
use nsys_lens::input::capture::Captures;
use nsys_lens::query::RankList;

/// How `--split-by` splits the traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SplitBy {
    /// One set of traces per node.
    Node,
}

/// Options of `convert` that size its traces.
#[derive(Debug, clap::Args)]
pub struct SizeArgs {
    /// Keep the Perfetto trace within SIZE (`200M`, `1G`; ui.perfetto.dev opens up to about
    /// 1-2 GB): when the whole capture is estimated above it, keep each rank's steady window
    /// (unless a window is given), then the slices of the ranks that fit, the first of each node
    /// and of each set of stream roles first, and draw the others by their counters only. Says
    /// what it kept; the written size is checked.
    #[arg(long, value_name = "SIZE", value_parser = super::inputs::parse_size,
          conflicts_with_all = ["collective_flows", "critical_path", "encode", "merge"])]
    pub max_size: Option<usize>,

    /// `node`: one set of traces per node (OUT.<host>.perfetto-trace, OUT.<host>.prv ...),
    /// all on the run's clock, and OUT.index.html that links them.
    #[arg(long, value_enum, value_name = "WHAT", conflicts_with_all = ["encode", "merge"])]
    pub split_by: Option<SplitBy>,
}

impl SizeArgs {
    /// The request with these options.
    pub fn apply(&self, request: Request) -> Request {
        Request {
            max_size: self.max_size.map(|m| m as u64),
            split_by_node: self.split_by == Some(SplitBy::Node),
            ..request
        }
    }

    /// The plan over each rank's steady window that `--max-size` falls back to, when no window
    /// was asked for.
    pub fn fallback<'a, 't>(
        &self,
        drawn: &DrawnArgs,
        light: ((&'a Activity<'t>, &'a RoleRules), &Captures),
        ranks: Option<&RankList>,
        window: (Option<(i64, i64)>, Option<&str>, bool),
    ) -> anyhow::Result<Option<Plan<'a, 't>>> {
        let (start_end, _, steady) = window;
        if self.max_size.is_none() || start_end.is_some() || steady {
            return Ok(None);
        }
        drawn.plan(light, ranks, (None, None, true)).map(Some)
    }
}
