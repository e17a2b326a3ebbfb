//! A kernel's floating-point operations, from the operator that launched it: torch.profiler's
//! `record_shapes=True` records each ATen operator's `Input Dims`, which give the work of a
//! matrix product or an attention exactly. Counted (multiply and add as two operations):
//!
//! | operator | inputs | FLOPs |
//! |---|---|---|
//! | `aten::mm`, `aten::_scaled_mm` | `[M, K]`, `[K, N]` | 2·M·N·K |
//! | `aten::addmm` | bias, `[M, K]`, `[K, N]` | 2·M·N·K |
//! | `aten::bmm` | `[B, M, K]`, `[B, K, N]` | 2·B·M·N·K |
//! | `aten::baddbmm` | bias, `[B, M, K]`, `[B, K, N]` | 2·B·M·N·K |
//! | `aten::linear` (when no `mm` inside recorded) | `[..., K]`, `[N, K]` | 2·rows·N·K |
//! | `aten::_scaled_dot_product_{flash,efficient,cudnn}_attention` | q `[B, H, Sq, D]`, k `[B, H, Sk, D]` | 4·B·H·Sq·Sk·D |
//! | their `_backward` | grad, q, k, ... | 2.5 × the forward's |
//!
//! The innermost counted operator around a launch speaks for it, so `aten::linear` around
//! `aten::addmm` counts once. Not counted: convolutions, grouped GEMMs, causal masks (the
//! recorded inputs do not say whether attention was causal: a causal attention's FLOPs are
//! half those counted), and any operator without recorded shapes.

use super::activity::Activity;
use super::operators::LaunchOperators;
use crate::model::ProcessId;

/// Per launch (correlation id) of one process: the counted operator that launched it and its
/// FLOPs.
#[derive(Debug)]
pub struct LaunchFlops(LaunchOperators<f64>);

impl LaunchFlops {
    /// The launches of `process` inside a counted operator with recorded shapes.
    pub fn new(activity: &Activity, process: ProcessId) -> LaunchFlops {
        LaunchFlops(LaunchOperators::new(activity, process, |name, payload| {
            if !counted(name) {
                return None;
            }
            let value: serde_json::Value = serde_json::from_str(payload).ok()?;
            let dims: Vec<Vec<i64>> =
                serde_json::from_value(value.get("Input Dims")?.clone()).ok()?;
            flops(name, &dims)
        }))
    }

    /// The operator (an index, the same for every kernel it launched) and its FLOPs, for the
    /// GPU operation launched with this correlation id.
    pub fn of(&self, correlation: u32) -> Option<(u32, f64)> {
        self.0.of(correlation)
    }
}

/// Whether `name` is an operator whose FLOPs its shapes give.
fn counted(name: &str) -> bool {
    matches!(
        name,
        "aten::mm"
            | "aten::_scaled_mm"
            | "aten::addmm"
            | "aten::bmm"
            | "aten::baddbmm"
            | "aten::linear"
    ) || name.starts_with("aten::_scaled_dot_product_") && name.contains("attention")
}

/// The FLOPs of operator `name` with input shapes `dims`; None when they do not fit it.
pub fn flops(name: &str, dims: &[Vec<i64>]) -> Option<f64> {
    let product = |d: &[i64]| d.iter().map(|&x| x as f64).product::<f64>();
    let matmul = |a: &[i64], b: &[i64]| -> Option<f64> {
        match (a, b) {
            (&[m, k], &[k2, n]) if k == k2 => Some(2.0 * (m * n) as f64 * k as f64),
            (&[batch, m, k], &[b2, k2, n]) if k == k2 && batch == b2 => {
                Some(2.0 * batch as f64 * (m * n) as f64 * k as f64)
            }
            _ => None,
        }
    };
    match name {
        "aten::mm" | "aten::_scaled_mm" | "aten::bmm" => matmul(dims.first()?, dims.get(1)?),
        "aten::addmm" | "aten::baddbmm" => matmul(dims.get(1)?, dims.get(2)?),
        "aten::linear" => {
            let (input, weight) = (dims.first()?, dims.get(1)?);
            let (&k, rows) = input.split_last()?;
            match weight.as_slice() {
                &[n, k2] if k == k2 => Some(2.0 * product(rows) * n as f64 * k as f64),
                _ => None,
            }
        }
        attention => {
            let backward = attention.ends_with("_backward");
            // The backward's first input is the output's gradient; q and k follow.
            let at = usize::from(backward);
            let (q, k) = (dims.get(at)?, dims.get(at + 1)?);
            let forward = match (q.as_slice(), k.as_slice()) {
                (&[b, h, sq, d], &[b2, _, sk, d2]) if b == b2 && d == d2 => {
                    4.0 * (b * h) as f64 * (sq * sk) as f64 * d as f64
                }
                _ => return None,
            };
            Some(if backward { 2.5 * forward } else { forward })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_products_count_two_flops_per_multiply_add() {
        // The real H200 eager trace's first forward GEMM and a backward one.
        let addmm = [
            vec![8192],
            vec![4096, 2048],
            vec![2048, 8192],
            vec![],
            vec![],
        ];
        assert_eq!(
            flops("aten::addmm", &addmm),
            Some(2.0 * 4096.0 * 8192.0 * 2048.0)
        );
        let mm = [vec![2048, 4096], vec![4096, 8192]];
        assert_eq!(flops("aten::mm", &mm), Some(2.0 * 2048.0 * 8192.0 * 4096.0));
        let bmm = [vec![8, 128, 64], vec![8, 64, 32]];
        assert_eq!(
            flops("aten::bmm", &bmm),
            Some(2.0 * 8.0 * 128.0 * 32.0 * 64.0)
        );
        let linear = [vec![4, 1024, 2048], vec![8192, 2048], vec![8192]];
        assert_eq!(
            flops("aten::linear", &linear),
            Some(2.0 * 4096.0 * 8192.0 * 2048.0)
        );
        // Shapes that do not multiply are not counted.
        assert_eq!(flops("aten::mm", &[vec![4, 5], vec![6, 7]]), None);
    }

    #[test]
    fn attention_counts_its_two_products_and_the_backward_two_and_a_half_times() {
        let q = vec![2, 16, 1024, 128];
        let forward = 4.0 * 2.0 * 16.0 * 1024.0 * 1024.0 * 128.0;
        let name = "aten::_scaled_dot_product_flash_attention";
        assert_eq!(
            flops(name, &[q.clone(), q.clone(), q.clone()]),
            Some(forward)
        );
        let backward = format!("{name}_backward");
        let dims = [q.clone(), q.clone(), q.clone(), q.clone()];
        assert_eq!(flops(&backward, &dims), Some(2.5 * forward));
        assert!(counted(name) && counted(&backward) && !counted("aten::add"));
    }
}
