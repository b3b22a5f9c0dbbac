//! WARC/1.1 output: every HTTP exchange as a `request` and a `response` record, one gzip
//! member per record (so any record can be read from its offset), files rotated at a size
//! limit. Records are built with the `warc` crate; writes happen on one thread fed by a
//! bounded channel, so slow disks push back on the fetchers instead of buffering without end.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use sha1::{Digest, Sha1};
use tokio::sync::mpsc;
use warc::{BufferedBody, Record, RecordType, WarcHeader, WarcWriter};

#[derive(Debug, Clone)]
pub struct WarcConfig {
    pub dir: PathBuf,
    /// File names are `{prefix}-{timestamp}-{serial}.warc.gz`.
    pub prefix: String,
    /// A new file starts once the current one reaches this size.
    pub max_file_bytes: u64,
}

impl WarcConfig {
    /// The crawl's WARC output in `dir` with names starting `prefix`; `None` when the
    /// settings turn WARC off.
    pub fn for_crawl(
        s: &trawl_core::settings::CrawlSettings,
        dir: PathBuf,
        prefix: String,
    ) -> Option<Self> {
        s.warc.then_some(WarcConfig {
            dir,
            prefix,
            max_file_bytes: s.warc_max_bytes,
        })
    }
}

/// A service replica's own WARC series in `OUT/warc`: names carry `series` (the stage's
/// prefix), the replica's name and the process id, so replicas never write one file.
/// `None` when the crawl's settings turn WARC off.
pub fn replica_series(
    spec: &trawl_core::spec::CrawlSpec,
    process: &trawl_core::settings::ProcessSettings,
    stage: &str,
    series: &str,
) -> Result<Option<WarcWriterTask>, String> {
    let prefix = format!(
        "{series}-{}-{}",
        process.instance_name(stage),
        std::process::id()
    );
    WarcConfig::for_crawl(&spec.settings, process.out.join("warc"), prefix)
        .map(WarcWriterTask::start)
        .transpose()
        .map_err(|e| format!("WARC output: {e}"))
}

/// Flushes and closes a series off the async threads (the writer blocks).
pub async fn finish_series(w: Option<WarcWriterTask>) -> Result<(), String> {
    let Some(w) = w else {
        return Ok(());
    };
    tokio::task::spawn_blocking(move || w.finish())
        .await
        .map_err(|e| format!("WARC output: {e}"))?
        .map(|_| ())
        .map_err(|e| format!("WARC output: {e}"))
}

/// One request/response pair as it went over the wire.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The response record's `WARC-Record-ID` (`<urn:uuid:...>`), chosen by the fetcher so
    /// the page's record can point at it.
    pub record_id: String,
    pub target_uri: String,
    pub date: DateTime<Utc>,
    pub ip: Option<IpAddr>,
    /// Request line and headers, CRLF-terminated, blank line included.
    pub request_head: Vec<u8>,
    /// Status line and headers as received, blank line included.
    pub response_head: Vec<u8>,
    /// The entity body exactly as received (still content-encoded).
    pub payload: Vec<u8>,
    /// Its [`payload_digest`], computed once by the fetcher.
    pub payload_digest: String,
    /// The body was cut at the size cap.
    pub truncated: bool,
    /// Archive the response as a revisit of an earlier record (its payload is not kept).
    pub revisit: Option<Revisit>,
}

/// WARC/1.1 revisit profiles (section 6.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevisitProfile {
    /// A 304 to a conditional request.
    ServerNotModified,
    /// A full response whose payload digest equals the earlier one's.
    IdenticalPayloadDigest,
}

impl RevisitProfile {
    pub fn uri(self) -> &'static str {
        match self {
            RevisitProfile::ServerNotModified => {
                "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
            }
            RevisitProfile::IdenticalPayloadDigest => {
                "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
            }
        }
    }
}

/// The earlier record a revisit refers to.
#[derive(Debug, Clone, PartialEq)]
pub struct Revisit {
    pub profile: RevisitProfile,
    pub refers_to: trawl_core::WarcRef,
    /// The earlier payload's digest, carried forward (a 304 has no payload of its own).
    pub payload_digest: Option<String>,
}

/// A record derived from a response (WARC/1.1 section 6.8): the DOM a browser built from
/// a page, as the renderer archives it.
#[derive(Debug, Clone)]
pub struct Conversion {
    /// `<urn:uuid:...>`, chosen by the caller so the page can point at it.
    pub record_id: String,
    pub target_uri: String,
    pub date: DateTime<Utc>,
    /// The `WARC-Record-ID` of the response it was made from.
    pub refers_to: Option<String>,
    pub content_type: String,
    pub block: Vec<u8>,
}

enum Entry {
    Exchange(Exchange),
    Conversion(Conversion),
}

enum Cmd {
    /// A record to archive, and where to say whether it is on disk.
    Write(Box<Entry>, tokio::sync::oneshot::Sender<Result<(), String>>),
    Close,
}

#[derive(Debug, thiserror::Error)]
pub enum WarcError {
    #[error("WARC writer stopped")]
    Stopped,
    #[error("WARC output: {0}")]
    Io(#[from] io::Error),
    #[error("WARC record: {0}")]
    Record(String),
}

/// A handle fetchers write through; cheap to clone.
#[derive(Clone)]
pub struct WarcHandle {
    tx: mpsc::Sender<Cmd>,
    failed: Arc<Mutex<Option<String>>>,
}

impl WarcHandle {
    /// Archives the exchange; returns once it is written and flushed (a page points at
    /// its record only when the record is there).
    pub async fn write(&self, ex: Exchange) -> Result<(), WarcError> {
        self.send(Entry::Exchange(ex)).await
    }

    /// Archives a conversion record; returns once it is written and flushed.
    pub async fn write_conversion(&self, c: Conversion) -> Result<(), WarcError> {
        self.send(Entry::Conversion(c)).await
    }

    async fn send(&self, entry: Entry) -> Result<(), WarcError> {
        let (done, written) = tokio::sync::oneshot::channel();
        self.tx
            .send(Cmd::Write(Box::new(entry), done))
            .await
            .map_err(|_| WarcError::Stopped)?;
        match written.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(WarcError::Record(e)),
            Err(_) => Err(WarcError::Stopped),
        }
    }

    /// Why the writer stopped, once it has failed (a full disk, a write error): the
    /// fetchers stop rather than crawl on without archives.
    pub fn failure(&self) -> Option<String> {
        if let Some(e) = self
            .failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            return Some(e);
        }
        self.tx
            .is_closed()
            .then(|| "the WARC writer stopped".to_string())
    }
}

/// Owns the writer thread.
pub struct WarcWriterTask {
    handle: WarcHandle,
    thread: std::thread::JoinHandle<Result<Vec<PathBuf>, WarcError>>,
}

impl WarcWriterTask {
    pub fn start(cfg: WarcConfig) -> Result<Self, WarcError> {
        std::fs::create_dir_all(&cfg.dir)?;
        let (tx, mut rx) = mpsc::channel::<Cmd>(256);
        let failed: Arc<Mutex<Option<String>>> = Arc::default();
        let failure = failed.clone();
        let thread = std::thread::Builder::new()
            .name("warc-writer".into())
            .spawn(move || {
                let mut out = RotatingFile::new(cfg);
                let result = (|| {
                    while let Some(cmd) = rx.blocking_recv() {
                        match cmd {
                            Cmd::Write(entry, done) => {
                                let r = out.write_entry(&entry);
                                let _ =
                                    done.send(r.as_ref().map(|_| ()).map_err(|e| e.to_string()));
                                r?
                            }
                            Cmd::Close => break,
                        }
                    }
                    out.finish()
                })();
                if let Err(e) = &result {
                    tracing::error!(error = %e, "the WARC writer stopped");
                    *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
                }
                result
            })?;
        Ok(Self {
            handle: WarcHandle { tx, failed },
            thread,
        })
    }

    pub fn handle(&self) -> WarcHandle {
        self.handle.clone()
    }

    /// Writes what is queued, closes the file and returns every file written. Blocks.
    pub fn finish(self) -> Result<Vec<PathBuf>, WarcError> {
        let _ = self.handle.tx.blocking_send(Cmd::Close);
        self.thread
            .join()
            .map_err(|_| WarcError::Record("writer thread panicked".into()))?
    }
}

struct RotatingFile {
    cfg: WarcConfig,
    current: Option<(BufWriter<File>, u64)>,
    files: Vec<PathBuf>,
    stamp: String,
}

impl RotatingFile {
    fn new(cfg: WarcConfig) -> Self {
        Self {
            cfg,
            current: None,
            files: Vec::new(),
            stamp: Utc::now().format("%Y%m%d%H%M%S").to_string(),
        }
    }

    fn open(&mut self) -> Result<(), WarcError> {
        // A resumed crawl writes next to the files of its earlier runs: never over them.
        let mut serial = self.files.len();
        let (name, file) = loop {
            let name = format!("{}-{}-{:05}.warc.gz", self.cfg.prefix, self.stamp, serial);
            match File::create_new(self.cfg.dir.join(&name)) {
                Ok(f) => break (name, f),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => serial += 1,
                Err(e) => return Err(e.into()),
            }
        };
        let path = self.cfg.dir.join(&name);
        let mut w = BufWriter::new(file);
        let info = warcinfo(&name)?;
        let n = write_member(&mut w, &info)?;
        self.files.push(path);
        self.current = Some((w, n));
        Ok(())
    }

    fn write_entry(&mut self, entry: &Entry) -> Result<(), WarcError> {
        if self
            .current
            .as_ref()
            .is_none_or(|(_, size)| *size >= self.cfg.max_file_bytes)
        {
            if let Some((mut w, _)) = self.current.take() {
                w.flush()?;
            }
            self.open()?;
        }
        let Some((w, size)) = self.current.as_mut() else {
            return Err(WarcError::Record("no open WARC file".into()));
        };
        match entry {
            Entry::Exchange(ex) => {
                let (response, request) = records(ex)?;
                *size += write_member(w, &request)?;
                *size += write_member(w, &response)?;
            }
            Entry::Conversion(c) => *size += write_member(w, &conversion(c)?)?,
        }
        // Whole exchanges reach the file as they are written: a killed crawl leaves at
        // most the last one torn, which `repair` cuts off.
        w.flush()?;
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<PathBuf>, WarcError> {
        if let Some((mut w, _)) = self.current.take() {
            w.flush()?;
        }
        Ok(self.files)
    }
}

/// The `WARC-Payload-Digest` of a payload: `sha1:` + base32.
pub fn payload_digest(payload: &[u8]) -> String {
    sha1_b32(payload)
}

fn sha1_b32(data: &[u8]) -> String {
    format!("sha1:{}", data_encoding::BASE32.encode(&Sha1::digest(data)))
}

fn set(rec: &mut Record<BufferedBody>, h: WarcHeader, v: &str) -> Result<(), WarcError> {
    rec.set_header(h, v)
        .map(|_| ())
        .map_err(|e| WarcError::Record(e.to_string()))
}

fn base_record(ty: RecordType, body: Vec<u8>, date: DateTime<Utc>) -> Record<BufferedBody> {
    let mut rec = Record::<BufferedBody>::with_body(body);
    rec.set_warc_version("1.1");
    rec.set_warc_type(ty);
    rec.set_date(date);
    rec
}

fn warcinfo(filename: &str) -> Result<Record<BufferedBody>, WarcError> {
    let body = format!(
        "software: trawl/{}\r\nformat: WARC File Format 1.1\r\nconformsTo: https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n",
        env!("CARGO_PKG_VERSION")
    );
    let mut rec = base_record(RecordType::WarcInfo, body.into_bytes(), Utc::now());
    set(&mut rec, WarcHeader::Filename, filename)?;
    set(&mut rec, WarcHeader::ContentType, "application/warc-fields")?;
    Ok(rec)
}

/// Builds (response or revisit, request) records for one exchange, linked by
/// `WARC-Concurrent-To`.
fn records(ex: &Exchange) -> Result<(Record<BufferedBody>, Record<BufferedBody>), WarcError> {
    let mut block = Vec::with_capacity(ex.response_head.len() + ex.payload.len());
    block.extend_from_slice(&ex.response_head);
    block.extend_from_slice(&ex.payload);
    let block_digest = sha1_b32(&block);
    let ty = match ex.revisit {
        Some(_) => RecordType::Revisit,
        None => RecordType::Response,
    };
    let mut resp = base_record(ty, block, ex.date);
    resp.set_warc_id(ex.record_id.clone());
    set(&mut resp, WarcHeader::TargetURI, &ex.target_uri)?;
    set(
        &mut resp,
        WarcHeader::ContentType,
        "application/http;msgtype=response",
    )?;
    set(&mut resp, WarcHeader::BlockDigest, &block_digest)?;
    match &ex.revisit {
        None => set(&mut resp, WarcHeader::PayloadDigest, &ex.payload_digest)?,
        Some(r) => {
            // Only the headers are kept; the payload is the earlier record's.
            set(&mut resp, WarcHeader::Profile, r.profile.uri())?;
            set(&mut resp, WarcHeader::RefersTo, &r.refers_to.record_id)?;
            let uri = WarcHeader::Unknown("WARC-Refers-To-Target-URI".into());
            set(&mut resp, uri, &ex.target_uri)?;
            let date = WarcHeader::Unknown("WARC-Refers-To-Date".into());
            set(&mut resp, date, &r.refers_to.date)?;
            if let Some(d) = &r.payload_digest {
                set(&mut resp, WarcHeader::PayloadDigest, d)?;
            }
            if r.profile == RevisitProfile::IdenticalPayloadDigest {
                set(&mut resp, WarcHeader::Truncated, "length")?;
            }
        }
    }
    if let Some(ip) = ex.ip {
        set(&mut resp, WarcHeader::IPAddress, &ip.to_string())?;
    }
    if ex.truncated && ex.revisit.is_none() {
        set(&mut resp, WarcHeader::Truncated, "length")?;
    }
    let req_digest = sha1_b32(&ex.request_head);
    let mut req = base_record(RecordType::Request, ex.request_head.clone(), ex.date);
    set(&mut req, WarcHeader::TargetURI, &ex.target_uri)?;
    set(
        &mut req,
        WarcHeader::ContentType,
        "application/http;msgtype=request",
    )?;
    set(&mut req, WarcHeader::BlockDigest, &req_digest)?;
    set(&mut req, WarcHeader::ConcurrentTo, resp.warc_id())?;
    if let Some(ip) = ex.ip {
        set(&mut req, WarcHeader::IPAddress, &ip.to_string())?;
    }
    Ok((resp, req))
}

fn conversion(c: &Conversion) -> Result<Record<BufferedBody>, WarcError> {
    let digest = sha1_b32(&c.block);
    let mut rec = base_record(RecordType::Conversion, c.block.clone(), c.date);
    rec.set_warc_id(c.record_id.clone());
    set(&mut rec, WarcHeader::TargetURI, &c.target_uri)?;
    set(&mut rec, WarcHeader::ContentType, &c.content_type)?;
    set(&mut rec, WarcHeader::BlockDigest, &digest)?;
    set(&mut rec, WarcHeader::PayloadDigest, &digest)?;
    if let Some(r) = &c.refers_to {
        set(&mut rec, WarcHeader::RefersTo, r)?;
    }
    Ok(rec)
}

/// Writes one record as its own gzip member; returns the compressed size.
fn write_member(w: &mut impl Write, rec: &Record<BufferedBody>) -> Result<u64, WarcError> {
    let mut raw = Vec::with_capacity(rec.content_length() as usize + 512);
    WarcWriter::new(&mut raw).write(rec)?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw)?;
    let member = gz.finish()?;
    w.write_all(&member)?;
    Ok(member.len() as u64)
}

/// Cuts a WARC file back to its last whole gzip member (each member is one record), as a
/// file written until a kill may end in a torn one. Returns the bytes cut off.
pub fn repair(path: &Path) -> io::Result<u64> {
    use std::io::{BufRead, BufReader};
    let len = std::fs::metadata(path)?.len();
    let mut r = BufReader::new(File::open(path)?);
    let mut good = 0u64;
    loop {
        if r.fill_buf()?.is_empty() {
            break;
        }
        // A member read to its end has its trailer (CRC and length checked): it is whole.
        let mut member = flate2::bufread::GzDecoder::new(CountRead::new(&mut r));
        if io::copy(&mut member, &mut io::sink()).is_err() {
            break;
        }
        good += member.into_inner().count;
    }
    if good < len {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)?
            .set_len(good)?;
    }
    Ok(len - good)
}

/// Counts the bytes a reader hands out, so a gzip member's end is known.
struct CountRead<R> {
    inner: R,
    count: u64,
}

impl<R> CountRead<R> {
    fn new(inner: R) -> Self {
        CountRead { inner, count: 0 }
    }
}

impl<R: io::BufRead> io::Read for CountRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        Ok(n)
    }
}

impl<R: io::BufRead> io::BufRead for CountRead<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        self.count += n as u64;
        self.inner.consume(n);
    }
}

/// Lists the WARC files in `dir`, oldest first.
pub fn list_warc_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".warc.gz"))
        .collect();
    v.sort();
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(i: usize) -> Exchange {
        Exchange {
            record_id: warc::Record::<BufferedBody>::generate_record_id(),
            revisit: None,
            target_uri: format!("http://example.test/{i}"),
            date: Utc::now(),
            ip: Some("127.0.0.1".parse().unwrap()),
            request_head: b"GET / HTTP/1.1\r\nHost: example.test\r\n\r\n".to_vec(),
            response_head: b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n".to_vec(),
            payload: vec![b'x'; 1000],
            payload_digest: payload_digest(&[b'x'; 1000]),
            truncated: false,
        }
    }

    #[test]
    fn rotates_and_reads_back_with_the_warc_crate() {
        let dir = tempfile::tempdir().unwrap();
        let task = WarcWriterTask::start(WarcConfig {
            dir: dir.path().to_path_buf(),
            prefix: "t".into(),
            max_file_bytes: 1500,
        })
        .unwrap();
        let h = task.handle();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            for i in 0..10 {
                h.write(exchange(i)).await.unwrap();
            }
        });
        let files = task.finish().unwrap();
        assert!(
            files.len() > 1,
            "rotation at 1500 bytes must give several files"
        );
        let mut responses = 0;
        for f in &files {
            let reader = warc::WarcReader::from_path_gzip(f).unwrap();
            for rec in reader.iter_records() {
                let rec = rec.unwrap();
                if *rec.warc_type() == RecordType::Response {
                    responses += 1;
                    assert!(rec.header(WarcHeader::PayloadDigest).is_some());
                }
            }
        }
        assert_eq!(responses, 10);
    }

    #[test]
    fn repair_cuts_a_torn_last_record_and_keeps_whole_ones() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = WarcConfig {
            dir: dir.path().to_path_buf(),
            prefix: "t".into(),
            max_file_bytes: u64::MAX,
        };
        let mut f = RotatingFile::new(cfg.clone());
        for i in 0..3 {
            f.write_entry(&Entry::Exchange(exchange(i))).unwrap();
        }
        let files = f.finish().unwrap();
        let whole = std::fs::read(&files[0]).unwrap();
        assert_eq!(repair(&files[0]).unwrap(), 0, "a whole file is left alone");
        // A kill in the middle of the next record.
        let (resp, _) = records(&exchange(9)).unwrap();
        let mut member = Vec::new();
        write_member(&mut member, &resp).unwrap();
        let mut torn = whole.clone();
        torn.extend_from_slice(&member[..member.len() / 2]);
        std::fs::write(&files[0], &torn).unwrap();
        assert_eq!(repair(&files[0]).unwrap(), (member.len() / 2) as u64);
        assert_eq!(std::fs::read(&files[0]).unwrap(), whole);
        // The next run writes a file of its own next to it.
        let mut again = RotatingFile::new(cfg);
        again.write_entry(&Entry::Exchange(exchange(10))).unwrap();
        let second = again.finish().unwrap();
        assert_ne!(second, files);
        assert_eq!(std::fs::read(&files[0]).unwrap(), whole);
    }
}
