//! A kernel's work (floating-point operations, and the bytes its operator must move where the
//! inputs' types give them), from the operator that launched it. The operator's recorded inputs
//! ([`OperatorInputs`]: torch.profiler's `record_shapes=True`, or PyTorch's shape NVTX under
//! nsys) give the work of a matrix product, an attention or a convolution exactly. Counted
//! (multiply and add as two operations):
//!
//! | operator | inputs | FLOPs |
//! |---|---|---|
//! | `aten::mm`, `aten::_scaled_mm` | `[M, K]`, `[K, N]` | 2·M·N·K |
//! | `aten::addmm` | bias, `[M, K]`, `[K, N]` | 2·M·N·K |
//! | `aten::bmm` | `[B, M, K]`, `[B, K, N]` | 2·B·M·N·K |
//! | `aten::baddbmm` | bias, `[B, M, K]`, `[B, K, N]` | 2·B·M·N·K |
//! | `aten::matmul` (when no product is recorded inside) | `[..., M, K]`, `[K, N]` or `[..., K, N]` | 2·batch·M·N·K |
//! | `aten::linear` (when no product is recorded inside) | `[..., K]`, `[N, K]` | 2·rows·N·K |
//! | `aten::_grouped_mm`, `aten::_scaled_grouped_mm` | `[M, K]`·`[G, K, N]`, `[G, M, K]`·`[G, K, N]`, `[M, K]`·`[K, N]` (groups split K), `[G, M, K]`·`[K, N]` (groups split N) | 2·M·N·K (times G where both are 3-D) |
//! | `aten::_scaled_dot_product_{flash,efficient,cudnn}_attention` | q `[B, H, Sq, D]`, k `[B, H, Sk, D]` | 4·B·H·Sq·Sk·D, half when `is_causal` |
//! | their `_backward` | grad, q, k, ... | 2.5 × the forward's |
//! | `aten::convolution`, `aten::_convolution` | input `[N, C, ...]`, weight `[K, C/g, ...]`, stride, padding, dilation, transposed | 2·N·(weight's elements)·(output's positions; the input's when transposed) |
//! | `aten::convolution_backward` | grad_output, input, weight, ..., output_mask | the forward's, once per gradient asked for (input, weight) |
//!
//! The innermost counted operator around a launch speaks for it, so `aten::linear` around
//! `aten::addmm` counts once. Arguments that are values, not tensors (a convolution's stride,
//! attention's `is_causal`), are read from torch.profiler's `Concrete Inputs`: a convolution
//! without them is not counted, and an attention without them counts as not causal. Not
//! counted: any other operator, and any without recorded shapes.
//!
//! Bytes are what the operator must read and write at least, each tensor once: its tensor
//! inputs and its output (at the first input's type), for the matrix products, the attention
//! forward and the convolution forward, when the source records the types (torch.profiler);
//! none otherwise.

use super::activity::Activity;
use super::inputs::OperatorInputs;
use super::operators::LaunchOperators;
use crate::model::ProcessId;

/// One operator's work.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Work {
    /// Floating-point operations.
    pub flops: f64,
    /// Bytes it reads and writes at least, when derivable.
    pub bytes: Option<f64>,
}

/// Per launch (correlation id) of one process: the counted operator that launched it and its
/// work.
#[derive(Debug)]
pub struct LaunchFlops(LaunchOperators<Work>);

impl LaunchFlops {
    /// The launches of `process` inside a counted operator with recorded shapes.
    pub fn new(activity: &Activity, process: ProcessId) -> LaunchFlops {
        LaunchFlops(LaunchOperators::new(activity, process, says))
    }

    /// [`LaunchFlops::new`] with no launch yet ([`LaunchOperators::ranges`]): calls are added
    /// with [`LaunchFlops::call`] (from a capture's sorted events).
    pub fn ranges(activity: &Activity, process: ProcessId) -> LaunchFlops {
        LaunchFlops(LaunchOperators::ranges(activity, process, says))
    }

    /// Whether any operator range records the shapes of a counted operator.
    pub fn speaks(&self) -> bool {
        self.0.speaks()
    }

    /// A call of the process, in start order.
    pub fn call(&mut self, call: &crate::model::ApiCall) {
        self.0.call(call);
    }

    /// The operator (an index, the same for every kernel it launched) and its work, for the
    /// GPU operation launched with this correlation id.
    pub fn of(&self, correlation: u32) -> Option<(u32, Work)> {
        self.0.of(correlation)
    }
}

/// The work an operator range (its text, and its payload where it has one) records.
fn says(text: &str, payload: &str) -> Option<Work> {
    if !payload.is_empty() && !counted(text) {
        return None;
    }
    let inputs = OperatorInputs::of(text, payload)?;
    counted(inputs.name).then(|| work(&inputs))?
}

/// Whether `name` is an operator whose work its inputs give.
fn counted(name: &str) -> bool {
    matches!(
        name,
        "aten::mm"
            | "aten::_scaled_mm"
            | "aten::addmm"
            | "aten::bmm"
            | "aten::baddbmm"
            | "aten::matmul"
            | "aten::linear"
            | "aten::_grouped_mm"
            | "aten::_scaled_grouped_mm"
            | "aten::convolution"
            | "aten::_convolution"
            | "aten::convolution_backward"
    ) || attention(name).is_some()
}

/// The work of an operator with these recorded inputs; None when they do not fit it.
fn work(inputs: &OperatorInputs) -> Option<Work> {
    let dims = &inputs.dims;
    match inputs.name {
        "aten::mm" | "aten::_scaled_mm" | "aten::bmm" => product(inputs, 0, &[]),
        "aten::addmm" | "aten::baddbmm" => product(inputs, 1, &[0]),
        "aten::matmul" => matmul(inputs),
        "aten::linear" => linear(inputs),
        "aten::_grouped_mm" | "aten::_scaled_grouped_mm" => {
            let flops = grouped(dims.first()?, dims.get(1)?)?;
            Some(Work { flops, bytes: None })
        }
        "aten::convolution" | "aten::_convolution" => convolution(inputs),
        "aten::convolution_backward" => convolution_backward(inputs),
        name => {
            let (causal_at, backward) = attention(name)?;
            attention_work(inputs, causal_at, backward)
        }
    }
}

/// A matrix product of inputs `at` and `at + 1` (`[M, K]`·`[K, N]` or batched
/// `[B, M, K]`·`[B, K, N]`), the inputs `also` read beside them (a bias).
fn product(inputs: &OperatorInputs, at: usize, also: &[usize]) -> Option<Work> {
    let (a, b) = (inputs.dims.get(at)?, inputs.dims.get(at + 1)?);
    let (batch, m, k, n) = match (a.as_slice(), b.as_slice()) {
        (&[m, k], &[k2, n]) if k == k2 => (1, m, k, n),
        (&[batch, m, k], &[b2, k2, n]) if k == k2 && batch == b2 => (batch, m, k, n),
        _ => return None,
    };
    let flops = 2.0 * batch as f64 * (m * n) as f64 * k as f64;
    let output = batch as f64 * (m * n) as f64;
    let mut read = vec![at, at + 1];
    read.extend_from_slice(also);
    Some(Work {
        flops,
        bytes: bytes(inputs, &read, output),
    })
}

/// `aten::matmul`: `[..., M, K]` times `[K, N]` or `[..., K, N]` with the same batch.
fn matmul(inputs: &OperatorInputs) -> Option<Work> {
    let (a, b) = (inputs.dims.first()?, inputs.dims.get(1)?);
    let (&[m, k], batch) = (a.get(a.len().checked_sub(2)?..)?, &a[..a.len() - 2]) else {
        return None;
    };
    let (&[k2, n], b_batch) = (b.get(b.len().checked_sub(2)?..)?, &b[..b.len() - 2]) else {
        return None;
    };
    if k != k2 || !(b_batch.is_empty() || b_batch == batch) {
        return None;
    }
    let rows = batch.iter().product::<i64>() as f64 * m as f64;
    Some(Work {
        flops: 2.0 * rows * n as f64 * k as f64,
        bytes: bytes(inputs, &[0, 1], rows * n as f64),
    })
}

/// `aten::linear`: `[..., K]` times the transpose of `[N, K]`, plus a bias `[N]`.
fn linear(inputs: &OperatorInputs) -> Option<Work> {
    let (input, weight) = (inputs.dims.first()?, inputs.dims.get(1)?);
    let (&k, rows) = input.split_last()?;
    let &[n, k2] = weight.as_slice() else {
        return None;
    };
    if k != k2 {
        return None;
    }
    let rows = rows.iter().product::<i64>() as f64;
    Some(Work {
        flops: 2.0 * rows * n as f64 * k as f64,
        bytes: bytes(inputs, &[0, 1, 2], rows * n as f64),
    })
}

/// A grouped matrix product's FLOPs (`torch._grouped_mm`): each row of the 2-D operand meets
/// one group's matrix, so the groups add up to one product of the summed size.
fn grouped(a: &[i64], b: &[i64]) -> Option<f64> {
    let f = |x: i64| x as f64;
    match (a, b) {
        // Rows split in groups, a matrix per group.
        (&[m, k], &[_, k2, n]) if k == k2 => Some(2.0 * f(m) * f(k) * f(n)),
        // A batch of products.
        (&[g, m, k], &[g2, k2, n]) if g == g2 && k == k2 => Some(2.0 * f(g) * f(m) * f(k) * f(n)),
        // The contraction split in groups (a weight gradient), one output per group.
        (&[m, k], &[k2, n]) if k == k2 => Some(2.0 * f(m) * f(k) * f(n)),
        // Columns split in groups.
        (&[_, m, k], &[k2, n]) if k == k2 => Some(2.0 * f(m) * f(k) * f(n)),
        _ => None,
    }
}

/// For a fused attention operator: where its `is_causal` argument is, and whether it is a
/// backward (PyTorch's schemas, native_functions.yaml).
fn attention(name: &str) -> Option<(usize, bool)> {
    match name.strip_prefix("aten::_scaled_dot_product_")? {
        "flash_attention" => Some((4, false)),
        "flash_attention_backward" => Some((11, true)),
        "efficient_attention" | "cudnn_attention" => Some((6, false)),
        "efficient_attention_backward" => Some((11, true)),
        "cudnn_attention_backward" => Some((14, true)),
        _ => None,
    }
}

/// A fused attention's work: its two products, 4·B·H·Sq·Sk·D, halved when causal; the
/// backward 2.5 times that.
fn attention_work(inputs: &OperatorInputs, causal_at: usize, backward: bool) -> Option<Work> {
    // The backward's first input is the output's gradient; q, k and v follow.
    let at = usize::from(backward);
    let (q, k) = (inputs.tensor(at, 4)?, inputs.tensor(at + 1, 4)?);
    let (&[b, h, sq, d], &[b2, _, sk, d2]) = (q, k) else {
        return None;
    };
    if b != b2 || d != d2 {
        return None;
    }
    let mut flops = 4.0 * (b * h) as f64 * (sq * sk) as f64 * d as f64;
    if inputs.value(causal_at) == Some("True") {
        flops /= 2.0;
    }
    if backward {
        return Some(Work {
            flops: 2.5 * flops,
            bytes: None,
        });
    }
    let dv = *inputs.tensor(2, 4)?.last()?;
    let output = (b * h) as f64 * sq as f64 * dv as f64;
    Some(Work {
        flops,
        bytes: bytes(inputs, &[0, 1, 2], output),
    })
}

/// `aten::convolution` (and `_convolution`): input, weight, bias, stride, padding, dilation,
/// transposed, output_padding, groups.
fn convolution(inputs: &OperatorInputs) -> Option<Work> {
    let (input, weight) = (inputs.dims.first()?, inputs.dims.get(1)?);
    let spatial = input.len().checked_sub(2).filter(|&s| s > 0)?;
    if weight.len() != input.len() {
        return None;
    }
    let transposed = flag(inputs.value(6)?)?;
    let per_dim = |i: usize| -> Option<Vec<i64>> {
        let v = inputs.ints(i)?;
        match v.len() {
            1 => Some(vec![v[0]; spatial]),
            n if n == spatial => Some(v),
            _ => None,
        }
    };
    let (stride, padding, dilation) = (per_dim(3)?, per_dim(4)?, per_dim(5)?);
    let out: Vec<i64> = (0..spatial)
        .map(|i| {
            let extent = dilation[i] * (weight[2 + i] - 1) + 1;
            (input[2 + i] + 2 * padding[i] - extent) / stride[i] + 1
        })
        .collect();
    if out.iter().any(|&o| o <= 0) {
        return None;
    }
    let positions = match transposed {
        true => &input[2..],
        false => &out[..],
    };
    let flops = conv_flops(input[0], weight, positions);
    let bytes = match transposed {
        true => None,
        false => {
            let output = (input[0] * weight[0]) as f64 * product_of(&out);
            bytes(inputs, &[0, 1, 2], output)
        }
    };
    Some(Work { flops, bytes })
}

/// `aten::convolution_backward`: grad_output, input, weight, bias_sizes, stride, padding,
/// dilation, transposed, output_padding, groups, output_mask. Each gradient asked for (the
/// input's, the weight's) costs the forward's FLOPs.
fn convolution_backward(inputs: &OperatorInputs) -> Option<Work> {
    let (grad, input, weight) = (
        inputs.dims.first()?,
        inputs.dims.get(1)?,
        inputs.dims.get(2)?,
    );
    if grad.len() < 3 || input.len() != grad.len() || weight.len() != grad.len() {
        return None;
    }
    let transposed = flag(inputs.value(7)?)?;
    let mask = inputs.value(10)?;
    let mask: Vec<bool> = mask
        .trim_matches(['[', ']'])
        .split(',')
        .map(|x| flag(x.trim()))
        .collect::<Option<_>>()?;
    let asked = mask.iter().take(2).filter(|&&m| m).count();
    let positions = match transposed {
        true => &input[2..],
        false => &grad[2..],
    };
    Some(Work {
        flops: asked as f64 * conv_flops(grad[0], weight, positions),
        bytes: None,
    })
}

/// A convolution's FLOPs: every weight meets every output position of every sample.
fn conv_flops(batch: i64, weight: &[i64], positions: &[i64]) -> f64 {
    2.0 * batch as f64 * product_of(weight) * product_of(positions)
}

/// A PyTorch boolean as printed (`True`, `False`).
fn flag(text: &str) -> Option<bool> {
    match text {
        "True" | "true" => Some(true),
        "False" | "false" => Some(false),
        _ => None,
    }
}

/// The product of a shape's dimensions.
fn product_of(dims: &[i64]) -> f64 {
    dims.iter().map(|&d| d as f64).product()
}

/// The bytes read from the tensor inputs `read` and written to an output of `output` elements
/// at the first input's type; None when a type is unknown.
fn bytes(inputs: &OperatorInputs, read: &[usize], output: f64) -> Option<f64> {
    let mut total = output * f64::from(inputs.element_bytes(read[0])?);
    for &i in read {
        match inputs.dims.get(i) {
            Some(d) if !d.is_empty() => {
                total += product_of(d) * f64::from(inputs.element_bytes(i)?);
            }
            _ => {}
        }
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(name: &'static str, dims: &[&[i64]]) -> OperatorInputs<'static> {
        OperatorInputs {
            name,
            dims: dims.iter().map(|d| d.to_vec()).collect(),
            ..OperatorInputs::default()
        }
    }

    fn flops(name: &'static str, dims: &[&[i64]]) -> Option<f64> {
        work(&inputs(name, dims)).map(|w| w.flops)
    }

    /// Inputs with types and values, as torch.profiler records them.
    fn recorded(
        name: &'static str,
        dims: &[&[i64]],
        types: &[&str],
        concrete: &[&str],
    ) -> OperatorInputs<'static> {
        OperatorInputs {
            types: types.iter().map(|t| t.to_string()).collect(),
            concrete: concrete.iter().map(|c| c.to_string()).collect(),
            ..inputs(name, dims)
        }
    }

    #[test]
    fn matrix_products_count_two_flops_per_multiply_add() {
        // The real H200 eager trace's first forward GEMM and a backward one.
        let addmm: &[&[i64]] = &[&[8192], &[4096, 2048], &[2048, 8192], &[], &[]];
        assert_eq!(
            flops("aten::addmm", addmm),
            Some(2.0 * 4096.0 * 8192.0 * 2048.0)
        );
        let mm: &[&[i64]] = &[&[2048, 4096], &[4096, 8192]];
        assert_eq!(flops("aten::mm", mm), Some(2.0 * 2048.0 * 8192.0 * 4096.0));
        let bmm: &[&[i64]] = &[&[8, 128, 64], &[8, 64, 32]];
        assert_eq!(
            flops("aten::bmm", bmm),
            Some(2.0 * 8.0 * 128.0 * 32.0 * 64.0)
        );
        let linear: &[&[i64]] = &[&[4, 1024, 2048], &[8192, 2048], &[8192]];
        let want = 2.0 * 4096.0 * 8192.0 * 2048.0;
        assert_eq!(flops("aten::linear", linear), Some(want));
        let matmul: &[&[i64]] = &[&[4, 1024, 2048], &[2048, 8192]];
        assert_eq!(flops("aten::matmul", matmul), Some(want));
        // Shapes that do not multiply are not counted.
        assert_eq!(flops("aten::mm", &[&[4, 5], &[6, 7]]), None);
        assert_eq!(flops("aten::matmul", &[&[4], &[4]]), None);
        assert_eq!(flops("aten::add", mm), None);
    }

    #[test]
    fn bytes_are_the_inputs_and_the_output_once_at_their_types() {
        // aten::addmm of the real H200 eager trace: bias, x and w^T in bf16.
        let addmm = recorded(
            "aten::addmm",
            &[&[8192], &[4096, 2048], &[2048, 8192], &[], &[]],
            &["c10::BFloat16"; 3],
            &[],
        );
        let elements = 8192.0 + 4096.0 * 2048.0 + 2048.0 * 8192.0 + 4096.0 * 8192.0;
        assert_eq!(work(&addmm).unwrap().bytes, Some(2.0 * elements));
        // Without types (PyTorch's shape NVTX) there are FLOPs but no bytes.
        let untyped = inputs("aten::mm", &[&[4096, 2048], &[2048, 8192]]);
        assert_eq!(work(&untyped).unwrap().bytes, None);
    }

    #[test]
    fn grouped_products_add_up_to_one_of_the_summed_size() {
        // torch._grouped_mm's forward, input gradient and weight gradient for 2 experts,
        // M = 4 tokens, K = 16, N = 32, as in PyTorch's grouped GEMM walkthrough.
        let want = 2.0 * 4.0 * 16.0 * 32.0;
        assert_eq!(
            flops("aten::_grouped_mm", &[&[4, 16], &[2, 16, 32], &[2]]),
            Some(want)
        );
        assert_eq!(
            flops("aten::_grouped_mm", &[&[4, 32], &[2, 32, 16], &[2]]),
            Some(want)
        );
        assert_eq!(
            flops("aten::_grouped_mm", &[&[32, 4], &[4, 16], &[2]]),
            Some(want)
        );
        // A batch of 2 products of [4, 16]·[16, 32].
        assert_eq!(
            flops("aten::_grouped_mm", &[&[2, 4, 16], &[2, 16, 32]]),
            Some(2.0 * want)
        );
        assert_eq!(flops("aten::_grouped_mm", &[&[4, 16], &[2, 8, 32]]), None);
    }

    #[test]
    fn attention_counts_its_two_products_and_the_backward_two_and_a_half_times() {
        let q: &[i64] = &[2, 16, 1024, 128];
        let forward = 4.0 * 2.0 * 16.0 * 1024.0 * 1024.0 * 128.0;
        let name = "aten::_scaled_dot_product_flash_attention";
        assert_eq!(flops(name, &[q, q, q]), Some(forward));
        let backward = "aten::_scaled_dot_product_flash_attention_backward";
        assert_eq!(flops(backward, &[q, q, q, q]), Some(2.5 * forward));
        assert!(counted(name) && counted(backward) && !counted("aten::add"));
    }

    #[test]
    fn a_causal_attention_counts_half() {
        // is_causal is the flash forward's 5th argument, the efficient and cuDNN forwards'
        // 7th, the flash and efficient backwards' 12th, the cuDNN backward's 15th.
        let q: &[i64] = &[1, 8, 512, 64];
        let full = 4.0 * 8.0 * 512.0 * 512.0 * 64.0;
        let cases = [
            ("aten::_scaled_dot_product_flash_attention", 4, 0, 1.0),
            ("aten::_scaled_dot_product_efficient_attention", 6, 0, 1.0),
            ("aten::_scaled_dot_product_cudnn_attention", 6, 0, 1.0),
            (
                "aten::_scaled_dot_product_flash_attention_backward",
                11,
                1,
                2.5,
            ),
            (
                "aten::_scaled_dot_product_efficient_attention_backward",
                11,
                1,
                2.5,
            ),
            (
                "aten::_scaled_dot_product_cudnn_attention_backward",
                14,
                1,
                2.5,
            ),
        ];
        for (name, causal_at, grad, scale) in cases {
            let dims: Vec<&[i64]> = vec![q; 3 + grad];
            let mut concrete = vec![""; causal_at + 1];
            concrete[causal_at] = "True";
            let causal = recorded(name, &dims, &[], &concrete);
            assert_eq!(work(&causal).map(|w| w.flops), Some(scale * full / 2.0));
            concrete[causal_at] = "False";
            let not = recorded(name, &dims, &[], &concrete);
            assert_eq!(work(&not).map(|w| w.flops), Some(scale * full), "{name}");
        }
    }

    #[test]
    fn a_convolution_counts_every_weight_at_every_output_position() {
        // ResNet's first layer: 3x224x224 input, 64 filters of 7x7, stride 2, padding 3:
        // output 112x112.
        let types = ["float"; 3];
        let concrete = [
            "", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "False", "[0, 0]", "1",
        ];
        let conv = recorded(
            "aten::convolution",
            &[&[32, 3, 224, 224], &[64, 3, 7, 7], &[64]],
            &types,
            &concrete,
        );
        let want = 2.0 * 32.0 * (64.0 * 3.0 * 49.0) * (112.0 * 112.0);
        let w = work(&conv).unwrap();
        assert_eq!(w.flops, want);
        let elements =
            32.0 * 3.0 * 224.0 * 224.0 + 64.0 * 147.0 + 64.0 + 32.0 * 64.0 * 112.0 * 112.0;
        assert_eq!(w.bytes, Some(4.0 * elements));
        // The backward, both gradients asked for: twice the forward, no values needed for
        // the output's positions (the gradient's shape gives them).
        let mask = "[True, True, False]";
        let backward = recorded(
            "aten::convolution_backward",
            &[&[32, 64, 112, 112], &[32, 3, 224, 224], &[64, 3, 7, 7]],
            &[],
            &[
                "", "", "", "[64]", "[2, 2]", "[3, 3]", "[1, 1]", "False", "[0, 0]", "1", mask,
            ],
        );
        assert_eq!(work(&backward).map(|w| w.flops), Some(2.0 * want));
        // Without values (PyTorch's shape NVTX) a convolution is not counted.
        let bare = inputs("aten::convolution", &[&[32, 3, 224, 224], &[64, 3, 7, 7]]);
        assert_eq!(work(&bare), None);
    }
}
