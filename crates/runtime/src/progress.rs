//! Where a running crawl reports how far it is: the command line draws bars or logs lines,
//! an API server shows nothing (it follows [`crate::LiveCounts`] instead).

use std::time::Duration;

use trawl_core::counters::Counters;

/// How far a crawl is, sent about every 100 ms while it runs.
pub trait ProgressSink: Send + Sync {
    /// The crawl's counters, with the index's line when there is one.
    fn update(
        &self,
        counters: &Counters,
        in_flight: usize,
        queued: usize,
        elapsed: Duration,
        index: Option<String>,
    );
    /// The crawl is over; the index goes on.
    fn crawl_done(&self, pages: i64, took: Duration, index: Option<String>);
    /// The run is over: take down whatever is shown.
    fn finish(&self);
}

/// Shows nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl ProgressSink for NoProgress {
    fn update(&self, _: &Counters, _: usize, _: usize, _: Duration, _: Option<String>) {}
    fn crawl_done(&self, _: i64, _: Duration, _: Option<String>) {}
    fn finish(&self) {}
}
