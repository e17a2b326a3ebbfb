//! Kernel families: which kind of work each GPU operation is (GEMM by precision, attention, NCCL
//! by collective, elementwise/reduction, memcpy, memset, other). The table is data: the
//! built-in rules after any rules of a `--families` file; first match wins, so every operation
//! belongs to exactly one family.
//!
//! ```toml
//! # families.toml: tried in file order, before the built-in rules
//! [[family]]
//! name = "moe_permute"
//! pattern = "(?i)permute|unpermute"   # a regex on the kernel's short name
//! ```

use super::rules::{RoleRules, is_nccl};
use crate::hash::FxHashMap;
use crate::model::{StringId, Timeline};
use regex::Regex;
use std::path::Path;

/// What marks a GEMM.
const GEMM: &str = r"(?i)gemm|cutlass|cublas|xmma|cijk_|matmul";

/// Built-in families: name, then patterns that must all match the short name.
const BUILTIN: &[(&str, &[&str])] = &[
    ("gemm_fp8", &[GEMM, r"(?i)e4m3|e5m2|fp8"]),
    (
        "gemm_bf16_fp16",
        &[GEMM, r"(?i)bf16|f16|fp16|h16|hgemm|half"],
    ),
    ("gemm_fp32_tf32", &[GEMM, r"(?i)f32|sgemm|tf32|fp32|float"]),
    ("gemm_other", &[GEMM]),
    ("attention", &[r"(?i)flash|fmha|sdpa|attention|attn"]),
    (
        "elementwise_reduction",
        &[
            r"(?i)elementwise|reduce|reduction|norm|softmax|vectorized|unrolled|copy|cat|gather|scatter|index|multi_tensor|adam|sgd",
        ],
    ),
];

/// The family of memory copies.
pub const MEMCPY: &str = "memcpy";
/// The family of memory sets.
pub const MEMSET: &str = "memset";
/// The family of CUDA graph launches traced as a whole (their kernels are not listed).
pub const CUDA_GRAPH: &str = "cuda_graph";
/// Kernels no rule names.
pub const OTHER: &str = "other";

/// The family rules.
#[derive(Debug, Clone)]
pub struct Families {
    rules: Vec<(String, Vec<Regex>)>,
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
        Families::new(&[]).expect("built-in families are valid")
    }
}

impl Families {
    /// The built-in families after `user` ones (name, pattern).
    pub fn new(user: &[(&str, &str)]) -> Result<Families, String> {
        let mut rules = Vec::new();
        for (i, &(name, pattern)) in user.iter().enumerate() {
            let regex = Regex::new(pattern)
                .map_err(|e| format!("family {}: bad pattern `{pattern}`: {e}", i + 1))?;
            rules.push((name.to_string(), vec![regex]));
        }
        for &(name, patterns) in BUILTIN {
            let regexes = patterns
                .iter()
                .map(|p| Regex::new(p).expect("valid regex"))
                .collect();
            rules.push((name.to_string(), regexes));
        }
        Ok(Families {
            rules,
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

    /// The family of a kernel short name: user rules, `nccl:<Collective>`, then built-ins.
    pub fn of_kernel(&self, name: &str) -> String {
        let user = self.rules.len() - BUILTIN.len();
        if let Some((family, _)) = self.rules[..user].iter().find(|(_, r)| r[0].is_match(name)) {
            return family.clone();
        }
        if is_nccl(name) {
            return self.roles.label(self.roles.collective(name)).to_string();
        }
        self.rules[user..]
            .iter()
            .find(|(_, patterns)| patterns.iter().all(|p| p.is_match(name)))
            .map_or(OTHER.to_string(), |(family, _)| family.clone())
    }
}

/// Family names per kernel short name, computed once per distinct name.
pub struct FamilyCache<'a> {
    families: &'a Families,
    timeline: &'a Timeline,
    cache: FxHashMap<StringId, String>,
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

    /// The family of the kernel with this short name.
    pub fn kernel(&mut self, short_name: StringId) -> &str {
        let (families, timeline) = (self.families, self.timeline);
        self.cache
            .entry(short_name)
            .or_insert_with(|| families.of_kernel(timeline.text(short_name)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_families_split_gemms_by_precision() {
        let f = Families::default();
        let cases = [
            (
                "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_kernel__5x_cublas",
                "gemm_bf16_fp16",
            ),
            ("ampere_sgemm_128x64_tn", "gemm_fp32_tf32"),
            (
                "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_kernel__5x_cublas",
                "gemm_fp32_tf32",
            ),
            ("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn", "gemm_fp8"),
            ("flash_fwd_kernel", "attention"),
            ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "nccl:AllReduce"),
            ("vectorized_elementwise_kernel", "elementwise_reduction"),
            ("mystery_kernel", "other"),
        ];
        for (name, family) in cases {
            assert_eq!(f.of_kernel(name), family, "{name}");
        }
    }

    #[test]
    fn user_families_come_first() {
        let f = Families::new(&[("my_gemm", "sgemm")]).unwrap();
        assert_eq!(f.of_kernel("ampere_sgemm_128x64_tn"), "my_gemm");
        assert!(Families::new(&[("x", "(")]).is_err());
    }
}
