//! A large output written by a thread of its own ([`Background`]).

use std::io::{self, Write};
use std::sync::mpsc;

/// Bytes handed to the writing thread at a time.
const CHUNK: usize = 1 << 20;
/// Chunks in flight between the formatting thread and the writing thread.
const IN_FLIGHT: usize = 4;

/// A large output file written by a thread of its own: the thread that formats hands it full
/// buffers of a megabyte (at most four waiting), so copying into the page cache and gzip
/// compression run beside the formatting instead of inside it. The bytes are those a plain
/// buffered writer would write.
pub struct Background {
    buf: Vec<u8>,
    full: Option<mpsc::SyncSender<Vec<u8>>>,
    empty: mpsc::Receiver<Vec<u8>>,
    thread: Option<std::thread::JoinHandle<io::Result<()>>>,
}

impl Background {
    /// Writes to `file`, gzipped (at the fastest level) when `gzip`; fails when the system
    /// cannot start the thread.
    pub fn new(file: std::fs::File, gzip: bool) -> io::Result<Background> {
        let (full, chunks) = mpsc::sync_channel::<Vec<u8>>(IN_FLIGHT);
        let (recycle, empty) = mpsc::channel();
        let write = move |out: &mut dyn Write| -> io::Result<()> {
            for mut chunk in chunks {
                out.write_all(&chunk)?;
                chunk.clear();
                // The formatting thread may have finished; the buffer is then dropped.
                let _ = recycle.send(chunk);
            }
            Ok(())
        };
        let thread = std::thread::Builder::new().name("write-out".to_string());
        let thread = thread.spawn(move || -> io::Result<()> {
            if gzip {
                let buffered = io::BufWriter::with_capacity(CHUNK, file);
                let mut gz = flate2::write::GzEncoder::new(buffered, flate2::Compression::fast());
                write(&mut gz)?;
                gz.finish()?.flush()
            } else {
                let mut file = file;
                write(&mut file)?;
                file.flush()
            }
        });
        Ok(Background {
            buf: Vec::with_capacity(CHUNK),
            full: Some(full),
            empty,
            thread: Some(thread?),
        })
    }

    /// Hands the buffer to the writing thread; its error if it stopped on one.
    fn hand_over(&mut self) -> io::Result<()> {
        let next = self
            .empty
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK));
        let chunk = std::mem::replace(&mut self.buf, next);
        let sent = self.full.as_ref().map(|full| full.send(chunk));
        match sent {
            Some(Ok(())) => Ok(()),
            // The thread stopped: its error says why.
            _ => self.join(),
        }
    }

    /// Waits for the writing thread; its result.
    fn join(&mut self) -> io::Result<()> {
        self.full = None;
        match self.thread.take() {
            Some(thread) => thread
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the writing thread panicked"))),
            None => Err(io::Error::other("the output was already finished")),
        }
    }

    /// Writes what is left and waits until every byte is written (and the gzip stream
    /// finished).
    pub fn finish(mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.hand_over()?;
        }
        self.join()
    }
}

impl Write for Background {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_all(data)?;
        Ok(data.len())
    }

    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        if self.buf.len() + data.len() > CHUNK && !self.buf.is_empty() {
            self.hand_over()?;
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    /// Hands what is buffered to the writing thread (which writes it in its turn).
    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.hand_over()
    }
}

impl Drop for Background {
    /// Stops the writing thread when the output is abandoned (an error elsewhere).
    fn drop(&mut self) {
        self.full = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Background;
    use std::io::Write;

    /// A line as a formatting thread writes them.
    const LINE: &[u8] = b"2:0:1:1:1:123456789:63000000:17:63000101:4242\n";

    /// Megabytes of [`LINE`], one write each.
    fn write_lines(out: &mut Background, megabytes: usize) -> std::io::Result<()> {
        for _ in 0..megabytes * (1 << 20) / LINE.len() {
            out.write_all(LINE)?;
        }
        Ok(())
    }

    #[test]
    fn the_file_holds_exactly_the_bytes_written_plain_or_gzipped() {
        for gzip in [false, true] {
            let file = tempfile::NamedTempFile::new().unwrap();
            let mut out = Background::new(file.reopen().unwrap(), gzip).unwrap();
            write_lines(&mut out, 5).unwrap();
            out.write_all(b"last").unwrap();
            out.finish().unwrap();
            let bytes = std::fs::read(file.path()).unwrap();
            let text = if gzip {
                let mut plain = Vec::new();
                let mut gz = flate2::read::GzDecoder::new(&bytes[..]);
                std::io::Read::read_to_end(&mut gz, &mut plain).unwrap();
                plain
            } else {
                bytes
            };
            let mut want = LINE.repeat(5 * (1 << 20) / LINE.len());
            want.extend_from_slice(b"last");
            assert!(text == want, "gzip {gzip}: the bytes differ");
        }
    }

    /// `/dev/full` fails every write (ENOSPC): the error reaches the formatting thread, which
    /// stops instead of waiting forever.
    #[test]
    fn a_full_disk_is_an_error_of_the_writer_not_a_hang() {
        let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
            eprintln!("SKIPPED: no /dev/full here");
            return;
        };
        let mut out = Background::new(full, false).unwrap();
        let error = write_lines(&mut out, 64).and_then(|()| out.finish());
        let error = error.expect_err("a full disk fails");
        assert_eq!(error.raw_os_error(), Some(28), "{error}");
    }
}
