//! `trawl-renderer`: pages the extractors find empty and shaped like a client-side app,
//! rendered in Chromium (every request they make through the fetcher's checks), then
//! extracted like any page and passed through the crawl's shared near-duplicate gate.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    trawl_cluster::service::run("renderer", |ctx, backends| async move {
        let gate = backends.dedup_gate(&ctx.spec).await?;
        trawl_renderer::serve(ctx, gate).await
    })
    .await
}
