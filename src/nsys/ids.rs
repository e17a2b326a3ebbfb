//! Decoding nsys global ids (reference: nsys-sqlite.md §4).
//!
//! `globalTid` = `[hardware id:8][VM id:8][PID:24][TID:24]`, high to low bits; `globalPid` is the same
//! with the TID bits zero. The host is not part of the id: two reports can hold equal ids.

/// A decoded `globalTid` or `globalPid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GlobalId {
    /// Operating-system process id.
    pub pid: u32,
    /// Operating-system thread id (0 in a `globalPid`).
    pub tid: u32,
}

impl GlobalId {
    /// Decodes a raw id as stored in SQLite (an i64 read as u64, so a hardware id >= 128 is fine).
    pub fn decode(raw: i64) -> GlobalId {
        let g = raw as u64;
        GlobalId {
            pid: ((g >> 24) & 0xFF_FFFF) as u32,
            tid: (g & 0xFF_FFFF) as u32,
        }
    }

    /// Encodes a thread id the way nsys does (VM id 1, hardware id 0); used by the generator.
    pub fn encode(pid: u32, tid: u32) -> i64 {
        ((1u64 << 48) | (u64::from(pid & 0xFF_FFFF) << 24) | u64::from(tid & 0xFF_FFFF)) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_documented_example() {
        // nsys-sqlite.md §4: globalTid 0x100006f00006f is VM 1, PID 111, TID 111.
        let id = GlobalId::decode(0x1_0000_6f00_006f);
        assert_eq!((id.pid, id.tid), (111, 111));
        let process = GlobalId::decode(0x1_0000_6f00_0000);
        assert_eq!((process.pid, process.tid), (111, 0));
    }

    #[test]
    fn encode_round_trips_and_high_hardware_ids_do_not_panic() {
        let raw = GlobalId::encode(337_169, 337_200);
        assert_eq!(raw, (1 << 48) | (337_169 << 24) | 337_200);
        assert_eq!(
            GlobalId::decode(raw),
            GlobalId {
                pid: 337_169,
                tid: 337_200
            }
        );
        let negative = GlobalId::decode(i64::MIN | (5 << 24) | 6);
        assert_eq!((negative.pid, negative.tid), (5, 6));
    }
}
