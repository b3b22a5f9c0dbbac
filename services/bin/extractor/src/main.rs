//! `trawl-extractor`: main content, Markdown, metadata and links from fetched pages; new
//! links back to the frontier; every page through the crawl's shared near-duplicate gate.

use trawl_cluster::service::{self, Stage};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    service::run(Stage::Extractor, |ctx, backends| async move {
        let gate = backends.dedup_gate(&ctx.spec).await?;
        // Pages that need a browser go to the render stream only while a renderer runs.
        let renderers =
            trawl_extractor::Availability::Probe(backends.stage_probe(&ctx.spec, Stage::Renderer));
        trawl_extractor::serve(ctx, gate, renderers).await
    })
    .await
}
