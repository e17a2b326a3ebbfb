//! What NCCL's NVTX payloads say about its kernels (NCCL 2.23 and later attach an extended
//! payload to its API ranges: message size, reduction operation...; nsys exports it as JSON with
//! `--include-json=true`). As nsys2prv does, a payload belongs to the first kernel launch its
//! range holds (on its thread), and each field is one number per kernel: numbers as they are
//! (rounded), text by its rank among the field's texts in name order, from 1.
//!
//! The same payloads say what each collective call moved and among whom ([`CallArgs`]): NCCL's
//! `NCCL communicator ID` and `Message size [bytes]` (its communicator's `No. of ranks` from the
//! payload of its `ncclCommInitRank`), or the arguments torch.profiler records on
//! `record_param_comms` (`In`/`Out msg nelems`, `dtype`, `Group size`, `Process Group Name` and
//! `Ranks`), which the Kineto reader gives as a payload of NCCL's domain.

use super::activity::Activity;
use crate::hash::{FxHashMap, FxHasher};
use crate::model::{NvtxKind, ProcessId, StringId};
use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hasher;

/// The NCCL NVTX domain.
const NCCL_DOMAIN: &str = "NCCL";

/// Most fields kept (the first ones seen); more would crowd a kernel's records.
pub const MAX_FIELDS: usize = 8;

/// One payload field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Its name (nested objects' keys joined with `.`).
    pub name: String,
    /// For a text field, its texts by value (value = index + 1); None for a number field.
    pub labels: Option<Vec<String>>,
}

/// The payload fields of the NCCL kernels of some processes.
#[derive(Debug, Clone, Default)]
pub struct NcclPayloads {
    /// The fields, in the order first seen.
    pub fields: Vec<Field>,
    /// Per (process, correlation id of a launch): (field index, value) of its payload.
    by_launch: FxHashMap<(ProcessId, u32), Vec<(usize, u64)>>,
    /// Per (process, correlation id of a launch): what its payload says of its collective.
    args: FxHashMap<(ProcessId, u32), CallArgs>,
}

/// What a collective call's own records say of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CallArgs {
    /// Its communicator, the same on every member.
    pub communicator: Option<CommunicatorId>,
    /// How much it moves.
    pub size: Option<Size>,
    /// How many ranks its communicator has (PyTorch's `Group size`; NCCL's `No. of ranks`).
    pub ranks: Option<u32>,
}

/// A communicator as a record names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CommunicatorId {
    /// NCCL's communicator id (its `commHash`).
    Nccl(u64),
    /// A hash of PyTorch's process group name and ranks.
    ProcessGroup(u64),
}

/// A collective's size as a record gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// The larger of its input and output buffers, bytes (what nccl-tests calls the size):
    /// from PyTorch's element counts and data type.
    Buffer(u64),
    /// NCCL's `Message size [bytes]`: one rank's part for an all-gather, a reduce-scatter and an
    /// all-to-all (count × type size), the buffer for the others.
    NcclMessage(u64),
}

impl Size {
    /// The buffer size, bytes, of collective `op` (`nccl:AllGather`, ...) among `ranks`.
    pub fn buffer_bytes(self, op: &str, ranks: u32) -> u64 {
        match self {
            Size::Buffer(b) => b,
            Size::NcclMessage(m) if PER_RANK_MESSAGE.contains(&op) => m * u64::from(ranks),
            Size::NcclMessage(m) => m,
        }
    }
}

/// The collectives whose NCCL message size is one rank's part of the buffer.
const PER_RANK_MESSAGE: &[&str] = &["nccl:AllGather", "nccl:ReduceScatter", "nccl:AllToAll"];

/// A field's value as the JSON gave it.
#[derive(Debug, Clone, PartialEq)]
enum Raw {
    /// A whole number that fits 64 bits unsigned (a communicator id does not fit a double).
    Unsigned(u64),
    Number(f64),
    Text(String),
}

impl NcclPayloads {
    /// The payloads of the NCCL ranges of `processes`, each given to the first launch its range
    /// holds.
    pub fn new(activity: &Activity, processes: &[ProcessId]) -> NcclPayloads {
        let timeline = activity.timeline;
        let mut order: Vec<String> = Vec::new();
        let mut parsed: FxHashMap<StringId, Vec<(String, Raw)>> = FxHashMap::default();
        let mut found: Vec<((ProcessId, u32), StringId)> = Vec::new();
        for &process in processes {
            let calls: Vec<_> = activity
                .api_calls(process)
                .filter(|a| timeline.text(a.name).contains("LaunchKernel"))
                .collect();
            let ranges = activity.nvtx(process).filter(|n| {
                n.kind == NvtxKind::PushPop
                    && n.payload != StringId::EMPTY
                    && timeline.text(n.domain) == NCCL_DOMAIN
            });
            for n in ranges {
                let end = n.end.map_or(i64::MAX, |e| e.0);
                let first = calls.partition_point(|a| a.start < n.start);
                let launch = calls[first..]
                    .iter()
                    .take_while(|a| a.start.0 < end)
                    .find(|a| a.thread == n.thread);
                let fields = parsed
                    .entry(n.payload)
                    .or_insert_with(|| flatten(timeline.text(n.payload)));
                let Some(launch) = launch else { continue };
                for (name, _) in fields.iter() {
                    if !order.contains(name) && order.len() < MAX_FIELDS {
                        order.push(name.clone());
                    }
                }
                found.push(((process, launch.correlation), n.payload));
            }
        }
        let mut texts: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for fields in parsed.values() {
            for (name, raw) in fields {
                if let Raw::Text(t) = raw {
                    texts.entry(name).or_default().insert(t.clone());
                }
            }
        }
        let fields: Vec<Field> = order
            .iter()
            .map(|name| Field {
                name: name.clone(),
                labels: texts
                    .get(name.as_str())
                    .map(|set| set.iter().cloned().collect()),
            })
            .collect();
        let ranks_of = communicator_ranks(parsed.values());
        let mut by_launch = FxHashMap::default();
        let mut args = FxHashMap::default();
        for (launch, payload) in found {
            let mut call = call_args(&parsed[&payload]);
            call.ranks = call.ranks.or_else(|| match call.communicator? {
                CommunicatorId::Nccl(id) => ranks_of.get(&id).copied(),
                CommunicatorId::ProcessGroup(_) => None,
            });
            args.entry(launch).or_insert(call);
            let values = parsed[&payload]
                .iter()
                .filter_map(|(name, raw)| {
                    let i = fields.iter().position(|f| &f.name == name)?;
                    Some((i, value(&fields[i], raw)))
                })
                .collect();
            by_launch.entry(launch).or_insert(values);
        }
        NcclPayloads {
            fields,
            by_launch,
            args,
        }
    }

    /// What the payload of the launch with this correlation id says of its collective.
    pub fn args(&self, process: ProcessId, correlation: u32) -> CallArgs {
        self.args
            .get(&(process, correlation))
            .copied()
            .unwrap_or_default()
    }

    /// The (field index, value) pairs of the payload of the launch with this correlation id.
    pub fn of(&self, process: ProcessId, correlation: u32) -> &[(usize, u64)] {
        self.by_launch
            .get(&(process, correlation))
            .map_or(&[], Vec::as_slice)
    }
}

/// Each NCCL communicator's rank count, from the payloads that carry both (its
/// `ncclCommInitRank`'s).
fn communicator_ranks<'a>(
    payloads: impl Iterator<Item = &'a Vec<(String, Raw)>>,
) -> FxHashMap<u64, u32> {
    payloads
        .filter_map(|fields| {
            let get = |name| fields.iter().find(|(n, _)| n == name).map(|(_, r)| r);
            let id = unsigned(get(NCCL_COMMUNICATOR)?)?;
            let ranks = unsigned(get("No. of ranks")?)?;
            Some((id, u32::try_from(ranks).ok()?))
        })
        .collect()
}

/// NCCL's communicator id field.
const NCCL_COMMUNICATOR: &str = "NCCL communicator ID";

/// What one payload says of its collective: NCCL's fields, or PyTorch's `record_param_comms`.
fn call_args(fields: &[(String, Raw)]) -> CallArgs {
    let get = |name: &str| fields.iter().find(|(n, _)| n == name).map(|(_, r)| r);
    let number = |name: &str| get(name).and_then(unsigned);
    let text = |name: &str| match get(name) {
        Some(Raw::Text(t)) => Some(t.as_str()),
        _ => None,
    };
    if let Some(id) = number(NCCL_COMMUNICATOR) {
        return CallArgs {
            communicator: Some(CommunicatorId::Nccl(id)),
            size: number("Message size [bytes]").map(Size::NcclMessage),
            ranks: None,
        };
    }
    let elements = number("In msg nelems").max(number("Out msg nelems"));
    let size = elements
        .zip(text("dtype").and_then(dtype_bytes))
        .map(|(n, width)| Size::Buffer(n.saturating_mul(width)));
    let group = text("Process Group Name").map(|name| {
        let mut h = FxHasher::default();
        h.write(name.as_bytes());
        h.write_u8(0);
        h.write(text("Process Group Ranks").unwrap_or("").as_bytes());
        h.finish()
    });
    CallArgs {
        communicator: group.map(CommunicatorId::ProcessGroup),
        size,
        ranks: number("Group size").and_then(|n| u32::try_from(n).ok()),
    }
}

/// A whole, non-negative number.
fn unsigned(raw: &Raw) -> Option<u64> {
    match *raw {
        Raw::Unsigned(n) => Some(n),
        Raw::Number(n) if n >= 0.0 && n.fract() == 0.0 && n < u64::MAX as f64 => Some(n as u64),
        _ => None,
    }
}

/// The width in bytes of a PyTorch data type (`c10::ScalarType`'s names, as
/// `record_param_comms` writes them); None for one this does not know.
fn dtype_bytes(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "Byte" | "Char" | "Bool" | "QInt8" | "QUInt8" => 1,
        d if d.starts_with("Float8") || d.starts_with("Float4") => 1,
        "Short" | "Half" | "BFloat16" | "UInt16" => 2,
        "Int" | "Float" | "QInt32" | "UInt32" | "ComplexHalf" => 4,
        "Long" | "Double" | "ComplexFloat" | "UInt64" => 8,
        "ComplexDouble" => 16,
        _ => return None,
    })
}

/// A raw value as a number of its field: a number rounded (negative ones as 0), a text by its
/// rank, a number in a text field by its text's rank.
fn value(field: &Field, raw: &Raw) -> u64 {
    match (&field.labels, raw) {
        (None, Raw::Unsigned(n)) => *n,
        (None, Raw::Number(n)) => n.round().max(0.0) as u64,
        (Some(labels), raw) => {
            let text = match raw {
                Raw::Text(t) => t.clone(),
                Raw::Unsigned(n) => n.to_string(),
                Raw::Number(n) => n.to_string(),
            };
            labels
                .iter()
                .position(|l| *l == text)
                .map_or(0, |i| i as u64 + 1)
        }
        (None, Raw::Text(_)) => 0,
    }
}

/// The fields of a JSON object, in the object's order (keys of nested objects joined with `.`,
/// in name order); nothing when the text is not a JSON object.
fn flatten(json: &str) -> Vec<(String, Raw)> {
    let mut out = Vec::new();
    if let Ok(map) = serde_json::from_str::<indexmap::IndexMap<String, serde_json::Value>>(json) {
        for (key, value) in &map {
            walk(key, value, &mut out);
        }
    }
    out
}

fn walk(prefix: &str, value: &serde_json::Value, out: &mut Vec<(String, Raw)>) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let name = match prefix {
                    "" => key.clone(),
                    _ => format!("{prefix}.{key}"),
                };
                walk(&name, v, out);
            }
        }
        Value::Number(n) => {
            let raw = n
                .as_u64()
                .map_or_else(|| Raw::Number(n.as_f64().unwrap_or(0.0)), Raw::Unsigned);
            out.push((prefix.to_string(), raw));
        }
        Value::Bool(b) => out.push((prefix.to_string(), Raw::Number(f64::from(u8::from(*b))))),
        Value::String(s) => out.push((prefix.to_string(), Raw::Text(s.clone()))),
        Value::Null | Value::Array(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_fields_flatten_in_order() {
        let fields = flatten(r#"{"Message size [bytes]": 1048576, "op": {"name": "Sum"}}"#);
        assert_eq!(
            fields,
            vec![
                ("Message size [bytes]".into(), Raw::Unsigned(1_048_576)),
                ("op.name".into(), Raw::Text("Sum".into())),
            ]
        );
        assert!(flatten("12").is_empty());
    }

    #[test]
    fn nccls_payload_names_its_communicator_and_message() {
        // NCCL 2.23's all-gather payload (nvtx_payload_schemas.h): the id does not fit a double.
        let json =
            r#"{"NCCL communicator ID": 18446744073709551557, "Message size [bytes]": 4096}"#;
        let args = call_args(&flatten(json));
        let id = 18_446_744_073_709_551_557;
        assert_eq!(args.communicator, Some(CommunicatorId::Nccl(id)));
        assert_eq!(args.size, Some(Size::NcclMessage(4096)));
        let init = flatten(r#"{"NCCL communicator ID": 18446744073709551557, "No. of ranks": 8}"#);
        let ranks = communicator_ranks([&init].into_iter());
        assert_eq!(ranks.get(&id), Some(&8));
        // One rank's part for an all-gather, the buffer for an all-reduce.
        let size = args.size.unwrap();
        assert_eq!(size.buffer_bytes("nccl:AllGather", 8), 32_768);
        assert_eq!(size.buffer_bytes("nccl:AllReduce", 8), 4096);
    }

    #[test]
    fn record_param_comms_gives_the_larger_buffer_and_its_group() {
        // An all-gather into a tensor of 4 ranks (PyTorch 2.x's fields, hta_nccl_data's names).
        let json = r#"{"Collective name": "all_gather_into_tensor", "In msg nelems": 1000,
            "Out msg nelems": 4000, "Group size": 4, "dtype": "BFloat16",
            "Process Group Name": "1", "Process Group Ranks": "[0, 1, 2, 3]"}"#;
        let args = call_args(&flatten(json));
        assert_eq!(args.size, Some(Size::Buffer(8000)));
        assert_eq!(args.ranks, Some(4));
        let other = r#"{"Process Group Name": "1", "Process Group Ranks": "[4, 5, 6, 7]"}"#;
        assert!(args.communicator.is_some());
        assert_ne!(args.communicator, call_args(&flatten(other)).communicator);
        // A type this does not know gives no size; a negative group size no count.
        let odd = r#"{"In msg nelems": 10, "dtype": "Mystery", "Group size": -2}"#;
        assert_eq!(call_args(&flatten(odd)), CallArgs::default());
    }
}
