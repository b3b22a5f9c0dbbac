//! The crawl store's engine, measured: SQLite as the crawl writes it (trawl-store's
//! journal, WAL, `synchronous = NORMAL`: survives a killed process without an fsync per
//! commit) against redb (one write transaction per commit, `Durability::Immediate`, the
//! level at which redb keeps a commit across a killed process), same URLs, same facts,
//! same commit size. Prints URLs/s written, bytes per URL on disk and the time to read
//! everything back (what a resume does).
//!
//! `cargo run --release -p trawl-store --example store_bench [URLS]` (default 200,000).

use std::time::Instant;

use redb::{ReadableDatabase, ReadableTable};

use trawl_core::journal::Journal as _;
use trawl_core::{FetchJob, MESSAGE_VERSION, PageRecord, ResponseFacts, UrlKind, WarcRef};

const BATCH: usize = 64;

fn page(i: usize) -> PageRecord {
    PageRecord {
        url: url(i),
        final_url: url(i),
        status: 200,
        fetched_at: "2026-12-01T10:00:00.123Z".into(),
        simhash: Some(format!(
            "{:016x}",
            (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        )),
        text_hash: Some(format!(
            "{:032x}",
            (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        )),
        facts: ResponseFacts {
            etag: Some(format!("\"{i:x}-5f3a1c\"")),
            last_modified: Some("Tue, 01 Dec 2026 09:00:00 GMT".into()),
            payload_digest: Some("sha1:2UQ7XHOBPXRSWQ2DXB6E4KZJVZG7FSQF".into()),
            warc: Some(WarcRef {
                record_id: format!("<urn:uuid:{i:08x}-1c2d-4e5f-8a9b-0c1d2e3f4a5b>"),
                date: "2026-12-01T10:00:00Z".into(),
            }),
            revisit: None,
        },
        ..PageRecord::default()
    }
}

fn url(i: usize) -> String {
    format!(
        "https://docs.example.org/std/collections/module{}/struct.Item{i}.html",
        i % 97
    )
}

fn job(i: usize) -> FetchJob {
    FetchJob {
        v: MESSAGE_VERSION,
        crawl: "bench".into(),
        url: url(i),
        host: "docs.example.org".into(),
        depth: 3,
        kind: UrlKind::Page,
        priority: 30_000_000,
        retries: 0,
        lastmod: None,
        robots_wait_since_ms: None,
        claim: None,
    }
}

fn sqlite(dir: &std::path::Path, n: usize) -> (f64, u64, f64) {
    let conn = trawl_store::schema::open(&dir.join("crawl.db")).unwrap();
    let task = trawl_store::journal::JournalTask::start(conn).unwrap();
    let j = task.journal();
    let t = Instant::now();
    let mut offset = 0u64;
    for start in (0..n).step_by(BATCH) {
        let end = (start + BATCH).min(n);
        let pages: Vec<PageRecord> = (start..end).map(page).collect();
        for i in start..end {
            j.seen(&url(i)).unwrap();
            j.queued(&job(i)).unwrap();
        }
        let refs: Vec<(u64, &PageRecord)> = pages
            .iter()
            .map(|p| {
                offset += 2_000;
                (offset, p)
            })
            .collect();
        j.written(&refs, offset, Default::default(), None).unwrap();
    }
    drop(j);
    task.finish(true).unwrap();
    let write = t.elapsed().as_secs_f64();
    let bytes = std::fs::metadata(dir.join("crawl.db")).unwrap().len();
    let t = Instant::now();
    let spec = trawl_core::spec::CrawlSpec {
        crawl: "bench".into(),
        start: vec![],
        settings: Default::default(),
        index: Default::default(),
        since: None,
        due_only: false,
        state_shards: 1,
    };
    let (_, r) = trawl_store::resume::open(dir, &spec).unwrap();
    assert_eq!(r.seen.len(), n);
    (n as f64 / write, bytes, t.elapsed().as_secs_f64())
}

const URLS: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("urls");

fn redb_store(dir: &std::path::Path, n: usize) -> (f64, u64, f64) {
    let path = dir.join("crawl.redb");
    let db = redb::Database::create(&path).unwrap();
    let t = Instant::now();
    // One commit per 100 ms of a crawl at ~1,500 pages/s: about the journal's batches.
    let per_commit = 150;
    for start in (0..n).step_by(per_commit) {
        let tx = db.begin_write().unwrap();
        {
            let mut table = tx.open_table(URLS).unwrap();
            for i in start..(start + per_commit).min(n) {
                let p = page(i);
                let value = serde_json::to_vec(&(
                    1u8,
                    3u32,
                    "page",
                    30_000_000i64,
                    p.status,
                    &p.final_url,
                    &p.facts,
                    &p.text_hash,
                    &p.simhash,
                    &p.fetched_at,
                    i as u64 * 2_000,
                ))
                .unwrap();
                table.insert(p.url.as_str(), value.as_slice()).unwrap();
            }
        }
        tx.commit().unwrap();
    }
    let write = t.elapsed().as_secs_f64();
    drop(db);
    let bytes = std::fs::metadata(&path).unwrap().len();
    let t = Instant::now();
    let db = redb::Database::open(&path).unwrap();
    let rx = db.begin_read().unwrap();
    let table = rx.open_table(URLS).unwrap();
    let mut seen = 0usize;
    for row in table.iter().unwrap() {
        let (k, _) = row.unwrap();
        std::hint::black_box(trawl_core::state::seen_digest(k.value()));
        seen += 1;
    }
    assert_eq!(seen, n);
    (n as f64 / write, bytes, t.elapsed().as_secs_f64())
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    println!("{n} URLs, each seen, queued and written (the facts of a fetched page)");
    println!("| engine | URLs/s written | bytes/URL | read back (s) |");
    println!("|---|---|---|---|");
    for (name, f) in [
        (
            "SQLite (trawl-store journal)",
            sqlite as fn(&std::path::Path, usize) -> _,
        ),
        ("redb (Immediate)", redb_store),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (rate, bytes, read) = f(dir.path(), n);
        println!(
            "| {name} | {rate:.0} | {:.0} | {read:.2} |",
            bytes as f64 / n as f64
        );
    }
}
