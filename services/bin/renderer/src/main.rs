//! `trawl-renderer`: pages the extractors find empty and shaped like a client-side app,
//! rendered in Chromium (every request they make through the fetcher's checks), then
//! extracted like any page and passed through the crawl's shared near-duplicate gate.

use trawl_cluster::service::{self, Stage};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Without a browser (`process.chromium` in TRAWL_CONFIG or TRAWL_CHROMIUM, else CHROME
    // or one on PATH) the service would mark itself live and extractors would send it
    // pages: it ends before it connects.
    service::run_checked(
        Stage::Renderer,
        |s| trawl_renderer::check(&s.process),
        |ctx, backends| async move {
            let gate = backends.dedup_gate(&ctx.spec).await?;
            trawl_renderer::serve(ctx, gate).await
        },
    )
    .await
}
