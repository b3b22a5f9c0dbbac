//! `trawl-fetcher`: claims ready hosts and fetches politely (robots.txt, delays, redirects
//! hop by hop), writing WARC files of its own under `TRAWL_OUT/warc`.

use trawl_cluster::service::{self, Stage};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    service::run(Stage::Fetcher, |ctx, backends| async move {
        let history = backends.history(&ctx.spec).await?;
        trawl_fetcher::serve(ctx, history.map(|h| h as _)).await
    })
    .await
}
