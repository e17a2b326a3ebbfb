//! The rule table that names what a communication kernel is for, from the NVTX range its launch
//! sits in. Rules are data: the built-in PithTrain rules, after any rules of a `--roles` file.
//!
//! ```toml
//! # roles.toml: tried in file order, before the built-in rules
//! [[rule]]
//! pattern = "all_to_all|moe_dispatch"   # a regex on the NVTX range text
//! role = "ep_a2a"
//! ```

use indexmap::IndexSet;
use regex::Regex;
use std::path::Path;
use std::sync::LazyLock;

/// The built-in rules: PithTrain's needles in its order (analyses.md §1.4 step 3).
pub const BUILTIN: &[(&str, &str)] = &[
    ("stage[24]_[fb]", "ep_a2a"),
    ("stage1_[fb]", "cp_ring"),
    ("pipeline send/recv", "pp_p2p"),
];

/// NCCL collectives named by kernel names (`ncclDevKernel_SendRecv`,
/// `ncclKernel_AllReduce_RING_LL_Sum_float`).
const COLLECTIVES: &[&str] = &[
    "AllGather",
    "ReduceScatter",
    "AllReduce",
    "Broadcast",
    "Reduce",
    "SendRecv",
    "Send",
    "Recv",
    "AllToAll",
    "Generic",
];

/// Roles a rule may not use: the classifier gives them itself.
const RESERVED: &[&str] = &["compute", "copy", "mixed", "barrier", "unknown", "all"];

/// Last `stage<N>_<x>` marker of a range text (PithTrain's stage key).
static STAGE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"stage([1-5])_([fbw])").expect("valid regex"));

/// A communication purpose: an index into [`RoleRules::label`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Purpose(u16);

/// The rules, in the order they are tried, and every label they (or kernel names) can give.
#[derive(Debug, Clone)]
pub struct RoleRules {
    rules: Vec<(Regex, Purpose)>,
    labels: IndexSet<String>,
}

impl Default for RoleRules {
    fn default() -> Self {
        RoleRules::new(&[]).expect("built-in rules are valid")
    }
}

/// A `--roles` file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// Unreadable.
    #[error("cannot read the roles file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Not the expected TOML.
    #[error("the roles file {path} is not valid: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, and where.
        message: String,
    },
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    #[serde(default)]
    rule: Vec<RuleEntry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleEntry {
    pattern: String,
    role: String,
}

impl RoleRules {
    /// The built-in rules after `user` rules (pattern, role), which are tried first.
    pub fn new(user: &[(&str, &str)]) -> Result<RoleRules, String> {
        let mut labels = IndexSet::new();
        let mut rules = Vec::new();
        for (i, &(pattern, role)) in user.iter().chain(BUILTIN).enumerate() {
            let role = role.trim();
            if role.is_empty() || RESERVED.contains(&role) || role.starts_with("nccl:") {
                return Err(format!(
                    "rule {}: role `{role}` is reserved or empty (the classifier gives {} and \
                     `nccl:<collective>` itself)",
                    i + 1,
                    RESERVED.join(", ")
                ));
            }
            let regex = Regex::new(pattern)
                .map_err(|e| format!("rule {}: bad pattern `{pattern}`: {e}", i + 1))?;
            let (index, _) = labels.insert_full(role.to_string());
            rules.push((regex, Purpose(index as u16)));
        }
        for c in COLLECTIVES.iter().chain(&["other"]) {
            labels.insert(format!("nccl:{c}"));
        }
        Ok(RoleRules { rules, labels })
    }

    /// Reads a `--roles` TOML file (`[[rule]]` entries with `pattern` and `role`).
    pub fn from_file(path: &Path) -> Result<RoleRules, RulesError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| RulesError::Io {
            path: shown.clone(),
            source,
        })?;
        let invalid = |message: String| RulesError::Invalid {
            path: shown.clone(),
            message,
        };
        let file: RuleFile = toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        let user: Vec<(&str, &str)> = file
            .rule
            .iter()
            .map(|r| (r.pattern.as_str(), r.role.as_str()))
            .collect();
        RoleRules::new(&user).map_err(invalid)
    }

    /// The purpose the first matching rule gives a range text.
    pub fn purpose_of(&self, text: &str) -> Option<Purpose> {
        self.rules
            .iter()
            .find(|(regex, _)| regex.is_match(text))
            .map(|&(_, purpose)| purpose)
    }

    /// `nccl:<Collective>` from an NCCL kernel's short name (`nccl:other` when unrecognised).
    pub fn collective(&self, kernel_name: &str) -> Purpose {
        let token = kernel_name
            .split_once('_')
            .map_or("", |(_, rest)| rest)
            .split(['_', '('])
            .next()
            .unwrap_or("");
        let name = COLLECTIVES
            .iter()
            .find(|&&c| c == token)
            .map_or("other", |c| c);
        let index = self.labels.get_index_of(&format!("nccl:{name}"));
        Purpose(index.expect("collective labels are registered") as u16)
    }

    /// The label of a purpose (`ep_a2a`, `nccl:AllReduce`).
    pub fn label(&self, purpose: Purpose) -> &str {
        &self.labels[purpose.0 as usize]
    }
}

/// Whether a kernel is NCCL's (its name starts with `nccl`, any case: SQL `LIKE 'nccl%'`).
pub fn is_nccl(kernel_name: &str) -> bool {
    kernel_name
        .get(..4)
        .is_some_and(|p| p.eq_ignore_ascii_case("nccl"))
}

/// A PithTrain stage: `stage<number>_<pass>` with pass `f`, `b` or `w`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stage {
    /// 1 to 5.
    pub number: u8,
    /// `f`, `b` or `w`.
    pub pass: char,
}

impl Stage {
    /// The last stage marker in a range text (`layer05_stage5_b_layer06_stage1_b` is `stage1_b`).
    pub fn last_in(text: &str) -> Option<Stage> {
        let caps = STAGE.captures_iter(text).last()?;
        Some(Stage {
            number: caps[1].parse().ok()?,
            pass: caps[2].chars().next()?,
        })
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stage{}_{}", self.number, self.pass)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_rules_follow_pithtrains_needle_order() {
        let rules = RoleRules::default();
        let label = |text: &str| rules.purpose_of(text).map(|p| rules.label(p).to_string());
        assert_eq!(label("layer03.stage2_f").as_deref(), Some("ep_a2a"));
        assert_eq!(label("layer03.stage4_b").as_deref(), Some("ep_a2a"));
        assert_eq!(
            label("layer05_stage5_f_layer06_stage1_f").as_deref(),
            Some("cp_ring")
        );
        assert_eq!(label("pipeline send/recv").as_deref(), Some("pp_p2p"));
        assert_eq!(label("layer03.stage3_w"), None);
        assert_eq!(label("Layer03.Stage2_F"), None, "case-sensitive");
    }

    #[test]
    fn user_rules_come_first_and_reserved_roles_are_refused() {
        let rules = RoleRules::new(&[("stage2", "dispatch")]).unwrap();
        assert_eq!(
            rules.label(rules.purpose_of("layer01.stage2_f").unwrap()),
            "dispatch"
        );
        assert_eq!(
            rules.label(rules.purpose_of("layer01.stage4_f").unwrap()),
            "ep_a2a"
        );
        assert!(RoleRules::new(&[("x", "compute")]).is_err());
        assert!(
            RoleRules::new(&[("(", "ep")])
                .unwrap_err()
                .contains("rule 1")
        );
    }

    #[test]
    fn collectives_come_from_kernel_names() {
        let rules = RoleRules::default();
        let c = |name: &str| rules.label(rules.collective(name)).to_string();
        assert_eq!(c("ncclDevKernel_SendRecv"), "nccl:SendRecv");
        assert_eq!(
            c("ncclKernel_AllReduce_RING_LL_Sum_float"),
            "nccl:AllReduce"
        );
        assert_eq!(
            c("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            "nccl:AllGather"
        );
        assert_eq!(c("ncclDevKernel_Mystery"), "nccl:other");
    }

    #[test]
    fn nccl_names_and_stage_markers() {
        assert!(is_nccl("ncclDevKernel_SendRecv") && is_nccl("NCCL_x") && !is_nccl("nc"));
        assert!(!is_nccl("sm90_xmma_gemm"));
        let stage = |t: &str| Stage::last_in(t).map(|s| s.to_string());
        assert_eq!(
            stage("layer05_stage5_b_layer06_stage1_b").as_deref(),
            Some("stage1_b")
        );
        assert_eq!(stage("layer02.stage3_w").as_deref(), Some("stage3_w"));
        assert_eq!(stage("layer07.stage5_merged_skip"), None);
        assert_eq!(stage("pipeline send/recv"), None);
    }
}
