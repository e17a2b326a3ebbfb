//! torch.profiler (Kineto) Chrome-trace JSON, one file per rank, `.json` or `.json.gz`.
//!
//! The file is read as a stream ([`super::json::Values`]): `traceEvents` is handed over one
//! event at a time (never held whole), each parsed from its own bytes, and each event becomes a
//! row of the translated export at once. Times are Kineto's
//! microseconds, read from the JSON text exactly (`4458676522690.655` is 4458676522690655 ns;
//! no float ever holds a time), on `baseTimeNanoseconds` when the file has it, else on the UTC
//! epoch (older Kineto writes epoch µs).
//!
//! | Kineto `cat` | becomes |
//! | --- | --- |
//! | `kernel` | a kernel (device, stream, correlation, grid, block, registers, shared memory) |
//! | `gpu_memcpy`, `gpu_memset` | a memory copy (direction from its name) or set |
//! | `cuda_runtime`, `cuda_driver` | a CUDA API call with its correlation id |
//! | `cuda_sync` | a synchronization |
//! | `cpu_op` `record_param_comms` with its collective's arguments | an NVTX range of NCCL's domain whose payload is the collective, element counts, dtype and process group (the fields reach the NCCL kernel launched inside, as NCCL's own payloads do) |
//! | `user_annotation`, `cpu_op` | an NVTX range (`ProfilerStep#N`, `nccl:all_to_all`, ATen operators, `record_param_comms`), in the default domain as PyTorch's `emit_nvtx` gives them under nsys; an operator's `Input type`, `Input Dims` and `Concrete Inputs` (`record_shapes=True`) are its payload, `{"Input type": [...], "Input Dims": [...], "Concrete Inputs": [...]}`, which give a GEMM launched inside its precision and FLOPs |
//! | `M` events | process, thread and GPU names |
//!
//! JAX's Chrome JSON (what xprof writes beside the `XSpace`, and `jax.profiler.trace(...,
//! create_perfetto_trace=True)`) is told apart by its processes, named `/device:GPU:N` and
//! `/host:CPU`; its events have no category and are read as the `XSpace`'s are
//! ([`super::xplane`]): a GPU process's events are kernels, copies and sets on stream `tid`,
//! the host's are CUDA API calls and ranges, `StepTraceAnnotation`s the steps `name#N`.
//!
//! GPU-side projections of annotations (`gpu_user_annotation`), flow arrows (`ac2g`,
//! `fwdbwd`), Python stack frames, instant events and the profiler's own spans are derived or
//! decorative and are not translated; events of any other category or phase are counted, and
//! every command reading the trace warns about them.

use super::Format;
use super::export::{CopyKind, GpuPlace, KernelShape, TraceExport, TraceFacts};
use super::json::Values;
use anyhow::{Context, Result};
use serde::Deserialize;
use serde::de::{Deserializer, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// Categories known and deliberately not translated (see the module documentation).
const UNTRANSLATED: &[&str] = &[
    "gpu_user_annotation",
    "ac2g",
    "fwdbwd",
    "async_cpu_to_gpu",
    "python_function",
    "trace",
    "overhead",
];

/// Translates the Kineto trace `reader` (decompressed) read from `source` into an export at
/// `target`.
pub fn translate(reader: impl BufRead, source: &Path, target: &Path) -> Result<PathBuf> {
    let mut state = State {
        export: TraceExport::create(target)?,
        skipped: BTreeMap::new(),
        jax: BTreeMap::new(),
    };
    let top = read_top(reader, &mut state)?;
    anyhow::ensure!(
        top.saw_events,
        "a JSON file without traceEvents: not a torch.profiler trace"
    );
    for device in top.devices {
        state.export.gpu(device.id, &device.name);
    }
    let facts = TraceFacts {
        hostname: super::trace_stem(source),
        base_ns: top.base_ns,
        rank: top.distributed.as_ref().and_then(|d| d.rank),
        world_size: top.distributed.and_then(|d| d.world_size),
        skipped: state.skipped,
    };
    let format = match state.jax.is_empty() {
        true => Format::Kineto,
        false => Format::JaxJson,
    };
    state.export.finish(source, format, &facts)
}

/// Reads the top-level object: each event of `traceEvents` into `state` as it comes, and the
/// other keys read.
fn read_top(reader: impl BufRead, state: &mut State) -> Result<Top> {
    let invalid = "not a valid torch.profiler trace";
    let mut values = Values::open(reader).context(invalid)?;
    let mut top = Top::default();
    while let Some(key) = values.next_key().context(invalid)? {
        match key.as_str() {
            "traceEvents" => {
                top.saw_events = true;
                values.elements(|index, bytes| {
                    let event: Event = serde_json::from_slice(bytes)
                        .with_context(|| format!("{invalid}: traceEvents[{index}]"))?;
                    let added = state.add(&event);
                    added.with_context(|| format!("traceEvents[{index}] ({:?})", event.name))
                })?;
            }
            "baseTimeNanoseconds" => {
                top.base_ns = values.value(|b| parsed::<Lenient>(&key, b))?.0;
            }
            "distributedInfo" => top.distributed = Some(values.value(|b| parsed(&key, b))?),
            "deviceProperties" => top.devices = values.value(|b| parsed(&key, b))?,
            _ => values.skip()?,
        }
    }
    Ok(top)
}

/// A top-level value other than the events, parsed from its bytes.
fn parsed<T: serde::de::DeserializeOwned>(key: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes)
        .with_context(|| format!("not a valid torch.profiler trace: reading {key}"))
}

/// What the event visitor writes into.
struct State {
    export: TraceExport,
    skipped: BTreeMap<String, u64>,
    /// JAX's processes, by pid: a GPU's ordinal, or `None` for the host.
    jax: BTreeMap<u32, Option<u32>>,
}

/// The top-level keys read besides `traceEvents`.
#[derive(Default)]
struct Top {
    saw_events: bool,
    base_ns: Option<i64>,
    distributed: Option<DistributedInfo>,
    devices: Vec<DeviceProperties>,
}

/// `distributedInfo`.
#[derive(Deserialize)]
struct DistributedInfo {
    #[serde(default, deserialize_with = "lenient_u32")]
    rank: Option<u32>,
    #[serde(default, deserialize_with = "lenient_u32")]
    world_size: Option<u32>,
}

/// One entry of `deviceProperties`.
#[derive(Deserialize)]
struct DeviceProperties {
    id: u32,
    #[serde(default)]
    name: String,
}

/// One trace event, with the fields any translated category uses (borrowed from the event's
/// bytes where they need no unescaping).
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(default, borrow)]
    ph: Cow<'a, str>,
    #[serde(default, borrow)]
    cat: Cow<'a, str>,
    #[serde(default, borrow)]
    name: Cow<'a, str>,
    #[serde(default, deserialize_with = "lenient_id")]
    pid: Option<u32>,
    #[serde(default, deserialize_with = "lenient_id")]
    tid: Option<u32>,
    #[serde(borrow)]
    ts: Option<&'a RawValue>,
    #[serde(borrow)]
    dur: Option<&'a RawValue>,
    #[serde(default, borrow)]
    args: Args<'a>,
}

/// The `args` fields translated.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Args<'a> {
    #[serde(deserialize_with = "lenient_u32")]
    device: Option<u32>,
    #[serde(deserialize_with = "lenient_u32")]
    context: Option<u32>,
    #[serde(deserialize_with = "lenient_u32")]
    stream: Option<u32>,
    #[serde(deserialize_with = "lenient_u32")]
    correlation: Option<u32>,
    grid: Option<[i64; 3]>,
    block: Option<[i64; 3]>,
    #[serde(rename = "registers per thread", deserialize_with = "lenient_i64")]
    registers: Option<i64>,
    #[serde(rename = "shared memory", deserialize_with = "lenient_i64")]
    shared: Option<i64>,
    #[serde(deserialize_with = "lenient_i64")]
    bytes: Option<i64>,
    /// A metadata event's name.
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    /// What `record_param_comms` says of its collective: its name.
    #[serde(rename = "Collective name", borrow)]
    collective: Option<Cow<'a, str>>,
    #[serde(rename = "In msg nelems", deserialize_with = "lenient_i64")]
    in_nelems: Option<i64>,
    #[serde(rename = "Out msg nelems", deserialize_with = "lenient_i64")]
    out_nelems: Option<i64>,
    #[serde(rename = "Group size", deserialize_with = "lenient_i64")]
    group_size: Option<i64>,
    #[serde(borrow)]
    dtype: Option<Cow<'a, str>>,
    #[serde(rename = "Process Group Name", deserialize_with = "lenient_text")]
    group_name: Option<String>,
    #[serde(
        rename = "Process Group Description",
        deserialize_with = "lenient_text"
    )]
    group_description: Option<String>,
    #[serde(rename = "Process Group Ranks", deserialize_with = "lenient_text")]
    group_ranks: Option<String>,
    /// An operator's input types (`record_shapes=True`), as the JSON gave them.
    #[serde(rename = "Input type", borrow)]
    input_type: Option<&'a RawValue>,
    /// Its input shapes (`record_shapes=True`), as the JSON gave them.
    #[serde(rename = "Input Dims", borrow)]
    input_dims: Option<&'a RawValue>,
    /// The values of its scalar and list inputs (`record_shapes=True`), as the JSON gave them.
    #[serde(rename = "Concrete Inputs", borrow)]
    concrete_inputs: Option<&'a RawValue>,
    /// JAX's stats, as text.
    #[serde(deserialize_with = "lenient_u32")]
    correlation_id: Option<u32>,
    #[serde(deserialize_with = "lenient_i64")]
    step_num: Option<i64>,
    #[serde(borrow)]
    kernel_details: Option<Cow<'a, str>>,
    #[serde(borrow)]
    memcpy_details: Option<Cow<'a, str>>,
    #[serde(borrow)]
    memset_details: Option<Cow<'a, str>>,
}

impl<'a> Args<'a> {
    /// What `record_param_comms` says of its collective, when it names one.
    fn comms(&'a self) -> Option<Comms<'a>> {
        Some(Comms {
            collective: self.collective.as_deref()?,
            in_nelems: self.in_nelems,
            out_nelems: self.out_nelems,
            group_size: self.group_size,
            dtype: self.dtype.as_deref(),
            group_name: self.group_name.as_deref(),
            group_description: self.group_description.as_deref(),
            group_ranks: self.group_ranks.as_deref(),
        })
    }
}

/// The arguments PyTorch records on `record_param_comms` (and newer Kineto on NCCL kernels):
/// the collective, its sizes and its process group, written as the range's payload.
#[derive(serde::Serialize)]
struct Comms<'a> {
    #[serde(rename = "Collective name")]
    collective: &'a str,
    #[serde(rename = "In msg nelems", skip_serializing_if = "Option::is_none")]
    in_nelems: Option<i64>,
    #[serde(rename = "Out msg nelems", skip_serializing_if = "Option::is_none")]
    out_nelems: Option<i64>,
    #[serde(rename = "Group size", skip_serializing_if = "Option::is_none")]
    group_size: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dtype: Option<&'a str>,
    #[serde(rename = "Process Group Name", skip_serializing_if = "Option::is_none")]
    group_name: Option<&'a str>,
    #[serde(
        rename = "Process Group Description",
        skip_serializing_if = "Option::is_none"
    )]
    group_description: Option<&'a str>,
    #[serde(
        rename = "Process Group Ranks",
        skip_serializing_if = "Option::is_none"
    )]
    group_ranks: Option<&'a str>,
}

impl State {
    fn add(&mut self, e: &Event) -> Result<()> {
        match &*e.ph {
            "X" => self.complete(e),
            "M" => {
                self.metadata(e);
                Ok(())
            }
            // Flow arrows and instants: derived or decorative.
            "s" | "f" | "i" => Ok(()),
            ph => {
                self.skip(format!("ph {ph}"));
                Ok(())
            }
        }
    }

    /// Counts an event of kind `kind` not translated (unless it is one of [`UNTRANSLATED`]).
    fn skip(&mut self, kind: String) {
        if !UNTRANSLATED.contains(&kind.as_str()) {
            *self.skipped.entry(kind).or_default() += 1;
        }
    }

    /// A complete (`X`) event.
    fn complete(&mut self, e: &Event) -> Result<()> {
        if let Some(&device) = e.pid.and_then(|pid| self.jax.get(&pid)) {
            return self.jax_event(e, device);
        }
        let cat = match e.cat.bytes().any(|b| b.is_ascii_uppercase()) {
            true => Cow::Owned(e.cat.to_ascii_lowercase()),
            false => Cow::Borrowed(&*e.cat),
        };
        let span = || span(e);
        let cpu = || Ok::<_, anyhow::Error>((need(e.pid, "pid")?, need(e.tid, "tid")?));
        let a = &e.args;
        match &*cat {
            "kernel" => {
                let shape = KernelShape {
                    grid: a.grid.unwrap_or([1, 1, 1]),
                    block: a.block.unwrap_or([1, 1, 1]),
                    registers: a.registers.unwrap_or(0),
                    shared: a.shared.unwrap_or(0),
                };
                self.export.kernel(span()?, place(e)?, &e.name, &shape)?;
            }
            "gpu_memcpy" | "memcpy" => {
                let copy = copy_kind(&e.name);
                let bytes = a.bytes.unwrap_or(0);
                self.export.memcpy(span()?, place(e)?, bytes, copy)?;
            }
            "gpu_memset" | "memset" => {
                let bytes = a.bytes.unwrap_or(0);
                self.export.memset(span()?, place(e)?, bytes)?;
            }
            "cuda_runtime" | "runtime" | "cuda_driver" => {
                let correlation = a.correlation.unwrap_or(0);
                let driver = cat == "cuda_driver";
                self.export
                    .api_call(span()?, cpu()?, correlation, &e.name, driver)?;
            }
            "cuda_sync" => {
                self.export.sync(span()?, place(e)?, sync_type(&e.name))?;
            }
            "cpu_op" if e.name == "record_param_comms" && a.collective.is_some() => {
                let json = serde_json::to_string(&a.comms())?;
                self.export
                    .nccl_payload_range(span()?, cpu()?, &e.name, &json)?;
            }
            "cpu_op" if a.input_type.is_some() || a.input_dims.is_some() => {
                let types = a.input_type.map_or("null", RawValue::get);
                let dims = a.input_dims.map_or("null", RawValue::get);
                let mut json = format!("{{\"Input type\": {types}, \"Input Dims\": {dims}");
                if let Some(values) = a.concrete_inputs {
                    json += &format!(", \"Concrete Inputs\": {}", values.get());
                }
                json.push('}');
                self.export
                    .range_with_payload(span()?, cpu()?, &e.name, &json)?;
            }
            "user_annotation" | "cpu_op" | "operator" => {
                self.export.range(span()?, cpu()?, &e.name)?;
            }
            _ => self.skip(cat.into_owned()),
        }
        Ok(())
    }

    /// An event of JAX's Chrome JSON, on a GPU (`device`) or on the host.
    fn jax_event(&mut self, e: &Event, device: Option<u32>) -> Result<()> {
        let a = &e.args;
        let span = span(e)?;
        let Some(device) = device else {
            let thread = (need(e.pid, "pid")?, need(e.tid, "tid")?);
            return match a.correlation_id {
                Some(correlation) if e.name.starts_with("cu") => {
                    self.export
                        .api_call(span, thread, correlation, &e.name, false)
                }
                _ => {
                    let text = super::xplane::step_text(&e.name, a.step_num);
                    self.export.range(span, thread, &text)
                }
            };
        };
        let place = GpuPlace {
            device,
            context: 1,
            stream: need(e.tid, "tid")?,
            correlation: a.correlation_id.unwrap_or(0),
        };
        let details = |stat: &str| match stat {
            "kernel_details" => a.kernel_details.as_deref(),
            "memcpy_details" => a.memcpy_details.as_deref(),
            "memset_details" => a.memset_details.as_deref(),
            _ => None,
        };
        super::xplane::gpu_event(&mut self.export, (span, place), &e.name, details)
    }

    /// A metadata (`M`) event: process, thread and GPU names; JAX's processes noted.
    fn metadata(&mut self, e: &Event) {
        let (Some(pid), Some(name)) = (e.pid, e.args.name.as_deref()) else {
            return;
        };
        if e.name == "process_name" {
            if let Some(device) = super::xplane::gpu_ordinal(name) {
                self.jax.insert(pid, Some(device));
                return;
            }
            if name == super::xplane::HOST_PLANE {
                self.jax.insert(pid, None);
            }
        }
        match &*e.name {
            "process_name" => self.export.process_name(pid, name),
            "thread_name" => {
                if let Some(tid) = e.tid {
                    self.export.thread_name((pid, tid), name.trim_end());
                }
            }
            _ => {}
        }
    }
}

fn need<T>(value: Option<T>, field: &str) -> Result<T> {
    value.with_context(|| format!("no numeric {field}"))
}

/// An event's `[start, end]` in ns.
fn span(e: &Event) -> Result<(i64, i64)> {
    let ts = e.ts.context("no ts")?;
    let start = micros_to_ns(ts.get()).with_context(|| format!("ts {} is not a time", ts))?;
    let dur = match e.dur {
        Some(d) => micros_to_ns(d.get()).with_context(|| format!("dur {d} is not a duration"))?,
        None => 0,
    };
    anyhow::ensure!(dur >= 0, "negative dur {}", dur);
    let end = start.checked_add(dur).context("ts + dur overflows")?;
    Ok((start, end))
}

/// A GPU event's device, stream and correlation.
fn place(e: &Event) -> Result<GpuPlace> {
    let a = &e.args;
    Ok(GpuPlace {
        device: a.device.or(e.pid).context("no device")?,
        context: a.context.unwrap_or(1),
        stream: a.stream.or(e.tid).context("no stream")?,
        correlation: a.correlation.unwrap_or(0),
    })
}

/// A number of µs, as JSON text, in ns: exact for decimals (digits past the third are
/// rounded half away from zero), through a float only for exponent notation.
pub fn micros_to_ns(text: &str) -> Option<i64> {
    let text = text.trim().trim_matches('"');
    if text.contains(['e', 'E']) {
        let v: f64 = text.parse().ok()?;
        let ns = (v * 1000.0).round();
        return (ns.abs() < 9.2e18).then_some(ns as i64);
    }
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && fraction.is_empty()
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut ns: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    ns = ns.checked_mul(1000)?;
    let mut scale = 100;
    for b in fraction.bytes().take(3) {
        ns = ns.checked_add(i64::from(b - b'0') * scale)?;
        scale /= 10;
    }
    if fraction.as_bytes().get(3).is_some_and(|&b| b >= b'5') {
        ns = ns.checked_add(1)?;
    }
    Some(if negative { -ns } else { ns })
}

/// A copy's direction from Kineto's name (`Memcpy DtoH (Device -> Pageable)`).
fn copy_kind(name: &str) -> CopyKind {
    const PAGEABLE: i64 = 1;
    const PINNED: i64 = 2;
    const DEVICE: i64 = 3;
    let memory = |side: &str| match side.trim() {
        "Pageable" => PAGEABLE,
        "Pinned" => PINNED,
        "Device" => DEVICE,
        _ => 0,
    };
    let (src, dst) = name
        .split_once('(')
        .and_then(|(_, rest)| rest.trim_end_matches(')').split_once("->"))
        .map_or((0, 0), |(s, d)| (memory(s), memory(d)));
    let kind = match name.split_whitespace().nth(1) {
        Some("HtoD") => 1,
        Some("DtoH") => 2,
        Some("DtoD") => 8,
        Some("HtoH") => 9,
        Some("PtoP") => 10,
        _ => 0,
    };
    CopyKind { kind, src, dst }
}

/// `CUpti_ActivitySynchronizationType` from a `cuda_sync` event's name.
fn sync_type(name: &str) -> i64 {
    match name {
        "Event Sync" => 1,
        "Stream Wait Event" => 2,
        "Stream Sync" => 3,
        "Context Sync" => 4,
        _ => 0,
    }
}

/// A number given as an integer, a float or a string, when it fits.
struct Lenient(Option<i64>);

impl<'de> Deserialize<'de> for Lenient {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Lenient, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Lenient;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_i64<E>(self, v: i64) -> Result<Lenient, E> {
                Ok(Lenient(Some(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Lenient, E> {
                Ok(Lenient(i64::try_from(v).ok()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Lenient, E> {
                Ok(Lenient(
                    (v.fract() == 0.0 && v.abs() < 9.2e18).then_some(v as i64),
                ))
            }
            fn visit_str<E>(self, v: &str) -> Result<Lenient, E> {
                Ok(Lenient(v.trim().parse().ok()))
            }
            fn visit_unit<E>(self) -> Result<Lenient, E> {
                Ok(Lenient(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Lenient, E> {
                Ok(Lenient(None))
            }
        }
        d.deserialize_any(V)
    }
}

fn lenient_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    Ok(Lenient::deserialize(d)?.0)
}

/// Text given as a string or a number.
fn lenient_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Option::<Value>::deserialize(d)? {
        Some(Value::String(s)) => Some(s),
        Some(Value::Null) | None => None,
        Some(other) => Some(other.to_string()),
    })
}

/// A process or thread id: Kineto writes some thread ids as negative 32-bit numbers; they keep
/// their 32 bits (and, like every id, the 24 that nsys's global ids hold).
fn lenient_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    Ok(Lenient::deserialize(d)?.0.map(|v| v as u32))
}

fn lenient_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    Ok(Lenient::deserialize(d)?
        .0
        .and_then(|v| u32::try_from(v).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_become_nanoseconds_exactly() {
        assert_eq!(
            micros_to_ns("4458676522690.655"),
            Some(4_458_676_522_690_655)
        );
        assert_eq!(
            micros_to_ns("1682725898236567"),
            Some(1_682_725_898_236_567_000)
        );
        assert_eq!(micros_to_ns("156.777"), Some(156_777));
        assert_eq!(micros_to_ns("68.0"), Some(68_000));
        assert_eq!(micros_to_ns("0.5"), Some(500));
        assert_eq!(micros_to_ns("1.23456"), Some(1_235));
        assert_eq!(micros_to_ns("-2.5"), Some(-2_500));
        assert_eq!(micros_to_ns("1.5e3"), Some(1_500_000));
        assert_eq!(micros_to_ns("abc"), None);
        assert_eq!(micros_to_ns("."), None);
        // A float would not hold this time to the ns: 1.682725898236567123e15 µs.
        assert_eq!(
            micros_to_ns("1682725898236567.123"),
            Some(1_682_725_898_236_567_123)
        );
    }

    #[test]
    fn copy_directions_come_from_the_name() {
        let k = copy_kind("Memcpy DtoH (Device -> Pageable)");
        assert_eq!((k.kind, k.src, k.dst), (2, 3, 1));
        let k = copy_kind("Memcpy HtoD (Pinned -> Device)");
        assert_eq!((k.kind, k.src, k.dst), (1, 2, 3));
    }
}
