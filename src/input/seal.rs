//! The seal of a file that travels between machines (part files, encoded parts): its last
//! [`SEAL_LEN`] bytes are a CRC-32 of every byte before them and of the fingerprint after it, a
//! fingerprint of what the file was made from, and [`SEAL_MAGIC`]. A reader checks the seal
//! before it trusts a byte, so a copy cut short or a flipped bit is refused instead of read
//! into a wrong trace, and a piece made from other inputs or options is told apart by its
//! fingerprint.

use std::fs::File;
use std::hash::Hasher;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;

/// The last bytes of a sealed file.
pub const SEAL_MAGIC: &[u8; 8] = b"lensseal";

/// The seal's length: CRC-32, fingerprint, magic.
pub const SEAL_LEN: u64 = 4 + 8 + SEAL_MAGIC.len() as u64;

/// A writer that sums what passes through it, to be sealed at the end.
pub struct Sealing<W: Write> {
    out: W,
    crc: flate2::Crc,
}

impl<W: Write> Sealing<W> {
    /// Sums what is written to `out`.
    pub fn new(out: W) -> Sealing<W> {
        Sealing {
            out,
            crc: flate2::Crc::new(),
        }
    }

    /// Writes the seal with `fingerprint`; the writer, to flush.
    pub fn seal(mut self, fingerprint: u64) -> io::Result<W> {
        self.crc.update(&fingerprint.to_le_bytes());
        let sum = self.crc.sum();
        self.out.write_all(&sum.to_le_bytes())?;
        self.out.write_all(&fingerprint.to_le_bytes())?;
        self.out.write_all(SEAL_MAGIC)?;
        Ok(self.out)
    }
}

impl<W: Write> Write for Sealing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.crc.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// What a checked seal says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seal {
    /// What the file was made from.
    pub fingerprint: u64,
    /// The length of what the seal covers: the file less its seal.
    pub data_len: u64,
}

/// Reads the whole of `file` and checks its seal; why not, when it does not hold.
pub fn check(file: &File) -> Result<Seal, String> {
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let cut = "it ends without its seal: it was cut short, or not written whole";
    if len < SEAL_LEN {
        return Err(cut.into());
    }
    let data_len = len - SEAL_LEN;
    let mut seal = [0u8; SEAL_LEN as usize];
    file.read_exact_at(&mut seal, data_len)
        .map_err(|e| e.to_string())?;
    if &seal[12..] != SEAL_MAGIC {
        return Err(cut.into());
    }
    let mut crc = flate2::Crc::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < data_len {
        let n = (data_len - at).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..n], at)
            .map_err(|e| e.to_string())?;
        crc.update(&buf[..n]);
        at += n as u64;
    }
    crc.update(&seal[4..12]);
    let want = u32::from_le_bytes(seal[..4].try_into().expect("4 bytes"));
    if crc.sum() != want {
        return Err(
            "its checksum does not match: it changed after it was written (a \
                    flipped bit, a damaged copy)"
                .into(),
        );
    }
    let fingerprint = u64::from_le_bytes(seal[4..12].try_into().expect("8 bytes"));
    Ok(Seal {
        fingerprint,
        data_len,
    })
}

/// A fingerprint of `bytes` (stable across runs and machines).
pub fn fingerprint(bytes: &[u8]) -> u64 {
    let mut hasher = crate::hash::FxHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(data: &[u8], fingerprint: u64) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut out = Sealing::new(file.reopen().unwrap());
        out.write_all(data).unwrap();
        out.seal(fingerprint).unwrap().flush().unwrap();
        file
    }

    #[test]
    fn a_sealed_file_checks_and_any_flipped_bit_or_cut_is_refused() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let file = sealed(&data, 42);
        let seal = check(file.as_file()).unwrap();
        assert_eq!(
            seal,
            Seal {
                fingerprint: 42,
                data_len: data.len() as u64
            }
        );
        let mut bytes = std::fs::read(file.path()).unwrap();
        for at in [0, 1 << 20, data.len() - 1, data.len() + 1, data.len() + 6] {
            bytes[at] ^= 0x10;
            std::fs::write(file.path(), &bytes).unwrap();
            assert!(check(file.as_file()).is_err(), "a flipped bit at {at}");
            bytes[at] ^= 0x10;
        }
        std::fs::write(file.path(), &bytes[..bytes.len() - 1]).unwrap();
        assert!(check(file.as_file()).unwrap_err().contains("cut short"));
    }
}
