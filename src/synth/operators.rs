//! The ATen operators around the simulator's GEMM and attention launches, with the inputs
//! PyTorch records of them (`record_shapes=True` in torch.profiler, the shape NVTX under nsys):
//! an `aten::mm` around each GEMM, `aten::_scaled_dot_product_flash_attention` (and its
//! `_backward`) around each FlashAttention kernel. The shapes are those whose work would take
//! the kernel's time without faults at 400 TFLOP/s, so a fault slows a kernel, not its work;
//! their FLOPs are computed here from the shapes, as the formulas define them, for truth.json.

use super::kernels::KernelKind;

/// The work a kernel would do per ns: 400 TFLOP/s.
const FLOPS_PER_NS: f64 = 400e3;
/// Attention's heads and head dimension (batch 1).
const HEADS: i64 = 16;
const HEAD_DIM: i64 = 128;

/// One operator the simulator placed around a launch.
#[derive(Debug, Clone, PartialEq)]
pub struct Operator {
    /// The launch's correlation id.
    pub correlation: u32,
    /// When the launch call started, ns.
    pub launch: i64,
    /// When the kernel started, ns.
    pub start: i64,
    /// What PyTorch records of it.
    pub shapes: Shapes,
}

/// An operator's name and recorded inputs, and its FLOPs.
#[derive(Debug, Clone, PartialEq)]
pub struct Shapes {
    /// The ATen operator.
    pub name: &'static str,
    /// Each input's shape (`[]` for a non-tensor).
    pub dims: Vec<Vec<i64>>,
    /// Each input's type (`Input type`).
    pub types: Vec<&'static str>,
    /// Each argument's value as PyTorch prints it (`Concrete Inputs`; empty for tensors).
    pub values: Vec<&'static str>,
    /// Its FLOPs: 2·M·N·K for a product; 4·B·H·S²·D for attention, 2.5 times that backward.
    pub flops: i64,
}

impl Shapes {
    /// The operator around a kernel of `kind` (one of the simulator's own kinds, before a name
    /// set renames it) that takes `ns` without faults; None for kinds no counted operator
    /// launches.
    pub fn of(kind: &KernelKind, ns: i64) -> Option<Shapes> {
        let work = ns as f64 * FLOPS_PER_NS;
        match kind.family {
            "gemm_bf16_fp16" => Some(mm(work, "c10::BFloat16")),
            "gemm_fp32_tf32" => Some(mm(work, "float")),
            "attention_fwd" => Some(attention(work, false)),
            "attention_bwd" => Some(attention(work, true)),
            _ => None,
        }
    }
}

/// `aten::mm` of `[[4096, K], [K, 4096]]` doing about `work` FLOPs (K a multiple of 64).
fn mm(work: f64, dtype: &'static str) -> Shapes {
    const SIDE: i64 = 4096;
    let k = ((work / (2.0 * (SIDE * SIDE) as f64) / 64.0).round() as i64).max(1) * 64;
    Shapes {
        name: "aten::mm",
        dims: vec![vec![SIDE, k], vec![k, SIDE]],
        types: vec![dtype; 2],
        values: vec![""; 2],
        flops: 2 * SIDE * SIDE * k,
    }
}

/// FlashAttention through PyTorch's SDPA, not causal, with q, k and v of `[1, 16, S, 128]`
/// doing about `work` FLOPs (S a multiple of 64), in its schema's argument order
/// (native_functions.yaml).
fn attention(work: f64, backward: bool) -> Shapes {
    // Forward 4·H·S²·D; backward 2.5 times that (10·H·S²·D).
    let per_s2 = if backward { 10 } else { 4 } * HEADS * HEAD_DIM;
    let s = ((work / per_s2 as f64).sqrt() / 64.0).round().max(1.0) as i64 * 64;
    let qkv = vec![1, HEADS, s, HEAD_DIM];
    let bf16 = "c10::BFloat16";
    let (name, dims, types, values) = match backward {
        // grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k,
        // dropout_p, is_causal, philox_seed, philox_offset, scale.
        true => (
            "aten::_scaled_dot_product_flash_attention_backward",
            [
                vec![qkv.clone(); 5],
                vec![vec![1, HEADS, s]],
                vec![vec![]; 9],
            ]
            .concat(),
            [
                vec![bf16; 5],
                vec!["float"],
                vec![""; 4],
                vec!["Scalar"; 2],
                vec![""; 3],
            ]
            .concat(),
            [vec![""; 10], vec!["0.", "False"], vec![""; 3]].concat(),
        ),
        // query, key, value, dropout_p, is_causal, return_debug_mask, scale.
        false => (
            "aten::_scaled_dot_product_flash_attention",
            [vec![qkv.clone(); 3], vec![vec![]; 4]].concat(),
            [vec![bf16; 3], vec!["Scalar"; 3], vec![""]].concat(),
            [vec![""; 3], vec!["0.", "False", "False", ""]].concat(),
        ),
    };
    Shapes {
        name,
        dims,
        types,
        values,
        flops: per_s2 * s * s,
    }
}

impl Operator {
    /// PyTorch's shape NVTX text for it (`getNvtxStr`: name, sequence number, op id, sizes).
    pub fn nvtx(&self) -> String {
        let sizes: Vec<String> = (self.shapes.dims.iter())
            .map(|d| {
                let d: Vec<String> = d.iter().map(i64::to_string).collect();
                format!("[{}]", d.join(", "))
            })
            .collect();
        let (name, seq) = (self.shapes.name, self.correlation);
        format!(
            "{name}, seq = {seq}, op_id = {seq}, sizes = [{}]",
            sizes.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::kernels::{FLASH_BWD, FLASH_FWD, GEMM_BF16};

    #[test]
    fn shapes_do_the_work_of_the_kernel_s_time_at_400_tflops() {
        // 1 ms at 400 TFLOP/s is 4e14 FLOPs; the shapes round it to their multiples of 64.
        for kind in [&GEMM_BF16, &FLASH_FWD, &FLASH_BWD] {
            let shapes = Shapes::of(kind, 1_000_000).unwrap();
            let off = (shapes.flops as f64 - 4e11).abs() / 4e11;
            assert!(off < 0.05, "{}: {}", shapes.name, shapes.flops);
            assert_eq!(shapes.dims.len(), shapes.types.len());
            assert_eq!(shapes.dims.len(), shapes.values.len());
        }
        let operator = Operator {
            correlation: 7,
            launch: 0,
            start: 0,
            shapes: Shapes::of(&GEMM_BF16, 1_000_000).unwrap(),
        };
        assert_eq!(
            operator.nvtx(),
            "aten::mm, seq = 7, op_id = 7, sizes = [[4096, 11904], [11904, 4096]]"
        );
    }
}
