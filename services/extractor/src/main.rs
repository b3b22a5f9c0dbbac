//! `trawl-extractor`: main content, Markdown, metadata and links from fetched pages; new
//! links back to the frontier; every page through the crawl's shared near-duplicate gate.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use trawl_core::queue::Queue;
use trawl_core::{Discovered, Doc, Fetched};
use trawl_extractor::DedupStage;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    trawl_cluster::service::run(
        "extractor",
        |cfg, client, spec, _state, stop, health| async move {
            let fetched = cfg.queue::<Fetched>(&client, "fetched").await?;
            let docs = cfg.queue::<Doc>(&client, "docs").await?;
            let discovered = cfg.queue::<Discovered>(&client, "discovered").await?;
            let gate = match spec.dedup_distance {
                Some(d) => Some(Arc::new(
                    trawl_dedup::redis_gate::RedisGate::connect(&cfg.redis_url, &spec.crawl, d)
                        .await
                        .map_err(|e| e.to_string())?,
                ) as Arc<dyn trawl_dedup::Gate>),
                None => None,
            };
            health.ready.store(true, Ordering::Relaxed);
            let mut workers = tokio::task::JoinSet::new();
            for _ in 0..cfg.concurrency {
                let (i, o, d, s) = (
                    fetched.clone() as Arc<dyn Queue<Fetched>>,
                    docs.clone() as Arc<dyn Queue<Doc>>,
                    discovered.clone() as Arc<dyn Queue<Discovered>>,
                    stop.clone(),
                );
                let dedup = DedupStage {
                    gate: gate.clone(),
                    boilerplate: None,
                };
                workers.spawn(
                    async move { trawl_extractor::run_worker(i, o, d, dedup, None, s).await },
                );
            }
            trawl_cluster::service::join_workers(&mut workers).await
        },
    )
    .await
}
