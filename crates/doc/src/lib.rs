//! Documents beyond HTML as text and Markdown: PDF (its text layer; pages without one
//! counted as scanned), DOCX, plain text and Markdown. What a crawl reaches and what the
//! API's file parsing receives go through [`extract`], which bounds each document in time
//! (a deadline checked between pages, and a watchdog around the whole) and in memory
//! (the input is the fetcher's capped body; archive parts and text are capped).

mod docx;
mod pdf;
mod plain;

use std::time::{Duration, Instant};

pub use trawl_body::doc_kind::{DocKind, kind_of};

/// How far one document is read.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Characters of text kept; the rest is cut (`DocText::cut`).
    pub max_chars: usize,
    /// PDF pages read, at most.
    pub max_pages: usize,
    /// Time for the whole document: past it no further page is read, and a page that
    /// does not return by twice it abandons the document.
    pub deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_chars: 8 << 20,
            max_pages: 5_000,
            deadline: Duration::from_secs(30),
        }
    }
}

/// A document as text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DocText {
    pub title: Option<String>,
    pub author: Option<String>,
    /// Creation and modification dates as the file states them.
    pub created: Option<String>,
    pub modified: Option<String>,
    pub language: Option<String>,
    pub text: String,
    pub markdown: String,
    /// PDF pages read, and those among them with no text layer (scanned images).
    pub pages: u32,
    pub scanned_pages: u32,
    /// Not read to its end: past `max_chars`, `max_pages` or the deadline.
    pub cut: bool,
    /// The last block was a list item (the next one follows on the next line).
    last_tight: bool,
}

impl DocText {
    /// Appends a block (paragraph, heading, list item): Markdown and text, a blank line
    /// between blocks (none between consecutive list items).
    pub(crate) fn push_block(&mut self, markdown: &str, text: &str, tight: bool) {
        if !self.markdown.is_empty() {
            self.markdown.push_str(if tight && self.last_tight {
                "\n"
            } else {
                "\n\n"
            });
        }
        self.markdown.push_str(markdown);
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(text);
        self.last_tight = tight;
    }

    /// Appends a PDF page's text: its lines as they are, pages a blank line apart.
    pub(crate) fn push_page(&mut self, text: &str) {
        if !self.text.is_empty() {
            self.text.push_str("\n\n");
            self.markdown.push_str("\n\n");
        }
        self.text.push_str(text);
        self.markdown.push_str(text);
    }

    /// Appends a table row (with its separator after the first).
    pub(crate) fn push_row(&mut self, line: &str, text: &str, first: bool, cells: usize) {
        if first && !self.markdown.is_empty() {
            self.markdown.push_str("\n\n");
        } else if !first {
            self.markdown.push('\n');
        }
        self.markdown.push_str(line);
        if first {
            self.markdown.push('\n');
            self.markdown
                .push_str(&format!("|{}", " --- |".repeat(cells.max(1))));
        }
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(text);
        self.last_tight = false;
    }

    pub(crate) fn end_table(&mut self) {
        self.last_tight = false;
    }

    /// The first Markdown heading's text.
    pub(crate) fn first_heading(&self) -> Option<String> {
        self.markdown
            .lines()
            .find_map(|l| l.strip_prefix('#'))
            .map(|l| l.trim_start_matches('#').trim().to_string())
            .filter(|t| !t.is_empty())
    }

    /// Trims what was written.
    pub(crate) fn finish(&mut self) {
        self.text = self.text.trim().to_string();
        self.markdown = self.markdown.trim().to_string();
    }
}

/// Why a document gave no text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DocError {
    /// Not a document of its kind, or broken past reading.
    #[error("unreadable {0}")]
    Unreadable(String),
    /// Larger than what is read (an archive part inflating past its cap).
    #[error("too large: {0}")]
    TooLarge(String),
    /// Encrypted: its text cannot be read without the password.
    #[error("encrypted document")]
    Encrypted,
    /// A page did not return in time; the document was abandoned.
    #[error("not read within {0:?}")]
    Timeout(Duration),
    /// The parser failed on it (a bug in it, caught).
    #[error("the {0} parser failed on it")]
    Panicked(&'static str),
}

impl DocError {
    /// The record's `error.kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            DocError::Unreadable(_) => "document_unreadable",
            DocError::TooLarge(_) => "document_too_large",
            DocError::Encrypted => "document_encrypted",
            DocError::Timeout(_) => "document_timeout",
            DocError::Panicked(_) => "document_failed",
        }
    }
}

/// Reads `bytes` as a document of `kind`, on a thread of its own: a parser that panics
/// is an error, and one that does not return within twice the deadline is left behind
/// (it ends when its page does) and the document is an error.
pub fn extract(bytes: Vec<u8>, kind: DocKind, limits: Limits) -> Result<DocText, DocError> {
    let wait = limits.deadline * 2;
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let name = kind.as_str();
    let spawned = std::thread::Builder::new()
        .name(format!("trawl-doc-{name}"))
        // Deep object graphs recurse in the parsers: room for them, not a crash.
        .stack_size(64 << 20)
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                extract_here(&bytes, kind, &limits)
            }));
            let _ = tx.send(r.unwrap_or(Err(DocError::Panicked(name))));
        });
    if spawned.is_err() {
        return Err(DocError::Panicked(name));
    }
    match rx.recv_timeout(wait) {
        Ok(r) => r,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(DocError::Timeout(wait)),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(DocError::Panicked(name)),
    }
}

/// [`extract`] on the calling thread (no watchdog): for callers that have one.
pub fn extract_here(bytes: &[u8], kind: DocKind, limits: &Limits) -> Result<DocText, DocError> {
    let started = Instant::now();
    match kind {
        DocKind::Pdf => pdf::extract(bytes, limits, started),
        DocKind::Docx => docx::extract(bytes, limits),
        DocKind::Text => Ok(plain::text(bytes, limits)),
        DocKind::Markdown => Ok(plain::markdown(bytes, limits)),
    }
}
