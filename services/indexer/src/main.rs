//! `trawl-indexer`: writes the crawl's page records (`TRAWL_OUT/pages-<host>-<pid>.jsonl`,
//! one file per replica), counts them in the crawl's shared report counters, and, with
//! `TRAWL_INDEX_URI`, chunks, embeds and stores them in the LanceDB index there.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use trawl_core::Doc;
use trawl_core::queue::Queue;
use trawl_core::state::State;
use trawl_indexer::JsonlSink;

// Large tensors are allocated and freed on every forward pass: mimalloc keeps the pages,
// where glibc's malloc returns them to the kernel and faults them in again.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    trawl_index::alloc::keep_freed_pages();
    trawl_cluster::service::run(
        "indexer",
        |cfg, client, _spec, state, stop, health| async move {
            let docs = cfg.queue::<Doc>(&client, "docs").await?;
            std::fs::create_dir_all(&cfg.out_dir).map_err(|e| format!("{}: {e}", cfg.out_dir))?;
            let path = std::path::Path::new(&cfg.out_dir).join(format!(
                "pages-{}-{}.jsonl",
                std::env::var("HOSTNAME").unwrap_or_else(|_| "indexer".into()),
                std::process::id()
            ));
            let sink = Arc::new(std::sync::Mutex::new(
                JsonlSink::append(&path).map_err(|e| e.to_string())?,
            ));
            let docs = docs as Arc<dyn Queue<Doc>>;
            let state = state as Arc<dyn State>;
            let r = match &cfg.index_uri {
                Some(uri) => {
                    let mut opts = trawl_index::IndexOptions::new(uri.clone());
                    opts.embed = cfg.embed;
                    opts.model_dir = cfg.model_dir.as_ref().map(Into::into);
                    // A missing model stops the service here with the fetch instructions.
                    let indexer = trawl_index::Indexer::open(opts)
                        .await
                        .map_err(|e| e.to_string())?;
                    tracing::info!(
                        index = %uri,
                        embed = cfg.embed,
                        device = indexer.embedder().map_or("none", |e| e.device_name()),
                        "indexing into LanceDB"
                    );
                    health.ready.store(true, Ordering::Relaxed);
                    trawl_indexer::run_indexing_worker(
                        docs,
                        sink.clone(),
                        state,
                        indexer,
                        Duration::from_secs(60),
                        stop,
                    )
                    .await
                    .map(|s| tracing::info!(pages = s.pages, chunks = s.chunks, "index written"))
                    .map_err(|e| e.to_string())
                }
                None => {
                    health.ready.store(true, Ordering::Relaxed);
                    trawl_indexer::run_worker(docs, sink.clone(), state, None, stop)
                        .await
                        .map_err(|e| e.to_string())
                }
            };
            sink.lock()
                .map_err(|_| "sink lock poisoned".to_string())?
                .flush()
                .map_err(|e| e.to_string())?;
            r
        },
    )
    .await
}
