//! `trawl-extractor`: main content, Markdown, metadata and links from fetched pages; new
//! links back to the frontier; every page through the crawl's shared near-duplicate gate.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    trawl_cluster::service::run("extractor", |ctx, backends| async move {
        let gate = backends.dedup_gate(&ctx.spec).await?;
        trawl_extractor::serve(ctx, gate).await
    })
    .await
}
