//! A job's results as its `pages.jsonl` holds them: an index of its lines (results,
//! failures, pages robots.txt disallows), extended as the file grows and built anew when
//! a resumed crawl cut it back; a status page reads only the lines it returns.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use axum::http::StatusCode;
use serde_json::{Value, json};
use trawl_core::{PageRecord, UrlKind};

use super::api::ApiError;

/// What a job's `pages.jsonl` holds so far, by line.
#[derive(Default)]
pub struct LineIndex {
    /// The last line indexed, and its bytes' digest: when they are not at that offset
    /// any more, the file was cut back and written again, and is indexed anew.
    pub last: Option<(u64, u32, u64)>,
    pub read_to: u64,
    /// Results: offset and length of each line.
    pub data: Vec<(u64, u32)>,
    pub errors: Vec<Value>,
    pub robots_blocked: Vec<String>,
}

/// Reads the whole lines added to `pages.jsonl` since the last call.
pub fn refresh(ix: &mut LineIndex, pages: &Path, hide_duplicates: bool) -> Result<(), ApiError> {
    let Ok(mut f) = std::fs::File::open(pages) else {
        return Ok(());
    };
    let len = f.metadata().map_err(ApiError::internal)?.len();
    let still_there = match ix.last {
        None => true,
        Some((off, n, digest)) => {
            let mut buf = vec![0; n as usize];
            len >= ix.read_to
                && f.seek(SeekFrom::Start(off)).is_ok()
                && f.read_exact(&mut buf).is_ok()
                && line_digest(&buf) == digest
        }
    };
    if !still_there {
        // Cut back and written again (a resumed crawl): read it anew.
        *ix = LineIndex::default();
    }
    f.seek(SeekFrom::Start(ix.read_to))
        .map_err(ApiError::internal)?;
    let mut r = BufReader::new(f);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = r.read_until(b'\n', &mut line).map_err(ApiError::internal)?;
        if n == 0 || line.last() != Some(&b'\n') {
            break;
        }
        let off = ix.read_to;
        ix.read_to += n as u64;
        ix.last = Some((off, n.min(u32::MAX as usize) as u32, line_digest(&line)));
        let Ok(rec) = serde_json::from_slice::<PageRecord>(&line) else {
            tracing::warn!(
                offset = off,
                "a line of a job's pages.jsonl is not a record"
            );
            continue;
        };
        classify(ix, &rec, off, n, hide_duplicates);
    }
    Ok(())
}

fn line_digest(line: &[u8]) -> u64 {
    (trawl_core::state::seen_digest(&String::from_utf8_lossy(line)) >> 64) as u64
}

fn classify(ix: &mut LineIndex, rec: &PageRecord, off: u64, len: usize, hide_duplicates: bool) {
    if rec.kind != UrlKind::Page {
        return;
    }
    let cut = rec
        .error
        .as_ref()
        .is_some_and(|e| matches!(e.kind.as_str(), "body_too_large" | "record_too_large"));
    match &rec.error {
        Some(e) if !cut => {
            if e.kind == "robots_disallowed" {
                ix.robots_blocked.push(rec.url.clone());
            } else {
                ix.errors.push(json!({
                    "id": format!("{}-{}", e.kind, ix.errors.len()),
                    "timestamp": rec.fetched_at,
                    "url": rec.url,
                    "code": e.kind.to_ascii_uppercase(),
                    "error": e.message,
                }));
            }
        }
        _ if rec.status == 0 => {}
        _ if hide_duplicates && rec.duplicate_of.is_some() => {}
        _ => ix.data.push((off, len.min(u32::MAX as usize) as u32)),
    }
}

pub fn read_record(f: &mut std::fs::File, off: u64, len: u32) -> Result<PageRecord, ApiError> {
    f.seek(SeekFrom::Start(off)).map_err(ApiError::internal)?;
    let mut buf = vec![0; len as usize];
    f.read_exact(&mut buf).map_err(ApiError::internal)?;
    serde_json::from_slice(&buf).map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            format!("a line of the job's pages.jsonl does not read back: {e}"),
        )
    })
}
