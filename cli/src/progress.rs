//! Progress on long crawls: a live bar on a terminal, periodic log lines otherwise.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use trawl_core::counters::{Counter, Counters};

enum Mode {
    Bar(ProgressBar),
    Log(Mutex<Instant>),
    None,
}

pub struct Progress {
    mode: Mode,
}

impl Progress {
    /// `auto`: a bar when stderr is a terminal, log lines every 10 s otherwise.
    pub fn new(mode: &str) -> Self {
        let tty = std::io::stderr().is_terminal();
        let mode = match (mode, tty) {
            ("none", _) => Mode::None,
            ("bar", _) | ("auto", true) => {
                let bar = ProgressBar::new_spinner();
                bar.set_style(
                    ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                bar.enable_steady_tick(Duration::from_millis(120));
                Mode::Bar(bar)
            }
            _ => Mode::Log(Mutex::new(Instant::now())),
        };
        Self { mode }
    }

    pub fn update(&self, c: &Counters, in_flight: usize, queued: usize, elapsed: Duration) {
        let done = c.get(&Counter::Pages);
        let errors: i64 = c.errors().values().sum();
        let rate = done as f64 / elapsed.as_secs_f64().max(0.001);
        let msg = format!(
            "{done} pages done · {in_flight} in flight · {queued} queued · {errors} errors · {rate:.0} pages/s"
        );
        match &self.mode {
            Mode::Bar(bar) => bar.set_message(msg),
            Mode::Log(last) => {
                let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
                if last.elapsed() >= Duration::from_secs(10) {
                    *last = Instant::now();
                    tracing::info!("{msg}");
                }
            }
            Mode::None => {}
        }
    }

    pub fn finish(&self) {
        if let Mode::Bar(bar) = &self.mode {
            bar.finish_and_clear();
        }
    }
}
