//! The `trawl` command's library: the embedded runtime and its options, report and progress
//! display. The binary in `main.rs` is a thin command-line front.

pub mod archive_list;
pub mod cluster;
pub mod corpus;
pub mod crawl_dir;
pub mod embedded;
pub mod extract;
pub mod index;
mod index_task;
pub mod map;
pub mod options;
pub mod page_gate;
pub mod progress;
pub mod refine;
pub mod report;
pub mod serve;
pub mod watch;
pub use trawl_notifier::webhook;

pub use embedded::{CrawlOutputs, crawl};
pub use options::CrawlOptions;
pub use report::CrawlReport;
