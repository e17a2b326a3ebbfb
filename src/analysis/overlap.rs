//! Hidden and exposed communication per rank, stage and role.
//!
//! For every NCCL kernel (clipped to the window): `hidden` is the part that non-NCCL kernels of
//! the same rank cover, `exposed` the rest. Kernels are grouped by their own role and by where
//! they ran (their own stream, or in-stream on a compute stream, where a point-to-point kernel
//! blocks the compute behind it). Groups report both the per-kernel sum of exposed time
//! (PithTrain's number, which counts two exposed kernels running at once twice) and the
//! wall-clock exposed time `|⋃ comm \ ⋃ compute|`. Collectives other than point-to-point on
//! compute streams form the `barrier` role: reported, never counted in the rank's totals.

use super::IntervalSet;
use crate::classify::{CommKernel, RankStreams, RoleRules, Stage};
use std::collections::BTreeMap;

/// The stage a group covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StageKey {
    /// Kernels launched inside this PithTrain stage.
    Stage(Stage),
    /// Pipeline point-to-point kernels (purpose `pp_p2p`).
    PpP2p,
    /// Every kernel of the role.
    All,
}

impl std::fmt::Display for StageKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StageKey::Stage(s) => s.fmt(f),
            StageKey::PpP2p => f.write_str("pp_p2p"),
            StageKey::All => f.write_str("all"),
        }
    }
}

/// The role a group covers: one label where the kernels ran, or all communication roles.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RoleKey {
    /// Kernels with this role (`ep_a2a`, `nccl:AllReduce`, or `barrier`).
    Role {
        /// The role.
        name: String,
        /// Whether they ran in-stream, on a compute stream.
        in_stream: bool,
    },
    /// Every communication kernel (barrier excluded).
    All,
}

impl RoleKey {
    /// Whether the group's kernels ran in-stream (None for `all`, which holds both).
    pub fn in_stream(&self) -> Option<bool> {
        match self {
            RoleKey::Role { in_stream, .. } => Some(*in_stream),
            RoleKey::All => None,
        }
    }

    /// The role for people: `ep_a2a`, `pp_p2p (in-stream)`, `all`.
    pub fn label(&self) -> String {
        match self {
            RoleKey::Role {
                name,
                in_stream: true,
            } if name != BARRIER => format!("{name} (in-stream)"),
            _ => self.to_string(),
        }
    }
}

impl std::fmt::Display for RoleKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RoleKey::Role { name, .. } => f.write_str(name),
            RoleKey::All => f.write_str("all"),
        }
    }
}

pub use crate::classify::streams::BARRIER;

/// The numbers of one group of communication kernels.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Exposure {
    /// Kernels.
    pub kernels: u64,
    /// Summed duration, ns.
    pub comm_ns: i64,
    /// Summed time covered by compute, ns.
    pub hidden_ns: i64,
    /// Summed time not covered, ns (`comm_ns - hidden_ns`).
    pub exposed_ns: i64,
    /// Wall-clock time with the group's communication running and no compute, ns.
    pub exposed_wall_ns: i64,
    /// `100 * hidden_ns / comm_ns` (0 when there is no communication time).
    pub overlap_pct: f64,
    /// Lowest per-kernel overlap % (kernels of zero length aside; 0 when none).
    pub overlap_min_pct: f64,
    /// Highest per-kernel overlap %.
    pub overlap_max_pct: f64,
}

/// One rank's groups, in order: stages, `pp_p2p`, then `all`; roles by name, `all` last.
pub type RankExposure = Vec<((StageKey, RoleKey), Exposure)>;

/// Groups a rank's NCCL kernels and measures how much of each group compute hides.
pub fn rank_exposure(streams: &RankStreams, rules: &RoleRules) -> RankExposure {
    let mut groups: BTreeMap<(StageKey, RoleKey), Vec<&CommKernel>> = BTreeMap::new();
    for k in &streams.comm {
        let role = RoleKey::Role {
            name: k.role_name(rules).to_string(),
            in_stream: k.in_stream,
        };
        let stage = if rules.label(k.purpose) == "pp_p2p" {
            Some(StageKey::PpP2p)
        } else {
            k.stage.map(StageKey::Stage)
        };
        if let Some(stage) = stage {
            groups.entry((stage, role.clone())).or_default().push(k);
        }
        groups.entry((StageKey::All, role)).or_default().push(k);
        if !k.is_barrier() {
            groups
                .entry((StageKey::All, RoleKey::All))
                .or_default()
                .push(k);
        }
    }
    // The rank's totals exist even when it has no communication stream.
    groups.entry((StageKey::All, RoleKey::All)).or_default();
    groups
        .into_iter()
        .map(|(key, kernels)| (key, measure(&kernels, &streams.compute)))
        .collect()
}

/// The exposure of a group of kernels against the compute union.
fn measure(kernels: &[&CommKernel], compute: &IntervalSet) -> Exposure {
    let mut e = Exposure {
        kernels: kernels.len() as u64,
        overlap_min_pct: f64::INFINITY,
        overlap_max_pct: f64::NEG_INFINITY,
        ..Exposure::default()
    };
    for k in kernels {
        let duration = k.end - k.start;
        let hidden = compute.covered(k.start, k.end);
        e.comm_ns += duration;
        e.hidden_ns += hidden;
        if duration > 0 {
            let pct = percent(hidden, duration);
            e.overlap_min_pct = e.overlap_min_pct.min(pct);
            e.overlap_max_pct = e.overlap_max_pct.max(pct);
        }
    }
    if e.overlap_min_pct > e.overlap_max_pct {
        (e.overlap_min_pct, e.overlap_max_pct) = (0.0, 0.0);
    }
    e.exposed_ns = e.comm_ns - e.hidden_ns;
    e.overlap_pct = percent(e.hidden_ns, e.comm_ns);
    e.exposed_wall_ns = IntervalSet::from_intervals(kernels.iter().map(|k| (k.start, k.end)))
        .difference(compute)
        .measure();
    e
}

/// `100 * part / whole` (0 when `whole` is 0), from exact integers.
pub fn percent(part: i64, whole: i64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        (100 * i128::from(part)) as f64 / whole as f64
    }
}

/// One group across ranks: medians, and the worst and best rank.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Upper medians (index n/2) across the ranks that have the group, field by field.
    pub median: Exposure,
    /// Index (into the ranks given) of the rank with the lowest `overlap_pct`.
    pub worst: usize,
    /// The lowest rank `overlap_pct`.
    pub worst_pct: f64,
    /// The highest rank `overlap_pct`.
    pub best_pct: f64,
}

/// Summarises every group over ranks, in group order.
pub fn summarize(ranks: &[RankExposure]) -> Vec<((StageKey, RoleKey), Summary)> {
    let mut by_key: BTreeMap<&(StageKey, RoleKey), Vec<(usize, &Exposure)>> = BTreeMap::new();
    for (r, groups) in ranks.iter().enumerate() {
        for (key, e) in groups {
            by_key.entry(key).or_default().push((r, e));
        }
    }
    by_key
        .into_iter()
        .map(|(key, list)| (key.clone(), summary(&list)))
        .collect()
}

fn summary(list: &[(usize, &Exposure)]) -> Summary {
    fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> T {
        v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
        v[v.len() / 2]
    }
    let ints = |f: fn(&Exposure) -> i64| median(list.iter().map(|(_, e)| f(e)).collect());
    let floats = |f: fn(&Exposure) -> f64| median(list.iter().map(|(_, e)| f(e)).collect());
    let &(worst, worst_e) = list
        .iter()
        .min_by(|a, b| a.1.overlap_pct.total_cmp(&b.1.overlap_pct))
        .expect("a group has a rank");
    Summary {
        median: Exposure {
            kernels: median(list.iter().map(|(_, e)| e.kernels).collect()),
            comm_ns: ints(|e| e.comm_ns),
            hidden_ns: ints(|e| e.hidden_ns),
            exposed_ns: ints(|e| e.exposed_ns),
            exposed_wall_ns: ints(|e| e.exposed_wall_ns),
            overlap_pct: floats(|e| e.overlap_pct),
            overlap_min_pct: floats(|e| e.overlap_min_pct),
            overlap_max_pct: floats(|e| e.overlap_max_pct),
        },
        worst,
        worst_pct: worst_e.overlap_pct,
        best_pct: list
            .iter()
            .map(|(_, e)| e.overlap_pct)
            .fold(f64::NEG_INFINITY, f64::max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{Role, StreamUse};
    use crate::model::StreamId;

    fn kernel(stream: u32, start: i64, end: i64, purpose: crate::classify::Purpose) -> CommKernel {
        CommKernel {
            start,
            end,
            stream: StreamId(stream),
            name: crate::model::StringId::EMPTY,
            correlation: 0,
            op: None,
            purpose,
            evidence: crate::classify::Evidence::KernelName,
            stage: Stage::last_in("layer00.stage2_f"),
            point_to_point: true,
            call: None,
            in_stream: false,
        }
    }

    fn usage(stream: u32, role: Role) -> StreamUse {
        StreamUse {
            stream: StreamId(stream),
            role,
            n_comm: 1,
            n_comp: 0,
            n_copy: 0,
            comm_ns: 0,
            comp_ns: 0,
            busy_ns: 0,
        }
    }

    #[test]
    fn two_exposed_kernels_at_once_count_twice_summed_and_once_on_the_wall() {
        // Compute covers [0, 40). Two ep_a2a kernels on two streams run [20, 100) and [30, 90):
        // hidden 20 + 10, exposed 60 + 50 = 110 summed; the wall sees [40, 100) = 60 exposed.
        let rules = RoleRules::default();
        let a2a = rules.named("ep_a2a");
        let streams = RankStreams {
            streams: vec![usage(1, Role::Comm(a2a)), usage(2, Role::Comm(a2a))],
            comm: vec![kernel(1, 20, 100, a2a), kernel(2, 30, 90, a2a)],
            compute: IntervalSet::from_intervals([(0, 40)]),
        };
        let groups = rank_exposure(&streams, &rules);
        let keys: Vec<String> = groups
            .iter()
            .map(|((s, r), _)| format!("{s}/{r}"))
            .collect();
        assert_eq!(keys, ["stage2_f/ep_a2a", "all/ep_a2a", "all/all"]);
        let e = groups[0].1;
        assert_eq!((e.kernels, e.comm_ns, e.hidden_ns), (2, 140, 30));
        assert_eq!((e.exposed_ns, e.exposed_wall_ns), (110, 60));
        assert_eq!(e.overlap_pct, 100.0 * 30.0 / 140.0);
        assert_eq!(
            (e.overlap_min_pct, e.overlap_max_pct),
            (100.0 * 10.0 / 60.0, 25.0)
        );
        assert_eq!(groups[2].1, e);
    }

    #[test]
    fn summaries_take_upper_medians_and_name_the_worst_rank() {
        let e = |pct: f64, exposed: i64| Exposure {
            overlap_pct: pct,
            exposed_ns: exposed,
            ..Exposure::default()
        };
        let key = (StageKey::All, RoleKey::All);
        let ranks = vec![
            vec![(key.clone(), e(50.0, 10))],
            vec![(key.clone(), e(20.0, 40))],
            vec![(key.clone(), e(90.0, 5))],
            vec![(key.clone(), e(70.0, 7))],
        ];
        let s = summarize(&ranks);
        assert_eq!(s.len(), 1);
        let s = s[0].1;
        assert_eq!((s.median.overlap_pct, s.median.exposed_ns), (70.0, 10));
        assert_eq!((s.worst, s.worst_pct, s.best_pct), (1, 20.0, 90.0));
    }
}
