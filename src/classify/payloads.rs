//! What NCCL's NVTX payloads say about its kernels (NCCL 2.23 and later attach an extended
//! payload to its API ranges: message size, reduction operation...; nsys exports it as JSON with
//! `--include-json=true`). As nsys2prv does, a payload belongs to the first kernel launch its
//! range holds (on its thread), and each field is one number per kernel: numbers as they are
//! (rounded), text by its rank among the field's texts in name order, from 1.

use super::activity::Activity;
use crate::hash::FxHashMap;
use crate::model::{NvtxKind, ProcessId, StringId};
use std::collections::{BTreeMap, BTreeSet};

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
}

/// A field's value as the JSON gave it.
#[derive(Debug, Clone, PartialEq)]
enum Raw {
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
                let Some(launch) = launch else { continue };
                let fields = parsed
                    .entry(n.payload)
                    .or_insert_with(|| flatten(timeline.text(n.payload)));
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
        let mut by_launch = FxHashMap::default();
        for (launch, payload) in found {
            let values = parsed[&payload]
                .iter()
                .filter_map(|(name, raw)| {
                    let i = fields.iter().position(|f| &f.name == name)?;
                    Some((i, value(&fields[i], raw)))
                })
                .collect();
            by_launch.entry(launch).or_insert(values);
        }
        NcclPayloads { fields, by_launch }
    }

    /// The (field index, value) pairs of the payload of the launch with this correlation id.
    pub fn of(&self, process: ProcessId, correlation: u32) -> &[(usize, u64)] {
        self.by_launch
            .get(&(process, correlation))
            .map_or(&[], Vec::as_slice)
    }
}

/// A raw value as a number of its field: a number rounded (negative ones as 0), a text by its
/// rank, a number in a text field by its text's rank.
fn value(field: &Field, raw: &Raw) -> u64 {
    match (&field.labels, raw) {
        (None, Raw::Number(n)) => n.round().max(0.0) as u64,
        (Some(labels), raw) => {
            let text = match raw {
                Raw::Text(t) => t.clone(),
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
        Value::Number(n) => out.push((prefix.to_string(), Raw::Number(n.as_f64().unwrap_or(0.0)))),
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
                ("Message size [bytes]".into(), Raw::Number(1_048_576.0)),
                ("op.name".into(), Raw::Text("Sum".into())),
            ]
        );
        assert!(flatten("12").is_empty());
    }
}
