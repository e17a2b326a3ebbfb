//! The rule table that names what a communication kernel is for, from the NVTX ranges its
//! launch sits in. Rules are data: a `--roles` file's rules first, then the built-in table of
//! framework names ([`BUILTIN`]). Each rule says which kernels it may name: PithTrain's stage
//! rules, say, name point-to-point (`SendRecv`) kernels only, so the routing all-reduce launched
//! inside a stage-1 range is not taken for the CP ring.
//!
//! ```toml
//! # roles.toml: tried in file order, before the built-in rules
//! [[rule]]
//! pattern = "all_to_all|moe_dispatch"   # a regex on the NVTX range text
//! role = "ep_a2a"
//! kernels = "p2p"                       # optional: "any" (default) or "p2p" (SendRecv kernels)
//! ```

use crate::hash::FxBuildHasher;
use indexmap::IndexSet;
use regex::{Regex, RegexSet};
use std::io::Read as _;
use std::path::Path;
use std::sync::LazyLock;

/// Which NCCL kernels a rule may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kernels {
    /// Every NCCL kernel.
    #[default]
    Any,
    /// Point-to-point kernels only (`SendRecv`, `Send`, `Recv`: what all-to-alls, rings and
    /// pipeline transfers run as).
    P2p,
}

/// How strong a rule's evidence is: a kernel takes its role from the strongest tier that has a
/// matching range around its launch, and within a tier from the innermost such range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// A `--roles` rule.
    User,
    /// A framework's name for what the communication is for (`ep_a2a`, `pp_p2p`, ...).
    Framework,
    /// PyTorch's name for the collective it called (`nccl:all_to_all`): the pattern, not the
    /// purpose.
    Torch,
}

impl Tier {
    /// Every tier, strongest first.
    pub const ALL: [Tier; 3] = [Tier::User, Tier::Framework, Tier::Torch];

    /// `rule`, `framework` or `torch`: how outputs name the evidence.
    pub fn name(self) -> &'static str {
        match self {
            Tier::User => "rule",
            Tier::Framework => "framework",
            Tier::Torch => "torch",
        }
    }
}

/// What the rules give one range text: per tier, the role for point-to-point kernels and the
/// role for the others.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Matches([[Option<Purpose>; 2]; 3]);

impl Matches {
    /// The role of `tier` for a kernel that is (`p2p`) or is not point-to-point.
    pub fn get(&self, tier: Tier, p2p: bool) -> Option<Purpose> {
        self.0[tier as usize][usize::from(p2p)]
    }

    /// Whether no rule matched.
    pub fn is_empty(&self) -> bool {
        self.0.iter().flatten().all(Option::is_none)
    }
}

/// One built-in rule: the framework whose NVTX it reads, a regex on range text, the role, the
/// kernels it may name, its tier, and a range text it must match (checked by a test).
#[derive(Debug, Clone, Copy)]
pub struct BuiltinRule {
    /// Who emits the range (`PithTrain`, `Megatron-LM`, `PyTorch`, ...).
    pub framework: &'static str,
    /// Regex on the NVTX range text.
    pub pattern: &'static str,
    /// The role it gives.
    pub role: &'static str,
    /// The kernels it may name.
    pub kernels: Kernels,
    /// How strong the evidence is.
    pub tier: Tier,
    /// A real range text it matches.
    pub example: &'static str,
}

const fn rule(
    framework: &'static str,
    pattern: &'static str,
    role: &'static str,
    kernels: Kernels,
    tier: Tier,
    example: &'static str,
) -> BuiltinRule {
    BuiltinRule {
        framework,
        pattern,
        role,
        kernels,
        tier,
        example,
    }
}

/// The built-in rules, tried after `--roles` rules: PithTrain's needles in its order
/// (analyses.md §1.4 step 3), then Megatron-LM, Transformer Engine, DeepSpeed and FSDP2 names
/// (`FSDP::all_gather_copy_out` is a copy, not communication: `\b` keeps it out), then PyTorch's
/// collective names (`record_param_comms` / `--pytorch=autograd-nvtx`).
pub const BUILTIN: &[BuiltinRule] = &[
    rule(
        "PithTrain",
        "stage[24]_[fb]",
        "ep_a2a",
        Kernels::P2p,
        Tier::Framework,
        "layer03.stage2_f",
    ),
    rule(
        "PithTrain",
        "stage1_[fb]",
        "cp_ring",
        Kernels::P2p,
        Tier::Framework,
        "layer05_stage5_f_layer06_stage1_f",
    ),
    rule(
        "PithTrain",
        "pipeline send/recv",
        "pp_p2p",
        Kernels::P2p,
        Tier::Framework,
        "pipeline send/recv",
    ),
    rule(
        "Megatron-LM",
        r"\b(send|recv)_(forward|backward)\b|\bp2p_communication\b",
        "pp_p2p",
        Kernels::P2p,
        Tier::Framework,
        "megatron.core.pipeline_parallel.p2p_communication.send_forward_recv_backward",
    ),
    rule(
        "Megatron-LM",
        r"\btoken_(dispatch|combine|permutation|unpermutation)\b",
        "ep_a2a",
        Kernels::P2p,
        Tier::Framework,
        "MoEAlltoAllTokenDispatcher.token_dispatch",
    ),
    rule(
        "DeepSpeed MoE / Megatron-LM",
        r"^_AllToAll\b",
        "ep_a2a",
        Kernels::P2p,
        Tier::Framework,
        "_AllToAll, seq = 812",
    ),
    rule(
        "Transformer Engine",
        r"AttnFuncWithCPAndKVP2P",
        "cp_ring",
        Kernels::P2p,
        Tier::Framework,
        "AttnFuncWithCPAndKVP2P, seq = 97",
    ),
    rule(
        "Transformer Engine / DeepSpeed-Ulysses",
        r"AttnFuncWithCPAndQKVOA2A|SeqAllToAll",
        "cp_a2a",
        Kernels::P2p,
        Tier::Framework,
        "_SeqAllToAll, seq = 45",
    ),
    rule(
        "PyTorch FSDP2",
        r"^FSDP::all_gather\b",
        "fsdp_ag",
        Kernels::Any,
        Tier::Framework,
        "FSDP::all_gather (model.layers.12)",
    ),
    rule(
        "PyTorch FSDP2",
        r"^FSDP::post_backward_reduce\b",
        "fsdp_grad",
        Kernels::Any,
        Tier::Framework,
        "FSDP::post_backward_reduce (model.layers.12)",
    ),
    rule(
        "PyTorch",
        r"^nccl:all_to_all\b|^c10d::alltoall",
        "nccl:AllToAll",
        Kernels::Any,
        Tier::Torch,
        "nccl:all_to_all, op_id = 991144",
    ),
    rule(
        "PyTorch",
        r"^nccl:(all_reduce|allreduce_coalesced)\b",
        "nccl:AllReduce",
        Kernels::Any,
        Tier::Torch,
        "nccl:all_reduce",
    ),
    rule(
        "PyTorch",
        r"^nccl:(_all_gather_base|all_gather\w*)\b",
        "nccl:AllGather",
        Kernels::Any,
        Tier::Torch,
        "nccl:_all_gather_base",
    ),
    rule(
        "PyTorch",
        r"^nccl:(_reduce_scatter_base|reduce_scatter\w*)\b",
        "nccl:ReduceScatter",
        Kernels::Any,
        Tier::Torch,
        "nccl:_reduce_scatter_base",
    ),
    rule(
        "PyTorch",
        r"^nccl:broadcast\b",
        "nccl:Broadcast",
        Kernels::Any,
        Tier::Torch,
        "nccl:broadcast",
    ),
    rule(
        "PyTorch",
        r"^nccl:(send|recv)\b|^c10d::(send|recv_)\b|^nccl:batch_isend_irecv\b",
        "p2p",
        Kernels::Any,
        Tier::Torch,
        "nccl:send 0->1",
    ),
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

/// Collectives whose kernels are point-to-point transfers.
const POINT_TO_POINT: &[&str] = &["SendRecv", "Send", "Recv"];

/// The role of point-to-point traffic that no evidence attributes to a framework purpose (one
/// peer per NCCL group: a pipeline transfer or a ring step).
pub const P2P: &str = "p2p";

/// Roles a rule may not use: the classifier gives them itself.
const RESERVED: &[&str] = &["compute", "copy", "mixed", "barrier", "unknown", "all", P2P];

/// Last `stage<N>_<x>` marker of a range text (PithTrain's stage key).
static STAGE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"stage([1-5])_([fbw])").expect("valid regex"));

/// A communication role: an index into [`RoleRules::label`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Purpose(u16);

/// One rule, compiled.
#[derive(Debug, Clone)]
struct Rule {
    purpose: Purpose,
    kernels: Kernels,
    tier: Tier,
}

/// The rules, in the order they are tried, and every label they (or kernel names) can give.
#[derive(Debug, Clone)]
pub struct RoleRules {
    rules: Vec<Rule>,
    set: RegexSet,
    labels: IndexSet<String, FxBuildHasher>,
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
    #[error("cannot read the roles file {path}: {cause}")]
    Io {
        /// The file.
        path: String,
        /// Why (in the message, not repeated as a source).
        cause: std::io::Error,
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
    rule: Vec<UserRule>,
}

/// A `--roles` rule: a regex on NVTX range text, the role it gives, and the kernels it may name.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserRule {
    /// Regex on the range text.
    pub pattern: String,
    /// The role.
    pub role: String,
    /// The kernels it may name (every NCCL kernel by default).
    #[serde(default)]
    pub kernels: Kernels,
}

impl UserRule {
    /// A rule for every NCCL kernel.
    pub fn new(pattern: &str, role: &str) -> UserRule {
        UserRule {
            pattern: pattern.to_string(),
            role: role.to_string(),
            kernels: Kernels::Any,
        }
    }
}

/// The largest rule file read, bytes: a rule file is a few lines of TOML.
const MAX_RULE_FILE: u64 = 1 << 20;

/// The longest pattern a user may give, bytes.
pub const MAX_PATTERN: usize = 4096;

/// A user's pattern (a role rule, `--anchor`), compiled; errors quote at most its first 80
/// characters, and a pattern over [`MAX_PATTERN`] bytes is refused unread.
pub fn user_regex(pattern: &str) -> Result<Regex, String> {
    if pattern.len() > MAX_PATTERN {
        let start: String = pattern.chars().take(80).collect();
        return Err(format!(
            "pattern `{start}...` has {} bytes, over the limit of {MAX_PATTERN}",
            pattern.len()
        ));
    }
    Regex::new(pattern).map_err(|e| format!("bad pattern `{pattern}`: {e}"))
}

impl RoleRules {
    /// The built-in rules after `user` rules, which are tried first.
    pub fn new(user: &[UserRule]) -> Result<RoleRules, String> {
        let mut labels = IndexSet::default();
        let mut rules = Vec::new();
        let mut patterns: Vec<&str> = Vec::new();
        for (i, r) in user.iter().enumerate() {
            let role = r.role.trim();
            if role.is_empty() || RESERVED.contains(&role) || role.starts_with("nccl:") {
                return Err(format!(
                    "rule {}: role `{role}` is reserved or empty (the classifier gives {} and \
                     `nccl:<collective>` itself)",
                    i + 1,
                    RESERVED.join(", ")
                ));
            }
            user_regex(&r.pattern).map_err(|e| format!("rule {}: {e}", i + 1))?;
            patterns.push(&r.pattern);
            let (index, _) = labels.insert_full(role.to_string());
            rules.push(Rule {
                purpose: Purpose(index as u16),
                kernels: r.kernels,
                tier: Tier::User,
            });
        }
        for b in BUILTIN {
            patterns.push(b.pattern);
            let (index, _) = labels.insert_full(b.role.to_string());
            rules.push(Rule {
                purpose: Purpose(index as u16),
                kernels: b.kernels,
                tier: b.tier,
            });
        }
        labels.insert(P2P.to_string());
        for l in super::comm::LIBRARIES {
            labels.insert(l.role.to_string());
        }
        for c in COLLECTIVES.iter().chain(&["other"]) {
            labels.insert(format!("nccl:{c}"));
        }
        let set = RegexSet::new(patterns)
            .map_err(|e| format!("the rules do not compile together: {e}"))?;
        Ok(RoleRules { rules, set, labels })
    }

    /// The rules of the file at `path` (see [`RoleRules::from_file`]), else the built-in ones.
    pub fn load(path: Option<&Path>) -> Result<RoleRules, RulesError> {
        path.map_or_else(|| Ok(RoleRules::default()), RoleRules::from_file)
    }

    /// Reads a `--roles` TOML file (`[[rule]]` entries with `pattern`, `role` and optionally
    /// `kernels`).
    pub fn from_file(path: &Path) -> Result<RoleRules, RulesError> {
        let shown = path.display().to_string();
        let invalid = |message: String| RulesError::Invalid {
            path: shown.clone(),
            message,
        };
        let mut bytes = Vec::new();
        let file = std::fs::File::open(path);
        let read = file.and_then(|f| f.take(MAX_RULE_FILE + 1).read_to_end(&mut bytes));
        read.map_err(|cause| RulesError::Io {
            path: shown.clone(),
            cause,
        })?;
        crate::output::note_input(path);
        if bytes.len() as u64 > MAX_RULE_FILE {
            return Err(invalid(format!(
                "over {} KiB: not a rule file",
                MAX_RULE_FILE >> 10
            )));
        }
        let text = String::from_utf8(bytes).map_err(|_| invalid("not UTF-8 text".into()))?;
        let file: RuleFile = toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        RoleRules::new(&file.rule).map_err(invalid)
    }

    /// What every rule gives a range text, in one pass over it: per tier, the first matching
    /// rule that may name point-to-point kernels, and the first that may name the others.
    pub fn matches(&self, text: &str) -> Matches {
        let mut m = Matches::default();
        for i in self.set.matches(text).iter() {
            let rule = &self.rules[i];
            let slots = &mut m.0[rule.tier as usize];
            slots[1].get_or_insert(rule.purpose);
            if rule.kernels == Kernels::Any {
                slots[0].get_or_insert(rule.purpose);
            }
        }
        m
    }

    /// The role the first rule of `tier` that may name a kernel of this kind (`p2p`: a
    /// point-to-point kernel) gives a range text.
    pub fn purpose_of(&self, text: &str, tier: Tier, p2p: bool) -> Option<Purpose> {
        self.matches(text).get(tier, p2p)
    }

    /// The role a communication kernel's name gives it ([`super::comm`]): an NCCL kernel's
    /// `nccl:<Collective>` (`nccl:other` when unrecognised), another library's role.
    pub fn by_name(&self, short: &str, name: &str) -> Purpose {
        match super::comm::comm_kind(short, name).and_then(|k| k.library) {
            Some(library) => self.named(library.role),
            None => self.named(&format!("nccl:{}", collective_name(short))),
        }
    }

    /// The role with this label, which must be one the classifier gives (`p2p`, `nccl:...`).
    pub fn named(&self, label: &str) -> Purpose {
        let index = self.labels.get_index_of(label);
        Purpose(index.expect("classifier labels are registered") as u16)
    }

    /// The label of a role (`ep_a2a`, `nccl:AllReduce`).
    pub fn label(&self, purpose: Purpose) -> &str {
        &self.labels[purpose.0 as usize]
    }

    /// Every label a kernel can get: the rules' roles, `p2p`, the communication libraries'
    /// roles and `nccl:<collective>`.
    pub fn labels(&self) -> impl Iterator<Item = &str> {
        self.labels.iter().map(String::as_str)
    }
}

/// The collective of an NCCL kernel name (`AllReduce`, `SendRecv`, ...; `other` when unknown).
fn collective_name(kernel_name: &str) -> &'static str {
    let token = kernel_name
        .split_once('_')
        .map_or("", |(_, rest)| rest)
        .split(['_', '('])
        .next()
        .unwrap_or("");
    COLLECTIVES
        .iter()
        .find(|&&c| c == token)
        .map_or("other", |c| c)
}

/// Whether an NCCL kernel is a point-to-point transfer (`SendRecv`, `Send`, `Recv`): it spins
/// until its peer arrives, and carries all-to-alls, rings and pipeline traffic alike.
pub fn is_point_to_point(kernel_name: &str) -> bool {
    POINT_TO_POINT.contains(&collective_name(kernel_name))
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

    fn label(rules: &RoleRules, text: &str, tier: Tier, p2p: bool) -> Option<String> {
        rules
            .purpose_of(text, tier, p2p)
            .map(|p| rules.label(p).to_string())
    }

    #[test]
    fn every_builtin_rule_names_its_example_and_only_its_kernels() {
        let rules = RoleRules::default();
        for b in BUILTIN {
            let first = BUILTIN
                .iter()
                .find(|o| o.tier == b.tier && Regex::new(o.pattern).unwrap().is_match(b.example));
            assert_eq!(
                first.map(|o| o.role),
                Some(b.role),
                "{} `{}`: its example is named by an earlier rule",
                b.framework,
                b.example
            );
            assert_eq!(
                label(&rules, b.example, b.tier, true).as_deref(),
                Some(b.role)
            );
            let other = label(&rules, b.example, b.tier, false);
            match b.kernels {
                Kernels::Any => assert_eq!(other.as_deref(), Some(b.role)),
                Kernels::P2p => assert_eq!(other, None, "{}", b.example),
            }
        }
    }

    #[test]
    fn builtin_rules_follow_pithtrains_needle_order() {
        let rules = RoleRules::default();
        let label = |text: &str| label(&rules, text, Tier::Framework, true);
        assert_eq!(label("layer03.stage2_f").as_deref(), Some("ep_a2a"));
        assert_eq!(label("layer03.stage4_b").as_deref(), Some("ep_a2a"));
        assert_eq!(
            label("layer05_stage5_f_layer06_stage1_f").as_deref(),
            Some("cp_ring")
        );
        assert_eq!(label("pipeline send/recv").as_deref(), Some("pp_p2p"));
        assert_eq!(label("layer03.stage3_w"), None);
        assert_eq!(label("Layer03.Stage2_F"), None, "case-sensitive");
        assert_eq!(label("AllToAll4D, seq = 45440, op_id = 990760"), None);
        assert_eq!(label("FSDP::all_gather_copy_out (layers.0)"), None);
        assert_eq!(
            label("FSDP::all_gather (layers.0)").as_deref(),
            Some("fsdp_ag")
        );
    }

    #[test]
    fn user_rules_come_first_and_reserved_roles_are_refused() {
        let rules = RoleRules::new(&[UserRule::new("stage2", "dispatch")]).unwrap();
        assert_eq!(
            label(&rules, "layer01.stage2_f", Tier::User, false).as_deref(),
            Some("dispatch")
        );
        assert_eq!(label(&rules, "layer01.stage4_f", Tier::User, true), None);
        for reserved in ["compute", "p2p", "nccl:AllReduce", " "] {
            assert!(RoleRules::new(&[UserRule::new("x", reserved)]).is_err());
        }
        assert!(
            RoleRules::new(&[UserRule::new("(", "ep")])
                .unwrap_err()
                .contains("rule 1")
        );
    }

    #[test]
    fn collectives_come_from_kernel_names() {
        let rules = RoleRules::default();
        let c = |name: &str| rules.label(rules.by_name(name, name)).to_string();
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
        assert!(is_point_to_point(
            "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
        ));
        assert!(is_point_to_point(
            "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"
        ));
        assert!(!is_point_to_point(
            "ncclDevKernel_AllReduce_Sum_u32_RING_LL"
        ));
        assert!(!is_point_to_point("ncclDevKernel_Generic_1"));
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
