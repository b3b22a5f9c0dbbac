//! `trawl-refiner`: a crawl's kept HTML pages refined after ReScraper (an edit program from
//! trawl's extractor or a model, executed over the page's numbered lines), written to
//! `refined-<replica>-<pid>.jsonl` in the output directory.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // A model engine that cannot start (no model file, no prompt) would restart forever
    // while the crawl's pages wait: the service does not start.
    let checked = trawl_core::settings::Settings::load(None)
        .map_err(|e| e.to_string())
        .and_then(|s| trawl_refiner::engine::check(&s.refine).map_err(|e| e.to_string()));
    if let Err(e) = checked {
        eprintln!("trawl-refiner: {e}");
        return std::process::ExitCode::FAILURE;
    }
    trawl_cluster::service::run("refiner", |ctx, backends| async move {
        trawl_refiner::serve(ctx, backends.settings.refine.clone()).await
    })
    .await
}
