//! What `convert` draws beyond the capture's own events: collective flows and the critical path.

use super::inputs::Inputs;
use nsys_lens::classify::{Activity, RoleRules};
use nsys_lens::export::Plan;
use nsys_lens::input::capture::Captures;
use nsys_lens::query::{RankList, conversion_plan};

/// Options of `convert` that add analyses to the traces.
#[derive(Debug, clap::Args)]
pub struct DrawnArgs {
    /// Perfetto: a flow arrow from each collective's last arrival to every other member's
    /// kernel (see `collectives`).
    #[arg(long)]
    pub collective_flows: bool,

    /// Both traces: a counter per rank, 1 while a step's critical path runs on it (Perfetto's
    /// `on the critical path`, with a flow where the path crosses ranks; Paraver's type
    /// 63100015, `cfgs/critical_path.cfg`), as `critical-path --whole` walks each step. Reads
    /// the whole capture into memory, as that command does.
    #[arg(long)]
    pub critical_path: bool,
}

impl DrawnArgs {
    /// The conversion's plan ([`conversion_plan`] of `ranks` over `window`) with what these
    /// flags draw: the critical path walked on the full timeline of `inputs` (the plan's own is
    /// light: it lacks compute kernels).
    pub fn plan<'a, 't>(
        &self,
        (light, captures): ((&'a Activity<'t>, &'a RoleRules), &Captures),
        ranks: Option<&RankList>,
        window: (Option<(i64, i64)>, Option<&str>, bool),
        inputs: &Inputs,
    ) -> anyhow::Result<Plan<'a, 't>> {
        let plan = conversion_plan(light, captures, ranks, window, self.collective_flows)?;
        if !self.critical_path {
            return Ok(plan);
        }
        let full = inputs.load()?;
        Ok(plan.with_critical_path(&Activity::new(&full)))
    }
}
