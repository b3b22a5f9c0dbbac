//! `trawl ingest`: web archives through the crawl's pipeline. Records are read on one
//! thread, turned into pages (HTML through trawl-extract, WET text as it is) on worker
//! threads, and passed through the same dedup gate as a crawl before `pages.jsonl`.
//! Malformed records are reported and skipped; the good ones around them are kept.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use trawl_core::settings::PageGate;
use trawl_core::{ArchiveSource, PageRecord, UrlKind};
use trawl_dedup::{
    BoilerplateConfig, GateMethod, GatePage, GateVerdict, HostLines, MinGate, SimGate,
};
use trawl_store::gate_file::{CrawlPrints, GATE_FILE};
use trawl_store::sketch_file::CrawlSketches;

use crate::archive::{ArchiveReader, Item, Record};
use crate::http;

#[derive(Debug, Clone)]
pub struct IngestOptions {
    pub out: PathBuf,
    /// The page gate (a crawl's: MinHash by default, or SimHash); `None` turns it off.
    pub gate: Option<PageGate>,
    /// Pages the gate keeps in memory before it moves to `out/gate.db` (a quarter as many
    /// for MinHash; `trawl_store::gate_file`, `trawl_store::sketch_file`), so a large
    /// ingest does not grow with it.
    pub gate_in_memory: usize,
    /// Per-host boilerplate lines: seen on this many earlier pages of a host (0: off).
    pub boilerplate_min_pages: u32,
    pub threads: usize,
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct IngestReport {
    pub files: usize,
    /// Records read, by WARC type.
    pub records: BTreeMap<String, u64>,
    /// Pages written to `pages.jsonl`.
    pub documents: u64,
    /// Records of a page-bearing type that gave no page, by reason.
    pub skipped: BTreeMap<String, u64>,
    pub malformed: u64,
    /// The first malformed records: `file #n: message`.
    pub malformed_examples: Vec<String>,
    pub duplicates_exact: u64,
    pub duplicates_near: u64,
    pub bytes_read: u64,
    pub elapsed_s: f64,
    pub documents_per_s: f64,
}

impl IngestReport {
    /// What `trawl ingest` prints when it ends: the counts and where the outputs are.
    pub fn summary(&self, out: &Path) -> String {
        format!(
            "ingested {} files: {} records, {} documents ({} exact and {} near copies), {} skipped, {} malformed, in {:.1}s ({:.0} documents/s)\noutputs: {} , {}",
            self.files,
            self.records.values().sum::<u64>(),
            self.documents,
            self.duplicates_exact,
            self.duplicates_near,
            self.skipped.values().sum::<u64>(),
            self.malformed,
            self.elapsed_s,
            self.documents_per_s,
            out.join("pages.jsonl").display(),
            out.join("report.json").display()
        )
    }
}

/// Progress, reported about once a second.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub records: u64,
    pub documents: u64,
    pub malformed: u64,
}

fn is_text(ct: &str) -> bool {
    ct.to_ascii_lowercase().starts_with("text/plain")
}

/// An HTML body as a page, the way the crawl's extractor stage records a fetched page:
/// charset decoding, then the extraction of the UTF-8 text.
fn page_from_html(
    url: &str,
    date: &str,
    body: &[u8],
    content_type: Option<&str>,
    status: u16,
) -> PageRecord {
    let (html, charset) = trawl_body::decode_html(body, content_type);
    let mut page = PageRecord {
        url: url.to_string(),
        final_url: url.to_string(),
        status,
        kind: UrlKind::Page,
        content_type: content_type.map(String::from),
        fetched_at: date.to_string(),
        charset: Some(charset.to_string()),
        wire_bytes: body.len() as u64,
        ..PageRecord::default()
    };
    // A target URI that does not parse has no base for its links: nothing is extracted.
    if let Ok(base) = url::Url::parse(url) {
        let d = trawl_extract::extract_html(&html, &base);
        page.title = d.title;
        page.text = d.text;
        page.markdown = d.markdown.filter(|m| !m.is_empty());
        page.meta = d.meta;
        // As the crawl counts them: every link and feed found, before normalization.
        page.links_found = d.links.len() + d.feeds.len();
    }
    page
}

/// One archive record as a page, or why it is not one.
/// A response record's status, `Content-Type` and body with its content encoding undone;
/// an error for a record that holds no 2xx HTTP response.
pub fn decoded_response(rec: &Record) -> Result<(u16, String, Vec<u8>), String> {
    let resp = http::parse(&rec.body).ok_or("not an HTTP response")?;
    if !(200..300).contains(&resp.status) {
        return Err(format!("status {}xx", resp.status / 100));
    }
    let ct = resp.content_type.clone().unwrap_or_default();
    // Many archivers store the body decoded but keep the Content-Encoding header; only
    // bytes that look encoded are decoded.
    let encoding = resp.content_encoding.as_deref().filter(|e| match *e {
        "gzip" | "x-gzip" => resp.body.starts_with(&[0x1f, 0x8b]),
        "deflate" => resp.body.first().is_some_and(|b| b & 0x0f == 8),
        _ => true,
    });
    let body = trawl_body::decode_content(
        &resp.body,
        encoding,
        crate::archive::MAX_RECORD_BYTES as usize,
    )
    .map_err(|e| format!("content encoding: {e}"))?;
    Ok((resp.status, ct, body))
}

/// An HTML body: by its `Content-Type`, or by its first byte when it has none.
pub fn looks_html(ct: &str, body: &[u8]) -> bool {
    trawl_body::mentions_html(ct) || (ct.is_empty() && body.trim_ascii_start().starts_with(b"<"))
}

pub fn page_from_record(file: &str, rec: &Record) -> Result<PageRecord, String> {
    let url = rec.target_uri.clone().unwrap_or_default();
    let date = rec.date.clone().unwrap_or_default();
    let mut page = match rec.kind.as_str() {
        "response" => {
            let (status, ct, body) = decoded_response(rec)?;
            if looks_html(&ct, &body) {
                page_from_html(&url, &date, &body, Some(&ct), status)
            } else if is_text(&ct) {
                text_page(&url, &date, &body, &ct)
            } else {
                return Err("not HTML or text".into());
            }
        }
        "resource" => {
            let ct = rec.content_type.clone().unwrap_or_default();
            if trawl_body::mentions_html(&ct) {
                page_from_html(&url, &date, &rec.body, Some(&ct), 200)
            } else if is_text(&ct) {
                text_page(&url, &date, &rec.body, &ct)
            } else {
                return Err("not HTML or text".into());
            }
        }
        // WET: the archive already holds the text.
        "conversion" => text_page(&url, &date, &rec.body, "text/plain"),
        other => return Err(format!("{other} record")),
    };
    page.source = Some(ArchiveSource {
        file: file.to_string(),
        record_id: rec.record_id.clone(),
        date: rec.date.clone(),
        language: rec.language.clone(),
        record_type: rec.kind.clone(),
    });
    if rec.truncated.is_some() && page.error.is_none() {
        page.error = Some(trawl_core::FetchFailure {
            kind: "truncated".into(),
            message: format!(
                "the archive cut this record ({})",
                rec.truncated.as_deref().unwrap_or("")
            ),
        });
    }
    Ok(page)
}

fn text_page(url: &str, date: &str, body: &[u8], ct: &str) -> PageRecord {
    PageRecord {
        url: url.to_string(),
        final_url: url.to_string(),
        status: 200,
        kind: UrlKind::Page,
        content_type: Some(ct.to_string()),
        fetched_at: date.to_string(),
        text: String::from_utf8_lossy(body).trim().to_string(),
        wire_bytes: body.len() as u64,
        ..PageRecord::default()
    }
}

/// Records that can hold a page.
pub fn page_bearing(kind: &str) -> bool {
    matches!(kind, "response" | "resource" | "conversion")
}

/// The id the dedup gate knows a record by, in both ingests: its `WARC-Record-ID`, else
/// (ARC files have none) the archive's file name and the record's number in it, so two
/// captures of one URL are two pages.
pub fn gate_id(file: &str, rec: &Record) -> String {
    rec.record_id.clone().unwrap_or_else(|| {
        let name = file.rsplit(['/', '\\']).next().unwrap_or(file);
        format!("{name}#{}", rec.number)
    })
}

/// What a gate comparing by `method` is shown of the page (its SimHash written on it);
/// `None` for a page without text (no gate for it). The words are split once for both the
/// fingerprint and a MinHash sketch.
pub fn gate_page(page: &mut PageRecord, method: GateMethod) -> Option<GatePage> {
    if page.text.is_empty() {
        return None;
    }
    let g = GatePage::of(&page.text, method);
    page.simhash = Some(format!("{:016x}", g.fp.simhash));
    Some(g)
}

/// The gate's verdict written on the page: `Some(exact)` when it is a copy.
pub fn mark_copy(page: &mut PageRecord, verdict: GateVerdict) -> Option<bool> {
    match verdict {
        GateVerdict::Kept => None,
        GateVerdict::Duplicate { of, distance } => {
            page.duplicate_of = Some(of);
            page.distance = Some(distance);
            Some(distance == 0)
        }
        GateVerdict::Similar { of, similarity } => {
            page.duplicate_of = Some(of);
            page.similarity = Some(similarity);
            Some(similarity >= 1.0)
        }
    }
}

/// One record as a page through [`page_from_record`]; a record whose extraction panics
/// (a parser bug) is skipped with that reason, as the crawl's extractor stage records such
/// a page instead of stopping.
pub fn record_to_page(file: &str, rec: &Record) -> Result<PageRecord, String> {
    match one_record(file, rec, page_from_record) {
        Out::Page(p, _) => Ok(*p),
        Out::Skipped(r) => Err(r),
    }
}

enum Out {
    /// The page and the id the gate knows it by.
    Page(Box<PageRecord>, String),
    Skipped(String),
}

/// Reads every archive, writes `pages.jsonl` and `report.json` into `opts.out`.
pub fn ingest(
    paths: &[PathBuf],
    opts: &IngestOptions,
    mut progress: impl FnMut(Progress),
) -> std::io::Result<IngestReport> {
    std::fs::create_dir_all(&opts.out)?;
    let started = Instant::now();
    let mut report = IngestReport {
        files: paths.len(),
        ..IngestReport::default()
    };
    let (rec_tx, rec_rx) = sync_channel::<(Arc<str>, Record)>(256);
    let (out_tx, out_rx) = sync_channel::<Out>(256);
    let rec_rx = Arc::new(Mutex::new(rec_rx));
    let path = opts.out.join(GATE_FILE);
    let gate = opts.gate.map(|g| match g {
        PageGate::SimHash { distance } => {
            IngestGate::Sim(CrawlPrints::gate(&path, distance, opts.gate_in_memory))
        }
        PageGate::MinHash { similarity } => IngestGate::Min(CrawlSketches::gate(
            &path,
            similarity,
            opts.gate_in_memory / 4,
        )),
    });
    let boiler = (opts.boilerplate_min_pages > 0).then(|| {
        HostLines::new(BoilerplateConfig {
            min_pages: opts.boilerplate_min_pages,
            ..Default::default()
        })
    });
    let writer = std::io::BufWriter::new(std::fs::File::create(opts.out.join("pages.jsonl"))?);
    let mut sink = PageSink {
        writer,
        boiler,
        gate,
    };
    std::thread::scope(|s| -> std::io::Result<()> {
        for _ in 0..opts.threads.max(1) {
            let rx = rec_rx.clone();
            let tx = out_tx.clone();
            s.spawn(move || worker(&rx, &tx));
        }
        drop(out_tx);
        let (meta_tx, meta_rx) = std::sync::mpsc::channel::<Counted>();
        let paths = paths.to_vec();
        s.spawn(move || read_archives(&paths, rec_tx, meta_tx));
        let mut last = Instant::now();
        for out in out_rx {
            report.count(&meta_rx);
            match out {
                Out::Skipped(reason) => *report.skipped.entry(reason).or_default() += 1,
                Out::Page(page, id) => sink.write(page, &id, &mut report)?,
            }
            if last.elapsed().as_secs_f64() >= 1.0 {
                last = Instant::now();
                progress(Progress {
                    records: report.records.values().sum(),
                    documents: report.documents,
                    malformed: report.malformed,
                });
            }
        }
        report.count(&meta_rx);
        Ok(())
    })?;
    sink.writer.flush()?;
    report.elapsed_s = started.elapsed().as_secs_f64();
    report.documents_per_s = report.documents as f64 / report.elapsed_s.max(1e-9);
    std::fs::write(
        opts.out.join("report.json"),
        serde_json::to_vec_pretty(&report)?,
    )?;
    Ok(report)
}

/// What the reader tells the report: a record's type, or the message of a malformed one.
type Counted = (String, Option<String>);

/// The reader: records in file order; counts and malformed records go straight to the
/// report through a channel of their own. Both channels close when it returns: the
/// workers stop, and then the loop over their pages.
fn read_archives(
    paths: &[PathBuf],
    rec_tx: SyncSender<(Arc<str>, Record)>,
    meta_tx: Sender<Counted>,
) {
    for p in paths {
        let name: Arc<str> = Arc::from(p.display().to_string());
        let reader = match ArchiveReader::open(p) {
            Ok(r) => r,
            Err(e) => {
                let _ = meta_tx.send(("malformed".into(), Some(e.to_string())));
                continue;
            }
        };
        for item in reader {
            match item {
                Item::Record(r) => {
                    let _ = meta_tx.send((r.kind.clone(), None));
                    if page_bearing(&r.kind) && rec_tx.send((name.clone(), r)).is_err() {
                        return;
                    }
                }
                Item::Malformed { number, message } => {
                    let _ = meta_tx.send((
                        "malformed".into(),
                        Some(format!("{name} #{number}: {message}")),
                    ));
                }
            }
        }
    }
}

impl IngestReport {
    /// Takes in what the reader has sent so far, without waiting for more.
    fn count(&mut self, meta_rx: &Receiver<Counted>) {
        for (kind, msg) in meta_rx.try_iter() {
            if let Some(m) = msg {
                self.malformed += 1;
                tracing::warn!("skipped: {m}");
                if self.malformed_examples.len() < 20 {
                    self.malformed_examples.push(m);
                }
            } else {
                *self.records.entry(kind).or_default() += 1;
            }
        }
    }
}

/// Where the pages go, in the order they come: per-host boilerplate stripped, the dedup
/// gate asked, then `pages.jsonl`.
struct PageSink {
    writer: std::io::BufWriter<std::fs::File>,
    boiler: Option<HostLines>,
    gate: Option<IngestGate>,
}

/// The ingest's page gate, of the crawl's methods, in memory and then in `gate.db`.
enum IngestGate {
    Sim(SimGate<CrawlPrints>),
    Min(MinGate<CrawlSketches>),
}

impl IngestGate {
    fn method(&self) -> GateMethod {
        match self {
            Self::Sim(_) => GateMethod::SimHash,
            Self::Min(_) => GateMethod::MinHash,
        }
    }

    /// Every record is a document of its own (its id is new), so the check matches and
    /// stores.
    fn check(&self, page: &GatePage, id: &str) -> Result<GateVerdict, String> {
        match (self, &page.minhash) {
            (Self::Sim(g), _) => g
                .try_match_and_insert(page.fp, id)
                .map_err(|e| e.to_string()),
            (Self::Min(g), Some(sk)) => g.try_check_and_insert(sk, id).map_err(|e| e.to_string()),
            (Self::Min(_), None) => Err("no MinHash sketch".into()),
        }
    }
}

impl PageSink {
    fn write(
        &mut self,
        mut page: Box<PageRecord>,
        id: &str,
        report: &mut IngestReport,
    ) -> std::io::Result<()> {
        report.bytes_read += page.wire_bytes;
        if let Some(b) = &self.boiler
            && !page.text.is_empty()
        {
            let host = url::Url::parse(&page.url)
                .ok()
                .and_then(|u| u.host_str().map(String::from))
                .unwrap_or_default();
            let (text, dropped) = b.strip(&host, &page.text);
            page.text = text;
            page.boilerplate_lines = dropped as u32;
        }
        let method = self
            .gate
            .as_ref()
            .map_or(GateMethod::SimHash, IngestGate::method);
        if let Some(gp) = gate_page(&mut page, method)
            && let Some(g) = &self.gate
        {
            let verdict = g
                .check(&gp, id)
                .map_err(|e| std::io::Error::other(format!("dedup gate: {e}")))?;
            match mark_copy(&mut page, verdict) {
                Some(true) => report.duplicates_exact += 1,
                Some(false) => report.duplicates_near += 1,
                None => {}
            }
        }
        serde_json::to_writer(&mut self.writer, &page)?;
        self.writer.write_all(b"\n")?;
        report.documents += 1;
        Ok(())
    }
}

fn worker(rx: &Mutex<Receiver<(Arc<str>, Record)>>, tx: &std::sync::mpsc::SyncSender<Out>) {
    loop {
        let next = rx.lock().ok().and_then(|r| r.recv().ok());
        let Some((file, rec)) = next else { return };
        if tx.send(one_record(&file, &rec, page_from_record)).is_err() {
            return;
        }
    }
}

/// One record through `to_page`. A record whose extraction panics (a parser bug) is
/// counted as skipped and the ingest goes on, as the crawl's extractor stage records such a
/// page instead of stopping.
fn one_record(
    file: &str,
    rec: &Record,
    to_page: impl FnOnce(&str, &Record) -> Result<PageRecord, String>,
) -> Out {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| to_page(file, rec))) {
        Ok(Ok(p)) => Out::Page(Box::new(p), gate_id(file, rec)),
        Ok(Err(reason)) => Out::Skipped(reason),
        Err(_) => {
            tracing::error!(
                file,
                record = rec.record_id.as_deref().unwrap_or(""),
                url = rec.target_uri.as_deref().unwrap_or(""),
                "extraction panicked; record skipped"
            );
            Out::Skipped("extraction panicked".into())
        }
    }
}

/// Whether `s` names a remote archive rather than a local file.
pub fn is_url(s: &str) -> bool {
    s.starts_with("http://") || s.starts_with("https://")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_extraction_is_a_skipped_record() {
        let rec = Record::default();
        let out = one_record("f.warc", &rec, |_, _| panic!("parser bug"));
        assert!(matches!(out, Out::Skipped(r) if r == "extraction panicked"));
        let out = one_record("f.warc", &rec, |_, _| Ok(PageRecord::default()));
        assert!(matches!(out, Out::Page(..)));
    }
}
