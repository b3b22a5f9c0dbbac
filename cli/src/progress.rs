//! Progress on long crawls: live lines on a terminal (the crawl's, and the index's once it
//! has work), periodic log lines otherwise. Log lines written while the bars are shown go
//! above them ([`LogWriter`]), never through them.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use trawl_core::counters::{Counter, Counters};

/// The bars on screen, for [`LogWriter`].
static SHOWN: Mutex<Option<MultiProgress>> = Mutex::new(None);

/// stderr for the log: a line is printed above the live bars while they are shown.
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let shown = SHOWN.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match shown {
            Some(mp) => mp.suspend(|| std::io::stderr().write_all(buf))?,
            None => std::io::stderr().write_all(buf)?,
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

struct Bars {
    all: MultiProgress,
    crawl: ProgressBar,
    index: Mutex<Option<ProgressBar>>,
}

enum Mode {
    Bar(Bars),
    Log(Mutex<Instant>),
    None,
}

pub struct Progress {
    mode: Mode,
}

fn spinner(all: &MultiProgress) -> ProgressBar {
    let bar = all.add(ProgressBar::new_spinner());
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

impl Progress {
    /// `auto`: bars when stderr is a terminal, log lines every 10 s otherwise.
    pub fn new(mode: &str) -> Self {
        let tty = std::io::stderr().is_terminal();
        let mode = match (mode, tty) {
            ("none", _) => Mode::None,
            ("bar", _) | ("auto", true) => {
                let all = MultiProgress::new();
                let crawl = spinner(&all);
                *SHOWN.lock().unwrap_or_else(|e| e.into_inner()) = Some(all.clone());
                Mode::Bar(Bars {
                    all,
                    crawl,
                    index: Mutex::new(None),
                })
            }
            _ => Mode::Log(Mutex::new(Instant::now())),
        };
        Self { mode }
    }

    fn show(&self, crawl: Option<String>, index: Option<String>) {
        match &self.mode {
            Mode::Bar(b) => {
                if let Some(m) = crawl {
                    b.crawl.set_message(m);
                }
                if let Some(m) = index {
                    let mut ix = b.index.lock().unwrap_or_else(|e| e.into_inner());
                    ix.get_or_insert_with(|| spinner(&b.all)).set_message(m);
                }
            }
            Mode::Log(last) => {
                let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
                if last.elapsed() >= Duration::from_secs(10) {
                    *last = Instant::now();
                    for m in crawl.iter().chain(index.iter()) {
                        tracing::info!("{m}");
                    }
                }
            }
            Mode::None => {}
        }
    }
}

impl trawl_runtime::ProgressSink for Progress {
    /// The crawl's line, and the index's when there is one.
    fn update(
        &self,
        c: &Counters,
        in_flight: usize,
        queued: usize,
        elapsed: Duration,
        index: Option<String>,
    ) {
        let done = c.get(&Counter::Pages);
        let errors: i64 = c.errors().values().sum();
        let rate = done as f64 / elapsed.as_secs_f64().max(0.001);
        let msg = format!(
            "crawl: {done} pages done · {in_flight} in flight · {queued} queued · {errors} errors · {rate:.0} pages/s"
        );
        self.show(Some(msg), index);
    }

    /// The crawl is over; the index goes on.
    fn crawl_done(&self, pages: i64, took: Duration, index: Option<String>) {
        let msg = format!(
            "crawl: done, {pages} pages in {}",
            trawl_indexer::follow::clock(took)
        );
        self.show(Some(msg), index);
    }

    fn finish(&self) {
        if let Mode::Bar(b) = &self.mode {
            b.crawl.finish_and_clear();
            if let Some(ix) = b.index.lock().unwrap_or_else(|e| e.into_inner()).take() {
                ix.finish_and_clear();
            }
            *SHOWN.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
    }
}

/// `trawl refine`'s counts, on the same line or log as a crawl's.
impl trawl_runtime::refine::RefineProgress for Progress {
    fn update(&self, r: &trawl_runtime::refine::RefineReport, elapsed: Duration) {
        self.show(Some(r.progress_line(elapsed)), None);
    }

    fn finish(&self) {
        trawl_runtime::ProgressSink::finish(self);
    }
}
