//! The ingester stage: a distributed `trawl ingest`. `trawl submit --archives LIST` puts one
//! [`ArchiveJob`] per web archive on the `archives` hop; each ingester worker takes one,
//! reads it in file order (a URL downloaded first), turns its records into pages with
//! `trawl ingest`'s own code (`trawl_corpus::ingest`), passes them through the crawl's
//! shared dedup gate and publishes them to the `docs` hop, where the indexers write them.
//! The archive is acked once every record is through; its progress per archive is in the
//! [`ArchiveLedger`], which `trawl status` reads.
//!
//! A try that fails (the file is missing, the download fails) is put back with a delay and
//! dead-lettered with its reason after [`ARCHIVE_TRIES`]. A replica that dies mid-archive
//! leaves the job unacked: the next delivery resumes after the last record the ledger has
//! as through (written after every page published), and the one page that may have been
//! published after it is stored once (`Queue::publish_keyed`, within the hop's duplicate
//! window) and keeps its first verdict (the gate is idempotent per id).

pub mod archive_list;
mod read;
pub mod source;
mod worker;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use trawl_core::archives::ArchiveLedger;
use trawl_core::pipeline::{Stage, StageContext, StageResult, Workers};
use trawl_core::queue::Queue;
use trawl_dedup::Gate;

pub use trawl_core::ArchiveJob;
pub use worker::{IngestError, Parts, run_worker};

/// Failed reads of an archive before it is dead-lettered (deliveries that end in a crash, a
/// stop or a scale-in are no tries: the hop's delivery limit is a thousand, as `changed`'s).
pub const ARCHIVE_TRIES: u32 = 3;

#[derive(Debug, Clone)]
pub struct IngesterConfig {
    /// Archives read at once by this process.
    pub archives_at_once: usize,
    /// Records extracted at once per archive.
    pub threads: usize,
    pub tries: u32,
    /// The delay before the next try: this times the tries so far.
    pub retry_delay: Duration,
    /// Where downloads go (removed once read).
    pub download_dir: PathBuf,
    /// This replica's name in the ledger.
    pub replica: String,
    pub max_message_bytes: Option<usize>,
    /// How often an archive's progress is written to the ledger while it is read.
    pub checkpoint_every: Duration,
}

impl IngesterConfig {
    pub fn from_context(ctx: &StageContext) -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        IngesterConfig {
            // Two: one archive downloads while the other is extracted.
            archives_at_once: ctx.process.concurrency.clamp(1, 2),
            threads: cores,
            tries: ARCHIVE_TRIES,
            retry_delay: Duration::from_secs(5),
            download_dir: ctx.process.out.join("downloads"),
            replica: format!(
                "{}-{}",
                ctx.process.instance_name(Stage::Ingester.name()),
                std::process::id()
            ),
            max_message_bytes: ctx.max_message_bytes,
            checkpoint_every: Duration::from_secs(1),
        }
    }
}

/// The ingester as a service: its workers over the `archives` hop (which the runtime
/// connects by name: it is not one of the crawl's `Hops`), the crawl's gate and ledger.
pub async fn serve(
    ctx: StageContext,
    archives: Arc<dyn Queue<ArchiveJob>>,
    gate: Option<Arc<dyn Gate>>,
    ledger: Arc<dyn ArchiveLedger>,
) -> StageResult {
    let cfg = Arc::new(IngesterConfig::from_context(&ctx));
    let parts = Arc::new(Parts {
        crawl: ctx.spec.crawl.clone(),
        archives,
        docs: ctx.hops.docs.clone(),
        gate,
        ledger,
    });
    tracing::info!(
        archives_at_once = cfg.archives_at_once,
        threads = cfg.threads,
        "reading archives"
    );
    ctx.set_ready();
    let mut workers = Workers::new();
    workers.spawn_n(cfg.archives_at_once, || {
        run_worker(parts.clone(), cfg.clone(), ctx.shutdown.clone())
    });
    workers.join().await
}
