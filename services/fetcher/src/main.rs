//! `trawl-fetcher`: claims ready hosts and fetches politely (robots.txt, delays, redirects
//! hop by hop), writing WARC files of its own under `TRAWL_OUT/warc`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use trawl_core::queue::Queue;
use trawl_core::state::State;
use trawl_core::{Discovered, FetchJob, Fetched};
use trawl_fetcher::warcout::{WarcConfig, WarcWriterTask};
use trawl_fetcher::{Fetcher, FetcherConfig};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    trawl_cluster::service::run(
        "fetcher",
        |cfg, client, spec, state, stop, health| async move {
            let jobs = cfg.queue::<FetchJob>(&client, "fetch").await?;
            let fetched = cfg.queue::<Fetched>(&client, "fetched").await?;
            let discovered = cfg.queue::<Discovered>(&client, "discovered").await?;
            let mut fcfg = FetcherConfig::new(spec.crawl.clone());
            if let Some(ua) = &spec.user_agent {
                fcfg.user_agent = ua.clone();
                fcfg.robots_agent = ua.split(['/', ' ']).next().unwrap_or("trawl").to_string();
            }
            fcfg.allow_private = spec.allow_private;
            fcfg.delay = Duration::from_millis(spec.delay_ms);
            fcfg.timeout = Duration::from_secs(spec.timeout_s.max(1));
            fcfg.connect_timeout = Duration::from_secs(spec.connect_timeout_s.max(1));
            // A fetched page travels as one NATS message, base64 in JSON: bodies are capped so
            // that it fits the server's max payload (a bigger page is kept cut, with the
            // `body_too_large` error, as in an embedded crawl). Raise the server's
            // `max_payload` to carry bigger pages.
            let fits = (client.server_info().max_payload * 3 / 4).saturating_sub(64 << 10);
            if fits < spec.max_decoded_bytes || fits < spec.max_body_bytes {
                tracing::info!(
                    "page bodies capped at {fits} bytes to fit NATS max_payload {}",
                    client.server_info().max_payload
                );
            }
            fcfg.max_body_bytes = spec.max_body_bytes.min(fits);
            fcfg.max_decoded_bytes = spec.max_decoded_bytes.min(fits);
            // One WARC series per replica: names carry the host name and process id.
            let warc = WarcWriterTask::start(WarcConfig {
                dir: std::path::Path::new(&cfg.out_dir).join("warc"),
                prefix: format!(
                    "trawl-{}-{}",
                    std::env::var("HOSTNAME").unwrap_or_else(|_| "fetcher".into()),
                    std::process::id()
                ),
                max_file_bytes: 1 << 30,
            })
            .map_err(|e| format!("WARC output: {e}"))?;
            let fetcher = Arc::new(
                Fetcher::new(
                    fcfg,
                    state as Arc<dyn State>,
                    spec.scope(),
                    spec.normalizer(),
                    Some(warc.handle()),
                )
                .map_err(|e| e.to_string())?,
            );
            health.ready.store(true, Ordering::Relaxed);
            let mut workers = tokio::task::JoinSet::new();
            for _ in 0..cfg.concurrency {
                let (f, j, o, d, s) = (
                    fetcher.clone(),
                    jobs.clone() as Arc<dyn Queue<FetchJob>>,
                    fetched.clone() as Arc<dyn Queue<Fetched>>,
                    discovered.clone() as Arc<dyn Queue<Discovered>>,
                    stop.clone(),
                );
                workers.spawn(async move { trawl_fetcher::run_worker(f, j, o, d, s).await });
            }
            let result = trawl_cluster::service::join_workers(&mut workers).await;
            drop(fetcher);
            // Flushing the WARC writer blocks: off the async threads.
            tokio::task::spawn_blocking(move || warc.finish())
                .await
                .map_err(|e| format!("WARC output: {e}"))?
                .map_err(|e| format!("WARC output: {e}"))?;
            result
        },
    )
    .await
}
