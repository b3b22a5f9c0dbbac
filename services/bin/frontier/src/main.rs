//! `trawl-frontier`: admits discovered URLs into the shared host schedule and dispatches
//! fetch jobs as hosts become ready. Settings: `TRAWL_*` (see `trawl_core::settings`); the
//! crawl's own settings come from `trawl submit`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    trawl_cluster::service::run("frontier", |ctx, _| trawl_frontier::serve(ctx)).await
}
