//! What an output directory holds, looked at before anything is written to it: a crawl
//! directory is never overwritten unless asked, and a directory trawl did not make never is.

use std::path::Path;

use crate::schema::{self, UrlState, keys};
use crate::{DB_FILE, StoreResult};

/// The embedded frontier's overflow (`trawl_core::spill`); made anew at each start.
pub const SPILL_FILE: &str = "frontier.spill";

/// The entries trawl writes in a crawl directory (and `--overwrite` removes).
pub const OUTPUTS: [&str; 14] = [
    DB_FILE,
    "crawl.db-wal",
    "crawl.db-shm",
    "pages.jsonl",
    "refined.jsonl",
    "report.json",
    "changes.jsonl",
    "changes-undelivered.jsonl",
    "changes-delivered.txt",
    "warc",
    "index",
    "index-preview",
    SPILL_FILE,
    crate::gate_file::GATE_FILE,
];

#[derive(Debug, Clone, PartialEq)]
pub enum DirState {
    /// Missing or empty.
    Empty,
    /// trawl's outputs without a store (written by a trawl before the store existed).
    Outputs,
    Crawl(CrawlSummary),
    /// Entries trawl did not write (the first few, by name).
    Foreign(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct CrawlSummary {
    /// False for a store whose crawl was stopped before its spec was committed: nothing
    /// of it can have been written.
    pub started: bool,
    pub crawl: String,
    pub finished: bool,
    pub started_at: String,
    pub runs: u64,
    /// The start URLs.
    pub start: Vec<String>,
    pub written: u64,
    pub queued: u64,
    /// The crawl a re-crawl compares with.
    pub since: Option<std::path::PathBuf>,
}

pub fn inspect(dir: &Path) -> StoreResult<DirState> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(DirState::Empty),
        Err(e) => return Err(e.into()),
    };
    let mut names = Vec::new();
    for e in entries {
        let e = e?;
        // An empty directory holds nothing to lose: `warc/` made ready as the mount point of
        // another disk for the archives is a fresh start, not someone else's files.
        if e.file_type()?.is_dir() && std::fs::read_dir(e.path())?.next().is_none() {
            continue;
        }
        names.push(e.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    let foreign: Vec<String> = names
        .iter()
        .filter(|n| !OUTPUTS.contains(&n.as_str()))
        .take(5)
        .cloned()
        .collect();
    if !foreign.is_empty() {
        return Ok(DirState::Foreign(foreign));
    }
    if names.is_empty() {
        return Ok(DirState::Empty);
    }
    if !names.iter().any(|n| n == DB_FILE) {
        return Ok(DirState::Outputs);
    }
    summary(dir).map(DirState::Crawl)
}

fn summary(dir: &Path) -> StoreResult<CrawlSummary> {
    let conn = schema::open(&dir.join(DB_FILE))?;
    let spec: Option<trawl_core::spec::CrawlSpec> = schema::get(&conn, keys::SPEC)?
        .map(|s| serde_json::from_str(&s))
        .transpose()?;
    let count = |state: UrlState| -> StoreResult<u64> {
        let n: i64 = conn.query_row(
            "SELECT count(*) FROM urls WHERE state = ?1",
            [state as i64],
            |r| r.get(0),
        )?;
        Ok(n as u64)
    };
    Ok(CrawlSummary {
        started: spec.is_some(),
        crawl: spec.as_ref().map(|s| s.crawl.clone()).unwrap_or_default(),
        finished: schema::get(&conn, keys::STATUS)?.as_deref() == Some(schema::FINISHED),
        started_at: schema::get(&conn, keys::STARTED_AT)?.unwrap_or_default(),
        runs: schema::get_u64(&conn, keys::RUNS)?,
        start: spec
            .map(|s| s.start.into_iter().map(|(u, _)| u).collect())
            .unwrap_or_default(),
        written: count(UrlState::Written)?,
        queued: count(UrlState::Queued)?,
        since: schema::get(&conn, keys::SINCE)?.map(std::path::PathBuf::from),
    })
}

/// Removes trawl's outputs from `dir` (and nothing else).
pub fn remove_outputs(dir: &Path) -> StoreResult<()> {
    for name in OUTPUTS {
        let p = dir.join(name);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p)?,
            Ok(_) => std::fs::remove_file(&p)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_directories_hold_nothing_to_lose() {
        let d = std::env::temp_dir().join(format!("trawl-dir-{}", std::process::id()));
        std::fs::create_dir_all(d.join("warc")).unwrap();
        std::fs::create_dir_all(d.join("mnt")).unwrap();
        assert_eq!(inspect(&d).unwrap(), DirState::Empty);
        std::fs::write(d.join("mnt/notes.txt"), "mine").unwrap();
        assert_eq!(inspect(&d).unwrap(), DirState::Foreign(vec!["mnt".into()]));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
