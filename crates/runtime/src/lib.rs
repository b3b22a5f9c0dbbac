//! The embedded runtime: a whole crawl in one process, from a [`CrawlPlan`] to
//! `pages.jsonl`, `warc/`, the index and `report.json`; `trawl watch`'s rounds of
//! re-crawls; and `trawl refine`'s batch of pages refined outside a crawl. The command
//! line, the API server and the tests all run crawls through [`crawl`]; none of them
//! reaches the runtime through an argument parser.

pub mod crawl_dir;
pub mod embedded;
pub mod export;
pub mod extract_files;
pub mod index_files;
mod index_task;
pub mod ingest;
pub mod page_gate;
pub mod plan;
pub mod progress;
pub mod refine;
pub mod report;
pub mod search;
pub mod watch;

pub use embedded::{CrawlOutputs, crawl};
pub use plan::{
    CrawlControl, CrawlPlan, IndexChoice, IndexPlan, LiveCounts, StartMode, StartUrls, Targets,
};
pub use progress::{NoProgress, ProgressSink};
pub use report::CrawlReport;
pub use trawl_notifier::webhook;
