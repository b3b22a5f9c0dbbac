//! `refined.jsonl` (the cluster's `refined-<replica>-<pid>.jsonl`): one row a page, written
//! whole. A write that fails (a full disk) is cut back off the file and is an error, so the
//! file always ends on a whole line and the page stays unacked.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use trawl_refine::page::Refined;

#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct SinkError {
    pub path: String,
    pub source: std::io::Error,
}

pub struct RefinedSink {
    path: PathBuf,
    file: Mutex<(File, u64)>,
}

impl RefinedSink {
    /// Appends to `path` (created when absent); a torn last line (a kill mid-write of an
    /// earlier run) is cut off first.
    pub fn open(path: &Path) -> Result<RefinedSink, SinkError> {
        let err = |source| SinkError {
            path: path.display().to_string(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(err)?;
        let whole = whole_lines_len(path).map_err(err)?;
        if whole < file.metadata().map_err(err)?.len() {
            file.set_len(whole).map_err(err)?;
        }
        Ok(RefinedSink {
            path: path.to_path_buf(),
            file: Mutex::new((file, whole)),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one row as a line.
    pub fn write(&self, row: &Refined) -> Result<(), SinkError> {
        let mut line = serde_json::to_vec(row).map_err(|e| SinkError {
            path: self.path.display().to_string(),
            source: std::io::Error::other(e),
        })?;
        line.push(b'\n');
        let mut guard = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let (file, len) = &mut *guard;
        match file.write_all(&line).and_then(|()| file.flush()) {
            Ok(()) => {
                *len += line.len() as u64;
                Ok(())
            }
            Err(source) => {
                // Whatever part of the line reached the file is taken back.
                let _ = file.set_len(*len);
                Err(SinkError {
                    path: self.path.display().to_string(),
                    source,
                })
            }
        }
    }
}

/// The length of the file's whole lines, read backwards from its end.
fn whole_lines_len(path: &Path) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = File::open(path)?;
    let mut end = f.metadata()?.len();
    let mut buf = vec![0u8; 64 << 10];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let n = (end - start) as usize;
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut buf[..n])?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use trawl_refine::page::Engine;

    #[test]
    fn rows_are_appended_whole_and_a_torn_line_is_cut_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("refined.jsonl");
        let row = Refined::skipped(&Engine::Extract, "http://a/", "s", "too_short");
        let sink = RefinedSink::open(&path).unwrap();
        sink.write(&row).unwrap();
        drop(sink);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"url\": \"torn").unwrap();
        drop(f);
        let sink = RefinedSink::open(&path).unwrap();
        sink.write(&row).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let rows: Vec<Refined> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows, vec![row.clone(), row]);
    }
}
