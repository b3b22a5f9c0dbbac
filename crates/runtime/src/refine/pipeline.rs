//! A refine run's threads: a reader feeding pages in input order, workers refining them,
//! and the caller writing the rows back in input order. The reader may run at most a
//! window ahead of the writer: a slow page holds every row after it in the reorder
//! buffer, so that buffer is bounded too.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use trawl_corpus::archive::{ArchiveReader, Item};
use trawl_refine::bff::NgramDedup;
use trawl_refine::page::{Engine, Refined};
use trawl_refine::program::Mode;

use super::{RefinePlan, RefineReport, html_of, is_html};

/// Consecutive backend failures after which a run stops.
const MAX_BACKEND_FAILURES: usize = 20;

/// What the workers do.
pub(super) struct Work<'a> {
    pub(super) engine: &'a Engine,
    pub(super) mode: Mode,
    pub(super) workers: usize,
    pub(super) max_html: usize,
    /// Pages read at most.
    pub(super) limit: usize,
}

/// What the reader met that is no page: response records that are not HTML, and the
/// first malformed records and unreadable files.
#[derive(Default)]
pub(super) struct Side {
    pub(super) not_html: usize,
    pub(super) malformed: Vec<String>,
}

struct PageIn {
    seq: usize,
    url: String,
    source: String,
    html: String,
}

/// How far the writer is, for the reader to wait on.
struct Window {
    written: Mutex<usize>,
    moved: Condvar,
    size: usize,
}

impl Window {
    /// Waits until page `seq` is within the window of the pages written.
    fn wait_turn(&self, seq: usize) {
        let Ok(mut written) = self.written.lock() else {
            return;
        };
        while seq >= *written + self.size {
            match self.moved.wait_timeout(written, Duration::from_secs(1)) {
                Ok((w, _)) => written = w,
                Err(_) => return,
            }
        }
    }

    fn advance(&self, written: usize) {
        if let Ok(mut w) = self.written.lock() {
            *w = written;
        }
        self.moved.notify_all();
    }
}

/// Refines every page of `files` with `work`, writing the rows to `out` in input order.
pub(super) fn refine_in_order(
    work: &Work,
    files: &[PathBuf],
    side: &Mutex<Side>,
    out: &mut Output,
) -> anyhow::Result<()> {
    let (in_tx, in_rx) = sync_channel::<PageIn>(work.workers * 4);
    let (out_tx, out_rx) = sync_channel::<(usize, Refined)>(work.workers * 4);
    let window = Window {
        written: Mutex::new(0),
        moved: Condvar::new(),
        size: work.workers * 16,
    };
    std::thread::scope(|s| -> anyhow::Result<()> {
        // Owned by the workers alone: when they are gone the reader's sends fail and it stops.
        let in_rx = Arc::new(Mutex::new(in_rx));
        for _ in 0..work.workers {
            let (rx, tx) = (in_rx.clone(), out_tx.clone());
            let (engine, mode, max_html) = (work.engine.clone(), work.mode, work.max_html);
            s.spawn(move || refine_pages(&engine, mode, max_html, &rx, &tx));
        }
        drop(in_rx);
        drop(out_tx);
        let (window, limit) = (&window, work.limit);
        s.spawn(move || {
            let mut feed = Feed {
                tx: in_tx,
                seq: 0,
                limit,
                window,
                side,
            };
            feed.files(files);
        });
        // Rows are written in input order, whatever order the workers finish in.
        let mut pending: BTreeMap<usize, Refined> = BTreeMap::new();
        let mut next = 0usize;
        for (seq, r) in out_rx {
            pending.insert(seq, r);
            while let Some(r) = pending.remove(&next) {
                next += 1;
                window.advance(next);
                out.write(r)?;
            }
        }
        Ok(())
    })
}

/// A worker: pages from `rx` until the reader is done, refined into `tx`.
fn refine_pages(
    engine: &Engine,
    mode: Mode,
    max_html: usize,
    rx: &Mutex<Receiver<PageIn>>,
    tx: &SyncSender<(usize, Refined)>,
) {
    loop {
        let next = rx.lock().ok().and_then(|r| r.recv().ok());
        let Some(p) = next else { return };
        let r =
            trawl_refine::page::refine_guarded(engine, mode, &p.url, &p.source, &p.html, max_html);
        if tx.send((p.seq, r)).is_err() {
            return;
        }
    }
}

/// The reader: pages numbered in input order, at most `limit` of them.
struct Feed<'a> {
    tx: SyncSender<PageIn>,
    seq: usize,
    limit: usize,
    window: &'a Window,
    side: &'a Mutex<Side>,
}

impl Feed<'_> {
    fn files(&mut self, files: &[PathBuf]) {
        for f in files {
            let more = if is_html(f) {
                self.html_file(f)
            } else {
                self.archive(f)
            };
            if !more {
                return;
            }
        }
    }

    /// Hands one page to the workers; false when the reader should stop (the limit is
    /// reached, or the workers are gone).
    fn offer(&mut self, url: String, source: String, html: String) -> bool {
        if self.seq >= self.limit {
            return false;
        }
        self.window.wait_turn(self.seq);
        let page = PageIn {
            seq: self.seq,
            url,
            source,
            html,
        };
        if self.tx.send(page).is_err() {
            return false;
        }
        self.seq += 1;
        true
    }

    fn note(&self, f: impl FnOnce(&mut Side)) {
        if let Ok(mut s) = self.side.lock() {
            f(&mut s);
        }
    }

    fn html_file(&mut self, f: &Path) -> bool {
        let name = f.display().to_string();
        let Ok(raw) = std::fs::read(f) else {
            self.note(|s| s.malformed.push(format!("{name}: unreadable")));
            return true;
        };
        let (html, _) = trawl_body::decode_html(&raw, None);
        let url = format!(
            "file://{}",
            std::fs::canonicalize(f)
                .unwrap_or_else(|_| f.to_path_buf())
                .display()
        );
        self.offer(url, name, html)
    }

    fn archive(&mut self, f: &Path) -> bool {
        let name = f.display().to_string();
        let reader = match ArchiveReader::open(f) {
            Ok(r) => r,
            Err(e) => {
                self.note(|s| s.malformed.push(e.to_string()));
                return true;
            }
        };
        for item in reader {
            match item {
                Item::Record(rec) => {
                    let Some(html) = html_of(&rec) else {
                        if rec.kind == "response" {
                            self.note(|s| s.not_html += 1);
                        }
                        continue;
                    };
                    let url = rec.target_uri.clone().unwrap_or_default();
                    if !self.offer(url, format!("{name}#{}", rec.number), html) {
                        return false;
                    }
                }
                Item::Malformed { number, message } => {
                    self.note(|s| s.malformed.push(format!("{name} #{number}: {message}")));
                }
            }
        }
        true
    }
}

/// Where the rows go: `refined.jsonl`, `training.jsonl` with `--training-pairs`, the
/// n-gram dedup's filter, the report and the progress line.
pub(super) struct Output {
    rows: std::io::BufWriter<std::fs::File>,
    pairs: Option<std::io::BufWriter<std::fs::File>>,
    dedup: Option<NgramDedup>,
    report: RefineReport,
    /// Backend failures in a row.
    failing: usize,
    progress: std::sync::Arc<dyn super::RefineProgress>,
    started: Instant,
}

impl Output {
    pub(super) fn create(plan: &RefinePlan, report: RefineReport) -> anyhow::Result<Output> {
        let file = |name: &str| -> anyhow::Result<_> {
            Ok(std::io::BufWriter::new(std::fs::File::create(
                plan.out.join(name),
            )?))
        };
        Ok(Output {
            rows: file("refined.jsonl")?,
            pairs: plan
                .training_pairs
                .then(|| file("training.jsonl"))
                .transpose()?,
            dedup: plan
                .dedup
                .map(|d| NgramDedup::new(d.ngram, d.threshold, d.expected, 0.01)),
            report,
            failing: 0,
            progress: plan.progress.clone(),
            started: Instant::now(),
        })
    }

    fn write(&mut self, mut r: Refined) -> anyhow::Result<()> {
        // A backend that fails page after page is down or misconfigured: stop rather than
        // record the whole input as skipped.
        self.failing = if r.skipped.as_deref() == Some("backend") {
            self.failing + 1
        } else {
            0
        };
        if self.failing >= MAX_BACKEND_FAILURES {
            bail!(
                "the model backend failed on {} pages in a row, the last: {}",
                self.failing,
                r.error.as_deref().unwrap_or("?")
            );
        }
        if let (Some(d), Some(t)) = (self.dedup.as_mut(), r.text.as_deref()) {
            let (share, keep) = d.check(t);
            if !keep {
                r.duplicate_of = Some(format!("ngram-overlap:{share:.3}"));
                r.text = None;
                self.report.duplicates += 1;
            }
        }
        self.report.add(&r);
        if let (Some(w), Some(program)) = (self.pairs.as_mut(), &r.program)
            && r.skipped.is_none()
        {
            let row = serde_json::json!({"input": trawl_refine::lines::number_lines(&r.lines), "output": program, "url": r.url});
            writeln!(w, "{row}")?;
        }
        serde_json::to_writer(&mut self.rows, &r)?;
        self.rows.write_all(b"\n")?;
        self.progress.update(&self.report, self.started.elapsed());
        Ok(())
    }

    /// Flushes the rows and writes `refine-report.json` into `dir`.
    pub(super) fn finish(mut self, side: Side, dir: &Path) -> anyhow::Result<RefineReport> {
        self.rows.flush()?;
        if let Some(w) = self.pairs.as_mut() {
            w.flush()?;
        }
        self.progress.finish();
        let mut report = self.report;
        report.records_not_html = side.not_html;
        report.malformed = side.malformed.into_iter().take(20).collect();
        report.dedup_filter_bytes = self.dedup.as_ref().map_or(0, NgramDedup::bytes);
        report.elapsed_s = self.started.elapsed().as_secs_f64();
        report.pages_per_s = report.pages as f64 / report.elapsed_s.max(1e-9);
        report.completion_tokens_per_s =
            report.completion_tokens as f64 / report.elapsed_s.max(1e-9);
        std::fs::write(
            dir.join("refine-report.json"),
            serde_json::to_vec_pretty(&report)?,
        )?;
        Ok(report)
    }
}
