//! The little binary format of part files and encoded parts: fixed-width little-endian numbers,
//! length-prefixed UTF-8 text, options as a presence byte; a short or impossible input is an
//! error naming what was wrong, never a panic.

use crate::model::Ns;
use crate::spill::Record;

/// Appends fields to a byte vector.
#[derive(Default)]
pub(crate) struct Put(pub(crate) Vec<u8>);

impl Put {
    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    pub(crate) fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }

    pub(crate) fn opt_str(&mut self, s: &Option<String>) {
        self.u8(u8::from(s.is_some()));
        if let Some(s) = s {
            self.str(s);
        }
    }

    pub(crate) fn opt_i64(&mut self, v: Option<i64>) {
        self.u8(u8::from(v.is_some()));
        self.i64(v.unwrap_or(0));
    }

    pub(crate) fn span(&mut self, span: Option<(Ns, Ns)>) {
        self.u8(u8::from(span.is_some()));
        let (s, e) = span.unwrap_or_default();
        self.i64(s.0);
        self.i64(e.0);
    }

    pub(crate) fn record<T: Record>(&mut self, r: &T) {
        let from = self.0.len();
        self.0.resize(from + T::SIZE, 0);
        r.encode(&mut self.0[from..]);
    }
}

/// Reads fields from a byte slice; a short slice is an error.
pub(crate) struct Get<'b> {
    bytes: &'b [u8],
    at: usize,
}

/// What a failed read says.
pub(crate) type Got<T> = Result<T, String>;

impl<'b> Get<'b> {
    pub(crate) fn new(bytes: &'b [u8]) -> Self {
        Get { bytes, at: 0 }
    }

    fn take(&mut self, n: usize) -> Got<&'b [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or("the light section ends early")?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    pub(crate) fn u64(&mut self) -> Got<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }

    pub(crate) fn i64(&mut self) -> Got<i64> {
        Ok(i64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }

    pub(crate) fn u32(&mut self) -> Got<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }

    pub(crate) fn u8(&mut self) -> Got<u8> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn bool(&mut self) -> Got<bool> {
        Ok(self.u8()? != 0)
    }

    pub(crate) fn len(&mut self) -> Got<usize> {
        let n = self.u64()?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.bytes.len() - self.at)
            .ok_or_else(|| format!("a length of {n} beyond the section"))
    }

    pub(crate) fn str(&mut self) -> Got<String> {
        let n = self.len()?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "text that is not UTF-8".into())
    }

    pub(crate) fn opt_str(&mut self) -> Got<Option<String>> {
        Ok(if self.bool()? {
            Some(self.str()?)
        } else {
            None
        })
    }

    pub(crate) fn opt_i64(&mut self) -> Got<Option<i64>> {
        let some = self.bool()?;
        let v = self.i64()?;
        Ok(some.then_some(v))
    }

    pub(crate) fn span(&mut self) -> Got<Option<(Ns, Ns)>> {
        let some = self.bool()?;
        let (s, e) = (self.i64()?, self.i64()?);
        Ok(some.then_some((Ns(s), Ns(e))))
    }

    pub(crate) fn record<T: Record>(&mut self) -> Got<T> {
        Ok(T::decode(self.take(T::SIZE)?))
    }

    /// A count of items, each at least `min` bytes long.
    pub(crate) fn count(&mut self, min: usize) -> Got<usize> {
        let n = self.u64()?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n.saturating_mul(min.max(1)) <= self.bytes.len() - self.at)
            .ok_or_else(|| format!("a count of {n} beyond the section"))
    }
}
