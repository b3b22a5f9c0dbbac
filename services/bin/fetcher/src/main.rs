//! `trawl-fetcher`: claims ready hosts and fetches politely (robots.txt, delays, redirects
//! hop by hop), writing WARC files of its own under `TRAWL_OUT/warc`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    trawl_cluster::service::run("fetcher", |ctx, _| trawl_fetcher::serve(ctx)).await
}
