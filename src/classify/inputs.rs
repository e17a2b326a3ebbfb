//! What an operator range records of its inputs, from either source that records them:
//!
//! - torch.profiler with `record_shapes=True`: each ATen operator's `Input Dims`, `Input type`
//!   and `Concrete Inputs` (the values of its scalar and list arguments), which the Kineto
//!   reader keeps as the range's payload;
//! - PyTorch's NVTX under nsys (`nsys profile --pytorch=autograd-shapes-nvtx`, or
//!   `torch.autograd.profiler.emit_nvtx(record_shapes=True)`): the range's text is
//!   `aten::addmm, seq = 12, op_id = 345, sizes = [[8192], [4096, 2048], [2048, 8192], [], []],
//!   input_op_ids = [(340,0)]` (PyTorch's `getNvtxStr` and `shapesToStr`,
//!   torch/csrc/profiler/util.cpp): the shapes only, without types or values.
//!
//! An input that is not a tensor has empty dims (`[]`), as both sources write it.

use serde_json::Value;

/// The inputs one operator range records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OperatorInputs<'a> {
    /// The operator (`aten::addmm`).
    pub name: &'a str,
    /// Each input's shape, in argument order (empty for a non-tensor or undefined input).
    pub dims: Vec<Vec<i64>>,
    /// Each input's type (`c10::BFloat16`, `float`, `Scalar`), where the source records it.
    pub types: Vec<String>,
    /// Each scalar or list argument's value as PyTorch prints it (`True`, `[1, 1]`, `1`), empty
    /// for tensors, where the source records it.
    pub concrete: Vec<String>,
}

impl<'a> OperatorInputs<'a> {
    /// The inputs a range records: its payload's when it has one (torch.profiler), else the
    /// shapes in its text (PyTorch's shape NVTX); None when neither records any.
    pub fn of(text: &'a str, payload: &str) -> Option<OperatorInputs<'a>> {
        match payload {
            "" => OperatorInputs::from_nvtx(text),
            payload => OperatorInputs::from_payload(text, payload),
        }
    }

    /// The inputs in the text of a PyTorch shape NVTX range.
    pub fn from_nvtx(text: &'a str) -> Option<OperatorInputs<'a>> {
        const SIZES: &str = ", sizes = ";
        let at = text.find(SIZES)?;
        let name = text.split(", ").next()?;
        let sizes = &text[at + SIZES.len()..];
        let list = balanced(sizes)?;
        let value: Value = serde_json::from_str(list).ok()?;
        Some(OperatorInputs {
            name,
            dims: dims_of(&value)?,
            ..OperatorInputs::default()
        })
    }

    /// The inputs in a torch.profiler operator's payload (`{"Input Dims": ..., ...}`).
    pub fn from_payload(name: &'a str, payload: &str) -> Option<OperatorInputs<'a>> {
        let value: Value = serde_json::from_str(payload).ok()?;
        let texts = |field: &str| -> Vec<String> {
            let list = value.get(field).and_then(Value::as_array);
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            list.map_or_else(Vec::new, |l| l.iter().map(text).collect())
        };
        Some(OperatorInputs {
            name,
            dims: value.get("Input Dims").and_then(dims_of)?,
            types: texts("Input type"),
            concrete: texts("Concrete Inputs"),
        })
    }

    /// The shape of input `i`, when it is a tensor of `rank` dimensions.
    pub fn tensor(&self, i: usize, rank: usize) -> Option<&[i64]> {
        self.dims
            .get(i)
            .map(Vec::as_slice)
            .filter(|d| d.len() == rank)
    }

    /// The value of argument `i` as recorded (None where the source records no values).
    pub fn value(&self, i: usize) -> Option<&str> {
        self.concrete.get(i).map(String::as_str)
    }

    /// The integers of a list argument (`[1, 1]`), or of an integer argument as a list of one.
    pub fn ints(&self, i: usize) -> Option<Vec<i64>> {
        let text = self.value(i)?.trim();
        let inner = text
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .unwrap_or(text);
        inner
            .split(',')
            .map(|x| x.trim().parse().ok())
            .collect::<Option<Vec<i64>>>()
            .filter(|v| !v.is_empty())
    }

    /// The size in bytes of one element of input `i`, when its type is a known number type.
    pub fn element_bytes(&self, i: usize) -> Option<u32> {
        let dtype = self.types.get(i)?;
        let name = dtype.strip_prefix("c10::").unwrap_or(dtype);
        match name {
            n if n.starts_with("Float8") => Some(1),
            "BFloat16" | "Half" | "short int" => Some(2),
            "float" | "Float" | "int" => Some(4),
            "double" | "long int" => Some(8),
            "signed char" | "unsigned char" | "bool" => Some(1),
            _ => None,
        }
    }
}

/// Each element of a JSON list as a shape: a list of integers, or empty for anything else (a
/// scalar's `[]`, a nested list).
fn dims_of(value: &Value) -> Option<Vec<Vec<i64>>> {
    let shape = |v: &Value| -> Vec<i64> {
        let dims = v.as_array().map(|d| d.iter().map(Value::as_i64).collect());
        dims.and_then(|d: Option<Vec<i64>>| d).unwrap_or_default()
    };
    Some(value.as_array()?.iter().map(shape).collect())
}

/// The bracketed list at the start of `text` (`[[1, 2], []]` of `[[1, 2], []], input_op_ids`).
fn balanced(text: &str) -> Option<&str> {
    let mut depth = 0usize;
    for (i, b) in text.bytes().enumerate() {
        match b {
            b'[' => depth += 1,
            b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(&text[..=i]);
                }
            }
            _ if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pytorch_shape_nvtx_gives_the_name_and_the_shapes() {
        // The form PyTorch's getNvtxStr writes (seq, op_id, sizes, input_op_ids).
        let text = "aten::addmm, seq = 12, op_id = 345, sizes = [[8192], [4096, 2048], \
                    [2048, 8192], [], []], input_op_ids = [(340,0), (341,0)]";
        let inputs = OperatorInputs::of(text, "").unwrap();
        assert_eq!(inputs.name, "aten::addmm");
        assert_eq!(
            inputs.dims,
            vec![
                vec![8192],
                vec![4096, 2048],
                vec![2048, 8192],
                vec![],
                vec![]
            ]
        );
        assert!(inputs.types.is_empty() && inputs.value(3).is_none());
        // Without sequence numbers, and at the end of the text.
        let text = "aten::mm, sizes = [[4, 5], [5, 6]]";
        assert_eq!(OperatorInputs::of(text, "").unwrap().dims.len(), 2);
        // Ranges without shapes record nothing.
        assert_eq!(OperatorInputs::of("aten::mm, seq = 3", ""), None);
        assert_eq!(OperatorInputs::of("forward", ""), None);
        assert_eq!(OperatorInputs::of("x, sizes = [[1, 2]", ""), None);
    }

    #[test]
    fn a_torch_profiler_payload_gives_shapes_types_and_values() {
        // aten::native_layer_norm of the real H200 eager trace.
        let payload = r#"{"Input type": ["c10::BFloat16", "ScalarList", "c10::BFloat16",
            "c10::BFloat16", "Scalar"], "Input Dims": [[4096, 2048], [], [2048], [2048], []],
            "Concrete Inputs": ["", "[2048]", "", "", "1.0000000000000001e-05"]}"#;
        let inputs = OperatorInputs::of("aten::native_layer_norm", payload).unwrap();
        assert_eq!(inputs.tensor(0, 2), Some(&[4096, 2048][..]));
        assert_eq!(inputs.tensor(0, 3), None);
        assert_eq!(inputs.ints(1), Some(vec![2048]));
        assert_eq!(inputs.ints(0), None);
        assert_eq!(inputs.element_bytes(0), Some(2));
        assert_eq!(inputs.element_bytes(1), None);
        // A nested list (a TensorList's shapes) is not a shape; the others still are.
        let nested = r#"{"Input Dims": [[[1, 2], [3]], [4, 5]]}"#;
        let inputs = OperatorInputs::of("aten::cat", nested).unwrap();
        assert_eq!(inputs.dims, vec![vec![], vec![4, 5]]);
        assert_eq!(OperatorInputs::of("aten::mm", "not json"), None);
    }
}
