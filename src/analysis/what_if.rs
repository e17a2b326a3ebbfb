//! `what-if`: the changes a replay of the [`Graph`] applies, parsed from `--change SPEC`.
//!
//! - `rank=R:compute*F`: rank R's compute (kernels, copies, sets) takes F times as long;
//! - `family=NAME*F`: that family's operations (a group too: `gemm` is every `gemm_*`);
//! - `role=NAME*F`: that communication role's transfers (`role=ep_a2a*0`: free);
//! - `straggler=median`: every rank's compute at the median rank's speed (each rank's compute
//!   scaled so its total over the steps is the median rank's);
//! - `launch=F`: the CPU time between a rank's calls (`launch=0`: no launch-bound gaps; host
//!   waits still wait).
//!
//! Changes combine: factors multiply.

use super::graph::Graph;
use super::upper_median;
use crate::classify::families::in_group;

/// One change.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A rank's compute, scaled.
    Rank(u32, f64),
    /// A family (or group) of operations, scaled.
    Family(String, f64),
    /// A communication role's transfers, scaled.
    Role(String, f64),
    /// Every rank's compute at the median rank's speed.
    StragglerMedian,
    /// CPU time between calls, scaled.
    Launch(f64),
}

impl Change {
    /// Parses `rank=R:compute*F`, `family=NAME*F`, `role=NAME*F`, `straggler=median` or
    /// `launch=F`.
    pub fn parse(text: &str) -> Result<Change, String> {
        let bad = |why: &str| {
            format!(
                "--change {text:?}: {why} (rank=R:compute*F, family=NAME*F, role=NAME*F, \
                 straggler=median, launch=F)"
            )
        };
        let (what, value) = text.split_once('=').ok_or_else(|| bad("no `=`"))?;
        let factor = |f: &str| -> Result<f64, String> {
            let f: f64 = f
                .trim()
                .parse()
                .map_err(|_| bad("the factor is not a number"))?;
            match f >= 0.0 && f.is_finite() {
                true => Ok(f),
                false => Err(bad("the factor must be 0 or more")),
            }
        };
        let scaled = |v: &str| -> Result<(String, f64), String> {
            let (name, f) = v.rsplit_once('*').ok_or_else(|| bad("no `*FACTOR`"))?;
            Ok((name.trim().to_string(), factor(f)?))
        };
        match what.trim() {
            "rank" => {
                let (rank, rest) = value.split_once(':').ok_or_else(|| bad("no `:compute`"))?;
                let rank = rank
                    .trim()
                    .parse()
                    .map_err(|_| bad("the rank is not a number"))?;
                let (what, f) = scaled(rest)?;
                match what.as_str() {
                    "compute" => Ok(Change::Rank(rank, f)),
                    _ => Err(bad("a rank's change is to its `compute`")),
                }
            }
            "family" => scaled(value).map(|(name, f)| Change::Family(name, f)),
            "role" => scaled(value).map(|(name, f)| Change::Role(name, f)),
            "straggler" if value.trim() == "median" => Ok(Change::StragglerMedian),
            "straggler" => Err(bad("the straggler change is `straggler=median`")),
            "launch" => factor(value).map(Change::Launch),
            _ => Err(bad("unknown change")),
        }
    }
}

impl std::fmt::Display for Change {
    /// The change as `--change` spells it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Rank(r, x) => write!(f, "rank={r}:compute*{x}"),
            Change::Family(name, x) => write!(f, "family={name}*{x}"),
            Change::Role(name, x) => write!(f, "role={name}*{x}"),
            Change::StragglerMedian => write!(f, "straggler=median"),
            Change::Launch(x) => write!(f, "launch={x}"),
        }
    }
}

/// The factors changes put on each operation of a graph and on the CPU, inside the steps
/// (everything else keeps factor 1, so a change never moves the start of the first step).
pub struct Factors<'g> {
    graph: &'g Graph,
    changes: &'g [Change],
    /// Each rank's compute time inside the steps, and the median rank's.
    compute_of_rank: (Vec<i64>, i64),
    /// The factor on the CPU time between a rank's calls.
    pub launch: f64,
}

impl<'g> Factors<'g> {
    /// The factors of `changes` on `graph`, of `ranks` ranks, whose operations `in_step` tells
    /// (they count for `straggler=median`).
    pub fn new(
        graph: &'g Graph,
        ranks: usize,
        changes: &'g [Change],
        in_step: impl Fn(u32) -> bool,
    ) -> Factors<'g> {
        let compute_of_rank = rank_compute(graph, ranks, &in_step);
        let mut median = compute_of_rank.clone();
        let median = upper_median(&mut median).unwrap_or(0);
        let launch: f64 = changes
            .iter()
            .map(|c| match c {
                Change::Launch(f) => *f,
                _ => 1.0,
            })
            .product();
        Factors {
            graph,
            changes,
            compute_of_rank: (compute_of_rank, median),
            launch,
        }
    }

    /// Operation `i`'s duration factor, were it inside the steps.
    pub fn node(&self, i: u32) -> f64 {
        let node = &self.graph.nodes[i as usize];
        let label = self.graph.labels[node.label as usize].as_str();
        let (compute_of_rank, median) = (&self.compute_of_rank.0, self.compute_of_rank.1);
        self.changes
            .iter()
            .map(|change| match change {
                Change::Rank(r, f) if !node.comm && self.graph.lane(i).rank == *r => *f,
                Change::Family(name, f) if in_group(name, label) => *f,
                Change::Role(name, f) if node.comm && in_group(name, label) => *f,
                Change::StragglerMedian if !node.comm => {
                    match compute_of_rank[self.graph.lane(i).rank as usize] {
                        0 => 1.0,
                        own => median as f64 / own as f64,
                    }
                }
                _ => 1.0,
            })
            .product()
    }
}

/// Each rank's compute time over the operations `in_step`, ns.
fn rank_compute(graph: &Graph, ranks: usize, in_step: &impl Fn(u32) -> bool) -> Vec<i64> {
    let mut compute = vec![0i64; ranks];
    let nodes = graph.nodes.iter().zip(graph.node_ranks());
    for (i, (n, rank)) in nodes.enumerate() {
        if !n.comm && in_step(i as u32) {
            compute[rank as usize] += n.end - n.start;
        }
    }
    compute
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_parse_and_bad_ones_say_why() {
        assert_eq!(
            Change::parse("rank=3:compute*0.8"),
            Ok(Change::Rank(3, 0.8))
        );
        assert_eq!(
            Change::parse("family=gemm*0.5"),
            Ok(Change::Family("gemm".into(), 0.5))
        );
        assert_eq!(
            Change::parse("role=ep_a2a*0"),
            Ok(Change::Role("ep_a2a".into(), 0.0))
        );
        assert_eq!(
            Change::parse("straggler=median"),
            Ok(Change::StragglerMedian)
        );
        assert_eq!(Change::parse("launch=0"), Ok(Change::Launch(0.0)));
        for (bad, why) in [
            ("gemm*0.5", "no `=`"),
            ("family=gemm", "no `*FACTOR`"),
            ("family=gemm*-1", "0 or more"),
            ("rank=x:compute*2", "not a number"),
            ("rank=1:memory*2", "`compute`"),
            ("straggler=mean", "straggler=median"),
            ("speed=2", "unknown change"),
        ] {
            let error = Change::parse(bad).unwrap_err();
            assert!(error.contains(why), "{bad}: {error}");
        }
    }
}
