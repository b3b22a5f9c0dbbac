//! An archive read in file order on a thread of its own (the reader is not `Send`), its
//! page-bearing records turned into pages on the blocking pool several at a time, and the
//! results handed on in file order, so progress is "every record up to N".

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use trawl_core::PageRecord;
use trawl_corpus::archive::{ArchiveReader, Item, Record};
use trawl_corpus::ingest::{gate_id, gate_page, page_bearing, record_to_page};
use trawl_dedup::{GateMethod, GatePage};

/// A page ready for the gate: the record, what the gate is shown of it (nothing when it has
/// no text) and the id the gate knows it by.
pub struct Ready {
    pub page: PageRecord,
    pub gate: Option<GatePage>,
    pub id: String,
}

/// What reading yields, in file order.
pub enum Read {
    Record {
        number: u64,
        kind: String,
        /// For a page-bearing record: its page, or why it gave none.
        page: Option<Result<Box<Ready>, String>>,
    },
    Malformed {
        number: u64,
        message: String,
    },
    /// The file could not be opened.
    OpenFailed(String),
    /// Every record of the file has been read.
    End,
}

enum Raw {
    Record(Box<Record>),
    Malformed { number: u64, message: String },
    OpenFailed(String),
    End,
}

/// The records of `path` after record number `after`, as pages where they bear one.
/// `name` is the archive as pages name it (`source.file`). Dropping the stream stops the
/// reader thread at its next record.
pub fn records(
    path: PathBuf,
    name: Arc<str>,
    after: u64,
    method: GateMethod,
    threads: usize,
) -> impl Stream<Item = Read> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Raw>(threads.max(1) * 4);
    std::thread::spawn(move || {
        let reader = match ArchiveReader::open(&path) {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.blocking_send(Raw::OpenFailed(e.to_string()));
                return;
            }
        };
        for item in reader {
            let raw = match item {
                Item::Record(r) if r.number > after => Raw::Record(Box::new(r)),
                Item::Malformed { number, message } if number > after => {
                    Raw::Malformed { number, message }
                }
                _ => continue,
            };
            if tx.blocking_send(raw).is_err() {
                return;
            }
        }
        let _ = tx.blocking_send(Raw::End);
    });
    let items = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    items
        .map(move |raw| {
            let name = name.clone();
            async move {
                match raw {
                    Raw::Record(rec) if page_bearing(&rec.kind) => {
                        let (number, kind) = (rec.number, rec.kind.clone());
                        let page = tokio::task::spawn_blocking(move || ready(&name, &rec, method))
                            .await
                            .unwrap_or_else(|e| Err(format!("extraction task: {e}")));
                        Read::Record {
                            number,
                            kind,
                            page: Some(page),
                        }
                    }
                    Raw::Record(rec) => Read::Record {
                        number: rec.number,
                        kind: rec.kind,
                        page: None,
                    },
                    Raw::Malformed { number, message } => Read::Malformed { number, message },
                    Raw::OpenFailed(e) => Read::OpenFailed(e),
                    Raw::End => Read::End,
                }
            }
        })
        .buffered(threads.max(1))
}

/// The record's page as `trawl ingest` makes it, and its gate page.
fn ready(name: &str, rec: &Record, method: GateMethod) -> Result<Box<Ready>, String> {
    let mut page = record_to_page(name, rec)?;
    let gate = gate_page(&mut page, method);
    Ok(Box::new(Ready {
        page,
        gate,
        id: gate_id(name, rec),
    }))
}
