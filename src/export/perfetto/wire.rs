//! The packet of every event (slice begins and ends, instants, counter samples) encoded straight
//! into bytes, without building prost messages: nearly every packet of a trace is one, and
//! prost's generic encoding computes each nested message's length once per enclosing level.
//!
//! Each packet is written as its `Trace.packet` record, lengths added up first so that every
//! byte is written once, in place. The bytes are exactly prost's for a `Trace` of the same one
//! `TracePacket` (fields in tag order, proto2 repeated fields unpacked, optional fields written
//! whenever set); a test encodes random events both ways.

use super::protos::InternedData;
use prost::Message;

/// Wire types.
const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LENGTH_DELIMITED: u32 = 2;

/// Field number of `Trace.packet`.
const TRACE_PACKET: u32 = 1;
/// Field numbers of `TracePacket`.
const PACKET_TIMESTAMP: u32 = 8;
const PACKET_SEQUENCE_ID: u32 = 10;
const PACKET_TRACK_EVENT: u32 = 11;
const PACKET_INTERNED_DATA: u32 = 12;
const PACKET_SEQUENCE_FLAGS: u32 = 13;
/// Field numbers of `TrackEvent`.
const EVENT_CATEGORY_IIDS: u32 = 3;
const EVENT_DEBUG_ANNOTATIONS: u32 = 4;
const EVENT_TYPE: u32 = 9;
const EVENT_NAME_IID: u32 = 10;
const EVENT_COUNTER_VALUE: u32 = 30;
const EVENT_DOUBLE_COUNTER_VALUE: u32 = 44;
const EVENT_FLOW_IDS: u32 = 47;
const EVENT_CALLSTACK_IID: u32 = 56;
/// Field numbers of `DebugAnnotation`.
const ANNOTATION_NAME_IID: u32 = 1;
const ANNOTATION_UINT: u32 = 3;
const ANNOTATION_INT: u32 = 4;
const ANNOTATION_STRING_IID: u32 = 17;

/// Appends `v` as a base-128 varint.
pub fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes of `v` as a varint.
fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Bytes of a varint field.
fn uint_len(field: u32, v: u64) -> usize {
    varint_len(u64::from(field << 3)) + varint_len(v)
}

/// Bytes of a length-delimited field holding `len` bytes.
fn delimited_len(field: u32, len: usize) -> usize {
    varint_len(u64::from(field << 3)) + varint_len(len as u64) + len
}

fn key(out: &mut Vec<u8>, field: u32, wire_type: u32) {
    varint(out, u64::from(field << 3 | wire_type));
}

fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    key(out, field, VARINT);
    varint(out, v);
}

fn length_delimited(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    key(out, field, LENGTH_DELIMITED);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A debug annotation's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Annotation {
    /// `uint_value`.
    Uint(u64),
    /// `int_value`.
    Int(i64),
    /// `string_value_iid`.
    StringIid(u64),
}

/// The event of one packet, filled field by field, then encoded.
#[derive(Debug, Default)]
pub struct EventPacket {
    /// `timestamp` (the delta since the sequence's previous packet).
    timestamp: u64,
    /// `trusted_packet_sequence_id`.
    sequence: u32,
    /// `sequence_flags`.
    flags: u32,
    /// `TrackEvent.type`.
    kind: i32,
    /// `TrackEvent.name_iid`.
    pub name_iid: Option<u64>,
    /// `TrackEvent.category_iids` (at most one here).
    pub category_iid: Option<u64>,
    /// `TrackEvent.counter_value`.
    pub counter_value: Option<i64>,
    /// `TrackEvent.double_counter_value`.
    pub double_counter_value: Option<f64>,
    /// `TrackEvent.flow_ids`.
    pub flow_ids: Vec<u64>,
    /// `TrackEvent.callstack_iid`.
    pub callstack_iid: Option<u64>,
    /// `TrackEvent.debug_annotations`, already encoded (field key and length included).
    annotations: Vec<u8>,
    /// What this packet interns, when it interns anything.
    pub interned: Option<InternedData>,
    /// Scratch for the interned data.
    scratch: Vec<u8>,
}

impl EventPacket {
    /// The packets of sequence `sequence`.
    pub fn new(sequence: u32) -> EventPacket {
        EventPacket {
            sequence,
            ..EventPacket::default()
        }
    }

    /// Starts another event: every field unset but the sequence.
    pub fn reset(&mut self, timestamp: u64, flags: u32, kind: i32) {
        self.timestamp = timestamp;
        self.flags = flags;
        self.kind = kind;
        self.name_iid = None;
        self.category_iid = None;
        self.counter_value = None;
        self.double_counter_value = None;
        self.flow_ids.clear();
        self.callstack_iid = None;
        self.annotations.clear();
        self.interned = None;
    }

    /// Adds a debug annotation named by `name_iid`.
    pub fn annotate(&mut self, name_iid: u64, value: Annotation) {
        let (field, v) = match value {
            Annotation::Uint(v) => (ANNOTATION_UINT, v),
            Annotation::Int(v) => (ANNOTATION_INT, v as u64),
            Annotation::StringIid(v) => (ANNOTATION_STRING_IID, v),
        };
        let len = uint_len(ANNOTATION_NAME_IID, name_iid) + uint_len(field, v);
        let a = &mut self.annotations;
        key(a, EVENT_DEBUG_ANNOTATIONS, LENGTH_DELIMITED);
        varint(a, len as u64);
        uint(a, ANNOTATION_NAME_IID, name_iid);
        uint(a, field, v);
    }

    /// Appends the packet as one `Trace.packet` record (field 1: its key, length and bytes).
    pub fn encode_record(&mut self, out: &mut Vec<u8>) {
        let interned = &mut self.scratch;
        interned.clear();
        if let Some(data) = &self.interned {
            data.encode(interned).expect("a Vec grows as needed");
        }
        let flow_len = varint_len(u64::from(EVENT_FLOW_IDS << 3)) + 8;
        let event_len = self
            .category_iid
            .map_or(0, |iid| uint_len(EVENT_CATEGORY_IIDS, iid))
            + self.annotations.len()
            + uint_len(EVENT_TYPE, self.kind as u64)
            + self.name_iid.map_or(0, |iid| uint_len(EVENT_NAME_IID, iid))
            + (self.counter_value).map_or(0, |v| uint_len(EVENT_COUNTER_VALUE, v as u64))
            + (self.double_counter_value).map_or(0, |_| {
                varint_len(u64::from(EVENT_DOUBLE_COUNTER_VALUE << 3)) + 8
            })
            + self.flow_ids.len() * flow_len
            + (self.callstack_iid).map_or(0, |iid| uint_len(EVENT_CALLSTACK_IID, iid));
        let packet_len = uint_len(PACKET_TIMESTAMP, self.timestamp)
            + uint_len(PACKET_SEQUENCE_ID, u64::from(self.sequence))
            + delimited_len(PACKET_TRACK_EVENT, event_len)
            + match self.interned {
                Some(_) => delimited_len(PACKET_INTERNED_DATA, interned.len()),
                None => 0,
            }
            + uint_len(PACKET_SEQUENCE_FLAGS, u64::from(self.flags));
        out.reserve(delimited_len(TRACE_PACKET, packet_len));
        key(out, TRACE_PACKET, LENGTH_DELIMITED);
        varint(out, packet_len as u64);
        uint(out, PACKET_TIMESTAMP, self.timestamp);
        uint(out, PACKET_SEQUENCE_ID, u64::from(self.sequence));
        key(out, PACKET_TRACK_EVENT, LENGTH_DELIMITED);
        varint(out, event_len as u64);
        if let Some(iid) = self.category_iid {
            uint(out, EVENT_CATEGORY_IIDS, iid);
        }
        out.extend_from_slice(&self.annotations);
        uint(out, EVENT_TYPE, self.kind as u64);
        if let Some(iid) = self.name_iid {
            uint(out, EVENT_NAME_IID, iid);
        }
        if let Some(v) = self.counter_value {
            uint(out, EVENT_COUNTER_VALUE, v as u64);
        }
        if let Some(v) = self.double_counter_value {
            key(out, EVENT_DOUBLE_COUNTER_VALUE, FIXED64);
            out.extend_from_slice(&v.to_le_bytes());
        }
        for &flow in &self.flow_ids {
            key(out, EVENT_FLOW_IDS, FIXED64);
            out.extend_from_slice(&flow.to_le_bytes());
        }
        if let Some(iid) = self.callstack_iid {
            uint(out, EVENT_CALLSTACK_IID, iid);
        }
        if self.interned.is_some() {
            length_delimited(out, PACKET_INTERNED_DATA, interned);
        }
        uint(out, PACKET_SEQUENCE_FLAGS, u64::from(self.flags));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::perfetto::protos::{
        DebugAnnotation, EventName, InternedString, Trace, TracePacket, TrackEvent,
    };

    /// A small deterministic generator (xorshift), so failures repeat.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// A value of 0 to 64 random bits, so every varint length occurs.
        fn value(&mut self) -> u64 {
            let bits = self.next() % 65;
            if bits == 64 {
                self.next()
            } else {
                self.next() & ((1u64 << bits) - 1)
            }
        }

        fn maybe(&mut self) -> bool {
            self.next().is_multiple_of(2)
        }
    }

    /// The same event as prost messages.
    fn as_prost(p: &EventPacket, annotations: &[(u64, Annotation)]) -> TracePacket {
        let debug_annotations = annotations
            .iter()
            .map(|&(name_iid, value)| {
                let mut a = DebugAnnotation {
                    name_iid: Some(name_iid),
                    ..DebugAnnotation::default()
                };
                match value {
                    Annotation::Uint(v) => a.uint_value = Some(v),
                    Annotation::Int(v) => a.int_value = Some(v),
                    Annotation::StringIid(v) => a.string_value_iid = Some(v),
                }
                a
            })
            .collect();
        TracePacket {
            timestamp: Some(p.timestamp),
            trusted_packet_sequence_id: Some(p.sequence),
            sequence_flags: Some(p.flags),
            interned_data: p.interned.clone(),
            track_event: Some(TrackEvent {
                r#type: Some(p.kind),
                name_iid: p.name_iid,
                category_iids: p.category_iid.into_iter().collect(),
                debug_annotations,
                flow_ids: p.flow_ids.clone(),
                counter_value: p.counter_value,
                double_counter_value: p.double_counter_value,
                callstack_iid: p.callstack_iid,
                ..TrackEvent::default()
            }),
            ..TracePacket::default()
        }
    }

    #[test]
    fn events_encode_to_the_bytes_prost_gives() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut packet;
        for round in 0..5000u32 {
            packet = EventPacket::new(rng.value() as u32);
            packet.reset(rng.value(), rng.value() as u32, (rng.next() % 5) as i32);
            packet.name_iid = rng.maybe().then(|| rng.value());
            packet.category_iid = rng.maybe().then(|| rng.value());
            packet.counter_value = rng.maybe().then(|| rng.value() as i64);
            packet.double_counter_value = rng.maybe().then(|| rng.value() as f64 / 7.0);
            for _ in 0..rng.next() % 3 {
                packet.flow_ids.push(rng.value());
            }
            packet.callstack_iid = rng.maybe().then(|| rng.value());
            let mut annotations = Vec::new();
            for _ in 0..rng.next() % 8 {
                let value = match rng.next() % 3 {
                    0 => Annotation::Uint(rng.value()),
                    1 => Annotation::Int(rng.value() as i64),
                    _ => Annotation::StringIid(rng.value()),
                };
                let name = rng.value();
                packet.annotate(name, value);
                annotations.push((name, value));
            }
            if round.is_multiple_of(7) {
                packet.interned = Some(InternedData {
                    event_names: vec![EventName {
                        iid: Some(rng.value()),
                        name: Some("ncclDevKernel_AllReduce".to_string()),
                    }],
                    debug_annotation_string_values: vec![InternedString {
                        iid: Some(rng.value()),
                        str: Some(b"8\xc3\x971\xc3\x971".to_vec()),
                    }],
                    ..InternedData::default()
                });
            }
            let mut ours = Vec::new();
            packet.encode_record(&mut ours);
            let theirs = Trace {
                packet: vec![as_prost(&packet, &annotations)],
            };
            assert_eq!(ours, theirs.encode_to_vec(), "round {round}");
        }
    }
}
