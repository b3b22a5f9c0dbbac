//! Reading web archives: WARC (plain, or gzip with one member per record or one for the
//! whole file), WET (WARC `conversion` records) and the older ARC format. Records are read
//! one at a time, so a file of any size streams; a malformed record is reported and skipped,
//! and reading resumes at the next record (the next `WARC/` line, or the next gzip member),
//! so the good records around a bad one are kept.
//!
//! The `warc` crate writes trawl's own archives, but its reader reads bodies line by line and
//! stops at the first bad record; skipping and resuming is the point here, so the framing is
//! done by hand (the format is a header block, a length and a body).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::rc::Rc;

/// Bodies larger than this are skipped (reported): a record this big is not a web page.
pub const MAX_RECORD_BYTES: u64 = 64 << 20;
/// A header block larger than this is not a header block.
const MAX_HEADER_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Record {
    /// Position in the file: 1 for the first record.
    pub number: u64,
    /// `WARC-Type` (`response`, `conversion`, `resource`, `request`, ...); ARC records are
    /// `response`, and the ARC file header is `warcinfo`.
    pub kind: String,
    pub record_id: Option<String>,
    pub target_uri: Option<String>,
    pub date: Option<String>,
    /// The record's `Content-Type` (for a response: `application/http; msgtype=response`).
    pub content_type: Option<String>,
    /// `WARC-Identified-Content-Language` (Common Crawl's WET and metadata records).
    pub language: Option<String>,
    /// `WARC-Truncated`: the crawler cut the body.
    pub truncated: Option<String>,
    pub body: Vec<u8>,
}

/// What reading yields: a record, or the reason one was skipped.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Record(Record),
    Malformed { number: u64, message: String },
}

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("{path}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Warc,
    Arc { version: u8 },
}

type Errors = Rc<RefCell<Vec<String>>>;

enum Gz<R: BufRead> {
    Between(R),
    // Boxed: with the zlib-rs backend (pdf_oxide turns it on) the decoder is large.
    Decoding(Box<flate2::bufread::GzDecoder<R>>),
    Gone,
}

/// Decompresses gzip member after member as one stream (records may span members, as
/// some writers chunk them), and on a corrupt member notes the error, skips to the next
/// member header and goes on.
struct GzMembers<R: BufRead> {
    state: Gz<R>,
    errors: Errors,
}

impl<R: BufRead> Read for GzMembers<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match std::mem::replace(&mut self.state, Gz::Gone) {
                Gz::Gone => return Ok(0),
                Gz::Between(mut raw) => {
                    if raw.fill_buf()?.is_empty() {
                        return Ok(0);
                    }
                    self.state = Gz::Decoding(Box::new(flate2::bufread::GzDecoder::new(raw)));
                }
                Gz::Decoding(mut d) => match d.read(buf) {
                    Ok(0) if !buf.is_empty() => self.state = Gz::Between(d.into_inner()),
                    Ok(n) => {
                        self.state = Gz::Decoding(d);
                        return Ok(n);
                    }
                    Err(e) => {
                        self.errors
                            .borrow_mut()
                            .push(format!("corrupt gzip member: {e}"));
                        let mut raw = d.into_inner();
                        resync_gzip(&mut raw);
                        self.state = Gz::Between(raw);
                    }
                },
            }
        }
    }
}

/// Skips to the next gzip member header in the raw stream.
fn resync_gzip(raw: &mut impl BufRead) {
    loop {
        let (found, used) = match raw.fill_buf() {
            Ok([]) | Err(_) => return,
            Ok(buf) => match memchr::memmem::find(buf, &[0x1f, 0x8b, 0x08]) {
                Some(p) => (true, p),
                // Keep the last two bytes: the magic may straddle the buffer's end.
                None => (false, buf.len().saturating_sub(2).max(1)),
            },
        };
        raw.consume(used);
        if found {
            return;
        }
    }
}

/// Streams the records of one archive.
pub struct ArchiveReader {
    src: BufReader<Box<dyn Read>>,
    errors: Errors,
    format: Option<Format>,
    /// A header line found while resynchronising, to start the next record with.
    pending: Option<Vec<u8>>,
    number: u64,
    queued: VecDeque<Item>,
    done: bool,
}

impl ArchiveReader {
    pub fn open(path: &Path) -> Result<Self, ArchiveError> {
        let f = File::open(path).map_err(|source| ArchiveError::Open {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Self::new(BufReader::with_capacity(256 << 10, f)))
    }

    pub fn new<R: BufRead + 'static>(mut raw: R) -> Self {
        let gzip = raw
            .fill_buf()
            .map(|b| b.starts_with(&[0x1f, 0x8b]))
            .unwrap_or(false);
        let errors: Errors = Rc::default();
        let inner: Box<dyn Read> = if gzip {
            Box::new(GzMembers {
                state: Gz::Between(raw),
                errors: errors.clone(),
            })
        } else {
            Box::new(raw)
        };
        ArchiveReader {
            src: BufReader::with_capacity(256 << 10, inner),
            errors,
            format: None,
            pending: None,
            number: 0,
            queued: VecDeque::new(),
            done: false,
        }
    }
}

impl Iterator for ArchiveReader {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        if let Some(item) = self.queued.pop_front() {
            return Some(item);
        }
        if self.done {
            return None;
        }
        let item = read_record(
            &mut self.src,
            &mut self.format,
            &mut self.pending,
            &mut self.number,
        );
        // Decompression errors met while reading come out first, in order.
        for message in self.errors.borrow_mut().drain(..) {
            self.queued.push_back(Item::Malformed {
                number: self.number,
                message,
            });
        }
        match item {
            Some(i) => self.queued.push_back(i),
            None => self.done = true,
        }
        self.queued.pop_front()
    }
}

/// Reads one line including its end, at most `cap` bytes; empty at the end of input.
fn read_line(r: &mut impl BufRead, cap: usize) -> std::io::Result<Vec<u8>> {
    let mut line = Vec::new();
    r.take(cap as u64).read_until(b'\n', &mut line)?;
    Ok(line)
}

/// At most `n` characters of a header line, for error messages.
fn shown(l: &[u8], n: usize) -> String {
    String::from_utf8_lossy(trim_eol(l))
        .chars()
        .take(n)
        .collect()
}

fn trim_eol(l: &[u8]) -> &[u8] {
    let l = l.strip_suffix(b"\n").unwrap_or(l);
    l.strip_suffix(b"\r").unwrap_or(l)
}

fn read_record(
    r: &mut impl BufRead,
    format: &mut Option<Format>,
    pending: &mut Option<Vec<u8>>,
    number: &mut u64,
) -> Option<Item> {
    // The first non-blank line starts the record.
    let first = loop {
        let line = match pending.take() {
            Some(l) => l,
            None => match read_line(r, MAX_HEADER_BYTES) {
                Ok(l) => l,
                Err(e) => {
                    *number += 1;
                    return Some(Item::Malformed {
                        number: *number,
                        message: format!("read error: {e}"),
                    });
                }
            },
        };
        if line.is_empty() {
            return None;
        }
        if !trim_eol(&line).iter().all(|c| c.is_ascii_whitespace()) {
            break line;
        }
    };
    *number += 1;
    let n = *number;
    if format.is_none() {
        *format = Some(if first.starts_with(b"filedesc://") {
            Format::Arc { version: 1 }
        } else {
            Format::Warc
        });
    }
    let result = match format {
        Some(Format::Arc { version }) => read_arc(r, &first, version, n),
        _ => read_warc(r, &first, n),
    };
    match result {
        Ok(rec) => Some(Item::Record(rec)),
        Err(message) => {
            resync(r, pending, *format == Some(Format::Warc));
            Some(Item::Malformed { number: n, message })
        }
    }
}

/// After a bad record, skips to the next line that starts a record.
fn resync(r: &mut impl BufRead, pending: &mut Option<Vec<u8>>, warc: bool) {
    loop {
        let Ok(line) = read_line(r, MAX_HEADER_BYTES) else {
            return;
        };
        if line.is_empty() {
            return;
        }
        let starts = if warc {
            line.starts_with(b"WARC/")
        } else {
            // An ARC header line: a URL, then four or more fields, the last a length.
            let l = trim_eol(&line);
            l.contains(&b' ')
                && l.iter().filter(|c| **c == b' ').count() >= 4
                && l.rsplit(|c| *c == b' ')
                    .next()
                    .is_some_and(|f| !f.is_empty() && f.iter().all(u8::is_ascii_digit))
                && (l.starts_with(b"http") || l.starts_with(b"dns:") || l.starts_with(b"filedesc:"))
        };
        if starts {
            *pending = Some(line);
            return;
        }
    }
}

fn read_body(r: &mut impl BufRead, len: u64) -> Result<Vec<u8>, String> {
    if len > MAX_RECORD_BYTES {
        // Skip it without keeping it.
        let skipped =
            std::io::copy(&mut r.take(len), &mut std::io::sink()).map_err(|e| e.to_string())?;
        return Err(format!(
            "record body of {len} bytes is over the {MAX_RECORD_BYTES}-byte limit{}",
            if skipped < len {
                " (and truncated)"
            } else {
                ""
            }
        ));
    }
    let mut body = Vec::with_capacity(len as usize);
    r.take(len)
        .read_to_end(&mut body)
        .map_err(|e| e.to_string())?;
    Ok(body)
}

fn read_warc(r: &mut impl BufRead, first: &[u8], number: u64) -> Result<Record, String> {
    if !first.starts_with(b"WARC/") {
        return Err(format!("not a WARC record header: {:?}", shown(first, 60)));
    }
    let mut rec = Record {
        number,
        ..Record::default()
    };
    let mut length: Option<u64> = None;
    let mut header_bytes = first.len();
    loop {
        let line = read_line(r, MAX_HEADER_BYTES).map_err(|e| e.to_string())?;
        header_bytes += line.len();
        if line.is_empty() {
            return Err("end of file inside the record header".into());
        }
        if header_bytes > MAX_HEADER_BYTES {
            return Err("record header over 1 MiB".into());
        }
        let l = trim_eol(&line);
        if l.is_empty() {
            break;
        }
        let text = String::from_utf8_lossy(l);
        let Some((name, value)) = text.split_once(':') else {
            return Err(format!("header line without a colon: {:?}", shown(l, 60)));
        };
        let value = value.trim().to_string();
        match name.trim().to_ascii_lowercase().as_str() {
            "warc-type" => rec.kind = value.to_ascii_lowercase(),
            "warc-record-id" => rec.record_id = Some(value),
            "warc-target-uri" => rec.target_uri = Some(value.trim_matches(['<', '>']).to_string()),
            "warc-date" => rec.date = Some(value),
            "content-type" => rec.content_type = Some(value),
            "warc-identified-content-language" => rec.language = Some(value),
            "warc-truncated" => rec.truncated = Some(value),
            "content-length" => {
                length = Some(
                    value
                        .parse()
                        .map_err(|_| format!("bad Content-Length {value:?}"))?,
                )
            }
            _ => {}
        }
    }
    let len = length.ok_or("record without a Content-Length")?;
    if rec.kind.is_empty() {
        return Err("record without a WARC-Type".into());
    }
    rec.body = read_body(r, len)?;
    if (rec.body.len() as u64) < len {
        // The file ends inside the body: keep what there is, marked as cut.
        rec.truncated.get_or_insert_with(|| "eof".into());
    }
    Ok(rec)
}

/// `20140216050221` as `2014-02-16T05:02:21Z`.
fn arc_date(d: &str) -> Option<String> {
    (d.len() == 14 && d.bytes().all(|b| b.is_ascii_digit())).then(|| {
        format!(
            "{}-{}-{}T{}:{}:{}Z",
            &d[0..4],
            &d[4..6],
            &d[6..8],
            &d[8..10],
            &d[10..12],
            &d[12..14]
        )
    })
}

fn read_arc(
    r: &mut impl BufRead,
    first: &[u8],
    version: &mut u8,
    number: u64,
) -> Result<Record, String> {
    let line = String::from_utf8_lossy(trim_eol(first)).into_owned();
    let fields: Vec<&str> = line.split(' ').filter(|f| !f.is_empty()).collect();
    let n = fields.len();
    if n < 5 {
        return Err(format!("not an ARC record header: {:?}", shown(first, 60)));
    }
    let len: u64 = fields[n - 1]
        .parse()
        .map_err(|_| format!("bad ARC length {:?}", fields[n - 1]))?;
    // Version 1 has five fields, version 2 ten; a URL with spaces adds to the count.
    let url_fields = if *version >= 2 && n >= 10 {
        n - 9
    } else {
        n - 4
    };
    let url = fields[..url_fields].join(" ");
    let date = fields[url_fields + 1];
    let ctype = fields[url_fields + 2];
    let body = read_body(r, len)?;
    let cut = (body.len() as u64) < len;
    let is_filedesc = url.starts_with("filedesc://");
    if is_filedesc {
        // The second line of the file header is "<major> <minor> <origin>".
        if let Some(v) = body
            .split(|c| *c == b'\n')
            .next()
            .and_then(|l| l.first())
            .filter(|c| c.is_ascii_digit())
        {
            *version = v - b'0';
        }
    }
    Ok(Record {
        number,
        kind: if is_filedesc { "warcinfo" } else { "response" }.into(),
        record_id: None,
        target_uri: (!is_filedesc).then_some(url),
        date: arc_date(date),
        content_type: Some(ctype.to_string()),
        language: None,
        truncated: cut.then(|| "eof".into()),
        body,
    })
}

/// Reads every item of one file (for tests and small files).
pub fn read_all(path: &Path) -> Result<Vec<Item>, ArchiveError> {
    Ok(ArchiveReader::open(path)?.collect())
}
