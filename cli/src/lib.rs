//! The `trawl` command's library: the commands' flags mapped onto the runtime's plans, the
//! progress display, and the commands not yet in libraries of their own. The crawl itself
//! is `trawl-runtime`'s. The binary in `main.rs` is a thin command-line front.

pub mod cluster;
pub mod corpus;
pub mod extract;
pub mod index;
pub mod map;
pub mod options;
pub mod progress;
pub mod refine;
pub mod serve;
pub mod watch;
pub use trawl_notifier::webhook;

pub use options::CrawlArgs;
pub use trawl_runtime::{CrawlOutputs, CrawlPlan, CrawlReport, crawl};
