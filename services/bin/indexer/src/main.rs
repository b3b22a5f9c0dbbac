//! `trawl-indexer`: writes the crawl's page records (`TRAWL_OUT/pages-<replica>-<pid>.jsonl`,
//! one file per replica), counts them in the crawl's shared report counters, and, with
//! `TRAWL_INDEX_URI`, chunks, embeds and stores them in the LanceDB index there.

// Large tensors are allocated and freed on every forward pass: mimalloc keeps the pages,
// where glibc's malloc returns them to the kernel and faults them in again.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;

use trawl_cluster::service::{self, Stage};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    trawl_index::alloc::keep_freed_pages();
    service::run(Stage::Indexer, |ctx, backends| async move {
        let archive = backends.archive(&ctx.spec).await?;
        let since = backends.history(&ctx.spec).await?.map(|h| {
            let crawl = h.crawl.clone();
            (h as _, crawl)
        });
        let history = trawl_indexer::ServiceHistory {
            archive: ctx.spec.settings.history.then(|| archive.clone() as _),
            unlinked: archive,
            since,
        };
        let dead = trawl_cluster::dead_pages::DeadPages::connect(
            &backends.client,
            &backends.settings.cluster,
            &ctx.spec.crawl,
            Some(ctx.state.clone()),
        )
        .await
        .map_err(|e| e.to_string())?;
        trawl_indexer::serve(ctx, history, Some(Arc::new(dead) as _)).await
    })
    .await
}
