//! The fetcher as one stage of a cluster crawl: its own WARC series, bodies sized to the
//! hop's message limit, `concurrency` workers.

use std::sync::Arc;

use trawl_core::history::History;
use trawl_core::pipeline::{Stage, StageContext, StageResult, Workers};

use crate::{Fetcher, FetcherConfig};

/// With `history` (a re-crawl's earlier crawl), requests are conditional and unchanged
/// responses are archived as revisits; with the spec's `due_only`, pages not due yet are
/// answered without a request.
pub async fn serve(ctx: StageContext, history: Option<Arc<dyn History>>) -> StageResult {
    let spec = &ctx.spec;
    let mut cfg = FetcherConfig::from_settings(&spec.crawl, &spec.settings);
    if let Some(max) = ctx.max_message_bytes {
        // A fetched page travels as one message, base64 in JSON: bodies are capped so that
        // it fits (a bigger page is kept cut, with the `body_too_large` error, as in an
        // embedded crawl). Raise the server's `max_payload` to carry bigger pages.
        let fits = (max * 3 / 4).saturating_sub(64 << 10);
        if fits < cfg.max_decoded_bytes || fits < cfg.max_body_bytes {
            tracing::info!("page bodies capped at {fits} bytes to fit a message of {max}");
        }
        cfg.cap_bodies(fits);
    }
    let warc = crate::warcout::replica_series(spec, &ctx.process, Stage::Fetcher.name(), "trawl")?;
    let mut fetcher = Fetcher::new(
        cfg,
        ctx.state.clone(),
        spec.scope(),
        spec.normalizer(),
        warc.as_ref().map(|w| w.handle()),
    )?;
    if let Some(h) = history {
        fetcher = fetcher.with_history(h).due_only(spec.due_only);
    }
    let fetcher = Arc::new(fetcher);
    ctx.set_ready();
    let mut workers = Workers::new();
    crate::worker::spawn(
        &mut workers,
        ctx.process.concurrency,
        &fetcher,
        &ctx.hops,
        &ctx.shutdown,
    );
    let result = workers.join().await;
    drop(fetcher);
    crate::warcout::finish_series(warc).await?;
    result
}
