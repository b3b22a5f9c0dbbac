//! `trawl-indexer`: writes the crawl's page records (`TRAWL_OUT/pages-<host>-<pid>.jsonl`,
//! one file per replica) and counts them in the crawl's shared report counters.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use trawl_core::Doc;
use trawl_core::queue::Queue;
use trawl_core::state::State;
use trawl_indexer::JsonlSink;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    trawl_cluster::service::run("indexer", |cfg, client, _spec, state, stop, health| async move {
        let docs = cfg.queue::<Doc>(&client, "docs").await?;
        if cfg.index_uri.is_some() || cfg.model_dir.is_some() {
            tracing::warn!("TRAWL_INDEX_URI / TRAWL_MODEL_DIR are set, but this indexer writes JSON Lines only (the vector index is not built yet)");
        }
        std::fs::create_dir_all(&cfg.out_dir).map_err(|e| format!("{}: {e}", cfg.out_dir))?;
        let path = std::path::Path::new(&cfg.out_dir).join(format!(
            "pages-{}-{}.jsonl",
            std::env::var("HOSTNAME").unwrap_or_else(|_| "indexer".into()),
            std::process::id()
        ));
        let sink = Arc::new(std::sync::Mutex::new(
            JsonlSink::append(&path).map_err(|e| e.to_string())?,
        ));
        health.ready.store(true, Ordering::Relaxed);
        let r = trawl_indexer::run_worker(
            docs as Arc<dyn Queue<Doc>>,
            sink.clone(),
            state as Arc<dyn State>,
            stop,
        )
        .await
        .map_err(|e| e.to_string());
        sink.lock()
            .map_err(|_| "sink lock poisoned".to_string())?
            .flush()
            .map_err(|e| e.to_string())?;
        r
    })
    .await
}
