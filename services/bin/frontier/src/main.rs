//! `trawl-frontier`: admits discovered URLs into the shared host schedule and dispatches
//! fetch jobs as hosts become ready. Settings: `TRAWL_*` (see `trawl_core::settings`); the
//! crawl's own settings come from `trawl submit`.

use trawl_cluster::service::{self, Stage};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    service::run(Stage::Frontier, |ctx, backends| async move {
        let recheck = match backends.history(&ctx.spec).await? {
            Some(history) => Some(trawl_frontier::recheck::Recheck {
                crawl: ctx.spec.crawl.clone(),
                history,
                unlinked: backends.archive(&ctx.spec).await?,
                backlog: backends.backlog(),
                every: std::time::Duration::from_secs(2),
            }),
            None => None,
        };
        trawl_frontier::serve(ctx, recheck).await
    })
    .await
}
