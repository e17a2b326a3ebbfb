//! A GEMM's precision from the operator that launched it, where the kernel's name does not say
//! it (cuBLASLt's `nvjet_*`, Triton's templates): torch.profiler's `record_shapes=True` records
//! each operator's `Input type` (`c10::BFloat16`, `float`, `c10::Float8_e4m3fn`, ...), which the
//! Kineto reader keeps as its range's payload. The innermost operator around the launch whose
//! inputs name a floating-point type decides: the narrowest type among its inputs (an FP8 GEMM
//! takes FP32 scales beside its FP8 operands). Nothing else is guessed: without such a record
//! the family stays `gemm_unknown`.

use super::activity::Activity;
use super::operators::LaunchOperators;
use crate::model::{ApiCall, ProcessId};

/// The GEMM families the evidence gives, narrowest first (the taxonomy's precision names).
pub const GEMM_BY_PRECISION: [&str; 3] = ["gemm_fp8", "gemm_bf16_fp16", "gemm_fp32_tf32"];

/// The payload field that lists an operator's input types.
const INPUT_TYPE: &str = "Input type";

/// Per launch (correlation id) of one process, the GEMM family its launching operator's inputs
/// give.
#[derive(Debug)]
pub struct LaunchPrecisions(LaunchOperators<&'static str>);

impl LaunchPrecisions {
    /// The launches of `process` inside an operator range whose inputs name a precision.
    pub fn new(activity: &Activity, process: ProcessId) -> LaunchPrecisions {
        LaunchPrecisions(LaunchOperators::new(activity, process, precision_of))
    }

    /// [`LaunchPrecisions::new`] with no launch yet ([`LaunchOperators::ranges`]): calls are
    /// added with [`LaunchPrecisions::call`].
    pub fn ranges(activity: &Activity, process: ProcessId) -> LaunchPrecisions {
        LaunchPrecisions(LaunchOperators::ranges(activity, process, precision_of))
    }

    /// Whether any operator range names a precision (no call needs adding otherwise).
    pub fn speaks(&self) -> bool {
        self.0.speaks()
    }

    /// A call of the process, in start order.
    pub fn call(&mut self, call: &ApiCall) {
        self.0.call(call);
    }

    /// The GEMM family of the kernel launched with this correlation id, when evidence gives it.
    pub fn of(&self, correlation: u32) -> Option<&'static str> {
        self.0.of(correlation).map(|(_, family)| family)
    }
}

/// What an operator range says of its launches' precision: its payload's input types (each
/// distinct text and payload is read once, by [`LaunchOperators`]).
fn precision_of(_: &str, payload: &str) -> Option<&'static str> {
    match payload {
        "" => None,
        payload => family_of(payload),
    }
}

/// The GEMM family an operator payload's input types give: the narrowest floating-point type.
fn family_of(payload: &str) -> Option<&'static str> {
    let value: serde_json::Value = serde_json::from_str(payload).ok()?;
    value
        .get(INPUT_TYPE)?
        .as_array()?
        .iter()
        .filter_map(|t| precision_rank(t.as_str()?))
        .min()
        .map(|rank| GEMM_BY_PRECISION[rank])
}

/// A PyTorch type's place in [`GEMM_BY_PRECISION`]; None for a type that is not a GEMM
/// operand's (integers, doubles, scalars, lists).
fn precision_rank(dtype: &str) -> Option<usize> {
    let name = dtype.strip_prefix("c10::").unwrap_or(dtype);
    match name {
        n if n.starts_with("Float8") => Some(0),
        "BFloat16" | "Half" => Some(1),
        "float" | "Float" => Some(2),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_narrowest_input_type_names_the_precision() {
        // aten::addmm and aten::mm of the real H200 eager trace; an FP8 scaled GEMM's
        // operands with their FP32 scales; an operator without floating-point inputs.
        let addmm = r#"{"Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"]}"#;
        assert_eq!(family_of(addmm), Some("gemm_bf16_fp16"));
        let fp8 =
            r#"{"Input type": ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float"]}"#;
        assert_eq!(family_of(fp8), Some("gemm_fp8"));
        assert_eq!(
            family_of(r#"{"Input type": ["float", "double"]}"#),
            Some("gemm_fp32_tf32")
        );
        assert_eq!(
            family_of(r#"{"Input type": ["TensorList", "long int"]}"#),
            None
        );
        assert_eq!(family_of("not json"), None);
    }
}
