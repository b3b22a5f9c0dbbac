//! `trawl-renderer`: pages the extractors find empty and shaped like a client-side app,
//! rendered in Chromium (every request they make through the fetcher's checks), then
//! extracted like any page and passed through the crawl's shared near-duplicate gate.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Without a browser the service would restart forever while marking itself live, and
    // extractors would send it pages: it does not start.
    let configured = std::env::var_os("TRAWL_CHROMIUM").map(std::path::PathBuf::from);
    if trawl_renderer::find_chromium(configured.as_deref()).is_none() {
        eprintln!(
            "trawl-renderer: no Chromium found: install chromium-headless-shell, or set \
             TRAWL_CHROMIUM (or CHROME) to its path"
        );
        return std::process::ExitCode::FAILURE;
    }
    trawl_cluster::service::run("renderer", |ctx, backends| async move {
        let gate = backends.dedup_gate(&ctx.spec).await?;
        trawl_renderer::serve(ctx, gate).await
    })
    .await
}
