//! A JSON trace's top-level object read as a stream of values: its keys one at a time, each
//! value skipped or handed over as its own bytes, and an array value one element at a time
//! ([`Values::elements`]), so that a trace of any length is never held whole while every event
//! is parsed from a slice (serde_json parses a slice several times faster than a reader, which
//! it reads one byte per call).
//!
//! Only the structure is scanned here (strings, nesting, where a value ends); each value's own
//! syntax is checked by whoever parses its bytes. A string longer than
//! [`crate::model::MAX_TEXT`] is refused as it is scanned, so a hostile or damaged trace (one
//! 3 GiB string in a 3 MB gzip) is refused before anything buffers it, and so is a value of
//! more than [`MAX_VALUE`] bytes.

use anyhow::{Context, Result, bail};
use std::io::BufRead;

/// The most bytes one value handed over may hold (an event of a trace holds kilobytes).
pub const MAX_VALUE: usize = 64 << 20;

/// The values of a JSON object, read from `reader`.
pub struct Values<R> {
    reader: R,
    /// Bytes consumed so far: where an error is.
    offset: u64,
    /// The value being handed over.
    value: Vec<u8>,
    /// Whether the next key is the object's first.
    first: bool,
}

impl<R: BufRead> Values<R> {
    /// Opens the object that `reader` holds (past any leading whitespace).
    pub fn open(reader: R) -> Result<Values<R>> {
        let mut values = Values {
            reader,
            offset: 0,
            value: Vec::new(),
            first: true,
        };
        values.expect(b'{', "a JSON object")?;
        Ok(values)
    }

    /// The object's next key, or None past its last value (when nothing may follow but
    /// whitespace).
    pub fn next_key(&mut self) -> Result<Option<String>> {
        if self.separator(b'}')? {
            self.first = true;
            return match self.peek()? {
                None => Ok(None),
                Some(b) => bail!(
                    "{:?} after the JSON object, at byte {}",
                    b as char,
                    self.offset
                ),
            };
        }
        if self.peek()? != Some(b'"') {
            bail!("expected a key at byte {}", self.offset);
        }
        let key = self.value(|bytes| Ok(serde_json::from_slice::<String>(bytes)?))?;
        self.expect(b':', "':' after a key")?;
        Ok(Some(key))
    }

    /// Hands `f` the current key's value, as its bytes.
    pub fn value<T>(&mut self, f: impl FnOnce(&[u8]) -> Result<T>) -> Result<T> {
        let handed = self.scan(Some(f))?;
        handed.context("a value handed to no one")
    }

    /// Skips the current key's value.
    pub fn skip(&mut self) -> Result<()> {
        self.scan(None::<fn(&[u8]) -> Result<()>>).map(drop)
    }

    /// Hands `f` each element of the current key's value, an array, as its bytes, with its
    /// index.
    pub fn elements(&mut self, mut f: impl FnMut(u64, &[u8]) -> Result<()>) -> Result<()> {
        self.expect(b'[', "an array")?;
        self.first = true;
        let mut index = 0;
        while !self.separator(b']')? {
            self.value(|bytes| f(index, bytes))?;
            index += 1;
        }
        self.first = false;
        Ok(())
    }

    /// Past the `,` before the next item, or past `close` (true) at the end of a container;
    /// `self.first` says whether an item came before.
    fn separator(&mut self, close: u8) -> Result<bool> {
        match self.peek()? {
            Some(b) if b == close => {
                self.advance(1);
                Ok(true)
            }
            Some(b',') if !self.first => {
                self.advance(1);
                Ok(false)
            }
            _ if self.first => {
                self.first = false;
                Ok(false)
            }
            _ => self.expect(b',', "',' between values").map(|()| false),
        }
    }

    /// Consumes `byte` (after whitespace), or says what was expected.
    fn expect(&mut self, byte: u8, what: &str) -> Result<()> {
        match self.peek()? {
            Some(b) if b == byte => {
                self.advance(1);
                Ok(())
            }
            Some(b) => bail!(
                "expected {what} at byte {}, found {:?}",
                self.offset,
                b as char
            ),
            None => bail!("{}", self.eof()),
        }
    }

    /// The next byte past whitespace, not consumed; None at the end of the input.
    fn peek(&mut self) -> Result<Option<u8>> {
        loop {
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                return Ok(None);
            }
            match buf.iter().position(|b| !b.is_ascii_whitespace()) {
                Some(i) => {
                    let b = buf[i];
                    self.advance(i);
                    return Ok(Some(b));
                }
                None => {
                    let n = buf.len();
                    self.advance(n);
                }
            }
        }
    }

    fn advance(&mut self, n: usize) {
        self.reader.consume(n);
        self.offset += n as u64;
    }

    fn eof(&self) -> String {
        format!(
            "unexpected EOF at byte {}: the file is cut short",
            self.offset
        )
    }

    /// Reads the next value (after whitespace) to its end and hands `f` its bytes: straight from
    /// the reader's buffer when the value lies in it, else gathered in `self.value`; with `f`
    /// None, the value is skipped.
    fn scan<T>(&mut self, f: Option<impl FnOnce(&[u8]) -> Result<T>>) -> Result<Option<T>> {
        self.value.clear();
        let Some(first) = self.peek()? else {
            bail!("{}", self.eof());
        };
        let mut scanner = Scanner {
            scalar: !matches!(first, b'{' | b'[' | b'"'),
            depth: 0,
            string: false,
            escaped: false,
            since_quote: 0,
            too_long: false,
        };
        let mut first_chunk = true;
        loop {
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                if scanner.scalar {
                    break;
                }
                bail!("{}", self.eof());
            }
            let (used, done) = scanner.feed(buf);
            if scanner.too_long {
                bail!(
                    "a value longer than 1 MiB at byte {} (no trace has one: the file is damaged)",
                    self.offset + used as u64
                );
            }
            if done && first_chunk {
                let handed = f.map(|f| f(&buf[..used])).transpose()?;
                self.advance(used);
                return Ok(handed);
            }
            first_chunk = false;
            if f.is_some() {
                self.value.extend_from_slice(&buf[..used]);
            }
            self.advance(used);
            if self.value.len() > MAX_VALUE {
                bail!(
                    "a value of more than {} MiB at byte {} (no trace has one: the file is damaged)",
                    MAX_VALUE >> 20,
                    self.offset
                );
            }
            if done {
                break;
            }
        }
        let value = std::mem::take(&mut self.value);
        let handed = f.map(|f| f(&value)).transpose();
        self.value = value;
        handed
    }
}

/// Where a value ends, found a buffer at a time.
struct Scanner {
    /// A number, `true`, `false` or `null`: it ends before a delimiter.
    scalar: bool,
    depth: usize,
    /// Inside a string.
    string: bool,
    /// Just past a `\` inside a string.
    escaped: bool,
    /// Bytes since the last `"`.
    since_quote: usize,
    /// Whether a string (or the text between two) was longer than [`crate::model::MAX_TEXT`].
    too_long: bool,
}

impl Scanner {
    /// Scans `buf`: how many of its bytes belong to the value, and whether it ended there.
    fn feed(&mut self, buf: &[u8]) -> (usize, bool) {
        let mut i = 0;
        while i < buf.len() {
            if self.string {
                if self.escaped {
                    self.escaped = false;
                    i += 1;
                    continue;
                }
                match memchr::memchr2(b'"', b'\\', &buf[i..]) {
                    None => {
                        self.since_quote += buf.len() - i;
                        self.too_long |= self.since_quote > crate::model::MAX_TEXT;
                        return (buf.len(), false);
                    }
                    Some(at) if buf[i + at] == b'\\' => {
                        self.since_quote += at + 1;
                        self.escaped = true;
                        i += at + 1;
                    }
                    Some(at) => {
                        self.too_long |= self.since_quote + at > crate::model::MAX_TEXT;
                        self.since_quote = 0;
                        self.string = false;
                        i += at + 1;
                        if self.depth == 0 {
                            return (i, true);
                        }
                    }
                }
                continue;
            }
            let b = buf[i];
            if self.scalar {
                if matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace() {
                    return (i, true);
                }
                i += 1;
                continue;
            }
            i += 1;
            match b {
                b'"' => {
                    self.string = true;
                    self.since_quote = 0;
                }
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return (i, true);
                    }
                }
                _ => self.since_quote += 1,
            }
        }
        self.too_long |= self.since_quote > crate::model::MAX_TEXT;
        (buf.len(), false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key with its value's text, and each element of `"list"`, read through a reader
    /// that hands over `chunk` bytes at a time.
    fn read(text: &str, chunk: usize) -> Result<Vec<String>> {
        let reader = std::io::BufReader::with_capacity(chunk, text.as_bytes());
        let mut values = Values::open(reader)?;
        let mut seen = Vec::new();
        while let Some(key) = values.next_key()? {
            if key == "list" {
                values.elements(|i, bytes| {
                    seen.push(format!("list[{i}]={}", String::from_utf8_lossy(bytes)));
                    Ok(())
                })?;
            } else if key == "skipped" {
                values.skip()?;
            } else {
                let value = values.value(|b| Ok(String::from_utf8_lossy(b).into_owned()))?;
                seen.push(format!("{key}={value}"));
            }
        }
        Ok(seen)
    }

    #[test]
    fn keys_values_and_elements_are_handed_over_whole_at_any_buffer_size() {
        let text = r#" { "a" : 1.5e3 , "s": "x\"}]\\" , "skipped": {"deep": [[{}]]},
            "list": [ {"k": "v,}"}, [1, [2]], -3, true, "q" ], "n": null,"e\u00e9":{} } "#;
        let expected = [
            "a=1.5e3",
            r#"s="x\"}]\\""#,
            r#"list[0]={"k": "v,}"}"#,
            "list[1]=[1, [2]]",
            "list[2]=-3",
            "list[3]=true",
            r#"list[4]="q""#,
            "n=null",
            "e\u{e9}={}",
        ];
        for chunk in [1, 2, 3, 7, 64, 1 << 16] {
            assert_eq!(read(text, chunk).unwrap(), expected, "chunk {chunk}");
        }
        assert_eq!(read(r#"{"list": []}"#, 4).unwrap(), Vec::<String>::new());
        assert_eq!(read("{}", 1).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn broken_structure_is_an_error_naming_where() {
        let cases = [
            ("hello", "expected a JSON object at byte 0"),
            (r#"{"list": [{"a": 1"#, "unexpected EOF at byte 17"),
            (
                r#"{"a": 1 "b": 2}"#,
                "expected ',' between values at byte 8",
            ),
            (r#"{"a" 1}"#, "expected ':' after a key at byte 5"),
            (r#"{1: 2}"#, "expected a key at byte 1"),
            (r#"{"a": 1} x"#, "'x' after the JSON object, at byte 9"),
            (r#"{"list": 3}"#, "expected an array at byte 9"),
            (
                r#"{"list": [1 2]}"#,
                "expected ',' between values at byte 12",
            ),
        ];
        for (text, says) in cases {
            let err = read(text, 3).unwrap_err().to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn a_string_over_a_megabyte_is_refused() {
        let long = format!(
            r#"{{"list": ["{}"]}}"#,
            "a".repeat(crate::model::MAX_TEXT + 1)
        );
        let err = read(&long, 1 << 16).unwrap_err().to_string();
        assert!(err.contains("longer than 1 MiB"), "{err}");
        let short = format!(r#"{{"s": "{}"}}"#, "a".repeat(crate::model::MAX_TEXT - 1));
        assert_eq!(read(&short, 1 << 16).unwrap().len(), 1);
        // Begun half a buffer in and ended in the next buffer: never over the limit at the end
        // of a buffer, over it at its closing quote.
        let pad = "x".repeat(crate::model::MAX_TEXT / 2);
        let long = "a".repeat(crate::model::MAX_TEXT * 6 / 5);
        let text = format!(r#"{{"p": "{pad}", "list": ["{long}"]}}"#);
        let err = read(&text, crate::model::MAX_TEXT).unwrap_err().to_string();
        assert!(err.contains("longer than 1 MiB"), "{err}");
    }
}
