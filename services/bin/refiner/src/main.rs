//! `trawl-refiner`: a crawl's kept HTML pages refined after ReScraper (an edit program from
//! trawl's extractor or a model, executed over the page's numbered lines), written to
//! `refined-<replica>-<pid>.jsonl` in the output directory.

use trawl_cluster::service::{self, Stage};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // A model engine that cannot start (no model file, no prompt) ends the service before
    // it connects: the crawl's pages would wait for a refiner that restarts forever.
    service::run_checked(
        Stage::Refiner,
        |s| trawl_refiner::check(&s.refine),
        |ctx, backends| async move {
            trawl_refiner::serve(ctx, backends.settings.refine.clone()).await
        },
    )
    .await
}
