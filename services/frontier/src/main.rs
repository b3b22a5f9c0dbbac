//! `trawl-frontier`: admits discovered URLs into the shared host schedule and dispatches
//! fetch jobs as hosts become ready. Configuration: `TRAWL_*` variables (see
//! `trawl_cluster::service::ServiceConfig`); the crawl's settings come from `trawl submit`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use trawl_core::queue::Queue;
use trawl_core::state::State;
use trawl_core::{Discovered, FetchJob};
use trawl_frontier::{Frontier, FrontierConfig, TrapConfig};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    trawl_cluster::service::run(
        "frontier",
        |cfg, client, spec, state, stop, health| async move {
            let discovered = cfg.queue::<Discovered>(&client, "discovered").await?;
            let fetch = cfg.queue::<FetchJob>(&client, "fetch").await?;
            let frontier = Arc::new(Frontier::new(
                FrontierConfig {
                    crawl: spec.crawl.clone(),
                    scope: spec.scope(),
                    max_depth: spec.max_depth,
                    max_pages: spec.max_pages,
                    max_pages_per_host: spec.max_pages_per_host,
                    traps: TrapConfig {
                        max_url_len: spec.max_url_length,
                        max_query_variants: spec.max_query_variants,
                        ..TrapConfig::default()
                    },
                    normalizer: spec.normalizer(),
                },
                state.clone() as Arc<dyn State>,
            ));
            health.ready.store(true, Ordering::Relaxed);
            let ingest = trawl_frontier::run_ingest(
                frontier,
                discovered as Arc<dyn Queue<Discovered>>,
                stop.clone(),
            );
            let dispatch = trawl_frontier::dispatch(
                state as Arc<dyn State>,
                fetch as Arc<dyn Queue<FetchJob>>,
                stop,
            );
            // One failing half ends the stage (the service starts it again): the other must
            // not keep it alive without its partner.
            tokio::try_join!(ingest, dispatch)
                .map(|_| ())
                .map_err(|e| e.to_string())
        },
    )
    .await
}
