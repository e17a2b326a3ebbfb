//! Kernel families: which kind of work each GPU operation is (GEMM by precision, attention
//! forward and backward, normalization, reduction, elementwise and fusions, optimizer,
//! embedding and gather, MoE routing, NCCL by collective, memcpy, memset, other). The built-in
//! table is data, `taxonomy.toml` beside this file, each rule with a real kernel name and its
//! source; the rules of a `--families` file come first; first match wins, so every operation
//! belongs to exactly one family.
//!
//! ```toml
//! # families.toml: tried in file order, before the built-in rules
//! [[family]]
//! name = "moe_permute"
//! pattern = "(?i)permute|unpermute"   # a regex on the kernel's short name
//! ```

use super::comm::is_comm;
use super::rules::RoleRules;
use crate::hash::FxHashMap;
use crate::model::{StringId, Timeline};
use regex::Regex;
use std::path::Path;
use std::sync::LazyLock;

/// The family of memory copies.
pub const MEMCPY: &str = "memcpy";
/// A copy between GPUs, until its communication role names it (as a transfer kernel's does).
pub const MEMCPY_PEER: &str = "memcpy_peer";
/// The family of memory sets.
pub const MEMSET: &str = "memset";
/// The family of CUDA graph launches traced as a whole (their kernels are not listed).
pub const CUDA_GRAPH: &str = "cuda_graph";
/// Kernels no rule names.
pub const OTHER: &str = "other";
/// The taxonomy's family of matrix products, named with the precision found
/// (`gemm_fp8`, `gemm_bf16_fp16`, `gemm_fp32_tf32`, else [`GEMM_UNKNOWN`]).
const GEMM: &str = "gemm";
/// A matrix product whose name does not give its precision: the launching operator's inputs may
/// ([`super::precision`]).
pub const GEMM_UNKNOWN: &str = "gemm_unknown";

/// The built-in taxonomy's text.
const TAXONOMY: &str = include_str!("taxonomy.toml");

/// The built-in taxonomy, parsed once.
static BUILTIN: LazyLock<Taxonomy> =
    LazyLock::new(|| Taxonomy::parse(TAXONOMY).expect("the built-in taxonomy is valid"));

/// `taxonomy.toml` as written.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TaxonomyFile {
    rule: Vec<RuleEntry>,
    precision: Vec<PrecisionEntry>,
}

/// One `[[rule]]`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleEntry {
    family: String,
    short: Option<String>,
    name: Option<String>,
    example: String,
    source: String,
}

/// One `[[precision]]`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PrecisionEntry {
    precision: String,
    name: String,
    example: String,
    source: String,
}

/// A taxonomy rule, compiled.
#[derive(Debug)]
struct Rule {
    family: String,
    /// On the short name.
    short: Option<Regex>,
    /// On the full demangled name.
    name: Option<Regex>,
}

impl Rule {
    fn matches(&self, short: &str, name: &str) -> bool {
        self.short.as_ref().is_none_or(|r| r.is_match(short))
            && self.name.as_ref().is_none_or(|r| r.is_match(name))
    }
}

/// The built-in rules and GEMM precisions.
#[derive(Debug)]
struct Taxonomy {
    rules: Vec<Rule>,
    /// Precision, and its pattern on the full name.
    precisions: Vec<(String, Regex)>,
}

impl Taxonomy {
    fn parse(text: &str) -> Result<Taxonomy, String> {
        let file: TaxonomyFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let regex = |p: &str| Regex::new(p).map_err(|e| format!("`{p}`: {e}"));
        let cited = |what: &str, example: &str, source: &str| {
            let missing = example.trim().is_empty() || source.trim().is_empty();
            match missing {
                true => Err(format!(
                    "{what}: every rule names a real example and its source"
                )),
                false => Ok(()),
            }
        };
        let mut rules = Vec::new();
        for r in file.rule {
            cited(&r.family, &r.example, &r.source)?;
            if r.short.is_none() && r.name.is_none() {
                return Err(format!("rule for {}: neither short nor name", r.family));
            }
            rules.push(Rule {
                short: r.short.as_deref().map(regex).transpose()?,
                name: r.name.as_deref().map(regex).transpose()?,
                family: r.family,
            });
        }
        let mut precisions = Vec::new();
        for p in file.precision {
            cited(&p.precision, &p.example, &p.source)?;
            precisions.push((p.precision, regex(&p.name)?));
        }
        Ok(Taxonomy { rules, precisions })
    }

    /// The family of a kernel by its short and full names, if a rule names it.
    fn family(&self, short: &str, name: &str) -> Option<String> {
        let rule = self.rules.iter().find(|r| r.matches(short, name))?;
        if rule.family != GEMM {
            return Some(rule.family.clone());
        }
        let precision = self.precisions.iter().find(|(_, p)| p.is_match(name));
        Some(precision.map_or(GEMM_UNKNOWN.to_string(), |(p, _)| format!("{GEMM}_{p}")))
    }
}

/// The family rules: a user's, then NCCL's collectives, then the built-in taxonomy.
#[derive(Debug, Clone)]
pub struct Families {
    user: Vec<(String, Regex)>,
    roles: RoleRules,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FamilyFile {
    #[serde(default)]
    family: Vec<FamilyEntry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FamilyEntry {
    name: String,
    pattern: String,
}

impl Default for Families {
    fn default() -> Self {
        Families::new(&[]).expect("no user rule to refuse")
    }
}

impl Families {
    /// The built-in families after `user` ones (name, pattern on the short name).
    pub fn new(user: &[(&str, &str)]) -> Result<Families, String> {
        let mut rules = Vec::new();
        for (i, &(name, pattern)) in user.iter().enumerate() {
            let regex =
                super::rules::user_regex(pattern).map_err(|e| format!("family {}: {e}", i + 1))?;
            rules.push((name.to_string(), regex));
        }
        Ok(Families {
            user: rules,
            roles: RoleRules::default(),
        })
    }

    /// Reads a `--families` TOML file (`[[family]]` entries with `name` and `pattern`).
    pub fn from_file(path: &Path) -> anyhow::Result<Families> {
        let shown = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read the families file {shown}: {e}"))?;
        let file: FamilyFile = toml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("the families file {shown} is not valid: {e}"))?;
        let user: Vec<(&str, &str)> = file
            .family
            .iter()
            .map(|f| (f.name.as_str(), f.pattern.as_str()))
            .collect();
        Families::new(&user)
            .map_err(|e| anyhow::anyhow!("the families file {shown} is not valid: {e}"))
    }

    /// The family of a kernel by its short name and its full demangled name (the short name
    /// again where the trace has no other): user rules, `nccl:<Collective>`, then the built-in
    /// taxonomy, else [`OTHER`]. ROCm's code-object suffix `.kd` is not part of the name.
    pub fn of_kernel(&self, short: &str, name: &str) -> String {
        let short = short.strip_suffix(".kd").unwrap_or(short);
        let name = name.strip_suffix(".kd").unwrap_or(name);
        if let Some((family, _)) = self.user.iter().find(|(_, r)| r.is_match(short)) {
            return family.clone();
        }
        if is_comm(short, name) {
            return self
                .roles
                .label(self.roles.by_name(short, name))
                .to_string();
        }
        BUILTIN
            .family(short, name)
            .unwrap_or_else(|| OTHER.to_string())
    }
}

/// Family names per kernel, computed once per distinct (short name, full name).
pub struct FamilyCache<'a> {
    families: &'a Families,
    timeline: &'a Timeline,
    cache: FxHashMap<(StringId, StringId), String>,
}

impl<'a> FamilyCache<'a> {
    /// An empty cache.
    pub fn new(families: &'a Families, timeline: &'a Timeline) -> Self {
        FamilyCache {
            families,
            timeline,
            cache: FxHashMap::default(),
        }
    }

    /// The family of the kernel with this short name and full name.
    pub fn kernel(&mut self, short: StringId, name: StringId) -> &str {
        let (families, timeline) = (self.families, self.timeline);
        self.cache.entry((short, name)).or_insert_with(|| {
            let full = match timeline.text(name) {
                "" => timeline.text(short),
                text => text,
            };
            families.of_kernel(timeline.text(short), full)
        })
    }
}

/// Whether `family` is `name` or one of its group: `gemm` holds `gemm_bf16_fp16`, `nccl` holds
/// `nccl:AllReduce` (what `--change family=gemm*F`, `--fail-if family:gemm...` and synth's
/// `--scale-family gemm=F` name).
pub fn in_group(name: &str, family: &str) -> bool {
    family
        .strip_prefix(name)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['_', ':']))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The short name of a full demangled name, as the Kineto translation makes it.
    fn short(name: &str) -> &str {
        crate::input::export::short_name(name)
    }

    /// Every rule's example lands in the rule's family through the whole table (so no earlier
    /// rule takes it), and every precision's example gives its GEMM family.
    #[test]
    fn a_name_holds_its_group() {
        assert!(in_group("gemm", "gemm_bf16_fp16"));
        assert!(in_group("gemm", "gemm"));
        assert!(!in_group("gemm", "gemmology"));
        assert!(in_group("nccl", "nccl:AllReduce"));
        assert!(!in_group("ep_a2a", "ep"));
    }

    #[test]
    fn every_rule_names_its_real_example() {
        let file: TaxonomyFile = toml::from_str(TAXONOMY).unwrap();
        let f = Families::default();
        for r in &file.rule {
            let got = f.of_kernel(short(&r.example), &r.example);
            if r.family == GEMM {
                assert!(got.starts_with("gemm_"), "{}: {got}", r.example);
            } else {
                assert_eq!(got, r.family, "{}", r.example);
            }
        }
        let mut by_name = Vec::new();
        for p in &file.precision {
            let got = f.of_kernel(short(&p.example), &p.example);
            assert_eq!(got, format!("gemm_{}", p.precision), "{}", p.example);
            by_name.push(got);
        }
        // The launching operator's evidence names the same families as the names do.
        assert_eq!(by_name, super::super::precision::GEMM_BY_PRECISION);
        assert!(
            file.rule.len() >= 20,
            "the table has {} rules",
            file.rule.len()
        );
    }

    #[test]
    fn attention_beats_gemm_and_names_without_precision_say_unknown() {
        let f = Families::default();
        let cases = [
            // FlashAttention 3 is a CUTLASS kernel: attention wins.
            (
                "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>>, 128, cutlass::bfloat16_t, float, cutlass::arch::Sm90>>>>(T1::Params)",
                "attention_fwd",
            ),
            ("fmha_cutlassB_f16_aligned_64x64_k64_sm80", "attention_bwd"),
            // cuBLASLt's nvjet names say nothing of the precision.
            (
                "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT",
                "gemm_unknown",
            ),
            ("gemm_fusion_dot_general_9", "gemm_unknown"),
            ("ampere_sgemm_128x64_tn", "gemm_fp32_tf32"),
            (
                "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_kernel__5x_cublas",
                "gemm_bf16_fp16",
            ),
            ("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn", "gemm_fp8"),
            ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "nccl:AllReduce"),
            ("vectorized_elementwise_kernel", "elementwise"),
            ("reduce_kernel", "reduction"),
            (
                "triton_per_fused_native_layer_norm_native_layer_norm_backward_2",
                "normalization",
            ),
            ("nvfuser_inner_persistent_f1_c1_r0_g2", "reduction"),
            ("loop_subtract_fusion_2", "elementwise"),
            // A custom all-reduce moves data between GPUs: not a reduction kernel.
            // Its role by name: tensor-parallel communication.
            ("cross_device_reduce_2stage", "tp_comm"),
            // TensorRT-LLM's MoE all-to-all is communication, not MoE routing.
            ("moeA2ACombineKernel", "ep_a2a"),
            // DeepEP's layout kernel counts tokens per rank: routing compute, not a transfer.
            (
                "void deep_ep::layout::get_dispatch_layout<(int)256, (int)32, (int)8>(const long *, int *, int *, int *, bool *, int, int, int, int)",
                "moe_routing",
            ),
            // ROCm's code objects end in `.kd` (rocprof, torch.profiler on ROCm).
            (
                "Cijk_Ailk_Bljk_BBS_BH_MT256x256x64_MI16x16x16x1_SN_1LDSB1_GRVW8_WG32_8_1.kd",
                "gemm_unknown",
            ),
            ("triton_poi_fused_add_0.kd", "elementwise"),
            ("Fan2", "other"),
        ];
        for (name, family) in cases {
            assert_eq!(f.of_kernel(short(name), name), family, "{name}");
        }
    }

    /// Two kernels whose full names are both empty (a damaged export) keep the families their
    /// short names give: the cache is keyed by both names.
    #[test]
    fn the_cache_tells_kernels_apart_by_short_name_too() {
        let mut timeline = Timeline::default();
        let empty = timeline.strings.intern("");
        let gemm = timeline.strings.intern("ampere_sgemm_128x64_tn");
        let reduce = timeline.strings.intern("reduce_kernel");
        let families = Families::default();
        let mut cache = FamilyCache::new(&families, &timeline);
        assert_eq!(cache.kernel(gemm, empty), "gemm_fp32_tf32");
        assert_eq!(cache.kernel(reduce, empty), "reduction");
    }

    #[test]
    fn user_families_come_first() {
        let f = Families::new(&[("my_gemm", "sgemm")]).unwrap();
        let name = "ampere_sgemm_128x64_tn";
        assert_eq!(f.of_kernel(name, name), "my_gemm");
        assert!(Families::new(&[("x", "(")]).is_err());
    }
}
