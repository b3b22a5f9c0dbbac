//! `trawl-ingester`: a distributed `trawl ingest`. Reads the web archives `trawl submit
//! --archives LIST` put on `trawl.archives`, one at a time per worker, through extraction
//! and the crawl's dedup gate in Redis onto `trawl.docs` for the indexers; each archive's
//! progress is in Redis for `trawl status`.

use trawl_cluster::service::{self, Hop, Stage};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    service::run(Stage::Ingester, |ctx, backends| async move {
        let archives = backends
            .queue::<trawl_ingester::ArchiveJob>(Hop::Archives)
            .await?;
        let gate = backends.dedup_gate(&ctx.spec).await?;
        let ledger = backends.ledger(&ctx.spec).await?;
        trawl_ingester::serve(ctx, archives, gate, ledger).await
    })
    .await
}
