//! The embedded frontier's overflow: queued jobs past what the host queues hold in memory,
//! kept in a file of JSON lines in the crawl's directory and read back in the order they
//! were written.
//!
//! A job costs about 400 bytes in the host queues (its strings, two ordered-set entries);
//! a crawl that discovers links faster than it fetches them would otherwise grow its
//! memory with the frontier. The file is emptied (truncated) whenever it has been read to
//! its end, so its size follows the backlog, not the crawl.
//!
//! The file is not the crawl's record of what is queued (the store is: a resumed crawl
//! reads its queued URLs from `crawl.db`), so it is made anew at each start.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::{CoreError, CoreResult, FetchJob};

/// Bytes written at once; a job line is about 150 bytes.
const WRITE_BUFFER: usize = 256 << 10;
/// Bytes read at once when refilling.
const READ_CHUNK: usize = 256 << 10;

/// A first-in, first-out file of jobs.
pub struct Spill {
    path: PathBuf,
    file: File,
    /// Lines not yet written to the file.
    pending: Vec<u8>,
    /// Where the next write goes, and where the next read starts.
    write_at: u64,
    read_at: u64,
    len: usize,
}

fn io_err(path: &Path, what: &str, e: impl std::fmt::Display) -> CoreError {
    CoreError::Backend(format!("frontier spill {}: {what}: {e}", path.display()))
}

impl Spill {
    /// Creates (or empties) the file at `path`.
    pub fn create(path: &Path) -> CoreResult<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| io_err(path, "open", e))?;
        Ok(Spill {
            path: path.to_path_buf(),
            file,
            pending: Vec::new(),
            write_at: 0,
            read_at: 0,
            len: 0,
        })
    }

    /// Jobs in the file and not read back yet.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends a job. An error (a full disk) leaves the spill as it was.
    pub fn push(&mut self, job: &FetchJob) -> CoreResult<()> {
        let mark = self.pending.len();
        if let Err(e) = serde_json::to_writer(&mut self.pending, job) {
            self.pending.truncate(mark);
            return Err(io_err(&self.path, "encode", e));
        }
        self.pending.push(b'\n');
        if self.pending.len() >= WRITE_BUFFER
            && let Err(e) = self.flush()
        {
            self.pending.truncate(mark);
            return Err(e);
        }
        self.len += 1;
        Ok(())
    }

    fn flush(&mut self) -> CoreResult<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.file
            .seek(SeekFrom::Start(self.write_at))
            .and_then(|_| self.file.write_all(&self.pending))
            .map_err(|e| io_err(&self.path, "write", e))?;
        self.write_at += self.pending.len() as u64;
        self.pending.clear();
        Ok(())
    }

    /// Takes up to `max` jobs, oldest first. A line that does not decode (the file was
    /// damaged behind the crawl's back) is an error, and nothing is taken: the
    /// jobs stay in the file.
    pub fn pop(&mut self, max: usize) -> CoreResult<Vec<FetchJob>> {
        let mut out = Vec::new();
        if self.len == 0 || max == 0 {
            return Ok(out);
        }
        // What is still in `pending` is read from there once the file is through.
        self.flush()?;
        let mut buf = Vec::with_capacity(READ_CHUNK);
        while out.len() < max && self.read_at < self.write_at {
            let want = (self.write_at - self.read_at).min(READ_CHUNK as u64) as usize;
            buf.resize(want, 0);
            self.file
                .seek(SeekFrom::Start(self.read_at))
                .and_then(|_| self.file.read_exact(&mut buf))
                .map_err(|e| io_err(&self.path, "read", e))?;
            let mut used = 0;
            for line in buf.split_inclusive(|b| *b == b'\n') {
                if out.len() >= max || line.last() != Some(&b'\n') {
                    break;
                }
                let job: FetchJob = serde_json::from_slice(&line[..line.len() - 1])
                    .map_err(|e| io_err(&self.path, "decode", e))?;
                used += line.len();
                out.push(job);
            }
            if used == 0 {
                // One line longer than a chunk: read it whole.
                let end = buf.iter().position(|b| *b == b'\n');
                if end.is_none() && want < READ_CHUNK {
                    return Err(io_err(&self.path, "read", "a line without its end"));
                }
                let line = self.read_long_line()?;
                used = line.len() + 1;
                out.push(
                    serde_json::from_slice(&line).map_err(|e| io_err(&self.path, "decode", e))?,
                );
            }
            self.read_at += used as u64;
        }
        self.len -= out.len();
        if self.len == 0 {
            // Read to the end: start the file over so it does not grow with the crawl.
            self.file
                .set_len(0)
                .map_err(|e| io_err(&self.path, "truncate", e))?;
            self.read_at = 0;
            self.write_at = 0;
        }
        Ok(out)
    }

    fn read_long_line(&mut self) -> CoreResult<Vec<u8>> {
        let mut line = Vec::new();
        self.file
            .seek(SeekFrom::Start(self.read_at))
            .map_err(|e| io_err(&self.path, "read", e))?;
        let mut byte = [0u8; 1];
        let mut reader = std::io::BufReader::new(&self.file);
        loop {
            reader
                .read_exact(&mut byte)
                .map_err(|e| io_err(&self.path, "read", e))?;
            if byte[0] == b'\n' {
                return Ok(line);
            }
            line.push(byte[0]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(i: usize, path_len: usize) -> FetchJob {
        FetchJob {
            url: format!("http://h{}.test/{i}/{}", i % 7, "x".repeat(path_len)),
            host: format!("h{}.test", i % 7),
            priority: i as i64,
            ..Default::default()
        }
    }

    /// Jobs come back whole, oldest first, across buffer and chunk edges and lines longer
    /// than a chunk, and the file is emptied once read through.
    #[test]
    fn jobs_come_back_in_order_and_the_file_is_emptied() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("frontier.spill");
        let mut s = Spill::create(&path).unwrap();
        let mut expect = std::collections::VecDeque::new();
        let mut got = Vec::new();
        for round in 0..3 {
            for i in 0..5_000 {
                let long = if i % 997 == 0 { READ_CHUNK + 10 } else { 20 };
                let j = job(round * 10_000 + i, long);
                s.push(&j).unwrap();
                expect.push_back(j);
            }
            // Part of the backlog is read before more comes.
            got.extend(s.pop(3_333).unwrap());
        }
        assert_eq!(s.len(), expect.len() - got.len());
        while !s.is_empty() {
            got.extend(s.pop(1_000).unwrap());
        }
        assert_eq!(got, Vec::from(expect));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        assert!(s.pop(10).unwrap().is_empty());
        // Usable again after it was emptied.
        s.push(&job(1, 3)).unwrap();
        assert_eq!(s.pop(10).unwrap(), vec![job(1, 3)]);
    }

    /// A damaged file is a clear error, not a panic or a silently lost job.
    #[test]
    fn a_damaged_line_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("frontier.spill");
        let mut s = Spill::create(&path).unwrap();
        for i in 0..3 {
            s.push(&job(i, 5)).unwrap();
        }
        s.flush().unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let second = bytes.iter().position(|b| *b == b'\n').unwrap() + 1;
        bytes[second] = b'#';
        std::fs::write(&path, bytes).unwrap();
        let e = s.pop(10).unwrap_err().to_string();
        assert!(e.contains("decode"), "{e}");
    }
}
