//! What `convert` draws beyond the capture's own events: collective flows and the critical path.

use nsys_lens::classify::families::Families;
use nsys_lens::classify::{Activity, RoleRules};
use nsys_lens::export::Plan;
use nsys_lens::input::capture::Captures;
use nsys_lens::query::{RankList, captured, conversion_plan};

/// Options of `convert` that add analyses to the traces.
#[derive(Debug, clap::Args)]
pub struct DrawnArgs {
    /// Perfetto: a flow arrow from each collective's last arrival to every other member's
    /// kernel (see `collectives`).
    #[arg(long)]
    pub collective_flows: bool,

    /// Both traces: a counter per rank, 1 while a step's critical path runs on it (Perfetto's
    /// `on the critical path`, with a flow where the path crosses ranks; Paraver's type
    /// 63100015, `cfgs/critical_path.cfg`), as `critical-path --whole` walks each step. Its
    /// graph holds every GPU operation and launch, as that command's does.
    #[arg(long)]
    pub critical_path: bool,
}

impl DrawnArgs {
    /// The conversion's plan ([`conversion_plan`] of `ranks` over `window`) with what these
    /// flags draw: the critical path walked on a graph built in passes over `captures` (the
    /// plan's light timeline lacks compute kernels).
    pub fn plan<'a, 't>(
        &self,
        (light, captures): ((&'a Activity<'t>, &'a RoleRules), &Captures),
        ranks: Option<&RankList>,
        window: (Option<(i64, i64)>, Option<&str>, bool),
    ) -> anyhow::Result<Plan<'a, 't>> {
        let plan = conversion_plan(light, captures, ranks, window, self.collective_flows)?;
        if !self.critical_path {
            return Ok(plan);
        }
        let (activity, rules) = light;
        let families = Families::default();
        let graph = captured::graph((captures, activity), &plan.path_ranks(), rules, &families)?;
        Ok(plan.with_critical_path(&graph))
    }
}
